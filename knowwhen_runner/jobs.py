"""What a job is, and the versioned identity that makes planning idempotent.

A job is one unit of work: one question to one model (open loop) or one episode (closed loop). Its id
is a hash of exactly what decides its output: the model (id, litellm string, output-affecting params),
the mode, the scenario (id and version) and the item. Runtime knobs (concurrency, timeouts, retries,
api_base, keys) are not part of it, so changing them never re-runs finished work.
Changing what goes into the id is a deliberate act: bump ``JOB_ID_VERSION``; golden tests pin ids.

The shapes stages hand each other about jobs are named here too: ``JobKind`` (``Job.kind``), ``Items``
(every item's data, by scenario and item), ``Cell`` (the unit a plan is made and re-planned in), ``EpisodeCost`` (an episode's cost split), ``job_cost`` and ``job_spend`` (a
finished job's cost at list price, and what it spent: cache hits cost nothing new); ``JobRow`` is a job as the queue inserts it, ``CellRows``
a batch of one cell's jobs by the columns they share, and ``JobRows`` jobs that come as either (a grid).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from typing import Any, Literal, NamedTuple, Protocol, TypedDict, get_args, runtime_checkable

from .jsonio import dumps

Mode = Literal["llm", "model", "gated", "shadow"]
"""Who decides at each decision point (see DESIGN: llm, model, gated, shadow)."""

JobKind = Literal["question", "episode"]
"""What a job runs: one open-loop ``question`` to one model, or one closed-loop ``episode``."""

JOB_KINDS: tuple[JobKind, ...] = get_args(JobKind)

Items = dict[tuple[str, str], dict[str, Any]]
"""Every item's data by (scenario id, item id): what the plan loads, the queue keeps and jobs look up."""

JobRow = tuple[str, str, str, str, str, str, str, int]
"""A job as the queue inserts it: (run, id, model id, mode, scenario id, item, payload JSON, draw)."""


class CellRows(NamedTuple):
    """A batch of one cell's jobs as the queue inserts them: the columns they share and, in id order,
    each one's id, item and draw (``draws`` None: every draw is 0)."""

    shared: tuple[str, str, str, str, str]  # run, model id, mode, scenario id, payload JSON
    ids: list[str]
    items: list[str]
    draws: list[int] | None

    def rows(self) -> list[JobRow]:
        """The batch as whole rows."""
        run, model_id, mode, scenario_id, payload = self.shared
        draws = self.draws if self.draws is not None else [0] * len(self.ids)
        return [
            (run, i, model_id, mode, scenario_id, item, payload, d)
            for i, item, d in zip(self.ids, self.items, draws, strict=True)
        ]


def job_rows(run: str, jobs: Iterable[Job], size: int) -> Iterator[list[JobRow]]:
    """``jobs`` as rows of ``run``, at most ``size`` a batch, each batch sorted by id (each index's pages are
    then visited in order); the jobs of a cell share a payload, whose JSON is made once a batch."""
    it = iter(jobs)
    while batch := sorted(islice(it, size), key=attrgetter("id")):
        payloads: dict[int, str] = {}
        rows: list[JobRow] = []
        for j in batch:
            payload = payloads.get(id(j.payload))
            if payload is None:
                payload = payloads[id(j.payload)] = dumps(j.payload).decode()
            rows.append((run, j.id, j.model_id, j.mode, j.scenario_id, j.item, payload, j.draw))
        yield rows


@runtime_checkable
class JobRows(Protocol):
    """Jobs that come as the queue's rows, batch by batch (a plan's grid: no ``Job`` is made for them)."""

    def row_batches(self, run: str, size: int) -> Iterator[list[JobRow] | CellRows]:
        """Every job as a row of ``run``, at most ``size`` a batch, each batch sorted by id."""
        ...


__all__ = [
    "JOB_ID_VERSION",
    "JOB_KINDS",
    "WHOLE_RUN",
    "Cell",
    "CellRows",
    "EpisodeCost",
    "Items",
    "Job",
    "JobKind",
    "JobRow",
    "JobRows",
    "id_halves",
    "item_ids",
    "job_cost",
    "job_id",
    "job_ids",
    "job_rows",
    "job_spend",
]

JOB_ID_VERSION = 1


_ITEM_SLOT = "\x00item\x00"


def id_halves(
    *,
    model_id: str,
    model: str,
    params: dict[str, Any],
    mode: str,
    scenario_id: str,
    scenario_version: str,
    extra: dict[str, Any] | None = None,
) -> tuple[bytes, bytes]:
    """The sorted JSON of a cell's identity, in two halves around its item's JSON (``item_ids``)."""
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
    return head, tail


def item_ids(head: bytes, tail: bytes, items: Iterable[str]) -> list[str]:
    """The ids of a cell's jobs from its ``id_halves``: sha256 of each item's JSON between them."""
    sha = hashlib.sha256
    return [sha(head + dumps(item) + tail).hexdigest()[:32] for item in items]


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
    head, tail = id_halves(
        model_id=model_id,
        model=model,
        params=params,
        mode=mode,
        scenario_id=scenario_id,
        scenario_version=scenario_version,
        extra=extra,
    )
    return item_ids(head, tail, items)


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


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of a grid; the queue's jobs in it are those of its scenario (and model and mode, when
    given: an open-loop cell). ``WHOLE_RUN`` stands for every job of a run."""

    scenario: str
    model_id: str | None = None
    mode: str | None = None


WHOLE_RUN = Cell("*")
"""Every job of the run (``*`` is no scenario id): a plan made whole sets aside whatever it does not hold."""


class EpisodeCost(TypedDict):
    """An episode's ``cost_usd``: what its decision-model calls and its agent LLM's calls cost (USD)."""

    decision: float
    llm: float


def _usd(cost: Any) -> float:
    if isinstance(cost, Mapping):
        return float(sum(v for v in cost.values() if isinstance(v, int | float)))
    return float(cost) if isinstance(cost, int | float) else 0.0


def job_cost(result: Mapping[str, Any] | None) -> float:
    """A finished job's total cost in USD, at the list price of its calls however they were answered: a
    question's ``cost_usd``, or the parts of an episode's ``EpisodeCost`` summed in their order (what is
    not a number counts as nothing). What its answers cost, not what the run spent on them (``job_spend``)."""
    return _usd((result or {}).get("cost_usd"))


def job_spend(result: Mapping[str, Any] | None) -> float:
    """What a finished job spent (USD): the price of the calls it made, none of those answered from the
    cache. A question's ``cost_usd`` unless it was a cache hit; an episode's ``spent_usd`` parts (an
    episode recorded before they were kept, or imported: its ``cost_usd``)."""
    result = result or {}
    if "spent_usd" in result:
        return _usd(result["spent_usd"])
    return 0.0 if result.get("cache_hit") else job_cost(result)
