"""A screened run's claim window (``work.screen_pace``): what an open model may claim, and when a look frees it."""

from __future__ import annotations

import anyio

from knowwhen_runner.jobs import Job
from knowwhen_runner.work.screen_pace import ScreenPace


def _jobs(model: str, places: range, scenario: str = "s") -> list[Job]:
    return [Job(f"{model}-{p}", model, "model", scenario, f"q{p}", {}) for p in places]


def _pace(window: int = 4) -> ScreenPace:
    pace = ScreenPace("s", ["a", "b"], window=window)
    pace.places = {f"q{p}": p for p in range(100)}
    return pace


def test_an_open_model_claims_one_window_past_its_prefix_and_a_look_frees_what_it_passed() -> None:
    """Four claimed: no room; answered, still no room until a look's prefix passes them; then room again."""
    pace = _pace()
    pace.claimed(_jobs("a", range(4)))
    assert pace.room() == {"a": 0, "b": 4}
    pace.left(answered=["a-0", "a-1", "a-2", "a-3"], back=[])
    assert pace.room()["a"] == 0  # answered, but no look has seen them in a prefix yet
    pace.looked({"a": 2}, ["a", "b"], [])
    assert pace.room()["a"] == 2  # places 0 and 1 are in the prefix; 2 and 3 still count
    pace.looked({"a": 4}, ["a", "b"], [])
    assert pace.room()["a"] == 4


def test_a_job_given_back_leaves_the_window_and_other_scenarios_never_count() -> None:
    """A job released unanswered frees its place at once; jobs of another scenario are not screened."""
    pace = _pace()
    pace.claimed(_jobs("a", range(3)) + _jobs("a", range(10, 20), scenario="other"))
    assert pace.room()["a"] == 1
    pace.left(answered=[], back=["a-1"])
    assert pace.room()["a"] == 2


def test_a_settled_model_is_claimed_freely_and_a_dropped_one_is_named() -> None:
    """Once a look settles a model it has no window (claimed freely); a dropped one is in ``dropped``."""
    pace = _pace()
    pace.claimed(_jobs("a", range(4)) + _jobs("b", range(4)))
    pace.looked({}, [], ["b"])
    assert pace.room() == {} and pace.dropped == {"b"}


def test_answers_wake_the_screen_and_a_pace_without_a_screen_holds_nothing() -> None:
    """An answer recorded ends the screen's wait at once; a stopped pace (no screen here) gives no window."""
    pace = _pace()
    pace.claimed(_jobs("a", range(1)))
    pace.left(answered=["a-0"], back=[])

    async def waited() -> float:
        started = anyio.current_time()
        await pace.wait(30.0)
        return anyio.current_time() - started

    assert anyio.run(waited) < 5.0
    pace.stop()
    pace.claimed(_jobs("a", range(1, 9)))
    assert pace.room() == {}
