"""DecisionGym state rendering: the TASK / HISTORY / CURRENT OBSERVATION layout."""

from __future__ import annotations

from knowwhen_runner.gym import SUITES, Step, canonical_plan, make_task, render_state


def test_empty_history_layout() -> None:
    """A fresh state has the request, an empty history and a start-of-conversation observation."""
    task = make_task(SUITES["common"], 1)
    state = render_state(task, [])
    lines = state.splitlines()
    assert lines[0] == f"TASK: {task.request}"
    assert lines[1:4] == ["HISTORY:", "(none)", "CURRENT OBSERVATION:"]


def test_history_and_current_observation() -> None:
    """Earlier calls show their arguments and results; the latest result is the current observation."""
    task = make_task(SUITES["common"], 2)
    plan = canonical_plan(task)[:2]
    state = render_state(task, plan)
    head, current = state.split("\nCURRENT OBSERVATION:\n")
    assert head.startswith("TASK: ") and "\nHISTORY:\n1. " in head and "\n2. " in head
    assert plan[0].observation.splitlines()[0] in head
    assert current.endswith(plan[1].observation)


def test_render_is_pure() -> None:
    """Rendering depends only on the task and the steps: same input, same text, no state kept."""
    task = make_task(SUITES["shift"], 3)
    steps = [Step("lookup_account_by_email", {"email": "a@b.c"}, "No customer found.")]
    assert render_state(task, steps) == render_state(task, list(steps))
    assert render_state(task, steps) == render_state(make_task(SUITES["shift"], 3), steps)
