"""Model calls with retries and rate limits: one logical call, several requests when it must retry.

A call takes a rate-limit slot, sends one request through the ``Transport`` and, when it fails, asks
``classify`` what to do: retry with jittered backoff (``Retry-After`` replaces it), pause the model on a
429/529, or give up. A model whose requests keep failing is down (``limiter``): it is probed one
request at a time, and a call that meets it down makes no request and raises ``ProviderError`` of kind
``down``, so its job goes back to the queue without spending an attempt. Only failures while the model
is up count against a call's tries; a refused connection never does. Only what the transport raises is
the provider's answer: an exception from the runner's own code (a limiter, say) passes through as it is,
a bug for the worker to log, never a ``ProviderError`` that could fail a job. A model whose requests,
that a sequential test says surely fails is set aside (``failing``): the client sends it nothing but a
probe now and then, and an answered probe brings it back.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from ..config import ModelSpec
from ..exceptions import OtherModel, ProviderError
from .adaptive import read_limit_headers
from .direct import AutoTransport
from .failing import FOR_JOB, PROBE_EVERY_S, FailingModels, ModelFailing
from .limit_keys import Limiter, Limiters
from .retry import Verdict, classify, error_headers, transport_failure
from .secrets import Secrets
from .transport import CallKind, Origin, Transport

__all__ = ["CallOutcome", "ModelClient"]

_HINTED_TRIES = 10  # 429s with a retry hint a call waits through, per try it may charge, before it gives up


@dataclass
class _Tally:
    """What one logical call has done so far: requests made, failures charged to it, errors seen."""

    requests: int = 0
    failures: int = 0
    charged: int = 0  # failures that count against the call's tries
    hinted: int = 0  # 429s that said when to come back: waited for, not charged
    errors: list[str] = field(default_factory=list)
    answer: BaseException | None = None  # the last exception the transport raised: the provider's answer
    serial: int = 0  # which call of its client this is (a call made for no job counts as its own job)

    def answered(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the provider's answer (or ours about it), not a bug of the runner's own code."""
        return isinstance(exc, ProviderError) or exc is self.answer


@dataclass
class CallOutcome:
    """A normalised response (what the cache stores) and what it took to get it."""

    response: dict[str, Any]
    requests: int
    errors: list[str] = field(default_factory=list)


class ModelClient:
    """Calls models with retries and rate limits; one per worker process."""

    def __init__(
        self,
        limiters: Limiters,
        secrets: Secrets,
        *,
        transport: Transport | None = None,
        max_tries: int = 6,
        max_backoff_s: float = 30.0,
        set_aside_error_rate: float | None = None,
        set_aside_probe_s: float = PROBE_EVERY_S,
    ):
        self._limiters = limiters
        self._secrets = secrets
        self._transport: Transport = transport or AutoTransport()
        self._max_tries = max_tries
        self._max_backoff = max_backoff_s
        self._serials = itertools.count()
        # models a sequential test sets aside (None: never); probed again, given up with the limiter's wait
        self.failing = FailingModels(set_aside_error_rate, limiters.max_outage_s, probe_s=set_aside_probe_s)
        self.other_models: Counter[str] = Counter()  # replies refused as another model's, per model asked
        self.other_names: dict[str, str] = {}  # per model asked: the last such reply's error

    def preload(self) -> None:
        """A request is coming soon: let the transport start its slow set-up (litellm's import)."""
        self._transport.preload()

    async def aclose(self) -> None:
        """Close what the transport keeps open (the direct transport's pooled connections)."""
        close = getattr(self._transport, "aclose", None)
        if close is not None:
            await close()

    @property
    def secrets(self) -> Secrets:
        """The keys this client sends (read per request from the environment; never stored)."""
        return self._secrets

    async def call(self, model: ModelSpec, kind: CallKind, body: dict[str, Any]) -> CallOutcome:
        """Make one logical call (several requests when retried); raise ``ProviderError`` when it fails.

        Only failures while the model is up count against ``max_tries``: a probe of a down model that
        fails, or a call that finds the model down, raises kind ``down`` (the job waits in the queue).
        """
        limiter = self._limiters[model.id]
        # Before taking a rate-limit slot: a slot granted now must be used now, not after an import.
        await self._transport.prepare(model)
        tally = _Tally(serial=next(self._serials))
        # A rough size for a tokens-per-minute limit; only then, since it is a tenth of a millisecond.
        tokens = len(str(body)) // 4 if limiter.counts_tokens else 0

        def note(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            if exc is None or isinstance(exc, ProviderError) or not tally.answered(exc):
                return
            verdict = classify(exc)
            tally.errors.append(self._describe(exc, verdict))
            limiter.breaker.last_error = tally.errors[-1]
            if verdict.kind == "rate_limited":
                limiter.penalize(verdict.wait if verdict.wait is not None else self._backoff(tally.charged))

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            verdict = classify(exc) if exc else Verdict("retry")
            if limiter.down():
                return 0.0  # the model is down: its pause, not a backoff, says when to try
            if verdict.wait is not None:
                return min(verdict.wait, 600.0)
            return self._backoff(tally.failures)

        retrying = AsyncRetrying(
            stop=lambda _state: (
                tally.charged >= self._max_tries or tally.hinted >= _HINTED_TRIES * self._max_tries
            ),
            wait=wait,
            retry=retry_if_exception(
                lambda e: tally.answered(e) and classify(e).kind in ("retry", "retry_after", "rate_limited")
            ),
            after=note,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    response = await self._attempt(model, kind, body, limiter, tally, tokens)
        except ProviderError as exc:
            exc.requests = tally.requests
            raise
        except Exception as exc:
            if not tally.answered(exc):
                raise  # the runner's own code failed (a bug): not the provider's answer, never the job's end
            verdict = classify(exc)
            message = self._describe(exc, verdict)
            if not tally.errors or tally.errors[-1] != message:
                tally.errors.append(message)
            raise ProviderError(
                message, kind=verdict.kind, status=verdict.status, requests=tally.requests
            ) from None
        return CallOutcome(response, tally.requests, tally.errors)

    async def _attempt(
        self,
        model: ModelSpec,
        kind: CallKind,
        body: dict[str, Any],
        limiter: Limiter,
        tally: _Tally,
        tokens: int,
    ) -> dict[str, Any]:
        """One request, unless the model is down and another request is probing it (or its pause runs),
        or it is set aside and not to be probed now (``ModelFailing``)."""
        if limiter.down() and not limiter.may_probe():
            raise self._down(model, limiter, tally)
        try:
            aside_probe = self.failing.probe(model.id)
        except ProviderError as exc:
            exc.requests = tally.requests
            raise
        answered = False
        try:
            reply = await self._send(model, kind, body, limiter, tally, tokens, aside_probe)
            answered = True
            return reply
        except Exception as exc:
            if aside_probe and tally.answered(exc):
                # a failed probe says the model still fails, nothing of its job: the job waits, unspent
                why = self.failing.failing(model.id) or str(exc)
                raise ModelFailing(model.id, why, requests=tally.requests) from exc
            raise
        finally:
            if aside_probe:
                self.failing.probed(model.id, answered=answered)

    async def _send(
        self,
        model: ModelSpec,
        kind: CallKind,
        body: dict[str, Any],
        limiter: Limiter,
        tally: _Tally,
        tokens: int,
        aside_probe: bool,
    ) -> dict[str, Any]:
        async with limiter.slot(tokens):
            probe = limiter.down()
            if probe:
                if not limiter.may_probe():
                    raise self._down(model, limiter, tally)
                limiter.breaker.probing = True
            try:
                tally.requests += 1
                started = time.perf_counter()
                try:
                    reply = await self._transport.send(model, kind, body, self._secrets.key_for(model))
                except Exception as exc:
                    tally.answer = exc
                    verdict = classify(exc)
                    if verdict.kind == "rate_limited":
                        headers = error_headers(exc)
                        limiter.heard(read_limit_headers(headers[0] if headers else None), ok=False)
                    if verdict.unreachable:
                        limiter.record(ok=False, retry_after=verdict.wait)
                    tally.failures += 1
                    # A probe of a down model, or a refused connection (nothing listens: never the
                    # request's fault), is not charged to the call; the breaker counts it instead. A
                    # 429 that says when to come back is the provider's schedule, not a failure.
                    hinted = verdict.kind == "rate_limited" and verdict.wait is not None
                    tally.hinted += hinted
                    refused = transport_failure(exc) == "connection refused"
                    tally.charged += not (probe or aside_probe or hinted or refused)
                    self._count_failure(model, tally, exc, verdict)
                    raise
                limiter.record(ok=True)  # the provider (or its gateway) answered: it is up
                limiter.heard(reply.limits, ok=True)
                self._own_reply(model, reply.origin, tally)
                self.failing.answered(model.id)  # after the origin check: another model's reply is no answer
            finally:
                if probe:
                    limiter.breaker.probing = False
        return {**reply.response, "latency_ms": round((time.perf_counter() - started) * 1000, 3)}

    def _own_reply(self, model: ModelSpec, origin: Origin, tally: _Tally) -> None:
        """Raise ``OtherModel`` when the reply says another model answered (``Origin.is_other``)."""
        if not origin.is_other(model):
            return
        exc = OtherModel(model.id, model.model, origin.model, origin.fallbacks, requests=tally.requests)
        tally.answer = exc
        tally.failures += 1
        tally.charged += 1
        tally.errors.append(self._secrets.redact(str(exc)))
        self.other_models[model.id] += 1
        self.other_names[model.id] = str(exc)
        raise exc

    def _count_failure(self, model: ModelSpec, tally: _Tally, exc: BaseException, verdict: Verdict) -> None:
        """Count a failed request in its model's test: a 5xx or a malformed reply (no status), unless the
        model is away or rate limited. A 4xx says something of the request (too long for the context,
        say), and fails its job at once."""
        if verdict.unreachable or verdict.kind == "rate_limited" or transport_failure(exc) is not None:
            return
        if verdict.status is not None and verdict.status < 500:
            return
        call = FOR_JOB.get() or tally.serial  # a job's retries and next attempts count once
        self.failing.failed(model.id, call, self._describe(exc, verdict))

    def _down(self, model: ModelSpec, limiter: Limiter, tally: _Tally) -> ProviderError:
        last = limiter.breaker.last_error or "earlier requests failed"
        if limiter.gave_up():
            message = (
                f"{model.id} has been down for {limiter.breaker.outage_s():.0f} s, longer than the run waits "
                f"(workers.max_outage_s = {limiter.breaker.max_outage_s:.0f}); last error: {last}"
            )
        else:
            message = f"{model.id} is down ({limiter.breaker.failures_in_row} failed requests in a row; last: {last})"
        return ProviderError(message, kind="down", requests=tally.requests)

    def _backoff(self, charged: int) -> float:
        base = min(self._max_backoff, 0.5 * 2.0 ** max(0, charged - 1))
        return base * (0.5 + random.random() / 2)

    def _describe(self, exc: BaseException, verdict: Verdict) -> str:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        transport = transport_failure(exc)
        if transport is not None:
            prefix = f"no HTTP response ({transport}): "
        else:
            prefix = f"HTTP {verdict.status} " if verdict.status else ""
        return self._secrets.redact(f"{prefix}{type(exc).__name__}: {text}")[
            :500
        ]  # cut after: no half secret
