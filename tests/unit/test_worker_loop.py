"""The worker loop in-process, on the memory queue, with requests answered by a MockTransport.

No server and no subprocess: what these prove is the loop itself (claiming, single flight, retries,
Retry-After, an outage waited out, a fatal error, stopping mid-run, recording), in seconds.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from knowwhen_runner.cache import open_cache
from knowwhen_runner.config import ModelSpec, SweepConfig, load_config
from knowwhen_runner.plan import plan
from knowwhen_runner.provider import MockTransport, Origin, Reply, Secrets
from knowwhen_runner.queue import JobResult, Queue, open_queue
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.sweep import work_queue
from knowwhen_runner.work import Worker
from tests.helpers import make_question_set, write_config

QUESTIONS = 18  # make_question_set(n_tasks=4)


def _config(tmp_path: Path, **workers: Any) -> SweepConfig:
    """Two decision models with the same model string (so the same calls) and no LLM."""
    qs = make_question_set(tmp_path / "qs", n_tasks=4)
    models = [
        {"id": mid, "model": "hosted_vllm/dm", "kind": "decision", "api_base": "http://127.0.0.1:9"}
        for mid in ("a", "b")
    ]
    path = write_config(
        tmp_path / "c.yaml",
        "http://127.0.0.1:9",
        qs,
        models=models,
        modes=["model"],
        workers={"concurrency": 4, "lease_seconds": 10, "max_attempts": 2, **workers},
    )
    return load_config(path)


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    labels = list(body["questions"]["next_tool"]["criteria"])
    probs = {label: (0.6 if i == 0 else 0.4 / (len(labels) - 1)) for i, label in enumerate(labels)}
    return {
        "choice": labels[0],
        "confidence": 0.5,
        "probabilities": probs,
        "input_tokens": 1,
        "output_tokens": 0,
        "cost_usd": 0.0,
    }


async def _run(config: SweepConfig, transport: MockTransport) -> tuple[Queue, list[JobResult]]:
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    the_plan = plan(config, scenarios)
    queue = open_queue("memory://", config.name)
    await queue.init_run("", {})
    await queue.enqueue(the_plan.jobs, the_plan.items)
    await work_queue(
        config, queue, Secrets(config.models), the_plan.items, progress=False, transport=transport
    )
    return queue, await queue.results()


def _statuses(results: list[JobResult]) -> Counter[str]:
    return Counter(r.status for r in results)


def test_every_job_is_answered_and_identical_calls_are_made_once(tmp_path: Path) -> None:
    """Two models asking the same questions: 36 jobs done, 18 requests (single flight and the cache)."""
    transport = MockTransport(lambda model, kind, body: _answer(body))
    _queue, results = anyio.run(_run, _config(tmp_path), transport)
    assert _statuses(results) == {"done": 2 * QUESTIONS}
    assert len(transport.sent) == QUESTIONS
    assert all(
        r.result and r.result["valid"] and r.result["confidence"] == pytest.approx(0.6) for r in results
    )
    assert all(r.result and r.result["reported_confidence"] == 0.5 for r in results)


def test_a_transient_error_is_retried_and_the_retry_shows_in_the_row(tmp_path: Path) -> None:
    """The first request of each question is a 500: every job ends valid with 2 requests and the error kept."""
    seen: Counter[str] = Counter()

    def handler(model: ModelSpec, kind: str, body: dict[str, Any]) -> Any:
        seen[body["state"]] += 1
        return MockTransport.error(500, "boom") if seen[body["state"]] == 1 else _answer(body)

    config = _config(tmp_path).model_copy(update={"models": _config(tmp_path).models[:1]})
    _queue, results = anyio.run(_run, config, MockTransport(handler))
    rows = [r.result for r in results if r.result]
    assert len(rows) == QUESTIONS and all(r["valid"] and r["requests"] == 2 for r in rows)
    assert all(any("HTTP 500" in e for e in r["retry_errors"]) for r in rows)


def test_retry_after_pauses_the_model_for_that_long(tmp_path: Path) -> None:
    """One 429 with Retry-After 0.5 s: no request starts inside the pause, then every job is answered."""
    starts: list[float] = []
    state = {"limited": False}

    def handler(model: ModelSpec, kind: str, body: dict[str, Any]) -> Any:
        starts.append(time.monotonic())
        if not state["limited"]:
            state["limited"] = True
            return MockTransport.error(429, "slow down", retry_after=0.5)
        return _answer(body)

    _queue, results = anyio.run(_run, _config(tmp_path), MockTransport(handler))
    assert _statuses(results) == {"done": 2 * QUESTIONS}
    later = [t for t in starts[1:] if t > starts[0]]
    assert later and min(later) - starts[0] >= 0.5


def test_an_outage_is_waited_out_without_spending_attempts(tmp_path: Path) -> None:
    """Refused connections for 2 s: the model is down, then probed; all jobs done, each on its first attempt."""
    began = time.monotonic()

    def handler(model: ModelSpec, kind: str, body: dict[str, Any]) -> Any:
        if time.monotonic() - began < 2.0:
            return httpx.ConnectError("[Errno 111] Connection refused")
        return _answer(body)

    transport = MockTransport(handler)
    _queue, results = anyio.run(_run, _config(tmp_path), transport)
    assert _statuses(results) == {"done": 2 * QUESTIONS}
    assert all(r.job.attempts == 1 for r in results)
    refused = sum(1 for s in transport.sent if s.kind == "decision") - QUESTIONS
    assert 8 <= refused < 40  # the breaker opened after 8, then one probe at a time, not a storm


def test_a_fatal_error_fails_the_job_at_once_with_its_reason(tmp_path: Path) -> None:
    """A 400 is not retried: one request per question, every job failed with the status in its error."""
    transport = MockTransport(lambda model, kind, body: MockTransport.error(400, "bad request"))
    _queue, results = anyio.run(_run, _config(tmp_path), transport)
    assert _statuses(results) == {"failed": 2 * QUESTIONS}
    assert all(r.error and "HTTP 400" in r.error for r in results)
    assert len(transport.sent) <= 2 * QUESTIONS


def test_a_401_quarantines_the_model_and_fails_no_job(tmp_path: Path) -> None:
    """A 401 is the key, not the question: the model is quarantined after the calls in flight, every job
    stays pending with its attempt unspent, and the quarantine says which key to check."""
    transport = MockTransport(lambda model, kind, body: MockTransport.error(401, "bad key"))
    config = _config(tmp_path)
    queue, results = anyio.run(_run, config, transport)
    assert _statuses(results) == {"pending": 2 * QUESTIONS}
    assert len(transport.sent) <= 2 * config.workers.concurrency  # the calls in flight, per model
    held = anyio.run(queue.holding.controls)
    assert {c.model_id for c in held} == {m.id for m in config.models}
    assert all(c.state == "quarantined" and "refused the key" in c.reason for c in held)


def test_stopping_mid_run_loses_nothing_and_leaves_the_rest_pending(tmp_path: Path) -> None:
    """stop() after a few answers: the calls in flight are recorded, unstarted jobs go back to pending."""
    config = _config(tmp_path, concurrency=2)

    async def go() -> list[JobResult]:
        scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
        the_plan = plan(config, scenarios)
        queue = open_queue("memory://", config.name)
        await queue.init_run("", {})
        await queue.enqueue(the_plan.jobs, the_plan.items)
        worker: Worker | None = None

        async def slow(model: ModelSpec, kind: str, body: dict[str, Any]) -> dict[str, Any]:
            await anyio.sleep(0.05)
            if worker is not None and len(transport.sent) >= 5:
                worker.stop()
            return _answer(body)

        transport = MockTransport(slow)
        from knowwhen_runner.provider import Limiters, ModelClient
        from knowwhen_runner.work.worker import Worker as _Worker

        limiters = Limiters(config.models)
        client = ModelClient(limiters, Secrets(config.models), transport=transport)
        worker = _Worker(
            config, queue, client, the_plan.items, cache=open_cache("memory://"), limiters=limiters
        )
        await worker.run()
        return await queue.results()

    results = anyio.run(go)
    statuses = _statuses(results)
    assert statuses["done"] >= 5 and statuses["done"] + statuses["pending"] == 2 * QUESTIONS
    assert "running" not in statuses  # nothing left leased
    assert all(r.job.attempts == 0 for r in results if r.status == "pending")


def test_episodes_whose_agent_stays_down_end_the_run_with_their_jobs_pending(tmp_path: Path) -> None:
    """The agent LLM never answers: after max_outage_s the worker stops waiting (no hang), no episode failed,
    every one pending with no attempt spent, and few requests were made (probes, not a storm)."""
    qs = make_question_set(tmp_path / "qs", n_tasks=1)
    models = [
        {"id": "dm", "model": "hosted_vllm/dm", "kind": "decision", "api_base": "http://127.0.0.1:9"},
        {"id": "agent", "model": "openai/agent", "kind": "llm", "api_base": "http://127.0.0.1:9/v1"},
    ]
    episodes = {"id": "eps", "kind": "episodes", "agent": "agent", "suite": "common", "split": "fit", "n": 6}
    path = write_config(
        tmp_path / "c.yaml",
        "http://127.0.0.1:9",
        qs,
        models=models,
        modes=["shadow"],
        scenarios=[episodes],
        workers={"concurrency": 4, "lease_seconds": 10, "max_outage_s": 2},
    )
    config = load_config(path)

    def handler(model: ModelSpec, kind: str, body: dict[str, Any]) -> Any:
        if kind == "llm":
            return httpx.ConnectError("[Errno 111] Connection refused")
        return _answer(body)

    transport = MockTransport(handler)

    async def go() -> list[JobResult]:
        with anyio.fail_after(60):
            return (await _run(config, transport))[1]

    results = anyio.run(go)
    assert _statuses(results) == {"pending": 6}
    assert all(r.job.attempts == 0 for r in results)
    assert sum(1 for s in transport.sent if s.kind == "llm") < 30


async def _run_cached(
    config: SweepConfig, transport: MockTransport
) -> tuple[Queue, list[JobResult], Any, Any]:
    """``_run`` with the cache in hand, and what the worker counted."""
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    the_plan = plan(config, scenarios)
    queue = open_queue("memory://", config.name)
    await queue.init_run("", {})
    await queue.enqueue(the_plan.jobs, the_plan.items)
    store = open_cache("memory://")
    stats, _ = await work_queue(
        config,
        queue,
        Secrets(config.models),
        the_plan.items,
        progress=False,
        transport=transport,
        cache=store,
    )
    return queue, await queue.results(), store, stats


def test_a_gateways_fallback_is_never_an_answer_and_sets_the_model_aside(tmp_path: Path) -> None:
    """Every reply to model a says a gateway fell back to another model: no answer of a is recorded or
    cached, the replies are counted, and a is quarantined saying the gateway fell back; b is unharmed."""

    def handler(model: ModelSpec, kind: str, body: dict[str, Any]) -> Any:
        if model.id == "a":
            return Reply(_answer(body), origin=Origin(model="lexical-llm", fallbacks=1))
        return Reply(_answer(body), origin=Origin(model="dm"))

    config = _config(tmp_path)
    b = config.models[1].model_copy(update={"model": "hosted_vllm/dm2", "served_as": "dm"})
    config = config.model_copy(update={"models": [config.models[0], b]})
    queue, results, store, stats = anyio.run(_run_cached, config, MockTransport(handler))
    by_model = Counter((r.job.model_id, r.status) for r in results)
    assert by_model == {("a", "pending"): QUESTIONS, ("b", "done"): QUESTIONS}
    assert anyio.run(store.stats) == {"hosted_vllm/dm2": QUESTIONS}  # b's answers alone
    held = anyio.run(queue.holding.controls)
    assert [(c.model_id, c.state) for c in held] == [("a", "quarantined")]
    assert "falls back from 'hosted_vllm/dm' to lexical-llm" in held[0].reason
    assert stats.other_model["a"] >= config.workers.max_attempts + 1  # every try of the first failed call
    assert "b" not in stats.other_model


def test_another_models_reply_is_retried_and_only_the_models_own_is_kept(tmp_path: Path) -> None:
    """The first reply of each question names another model (no fallback header): it is retried, and every
    row and cache entry is the model's own answer (the other's choice never appears)."""
    seen: Counter[str] = Counter()

    def handler(model: ModelSpec, kind: str, body: dict[str, Any]) -> Any:
        seen[body["state"]] += 1
        if seen[body["state"]] == 1:
            wrong = {**_answer(body), "choice": "not-a-tool"}
            return Reply(wrong, origin=Origin(model="hosted_vllm/prior"))
        return Reply(_answer(body), origin=Origin(model="dm"))

    config = _config(tmp_path).model_copy(update={"models": _config(tmp_path).models[:1]})
    _queue, results, _store, stats = anyio.run(_run_cached, config, MockTransport(handler))
    rows = [r.result for r in results if r.result]
    assert len(rows) == QUESTIONS and all(r["valid"] and r["requests"] == 2 for r in rows)
    assert all(any("another model's" in e for e in r["retry_errors"]) for r in rows)
    assert stats.other_model == {"a": QUESTIONS}


def test_a_429_with_a_gateways_retry_hint_spends_no_try(tmp_path: Path) -> None:
    """Each question's first seven requests get a 429 whose hint comes as a gateway forwards it
    (llm_provider-retry-after, retry-after-ms): more than the call's tries, yet every job is done on its
    first attempt, and no request starts inside a hinted pause."""
    seen: Counter[str] = Counter()
    starts: list[tuple[float, float]] = []  # (when, the pause it asked for)

    def handler(model: ModelSpec, kind: str, body: dict[str, Any]) -> Any:
        seen[body["state"]] += 1
        if seen[body["state"]] <= 7:
            hint = (
                {"llm_provider-retry-after": "0.02"} if seen[body["state"]] % 2 else {"retry-after-ms": "20"}
            )
            starts.append((time.monotonic(), 0.02))
            return MockTransport.error(429, "slow down", headers=hint)
        return _answer(body)

    config = _config(tmp_path, max_attempts=1).model_copy(update={"models": _config(tmp_path).models[:1]})
    _queue, results = anyio.run(_run, config, MockTransport(handler))
    assert _statuses(results) == {"done": QUESTIONS}
    assert all(r.job.attempts == 1 for r in results)
    assert all(r.result and r.result["requests"] == 8 for r in results)
