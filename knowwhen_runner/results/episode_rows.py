"""Episode files: one ``episodes_<model>.jsonl.gz`` per episodes scenario, one line per episode.

Each line is an ``EpisodeRow`` with every step in order: the state the decision was made in (rebuilt by
replaying the recorded calls in a fresh DecisionGym environment; ``None`` when the task cannot be
rebuilt or the replay stops matching the record), who decided, the decision model's answer and
confidence (also in shadow mode, where it was never acted on), the LLM's pick, the call made, the tool's
result, and the episode's outcome. The model in the file name is the one whose manifest holds the cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..jobs import Items
from ..jsonio import write_jsonl

__all__ = ["EPISODE_ROW_SCHEMA_VERSION", "EpisodeRow", "EpisodeStep", "episode_row", "write_episode_files"]

EPISODE_ROW_SCHEMA_VERSION = 1


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
    arguments: Any = None
    observation: str | None = None
    """The tool's result."""
    text: str | None = None
    """What the agent wrote instead of a call, when it made none."""


class EpisodeRow(BaseModel):
    """One episode of a closed-loop cell, every step included."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
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
    cost_usd: dict[str, float]
    reply: str | None = None
    steps: list[EpisodeStep]


def _states(item: dict[str, Any] | None, trajectory: list[dict[str, Any]]) -> dict[int, str]:
    """The state before each step, rebuilt by replaying the recorded calls; stops at the first mismatch."""
    if not item or "suite" not in item or "seed" not in item:
        return {}
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


def episode_row(model: str, result: dict[str, Any], item: dict[str, Any] | None = None) -> EpisodeRow:
    """The file row of one recorded episode result (``episode._result``)."""
    trajectory = result.get("trajectory") or []
    calls = {int(t["step"]): t for t in trajectory}
    states = _states(item, trajectory)
    steps = []
    for d in result.get("decisions") or []:
        n = int(d["step"])
        call = calls.get(n, {})
        steps.append(
            EpisodeStep(
                step=n,
                state=states.get(n),
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
                arguments=call.get("arguments"),
                observation=call.get("observation"),
                text=call.get("text"),
            )
        )
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
        cost_usd={k: float(v or 0.0) for k, v in (result.get("cost_usd") or {}).items()},
        reply=result.get("reply"),
        steps=steps,
    )


def write_episode_files(
    output: Path,
    episodes: dict[tuple[str, str, str, float | None], list[dict[str, Any]]],
    items: Items,
) -> list[Path]:
    """Write ``<output>/<scenario>/episodes_<model>.jsonl.gz`` from the finaliser's grouped episodes."""
    grouped: dict[tuple[str, str], list[EpisodeRow]] = {}
    for (owner, scenario, _mode, _tau), results in episodes.items():
        for result in results:
            row = episode_row(
                owner, {**result, "scenario": scenario}, items.get((scenario, result["task_id"]))
            )
            grouped.setdefault((scenario, owner), []).append(row)
    written = []
    for (scenario, owner), rows in sorted(grouped.items()):
        rows.sort(key=lambda r: (r.mode, r.tau is not None, r.tau or 0.0, r.task_id))
        path = output / scenario / f"episodes_{owner}.jsonl.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(path, (r.model_dump(mode="json") for r in rows))
        written.append(path)
    return written
