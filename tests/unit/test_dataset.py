"""Readers of the benchmark layout: answers, isolated answers, models, leaderboard, and their errors."""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest

from knowwhen_runner.dataset.files import (
    find_answer_files,
    load_answers,
    load_question_set,
    read_answers,
    read_isolated_answers,
    read_leaderboard,
    read_models,
)
from knowwhen_runner.exceptions import ScenarioError

FIXTURE = Path(__file__).parent.parent / "fixtures" / "dataset"


def _row(**over: object) -> dict[str, object]:
    row: dict[str, object] = {"model": "m", "qhash": "q1", "answer": "a", "confidence": 0.5, "valid": True}
    row.update(over)
    return row


def _write(path: Path, rows: list[object], *, raw_lines: Sequence[bytes] = ()) -> Path:
    data = b"".join(orjson.dumps(r) + b"\n" for r in rows) + b"".join(raw_lines)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def test_answers_read_plain_and_gzip_and_group_by_model_and_variant() -> None:
    """Both plain and gzipped answer files load, keyed by (model, variant) from the rows, not the names."""
    qset = load_question_set(FIXTURE / "shift")
    table = load_answers(FIXTURE / "shift", None)
    assert set(table) == {("dm", "main"), ("dm", "nosurf"), ("dm", "nodist"), ("llm", "main")}
    assert len(table[("llm", "main")]) == 6  # from answers_llm.jsonl.gz
    first = table[("dm", "main")]["q1"]
    assert (first.answer, first.confidence, first.valid, first.error) == (" LOOKUP_client ", 0.9, True, None)
    assert set(table[("dm", "main")]) <= set(qset.questions)


def test_rows_without_variant_are_main() -> None:
    """Common-states rows carry no variant field and are filed under 'main'."""
    table = load_answers(FIXTURE / "common_states")
    assert set(table) == {("dm", "main"), ("llm", "main")}


def test_model_and_variant_filters_keep_only_matching_rows() -> None:
    """Filtering by model and variant drops other rows without failing on them."""
    table = load_answers(FIXTURE / "shift", models={"dm"}, variant="nosurf")
    assert list(table) == [("dm", "nosurf")]


def test_find_answer_files_lists_both_suffixes_sorted() -> None:
    """answers_*.jsonl and answers_*.jsonl.gz are both found, and nothing else."""
    names = [p.name for p in find_answer_files(FIXTURE / "shift")]
    assert names == sorted(names)
    assert "answers_llm.jsonl.gz" in names and "answers_dm.jsonl" in names and len(names) == 4


def test_missing_answers_file_names_the_file(tmp_path: Path) -> None:
    """A missing file is a ScenarioError that names it."""
    with pytest.raises(ScenarioError, match=r"answers_x\.jsonl: file not found"):
        read_answers([tmp_path / "answers_x.jsonl"])


def test_folder_without_answer_files_is_an_error(tmp_path: Path) -> None:
    """A folder with no answers_* file says so instead of scoring nothing."""
    with pytest.raises(ScenarioError, match="no answers_"):
        load_answers(tmp_path)


def test_malformed_json_names_file_and_line(tmp_path: Path) -> None:
    """A line that is not JSON is reported with its file and line number."""
    path = _write(tmp_path / "answers_m.jsonl", [_row()], raw_lines=[b"{not json\n"])
    with pytest.raises(ScenarioError, match=r"answers_m\.jsonl:2: malformed JSON"):
        read_answers([path])


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row(valid="yes"), r":1: field 'valid': input should be a valid boolean"),
        (
            {"model": "m", "qhash": "q1", "confidence": 0.5, "valid": True},
            r":1: missing field 'answer'",
        ),
        (_row(answer=3), r":1: field 'answer': input should be a valid string"),
        (_row(confidence="high"), r":1: field 'confidence': input should be a valid number"),
        (_row(model=None), r":1: field 'model': input should be a valid string"),
        ({"model": "m", "answer": "a", "valid": True}, r":1: missing field 'qhash'"),
    ],
)
def test_malformed_answer_rows_name_file_line_and_field(
    tmp_path: Path, row: dict[str, object], message: str
) -> None:
    """Each kind of bad answer row is rejected with the file, line and field."""
    path = _write(tmp_path / "answers_m.jsonl.gz", [row])
    with pytest.raises(ScenarioError, match=r"answers_m\.jsonl\.gz" + message):
        read_answers([path])


def test_answer_for_unknown_qhash_is_an_error(tmp_path: Path) -> None:
    """With the questions given, an answer to a question not in the set is rejected at its line."""
    path = _write(tmp_path / "answers_m.jsonl", [_row(qhash="q1"), _row(qhash="zz")])
    with pytest.raises(ScenarioError, match=r"answers_m\.jsonl:2: answer for unknown qhash zz"):
        read_answers([path], {"q1": object()})


def test_duplicate_answer_across_files_names_both_places(tmp_path: Path) -> None:
    """The same model, variant and qhash twice is an error, even in two files, and both places are named."""
    a = _write(tmp_path / "answers_a.jsonl", [_row()])
    b = _write(tmp_path / "answers_b.jsonl", [_row(qhash="q2"), _row()])
    with pytest.raises(
        ScenarioError, match=r"answers_b\.jsonl:2: duplicate answer .* first at answers_a\.jsonl:1"
    ):
        read_answers([a, b])


def test_same_qhash_in_two_variants_is_not_a_duplicate(tmp_path: Path) -> None:
    """The shift's variants answer the same qhashes; they are kept apart, not flagged."""
    path = _write(tmp_path / "answers_m.jsonl", [_row(variant="main"), _row(variant="nosurf")])
    assert set(read_answers([path])) == {("m", "main"), ("m", "nosurf")}


def test_truncated_gzip_is_reported(tmp_path: Path) -> None:
    """A cut-off gzip archive gives a ScenarioError naming the file, not a traceback."""
    path = tmp_path / "answers_m.jsonl.gz"
    path.write_bytes(
        gzip.compress(b"".join(orjson.dumps(_row(qhash=f"q{i}")) + b"\n" for i in range(500)))[:60]
    )
    with pytest.raises(ScenarioError, match=r"answers_m\.jsonl\.gz:\d+: cannot read the file"):
        read_answers([path])


def test_isolated_answers_group_by_model() -> None:
    """The isolated file loads per model with source, dp and correctness."""
    rows = read_isolated_answers(FIXTURE / "isolated" / "answers.jsonl.gz")
    assert sorted(rows) == ["dm", "llm"]
    assert [r.correct for r in rows["dm"]] == [True, False, False, True, True]
    assert rows["dm"][1].dp == "tool_params" and rows["dm"][2].source == "bfcl:irrelevance"


def test_isolated_duplicate_and_missing_field(tmp_path: Path) -> None:
    """A repeated (model, id) and a row without 'correct' are both errors at their line."""
    good = {"model": "m", "id": "i1", "source": "bfcl:multiple", "dp": "tool_select", "correct": True}
    path = _write(tmp_path / "answers.jsonl", [good, good])
    with pytest.raises(ScenarioError, match=r"answers\.jsonl:2: duplicate row for model m and item i1"):
        read_isolated_answers(path)
    path = _write(tmp_path / "answers.jsonl", [{k: v for k, v in good.items() if k != "correct"}])
    with pytest.raises(ScenarioError, match=r"answers\.jsonl:1: missing field 'correct'"):
        read_isolated_answers(path)


def test_models_and_leaderboard_readers() -> None:
    """models and the leaderboard load with their ids, levels and printed values."""
    models = read_models(FIXTURE / "models.jsonl")
    assert [(m.id, m.kind) for m in models] == [("dm", "ours"), ("llm", "llm")]
    board = read_leaderboard(FIXTURE / "leaderboard" / "headline_numbers.jsonl")
    assert (board[0].model, board[0].level, board[0].metric, board[0].value, board[0].value_num) == (
        "dm",
        "L1",
        "pooled_accuracy",
        "60.0",
        60.0,
    )
    assert board[0].line == 1 and len(board) == 11


def test_leaderboard_row_without_metric_is_an_error(tmp_path: Path) -> None:
    """A leaderboard row missing its metric names the file and line."""
    path = _write(tmp_path / "headline_numbers.jsonl", [{"model": "m", "level": "L2"}])
    with pytest.raises(ScenarioError, match=r"headline_numbers\.jsonl:1: missing field 'metric'"):
        read_leaderboard(path)


def test_nosurf_questions_keep_main_qhashes_and_carry_the_map(tmp_path: Path) -> None:
    """The nosurf questions file loads with the same qhashes and a map per question."""
    shutil.copytree(FIXTURE / "shift", tmp_path / "shift")
    main = load_question_set(tmp_path / "shift")
    nosurf = load_question_set(tmp_path / "shift", questions_stem="questions_nosurf")
    assert set(main.questions) == set(nosurf.questions)
    assert nosurf.questions["q1"].map == {
        "find_customer": "lookup_client",
        "ask_user": "request_clarification",
        "cancel_order": "cancel_purchase",
        "end": "close_ticket",
    }
