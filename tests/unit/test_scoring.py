"""L2 and L1 scoring against hand-computed expectations and against the dataset card's own snippet."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.dataset.files import (
    Answer,
    Corpus,
    IsolatedAnswer,
    Occurrence,
    Question,
    QuestionSet,
    load_answers,
    load_question_set,
)
from knowwhen_runner.dataset.scoring import compile_key, gated_open_loop, score_l1, score_l2
from knowwhen_runner.exceptions import ScenarioError
from tests.card_snippet import card_score

FIXTURE = Path(__file__).parent.parent / "fixtures" / "dataset"


def _ans(answer: str | None, conf: float | None = 0.5, *, valid: bool = True, error: Any = None) -> Answer:
    return Answer("", answer, conf, valid, error, 0.0, None, None)


def _occ(
    task: str, qhash: str, acceptable: tuple[str, ...], *, gold: str = "", stratum: str = "on_plan"
) -> Occurrence:
    return Occurrence(task=task, qhash=qhash, gold=gold, acceptable_tools=acceptable, stratum=stratum)


def _qset(
    occurrences: list[Occurrence], eligible: tuple[str, ...], maps: dict[str, dict[str, str]] | None = None
) -> QuestionSet:
    qhashes = {o.qhash for o in occurrences}
    questions = {q: Question(q, "state", ("a",), (None,), (maps or {}).get(q)) for q in qhashes}
    return QuestionSet(Path("mem"), questions, occurrences, Corpus(eligible))


def _answers(**by_qhash: Answer) -> dict[str, Answer]:
    return by_qhash


def test_case_and_whitespace_are_ignored_on_both_sides() -> None:
    """An answer matches an acceptable tool after trimming and lower-casing both."""
    qs = _qset([_occ("T", "q1", (" Find_Customer ",)), _occ("T", "q2", ("end",))], ("T",))
    result = score_l2(_answers(q1=_ans("  FIND_customer\n"), q2=_ans("End ")), qs)
    assert result.accuracy == 100.0


def test_empty_acceptable_list_falls_back_to_gold() -> None:
    """With no acceptable tools listed, the gold tool is the only right answer."""
    qs = _qset([_occ("T", "q1", (), gold="cancel_order"), _occ("T", "q2", (), gold="end")], ("T",))
    result = score_l2(_answers(q1=_ans("cancel_order"), q2=_ans("cancel_order")), qs)
    assert result.accuracy == 50.0


@pytest.mark.parametrize(
    "answer",
    [
        _ans("a", error="timeout"),
        _ans("a", error={"status": 500}),
        _ans("a", valid=False),
        _ans(None),
        None,
    ],
    ids=["error-string", "error-object", "invalid", "null-answer", "missing"],
)
def test_unusable_answers_are_wrong_even_when_they_name_the_right_tool(answer: Answer | None) -> None:
    """Missing, errored, invalid and null answers count as wrong; the occurrence still counts."""
    qs = _qset([_occ("T", "q1", ("a",)), _occ("T", "q2", ("a",))], ("T",))
    answers = {"q2": _ans("a")}
    if answer is not None:
        answers["q1"] = answer
    result = score_l2(answers, qs)
    assert (result.accuracy, result.n_occurrences) == (50.0, 2)
    assert result.n_unanswered == (1 if answer is None else 0)


def test_falsy_error_values_do_not_make_an_answer_wrong() -> None:
    """An error field that is empty ('' or 0 or {}) is not an error, as in the card's `if a["error"]`."""
    qs = _qset([_occ("T", f"q{i}", ("a",)) for i in range(3)], ("T",))
    result = score_l2({"q0": _ans("a", error=""), "q1": _ans("a", error=0), "q2": _ans("a", error={})}, qs)
    assert result.accuracy == 100.0


def test_accuracy_is_mean_per_task_then_over_tasks() -> None:
    """Task T1 at 1/4 and T2 at 1/1 give 62.5, not the pooled 2/5 = 40."""
    occ = [_occ("T1", f"a{i}", ("x",)) for i in range(4)] + [_occ("T2", "b0", ("x",))]
    answers = {"a0": _ans("x"), "a1": _ans("y"), "a2": _ans("y"), "a3": _ans("y"), "b0": _ans("x")}
    result = score_l2(answers, _qset(occ, ("T1", "T2")))
    assert result.accuracy == pytest.approx(62.5)
    assert (result.n_tasks, result.n_occurrences) == (2, 5)


def test_tasks_not_eligible_are_excluded_and_empty_eligible_tasks_are_left_out() -> None:
    """Occurrences of a task outside corpus.json do not count; an eligible task with none is skipped, not 0."""
    occ = [_occ("T1", "q1", ("x",)), _occ("T9", "q2", ("x",))]
    result = score_l2({"q1": _ans("x"), "q2": _ans("y")}, _qset(occ, ("T1", "T4")))
    assert (result.accuracy, result.n_tasks, result.n_occurrences, result.n_empty_tasks) == (100.0, 1, 1, 1)


def test_no_eligible_occurrence_is_an_error() -> None:
    """A key whose occurrences all fall outside the eligible tasks cannot be scored, and says so."""
    with pytest.raises(ScenarioError, match="no occurrence belongs to an eligible task"):
        compile_key(_qset([_occ("T9", "q1", ("x",))], ("T1",)))


def test_nosurf_answers_are_mapped_to_shifted_names_before_scoring() -> None:
    """An answer in original names is renamed through the question's map (case-insensitively), then scored."""
    mapping = {"ask_user": "request_clarification", "end": "close_ticket"}
    occ = [
        _occ("T", "q1", ("request_clarification",)),
        _occ("T", "q2", ("close_ticket",)),
        _occ("T", "q3", ("x",)),
    ]
    qs = _qset(occ, ("T",), {"q1": mapping, "q2": mapping, "q3": mapping})
    result = score_l2({"q1": _ans("ask_user"), "q2": _ans(" END "), "q3": _ans("x")}, qs)
    assert result.accuracy == 100.0  # q3: a name not in the map is kept as it is
    unmapped = score_l2({"q1": _ans("ask_user")}, _qset(occ[:1], ("T",)))
    assert unmapped.accuracy == 0.0


def test_must_ask_is_the_subset_whose_only_acceptable_tool_is_request_clarification() -> None:
    """Only occurrences with exactly {request_clarification} count; aggregated per task then mean."""
    occ = [
        _occ("T1", "m1", ("request_clarification",)),
        _occ("T1", "m2", (" Request_Clarification ",)),
        _occ("T1", "x1", ("request_clarification", "lookup_client")),  # not must-ask: another tool is fine
        _occ("T2", "m3", (), gold="request_clarification"),  # gold fallback makes it must-ask
        _occ("T3", "x2", ("lookup_client",)),
    ]
    answers = {"m1": _ans("request_clarification"), "m2": _ans("lookup_client"), "m3": _ans("lookup_client")}
    result = score_l2(answers, _qset(occ, ("T1", "T2", "T3")))
    # T1 must-ask 1/2, T2 must-ask 0/1 -> (0.5 + 0) / 2 = 25 (pooled would be 1/3)
    assert result.must_ask == pytest.approx(25.0)
    assert result.n_must_ask == 3


def test_must_ask_is_none_when_the_subset_is_empty() -> None:
    """A question set without must-ask states (the common states) reports must_ask as None."""
    result = score_l2({"q1": _ans("ask_user")}, _qset([_occ("T", "q1", ("ask_user",))], ("T",)))
    assert result.must_ask is None and result.n_must_ask == 0


def test_strata_are_scored_per_task_then_mean() -> None:
    """Each stratum averages its occurrences per task, over the tasks that have it."""
    occ = [
        _occ("T1", "a", ("x",), stratum="on_plan"),
        _occ("T1", "b", ("x",), stratum="after_off_plan"),
        _occ("T1", "c", ("x",), stratum="after_off_plan"),
        _occ("T2", "d", ("x",), stratum="on_plan"),
    ]
    answers = {"a": _ans("x"), "b": _ans("x"), "c": _ans("y"), "d": _ans("y")}
    result = score_l2(answers, _qset(occ, ("T1", "T2")))
    on, off = result.strata["on_plan"], result.strata["after_off_plan"]
    assert (on.accuracy, on.n_tasks, on.n_occurrences) == (50.0, 2, 2)
    assert (off.accuracy, off.n_tasks, off.n_occurrences) == (50.0, 1, 2)
    assert result.accuracy == pytest.approx((2 / 3 + 0) / 2 * 100)


def test_fixture_shift_scores_match_hand_computation() -> None:
    """The fixture's shift set: dm main 1/3, must-ask 0, strata 1/3 and 1/4; llm 11/12 and must-ask 100."""
    qs = load_question_set(FIXTURE / "shift")
    table = load_answers(FIXTURE / "shift", qs.questions, variant="main")
    dm, llm = score_l2(table[("dm", "main")], qs), score_l2(table[("llm", "main")], qs)
    assert dm.accuracy == pytest.approx(100 / 3) and dm.must_ask == 0.0
    assert dm.strata["on_plan"].accuracy == pytest.approx(100 / 3)
    assert dm.strata["after_off_plan"].accuracy == pytest.approx(25.0)
    assert (dm.n_tasks, dm.n_occurrences, dm.n_unanswered, dm.n_empty_tasks) == (3, 7, 1, 1)
    assert llm.accuracy == pytest.approx(275 / 3) and llm.must_ask == 100.0


def test_fixture_nosurf_and_nodist_variants() -> None:
    """dm's nosurf answers score 2/3 after renaming; its nodist answers score 1.25/3."""
    nosurf = load_question_set(FIXTURE / "shift", questions_stem="questions_nosurf")
    table = load_answers(FIXTURE / "shift", nosurf.questions)
    assert score_l2(table[("dm", "nosurf")], nosurf).accuracy == pytest.approx(200 / 3)
    nodist = load_question_set(FIXTURE / "shift", questions_stem="questions_nodist")
    assert score_l2(table[("dm", "nodist")], nodist).accuracy == pytest.approx(125 / 3)


def _card_reference(folder: Path, model: str, variant: str | None) -> float:
    """The dataset card's scoring snippet, unchanged but for reading the local files with json/gzip."""

    def rows(name: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for path in sorted(folder.glob(name)):
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt") as fh:
                out += [json.loads(line) for line in fh if line.strip()]
        return out

    key = rows("occurrences.jsonl*")
    eligible = set(json.loads((folder / "corpus.json").read_text())["eligible_tasks"])
    key = [occ for occ in key if occ["task"] in eligible]  # the card's text: tasks listed in corpus.json
    ans = {
        r["qhash"]: r for r in rows("answers_*.jsonl*") if r["model"] == model and r.get("variant") == variant
    }

    return card_score(key, ans)


@pytest.mark.parametrize(
    ("folder", "model", "variant"),
    [
        ("shift", "dm", "main"),
        ("shift", "llm", "main"),
        ("common_states", "dm", None),
        ("common_states", "llm", None),
    ],
)
def test_agrees_with_the_cards_reference_snippet(folder: str, model: str, variant: str | None) -> None:
    """scoring.score_l2 gives exactly what the card's snippet gives on the fixture files."""
    qs = load_question_set(FIXTURE / folder)
    table = load_answers(FIXTURE / folder, qs.questions)
    ours = score_l2(table[(model, variant or "main")], qs).accuracy
    assert ours == pytest.approx(_card_reference(FIXTURE / folder, model, variant), abs=1e-9)


def test_l1_pooled_and_bfcl_tool_choice() -> None:
    """Pooled = mean of correct over all rows; BFCL tool choice = tool_select rows from a bfcl source only."""
    rows = [
        IsolatedAnswer("1", "bfcl:simple_python", "tool_select", True, 0.9, None),
        IsolatedAnswer("1/param/x", "bfcl:simple_python", "tool_params", False, 0.9, None),
        IsolatedAnswer("2", "bfcl:irrelevance", "tool_select", False, 0.9, None),
        IsolatedAnswer("3", "when2call:test", "tool_select", True, 0.9, None),
    ]
    score = score_l1(rows)
    assert (score.pooled, score.bfcl_tool_choice, score.n_items, score.n_bfcl_tool_choice) == (
        50.0,
        50.0,
        4,
        2,
    )
    assert score_l1(rows[3:]).bfcl_tool_choice is None


def test_gated_end_points_are_the_llm_and_the_model() -> None:
    """τ above every confidence gives the LLM's task-mean accuracy; τ = 0 gives the model's."""
    qs = load_question_set(FIXTURE / "shift")
    table = load_answers(FIXTURE / "shift", qs.questions, variant="main")
    report = gated_open_loop(table[("dm", "main")], table[("llm", "main")], qs, target=0.75)
    assert report.llm_accuracy == pytest.approx(11 / 12) and report.curve[0].coverage == 0.0
    assert report.model_accuracy == pytest.approx(1 / 3)
    assert (report.curve[-1].threshold, report.curve[-1].coverage) == (0.0, 1.0)
    # dm's usable confidences are 0.9 (q1), 0.8 (q3), 0.7 (q4): all right, so τ = 0.7 covers 3 of 7
    assert report.fit is not None and report.fit.threshold == 0.7 and report.fit.support == 3
    # at τ = 0.7: T1 takes dm's q3 (right, LLM wrong) -> T1 1.0, T2 1.0, T3 1.0
    assert report.at_fit is not None and report.at_fit.accuracy == pytest.approx(1.0)
