"""Answers files of schema 3 and of the older schema 2: `score` and `import` read both into the same answers."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.config import ScenarioSpec
from knowwhen_runner.dataset.answer_rows import ANSWER_FIELDS, answer_row, failed_row, file_row, record_row
from knowwhen_runner.dataset.files import load_answers, load_question_set
from knowwhen_runner.dataset.score_folder import score_report
from knowwhen_runner.exceptions import ScenarioError
from knowwhen_runner.jsonio import write_jsonl
from knowwhen_runner.sweep.importer import published_rows
from tests.helpers import make_question_set


def _recorded(folder: Path) -> list[dict[str, Any]]:
    """Recorded rows as the queue holds them: a decision model with probabilities, one failed job."""
    qset = load_question_set(folder)
    rows = []
    for i, (qhash, question) in enumerate(sorted(qset.questions.items())):
        if i == 3:
            rows.append(failed_row(model_id="dm", qhash=qhash, error="HTTP 400: bad request", attempts=2))
            continue
        options = question.options
        choice = options[i % len(options)]
        probs = {o: (0.65 if o == choice else 0.35 / (len(options) - 1)) for o in options}
        response = {"choice": choice, "confidence": 0.2, "probabilities": probs, "cost_usd": 0.001}
        rows.append(
            answer_row(
                model_id="dm",
                qhash=qhash,
                item={"options": list(options)},
                response={**response, "latency_ms": 5.0},
                attempts=1,
                requests=1,
                wall_ms=6.0,
                cache_hit=False,
            )
        )
    return rows


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """The same answers written as the previous release wrote them (schema 2) and as this one does (3)."""
    old = make_question_set(tmp_path / "old" / "qs", n_tasks=4)
    new = tmp_path / "new" / "qs"
    shutil.copytree(old, new)
    rows = _recorded(old)
    options = {q: question.options for q, question in load_question_set(old).questions.items()}
    write_jsonl(old / "answers_dm.jsonl.gz", rows)  # schema 2: probabilities keyed by option, no variant
    write_jsonl(
        new / "answers_dm.jsonl.gz", [file_row(r, variant=None, options=options[r["qhash"]]) for r in rows]
    )
    return old, new


def test_score_reads_both_schemas_into_the_same_answers(folders: tuple[Path, Path]) -> None:
    """`knowwhen score`'s reader gives the same answers, probabilities by option included, and the same report."""
    old, new = folders
    questions = load_question_set(old).questions
    before, after = load_answers(old, questions), load_answers(new, questions)
    assert before == after and len(before[("dm", "main")]) == len(questions)
    assert any(a.probabilities for a in after[("dm", "main")].values())
    strip = lambda report: {k: v for k, v in report.items() if k != "dataset"}  # noqa: E731
    assert strip(score_report(old, model="dm")) == strip(score_report(new, model="dm"))


def test_import_reads_both_schemas_into_the_same_recorded_rows(folders: tuple[Path, Path]) -> None:
    """`knowwhen import`'s reader turns both files into the rows the queue records (probabilities by option)."""
    old, new = folders
    spec_of = lambda folder: ScenarioSpec.model_validate({"id": "qs", "path": str(folder)})  # noqa: E731
    before, after = published_rows(old.parent, spec_of(old)), published_rows(new.parent, spec_of(new))
    assert set(before["dm"]) == set(after["dm"])
    for qhash, row in before["dm"].items():
        assert {k: v for k, v in row.items() if v is not None} == {
            k: v for k, v in after["dm"][qhash].items() if v is not None
        }


def test_file_rows_round_trip_through_record_row(folders: tuple[Path, Path]) -> None:
    """A file row read back (record_row) and written again (file_row) is the same row, key for key."""
    _old, new = folders
    questions = load_question_set(new).questions
    rows = _recorded(new)
    assert len(rows) == len(questions) > 3  # the failed row (the fourth) is among them
    for row in rows:
        options = questions[row["qhash"]].options
        once = file_row(row, variant="nodist", options=options)
        assert tuple(once) == ANSWER_FIELDS
        assert file_row(record_row(once, options), variant="nodist", options=options) == once


def test_probabilities_of_the_wrong_length_name_the_file_and_line(tmp_path: Path) -> None:
    """A schema 3 row whose probabilities do not match the question's options is refused with its place."""
    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    questions = load_question_set(folder).questions
    qhash = sorted(questions)[0]
    row = file_row(_recorded(folder)[0], variant=None, options=questions[qhash].options)
    write_jsonl(folder / "answers_dm.jsonl.gz", [{**row, "qhash": qhash, "probabilities": [0.5, 0.5]}])
    with pytest.raises(ScenarioError, match=r"answers_dm.jsonl.gz:1: field 'probabilities' has 2 values"):
        load_answers(folder, questions)
