"""Provider batches and limit news through the transport seam, answered in-process by a MockTransport.

No server: what these prove is that every batch request goes through the ``Transport`` (submit, find,
poll, cancel, results, errors), that the batch lane records what the fake provider answered, and that
what a response's headers say about limits arrives beside the response, never inside it.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from knowwhen_runner.cache import open_cache
from knowwhen_runner.config import ModelSpec, SweepConfig, load_config
from knowwhen_runner.plan import plan
from knowwhen_runner.provider import Limiters, MockTransport, ModelClient, Reply, Secrets
from knowwhen_runner.provider.adaptive import LimitNews
from knowwhen_runner.provider.batch_client import METADATA_KEY, BatchClient, BatchLine, LineResult
from knowwhen_runner.queue import JobResult, open_queue
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.work.batch_lane import BatchLane
from knowwhen_runner.work.calls import question_call
from tests.helpers import make_question_set, write_config

PACKAGE = Path(__file__).resolve().parents[2] / "knowwhen_runner"
PRICING = {"input_per_million": 2.0, "output_per_million": 8.0}  # at the batch price: half


def _model() -> ModelSpec:
    return ModelSpec.model_validate(
        {
            "id": "m",
            "model": "openai/fake-llm",
            "kind": "llm",
            "api_base": "http://127.0.0.1:9/v1",
            "pricing": PRICING,
            "batch": {"max_requests": 50, "collect_s": 0.05, "poll_s": 0.05},
        }
    )


def _chat_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A normalised chat answer: the request's first tool."""
    return {
        "choice": body["tools"][0]["function"]["name"],
        "arguments": "{}",
        "confidence": None,
        "probabilities": None,
        "content": None,
        "input_tokens": 10,
        "output_tokens": 2,
        "cost_usd": 0.0,
    }


def _body(tool: str) -> dict[str, Any]:
    return {
        "messages": [],
        "tools": [{"type": "function", "function": {"name": tool}}],
        "tool_choice": "required",
    }


def test_a_batch_is_submitted_polled_and_read_back_through_the_transport() -> None:
    """Submit uploads the JSONL and tags the batch with our key; polls see it run, then its priced answers."""
    transport = MockTransport(lambda _m, _k, body: _chat_answer(body), batch_polls=2)
    client, model = BatchClient(transport), _model()
    lines = [BatchLine(f"j{i}", client.request_body(model, _body(f"tool_{i}"))) for i in range(3)]

    async def go() -> tuple[str, str | None, list[str], list[LineResult]]:
        provider_id = await client.submit(model, "key1", lines, None)
        found = await client.find(model, "key1", None)
        states = [(await client.retrieve(model, provider_id, None)) for _ in range(3)]
        return provider_id, found, [s.status for s in states], await client.results(model, states[-1], None)

    provider_id, found, statuses, results = anyio.run(go)
    assert found == provider_id
    assert statuses == ["in_progress", "in_progress", "completed"]
    assert transport.batch_ops == ["upload", "create", "list", "retrieve", "retrieve", "retrieve", "results"]
    sent = [orjson.loads(raw) for raw in transport._files["file-1"].splitlines()]
    assert [s["custom_id"] for s in sent] == ["j0", "j1", "j2"] and sent[0]["body"]["model"] == "fake-llm"
    assert transport._batches[provider_id].metadata == {METADATA_KEY: "key1"}
    assert [(r.custom_id, r.response and r.response["choice"]) for r in results] == [
        ("j0", "tool_0"),
        ("j1", "tool_1"),
        ("j2", "tool_2"),
    ]
    assert all(r.response and r.response["cost_usd"] == pytest.approx(10 * 1e-6 + 2 * 4e-6) for r in results)


def test_a_failed_line_comes_back_as_an_error_and_the_others_as_answers() -> None:
    """A line the provider could not answer is read from the error file as a sentence; the rest answer."""

    def handler(_m: ModelSpec, _k: str, body: dict[str, Any]) -> Any:
        tool = body["tools"][0]["function"]["name"]
        return MockTransport.error(500, "overloaded") if tool == "bad" else _chat_answer(body)

    transport = MockTransport(handler)
    client, model = BatchClient(transport), _model()
    lines = [BatchLine("ok", _body("good")), BatchLine("no", _body("bad"))]

    async def go() -> list[LineResult]:
        state = await client.retrieve(model, await client.submit(model, "k", lines, None), None)
        assert state.output_file_id and state.error_file_id
        return await client.results(model, state, None)

    ok, failed = anyio.run(go)
    assert ok.custom_id == "ok" and ok.response is not None and ok.error is None
    assert failed.custom_id == "no" and failed.response is None
    assert failed.error == "batch line HTTP 500: overloaded"


def test_provider_errors_of_batch_requests_reach_the_caller_and_cancel_reaches_the_provider() -> None:
    """A refused creation and a failed poll raise the provider's error; a cancelled batch ends cancelled."""
    refused = MockTransport.error(400, "batches not available")
    transport = MockTransport(
        lambda _m, _k, body: _chat_answer(body),
        batch_polls=5,
        fail={"create": [refused], "retrieve": [MockTransport.error(503, "busy")]},
    )
    client, model = BatchClient(transport), _model()
    lines = [BatchLine("j", _body("t"))]

    async def go() -> str:
        with pytest.raises(Exception, match="batches not available"):
            await client.submit(model, "k", lines, None)
        provider_id = await client.submit(model, "k", lines, None)
        with pytest.raises(Exception, match="busy"):
            await client.retrieve(model, provider_id, None)
        await client.cancel(model, provider_id, None)
        state = await client.retrieve(model, provider_id, None)
        assert state.finished and await client.results(model, state, None) == []
        return state.status

    assert anyio.run(go) == "cancelled"
    assert transport.batch_ops.count("create") == 2


def _lane_config(tmp_path: Path) -> SweepConfig:
    qs = make_question_set(tmp_path / "qs", n_tasks=3)
    spec = _model().model_dump(mode="json", exclude_none=True)
    path = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", qs, models=[spec])
    return load_config(path)


async def _lane_run(config: SweepConfig, transport: MockTransport) -> list[JobResult]:
    """Claim every question, hand it to a batch lane on the memory queue, run the lane until all are recorded."""
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    the_plan = plan(config, scenarios)
    queue = open_queue("memory://", config.name)
    await queue.init_run("", {})
    await queue.enqueue(the_plan.jobs, the_plan.items)
    models = {m.id: m for m in config.models}
    settings = config.workers
    settled = [0]
    all_settled = anyio.Event()

    def on_recorded(rows: list[dict[str, Any]], final: int) -> None:
        settled[0] += len(rows) + final
        if settled[0] >= len(the_plan.jobs):
            all_settled.set()

    lane = BatchLane(
        queue,
        "w",
        models,
        the_plan.items,
        Secrets(config.models),
        settings,
        unhold=lambda _ids: None,
        on_recorded=on_recorded,
        store=open_cache("memory://"),
        client=BatchClient(transport),
    )
    claimed = await queue.claim("w", len(the_plan.jobs), settings.lease_seconds)
    assert claimed and len(claimed) == len(the_plan.jobs)
    for job in claimed:
        assert await lane.takes(job)
        lane.add(job, question_call(models[job.model_id], the_plan.items[(job.scenario_id, job.item)]))
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lane.run)
            await all_settled.wait()
            tg.cancel_scope.cancel()
    return await queue.results()


def test_the_batch_lane_records_what_the_fake_provider_answered(tmp_path: Path) -> None:
    """Every claimed question goes through one fake batch and is recorded done, with its batch id."""
    transport = MockTransport(lambda _m, _k, body: _chat_answer(body), batch_polls=1)
    results = anyio.run(_lane_run, _lane_config(tmp_path), transport)
    assert results and {r.status for r in results} == {"done"}
    assert {r.result["batch"] for r in results if r.result} == {"batch-1"}
    assert all(r.result and r.result["valid"] and r.result["answer"] for r in results)
    assert all(r.result and r.result["cost_usd"] == pytest.approx(1.8e-5) for r in results)  # batch price
    assert transport.sent == []  # nothing went to the synchronous path
    assert transport.batch_ops[:2] == ["upload", "create"] and "results" in transport.batch_ops


def test_a_refused_batch_sends_its_questions_back_to_the_queue(tmp_path: Path) -> None:
    """A creation refused with 400 is never retried as a batch: its jobs go back failed, with the reason."""
    transport = MockTransport(
        lambda _m, _k, body: _chat_answer(body),
        fail={"create": [MockTransport.error(400, "no batches here")]},
    )
    config = _lane_config(tmp_path)
    config = config.model_copy(update={"workers": config.workers.model_copy(update={"max_attempts": 1})})
    results = anyio.run(_lane_run, config, transport)
    assert results and {r.status for r in results} == {"failed"}
    assert all("batch refused" in (r.error or "") and "no batches here" in (r.error or "") for r in results)


def test_limit_news_arrives_beside_the_response_and_is_not_stored_in_it() -> None:
    """A reply's stated limit reaches the adaptive limiter; the response the cache stores has no trace of it."""
    model = ModelSpec(id="m", model="openai/remote-x", kind="llm")
    news = LimitNews(requests_limit=600, requests_remaining=599)
    transport = MockTransport(lambda _m, _k, body: Reply(_chat_answer(_body("t")), news))
    limiters = Limiters([model])
    client = ModelClient(limiters, Secrets([model]), transport=transport)
    outcome = anyio.run(client.call, model, "llm", _body("t"))
    adaptive = limiters["m"].adaptive
    assert adaptive is not None and (adaptive.rpm, adaptive.state.source) == (600, "headers")
    assert set(outcome.response) == {*_chat_answer(_body("t")), "latency_ms"}


def _root(func: ast.expr) -> str | None:
    """The name an attribute chain starts from (``litellm`` in ``litellm.acompletion``)."""
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else None


def test_only_the_transport_sends_requests_through_litellm() -> None:
    """No module but provider/transport.py awaits a litellm call (batches included): one seam for fakes."""
    found = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Await)
        and isinstance(node.value, ast.Call)
        and _root(node.value.func) == "litellm"  # the library (``self.litellm`` is our transport)
    }
    assert found == {"provider/transport.py"}
