"""A scenario of the sweep: a question set (L1/L2), a task set (L3) or an isolated source, and its gating τ."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from ..jobs import Mode
from .fields import _ID, _Frozen

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
#: Tool calls an episode may make when its scenario does not say.
DEFAULT_MAX_STEPS = 15
_EPISODE_ONLY = ("agent", "suite", "split", "n", "max_steps", "tau", "modes", "allow_eval", "repeats")
_ISOLATED_ONLY = ("exclude", "caps", "params", "param_values")
#: Sources of an isolated scenario: the BFCL v4 categories, and When2Call.
IsolatedSource = Literal[
    "simple_python",
    "multiple",
    "live_simple",
    "live_multiple",
    "irrelevance",
    "live_irrelevance",
    "when2call",
]


class TauFit(_Frozen):
    """A gating threshold fitted on the ``shadow`` episodes of another (fit) task set, per decision model."""

    fit: str = Field(pattern=_ID, description="Id of the episodes scenario whose shadow episodes fit τ.")
    target: Fraction | Literal["llm"] = Field(
        description="Accuracy the delegated choices must reach; 'llm': the agent LLM's own on those states."
    )
    min_support: int = Field(
        10, ge=1, description="Fewest delegated choices a fitted τ may rest on (fewer is noise, not a fit)."
    )
    risk: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description=(
            "Choose τ with a guarantee instead (Learn-then-Test on the shadow decisions): the error among "
            "delegated choices is at most this, with probability at least 1 - delta; no valid τ gates nothing."
        ),
    )
    delta: float = Field(0.1, gt=0.0, lt=1.0, description="The chance the guarantee of `risk` may fail.")


def _tau_kind(value: Any) -> str:
    return "fit" if isinstance(value, dict | TauFit) else "fixed"


# Tagged, so that a bad fit reference reports the fit's field rather than "not a number".
Tau = Annotated[
    Annotated[float, Field(ge=0.0), Tag("fixed")] | Annotated[TauFit, Tag("fit")], Discriminator(_tau_kind)
]


class ScenarioSpec(_Frozen):
    """A question set (L1/L2) or a task set (L3)."""

    id: str = Field(pattern=_ID, description="Short id used in files and tables.")
    kind: Literal["states", "episodes", "isolated"] = Field("states", description="What one job is.")
    path: Path | None = Field(
        None,
        description="Folder in the AgentDecisionBench layout, or (episodes) a task list as written by "
        "`knowwhen gym tasks`; episodes may give suite + split + n instead.",
    )
    variant: Literal["main", "nosurf", "nodist"] | None = Field(
        None, description="Shift re-rendering to read (questions_<variant>.jsonl[.gz]); rows carry it."
    )
    limit: int | None = Field(
        None,
        ge=1,
        description="Ask a seeded sample of about N items, spread over what the scenario holds: isolated, "
        "across sources and answer kinds; states, whole tasks (at most N questions, at least one task); "
        "episodes, N tasks across task kinds. Every reader scores it over what was asked and marks it a subset.",
    )
    seed: int | None = Field(
        None, ge=0, description="Seed of the limit's sample (default 0): the same seed, the same sample."
    )
    version: str = Field(
        "1", pattern=_ID, description="Bump to re-run every job of this scenario (items are content-hashed)."
    )
    agent: str | None = Field(
        None, description="Episodes: model id of the agent LLM; default: the config's only llm-kind model."
    )
    suite: str | None = Field(
        None, description="Episodes without a path: DecisionGym preset (common, shift, hard) or suite JSON."
    )
    split: Literal["train", "fit", "bench", "eval"] | None = Field(
        None, description="Episodes without a path: the seed range (eval needs allow_eval)."
    )
    n: int | None = Field(None, ge=1, description="Episodes: number of tasks (with a path: the first N).")
    start: int = Field(0, ge=0, description="Episodes without a path: first seed offset inside the split.")
    allow_eval: bool = Field(
        False, description="Episodes: allow the reserved evaluation seeds (or KNOWWHEN_EVAL_RUNS=1)."
    )
    max_steps: int | None = Field(
        None,
        ge=1,
        le=200,
        description=f"Episodes: tool calls allowed per episode (default {DEFAULT_MAX_STEPS}).",
    )
    tau: Tau | None = Field(
        None,
        description="Episodes, mode gated: a fixed threshold, or {fit: <scenario id>, target: <accuracy|llm>}.",
    )
    repeats: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Episodes: run each task this many times (default 1); repeat r > 0 sends seed r to "
        "the agent LLM (part of the job id and the cache key), so success gets a per-task rate and pass^k.",
    )
    modes: list[Mode] | None = Field(
        None,
        description="Episodes: modes run on this task set (default: the sweep's); [] for a fit set that "
        "only runs the shadow episodes other scenarios' fits need.",
    )
    exclude: Path | None = Field(
        None, description="Isolated: a file of item ids to leave out, one per line (the development items)."
    )
    caps: dict[IsolatedSource, Annotated[int, Field(ge=0)]] | None = Field(
        None,
        description="Isolated: most items per source, first in file order (default 200 per BFCL "
        "category, 1,000 When2Call; 0 leaves a source out).",
    )
    params: Literal["off", "required", "all"] | None = Field(
        None,
        description="Isolated: argument questions (dp tool_params), one per argument of each BFCL item's "
        "gold call: required (arguments BFCL's answer does not let be left out), all (those too, with an "
        "'omit' option), off (default: tool choice only).",
    )
    param_values: Literal["bfcl", "exact"] | None = Field(
        None,
        description="Isolated: how argument values are compared and written: bfcl (default; strings "
        "lower-cased without spaces and ,./-_*^, as BFCL's checker compares them) or exact (JSON text).",
    )

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> ScenarioSpec:
        if self.seed is not None and self.limit is None:
            raise ValueError("seed: only a scenario with a limit takes a seed (it draws the limit's sample)")
        if self.kind != "isolated":
            given = [name for name in _ISOLATED_ONLY if getattr(self, name) is not None]
            if given:
                raise ValueError(f"{given[0]}: only isolated scenarios take this field")
        if self.kind != "episodes":
            given = [name for name in _EPISODE_ONLY if getattr(self, name) not in (None, False)]
            if given:
                raise ValueError(f"{given[0]}: only episodes scenarios take this field")
            if self.path is None:
                raise ValueError(f"a {self.kind} scenario needs a path")
            return self
        if self.path is None and (self.split is None or self.n is None):
            raise ValueError("an episodes scenario needs a path (a task list) or split and n (and a suite)")
        if self.path is not None and (self.suite or self.split):
            raise ValueError("give an episodes scenario either a path or suite + split + n, not both")
        return self

    @property
    def steps(self) -> int:
        """The step budget of one episode."""
        return self.max_steps or DEFAULT_MAX_STEPS
