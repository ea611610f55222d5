"""Adaptive limits against the real local server: what it states is read through litellm, used and kept."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider import LitellmTransport, llm_body
from knowwhen_runner.provider.adaptive import read_limit_headers
from knowwhen_runner.provider.retry import error_headers
from knowwhen_runner.queue import open_ledger
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow


def test_the_stated_limit_is_read_from_successes_and_from_429s_through_litellm(server: ServerProcess) -> None:
    """Chat answers carry x-ratelimit-* through litellm; a System One 429 carries them in its error."""
    server.set_rpm_limits({"lexical-llm": 2, "lexical": 1})
    llm = ModelSpec(id="l", model="openai/lexical-llm", kind="llm", api_base=f"{server.base_url}/v1")
    decision = ModelSpec(id="d", model="hosted_vllm/lexical", kind="decision", api_base=server.base_url)
    body = llm_body(
        {"state": "TASK: x", "options": ["a_tool", "b_tool"], "descriptions": ["does a", "does b"]}
    )
    question = {"questions": {"q": {"type": "choice", "criteria": {"a": "x", "b": "y"}}}, "state": "s"}

    async def go() -> tuple[object, object]:
        transport = LitellmTransport()
        await transport.prepare(llm)
        await transport.prepare(decision)
        answer = await transport.send(llm, "llm", body, None)
        await transport.send(decision, "decision", question, None)
        with pytest.raises(Exception) as refused:
            await transport.send(decision, "decision", question, None)
        return answer.limits, read_limit_headers(error_headers(refused.value)[0])

    stated, from_429 = anyio.run(go)
    assert stated.requests_limit == 2 and stated.requests_remaining == 1
    assert from_429.requests_limit == 1 and from_429.requests_remaining == 0
    assert from_429.requests_reset_s is not None and 0 < from_429.requests_reset_s <= 60


def test_a_run_learns_the_stated_limit_keeps_it_and_status_shows_it(
    server: ServerProcess, tmp_path: Path
) -> None:
    """An adaptive LLM reads the server's 600/min from its first answer: no 429s, the row kept, status says so."""
    server.set_rpm_limits({"lexical-llm": 600})
    scenario = make_question_set(tmp_path / "qs", n_tasks=6)
    models = [
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": f"{server.base_url}/v1",
            "rate_limit": {"adaptive": True, "max_in_flight": 8},
        }
    ]
    cfg = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    done = knowwhen("run", str(cfg), "-q", "--no-finalize", "--no-probe")
    assert done.returncode == 0, done.stderr
    counts = server.stats(records=False)["counts"]
    assert {row["status"] for row in counts} == {200}, counts
    assert sum(row["count"] for row in counts) >= 20

    async def learned() -> dict[str, object]:
        async with open_ledger(f"sqlite:///{tmp_path / 'out' / 'knowwhen.db'}") as ledger:
            return dict(await ledger.learned())

    rows = anyio.run(learned)
    (state,) = rows.values()
    assert (state.rpm, state.source) == (600, "headers")  # type: ignore[attr-defined]
    shown = knowwhen("status", str(tmp_path / "out"))
    assert shown.returncode == 0, shown.stderr
    assert "limit lexical-llm: adaptive; 600 requests/min (stated by the provider)" in shown.stdout
    report = json.loads(knowwhen("status", str(tmp_path / "out"), "--json").stdout)
    (row,) = report["limits"]
    assert row["adaptive"] and row["learned"]["rpm"] == 600
