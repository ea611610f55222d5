"""``knowwhen serve``'s files and batches endpoints as OpenAI's own SDK sees them, through the spec's proxy.

Every exchange goes through Stoplight Prism holding OpenAI's published API description (``spec_proxy``
fails the test on anything outside it), and is made by the official ``openai`` package: what the SDK
and the spec both accept is what a user of the real API would meet.
"""

from __future__ import annotations

import itertools

import openai
import orjson

from knowwhen_runner.serve import ServerProcess
from tests.prism import SpecProxy, batch_input_errors


def _line(i: int) -> bytes:
    body = {
        "model": "lexical-llm",
        "messages": [{"role": "user", "content": f"look up customer {i}"}],
        "tools": [
            {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
            for n in ("find_customer", "ask_user")
        ],
        "tool_choice": "required",
    }
    return orjson.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})


def _create(client: openai.OpenAI, n: int, tag: str) -> tuple[str, str]:
    upload = client.files.create(
        file=("in.jsonl", b"\n".join(_line(i) for i in range(n)) + b"\n"),
        purpose="batch",
        expires_after={"anchor": "created_at", "seconds": 3600},
    )
    assert upload.purpose == "batch" and upload.expires_at == upload.created_at + 3600
    batch = client.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"tag": tag},
    )
    assert batch.status == "validating" and batch.metadata == {"tag": tag}
    return batch.id, upload.id


def test_the_sdk_lists_pages_creates_polls_downloads_and_cancels(
    server: ServerProcess, spec_proxy: SpecProxy
) -> None:
    """Through the spec's proxy, the SDK pages through batches (limit/after/has_more), polls one to completion,
    downloads its output and error files (both ``batch_output``), cancels another (cancelling, then cancelled),
    and lists and deletes files."""
    client = openai.OpenAI(base_url=spec_proxy.url, api_key="sk-test", max_retries=0)
    server.set_batch_faults(fail_lines=1)
    done_id, done_input = _create(client, 3, "done")
    done = client.batches.retrieve(done_id)  # the server finishes a batch when it is looked at
    server.set_batch_faults(delay_s=600)
    slow = [_create(client, 2, f"slow{i}") for i in range(3)]
    slow_ids = [batch_id for batch_id, _ in slow]

    # Newest first; the server may hold older batches of other tests after ours.
    first = client.batches.list(limit=2)
    assert [b.id for b in first.data] == slow_ids[::-1][:2] and first.has_more
    assert first.first_id == slow_ids[2] and first.last_id == slow_ids[1]
    paged = [b.id for b in itertools.islice(client.batches.list(limit=2), 4)]  # the second page by after
    assert paged == [*slow_ids[::-1], done_id]
    assert client.batches.list(limit=2, after=slow_ids[0]).data[0].id == done_id

    assert done.status == "completed" and done.request_counts is not None
    assert (done.request_counts.completed, done.request_counts.failed) == (2, 1)
    assert done.output_file_id and done.error_file_id
    out = [orjson.loads(x) for x in client.files.content(done.output_file_id).read().splitlines()]
    err = [orjson.loads(x) for x in client.files.content(done.error_file_id).read().splitlines()]
    assert [r["custom_id"] for r in out] == ["r1", "r2"] and [r["custom_id"] for r in err] == ["r0"]
    assert all(r["id"].startswith("batch_req_") for r in out + err)
    assert out[0]["response"]["body"]["choices"][0]["message"]["refusal"] is None
    assert {client.files.retrieve(f).purpose for f in (done.output_file_id, done.error_file_id)} == {
        "batch_output"
    }

    assert client.batches.retrieve(slow_ids[0]).status == "in_progress"
    assert client.batches.cancel(slow_ids[0]).status == "cancelling"
    cancelled = client.batches.retrieve(slow_ids[0])
    assert cancelled.status == "cancelled" and cancelled.cancelled_at is not None and cancelled.error_file_id
    unrun = [orjson.loads(x) for x in client.files.content(cancelled.error_file_id).read().splitlines()]
    assert [r["error"]["code"] for r in unrun] == ["batch_cancelled"] * 2

    inputs = [f.id for f in itertools.islice(client.files.list(purpose="batch", limit=3), 4)]
    assert inputs == [file_id for _, file_id in slow[::-1]] + [done_input]  # two pages
    assert client.files.delete(inputs[0]).deleted
    assert client.files.list(purpose="batch", limit=1).data[0].id == inputs[1]
    assert server.count(endpoint="files_content") == 3


def test_a_batch_input_line_outside_the_spec_is_named() -> None:
    """The input-file check names the file, line and field of a request the spec refuses, and passes the
    runner's own kind of line."""
    good = _line(0)
    bad = orjson.dumps(
        {
            "custom_id": "r1",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "robot", "content": "hi"}]},
        }
    )
    assert batch_input_errors(good, "in.jsonl") == []
    errors = batch_input_errors(good + b"\n" + bad, "in.jsonl")
    assert errors and all(e.startswith("in.jsonl:2: body:") for e in errors)


def test_a_chat_completion_with_tools_passes_the_spec(server: ServerProcess, spec_proxy: SpecProxy) -> None:
    """A chat completion asking for a tool call, as the runner and its pre-flight send one, is inside the spec
    both ways: the reply carries ``message.refusal`` (null) and the tool call the SDK parses."""
    client = openai.OpenAI(base_url=spec_proxy.url, api_key="sk-test", max_retries=0)
    body = orjson.loads(_line(0))["body"]
    reply = client.chat.completions.create(**body)
    message = reply.choices[0].message
    assert message.refusal is None and message.tool_calls
    assert message.tool_calls[0].function.name in ("find_customer", "ask_user")
    assert server.count(endpoint="chat", status=200) == 1
