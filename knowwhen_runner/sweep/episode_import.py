"""Importing exported or published episodes into a run as answered closed-loop jobs (no model calls).

An export holds every episode in ``episodes/<scenario>/episodes_<model>.jsonl.gz`` (``EpisodeRow``). For
each ``episodes`` scenario of the importing config with the same id, the planner's own episode jobs are
matched to rows by scenario, mode, decision model, agent LLM, task and repeat, and completed with the
recorded result each row gives back (``episode_result``), or failed for good with the row's ``error`` and
``error_kind`` (episode schema 4), claimed as many times as the row's ``attempts`` (``import_history``). Gated episodes whose τ is fitted wait for the
fit, as in ``run``: the fit set's shadow episodes are recorded first, τ is fitted from them
(``compute_fits``), and the gated jobs that fit releases are matched next; a gated row whose τ is not the
refitted one is reported, never recorded under a τ it was not run at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import SweepConfig
from ..exceptions import ScenarioError
from ..jobs import Job
from ..plan import Plan, plan
from ..queue import Queue
from ..results.episode_rows import EpisodeRow, episode_result, read_episode_file
from ..scenarios import load_scenario
from .fits import compute_fits
from .import_history import Recorded, record_history

__all__ = ["EpisodeImport", "published_episodes", "record_episodes"]

EpisodeKey = tuple[str, str, str, str, str, int]
"""(scenario, mode, decision model (the agent itself in mode llm), agent LLM, task, repeat)."""
_STAGES = 4  # each stage's fits may release gated jobs; two stages are all a config needs today


@dataclass
class EpisodeImport:
    """What an episodes import did: rows read and recorded per (scenario, model), and what was left out."""

    published: dict[str, dict[str, int]] = field(default_factory=dict)
    recorded: dict[str, dict[str, int]] = field(default_factory=dict)
    jobs_added: int = 0
    skipped: list[str] = field(default_factory=list)


def _row_key(row: EpisodeRow) -> EpisodeKey:
    return (row.scenario, row.mode, str(row.decision_model), str(row.llm), row.task_id, row.repeat)


def _job_key(job: Job) -> EpisodeKey:
    payload = job.payload
    repeat = int(payload.get("repeat") or 0)
    return (job.scenario_id, job.mode, job.model_id, str(payload.get("agent")), job.item, repeat)


def published_episodes(
    root: Path, config: SweepConfig, models: Collection[str] | None = None
) -> dict[EpisodeKey, EpisodeRow]:
    """Every episode of ``root/episodes/<scenario>/`` for the config's episodes scenarios, by its key
    (with ``models``, only the episodes whose cell those models' manifests hold)."""
    out: dict[EpisodeKey, EpisodeRow] = {}
    for spec in config.scenarios:
        folder = root / "episodes" / spec.id
        if spec.kind != "episodes" or not folder.is_dir():
            continue
        for path in sorted(folder.glob("episodes_*.jsonl*")):
            for line, row in read_episode_file(path):
                if models is not None and row.model not in models:
                    continue
                if row.scenario != spec.id:
                    raise ScenarioError(f"{path}:{line}: an episode of scenario {row.scenario!r} in {folder}")
                if _row_key(row) in out:
                    raise ScenarioError(
                        f"{path}:{line}: second episode {row.mode} {row.task_id} r{row.repeat}"
                    )
                out[_row_key(row)] = row
    return out


def _at_its_tau(job: Job, row: EpisodeRow) -> bool:
    """Whether the row was run at the job's τ (a gated job's; any other has none). A fit that reached no
    τ gives its gated jobs none, and their rows none."""
    tau = job.payload.get("tau")
    if job.mode != "gated":
        return True
    if row.tau is None or tau is None:
        return row.tau is None and tau is None
    return abs(float(row.tau) - float(tau)) <= 1e-12


def _recorded(job: Job, row: EpisodeRow) -> Recorded:
    """What the row says happened to the job: its episode, or (failed for good) its last error."""
    if row.error is not None:
        return Recorded(job.id, job.model_id, row.attempts, error=row.error, kind=row.error_kind)
    return Recorded(job.id, job.model_id, row.attempts, result=episode_result(row, job.payload.get("fit")))


async def _record_stage(
    queue: Queue,
    the_plan: Plan,
    rows: dict[EpisodeKey, EpisodeRow],
    found: EpisodeImport,
    used: set[EpisodeKey],
) -> None:
    """Record the rows of this stage's planned episode jobs, per scenario and model."""
    groups: dict[tuple[str, str], list[tuple[Job, EpisodeRow]]] = {}
    elsewhere: Counter[tuple[str, str, float | None, Any]] = Counter()
    for job in the_plan.jobs:
        key = _job_key(job)
        if job.kind != "episode" or key in used or key not in rows:
            continue
        used.add(key)
        if _at_its_tau(job, rows[key]):
            groups.setdefault((job.scenario_id, rows[key].model), []).append((job, rows[key]))
        else:
            elsewhere[(job.model_id, job.scenario_id, rows[key].tau, job.payload.get("tau"))] += 1
    found.skipped += [
        f"{model} x gated x {scenario}: {n} episodes run at τ {was}, not at the refitted τ {now}"
        for (model, scenario, was, now), n in sorted(elsewhere.items(), key=str)
    ]
    for (scenario, model), matched in sorted(groups.items()):
        found.jobs_added += await queue.enqueue([job for job, _row in matched], the_plan.items)
        history = [_recorded(job, row) for job, row in matched]
        done = await record_history(queue, history)
        for counts, n in ((found.published, len(matched)), (found.recorded, done)):
            per_model = counts.setdefault(scenario, {})
            per_model[model] = per_model.get(model, 0) + n


async def record_episodes(
    queue: Queue, config: SweepConfig, root: Path, models: Collection[str] | None = None
) -> EpisodeImport:
    """Record the episodes under ``root`` as the config's answered closed-loop jobs, stage by stage."""
    found = EpisodeImport()
    rows = published_episodes(root, config, models)
    if not rows:
        return found
    specs = [spec for spec in config.scenarios if spec.kind == "episodes"]
    sub = config.model_copy(update={"scenarios": specs})
    scenarios = {spec.id: load_scenario(spec) for spec in specs}
    fits: dict[str, Any] = {}
    used: set[EpisodeKey] = set()
    for _stage in range(_STAGES):
        await _record_stage(queue, plan(sub, scenarios, fits), rows, found, used)
        now = await compute_fits(sub, queue)
        if now == fits:
            break
        fits = now
    left = [key for key in rows if key not in used]
    if left:
        first = "/".join(map(str, left[0]))
        found.skipped.append(
            f"{len(left)} episodes that no planned job of the config matches (first: {first})"
        )
    return found
