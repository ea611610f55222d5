"""A screen in the runner: the config block, the drawn order of tasks, the jobs' places, live decisions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from knowwhen_runner.config import parse_config
from knowwhen_runner.exceptions import ConfigError
from knowwhen_runner.plan import plan
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.screening import Bounds, Decision, Floor, TopK
from knowwhen_runner.screening.live import Standing, look, name_leaders
from knowwhen_runner.screening.order import complete_prefix, drawn_order, question_places
from knowwhen_runner.sweep.screen import screen_rule

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = (ROOT / "configs" / "quickstart.yaml").read_text()


def _config(screen: str):  # type: ignore[no-untyped-def]
    """The quickstart with ``screen`` added after it (a ``modes:`` line in it replaces the quickstart's)."""
    text = QUICKSTART
    if "\nmodes:" in screen:
        screen, modes = screen.split("\n", 1)
        text = text.replace("modes: [llm, model, gated, shadow]", modes)
    return parse_config(f"{text}\n{screen}\n", base=ROOT / "configs", source="q.yaml")


def test_the_screen_block_is_off_by_default_and_reads_the_issues_forms() -> None:
    """No screen unless asked; top, floor and not_worse_than each parse into one keep."""
    assert _config("").screen is None
    assert _config("screen: {scenario: common, keep: {top: 2}}").screen.keep.top == 2  # type: ignore[union-attr]
    assert _config("screen: {scenario: common, keep: {floor: 0.8}}").screen.alpha == 0.05  # type: ignore[union-attr]
    nwt = _config("screen: {scenario: common, keep: {not_worse_than: {model: prior, margin: 0.02}}}").screen
    assert nwt is not None and nwt.keep.not_worse_than is not None and nwt.keep.not_worse_than.margin == 0.02
    zone = _config("screen: {scenario: common, keep: {top: 2, within: 0.05}}").screen
    assert zone is not None and screen_rule(zone) == TopK(2, within=0.05)
    assert screen_rule(_config("screen: {scenario: common, keep: {top: 2}}").screen) == TopK(2)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("screen", "said"),
    [
        (
            "screen: {scenario: nope, keep: {top: 1}}",
            "q.yaml:69: screen.scenario: 'nope' is not the id of a states scenario",
        ),
        (
            "screen: {scenario: l3, keep: {top: 1}}",
            "q.yaml:69: screen.scenario: 'l3' is not the id of a states scenario",
        ),
        (
            "screen: {scenario: common, alpha: 0, keep: {top: 1}}",
            "q.yaml:69: screen.alpha: Input should be greater than 0",
        ),
        (
            "screen: {scenario: common, keep: {not_worse_than: {model: ghost}}}",
            "q.yaml:69: screen.keep.not_worse_than.model: 'ghost' is not the id of a model that answers 'common'",
        ),
        (
            "screen: {scenario: common, keep: {top: 1, floor: 0.5}}",
            "q.yaml:69: screen.keep: give exactly one of",
        ),
        (
            "screen: {scenario: common, keep: {floor: 0.5, within: 0.05}}",
            "q.yaml:69: screen.keep: within goes with top only",
        ),
        ("screen: {scenario: common, keep: {top: 3}}", "q.yaml:69: screen.keep.top: 3 keeps every model"),
        (
            "screen: {scenario: common, keep: {not_worse_than: {model: agent-sim}}}\nmodes: [model, shadow]",
            "q.yaml:69: screen.keep.not_worse_than.model: 'agent-sim' is not the id of a model that answers",
        ),
    ],
)
def test_a_wrong_screen_is_one_sentence_naming_its_line_and_field(screen: str, said: str) -> None:
    """An unknown scenario, an unknown model, a bad alpha or two keeps: one line naming file, line and field."""
    with pytest.raises(ConfigError) as err:
        _config(screen)
    assert str(err.value).startswith(said) and "\n" not in str(err.value)


def test_the_drawn_order_is_a_seeded_permutation_whatever_the_input_order() -> None:
    """The same seed gives the same order of the same tasks; another seed another order."""
    tasks = [f"t{i}" for i in range(50)]
    first = drawn_order(tasks, 0)
    assert sorted(first) == sorted(tasks) and first == drawn_order(reversed(tasks), 0)
    assert first != drawn_order(tasks, 1) and first != sorted(tasks)


def test_a_shared_question_takes_its_earliest_task_and_a_task_completes_with_all_before_it() -> None:
    """Places are the earliest task's; the complete prefix stops at the first task with a question open."""
    places = question_places(
        [("b", "q1"), ("a", "q1"), ("a", "q2"), ("c", "q3"), ("x", "q4")], ["a", "b", "c"]
    )
    assert places == {"q1": 0, "q2": 0, "q3": 2}
    by_place = [["q1", "q2"], [], ["q3"]]
    assert complete_prefix({"q1"}, by_place) == 0
    assert complete_prefix({"q1", "q2"}, by_place) == 2
    assert complete_prefix({"q1", "q2", "q3"}, by_place) == 3


@pytest.mark.parametrize(
    ("keep", "places"),
    [("{floor: 0.5}", 60), ("{top: 1, within: 0.05}", 60), ("{top: 1}", 383)],  # tasks; plain top: questions
)
def test_screened_jobs_get_their_drawn_places_and_keep_their_ids(keep: str, places: int) -> None:
    """Screening the common states changes the claim order of its jobs, never their ids; others stay at 0.
    Plain top k draws its 383 questions, each a place of its own; the other questions draw the 60 tasks."""
    plain, screened = _config(""), _config(f"screen: {{scenario: common, keep: {keep}}}")
    scenarios = {s.id: load_scenario(s) for s in plain.scenarios if s.kind == "states"}
    plain = plain.model_copy(update={"scenarios": [s for s in plain.scenarios if s.kind == "states"]})
    screened = screened.model_copy(update={"scenarios": plain.scenarios})
    a, b = plan(plain, scenarios).jobs, plan(screened, scenarios).jobs
    assert [j.id for j in a] == [j.id for j in b] and all(j.draw == 0 for j in a)
    common = [j for j in b if j.scenario_id == "common"]
    assert {j.draw for j in common} <= set(range(-places, 0)) and len({j.draw for j in common}) > places / 2
    assert all(j.draw == 0 for j in b if j.scenario_id != "common")
    by_model = {}
    for j in common:
        by_model.setdefault(j.model_id, {})[j.item] = j.draw
    assert len({tuple(sorted(d.items())) for d in by_model.values()}) == 1  # one order for every model
    if places == 383:  # a place per question
        assert len(set(by_model["agent-sim"].values())) == len(by_model["agent-sim"]) == 383


def test_a_look_decides_each_model_on_its_own_prefix_and_keeps_earlier_decisions() -> None:
    """A model far below the floor is dropped on its few tasks; one decided earlier keeps its standing."""
    rng = np.random.default_rng(3)
    values = {
        "good": np.clip(rng.normal(0.95, 0.03, 150), 0, 1),
        "bad": np.zeros(12),
        "slow": np.full(2, 0.5),
    }
    earlier = {"slow": Standing(Bounds(0.9, 0.99), 2, Decision.KEEP)}
    now = look(Floor(0.8), values, 200, 0.05, earlier)
    assert now["bad"].decision is Decision.DROP and now["bad"].tasks == 12
    assert now["good"].decision is Decision.KEEP and now["good"].bounds.lower >= 0.8
    assert now["slow"] == earlier["slow"]
    assert look(TopK(1), {"a": np.ones(3), "b": np.ones(3)}, 200, 0.05, {})["a"].decision is None


def test_plain_top_k_looks_settle_nothing_before_its_leaders_are_named_then_pair_each_model_with_them() -> (
    None
):
    """Leaders wait for every model's first questions; then a model far below them is dropped on the
    questions it shares with them, and one with too few questions stays open."""
    early = {"a": np.ones(3), "b": np.ones(30)}
    assert name_leaders(TopK(1), early, 200) is None  # leaders after 20 questions of every model
    assert all(s.decision is None for s in look(TopK(1), early, 200, 0.05, {}).values())
    rng = np.random.default_rng(4)
    values = {
        "good": np.clip(rng.normal(0.95, 0.03, 150), 0, 1),
        "bad": np.zeros(40),
        "young": np.full(24, 0.9),
    }
    leaders = name_leaders(TopK(1), values, 200)
    assert leaders == ["good"] and name_leaders(Floor(0.5), values, 200) is None
    now = look(TopK(1), values, 200, 0.05, {}, leaders)
    assert now["bad"].decision is Decision.DROP and now["bad"].above == 1
    assert now["young"].decision is None and now["young"].above == 0
    assert now["good"].decision is None and now["good"].above is None
    assert look(TopK(1), values, 200, 0.05, {}, None)["bad"].decision is None  # no leaders, no decision


def test_an_order_of_questions_weighs_each_question_as_the_cards_rule_does() -> None:
    """Per-task, then the mean over tasks: a question shared by two tasks carries both tasks' shares, and
    once every question is in, the values' mean times the scale is the card's accuracy, exactly."""
    from knowwhen_runner.dataset.answer_key import AnswerKey
    from knowwhen_runner.dataset.files import Answer
    from knowwhen_runner.plan.draws import ScreenKey
    from knowwhen_runner.sweep.screen import Screen

    # tasks A (q1, q2, q3), B (q3 shared, q4), C (q5); the right tool is "t" everywhere
    tasks, qhashes, index = ("A", "B", "C"), ("q1", "q2", "q3", "q3", "q4", "q5"), (0, 0, 0, 1, 1, 2)
    n = len(qhashes)
    key = AnswerKey(
        tasks, qhashes, index, (frozenset({"t"}),) * n, ("s",) * n, (False,) * n, {}, (), n, len(tasks)
    )
    order = ["q3", "q5", "q1", "q4", "q2"]
    config = _config("screen: {scenario: common, keep: {top: 1}}")
    screen = Screen(config, None, ScreenKey(key, order, {q: i for i, q in enumerate(order)}, "questions"))  # type: ignore[arg-type]
    right = {"q1", "q3", "q4"}  # A: 2/3, B: 2/2, C: 0/1 -> (2/3 + 1 + 0) / 3
    answers = {q: Answer(q, "t" if q in right else "x", 0.9, True, None, 0.0, None, None) for q in order}
    screen._answers = {m: dict(answers) for m in screen.models}
    values = screen.values()["agent-sim"]
    assert len(values) == 5 and values.max() <= 1.0 + 1e-12
    assert values.mean() * screen.scale == pytest.approx((2 / 3 + 1 + 0) / 3)
    # q5 is all of task C, the largest share (1/3 of the accuracy); q3 holds A's third and B's half of a
    # task (1/9 + 1/6), five sixths of that
    assert screen.scale == pytest.approx(5 / 3)
    assert values[0] == pytest.approx(5 / 6) and values[1] == 0.0 and values[2] == pytest.approx(1 / 3)
    screen._answers = {m: {q: a for q, a in answers.items() if q != "q5"} for m in screen.models}
    assert len(screen.values()["agent-sim"]) == 1  # the prefix stops at the first question still open


def test_a_models_sequence_over_time_keeps_its_first_and_latest_points_and_stays_small() -> None:
    """A point per look that saw more answers (or decided), thinned past 48: the first look and the latest
    stay, in order; the record's line, the manifest's record and status show them."""
    from knowwhen_runner.cli.status import _over_time
    from knowwhen_runner.results.screen_record import ScreenRecord, screen_record, sequence_svg
    from knowwhen_runner.sweep.screen import HISTORY_POINTS, _record

    row = None
    for tasks in [*range(1, 200), 199]:  # the last look sees nothing new
        s = Standing(Bounds(0.5 - 0.4 / tasks, 0.5 + 0.4 / tasks), tasks)
        row = _record(s, row, 1000.0 + tasks)
    assert row is not None
    history = row["history"]
    assert len(history) <= HISTORY_POINTS and history[0][0] == 1 and history[-1][0] == 199
    assert [p[0] for p in history] == sorted({p[0] for p in history})  # in order, each once
    row = _record(Standing(Bounds(0.49, 0.51), 199, Decision.DROP), row, 2000.0)
    assert row["history"][-1] == [199, 0.49, 0.51, 2000.0]  # the decision's look is a point of its own
    meta = {"screen": {"scenario": "common", "alpha": 0.05, "alpha_each": 0.01, "keep": {"floor": 0.5},
                       "seed": 0, "tasks": 200, "models": {"m": {**row, "decided_at": 2000.0}}}}  # fmt: skip
    record = screen_record(meta, "m", 12)
    assert isinstance(record, ScreenRecord) and record.history[-1] == (199, 0.49, 0.51, 2000.0)
    assert sequence_svg(record).count("<polygon") == 1
    assert _over_time(row["history"]).endswith("199: 0.49–0.51") and _over_time([]) == ""
