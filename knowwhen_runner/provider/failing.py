"""A model that always fails: its requests counted in a row, until the run sets it aside.

Every request answered with a failure (a 5xx other than 502/503/504, a malformed reply) adds to its
model's streak; any answered request resets it. Rate limits (429/529), a 4xx (it says something of the
request, which fails at once) and a model that does not answer at all (no HTTP response, 502/503/504: it
is *down*, waited for) are not counted.
Once the streak holds ``limit`` failed requests for at least ``MIN_JOBS`` different jobs (``FOR_JOB``,
set by the worker for each job; a logical call without one counts as its own), the model is failing:
the client sends it nothing more and raises ``ModelFailing``, which quarantines the model for the run
(``work.quarantine``). The jobs rule keeps one job the server cannot take, retried, from setting a model
aside; the streak's length keeps a model that fails often, but not always, at work: with one request in
three failing, 12 in a row come once in two million.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from ..exceptions import ProviderError

__all__ = ["FOR_JOB", "MIN_JOBS", "FailingStreaks", "ModelFailing", "Streak"]

MIN_JOBS = 3
"""A streak sets a model aside only when its failed requests were for this many different jobs at least."""

FOR_JOB: ContextVar[str | None] = ContextVar("knowwhen_for_job", default=None)
"""The job the calls of this task are made for (a worker sets it per job): failures count per job."""


class ModelFailing(ProviderError):
    """A call not made: its model's last ``limit`` requests, for several different jobs, all failed."""

    def __init__(self, model_id: str, reason: str, *, requests: int = 0) -> None:
        super().__init__(f"{model_id} is set aside for this run: {reason}", kind="fatal", requests=requests)
        self.model_id = model_id
        self.reason = reason


@dataclass
class Streak:
    """One model's failed requests since its last answer, and the jobs (or calls) they were for."""

    failures: int = 0
    calls: set[str | int] = field(default_factory=set)
    last_error: str = ""


class FailingStreaks:
    """Per model: the failure streak, and whether it has reached ``limit`` requests (None: never)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._streaks: dict[str, Streak] = {}
        self._failing: dict[str, str] = {}

    def failed(self, model_id: str, call: str | int, error: str) -> str | None:
        """Count one failed request for ``call`` (a job id, or any value that tells calls apart); the
        reason when the model has just become failing."""
        if self.limit is None or model_id in self._failing:
            return None
        streak = self._streaks.setdefault(model_id, Streak())
        streak.failures += 1
        streak.calls.add(call)
        streak.last_error = error
        if streak.failures < self.limit or len(streak.calls) < MIN_JOBS:
            return None
        reason = (
            f"its last {streak.failures} requests, for {len(streak.calls)} different jobs, all failed "
            f"(last: {error}); fix the model's server or its config, then run the same command again to "
            "continue (workers.quarantine_failures sets how many failed requests set a model aside)"
        )
        self._failing[model_id] = reason
        return reason

    def answered(self, model_id: str) -> None:
        """A request of the model was answered: its streak starts again."""
        if model_id in self._streaks:
            del self._streaks[model_id]

    def in_a_row(self, model_id: str) -> int:
        """The model's failed requests since its last answer (0 when the rule is off)."""
        streak = self._streaks.get(model_id)
        return streak.failures if streak is not None else 0

    def set_aside(self, model_id: str, reason: str) -> None:
        """The run quarantined the model (another process found it failing, or its key refused): send it
        nothing more from here either."""
        self._failing.setdefault(model_id, reason)

    def failing(self, model_id: str) -> str | None:
        """Why the model is set aside, or None while it is not."""
        return self._failing.get(model_id)
