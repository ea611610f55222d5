"""Importing AgentDecisionBench's published answers into a run, as if its models had answered (no calls).

``knowwhen import DATASET_ROOT --config CONFIG`` reads ``common_states/answers_*``, ``shift/answers_*``
(by ``variant``) and ``isolated/answers.jsonl.gz``, enqueues the jobs the planner would produce for each
model and item, and completes them with the published rows; ``knowwhen finalize`` then builds manifests
and tables for the published models as for any run, and ``knowwhen compare`` sets a new model beside them.

A ``states`` scenario takes the answers of the dataset folder with its path's name (a config pointing
at ``<dataset>/shift`` reads ``<dataset>/shift/answers_*``), for the questions it holds; an ``isolated``
scenario takes every published L1 row (argument questions included, so pooled accuracy is the published
one). An ``episodes`` scenario takes the episodes of ``episodes/<its id>/`` of an export
(``episode_import``: answered closed-loop jobs, gated ones once τ is refitted from the imported shadow
episodes). A published model missing from the config joins it as ``model: imported/<id>`` when the import creates the run; an existing run keeps its
stored config, and such models are reported as skipped. Completion never overwrites a recorded result.
Each job is recorded as its row says it happened (``import_history``): claimed once per attempt, then
done, or failed for good with its error and kind, so the manifests' job tallies come back too.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml

from ..config import ModelSpec, ScenarioSpec, SweepConfig, load_config
from ..dataset.answer_rows import record_row
from ..dataset.files import find_answer_files, iter_answer_rows, iter_isolated_rows, read_models
from ..exceptions import ConfigError, ScenarioError
from ..jobs import Job
from ..jsonio import find_jsonl
from ..plan import open_loop_mode, plan
from ..queue import Queue, open_queue
from ..scenarios import Scenario, load_scenario
from ..stored import config_from_run, run_meta, stored_config, with_db
from .guards import RUN_MARK, claim_output_folder, refuse_foreign_folder
from .import_history import Recorded, attempts_of, record_history

__all__ = ["IMPORTED_PREFIX", "ImportSummary", "import_dataset", "published_rows"]

IMPORTED_PREFIX = "imported/"
"""litellm-style model string of a published model that is not in the config (never called)."""

Published = dict[str, dict[str, dict[str, Any]]]
"""``{model id: {item id: published row}}`` of one scenario."""


@dataclass
class ImportSummary:
    """What an import did."""

    run: str
    output: Path
    published: dict[str, dict[str, int]] = field(default_factory=dict)  # scenario -> model -> rows
    recorded: dict[str, dict[str, int]] = field(default_factory=dict)  # of those, recorded now
    added_models: list[str] = field(default_factory=list)  # joined the new run as imported/<id>
    jobs_added: int = 0
    skipped: list[str] = field(default_factory=list)
    episode_scenarios: list[str] = field(default_factory=list)  # of ``published``: episodes, not answers


# --- reading the published files -------------------------------------------------------------------------


def published_rows(root: Path, spec: ScenarioSpec, models: Collection[str] | None = None) -> Published:
    """The published answers for one config scenario (empty when the dataset has none for it).

    The files are read by ``score``'s own readers with the same checks (``iter_answer_rows`` against the
    folder's questions, ``iter_isolated_rows``), so an import refuses exactly the rows ``score`` refuses.
    """
    out: Published = {}
    if spec.kind == "isolated":
        path = find_jsonl(root / "isolated", "answers")
        for _line, row in iter_isolated_rows(path, models=models) if path else ():
            out.setdefault(row["model"], {})[row["id"]] = row
        return out
    if spec.kind != "states" or spec.path is None:
        return {}
    folder = root / spec.path.name
    paths = find_answer_files(folder) if folder.is_dir() else []
    if not paths:
        return {}
    variant = spec.variant or "main"
    from ..dataset.score_folder import load_variant  # start-up: score's reader loads only for an import

    questions = load_variant(folder, variant).questions
    for _path, _line, model, _var, row in iter_answer_rows(paths, questions, models=models, variant=variant):
        out.setdefault(model, {})[row["qhash"]] = row
    rows = out
    held = load_scenario(spec).items  # only the questions the scenario asks (limit, variant)
    return {
        m: {q: record_row(r, held[q]["options"]) for q, r in answers.items() if q in held}
        for m, answers in rows.items()
    }


def _model_kinds(root: Path) -> dict[str, str]:
    """Published model id -> config kind (``llm`` for the LLMs, ``decision`` for everything else)."""
    path = find_jsonl(root, "models")
    if path is None:
        return {}
    return {m.id: "llm" if m.kind.strip().lower() == "llm" else "decision" for m in read_models(path)}


# --- result rows ---------------------------------------------------------------------------------------


def _state_result(model_id: str, qhash: str, row: dict[str, Any]) -> dict[str, Any]:
    """A published L2 answer (already in the recorded form, ``record_row``) under the config's model id.

    What the row says of its calls (attempts, retries, cache hits, tokens) is kept, so a run exported
    and imported again finalises into the same tables.
    """
    return {**row, "model": model_id, "qhash": qhash, "valid": bool(row.get("valid"))}


def _isolated_result(model_id: str, item: str, row: dict[str, Any]) -> dict[str, Any]:
    """A published L1 row, kept whole, with the answer-row fields the manifests read; what an exported row
    says of its calls (requests, cache hit, retries) is kept, a published row that says nothing made one."""
    answered = row.get("pred") is not None and not row.get("error")
    return {
        **row,
        "model": model_id,
        "qhash": item,
        "answer": row.get("pred"),
        "confidence": row.get("conf"),
        "probabilities": None,
        "valid": answered,
        "requests": row.get("requests", 1),
        "cache_hit": bool(row.get("cache_hit")),
        "retry_errors": list(row.get("retry_errors") or []),
    }


def _failed_for_good(row: dict[str, Any]) -> bool:
    """A row of a job that failed for good: it names its error's kind (answer schema 4, the L1 files of an
    export), or, in an older row, it is unanswered with no request on record."""
    if row.get("error_kind"):
        return True
    return "requests" in row and row["requests"] is None and not row.get("valid")


def _recorded(spec: ScenarioSpec, model_id: str, job: Job, row: dict[str, Any]) -> Recorded:
    """What the row says happened to the job: its attempts, then its result or its error for good."""
    attempts = attempts_of(row)
    if _failed_for_good(row):
        kind = row.get("error_kind")
        return Recorded(job.id, model_id, attempts, error=str(row.get("error") or "failed"), kind=kind)
    result = (_isolated_result if spec.kind == "isolated" else _state_result)(model_id, job.item, row)
    return Recorded(job.id, model_id, attempts, result=result)


def _jobs(config: SweepConfig, spec: ScenarioSpec, model: ModelSpec, items: Collection[str]) -> list[Job]:
    """The planner's own jobs for these items (ids as ``plan`` gives them, in the model's open-loop mode)."""
    sub = config.model_copy(update={"models": [model], "modes": [open_loop_mode(model)], "scenarios": [spec]})
    scenario = Scenario(spec.id, spec.kind, spec.version, {item: {} for item in sorted(items)})
    return plan(sub, {spec.id: scenario}).jobs


# --- the run ---------------------------------------------------------------------------------------------


def _with_models(text: str, extra: dict[str, str]) -> str:
    """The config text with ``imported/<id>`` models appended (the whole file re-dumped)."""
    data = yaml.safe_load(text)
    data["models"] = [
        *data.get("models", []),
        *({"id": mid, "model": f"{IMPORTED_PREFIX}{mid}", "kind": kind} for mid, kind in extra.items()),
    ]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


async def _stored_config(
    queue: Queue, text: str | None, config_path: Path | None
) -> tuple[SweepConfig, bool]:
    """The config stored with the run, and whether this import created the run (given its config)."""
    created = False
    if text is not None and config_path is not None and await queue.run_info() is None:
        await queue.init_run(
            text, run_meta(config_path, text, imported="AgentDecisionBench published answers")
        )
        created = True
    info = await queue.run_info()
    if info is None:
        raise ConfigError(f"the database has no run {queue.run!r}; import with --config to create it")
    return stored_config(info), created


async def _record(
    queue: Queue, config: SweepConfig, published: dict[str, Published], summary: ImportSummary
) -> None:
    known = {m.id: m for m in config.models}
    for spec in config.scenarios:
        for model_id, rows in sorted(published.get(spec.id, {}).items()):
            model = known.get(model_id)
            if model is None:
                summary.skipped.append(f"{model_id} x {spec.id}: not in the run's stored config")
                continue
            jobs = _jobs(config, spec, model, rows)
            summary.jobs_added += await queue.enqueue(jobs, {})
            done = await record_history(queue, [_recorded(spec, model_id, j, rows[j.item]) for j in jobs])
            summary.published.setdefault(spec.id, {})[model_id] = len(jobs)
            summary.recorded.setdefault(spec.id, {})[model_id] = done


def _published(root: Path, config: SweepConfig, models: Collection[str] | None) -> dict[str, Published]:
    out: dict[str, Published] = {}
    for spec in config.scenarios:
        rows = published_rows(root, spec, models)
        if rows:
            out[spec.id] = rows
    return out


def import_dataset(
    root: str | Path,
    *,
    config: str | Path | None = None,
    into: str | Path | None = None,
    db: str | None = None,
    models: Collection[str] | None = None,
) -> ImportSummary:
    """Import the published answers under ``root`` into the run of ``config`` (created if new) or ``into``."""
    root = Path(root)
    if not root.is_dir():
        raise ScenarioError(f"{root}: dataset folder not found")
    if (config is None) == (into is None):
        raise ConfigError("give the run either as --config CONFIG or as --into RUN_DIR")
    text: str | None = None
    if config is not None:
        path = Path(config)
        base_config = load_config(path)
        text = path.read_text(encoding="utf-8")
    else:
        base_config = anyio.run(lambda: config_from_run(Path(str(into)), db=db))
    base_config = with_db(base_config, db)
    # Everything is read and checked before anything is written: a refused file leaves no trace.
    refuse_foreign_folder(Path(config) if config is not None else base_config.output, base_config.output)
    published = _published(root, base_config, models)
    if not published and not _has_episodes(root, base_config):
        raise ScenarioError(f"{root}: no published answers for any scenario of the config")
    from .episode_import import published_episodes  # start-up: the episode rows load only for an import

    # read now for their checks (recorded later from the stored config), with the task lists they need
    if published_episodes(root, base_config, models):
        for spec in base_config.scenarios:
            if spec.kind == "episodes":
                load_scenario(spec)
    kinds = _model_kinds(root)
    present = {m.id for m in base_config.models}
    extra = {
        mid: kinds.get(mid, "decision")
        for rows in published.values()
        for mid in sorted(rows)
        if mid not in present
    }
    if text is not None and extra:
        text = _with_models(text, extra)
    summary = ImportSummary(base_config.name, base_config.output)
    fresh = _NewFolder.before(base_config)
    try:
        created = anyio.run(
            _import,
            base_config,
            text,
            None if config is None else Path(config),
            _Source(root, published, models),
            summary,
        )
    except BaseException:
        fresh.undo()
        raise
    if created:
        summary.added_models = [m for m in extra if any(m in r for r in summary.published.values())]
    return summary


@dataclass(frozen=True)
class _NewFolder:
    """The run folder and SQLite file an import is about to create, so a failed import can take them back.

    A run the import did not create (an existing folder or database, any PostgreSQL run) is left to the
    checks above, which read every file before anything is written."""

    folder: Path | None
    database: Path | None
    mark: Path | None

    @classmethod
    def before(cls, config: SweepConfig) -> _NewFolder:
        folder, database, mark = config.output, config.output / "knowwhen.db", config.output / RUN_MARK
        return cls(
            None if folder.exists() else folder,
            database if config.db is None and not database.exists() else None,
            None if mark.exists() else mark,
        )

    def undo(self) -> None:
        if self.database is None:  # the run's database was there before: the import's checks guard it
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{self.database}{suffix}").unlink(missing_ok=True)
        if self.mark is not None:
            self.mark.unlink(missing_ok=True)
        if self.folder is not None and self.folder.is_dir() and not any(self.folder.iterdir()):
            self.folder.rmdir()


@dataclass(frozen=True)
class _Source:
    """What an import reads: the dataset folder, its answers per scenario, and the models asked for."""

    root: Path
    published: dict[str, Published]
    models: Collection[str] | None


def _has_episodes(root: Path, config: SweepConfig) -> bool:
    return any(
        any((root / "episodes" / spec.id).glob("episodes_*.jsonl*"))
        for spec in config.scenarios
        if spec.kind == "episodes"
    )


async def _import(
    base: SweepConfig,
    text: str | None,
    config_path: Path | None,
    source: _Source,
    summary: ImportSummary,
) -> bool:

    claim_output_folder(config_path or base.output, base.output)
    async with open_queue(base.db_url, base.name) as queue:
        stored, created = await _stored_config(queue, text, config_path)
        stored = stored.model_copy(update={"db": base.db}) if base.db else stored
        await _record(queue, stored, source.published, summary)
        from .episode_import import record_episodes  # start-up: the episode rows load only for an import

        episodes = await record_episodes(queue, stored, source.root, source.models)
        summary.published.update(episodes.published)
        summary.episode_scenarios += list(episodes.published)
        summary.recorded.update(episodes.recorded)
        summary.jobs_added += episodes.jobs_added
        summary.skipped += episodes.skipped
        return created
