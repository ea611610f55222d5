"""Pre-flight: before a sweep spends anything, each model answers one real question.

The question is the run's own first unanswered one for that model (so the answer lands in the cache and
its job costs nothing more later), or a tiny built-in one for a model with only episodes to run. The
probe checks the key, the model name, that the answer is valid and that the model's price is known, and
times the call. Only what would fail every call alike is a no-go (a refused key, an unknown model, an
unknown price), a model that refused every probe with a client error (400, 404, 422: the run's question,
then the built-in one), and a model that the run's own sequential test sets aside (``provider.failing``:
``workers.set_aside_error_rate``) while its probe is asked again, up to ``_PROBE_CALLS`` times, for as long
as every request fails (a 5xx other than 502/503/504, a malformed reply): 14 failed requests when the
model never answers, with the run's false set-aside rate for a model that answers.
A model that did not answer at all (down), a rate limit or an invalid answer is a warning. ``knowwhen plan --probe`` prints the go/no-go
table, and ``run`` prints it and stops on a no-go unless told to skip that model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from ..cache import CacheStore
from ..config import ModelSpec, SweepConfig
from ..dataset.answer_rows import validate_response
from ..exceptions import ConfigError, KnowwhenError, ProviderError
from ..jobs import Items, Job
from ..messages import say
from ..provider import AutoTransport, CacheMode, Limiters, ModelClient, Secrets, Transport, token_prices
from ..queue import Queue
from ..work.budget import BudgetGuard
from ..work.calls import CachedCalls, CallResult, CallTally, Lookup, QuestionCall, question_call
from ..work.quarantine import quarantine_reason

__all__ = [
    "PROBE_QUESTION",
    "Preflight",
    "PreflightError",
    "Probe",
    "no_go_message",
    "preflight_models",
    "probe_models",
]

Check = Literal["ok", "no", "?"]
_SCAN = 256  # pending questions of a model looked up in the cache to find one not answered yet
_PROBE_CALLS = 10  # calls (of 2 tries each) a probe makes while every request is answered with a failure
_CLIENT_ERRORS = (400, 404, 422)  # every probe refused with one of these: the run would get nothing

PROBE_QUESTION: dict[str, Any] = {
    "qhash": "knowwhen-probe-1",
    "state": "TASK: a customer asks where order #1001 is.\nHISTORY:\n(none)\nCURRENT OBSERVATION: start",
    "options": ["lookup_order", "refund_order"],
    "descriptions": ["Look up an order's status.", "Refund an order."],
}
"""The question a model with no open-loop question of its own is probed with."""


class PreflightError(KnowwhenError):
    """A model failed its pre-flight probe: the run stops before spending anything on it."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One model's pre-flight answer: the checks, what it cost and took, and what to fix on a no-go."""

    model_id: str
    go: bool
    how: str  # "called", "cached" (its questions are all answered), "idle" (nothing left), "skipped"
    auth: Check = "?"
    name: Check = "?"
    answer: Check = "?"
    price: Check = "?"
    latency_ms: float | None = None
    cost_usd: float | None = None
    problem: str | None = None  # a no-go: what to fix
    note: str | None = None  # a go with a warning (a failed or invalid answer the run may get past)


def no_go_message(probes: list[Probe]) -> str:
    """One sentence naming every model that cannot go, what to fix in each, and how to go without them."""
    bad = [p for p in probes if not p.go]
    said = "; ".join(f"{p.model_id} cannot go: {p.problem}" for p in bad)
    them = "it" if len(bad) == 1 else "them"
    skips = " ".join(f"--skip-model {p.model_id}" for p in bad)
    return say("preflight.no_go", said=said, them=them, skips=skips)


async def _first_unanswered(
    config: SweepConfig,
    calls: CachedCalls,
    model: ModelSpec,
    items: Items,
    open_jobs: list[Job],
) -> tuple[QuestionCall, dict[str, Any]] | Literal["cached", "idle"] | None:
    """The model's first pending question not in the cache; "cached" when all are, "idle" when it has no
    pending job at all; None when its pending jobs are all episodes."""
    candidates: list[tuple[QuestionCall, dict[str, Any]]] = []
    pending = 0
    for job in open_jobs:
        if job.model_id != model.id:
            continue
        pending += 1
        if job.kind != "question":
            continue
        item = items.get((job.scenario_id, job.item))
        if item is not None:
            candidates.append((question_call(model, item), item))
        if len(candidates) >= _SCAN:
            break
    if not candidates:
        return None if pending else "idle"
    if not CacheMode(config.cache.policy).read:
        return candidates[0]
    cached = await calls.lookup([Lookup(model, c.kind, c.body, c.key) for c, _item in candidates])
    for call, item in candidates:
        if call.key not in cached:
            return call, item
    return "cached"


def _failed_every_request(model: ModelSpec, client: ModelClient, exc: ProviderError, sent: int) -> str | None:
    """What to fix when the probe's failed requests set the model aside (the run's test), else None."""
    if sent < 1 or client.failing.failing(model.id) is None:
        return None
    return (
        f"it answered all {sent} requests of its probe with a failure ({exc}), which sets it aside "
        f"(the run's test: workers.set_aside_error_rate); check the model's server and `model:` of {model.id}"
    )


async def _refused_every_probe(
    calls: CachedCalls, model: ModelSpec, exc: ProviderError, *, asked_own: bool
) -> str | None:
    """A client error (400, 404, 422) may say something of the one question asked (too long, say): the
    run's own question refused, the built-in one is asked too. What to fix when every probe was refused
    with a client error, else None."""
    if asked_own:
        tiny = question_call(model, PROBE_QUESTION)
        try:
            await calls.call(model, tiny.kind, tiny.body, key=tiny.key, lookup=False)
        except ProviderError as again:
            if again.status not in _CLIENT_ERRORS:
                return None
            exc = again
        else:
            return None
    return (
        f"every request of its probe was refused with HTTP {exc.status} ({exc}); check `model:`, "
        f"`api_base:` and the key of {model.id}"
    )


async def _ask(
    client: ModelClient, calls: CachedCalls, model: ModelSpec, call: QuestionCall, lookup: bool
) -> CallResult:
    """The probe's call, made again (up to ``_PROBE_CALLS``) while every request fails; a ProviderError
    carries the requests of all its calls."""
    sent = made = 0
    while True:
        try:
            return await calls.call(model, call.kind, call.body, key=call.key, lookup=lookup)
        except ProviderError as exc:
            sent, made = sent + exc.requests, made + 1
            exc.requests = sent
            if made >= _PROBE_CALLS or quarantine_reason(model, exc):
                raise
            if _failed_every_request(model, client, exc, sent) is not None:
                raise
            if client.failing.in_a_row(model.id) < sent:
                raise  # some request was answered, or failed in a way the test does not count
        await anyio.sleep(0.5)


def _price_fix(config: SweepConfig, model: ModelSpec) -> str:
    """What to do about a model whose price is unknown (under a budget, nothing it spends would count)."""
    spent = " (the run's budget cannot count what it spends)" if config.budget is not None else ""
    return say("preflight.unknown_price", spent=spent, id=model.id)


async def _probe_one(
    config: SweepConfig,
    client: ModelClient,
    calls: CachedCalls,
    model: ModelSpec,
    items: Items,
    open_jobs: list[Job],
    missing_key: str | None = None,
) -> Probe:
    price: Check = "ok" if token_prices(model) is not None else "no"
    unpriced = None if price == "ok" else _price_fix(config, model)  # reachable or not: a no-go
    if missing_key is not None:  # never called: the rest of its row is what can be known without a call
        problem = f"the environment variable {missing_key} is not set"
        return Probe(model.id, False, "not called", "no", price=price, problem=_both(problem, unpriced))
    found = await _first_unanswered(config, calls, model, items, open_jobs)
    if found == "idle":
        return Probe(model.id, True, "idle", problem=None)
    if found == "cached":
        return Probe(model.id, unpriced is None, "cached", "ok", "ok", "ok", price, problem=unpriced)
    call, item = found if found is not None else (question_call(model, PROBE_QUESTION), PROBE_QUESTION)
    started = time.perf_counter()
    timeout = model.timeout_s + 30.0
    try:
        with anyio.fail_after(timeout):
            got = await _ask(client, calls, model, call, found is None)
    except TimeoutError:
        return Probe(model.id, False, "called", problem=_both(f"no answer within {timeout:.0f} s", unpriced))
    except ProviderError as exc:
        reason = quarantine_reason(model, exc) or _failed_every_request(model, client, exc, exc.requests)
        if reason is None and exc.status in _CLIENT_ERRORS:
            reason = await _refused_every_probe(calls, model, exc, asked_own=found is not None)
        if reason is None:  # a failure of this call (429, down): the run's retries may get past it
            note = f"no answer yet: {exc}"
            return Probe(model.id, unpriced is None, "called", price=price, problem=unpriced, note=note)
        auth: Check = "no" if exc.status in (401, 403) else "?"
        name: Check = "no" if exc.status == 404 else ("?" if auth == "no" else "ok")
        return Probe(model.id, False, "called", auth, name, "?", price, problem=_both(reason, unpriced))
    latency = got.response.get("latency_ms") or (time.perf_counter() - started) * 1000
    return _answered(model, item, got.response, float(latency), unpriced)


def _both(problem: str, unpriced: str | None) -> str:
    return problem if unpriced is None else f"{problem}; {unpriced}"


def _answered(
    model: ModelSpec, item: dict[str, Any], response: dict[str, Any], latency: float, unpriced: str | None
) -> Probe:
    """The row of a model that answered its probe: a go when its price is known, from the config or
    litellm's list or from the cost its provider states of each reply (a gateway's)."""
    invalid = validate_response(item, response)
    # One invalid answer is evidence, not proof: the run quarantines a model whose answers mostly are.
    notes = [] if invalid is None else [f"its answer was invalid ({invalid})"]
    cost = response.get("cost_usd")
    if unpriced is not None and cost is not None:  # a gateway's reply states its cost: that is its price
        unpriced = None
        notes.append("priced by the cost its provider states of each reply (no `pricing:`: not forecast)")
    valid: Check = "ok" if invalid is None else "no"
    price: Check = "ok" if unpriced is None else "no"
    note = "; ".join(notes) or None
    return Probe(
        model.id, unpriced is None, "called", "ok", "ok", valid, price, latency, cost, unpriced, note
    )


async def probe_models(
    config: SweepConfig,
    queue: Queue,
    secrets: Secrets,
    items: Items,
    open_jobs: list[Job],
    *,
    store: CacheStore,
    skip: frozenset[str] = frozenset(),
    transport: Transport | None = None,
    tally: CallTally | None = None,
) -> list[Probe]:
    """Probe every model of ``config`` at once (one call each at most), skipping ``skip``; a model whose key
    variable is unset is not called, and is a no-go.

    ``open_jobs``: the run's jobs still to do; a model's probe is its first question not in the cache.
    ``tally``: what the probes' calls made and cost is added to it.
    """
    limiters = Limiters(config.models, max_outage_s=min(60.0, config.workers.max_outage_s))
    client = ModelClient(
        limiters,
        secrets,
        transport=transport or AutoTransport(config.models, config.workers.transport),
        max_tries=2,
        max_backoff_s=2.0,
        set_aside_error_rate=config.workers.set_aside_error_rate,
        set_aside_probe_s=config.workers.set_aside_probe_s,
    )
    budget = BudgetGuard(config, queue.holding) if config.budget is not None else None
    calls = CachedCalls(store, client, config.cache.policy, budget=budget)  # probes count as spending
    probes: dict[str, Probe] = {}
    missing = dict(secrets.missing()[::-1])  # a model's first unset variable is the one to name

    async def one(model: ModelSpec) -> None:
        probes[model.id] = await _probe_one(
            config, client, calls, model, items, open_jobs, missing.get(model.id)
        )

    try:
        async with anyio.create_task_group() as tg:
            for model in config.models:
                if model.id in skip:
                    probes[model.id] = Probe(model.id, True, "skipped", problem="left out with --skip-model")
                else:
                    tg.start_soon(one, model)
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()
    if tally is not None:
        tally.add(calls.tally)
    return [probes[m.id] for m in config.models]


@dataclass(frozen=True)
class Preflight:
    """How ``run`` checks its models before working: probe them (unless ``probe`` is off), leave out
    ``skip`` (their jobs stay pending this run), and show the go/no-go table with ``report``."""

    probe: bool = True
    skip: frozenset[str] = frozenset()
    report: Callable[[list[Probe]], None] | None = None


async def preflight_models(
    config: SweepConfig,
    queue: Queue,
    store: CacheStore,
    secrets: Secrets,
    items: Items,
    preflight: Preflight,
) -> CallTally:
    """Leave out the skipped models; probe the rest; stop on a no-go (``PreflightError``), naming every
    model that cannot go. What the probes' calls made and cost: the run made and spent it too."""
    known = {m.id for m in config.models}
    for model_id in sorted(preflight.skip):
        if model_id not in known:
            raise ConfigError(f"--skip-model {model_id}: no model with that id in the config")
        await queue.holding.set_control(model_id, "quarantined", "left out of this run with --skip-model")
    tally = CallTally()
    if not preflight.probe:
        secrets.require(skip=preflight.skip)  # not probed: an unset key variable still stops the run here
        return tally
    open_jobs = [job for job, _s, _r, _e in await queue.results(status="pending")]
    probes = await probe_models(
        config, queue, secrets, items, open_jobs, store=store, skip=preflight.skip, tally=tally
    )
    if preflight.report is not None:
        preflight.report(probes)
    if not all(p.go for p in probes):
        raise PreflightError(no_go_message(probes))
    return tally
