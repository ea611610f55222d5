"""The DecisionGym environment: canonical plans succeed, mistakes fail, bad calls are observations."""

from __future__ import annotations

import pytest

from knowwhen_runner.gym import SUITES, GymEnv, canonical_plan, make_task, replay
from knowwhen_runner.gym.tools import ASK, CANCEL, LIST_ORDERS, REPLY


def _name(task, role: str) -> str:  # type: ignore[no-untyped-def]
    return next(t.name for t in task.tools if t.role == role)


@pytest.mark.parametrize("suite", ["common", "shift", "hard"])
def test_canonical_plan_succeeds_for_every_task(suite: str) -> None:
    """Replaying the canonical plan in a fresh environment solves every one of 150 tasks."""
    for seed in range(150):
        task = make_task(SUITES[suite], seed)
        env = replay(task, canonical_plan(task))
        assert env.done and env.success(), (task.task_id, task.variant)


def test_skipping_a_required_change_fails() -> None:
    """Replying without making the required change fails the task."""
    checked = 0
    for seed in range(60):
        task = make_task(SUITES["common"], seed)
        if not task.goals:
            continue
        plan = [s for s in canonical_plan(task) if s.tool != task.goals[0].role]
        assert not replay(task, plan).success()
        checked += 1
    assert checked > 40  # most tasks have a change to make (51 of these 60)


def test_no_reply_fails() -> None:
    """Making every change but never telling the customer is not a success."""
    task = make_task(SUITES["common"], 3)
    env = replay(task, canonical_plan(task)[:-1])
    assert not env.done and not env.success()


def test_wrong_mutation_fails() -> None:
    """Cancelling another open order as well (a harmful extra call) fails the task."""
    checked = 0
    for seed in range(200):
        task = make_task(SUITES["common"], seed)
        others = [o for o in task.world.orders if o.status == "processing" and o.id != task.order_id]
        if not others:
            continue
        plan = canonical_plan(task)
        wrong = (_name(task, CANCEL), {"order_id": others[0].id})
        env = replay(task, [*plan[:-1], wrong, plan[-1]])
        assert not env.success()
        checked += 1
    assert checked > 20


def test_write_distractor_fails_and_read_distractor_does_not() -> None:
    """A distractor that changes something fails the task; one that only reads does not."""
    task = make_task(SUITES["common"], 5)
    plan = canonical_plan(task)
    env = replay(
        task, [*plan[:-1], ("refund_shipping_fee", {"order_id": task.order_id, "amount": 5}), plan[-1]]
    )
    assert not env.success()
    env = replay(task, [*plan[:-1], ("find_customer_by_phone", {"phone": "555-000-0000"}), plan[-1]])
    assert env.success()


def test_bad_calls_are_error_observations() -> None:
    """An unknown tool, missing or extra arguments, or wrong types give an ERROR observation, not an exception."""
    task = make_task(SUITES["common"], 8)
    env = GymEnv(task)
    assert env.execute("teleport", {}).startswith("ERROR")
    assert "missing" in env.execute(_name(task, LIST_ORDERS), {})
    assert "unexpected" in env.execute(_name(task, LIST_ORDERS), {"customer_id": "C-1", "x": 1})
    assert "must be a" in env.execute("refund_order", {"order_id": "O-1", "amount": "lots"})
    assert env.execute("refund_order", {"order_id": task.order_id, "amount": 10**6}).startswith("ERROR")
    assert env.execute("list_orders", None).startswith("ERROR")  # type: ignore[arg-type]
    assert len(env.history) == 6 and not env.done


def test_reply_ends_the_episode() -> None:
    """After the final reply the episode is done and further calls are refused."""
    task = make_task(SUITES["common"], 2)
    env = GymEnv(task)
    env.execute(_name(task, REPLY), {"message": "bye"})
    assert env.done
    assert "closed" in env.execute(_name(task, LIST_ORDERS), {"customer_id": task.customer_id})
    assert len(env.history) == 1


def test_customer_reply_reveals_asked_facts() -> None:
    """The simulated customer answers from the hidden facts: e-mail, name and zip, order id, new address."""
    task = next(t for t in (make_task(SUITES["shift"], s) for s in range(200)) if t.new_address)
    env = GymEnv(task)
    assert task.customer.email in env.customer_reply("What's your e-mail address?")
    assert task.customer.zip in env.customer_reply("Your name and zip code, please?")
    assert task.order_id in env.customer_reply("Which order is it?")
    assert task.new_address in env.customer_reply("What is the new delivery address?")
    assert {"email", "name_zip", "order", "address"} <= env.known


def test_ask_tool_returns_the_customer_reply_without_noise() -> None:
    """The ask tool's observation is the customer's words, with no noise lines."""
    suite = SUITES["common"]
    for seed in range(30):
        task = make_task(suite, seed)
        obs = GymEnv(task).execute(_name(task, ASK), {"question": "What is your e-mail?"})
        assert obs.startswith('Customer: "') and "\n" not in obs


def test_noise_rate_is_respected() -> None:
    """With noise 0 no output has noise lines; with noise 1 every lookup output does."""
    from dataclasses import replace

    for rate, expect in ((0.0, False), (1.0, True)):
        suite = replace(SUITES["common"], noise=rate)
        for seed in range(20):
            task = make_task(suite, seed)
            obs = GymEnv(task).execute("find_customer_by_email", {"email": task.customer.email})
            assert (obs.count("\n") > 0) is expect
