"""Finding a batch whose provider id was never written down, and the bound on every batch request.

In-process, against a ``MockTransport`` that pages its batch list like OpenAI (newest first, ``after``):
the lookup reads page after page until it finds the key the runner wrote in the batch's metadata, or
the list ends, or it reaches batches older than the row; a lane whose provider requests keep failing
gives the batch up after ``batch.max_errors`` of them, with the reason, and sends its questions to the
synchronous path.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from knowwhen_runner.cache import open_cache
from knowwhen_runner.config import load_config
from knowwhen_runner.plan import plan
from knowwhen_runner.provider import MockTransport, Secrets
from knowwhen_runner.provider.batch_client import CLOCK_SKEW_S, BatchClient, BatchLine
from knowwhen_runner.queue import BatchRecord, open_queue
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.work.batch_lane import BatchLane
from tests.helpers import make_question_set, write_config
from tests.unit.test_batch_transport import _body, _chat_answer, _model


def _provider_with(n: int, page_size: int) -> tuple[MockTransport, BatchClient]:
    transport = MockTransport(lambda _m, _k, body: _chat_answer(body), page_size=page_size)
    client = BatchClient(transport)

    async def fill() -> None:
        for i in range(n):
            await client.submit(_model(), f"key{i}", [BatchLine("j", _body("t"))], None)

    anyio.run(fill)
    transport.batch_ops.clear()
    return transport, client


def test_the_lookup_pages_through_the_list_until_it_finds_the_key() -> None:
    """Among 35 batches listed 10 a page, the second oldest is found on the fourth page (by ``after``); a key
    no batch carries reads every page once and is absent."""
    transport, client = _provider_with(35, page_size=10)
    assert anyio.run(client.find, _model(), "key1", None) == "batch-2"
    assert transport.batch_ops == ["list"] * 4
    transport.batch_ops.clear()
    assert anyio.run(client.find, _model(), "nobody", None) is None
    assert transport.batch_ops == ["list"] * 4


def test_the_lookup_stops_at_batches_older_than_the_row() -> None:
    """Batches older than the row (less the clock-skew margin) cannot be its own: one page is read, not all."""
    transport, client = _provider_with(35, page_size=10)
    since = time.time() + CLOCK_SKEW_S + 60
    assert anyio.run(lambda: client.find(_model(), "nobody", None, since=since)) is None
    assert transport.batch_ops == ["list"]


@pytest.mark.parametrize(("status", "calls"), [(503, 2), (404, 1)])
def test_a_lookup_that_keeps_failing_gives_the_batch_up_to_the_synchronous_path(
    tmp_path: Path, status: int, calls: int
) -> None:
    """A batch row never noted as created, whose lookup fails on every list call: after ``max_errors`` (2)
    list calls (one when the list endpoint is missing, a 404) the batch is given up with the last error,
    its questions are pending again and go to synchronous calls, never into another batch."""
    failing = [MockTransport.error(status, "list is down") for _ in range(50)]
    transport = MockTransport(lambda _m, _k, body: _chat_answer(body), fail={"list": failing})
    spec = _model().model_dump(mode="json", exclude_none=True)
    spec["batch"]["max_errors"] = 2
    qs = make_question_set(tmp_path / "qs", n_tasks=3)
    config = load_config(write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", qs, models=[spec]))
    the_plan = plan(config, {s.id: load_scenario(s) for s in config.scenarios})
    models = {m.id: m for m in config.models}

    async def go() -> tuple[list[BatchRecord], list[Any], list[bool]]:
        queue = open_queue("memory://", config.name)
        await queue.init_run("", {})
        await queue.enqueue(the_plan.jobs, the_plan.items)
        jobs = await queue.claim("old", len(the_plan.jobs), 0.01)
        await queue.batching.batch_open(
            "old", "lost", "m", [j.id for j in jobs], 0.01
        )  # then the process died
        await anyio.sleep(0.05)
        lane = BatchLane(
            queue, "w", models, the_plan.items, Secrets(config.models), config.workers,
            unhold=lambda _ids: None, on_recorded=lambda _rows, _final: None,
            store=open_cache("memory://"), client=BatchClient(transport),
        )  # fmt: skip
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lane.run)
                while (await queue.batching.batches())[0].status == "submitting":  # noqa: ASYNC110 (the queue's state)
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
        back = await queue.claim("w", len(jobs), 5)
        return await queue.batching.batches(), back, [await lane.takes(j) for j in back]

    batches, back, batched = anyio.run(go)
    assert transport.batch_ops == ["list"] * calls
    assert batches[0].status == "given_up" and "lookup failed 2/2" in (batches[0].error or "")
    assert "list is down" in (batches[0].error or "")
    assert len(back) == len(the_plan.jobs) and not any(batched)
