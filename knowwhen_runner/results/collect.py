"""A run's queue results, grouped for the finaliser: answer rows per scenario and model, episode results
per closed-loop cell, and a tally of every model's jobs.

``Queue.results()`` gives one (job, status, result, error) per job; a job that failed for good becomes an
answer row with no answer (``answers.failed_row``), so it is scored wrong instead of vanishing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..dataset.answer_rows import AnswerRowDict, failed_row, upgrade_row
from ..jobs import Job
from ..queue import JobResult, JobStatus
from .episode_rows import EpisodeRow, failed_episode_row
from .manifest import JobTally

__all__ = ["EpisodeKey", "RunRecords", "collect_records"]

EpisodeKey = tuple[str, str, str, float | None]
"""(model whose manifest holds it, scenario, mode, τ)."""


@dataclass
class RunRecords:
    """A run's queue results grouped for the finaliser."""

    rows: dict[tuple[str, str], list[AnswerRowDict]] = field(default_factory=lambda: defaultdict(list))
    modes: dict[tuple[str, str], str] = field(default_factory=dict)
    episodes: dict[EpisodeKey, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    failed_episodes: Counter[EpisodeKey] = field(default_factory=Counter)
    failed_tasks: dict[EpisodeKey, list[tuple[str, int]]] = field(default_factory=lambda: defaultdict(list))
    failed_rows: list[EpisodeRow] = field(default_factory=list)
    """The episode-file rows of the episodes whose job failed for good."""
    tallies: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    failure_kinds: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def tally(self, model_id: str) -> JobTally:
        t = self.tallies.get(model_id, Counter())
        fields = ("total", "done", "failed", "pending", "running", "attempts", "retried", "retry_errors")
        return JobTally(
            **{name: t[name] for name in fields},
            failure_kinds=dict(sorted(self.failure_kinds.get(model_id, Counter()).items())),
        )


def _episode_owner(mode: str, result: Mapping[str, Any], fallback: str, known: set[str]) -> str:
    """Mode ``llm`` episodes belong to the LLM's manifest; every other mode to the decision model's."""
    decision, llm = result.get("decision_model"), result.get("llm")
    order = (llm, decision) if mode == "llm" else (decision, llm)
    return next((m for m in order if isinstance(m, str) and m in known), fallback)


def collect_records(
    results: Iterable[JobResult],
    known_models: set[str],
    failure_kinds: Mapping[str, str] | None = None,
    into: RunRecords | None = None,
) -> RunRecords:
    """Group ``Queue.results()``: answer rows per (scenario, model), episodes per cell, job tallies
    (added to ``into`` when given: results read a model at a time are grouped as if read at once)."""
    rec = RunRecords() if into is None else into
    for job, status, result, error in results:
        episode = job.kind == "episode"
        source = result if episode and result is not None else job.payload
        owner = _episode_owner(job.mode, source, job.model_id, known_models) if episode else job.model_id
        _count(rec, owner, job, status, result)
        kind = (failure_kinds or {}).get(job.id, "error")
        if status == "failed":
            rec.failure_kinds[owner][kind] += 1
        if episode:
            key = (owner, job.scenario_id, job.mode, _tau(source.get("tau")))
            if status == "done" and result is not None:
                rec.episodes[key].append({**result, "attempts": job.attempts})  # its episode row keeps them
            elif status == "failed":
                rec.failed_episodes[key] += 1
                rec.failed_tasks[key].append((job.item, int(job.payload.get("repeat") or 0)))
                rec.failed_rows.append(failed_episode_row(owner, job, error or "failed", kind))
            continue
        if job.kind != "question":
            continue
        rec.modes[(job.scenario_id, job.model_id)] = job.mode
        if status == "done" and result is not None:
            rec.rows[(job.scenario_id, job.model_id)].append(upgrade_row(result))
        elif status == "failed":
            row = failed_row(
                model_id=job.model_id,
                qhash=job.item,
                error=error or "failed",
                attempts=job.attempts,
                error_kind=kind,
            )
            rec.rows[(job.scenario_id, job.model_id)].append(row)
    return rec


def _count(rec: RunRecords, owner: str, job: Job, status: JobStatus, result: dict[str, Any] | None) -> None:
    t = rec.tallies[owner]
    t["total"] += 1
    t[status] += 1
    t["attempts"] += job.attempts
    t["retried"] += job.attempts > 1
    t["retry_errors"] += len((result or {}).get("retry_errors") or [])


def _tau(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
