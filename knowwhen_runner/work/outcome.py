"""What a worker hands between its loops (a question with its call, the outcome of one job) and what it
counts (``WorkStats``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from anyio.streams.memory import MemoryObjectSendStream

from ..cache import CacheEntry
from ..config import ModelSpec
from ..jobs import Job
from ..queue import Failure
from .calls import QuestionCall

__all__ = ["Cause", "Outcome", "Outcomes", "QuestionJob", "WorkStats"]

Cause = Literal["down", "set aside", "quarantined", "paused", "over budget", "screened out"]
"""Why a job went back to the queue unanswered, its attempt unspent: each cause is said in its own words."""


@dataclass
class WorkStats:
    """What one worker did; shown by the progress bar and returned at the end."""

    done: int = 0
    failed: int = 0
    retried: int = 0
    waited: int = 0  # jobs handed back unanswered, their attempt unspent (``waited_for`` says why)
    waited_for: dict[str, int] = field(default_factory=dict)  # of those, per ``Cause``
    runner_errors: int = 0  # jobs handed back because the runner's own code failed on them (a bug)
    cache_hits: int = 0
    calls: int = 0
    requests: int = 0
    cost_usd: float = 0.0  # what this process spent: its calls made now, its probes' too (a hit: nothing)
    probe_usd: float = 0.0  # of which the pre-flight probes' calls (spent before any job)
    probe_calls: int = 0  # of ``calls``, the pre-flight probes' (made before any job)
    started: float = field(default_factory=time.monotonic)
    handed_over: bool = False  # stopped by SIGTERM: unstarted jobs given back, the process may be requeued
    given_up: dict[str, str] = field(default_factory=dict)  # models down too long: their last error
    over_budget: dict[str, str] = field(default_factory=dict)  # budget scopes found spent
    other_model: dict[str, int] = field(default_factory=dict)  # replies refused as another model's, per model
    other_model_last: dict[str, str] = field(default_factory=dict)  # per model: the last of them

    def add(self, other: WorkStats) -> None:
        """Add another stage's counts to these."""
        for name in ("done", "failed", "retried", "waited", "runner_errors", "cache_hits", "calls",
                     "requests", "cost_usd", "probe_usd", "probe_calls"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for cause, n in other.waited_for.items():
            self.waited_for[cause] = self.waited_for.get(cause, 0) + n
        self.handed_over = self.handed_over or other.handed_over
        self.given_up.update(other.given_up)
        self.over_budget.update(other.over_budget)
        for model_id, n in other.other_model.items():
            self.other_model[model_id] = self.other_model.get(model_id, 0) + n
        self.other_model_last.update(other.other_model_last)


class QuestionJob(NamedTuple):
    """An open-loop question job with what it needs: its model, its item and the call it makes."""

    job: Job
    model: ModelSpec
    item: dict[str, Any]
    call: QuestionCall


@dataclass
class Outcome:
    """What became of one claimed job: a result, a failed attempt, or (the model was down) nothing."""

    job: Job
    result: dict[str, Any] | None = None
    failure: Failure | None = None
    cache_entry: CacheEntry | None = None
    down: bool = False  # the model was down: the job goes back to the queue with its attempt unspent
    quarantine: str | None = None  # the model failed fatally (what to fix): the job goes back, unspent
    quarantined: str | None = None  # the model quarantined, when not the job's own (an episode's agent)
    held_back: bool = False  # the model is quarantined or paused: the job goes back unstarted
    bug: bool = False  # the runner's own code failed on it (logged): the job goes back, unspent
    given_back: bool = False  # the worker is stopping: the unstarted job goes back at once
    cause: Cause | None = None  # why a job that goes back unanswered (down, quarantine, held back) does

    def __post_init__(self) -> None:
        if self.cause is None and (self.down or self.quarantine is not None):
            self.cause = "down" if self.down else "quarantined"


Outcomes = MemoryObjectSendStream[Outcome]
