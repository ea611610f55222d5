"""A scenario's ``limit`` is a seeded sample spread over what it holds, the same on every machine."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from knowwhen_runner.config import ScenarioSpec
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.dataset.subset import stratified, whole_groups
from knowwhen_runner.gym import get_suite, make_task
from knowwhen_runner.plan.stamp import scenario_ident
from knowwhen_runner.scenarios.episodes import load_episodes
from knowwhen_runner.scenarios.isolated import load_isolated
from knowwhen_runner.scenarios.states import load_states, planned_questions
from tests.l1data import FIXTURE

COMMON = Path(__file__).resolve().parents[2] / "scenarios" / "decisiongym" / "common"
BFCL = ("simple_python", "multiple", "live_simple", "live_multiple", "irrelevance", "live_irrelevance")
# Seed 0's sample of 10 of the fixture's 18 items, pinned: a change to the draw is deliberate.
PINNED = [
    "0b1f5c2e-0000-4000-8000-000000000002",
    "0b1f5c2e-0000-4000-8000-000000000003",
    "0b1f5c2e-0000-4000-8000-000000000004",
    "irrelevance_1",
    "live_irrelevance_0-0-0",
    "live_multiple_1-0-1",
    "live_simple_1-1-0",
    "multiple_1",
    "simple_python_0",
    "simple_python_1",
]


def _isolated(**kw: object) -> ScenarioSpec:
    return ScenarioSpec.model_validate({"id": "l1", "kind": "isolated", "path": str(FIXTURE), **kw})


def test_a_limit_on_an_isolated_scenario_asks_every_category() -> None:
    """With as many items as strata, every BFCL category and every When2Call answer kind is asked (string
    order would ask five When2Call items and the irrelevance ones, nothing else)."""
    scenario = load_isolated(_isolated(limit=9))
    items = scenario.items.values()
    assert len(scenario.items) == 9
    assert {i["category"] for i in items if i["source"].startswith("bfcl:")} == set(BFCL)
    asked = {
        i["gold"][0] if i["gold"][0] in ("ask_user", "none") else "tool"
        for i in items
        if "when2call" in i["source"]
    }
    assert asked == {"ask_user", "none", "tool"}
    assert scenario.subset is not None and (scenario.subset.asked, scenario.subset.of) == (9, 18)


def test_the_sample_is_the_same_on_every_machine_and_follows_its_seed() -> None:
    """Seed 0 gives the pinned sample, in this interpreter and in one with another hash seed; seed 1 another."""
    assert sorted(load_isolated(_isolated(limit=10)).items) == PINNED
    code = (
        "from pathlib import Path; from knowwhen_runner.config import ScenarioSpec; "
        "from knowwhen_runner.scenarios.isolated import load_isolated; "
        f"print(sorted(load_isolated(ScenarioSpec(id='l1', kind='isolated', path=Path({str(FIXTURE)!r}), "
        "limit=10)).items))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": "12345"},
        check=True,
    )
    assert other.stdout.strip() == str(PINNED)
    reseeded = sorted(load_isolated(_isolated(limit=10, seed=1)).items)
    assert reseeded != PINNED and len(reseeded) == 10


def test_strata_are_sampled_in_proportion_after_one_each() -> None:
    """90 and 10 items give 18 and 2 of 20; fewer draws than strata take distinct strata."""
    strata = {f"a{i}": "a" for i in range(90)} | {f"b{i}": "b" for i in range(10)}
    drawn = stratified(strata, 20, 0)
    assert Counter(strata[k] for k in drawn) == {"a": 18, "b": 2}
    many = {f"s{i}-{j}": f"s{i}" for i in range(8) for j in range(5)}
    assert len({many[k] for k in stratified(many, 5, 3)}) == 5


def test_a_states_sample_takes_whole_tasks_within_the_limit() -> None:
    """Every occurrence of a drawn task is asked, no other task's is, and the questions fit the limit."""
    spec = ScenarioSpec(id="common", path=COMMON, limit=40, seed=7)
    qset = load_question_set(COMMON)
    planned = planned_questions(spec, qset)
    assert planned.tasks and planned.subset is not None
    drawn = set(planned.tasks)
    asked = set(planned.qhashes)
    assert asked == {o.qhash for o in qset.occurrences if o.task in drawn}
    assert len(asked) <= 40 and planned.subset.tasks_asked == len(drawn) < planned.subset.tasks_of
    assert set(load_states(spec).items) == asked
    one = planned_questions(spec.model_copy(update={"limit": 1}), qset)
    assert one.tasks is not None and len(one.tasks) == 1  # the first task whole, over the limit


def test_whole_groups_stop_before_the_limit_is_passed() -> None:
    """Groups are taken in seeded order until the next one would pass the limit."""
    groups = {f"t{i}": {f"t{i}q{j}" for j in range(3)} for i in range(10)}
    assert len(whole_groups(groups, 10, 0)) == 3
    assert whole_groups(groups, 10, 0) == whole_groups(dict(reversed(groups.items())), 10, 0)


def test_an_episodes_sample_spreads_over_task_kinds() -> None:
    """12 of 40 tasks cover every task kind of the suite; each task keeps its place in the list."""
    spec = ScenarioSpec(id="l3", kind="episodes", suite="common", split="bench", n=40, limit=12)
    scenario = load_episodes(spec)
    suite = get_suite("common")
    kinds = {make_task(suite, item["seed"]).kind for item in scenario.items.values()}
    every = {
        make_task(suite, item["seed"]).kind
        for item in load_episodes(spec.model_copy(update={"limit": None})).items.values()
    }
    assert len(scenario.items) == 12 and kinds == every
    assert scenario.subset is not None and (scenario.subset.asked, scenario.subset.of) == (12, 40)
    assert all(item["index"] < 40 for item in scenario.items.values())


def test_a_limit_that_covers_everything_is_no_subset() -> None:
    """A limit at or above what the scenario holds asks the whole of it, and says no subset."""
    assert load_isolated(_isolated(limit=100)).subset is None
    assert load_states(ScenarioSpec(id="common", path=COMMON, limit=100_000)).subset is None


def test_stamps_of_a_config_without_a_seed_are_unchanged() -> None:
    """A scenario that sets no seed is stamped as before the field existed; a limit stamps its draw."""
    plain = ScenarioSpec(id="common", path=COMMON)
    assert scenario_ident(plain) == {k: v for k, v in plain.model_dump(mode="json").items() if k != "seed"}
    limited = scenario_ident(plain.model_copy(update={"limit": 5}))
    assert limited["sample"] and scenario_ident(plain.model_copy(update={"limit": 5, "seed": 2})) != limited


def test_a_seed_without_a_limit_is_refused() -> None:
    """A seed draws the limit's sample: alone it is an error naming the field."""
    with pytest.raises(ValidationError, match="seed: only a scenario with a limit"):
        ScenarioSpec(id="common", path=COMMON, seed=3)
