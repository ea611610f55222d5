"""``knowwhen serve``'s OpenAI files and batches endpoints over real HTTP, with their faults."""

from __future__ import annotations

import httpx
import orjson

from knowwhen_runner.serve import ServerProcess

_LINE = {
    "method": "POST",
    "url": "/v1/chat/completions",
    "body": {
        "model": "lexical-llm",
        "messages": [{"role": "user", "content": "look up the customer"}],
        "tools": [
            {"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
            for n in ("find_customer", "ask_user")
        ],
        "tool_choice": "required",
    },
}


def _batch(client: httpx.Client, n: int) -> dict:
    content = b"".join(orjson.dumps({"custom_id": f"r{i}", **_LINE}) + b"\n" for i in range(n))
    up = client.post("/v1/files", files={"file": ("in.jsonl", content)}, data={"purpose": "batch"})
    assert up.status_code == 200 and up.json()["purpose"] == "batch"
    made = client.post(
        "/v1/batches",
        json={
            "input_file_id": up.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        },
    )
    assert made.status_code == 200
    return dict(made.json())


def test_a_batch_answers_every_line_and_failed_lines_go_to_the_error_file(server: ServerProcess) -> None:
    """Completed: answers in the output file in the chat endpoint's shape, injected failures in the error file."""
    server.set_batch_faults(fail_lines=1)
    with httpx.Client(base_url=server.base_url) as client:
        batch = _batch(client, 3)
        got = client.get(f"/v1/batches/{batch['id']}").json()
        assert got["status"] == "completed" and got["request_counts"] == {
            "total": 3,
            "completed": 2,
            "failed": 1,
        }
        out = [
            orjson.loads(x)
            for x in client.get(f"/v1/files/{got['output_file_id']}/content").content.splitlines()
        ]
        err = [
            orjson.loads(x)
            for x in client.get(f"/v1/files/{got['error_file_id']}/content").content.splitlines()
        ]
    assert [r["custom_id"] for r in out] == ["r1", "r2"] and [r["custom_id"] for r in err] == ["r0"]
    call = out[0]["response"]["body"]["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] in ("find_customer", "ask_user")
    assert err[0]["response"]["status_code"] == 500
    assert server.count(endpoint="chat") == 0 and server.count(endpoint="batch_line") == 2


def test_delay_cancel_expiry_and_errors(server: ServerProcess) -> None:
    """A delayed batch is in progress until cancelled (cancelling, then cancelled, its lines in the error file
    with ids); an expiring one lists every line as expired; a retrieve fault answers 503; unknown ids are 404
    and a wrong purpose 400."""
    server.set_batch_faults(delay_s=60, retrieve_5xx=1)
    with httpx.Client(base_url=server.base_url) as client:
        slow = _batch(client, 2)
        assert client.get(f"/v1/batches/{slow['id']}").status_code == 503
        assert client.get(f"/v1/batches/{slow['id']}").json()["status"] == "in_progress"
        cancelling = client.post(f"/v1/batches/{slow['id']}/cancel").json()
        assert cancelling["status"] == "cancelling" and cancelling["cancelling_at"] is not None
        cancelled = client.get(f"/v1/batches/{slow['id']}").json()
        assert cancelled["status"] == "cancelled" and cancelled["output_file_id"] is None
        unrun = client.get(f"/v1/files/{cancelled['error_file_id']}/content").content.splitlines()
        assert [orjson.loads(x)["id"].startswith("batch_req_") for x in unrun] == [True, True]
        server.set_batch_faults(expire=1)
        gone = client.get(f"/v1/batches/{_batch(client, 2)['id']}").json()
        assert gone["status"] == "expired"
        lines = client.get(f"/v1/files/{gone['error_file_id']}/content").content.splitlines()
        assert [orjson.loads(x)["error"]["code"] for x in lines] == ["batch_expired"] * 2
        assert client.get("/v1/batches/batch_nope").status_code == 404
        bad = client.post("/v1/files", files={"file": ("x.jsonl", b"{}\n")}, data={"purpose": "fine-tune"})
        assert bad.status_code == 400 and "purpose" in bad.json()["error"]["message"]
        assert len(client.get("/v1/batches").json()["data"]) >= 2
