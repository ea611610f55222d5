"""The CXS manifest: one versioned JSON document per model that says how much of the decision work it
can take over (coverage) and how well that work then succeeds, per scenario and mode.

Pydantic models, frozen and strict about extra fields; their JSON Schemas are generated into
``schemas/`` (``python -m knowwhen_runner.schemas``) and a test fails when the two drift. Units: every
field ending in ``_pct`` is a percent (as the benchmark prints it); every other accuracy, coverage and
rate is a fraction in [0, 1]; money is USD, time is milliseconds unless the name says otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from ...exceptions import ScenarioError
from ...jsonio import read_document
from ..screen_record import ScreenRecord
from .deferral import ClosedLoopDeferral, Deferral
from .intervals import (
    ClosedLoopIntervals,
    IsolatedIntervals,
    ManifestPart,
    OpenLoopIntervals,
)
from .readout import ReadoutRecord
from .selective import (
    Calibration,
    CoverageCurve,
    Fit,
    Gate,
)

__all__ = [
    "MANIFEST_SCHEMA_VERSION",
    "ClosedLoopCell",
    "Cost",
    "CxsManifest",
    "IsolatedCell",
    "JobTally",
    "Latency",
    "ModelRef",
    "OpenLoopCell",
    "Operations",
    "RunProvenance",
    "ScenarioProvenance",
    "Scope",
    "Stratum",
    "Subset",
    "Tokens",
    "Validity",
    "load_manifest",
    "manifest_path",
]

MANIFEST_SCHEMA_VERSION: Literal[8] = 8
"""8: a scenario run with a ``limit`` says what its seeded sample is of (``scenarios[].subset``: of, asked,
seed, unit), and every cell of it is scored over what was asked; an open-loop cell of a decision model
gated over an LLM carries ``deferral``, its deferral scorecard (accuracy against the share of LLM calls
and cost, oracle and random baselines, APGR, CPT, AIQ, excess AURC, equal-mass ECE before and after Platt
scaling) and, when the gate sets a ``risk``, the τ chosen with a guarantee (``deferral.guarantee``), and
the achieved error of a τ chosen on another scenario (``deferral.transfers``; a gated closed-loop cell's
``deferral.transfer``); a model answering through a read-out says how it was read (``readout``: label
mass, cut-offs, position bias, agreement with another read-out of the same served model).
7: a plain ``top: k`` screen draws an order of questions (``screen.unit``) and says what settled it: its
leaders (``screen.leaders``), the level of each paired test (``screen.alpha_pair``) and how many leaders
were surely above the model (``screen.leaders_above``).
6: ``screen``, the run's screening of this model. 5: an L1 cell scores every tool choice (``tool_choice_pct``: dp tool_select, When2Call included) and the
argument questions (``argument_pct``: dp tool_params) beside pooled and BFCL tool choice, with their counts
and Wilson intervals; a job tally counts what an import restored (its rows' attempts and failures). 4: a cell with jobs that failed for good (a call that never got an answer: provider errors, not wrong
answers) shows no score: its accuracy, must-ask, strata, calibration, curve, fit, gate, success rate,
pass^k and intervals are null, ``failed`` counts the jobs, and ``card_accuracy_pct`` /
``card_success_rate`` keep the card's rule (a failed job scored wrong), what the benchmark's own scorer
would print. Rerunning with ``--retry-failed`` gives the score back. 3: cells carry confidence intervals (``intervals``), each naming its method, level, n, resamples and
seed; closed-loop cells keep each task's outcomes per repeat and pass^k. 2: every confidence
(calibration, curves, τ) is the probability of the chosen option, as the card defines it (answer rows
keep the server's: answer schema 2); open-loop cells say what set was scored (``scope``). Versions 1
and 2 still load (without intervals)."""


class ModelRef(ManifestPart):
    """Which model this is: its id in the run, its litellm model string, kind and output-affecting params."""

    id: str
    model: str
    kind: Literal["decision", "llm"]
    params: dict[str, Any] = Field(default_factory=dict)


class Subset(ManifestPart):
    """A scenario's ``limit``: the seeded sample asked, of what the scenario holds."""

    of: int = Field(description="Items the scenario holds (``unit``).")
    asked: int = Field(description="Items drawn and asked; every figure of the scenario is over these.")
    seed: int = Field(description="The sample's seed (the same seed, the same sample on any machine).")
    unit: str = Field(description="questions (states), items (isolated) or tasks (episodes).")
    tasks_of: int | None = Field(None, description="States: the question set's tasks.")
    tasks_asked: int | None = Field(None, description="States: the tasks drawn whole.")


class ScenarioProvenance(ManifestPart):
    """A scenario of the run and the sha256 of each of its files (read at finalise time)."""

    id: str
    kind: str
    variant: str | None = None
    version: str
    limit: int | None = None
    subset: Subset | None = Field(None, description="With a limit: the sample asked (version 8 on).")
    files: dict[str, str] = Field(default_factory=dict, description="File name -> sha256.")
    settings: dict[str, Any] = Field({}, description="Other config fields (episodes: suite, split, n, τ...).")


class RunProvenance(ManifestPart):
    """Where the numbers come from: the run, its config, the code versions and when it happened (UTC)."""

    name: str
    config_file: str | None = None
    config_sha256: str | None = None
    job_id_version: int | None = None
    created_by: str | None = Field(None, description="knowwhen_runner version that created the run.")
    packages: dict[str, str] = Field(description="Versions of the packages that finalised the run.")
    created: str | None = Field(None, description="When the run was first planned.")
    work_started: str | None = Field(None, description="When the first worker started.")
    work_ended: str | None = Field(None, description="Last heartbeat or stop of any worker.")
    finalized_at: str = Field(description="When this manifest was written (the only field a rerun changes).")


class JobTally(ManifestPart):
    """The model's jobs in the queue, and how hard they were to get done."""

    total: int
    done: int
    failed: int
    pending: int
    running: int
    attempts: int = Field(description="Claims of all jobs, summed.")
    retried: int = Field(description="Jobs that needed more than one attempt.")
    retry_errors: int = Field(description="Errors retried within an attempt (transient provider errors).")
    failure_kinds: dict[str, int] = Field(default_factory=dict, description="Failed jobs by error class.")


class Stratum(ManifestPart):
    accuracy_pct: float | None
    n_occurrences: int
    n_tasks: int


class Scope(ManifestPart):
    """What set an open-loop cell scored: the occurrences and tasks the run planned, out of the whole key.

    The benchmark's number is the whole set's (``subset`` false); a run that planned a subset (a
    ``limit``) is scored by the same per-task rule over the tasks and occurrences it planned.
    """

    subset: bool
    occurrences: int
    occurrences_total: int
    tasks: int
    tasks_total: int

    def describe(self) -> str:
        """E.g. "20 of 5,314 occurrences, 4 of 200 tasks"."""
        return (
            f"{self.occurrences:,} of {self.occurrences_total:,} occurrences, "
            f"{self.tasks:,} of {self.tasks_total:,} tasks"
        )


class Validity(ManifestPart):
    """Answer rows by outcome: valid, answered but unscorable (invalid), or failed for good."""

    n_rows: int
    valid_rate: float | None
    invalid_rate: float | None
    failed_rate: float | None
    n_unanswered: int = Field(description="Occurrences of the answer key with no answer row (scored wrong).")


class Cost(ManifestPart):
    total_usd: float | None
    per_1k_decisions_usd: float | None
    n_priced: int = Field(description="Rows with a known price; the others have no list price.")


class Latency(ManifestPart):
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    n: int


class Tokens(ManifestPart):
    input: int
    output: int


class Operations(ManifestPart):
    """What a set of decisions cost: calls, cache hits, money, latency of the model calls, tokens."""

    decisions: int
    cost: Cost
    latency: Latency
    tokens: Tokens
    cache_hits: int
    calls: int = Field(description="Decisions answered by a model call (not the cache, not failed).")
    batched: int = Field(0, description="Of the calls, those answered by a provider batch (Batch API).")


class OpenLoopCell(ManifestPart):
    """One scenario × mode of the open loop (L2 states): the benchmark's scores and what they cost."""

    scenario: str
    mode: str
    variant: str | None
    items: int = Field(description="Questions answered (answer rows, failed ones included).")
    tasks: int
    occurrences: int
    accuracy_pct: float | None = Field(
        description="Benchmark rule: per task, then mean over the tasks (of the planned set, see scope)."
    )
    scope: Scope | None = Field(None, description="The set scored (none in version 1 manifests: the whole).")
    must_ask_pct: float | None
    n_must_ask: int
    strata: dict[str, Stratum]
    validity: Validity
    calibration: Calibration | None = None
    curve: CoverageCurve | None = None
    fit: Fit | None = None
    gate: Gate | None = None
    deferral: Deferral | None = Field(
        None, description="The deferral scorecard over the gate's LLM (version 8)."
    )
    cost: Cost
    latency: Latency
    tokens: Tokens
    cache_hits: int
    calls: int = Field(description="Rows answered by a model call this run (not the cache).")
    batched: int = Field(0, description="Of the calls, rows answered by a provider batch (Batch API).")
    intervals: OpenLoopIntervals | None = Field(None, description="None in version 1 and 2 manifests.")
    failed: int = Field(
        0,
        description=(
            "Questions whose job failed for good (no answer was ever given). When above 0 the cell "
            "shows no score (version 4): a call that got no answer is not a wrong answer."
        ),
    )
    card_accuracy_pct: float | None = Field(
        None,
        description="When jobs failed: the card's accuracy with them scored wrong (its scorer's number).",
    )

    def failed_rows(self) -> int:
        """Questions whose job failed for good (no answer was ever given)."""
        if self.failed:
            return self.failed
        return round((self.validity.failed_rate or 0.0) * self.validity.n_rows)


class IsolatedCell(ManifestPart):
    """L1 isolated accuracy on one scenario (BFCL and When2Call items): pooled over every question, tool
    choice (all, and BFCL's alone) and arguments, in percent (null where the scenario has none)."""

    scenario: str
    mode: str
    items: int
    pooled_pct: float
    bfcl_tool_choice_pct: float | None
    n_bfcl_tool_choice: int
    tool_choice_pct: float | None = Field(None, description="Every tool-choice question (dp tool_select).")
    n_tool_choice: int = 0
    argument_pct: float | None = Field(None, description="The argument questions (dp tool_params).")
    n_argument: int = 0
    intervals: IsolatedIntervals | None = Field(None, description="None in version 1 and 2 manifests.")


class ClosedLoopCell(ManifestPart):
    """One scenario × mode × τ of the closed loop (L3 episodes).

    With episodes whose job failed for good (``failed``), ``success_rate``, pass^k and the intervals are
    null (version 4) and ``card_success_rate`` counts those episodes unsuccessful, as the card would.
    ``coverage`` and ``model_accuracy`` are pooled over decisions: the share the model took, and how many
    of those had a known right answer and were right. ``shadow_accuracy`` is the model's recorded answer
    on the decisions the LLM took (every decision in mode ``shadow``), ``llm_accuracy`` the LLM's own there.
    """

    scenario: str
    mode: str
    tau: float | None
    episodes: int
    failed: int
    success_rate: float | None
    coverage: float | None
    model_accuracy: float | None
    model_steps: int
    shadow_accuracy: float | None = None
    llm_accuracy: float | None = None
    steps_mean: float | None
    budget_exhausted: int
    decision_calls: int
    llm_calls: int
    llm_calls_saved: int
    fallbacks: int
    cost_total_usd: float
    cost_per_episode_usd: float | None
    cost_split_usd: dict[str, float]
    latency: Latency
    cache_hits: int
    fit: dict[str, Any] | None = None
    repeats: int = Field(1, description="Most episodes of one task in the cell (a config's repeats).")
    outcomes: dict[str, list[bool]] = Field(
        default_factory=dict,
        description="Task -> success of each of its episodes in repeat order; a failed job is False.",
    )
    per_task_success: dict[str, float] = Field(
        default_factory=dict, description="Task -> share of its repeats that succeeded (when repeats > 1)."
    )
    pass_hat_k: dict[str, float] = Field(
        default_factory=dict, description="k -> pass^k, for k = 1 .. repeats (when repeats > 1)."
    )
    intervals: ClosedLoopIntervals | None = Field(None, description="None in version 1 and 2 manifests.")
    card_success_rate: float | None = Field(
        None, description="When jobs failed: the success rate with their episodes counted unsuccessful."
    )
    deferral: ClosedLoopDeferral | None = Field(
        None,
        description="A decision model's cell: calibration of its decision points, the shadow cell's "
        "scorecards (decision points, episodes), a gated τ's transfer (version 8).",
    )


class CxsManifest(ManifestPart):
    """Coverage × success of one model over a whole run."""

    schema_version: Literal[1, 2, 3, 4, 5, 6, 7, 8] = MANIFEST_SCHEMA_VERSION
    model: ModelRef
    run: RunProvenance
    scenarios: list[ScenarioProvenance]
    jobs: JobTally
    totals: Operations = Field(description="Every open-loop and isolated decision of the model, pooled.")
    open_loop: list[OpenLoopCell] = Field(default_factory=list)
    isolated: list[IsolatedCell] = Field(default_factory=list)
    closed_loop: list[ClosedLoopCell] = Field(default_factory=list)
    screen: ScreenRecord | None = Field(None, description="The run's screen, if any (none before version 5).")
    readout: ReadoutRecord | None = Field(
        None, description="A model answering through a read-out: its answers' diagnostics (version 8)."
    )

    def cell(self, scenario: str, mode: str | None = None) -> OpenLoopCell | None:
        """The open-loop cell of ``scenario`` (and ``mode``, when given), if the model has one."""
        return next((c for c in self.open_loop if c.scenario == scenario and mode in (None, c.mode)), None)


def manifest_path(output: Path, model_id: str) -> Path:
    """Where a run writes the manifest of ``model_id``."""
    return Path(output) / "manifests" / f"{model_id}.cxs.json"


def load_manifest(path: Path) -> CxsManifest:
    """Read and validate one manifest file; a file that is not a valid manifest is a ``ScenarioError``."""
    try:
        return CxsManifest.model_validate_json(read_document(Path(path)))
    except (OSError, ValidationError) as exc:
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        raise ScenarioError(f"{path}: not a readable CXS manifest ({first})") from None
