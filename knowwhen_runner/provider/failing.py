"""A model that always fails: its requests counted in a row, until the run sets it aside.

Every request answered with a failure (a 5xx other than 502/503/504, a malformed reply, a 4xx other
than 429) adds to its model's streak; any answered request resets it. Rate limits (429/529) and a model
that does not answer at all (no HTTP response, 502/503/504: it is *down*, waited for) are not counted.
Once the streak holds ``limit`` failures from ``limit`` different calls (so one request the server
cannot take, retried, never sets a model aside), the model is failing: the client sends it nothing more
and raises ``ModelFailing``, which quarantines the model for the run (``run.quarantine``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..exceptions import ProviderError

__all__ = ["FailingStreaks", "ModelFailing", "Streak"]


class ModelFailing(ProviderError):
    """A call not made: its model's last requests, from ``limit`` different calls, all failed."""

    def __init__(self, model_id: str, reason: str, *, requests: int = 0) -> None:
        super().__init__(f"{model_id} is set aside for this run: {reason}", kind="fatal", requests=requests)
        self.model_id = model_id
        self.reason = reason


@dataclass
class Streak:
    """One model's failed requests since its last answer, and the calls they came from."""

    failures: int = 0
    calls: set[int] = field(default_factory=set)
    last_error: str = ""


class FailingStreaks:
    """Per model: the failure streak, and whether it has reached ``limit`` different calls (None: never)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._streaks: dict[str, Streak] = {}
        self._failing: dict[str, str] = {}

    def failed(self, model_id: str, call: int, error: str) -> str | None:
        """Count one failed request of ``call`` (any value that tells calls apart); the reason when the
        model has just become failing."""
        if self.limit is None or model_id in self._failing:
            return None
        streak = self._streaks.setdefault(model_id, Streak())
        streak.failures += 1
        streak.calls.add(call)
        streak.last_error = error
        if len(streak.calls) < self.limit:
            return None
        reason = (
            f"its last {streak.failures} requests, from {len(streak.calls)} different calls, all failed "
            f"(last: {error}); fix the model's server or its config, then run the same command again to "
            "continue (its jobs stay pending; workers.quarantine_failures sets how many)"
        )
        self._failing[model_id] = reason
        return reason

    def answered(self, model_id: str) -> None:
        """A request of the model was answered: its streak starts again."""
        if model_id in self._streaks:
            del self._streaks[model_id]

    def failing(self, model_id: str) -> str | None:
        """Why the model is set aside, or None while it is not."""
        return self._failing.get(model_id)
