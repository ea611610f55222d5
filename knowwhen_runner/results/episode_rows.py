"""Episode files: one ``episodes_<model>.jsonl.gz`` per episodes scenario, one line per episode.

Each line is an ``EpisodeRow`` with every step in order: the state the decision was made in (rebuilt by
replaying the recorded calls in a fresh DecisionGym environment; ``None`` when the task cannot be
rebuilt or the replay stops matching the record), who decided, the decision model's answer and
confidence (also in shadow mode, where it was never acted on), the LLM's pick, the call made, the tool's
result, and the episode's outcome. The model in the file name is the one whose manifest holds the cell.

One schema whatever the values, so Hugging Face ``datasets`` types the files from the card's declared
features: a call's free-form arguments are JSON text, costs and latencies are ``{decision, llm}``. A row
keeps everything the finaliser reads of an episode, so ``episode_result`` gives back the recorded result
(``knowwhen import`` of an export finalises into the same closed-loop cells).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from ..exceptions import ScenarioError
from ..jobs import Items, Job
from ..jsonio import dumps, iter_jsonl, loads, write_jsonl

__all__ = [
    "EPISODE_ROW_SCHEMA_VERSION",
    "EpisodeRow",
    "EpisodeSpend",
    "EpisodeStep",
    "episode_result",
    "episode_row",
    "failed_episode_row",
    "read_episode_file",
    "read_episode_row",
    "write_episode_files",
]

EPISODE_ROW_SCHEMA_VERSION = 4
"""4: ``error`` and ``error_kind``, set on the row of an episode whose job failed for good (rows of 1 to 3
hold finished episodes only). 3: ``attempts``, the claims the episode's job took (an import claims it as often; rows of 1 and 2 read
with 1). 2: arguments as JSON text, costs and latencies as ``{decision, llm}``, repeat, seed and call counts."""


class EpisodeStep(BaseModel):
    """One decision point of an episode and what followed it."""

    model_config = ConfigDict(extra="forbid")

    step: int
    state: str | None = None
    """The state before the decision, as the decision model read it; None when it could not be rebuilt."""
    decided_by: str
    """``model`` or ``llm``: whose pick was acted on."""
    stratum: str | None = None
    acceptable: list[str]
    """The answer key: tools that are right at this state."""
    model_choice: str | None = None
    """The decision model's answer (recorded in every mode but ``llm``, acted on only when it decided)."""
    model_confidence: float | None = None
    model_correct: bool | None = None
    llm_choice: str | None = None
    """The LLM's own pick (None when the decision model decided: the LLM then only wrote arguments)."""
    llm_correct: bool | None = None
    fallback: bool = False
    error: str | None = None
    tool: str | None = None
    """The tool called."""
    arguments: str | None = None
    """The call's arguments as JSON text (an object, or the string the LLM wrote when it was no object)."""
    observation: str | None = None
    """The tool's result."""
    text: str | None = None
    """What the agent wrote instead of a call, when it made none."""


class EpisodeSpend(BaseModel):
    """What an episode's decision-model calls and its agent LLM's calls cost (USD) or took (ms)."""

    model_config = ConfigDict(extra="forbid")

    decision: float = 0.0
    llm: float = 0.0


class EpisodeRow(BaseModel):
    """One episode of a closed-loop cell, every step included."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[4] = 4
    scenario: str
    task_id: str
    mode: str
    model: str
    """The model whose manifest holds the episode (the decision model, or the LLM in mode ``llm``)."""
    decision_model: str | None
    llm: str | None
    tau: float | None
    success: bool
    budget_exhausted: bool
    max_steps: int | None = None
    coverage: float
    repeat: int = 0
    """The repeat of this task in its cell (0 for a scenario without repeats)."""
    seed: int | None = None
    """The seed the agent LLM was sent (repeats > 0), None for none."""
    llm_calls: int = 0
    decision_calls: int = 0
    cache_hits: int = 0
    extra_tool_calls: int = 0
    """Tool calls the LLM made beside the first of a turn (never acted on)."""
    attempts: int = 1
    """Claims the episode's job took: 1 when its first attempt finished it (schema 3)."""
    error: str | None = None
    """The last error of an episode whose job failed for good (then it has no steps); None when it ran to
    the end (schema 4)."""
    error_kind: str | None = None
    """What kind of failure ``error`` was (``fatal``, ``error``, ``budget``, …), as the run recorded it."""
    cost_usd: EpisodeSpend
    latency_ms: EpisodeSpend
    reply: str | None = None
    steps: list[EpisodeStep]


def _states(item: dict[str, Any] | None, trajectory: list[dict[str, Any]]) -> dict[int, str]:
    """The state before each step, rebuilt by replaying the recorded calls; stops at the first mismatch."""
    if not item or "suite" not in item or "seed" not in item:
        return {}
    # start-up: the gym, only when an episode's states are rebuilt
    from ..gym import GymEnv, Suite, make_task, render_state

    try:
        task = make_task(Suite.from_json(str(item["suite"])), int(item["seed"]))
    except (ValueError, KeyError, TypeError):
        return {}
    env, out = GymEnv(task), {}
    for entry in trajectory:
        out[int(entry["step"])] = render_state(task, env.history)
        if entry.get("tool") is None:
            continue
        if env.execute(entry["tool"], entry.get("arguments")) != entry.get("observation"):
            break  # the record is the truth; a state we cannot reproduce is left out
    return out


def _json_text(value: Any) -> str | None:
    return None if value is None else dumps(value).decode()


def _spend(value: Any) -> EpisodeSpend:
    parts = value if isinstance(value, Mapping) else {}
    return EpisodeSpend(**{k: float(parts.get(k) or 0.0) for k in ("decision", "llm")})


def _step(d: Mapping[str, Any], call: Mapping[str, Any], state: str | None) -> EpisodeStep:
    return EpisodeStep(
        step=int(d["step"]),
        state=state,
        decided_by=d.get("decided_by", "llm"),
        stratum=d.get("stratum"),
        acceptable=list(d.get("acceptable") or []),
        model_choice=d.get("model_choice"),
        model_confidence=d.get("model_confidence"),
        model_correct=d.get("model_correct"),
        llm_choice=d.get("llm_choice"),
        llm_correct=d.get("llm_correct"),
        fallback=bool(d.get("fallback")),
        error=d.get("error"),
        tool=d.get("tool", call.get("tool")),
        arguments=_json_text(call.get("arguments")),
        observation=call.get("observation"),
        text=call.get("text"),
    )


def episode_row(model: str, result: dict[str, Any], item: dict[str, Any] | None = None) -> EpisodeRow:
    """The file row of one recorded episode result (``episode._result``)."""
    trajectory = result.get("trajectory") or []
    calls = {int(t["step"]): t for t in trajectory}
    states = _states(item, trajectory)
    steps = [
        _step(d, calls.get(int(d["step"]), {}), states.get(int(d["step"])))
        for d in result.get("decisions") or []
    ]
    extra = result.get("extra_tool_calls")
    return EpisodeRow(
        scenario=str(result.get("scenario") or ""),
        task_id=str(result.get("task_id")),
        mode=str(result.get("mode")),
        model=model,
        decision_model=result.get("decision_model"),
        llm=result.get("llm"),
        tau=result.get("tau"),
        success=bool(result.get("success")),
        budget_exhausted=bool(result.get("budget_exhausted")),
        max_steps=result.get("max_steps"),
        coverage=float(result.get("coverage") or 0.0),
        repeat=int(result.get("repeat") or 0),
        seed=result.get("seed"),
        llm_calls=int(result.get("llm_calls") or 0),
        decision_calls=int(result.get("decision_calls") or 0),
        cache_hits=int(result.get("cache_hits") or 0),
        extra_tool_calls=extra if isinstance(extra, int) else len(extra or []),
        attempts=int(result.get("attempts") or 1),
        cost_usd=_spend(result.get("cost_usd")),
        latency_ms=_spend(result.get("latency_ms")),
        reply=result.get("reply"),
        steps=steps,
    )


def failed_episode_row(model: str, job: Job, error: str, kind: str) -> EpisodeRow:
    """The file row of an episode whose job failed for good: what its job was asked (scenario, mode,
    models, τ, task, repeat), the attempts it took and its last error; no steps, not successful."""
    payload = job.payload
    seed = payload.get("seed")
    return EpisodeRow(
        scenario=job.scenario_id,
        task_id=job.item,
        mode=job.mode,
        model=model,
        decision_model=job.model_id,  # as a finished episode records it (in mode llm: the agent)
        llm=payload.get("agent"),
        tau=payload.get("tau"),
        success=False,
        budget_exhausted=False,
        max_steps=payload.get("max_steps"),
        coverage=0.0,
        repeat=int(payload.get("repeat") or 0),
        seed=seed if isinstance(seed, int) else None,
        attempts=max(1, job.attempts),
        error=error,
        error_kind=kind,
        cost_usd=EpisodeSpend(),
        latency_ms=EpisodeSpend(),
        steps=[],
    )


def read_episode_row(row: Mapping[str, Any]) -> EpisodeRow:
    """A row of an episodes file of any schema (1: arguments as they were, costs keyed freely; 1 and 2: no
    attempts, read as one; 1 to 3: no error, every episode finished)."""
    if row.get("schema_version") == 1:
        steps = [{**s, "arguments": _json_text(s.get("arguments"))} for s in row.get("steps") or []]
        row = {
            **row,
            "steps": steps,
            "cost_usd": _spend(row.get("cost_usd")),
            "latency_ms": _spend(row.get("latency_ms")),
        }
    if row.get("schema_version") in (1, 2, 3):
        row = {**row, "schema_version": EPISODE_ROW_SCHEMA_VERSION}
    return EpisodeRow.model_validate(row)


def read_episode_file(path: Path) -> Iterator[tuple[int, EpisodeRow]]:
    """(line, row) of an episodes file of any schema; a line that is no episode row is named."""
    for line, data in iter_jsonl(path):
        try:
            yield line, read_episode_row(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "row"
            raise ScenarioError(f"{path}:{line}: not an episode row ({where}: {first['msg']})") from None


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def episode_result(row: EpisodeRow, fit: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recorded result of an episode file's row, as the closed loop records it (``episode._result``):
    every field the finaliser and the τ fit read. ``fit`` is the gated job's fit record (its payload's)."""
    decisions = [
        {
            **s.model_dump(include={"step", "decided_by", "tool", "model_choice", "model_confidence"}),
            "model_reported_confidence": None,
            **s.model_dump(include={"llm_choice", "acceptable", "model_correct", "llm_correct"}),
            **s.model_dump(include={"fallback", "error", "stratum"}),
        }
        for s in row.steps
    ]
    by_model = [d for d in decisions if d["decided_by"] == "model"]
    by_llm = [d for d in decisions if d["decided_by"] == "llm"]
    trajectory = [
        {"step": s.step, "tool": s.tool, "arguments": None if s.arguments is None else loads(s.arguments),
         "observation": s.observation, **({"text": s.text} if s.tool is None else {})}
        for s in row.steps
    ]  # fmt: skip
    return {
        "kind": "episode",
        **row.model_dump(include={"scenario", "task_id", "mode", "decision_model", "llm", "tau", "success"}),
        "steps": len(decisions),
        "max_steps": row.max_steps,
        "budget_exhausted": row.budget_exhausted,
        "decisions": decisions,
        "coverage": row.coverage,
        "model_accuracy": _share([bool(d["model_correct"]) for d in by_model]),
        "llm_accuracy": _share([bool(d["llm_correct"]) for d in by_llm]),
        "llm_calls": row.llm_calls,
        "llm_calls_saved": len(by_model),
        "decision_calls": row.decision_calls,
        "fallbacks": sum(d["fallback"] for d in decisions),
        "cost_usd": row.cost_usd.model_dump(),
        "latency_ms": row.latency_ms.model_dump(),
        "cache_hits": row.cache_hits,
        "extra_tool_calls": row.extra_tool_calls,
        "extra_calls": [],
        "fit": fit,
        "repeat": row.repeat,
        "seed": row.seed,
        "trajectory": trajectory,
        "reply": row.reply,
    }


def write_episode_files(
    output: Path,
    episodes: dict[tuple[str, str, str, float | None], list[dict[str, Any]]],
    items: Items,
    failed: Iterable[EpisodeRow] = (),
) -> list[Path]:
    """Write ``<output>/<scenario>/episodes_<model>.jsonl.gz`` from the finaliser's grouped episodes and the
    rows of the episodes whose job failed for good (``failed_episode_row``)."""
    grouped: dict[tuple[str, str], list[EpisodeRow]] = {}
    for row in failed:
        grouped.setdefault((row.scenario, row.model), []).append(row)
    for (owner, scenario, _mode, _tau), results in episodes.items():
        for result in results:
            row = episode_row(
                owner, {**result, "scenario": scenario}, items.get((scenario, result["task_id"]))
            )
            grouped.setdefault((scenario, owner), []).append(row)
    written = []
    for (scenario, owner), rows in sorted(grouped.items()):
        rows.sort(key=lambda r: (r.mode, r.tau is not None, r.tau or 0.0, r.task_id, r.repeat))
        path = output / scenario / f"episodes_{owner}.jsonl.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(path, (r.model_dump(mode="json") for r in rows))
        written.append(path)
    return written
