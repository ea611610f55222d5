"""DecisionGym task generation: determinism, suites, and the option lists."""

from __future__ import annotations

import pytest

from knowwhen_runner.exceptions import ScenarioError
from knowwhen_runner.gym import SUITES, Suite, get_suite, make_task, shift_map, suite_tools
from knowwhen_runner.gym.suite import SHIFT_KINDS
from knowwhen_runner.gym.tools import CORE_ROLES


def test_same_seed_same_task() -> None:
    """Building a task twice from the same suite and seed gives an identical world and request."""
    a, b = make_task(SUITES["common"], 123), make_task(SUITES["common"], 123)
    assert a.world.snapshot() == b.world.snapshot()
    assert (a.request, a.goals, a.customer_id, a.order_id) == (b.request, b.goals, b.customer_id, b.order_id)


def test_different_seeds_different_worlds() -> None:
    """Different seeds give different worlds (customers, e-mails and orders)."""
    emails = {tuple(c.email for c in make_task(SUITES["common"], s).world.customers) for s in range(50)}
    assert len(emails) == 50
    requests = {make_task(SUITES["common"], s).request for s in range(50)}
    assert len(requests) == 50


def test_suite_json_round_trip() -> None:
    """A suite survives to_json/from_json, and its digest (part of task ids) depends only on its settings."""
    for suite in SUITES.values():
        back = Suite.from_json(suite.to_json())
        assert back == suite and back.digest == suite.digest
    assert get_suite(SUITES["hard"].to_json()) == SUITES["hard"]


def test_bad_suite_is_a_scenario_error() -> None:
    """Unknown kinds, rules or fields are refused with a ScenarioError."""
    with pytest.raises(ScenarioError):
        Suite(kinds=("teleport",))
    with pytest.raises(ScenarioError):
        Suite(multi_rule="bogus")
    with pytest.raises(ScenarioError):
        Suite.from_json('{"colour": "red"}')
    with pytest.raises(ScenarioError):
        get_suite("nope")


def test_option_counts_and_order() -> None:
    """Common tasks offer 69 tools and shift tasks 129, sorted by name, with no duplicate names."""
    common, shift = make_task(SUITES["common"], 1), make_task(SUITES["shift"], 1)
    assert len(common.options) == 69 and len(shift.options) == 129
    for task in (common, shift):
        assert list(task.options) == sorted(set(task.options))
        assert all(t.description for t in task.tools)


def test_shift_renames_every_core_tool() -> None:
    """The shift renames each core tool (ask_user becomes request_clarification) and collides with nothing."""
    mapping = shift_map(SUITES["shift"])
    assert mapping["ask_user"] == "request_clarification"
    core = [r for r in CORE_ROLES if r in mapping]
    assert all(mapping[r] != r for r in core)
    originals = {t.name for t in suite_tools(SUITES["shift"], original_names=True)}
    assert set(mapping) == originals and len(set(mapping.values())) == len(mapping)


def test_shift_has_new_kinds_and_hard_has_tier_rule() -> None:
    """The shift suite draws kinds the common suite lacks; the hard suite makes store credit a core tool."""
    kinds = {make_task(SUITES["shift"], s).kind for s in range(200)}
    assert set(SHIFT_KINDS) <= kinds
    hard = [make_task(SUITES["hard"], s) for s in range(100)]
    roles = {g.role for t in hard for g in t.goals}
    assert {"refund_order", "issue_store_credit"} <= roles
    assert (
        "issue_store_credit" in hard[0].options
        and "issue_store_credit" not in make_task(SUITES["common"], 0).options
    )


def test_some_tasks_hold_back_information() -> None:
    """With the default ask rate, some requests omit identity, the order, or the new address."""
    variants = " ".join(make_task(SUITES["shift"], s).variant for s in range(200))
    for marker in ("identity=none", "identity=name_only", "order=ambiguous", "address=missing"):
        assert marker in variants
