"""``knowwhen export``: a finalised run laid out as an AgentDecisionBench dataset folder, with its own card.

The folder has the card's layout: one question-set folder per recorded question set (``common_states/``,
``shift/``, or the set's own name) holding the questions of every variant, the answer key, ``corpus.json``
and ``answers_<model>.jsonl.gz`` (``answers_<model>_<variant>.jsonl.gz`` for the other variants);
``isolated/answers.jsonl.gz`` (L1); ``tasks/decisiongym_tasks.jsonl.gz`` and ``episodes/<scenario>/`` (L3);
``leaderboard/headline_numbers.jsonl.gz``; ``models.jsonl.gz``; the run's manifests; and ``README.md``,
whose ``configs:`` declare every column (``card``). A scenario run with a ``limit`` is exported as the
sample it asked: the drawn tasks' questions, answer key and corpus, with a ``subset.json`` saying what they
are of (beside ``isolated/answers.jsonl.gz`` and an episodes scenario's files too), and the card says so. Answer rows are rewritten in answer schema 3
whatever schema the run wrote them in, so ``knowwhen score`` and ``knowwhen import`` read the folder as
they read the dataset.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...config import ScenarioSpec, SweepConfig
from ...dataset.answer_rows import file_row, record_row
from ...dataset.features import ISOLATED_COLUMNS, MODEL_COLUMNS, TASK_COLUMNS, typed_row
from ...dataset.files import find_answer_files, read_questions
from ...dataset.subset import SUBSET_FILE, SubsetRecord, read_subset, write_subset_files, write_subset_record
from ...exceptions import ScenarioError
from ...jsonio import find_jsonl, iter_jsonl, write_jsonl
from ...messages import say
from ..episode_rows import read_episode_row
from ..manifest import load_manifest, manifest_path
from .card import CARD_MARK, write_card
from .headline_rows import write_headline_numbers
from .source import ExportSummary, RunSource

__all__ = ["set_folder_name", "write_export"]

_CARD_NAMES = {"common": "common_states", "common_states": "common_states", "shift": "shift"}
_SIDE_FILES = ("corpus.json", "variants.json")


def set_folder_name(spec: ScenarioSpec) -> str:
    """The dataset folder of a states scenario: the card's name for the common states and the shift."""
    assert spec.path is not None
    return _CARD_NAMES.get(spec.path.name, spec.path.name)


def _answers_name(model: str, variant: str) -> str:
    return f"answers_{model}.jsonl.gz" if variant == "main" else f"answers_{model}_{variant}.jsonl.gz"


def _copy_rows(src: Path, dest: Path) -> Path:
    """A JSON-lines file as ``dest`` (gzipped); a file already gzipped is copied byte for byte."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if src.suffix == ".gz":
        shutil.copyfile(src, dest)
    else:
        write_jsonl(dest, (row for _line, row in iter_jsonl(src)))
    return dest


def _question_files(source: Path, dest: Path) -> list[Path]:
    """Questions of every variant, the answer key and the side files of one question set."""
    written = []
    stems = {p.name.split(".")[0] for p in source.glob("questions*.jsonl*")} | {"occurrences"}
    for stem in sorted(stems):
        src = find_jsonl(source, stem)
        if src is not None:
            written.append(_copy_rows(src, dest / f"{stem}.jsonl.gz"))
    for name in _SIDE_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, dest / name)
            written.append(dest / name)
    return written


def _set_sources(config: SweepConfig) -> dict[str, list[ScenarioSpec]]:
    """Folder name -> the states scenarios recorded on that question set (one per variant)."""
    groups: dict[str, list[ScenarioSpec]] = {}
    paths: dict[str, Path] = {}
    for spec in config.scenarios:
        if spec.kind != "states" or spec.path is None:
            continue
        name = set_folder_name(spec)
        if name in paths and paths[name].resolve() != spec.path.resolve():
            raise ScenarioError(
                f"scenarios {groups[name][0].id!r} and {spec.id!r} read two question sets both named "
                f"{name!r} ({paths[name]}, {spec.path}); a dataset folder holds one set"
            )
        paths[name] = spec.path
        groups.setdefault(name, []).append(spec)
    return groups


def _drawn(config: SweepConfig, name: str, specs: list[ScenarioSpec]) -> tuple[SubsetRecord, set[str]] | None:
    """The sample the scenarios on one question set asked (its record and tasks), or None for the whole
    set; scenarios that asked different ones cannot share the folder."""
    found = []
    for spec in specs:
        folder = config.output / spec.id
        record = read_subset(folder)
        tasks = None
        if record is not None:
            occurrences = find_jsonl(folder, "occurrences")
            tasks = {str(r.get("task")) for _l, r in iter_jsonl(occurrences)} if occurrences else set()
        found.append((spec.id, record, tasks))
    if all(record is None for _id, record, _t in found):
        return None
    first_id, first, tasks = found[0]
    for other_id, _record, other in found[1:]:
        if other != tasks:
            raise ScenarioError(
                f"scenarios {first_id!r} and {other_id!r} asked different samples of the question set {name!r} "
                "(their limit or seed differ); export one of them"
            )
    assert first is not None and tasks is not None
    return first, tasks


def _write_set(
    config: SweepConfig, name: str, specs: list[ScenarioSpec], out: Path, summary: ExportSummary
) -> list[Path]:
    source = specs[0].path
    assert source is not None
    drawn = _drawn(config, name, specs)
    if drawn is not None:  # a subset: the drawn tasks' questions (every variant), key and corpus, and so
        record, tasks = drawn
        if not source.is_dir():
            raise ScenarioError(
                f"{source}: the question set is not on this machine; a subset of it is exported from it"
            )
        stems = {p.name.split(".")[0] for p in source.glob("questions*.jsonl*")} | {"occurrences"}
        written = write_subset_files(source, out / name, sorted(stems), tasks, gz=True)
        write_subset_record(out / name, record)
        written.append(out / name / SUBSET_FILE)
        if (source / "variants.json").is_file():
            shutil.copyfile(source / "variants.json", out / name / "variants.json")
            written.append(out / name / "variants.json")
        summary.subsets[name] = record
    else:
        if not source.is_dir():  # the question set is not on this machine: the run folder's copies
            source = config.output / specs[0].id
        written = _question_files(source, out / name)
    seen: dict[tuple[str, str], str] = {}
    for spec in specs:
        variant = spec.variant or "main"
        stem = "questions" if variant == "main" else f"questions_{variant}"
        qpath = find_jsonl(out / name, stem) or find_jsonl(config.output / spec.id, stem)
        if qpath is None:
            raise ScenarioError(f"{out / name}: no {stem}.jsonl.gz for scenario {spec.id!r}")
        options = {q: question.options for q, question in read_questions(qpath).items()}
        for path in find_answer_files(config.output / spec.id):
            written += _write_answers(path, spec, variant, options, out / name, seen)
    return written


def _write_answers(
    path: Path,
    spec: ScenarioSpec,
    variant: str,
    options: dict[str, tuple[str, ...]],
    dest: Path,
    seen: dict[tuple[str, str], str],
) -> list[Path]:
    by_model: dict[str, list[dict[str, Any]]] = {}
    for line, row in iter_jsonl(path):
        qhash = row.get("qhash")
        if qhash not in options:
            raise ScenarioError(f"{path}:{line}: answer for unknown qhash {qhash} (not in the questions)")
        recorded = record_row(row, options[qhash])
        by_model.setdefault(str(row.get("model")), []).append(
            file_row(recorded, variant=variant, options=options[qhash])
        )
    written = []
    for model, rows in sorted(by_model.items()):
        if (model, variant) in seen:
            raise ScenarioError(
                f"scenarios {seen[(model, variant)]!r} and {spec.id!r} both hold answers of {model} to the "
                f"{variant} questions of {dest.name}; export one of them"
            )
        seen[(model, variant)] = spec.id
        write_jsonl(dest / _answers_name(model, variant), sorted(rows, key=lambda r: r["qhash"]))
        written.append(dest / _answers_name(model, variant))
    return written


def _subsets(config: SweepConfig) -> dict[str, SubsetRecord]:
    """The sample each scenario asked, by scenario id, as the run's manifests record it."""
    manifests = [manifest_path(config.output, m.id) for m in config.models]
    found = next((load_manifest(p) for p in manifests if p.is_file()), None)
    return {
        sc.id: SubsetRecord(**sc.subset.model_dump())
        for sc in (found.scenarios if found else [])
        if sc.subset is not None
    }


def _write_isolated(config: SweepConfig, out: Path, summary: ExportSummary) -> list[Path]:
    rows: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    isolated = [s.id for s in config.scenarios if s.kind == "isolated"]
    subsets = {sc: record for sc, record in _subsets(config).items() if sc in isolated}
    if subsets and len(isolated) > 1:
        raise ScenarioError(
            f"scenarios {', '.join(map(repr, isolated))} share isolated/answers.jsonl.gz and {next(iter(subsets))!r} "
            "asked a sample; export one of them"
        )
    for spec in config.scenarios:
        src = find_jsonl(config.output / spec.id, "answers") if spec.kind == "isolated" else None
        for line, row in iter_jsonl(src) if src else ():
            key = (str(row.get("model")), str(row.get("id")))
            if key in seen:
                raise ScenarioError(f"{src}:{line}: model {key[0]} answered item {key[1]} in two scenarios")
            seen.add(key)
            rows.append(typed_row(row, ISOLATED_COLUMNS))
    if not rows:
        return []
    write_jsonl(out / "isolated" / "answers.jsonl.gz", rows)
    written = [out / "isolated" / "answers.jsonl.gz"]
    for record in subsets.values():
        write_subset_record(out / "isolated", record)
        written.append(out / "isolated" / SUBSET_FILE)
        summary.subsets["isolated"] = record
    return written


def _task_rows(source: RunSource) -> Iterable[dict[str, Any]]:
    config_file = (source.info.get("meta") or {}).get("config_file") or ""
    for spec in source.config.scenarios:
        if spec.kind != "episodes":
            continue
        modes = source.config.modes if spec.modes is None else spec.modes
        used_for = f"L3 closed loop: {', '.join(modes)}" if modes else "L3 shadow episodes (τ fit)"
        for item in source.tasks.get(spec.id, []):
            row = {**item, "set": spec.id, "used_for": used_for, "config": config_file}
            yield typed_row(row, TASK_COLUMNS)


def _write_episodes(source: RunSource, out: Path, summary: ExportSummary) -> list[Path]:
    written = []
    subsets = _subsets(source.config)
    rows = list(_task_rows(source))
    if rows:
        write_jsonl(out / "tasks" / "decisiongym_tasks.jsonl.gz", rows)
        written.append(out / "tasks" / "decisiongym_tasks.jsonl.gz")
    for spec in source.config.scenarios:
        folder = source.config.output / spec.id
        for path in sorted(folder.glob("episodes_*.jsonl.gz")) if spec.kind == "episodes" else []:
            # rewritten in the current episode schema, whatever release finalised the run
            episodes = (read_episode_row(r).model_dump(mode="json") for _line, r in iter_jsonl(path))
            dest = out / "episodes" / spec.id / path.name
            write_jsonl(dest, episodes)
            written.append(dest)
        if spec.id in subsets and (out / "episodes" / spec.id).is_dir():
            write_subset_record(out / "episodes" / spec.id, subsets[spec.id])
            written.append(out / "episodes" / spec.id / SUBSET_FILE)
            summary.subsets[f"episodes/{spec.id}"] = subsets[spec.id]
    return written


def _levels(out: Path, model: str) -> list[str]:
    """The levels the export holds answers of ``model`` for."""
    isolated = out / "isolated" / "answers.jsonl.gz"
    found = []
    if isolated.is_file() and any(r.get("model") == model for _line, r in iter_jsonl(isolated)):
        found.append("L1")
    if any(out.glob(f"*/answers_{model}.jsonl.gz")) or any(out.glob(f"*/answers_{model}_*.jsonl.gz")):
        found.append("L2")
    if any(out.glob(f"episodes/*/episodes_{model}.jsonl.gz")):
        found.append("L3")
    return found


def _write_models(config: SweepConfig, out: Path) -> Path:
    rows = [
        typed_row(
            {"id": m.id, "name": m.id, "kind": m.kind, "levels": _levels(out, m.id), "model_string": m.model},
            MODEL_COLUMNS,
        )
        for m in config.models
    ]
    write_jsonl(out / "models.jsonl.gz", rows)
    return out / "models.jsonl.gz"


def _copy_manifests(config: SweepConfig, out: Path) -> list[Path]:
    written = []
    for model in config.models:
        src = manifest_path(config.output, model.id)
        if src.is_file():
            dest = out / "manifests" / src.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            written.append(dest)
    if not written:
        raise ScenarioError(say("export.not_finalised", output=config.output))
    return written


def _earlier_export(folder: Path) -> bool:
    """Whether ``folder`` holds a card written by an export (only then is it emptied and rewritten)."""
    card = folder / "README.md"
    return card.is_file() and CARD_MARK in card.read_text(encoding="utf-8", errors="replace")[:2000]


def write_export(source: RunSource, out: Path) -> ExportSummary:
    """Lay the run out in ``out`` (emptied of an earlier export first) and write its card."""

    config, out = source.config, Path(out)
    if out.resolve() == config.output.resolve():
        raise ScenarioError(f"{out}: export into a folder of its own, not the run folder")
    if out.exists() and not out.is_dir():
        raise ScenarioError(f"{out}: not a folder")
    if out.exists() and any(out.iterdir()) and not _earlier_export(out):
        raise ScenarioError(f"{out}: not empty and not an earlier export; choose an empty folder")
    shutil.rmtree(out, ignore_errors=True)
    summary = ExportSummary(out)
    summary.files += _copy_manifests(config, out)
    for name, specs in _set_sources(config).items():
        summary.files += _write_set(config, name, specs, out, summary)
        summary.sets.update({spec.id: name for spec in specs})
    summary.files += _write_isolated(config, out, summary)
    summary.files += _write_episodes(source, out, summary)
    summary.files.append(write_headline_numbers(config, out, summary.sets))
    summary.files.append(_write_models(config, out))
    summary.files.append(write_card(source, out, summary))
    return summary
