"""The DecisionGym answer key: acceptable tools at any state, unfiltered sets and strata."""

from __future__ import annotations

from knowwhen_runner.gym import (
    AFTER_OFF_PLAN,
    ON_PLAN,
    SUITES,
    GymEnv,
    acceptable_tools,
    answer_key,
    canonical_plan,
    key_for_env,
    make_task,
    trajectories,
)


def test_next_canonical_tool_is_always_acceptable() -> None:
    """At every state of canonical and perturbed runs, the tool the run calls next is acceptable."""
    checked = 0
    for name in ("common", "shift", "hard"):
        for seed in range(60):
            for run in trajectories(make_task(SUITES[name], seed), perturbations=2):
                for step, key in run.keys:
                    assert run.history[step].tool in key.acceptable
                    assert key.gold == key.acceptable[0]
                    assert set(key.acceptable) <= set(key.unfiltered)
                    checked += 1
    assert checked > 1000  # every run has states to check (about 550 per suite)


def test_both_lookups_acceptable_when_both_known() -> None:
    """When the request gives the e-mail and the name and zip, either lookup is acceptable."""
    task = next(
        t for t in (make_task(SUITES["common"], s) for s in range(100)) if "identity=both" in t.variant
    )
    acceptable, _, stratum = acceptable_tools(task, [])
    assert set(acceptable) == {"find_customer_by_email", "find_customer_by_name_zip"}
    assert stratum == ON_PLAN


def test_missing_identity_means_ask_only() -> None:
    """Without e-mail or name and zip, only asking is acceptable; the unfiltered set also has the lookups."""
    task = next(
        t for t in (make_task(SUITES["common"], s) for s in range(200)) if "identity=none" in t.variant
    )
    acceptable, unfiltered, _ = acceptable_tools(task, [])
    assert acceptable == ("ask_user",)
    assert {"find_customer_by_email", "find_customer_by_name_zip"} <= set(unfiltered)


def test_ambiguous_order_means_ask_after_listing() -> None:
    """When two orders match the customer's description, the key says ask once the orders are listed."""
    task = next(
        t for t in (make_task(SUITES["common"], s) for s in range(200)) if "order=ambiguous" in t.variant
    )
    plan = canonical_plan(task)
    at = next(i for i, s in enumerate(plan) if s.tool == "list_orders") + 1
    assert answer_key(task, plan[:at]).acceptable == ("ask_user",)
    assert plan[at].tool == "ask_user" and task.order_id in plan[at].observation


def test_stratum_turns_after_off_plan() -> None:
    """A call outside the acceptable set makes every later state `after_off_plan`; the plan still recovers."""
    task = make_task(SUITES["common"], 11)
    plan = canonical_plan(task)
    detour = [plan[0], ("find_vendor_by_email", {"email": task.customer.email})]
    key = answer_key(task, detour)
    assert key.stratum == AFTER_OFF_PLAN and key.gold == plan[1].tool
    assert answer_key(task, plan[:2]).stratum == ON_PLAN


def test_answer_key_works_on_a_live_episode() -> None:
    """key_for_env on a live environment agrees with answer_key recomputed from its history."""
    task = make_task(SUITES["shift"], 4)
    env = GymEnv(task)
    while not env.done:
        live = key_for_env(env)
        assert live.acceptable == answer_key(task, env.history).acceptable
        env.execute(live.gold, live.gold_arguments)
    assert env.success() and answer_key(task, env.history).acceptable == ()


def test_tier_rule_picks_refund_or_credit_by_age() -> None:
    """Under the tier rule, old orders get store credit and recent ones a refund."""
    seen = set()
    for seed in range(80):
        task = make_task(SUITES["hard"], seed)
        for goal in task.goals:
            if goal.role in ("refund_order", "issue_store_credit"):
                expected = "issue_store_credit" if task.order.age_days > 30 else "refund_order"
                assert goal.role == expected
                assert expected in [s.tool for s in canonical_plan(task)]
                seen.add(expected)
    assert seen == {"refund_order", "issue_store_credit"}
