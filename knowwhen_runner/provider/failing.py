"""A model whose requests surely fail: a sequential test on its success rate sets it aside, probes bring it back.

Every request answered with a failure (a 5xx other than 502/503/504, a malformed reply) is evidence that
the model fails; every answered request is evidence that it works. Rate limits (429/529), a 4xx (it says
something of the request, which fails at once) and a model that does not answer at all (no HTTP response,
502/503/504: it is *down*, waited for) are no evidence either way.

The test is Wald's sequential probability ratio test of H0 "the model answers at least ``USABLE`` of its
requests" against H1 "it answers at most ``FAILING`` of them", on the log of the likelihood ratio: a failed
request adds ``log((1 - FAILING) / (1 - USABLE))`` (0.347), an answered one takes ``log(USABLE / FAILING)``
(3.40) away, and the model is set aside once the sum reaches ``log(1 / error_rate)`` (4.61 for the default
1 %): 14 failed requests when it never answered. The sum never falls below ``-CREDIT`` (12), so a model
that answered for hours and then breaks is set aside after 48 failed requests, not thousands; a burst of up
to 47 failures after a few answers never sets it aside. Under H0 the likelihood ratio is a supermartingale,
so by Ville's inequality a model answering ``USABLE`` of its requests or more is set aside with
probability at most ``error_rate`` from the start, plus ``error_rate × e^-12`` each time the sum leaves its
floor: at most 1.6 % over 100,000 requests for the default, and 0.12 % at most for a model that fails 60 %
of its requests (its own drift). The failures since the
last answer must also be for ``MIN_JOBS`` different jobs (``FOR_JOB``, set by the worker for each job; a
logical call without one counts as its own): one job the server cannot take, retried, sets nothing aside.

A model set aside is sent nothing but a probe, one request at a time, every ``probe_s`` (``PROBE_EVERY_S``
unless the run says otherwise, ``workers.set_aside_probe_s``): a probe
answered brings it back (the test starts again from nothing); its calls meanwhile raise ``ModelFailing``
of kind ``down`` (the job goes back to the queue, no attempt spent). Set aside for longer than
``max_outage_s``, the run stops waiting for it alone (it is probed while other work goes on).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..exceptions import ErrorKind, ProviderError
from .clock import MONOTONIC, Clock

__all__ = [
    "CREDIT",
    "FAILING",
    "FOR_JOB",
    "MIN_JOBS",
    "PROBE_EVERY_S",
    "USABLE",
    "FailingModels",
    "ModelFailing",
    "SetAside",
    "log_ratio_step",
]

USABLE = 0.3
"""H0: the model answers at least this share of its requests (with 6 tries a call then fails 12 % of the
time at most, and a job of 5 attempts almost never): it must not be set aside."""
FAILING = 0.01
"""H1: the model answers at most this share of its requests: it surely fails."""
CREDIT = 12.0
"""The lowest the log-likelihood ratio goes: what a model's answers can bank against a later burst."""
MIN_JOBS = 3
"""The failures since the model's last answer must be for this many different jobs at least."""
PROBE_EVERY_S = 30.0
"""A model set aside is probed (one request) this often: a model back up is noticed within this."""

FOR_JOB: ContextVar[str | None] = ContextVar("knowwhen_for_job", default=None)
"""The job the calls of this task are made for (a worker sets it per job): failures count per job."""

_FAIL_STEP = math.log((1 - FAILING) / (1 - USABLE))
_ANSWER_STEP = -math.log(USABLE / FAILING)


def log_ratio_step(log_ratio: float, failed: bool) -> float:
    """The test's statistic after one more request (failed or answered), floored at ``-CREDIT``."""
    return log_ratio + _FAIL_STEP if failed else max(-CREDIT, log_ratio + _ANSWER_STEP)


class ModelFailing(ProviderError):
    """A call not made: its model is set aside (kind ``down``: probed again later) or quarantined by the run
    (kind ``fatal``)."""

    def __init__(self, model_id: str, reason: str, *, kind: ErrorKind = "down", requests: int = 0) -> None:
        what = "is set aside" if kind == "down" else "is quarantined for this run"
        super().__init__(f"{model_id} {what}: {reason}", kind=kind, requests=requests)
        self.model_id = model_id
        self.reason = reason


@dataclass
class _Evidence:
    """One model's test so far, and its failed requests since its last answer (and the jobs they were for)."""

    log_ratio: float = 0.0
    failed: int = 0
    requests: int = 0
    in_a_row: int = 0
    calls: set[str | int] = field(default_factory=set)


@dataclass
class SetAside:
    """A model set aside: why (``reason``: the whole story; ``cause``: what ``status`` and the hooks say), since
    when, when it may be probed next, and whether a probe is under way."""

    reason: str
    since: float
    probe_at: float
    probing: bool = False
    cause: str = ""


class FailingModels:
    """Per model: the sequential test, the models set aside (probed now and then) and those the run
    quarantined (sent nothing more). ``error_rate`` None: no model is ever set aside."""

    def __init__(
        self,
        error_rate: float | None,
        max_outage_s: float = math.inf,
        clock: Clock = MONOTONIC,
        probe_s: float = PROBE_EVERY_S,
    ) -> None:
        self.error_rate = error_rate
        self.max_outage_s = max_outage_s
        self.probe_s = probe_s
        self._clock = clock
        self._threshold = math.log(1 / error_rate) if error_rate is not None else math.inf
        self._evidence: dict[str, _Evidence] = {}
        self.aside: dict[str, SetAside] = {}
        self._quarantined: dict[str, str] = {}
        self.on_set_aside: Callable[[str, str], None] | None = None  # told each time a model is set aside

    def failed(self, model_id: str, call: str | int, error: str) -> str | None:
        """Count one failed request for ``call`` (a job id, or any value that tells calls apart); the
        reason when the model has just been set aside."""
        if self.error_rate is None or model_id in self.aside:
            return None
        ev = self._evidence.setdefault(model_id, _Evidence())
        ev.log_ratio = log_ratio_step(ev.log_ratio, True)
        ev.failed, ev.requests, ev.in_a_row = ev.failed + 1, ev.requests + 1, ev.in_a_row + 1
        ev.calls.add(call)
        if ev.log_ratio < self._threshold or len(ev.calls) < MIN_JOBS:
            return None
        reason = (
            f"{ev.failed} of its {ev.requests} requests failed, the last {ev.in_a_row} in a row for "
            f"{len(ev.calls)} different jobs (last: {error}); a test with a {self.error_rate:.0%} false "
            f"set-aside rate (workers.set_aside_error_rate) says it answers less than {USABLE:.0%} of them"
        )
        cause = (
            f"its requests surely fail ({ev.failed} of {ev.requests} failed; the run's test at error rate "
            f"{self.error_rate * 100:g}%); probed every {self.probe_s:g} s (last: {error})"
        )
        now = self._clock.now()
        self.aside[model_id] = SetAside(reason, now, now + self.probe_s, cause=cause)
        self._evidence.pop(model_id)  # a model that comes back starts the test again from nothing
        if self.on_set_aside is not None:
            self.on_set_aside(model_id, reason)
        return reason

    def answered(self, model_id: str) -> None:
        """A request of the model was answered: evidence that it works; a model set aside is back."""
        self.aside.pop(model_id, None)
        if self.error_rate is None:
            return
        ev = self._evidence.setdefault(model_id, _Evidence())
        ev.log_ratio = log_ratio_step(ev.log_ratio, False)
        ev.requests += 1
        if ev.in_a_row:
            ev.in_a_row = 0
            ev.calls.clear()

    def in_a_row(self, model_id: str) -> int:
        """The model's failed requests since its last answer (0 when the test is off)."""
        ev = self._evidence.get(model_id)
        return ev.in_a_row if ev is not None else 0

    def probe(self, model_id: str) -> bool:
        """Whether the next request of a model set aside may go now, as its probe (it then takes the probe);
        raise ``ModelFailing`` when the model is quarantined, or set aside and not to be probed now."""
        if model_id in self._quarantined:
            raise ModelFailing(model_id, self._quarantined[model_id], kind="fatal")
        aside = self.aside.get(model_id)
        if aside is None:
            return False
        if aside.probing or self._clock.now() < aside.probe_at:
            raise ModelFailing(model_id, aside.reason)
        aside.probing = True
        return True

    def probed(self, model_id: str, answered: bool) -> None:
        """A probe is over: answered, the model is back; else it waits for the next one."""
        if answered:
            self.answered(model_id)
            return
        aside = self.aside.get(model_id)
        if aside is not None:
            aside.probing = False
            aside.probe_at = self._clock.now() + self.probe_s

    def resting(self) -> set[str]:
        """Models set aside that may not be probed now (nothing of theirs is worth starting)."""
        now = self._clock.now()
        return {m for m, a in self.aside.items() if a.probing or now < a.probe_at}

    def given_up(self) -> dict[str, str]:
        """Models set aside for longer than ``max_outage_s``: the run stops waiting for them alone."""
        now = self._clock.now()
        return {
            m: f"set aside for {now - a.since:.0f} s, longer than the run waits (workers.max_outage_s): {a.reason}"
            for m, a in self.aside.items()
            if now - a.since > self.max_outage_s
        }

    def quarantine(self, model_id: str, reason: str) -> None:
        """The run quarantined the model (another process found it fatally failing, say): send it nothing."""
        self._quarantined.setdefault(model_id, reason)

    def failing(self, model_id: str) -> str | None:
        """Why the model is set aside or quarantined, or None while it is neither."""
        aside = self.aside.get(model_id)
        return aside.reason if aside is not None else self._quarantined.get(model_id)
