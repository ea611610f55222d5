"""The question-set folders of a run's ``states`` scenarios, written from the queue one model at a time.

Each folder holds the questions, answer key and corpus copied beside one ``answers_<model>.jsonl.gz`` per
model, rows of answer schema 3 (``answer_rows.file_row``), so the benchmark's scoring code and ``knowwhen
score`` read it unchanged; the manifests are scored from those same files, read back. A model's results are
read by key, its files written, and only what the manifests need of its rows is kept (``OPERATION_FIELDS``):
the finaliser's memory follows one model's answers, not the run's.
"""

from __future__ import annotations

import math
import shutil
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from ..config import ScenarioSpec, SweepConfig
from ..dataset.answer_rows import file_row, probabilities_problem
from ..dataset.files import (
    Answer,
    AnswerTable,
    QuestionSet,
    find_answer_files,
    load_question_set,
    read_answers,
)
from ..dataset.scoring import AnswerKey, compile_key, occurrence_correct
from ..dataset.subset import SUBSET_FILE, read_subset, write_subset_files, write_subset_record
from ..exceptions import ScenarioError
from ..jsonio import atomic_write_bytes, find_jsonl, jsonl_bytes, write_jsonl_bytes
from ..queue import JobResult, Queue
from ..scenarios.states import planned_questions
from .collect import RunRecords, collect_records

__all__ = ["OPERATION_FIELDS", "AnswerFiles", "Folder", "failure_kinds", "write_states_folders"]

OPERATION_FIELDS = (
    "valid",
    "requests",
    "cost_usd",
    "cache_hit",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "batch",
)
"""What a manifest reads of an open-loop answer row besides its answer (validity, cost, latency, tokens,
cache hits, batches): all that is kept of a row once its answers file is written."""
_READOUT_FIELDS = (*OPERATION_FIELDS, "qhash", "answer", "readout")
"""What is kept of a read-out model's row: its diagnostics, and its answer to compare read-outs by."""


def stem(spec: ScenarioSpec) -> str:
    return "questions" if spec.variant in (None, "main") else f"questions_{spec.variant}"


def _copy_question_files(spec: ScenarioSpec, dest: Path) -> None:
    """The question set beside the answers: whole, or with a ``limit`` the drawn tasks' occurrences and
    questions and a ``subset.json`` saying what they are of (so ``knowwhen score`` scores what was asked)."""
    dest.mkdir(parents=True, exist_ok=True)
    if spec.path is None:  # states scenarios always have one (config validation)
        return
    if (spec.path / "corpus.json").is_file():
        shutil.copyfile(spec.path / "corpus.json", dest / "corpus.json")
    if spec.limit is not None:
        if find_jsonl(spec.path, stem(spec)) is None:
            return  # the question set is not on this machine: the sample copied when it was stays
        planned = planned_questions(spec, load_question_set(spec.path, questions_stem=stem(spec)))
        if planned.tasks is not None and planned.subset is not None:
            write_subset_files(spec.path, dest, (stem(spec), "occurrences"), planned.tasks)
            write_subset_record(dest, planned.subset)
            return
    (dest / SUBSET_FILE).unlink(missing_ok=True)
    for name in (stem(spec), "occurrences"):
        src = find_jsonl(spec.path, name)
        if src is not None:
            target = dest / src.name
            if not target.exists() or target.stat().st_size != src.stat().st_size:
                atomic_write_bytes(target, src.read_bytes())


def _file_rows(
    rows: Sequence[Mapping[str, Any]], variant: str | None, qset: QuestionSet
) -> Iterator[dict[str, Any]]:
    """The answers-file rows (schema 3): probabilities aligned with each question's options."""
    for row in rows:
        question = qset.questions.get(row["qhash"])
        yield file_row(row, variant=variant or "main", options=question.options if question else ())


@dataclass
class Folder:
    """A finalised question-set folder, loaded as the benchmark reads it (without the probabilities,
    which no score reads)."""

    spec: ScenarioSpec
    qset: QuestionSet
    key: AnswerKey
    table: AnswerTable
    _correct: dict[str, list[bool]] = field(default_factory=dict, repr=False)

    def answers(self, model_id: str) -> dict[str, Any] | None:
        return self.table.get((model_id, self.spec.variant or "main"))

    def correct(self, model_id: str) -> list[bool] | None:
        """``occurrence_correct`` of a model's answers against the key, computed once (an LLM that gates
        every decision model is asked for it once a cell)."""
        if model_id not in self._correct:
            answers = self.answers(model_id)
            if answers is None:
                return None
            self._correct[model_id] = occurrence_correct(answers, self.key)
        return self._correct[model_id]


async def failure_kinds(queue: Queue, results: Sequence[JobResult]) -> dict[str, str]:
    """The kind of the last failed attempt of each job that failed for good (``error`` when unknown)."""
    return {
        job.id: ((await queue.attempt_errors(job.id)) or [{}])[-1].get("kind", "error")
        for job, status, _r, _e in results
        if status == "failed"
    }


class AnswerFiles:
    """Answers files compressed and written on threads (zlib lets go of the interpreter) while the
    finaliser reads the next models and computes the manifests; at most ``backlog`` bytes of rows wait.

    ``close`` waits for every file (and raises the first write's error): the finaliser closes it before
    it writes a manifest, so a manifest never describes an answers file that is not there yet.

    The files are gzipped at level 1: at a paper's size they are hundreds of megabytes of rows, and level
    1 costs about a quarter of level 6's CPU for files about 8 % larger (the same rows give the same bytes).
    """

    LEVEL = 1

    def __init__(self, threads: int = 2, backlog: int = 128 << 20) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="answers-file")
        self._pending: deque[tuple[Future[None], int]] = deque()
        self._backlog = backlog
        self._waiting = 0

    async def write(self, path: Path, rows: Iterable[dict[str, Any]]) -> None:
        data, _count = jsonl_bytes(rows)
        while self._pending and (self._pending[0][0].done() or self._waiting + len(data) > self._backlog):
            await self._settle()
        self._pending.append((self._pool.submit(write_jsonl_bytes, path, data, level=self.LEVEL), len(data)))
        self._waiting += len(data)

    async def _settle(self) -> None:
        future, size = self._pending.popleft()
        self._waiting -= size
        await anyio.to_thread.run_sync(future.result)

    async def close(self) -> None:
        try:
            while self._pending:
                await self._settle()
        finally:
            self._pool.shutdown(wait=True)


async def write_states_folders(
    config: SweepConfig,
    queue: Queue,
    records: RunRecords,
    cells: Mapping[tuple[str, str], list[str]],
    files: AnswerFiles,
) -> dict[str, Folder]:
    """Write every ``states`` scenario's folder, reading the queue one model at a time; its rows go into
    ``records`` (as ``collect_records`` groups them), thinned to ``OPERATION_FIELDS`` once written.

    ``cells`` is ``Queue.job_ids()``: the ids of the plan's jobs by (scenario, model). The answers files go
    to ``files``, which may still be writing them when this returns.
    """
    specs = {s.id: s for s in config.scenarios if s.kind == "states"}
    for spec in specs.values():
        _copy_question_files(spec, config.output / spec.id)
    known = {m.id for m in config.models}
    sets: dict[str, QuestionSet] = {}
    written: dict[Path, AnswerTable] = {}
    for model in config.models:
        ids = sorted(i for sc in specs for i in cells.get((sc, model.id), ()))
        if not ids:
            continue
        results = await queue.results_of(ids)
        collect_records(results, known, await failure_kinds(queue, results), into=records)
        del results
        for sc, spec in specs.items():
            rows = records.rows.get((sc, model.id))
            if not rows:
                continue
            if sc not in sets:
                sets[sc] = load_question_set(config.output / sc, questions_stem=stem(spec))
            path = config.output / sc / f"answers_{model.id}.jsonl.gz"
            lines = list(_file_rows(sorted(rows, key=lambda r: r["qhash"]), spec.variant, sets[sc]))
            written[path] = _read_as_written(path, lines, sets[sc])
            kept = _READOUT_FIELDS if model.readout is not None else OPERATION_FIELDS
            records.rows[(sc, model.id)] = [{k: r[k] for k in kept if k in r} for r in rows]
            await files.write(path, lines)
    return {sc: _folder(specs[sc], qset, written) for sc, qset in sets.items()}


def _folder(spec: ScenarioSpec, qset: QuestionSet, written: Mapping[Path, AnswerTable]) -> Folder:
    # A limited scenario's folder holds the drawn tasks alone (``_copy_question_files``): its key is the
    # subset's, and its scope counts what the whole set holds.
    key = compile_key(qset)
    subset = read_subset(qset.path)
    if subset is not None and subset.occurrences_of is not None and subset.tasks_of is not None:
        key = replace(key, all_occurrences=subset.occurrences_of, all_tasks=subset.tasks_of)
    table = _read_back(qset, spec.variant or "main", written)
    return Folder(spec, qset, key, table)


def _finite(value: float | None) -> float | None:
    """A number as it reads back from a file (JSON has no NaN or infinity: they are written as null)."""
    return value if value is None or math.isfinite(value) else None


def _read_as_written(path: Path, lines: Sequence[dict[str, Any]], qset: QuestionSet) -> AnswerTable:
    """What ``read_answers`` reads of the rows just written to ``path`` (the same checks, the same values),
    without parsing the file again; the probabilities are left out, as ``_read_back`` leaves them."""
    table: AnswerTable = {}
    first: dict[tuple[str, str, str], int] = {}
    for line, row in enumerate(lines, 1):
        model, variant, qhash = row["model"], row["variant"], row["qhash"]
        question = qset.questions.get(qhash)
        if question is None:
            raise ScenarioError(f"{path}:{line}: answer for unknown qhash {qhash} (not in the questions)")
        if (model, variant, qhash) in first:
            raise ScenarioError(
                f"{path}:{line}: duplicate answer of model {model} ({variant}) to qhash {qhash}, "
                f"first at {path.name}:{first[(model, variant, qhash)]}"
            )
        if problem := probabilities_problem(row["probabilities"], question.options):
            raise ScenarioError(f"{path}:{line}: field 'probabilities' {problem}")
        first[(model, variant, qhash)] = line
        table.setdefault((model, variant), {})[qhash] = Answer(
            qhash,
            row["answer"],
            _finite(row["confidence"]),
            row["valid"],
            row["error"],
            _finite(row["cost_usd"]) or 0.0,
            _finite(row["latency_ms"]),
            None,
        )
    return table


def _read_back(qset: QuestionSet, variant: str, written: Mapping[Path, AnswerTable]) -> AnswerTable:
    """Every answers file of the folder as ``load_answers`` reads them all (those just written as they were
    written, any other from its file), one file at a time and each answer without its probabilities (a
    run's would take gigabytes)."""
    table: AnswerTable = {}
    # The files just written may not be on disk yet (``AnswerFiles`` writes them on threads).
    mine = {p for p in written if p.parent == qset.path}
    for path in sorted(mine.union(find_answer_files(qset.path))):
        part = written.get(path) or read_answers([path], qset.questions, variant=variant)
        for key, answers in part.items():
            if key[1] != variant:
                continue
            bucket = table.setdefault(key, {})
            if twice := sorted(bucket.keys() & answers.keys()):
                raise ScenarioError(
                    f"{path}: duplicate answer of model {key[0]} ({key[1]}) to qhash {twice[0]}, "
                    "first in another answers file"
                )
            bucket.update({q: a._replace(probabilities=None) for q, a in answers.items()})
    return table
