"""What a job is, and the versioned identity that makes planning idempotent.

A job is one unit of work: one question to one model (open loop) or one episode (closed loop). Its id
is a hash of exactly what decides its output: the model (id, litellm string, output-affecting params),
the mode, the scenario (id and version) and the item. Runtime knobs (concurrency, timeouts, retries,
api_base, keys) are not part of it, so changing them never re-runs finished work.
Changing what goes into the id is a deliberate act: bump ``JOB_ID_VERSION``; golden tests pin ids.

The shapes stages hand each other about jobs are named here too: ``JobKind`` (``Job.kind``), ``Items``
(every item's data, by scenario and item), ``EpisodeCost`` (an episode's cost split) and ``job_cost`` (a
finished job's total cost, whichever its kind).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, get_args

from .jsonio import dumps

Mode = Literal["llm", "model", "gated", "shadow"]
"""Who decides at each decision point (see DESIGN: llm, model, gated, shadow)."""

JobKind = Literal["question", "episode"]
"""What a job runs: one open-loop ``question`` to one model, or one closed-loop ``episode``."""

JOB_KINDS: tuple[JobKind, ...] = get_args(JobKind)

Items = dict[tuple[str, str], dict[str, Any]]
"""Every item's data by (scenario id, item id): what the plan loads, the queue keeps and jobs look up."""

__all__ = [
    "JOB_ID_VERSION",
    "JOB_KINDS",
    "EpisodeCost",
    "Items",
    "Job",
    "JobKind",
    "job_cost",
    "job_id",
    "job_ids",
]

JOB_ID_VERSION = 1


_ITEM_SLOT = "\x00item\x00"


def job_ids(
    *,
    model_id: str,
    model: str,
    params: dict[str, Any],
    mode: str,
    scenario_id: str,
    scenario_version: str,
    items: Iterable[str],
    extra: dict[str, Any] | None = None,
) -> list[str]:
    """The ids of one cell's jobs: sha256 over a sorted JSON of each job's output-deciding inputs.

    The JSON of a cell differs between its jobs only in the item, so it is serialised once around a
    placeholder and each id hashes the two halves around the item's own JSON (the same bytes as
    serialising each identity whole; a golden test pins them).
    """
    ident: dict[str, Any] = {
        "v": JOB_ID_VERSION,
        "model": {"id": model_id, "model": model, "params": params},
        "mode": mode,
        "scenario": {"id": scenario_id, "version": scenario_version},
        "item": _ITEM_SLOT,
    }
    if extra:
        ident["extra"] = extra
    head, _, tail = dumps(ident, sort_keys=True).partition(dumps(_ITEM_SLOT))
    sha = hashlib.sha256
    return [sha(head + dumps(item) + tail).hexdigest()[:32] for item in items]


def job_id(
    *,
    model_id: str,
    model: str,
    params: dict[str, Any],
    mode: str,
    scenario_id: str,
    scenario_version: str,
    item: str,
    extra: dict[str, Any] | None = None,
) -> str:
    """The job's identity (32 hex chars); see ``job_ids``."""
    return job_ids(
        model_id=model_id,
        model=model,
        params=params,
        mode=mode,
        scenario_id=scenario_id,
        scenario_version=scenario_version,
        items=[item],
        extra=extra,
    )[0]


@dataclass(frozen=True, slots=True)
class Job:
    """One unit of work in the queue. ``payload`` says what to do; the item's data lives in the run."""

    id: str
    model_id: str
    mode: Mode
    scenario_id: str
    item: str
    payload: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0
    draw: int = 0  # claim order (lower first): a screened job's place in the drawn order of tasks, else 0

    @property
    def kind(self) -> JobKind | None:
        """What the job runs, from its payload's ``kind`` (the key the queue stores and its SQL reads);
        None for a payload without a known kind (such a job is neither a question nor an episode)."""
        kind = self.payload.get("kind")
        return kind if kind in JOB_KINDS else None


class EpisodeCost(TypedDict):
    """An episode's ``cost_usd``: what its decision-model calls and its agent LLM's calls cost (USD)."""

    decision: float
    llm: float


def job_cost(result: Mapping[str, Any] | None) -> float:
    """A finished job's total cost in USD: a question's ``cost_usd``, or the parts of an episode's
    ``EpisodeCost`` summed in their order (what is not a number counts as nothing)."""
    cost = (result or {}).get("cost_usd")
    if isinstance(cost, Mapping):
        return float(sum(v for v in cost.values() if isinstance(v, int | float)))
    return float(cost) if isinstance(cost, int | float) else 0.0
