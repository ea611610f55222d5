"""Finalising a run: answers files in the benchmark's layout, one CXS manifest per model, comparison
tables, plots, a static HTML report, and the short ``table.md``.

Idempotent: it reads only the queue's recorded results and rewrites the same files (atomically); a rerun
changes nothing but the ``finalized_at`` time. Each ``states`` scenario becomes a question-set folder of its
own, written one model at a time (``folders``); the manifests are scored from those same files.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

from ..config import ReportSettings, ScenarioSpec, SweepConfig
from ..crashpoints import crashpoint
from ..dataset.answer_rows import AnswerRowDict
from ..dataset.scoring import score_l2
from ..exceptions import KnowwhenError
from ..jsonio import atomic_write_bytes, file_sha256
from ..queue import Queue
from ..scenarios import load_scenario
from .cells import closed_loop_cell, episode_deferral, isolated_cell, open_loop_cell, operations
from .collect import EpisodeKey, RunRecords, collect_records
from .episode_rows import write_episode_files
from .figures import write_plots
from .folders import AnswerFiles, Folder, failure_kinds, write_states_folders
from .isolated import finalize_isolated
from .l1_table import write_l1_table
from .manifest import (
    ClosedLoopCell,
    CxsManifest,
    IsolatedCell,
    ModelRef,
    OpenLoopCell,
    ReadoutRecord,
    RunProvenance,
    ScenarioProvenance,
    manifest_path,
    readout_record,
)
from .manifest.document import Subset
from .ranking import Clusters, Ranking, default_rank_by, rank_models
from .report import write_report
from .screen_record import screen_record, screened_table
from .selective_cells import transfer_here
from .table_files import write_tables
from .tables import CI, headline_table, subset_notes

__all__ = ["PACKAGES", "Drilldown", "finalize_run", "scenario_folder", "write_outputs"]

PACKAGES = ("knowwhen-runner", "litellm", "pydantic", "numpy")
"""Packages whose versions every manifest records (read from metadata; litellm is never imported)."""


def scenario_folder(config: SweepConfig, scenario_id: str) -> Path:
    return config.output / scenario_id


Drilldown = Callable[[Sequence[CxsManifest]], Awaitable[str]]
"""Builds the report's drill-down section from the manifests (the viewer's offline page, which ``sweep/``
hands over: the viewer reads results, so results never import it)."""


async def finalize_run(
    config: SweepConfig, queue: Queue, drilldown: Drilldown | None = None
) -> dict[str, Any]:
    """Write every output of the run from what the queue recorded; returns the L2 scores of ``table.md``.

    ``drilldown``, when given, builds the report's drill-down section; without it the report has none.
    """
    # What is not a states scenario's (episodes, isolated items) is read whole, as before; the states
    # scenarios' answers, most of a large run, are read and written one model at a time.
    cells = await queue.job_ids()
    states = {spec.id for spec in config.scenarios if spec.kind == "states"}
    rest = await queue.results_of(
        sorted(i for (sc, _m), ids in cells.items() if sc not in states for i in ids)
    )
    records = collect_records(rest, {m.id for m in config.models}, await failure_kinds(queue, rest))
    del rest
    files = AnswerFiles()  # compressed on other threads while the manifests are computed
    try:
        manifests, scores, clusters = await _compute(config, queue, records, cells, files)
        shown = await drilldown(manifests) if drilldown is not None else ""
    finally:
        await files.close()  # every answers file is written before any manifest
    ranking = rank_models(manifests, config.report.rank_by, clusters)
    write_outputs(config.output, manifests, shown, config.report, ranking)
    _write_table(config, manifests, ranking)
    if any(s.kind == "isolated" for s in config.scenarios):
        write_l1_table(config, ranking)
    return scores


async def _compute(
    config: SweepConfig,
    queue: Queue,
    records: RunRecords,
    cells: dict[tuple[str, str], list[str]],
    files: AnswerFiles,
) -> tuple[list[CxsManifest], dict[str, Any], Clusters | None]:
    """The answers files (handed to ``files``), the episode files, every model's manifest, and the per-task
    outcomes of the ranking's states scenario (its tie groups' paired tests)."""
    folders = await write_states_folders(config, queue, records, cells, files)
    for spec in config.scenarios:
        if spec.kind == "isolated":
            records.rows.update(await finalize_isolated(config, spec, queue, records))
    if records.episodes or records.failed_rows:
        items = {
            k: v
            for s in config.scenarios
            if s.kind == "episodes"
            for k, v in (await queue.items(s.id)).items()
        }
        write_episode_files(config.output, records.episodes, items, records.failed_rows)
    scores = {
        sc: {m: score_l2(a, f.key) for (m, v), a in f.table.items() if v == (f.spec.variant or "main")}
        for sc, f in folders.items()
    }
    provenance = _run_provenance(config, info := (await queue.run_info() or {}), await queue.workers())
    scenarios = [_scenario_provenance(spec) for spec in config.scenarios]
    manifests = _manifests(config, records, folders, provenance, scenarios, info.get("meta"))
    return manifests, scores, _task_outcomes(config, folders, manifests)


def _task_outcomes(
    config: SweepConfig, folders: dict[str, Folder], manifests: Sequence[CxsManifest]
) -> Clusters | None:
    """Each model's per-task correctness in the scenario the ranking uses, when it is a question set."""
    scenario = config.report.rank_by or default_rank_by(manifests)
    folder = folders.get(scenario) if scenario else None
    if folder is None:
        return None
    out: dict[str, dict[str, list[float]]] = {}
    for m in config.models:
        correct = folder.correct(m.id)
        if correct is None:
            continue
        by_task: dict[str, list[float]] = {}
        for t, ok in zip(folder.key.task_index, correct, strict=True):
            by_task.setdefault(folder.key.tasks[t], []).append(float(ok))
        out[m.id] = by_task
    return out


# --- manifests -----------------------------------------------------------------------------------------


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _packages() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = dist_version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def _run_provenance(
    config: SweepConfig, info: dict[str, Any], workers: Sequence[dict[str, Any]]
) -> RunProvenance:
    meta = info.get("meta") or {}
    started = [float(w["started_at"]) for w in workers if w.get("started_at") is not None]
    ended = [float(w.get("stopped_at") or w.get("heartbeat_at") or 0.0) for w in workers]
    return RunProvenance(
        name=config.name,
        config_file=meta.get("config_file"),
        config_sha256=meta.get("config_sha256"),
        job_id_version=meta.get("job_id_version"),
        created_by=meta.get("knowwhen_runner"),
        packages=_packages(),
        created=meta.get("created") or _iso(info.get("created_at")),
        work_started=_iso(min(started)) if started else None,
        work_ended=_iso(max(ended)) if ended else None,
        finalized_at=_iso(time.time()) or "",
    )


def _scenario_files(spec: ScenarioSpec) -> tuple[dict[str, str], Subset | None]:
    """The sha256 of each file of a scenario, and with a ``limit`` the sample it drew."""
    try:
        loaded = load_scenario(spec)
    except KnowwhenError:
        # A kind this version cannot load: hash what is there, so provenance is never silently empty.
        path = spec.path
        if path is None:
            return {}, None
        files = [path] if path.is_file() else sorted(p for p in path.glob("*") if p.is_file())
        return {p.name: file_sha256(p) for p in files}, None
    got = loaded.subset
    subset = None
    if got is not None:
        subset = Subset(
            of=got.of,
            asked=got.asked,
            seed=got.seed,
            unit=got.unit,
            tasks_of=got.tasks_of,
            tasks_asked=got.tasks_asked,
        )
    return dict(loaded.files), subset


_SCENARIO_FIELDS_SHOWN = {"id", "kind", "path", "variant", "version", "limit"}


def _scenario_provenance(spec: ScenarioSpec) -> ScenarioProvenance:
    files, subset = _scenario_files(spec)
    return ScenarioProvenance(
        id=spec.id,
        kind=spec.kind,
        variant=spec.variant,
        version=spec.version,
        limit=spec.limit,
        subset=subset,
        files=files,
        settings=spec.model_dump(mode="json", exclude_defaults=True, exclude=_SCENARIO_FIELDS_SHOWN),
    )


def _manifests(
    config: SweepConfig,
    records: RunRecords,
    folders: dict[str, Folder],
    run: RunProvenance,
    scenarios: list[ScenarioProvenance],
    meta: dict[str, Any] | None,
) -> list[CxsManifest]:
    """Every model's manifest, with what the run's screen (if any) says of it."""
    out = []
    for m in config.models:
        manifest = _manifest(config, m.id, records, folders, run, scenarios)
        screen = screen_record(meta, m.id, manifest.jobs.pending)
        out.append(manifest.model_copy(update={"screen": screen}))
    return out


def _manifest(
    config: SweepConfig,
    model_id: str,
    records: RunRecords,
    folders: dict[str, Folder],
    run: RunProvenance,
    scenarios: list[ScenarioProvenance],
) -> CxsManifest:
    spec = config.model(model_id)
    rows = [r for sc in config.scenarios for r in records.rows.get((sc.id, model_id), [])]
    return CxsManifest(
        model=ModelRef(id=spec.id, model=spec.model, kind=spec.kind, params=spec.params),
        run=run,
        scenarios=scenarios,
        jobs=records.tally(model_id),
        totals=operations(rows),
        open_loop=_open_loop(config, model_id, records, folders),
        isolated=_isolated(config, model_id, records),
        closed_loop=_closed_loop(config, model_id, records),
        readout=_readout(config, model_id, records),
    )


def _readout(config: SweepConfig, model_id: str, records: RunRecords) -> ReadoutRecord | None:
    """A read-out model's diagnostics, compared with the other read-outs of the same served model."""
    spec = config.model(model_id)
    if spec.readout is None:
        return None

    def rows(mid: str) -> list[AnswerRowDict]:
        return [r for sc in config.scenarios for r in records.rows.get((sc.id, mid), [])]

    others = {
        m.id: (m.readout.method, rows(m.id))
        for m in config.models
        if m.id != model_id
        and m.readout is not None
        and (m.model, m.api_base, m.revision) == (spec.model, spec.api_base, spec.revision)
    }
    return readout_record(spec.readout.model_dump(), rows(model_id), others)


def _open_loop(
    config: SweepConfig, model_id: str, records: RunRecords, folders: dict[str, Folder]
) -> list[OpenLoopCell]:
    decision = config.model(model_id).kind == "decision"
    gate = config.gate
    out = []
    for sc, folder in folders.items():
        answers = folder.answers(model_id)
        if answers is None:
            continue
        llm_answers = folder.answers(gate.llm) if gate and decision else None
        llm_correct = folder.correct(gate.llm) if gate and llm_answers is not None else None
        cell = open_loop_cell(
            sc,
            records.modes[(sc, model_id)],
            folder.spec.variant,
            records.rows[(sc, model_id)],
            answers,
            folder.key,
            decision=decision,
            target=gate.target if gate else None,
            llm=(gate.llm, llm_answers) if gate and llm_answers is not None else None,
            llm_correct=llm_correct,
            guarantee=(gate.risk, gate.delta) if gate and gate.risk is not None else None,
            llm_rows=records.rows.get((sc, gate.llm)) if gate and llm_answers is not None else None,
        )
        out.append(cell)
    return _with_transfers(out, model_id, folders)


def _with_transfers(
    cells: list[OpenLoopCell], model_id: str, folders: dict[str, Folder]
) -> list[OpenLoopCell]:
    """Each question set's τ with a guarantee applied to every other question set of the model."""
    sources = [(c.scenario, c.deferral.guarantee) for c in cells if c.deferral and c.deferral.guarantee]
    out = []
    for cell in cells:
        folder, answers = folders[cell.scenario], folders[cell.scenario].answers(model_id)
        correct = folder.correct(model_id)
        if cell.deferral is None or answers is None or correct is None:
            out.append(cell)
            continue
        found = [
            transfer_here(sc, g, answers, folder.key, correct) for sc, g in sources if sc != cell.scenario
        ]
        moved = [t for t in found if t is not None]
        deferral = cell.deferral.model_copy(update={"transfers": moved})
        out.append(cell.model_copy(update={"deferral": deferral}) if moved else cell)
    return out


def _isolated(config: SweepConfig, model_id: str, records: RunRecords) -> list[IsolatedCell]:
    out = []
    for spec in config.scenarios:
        rows = records.rows.get((spec.id, model_id))
        if spec.kind == "isolated" and rows:
            cell = isolated_cell(spec.id, records.modes[(spec.id, model_id)], rows)
            if cell is not None:
                out.append(cell)
    return out


_MODE_ORDER = {"llm": 0, "model": 1, "shadow": 2, "gated": 3}


def _closed_loop(config: SweepConfig, model_id: str, records: RunRecords) -> list[ClosedLoopCell]:
    order = {spec.id: i for i, spec in enumerate(config.scenarios)}

    def rank(key: EpisodeKey) -> tuple[Any, ...]:
        _owner, scenario, mode, tau = key
        return (
            order.get(scenario, len(order)),
            scenario,
            _MODE_ORDER.get(mode, 9),
            mode,
            tau is not None,
            tau or 0,
        )

    keys = {k for k in (*records.episodes, *records.failed_episodes) if k[0] == model_id}
    return episode_deferral(
        [
            closed_loop_cell(
                k[1],
                k[2],
                k[3],
                records.episodes.get(k, []),
                records.failed_episodes.get(k, 0),
                records.failed_tasks.get(k, []),
            )
            for k in sorted(keys, key=rank)
        ]
    )


# --- writing -------------------------------------------------------------------------------------------


def _prune(folder: Path, pattern: str, keep: set[Path]) -> None:
    """Remove our own files of an earlier finalise that this one did not write (a model or scenario gone)."""
    for path in folder.glob(pattern):
        if path not in keep:
            path.unlink()


def write_outputs(
    output: Path,
    manifests: Sequence[CxsManifest],
    drilldown: str = "",
    report: ReportSettings | None = None,
    ranking: Ranking | None = None,
) -> None:
    """Write the manifests, then the tables, plots and report built from them (and the report's drill-down),
    models ranked (``ranking``, with its tie groups, or from the manifests) and plots focused as ``report``
    says."""
    report = report or ReportSettings()
    ranking = ranking or rank_models(manifests, report.rank_by)
    written = set()
    for manifest in manifests:
        path = manifest_path(output, manifest.model.id)
        atomic_write_bytes(path, (manifest.model_dump_json(indent=2) + "\n").encode())
        written.add(path)
        crashpoint("finalize")
    _prune(output / "manifests", "*.cxs.json", written)
    tables = write_tables(output / "tables", manifests, ranking)
    plots = write_plots(output / "plots", manifests, ranking, report)
    _prune(output / "plots", "*.svg", set(plots.values()))
    _prune(output / "plots", "*.png", set())  # drawn by releases before the plots were SVG
    write_report(output / "report.html", manifests, tables, plots, drilldown, ranking)


def _write_table(config: SweepConfig, manifests: Sequence[CxsManifest], ranking: Ranking) -> None:
    table = headline_table(manifests, ranking)
    text = screened_table(table, manifests, CI).to_markdown()
    notes = subset_notes(manifests)
    if notes:
        text += "\n" + "\n".join(f"- {note}" for note in notes) + "\n"
    atomic_write_bytes(config.output / "table.md", text.encode())
