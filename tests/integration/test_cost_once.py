"""A run's cost is what its traffic was worth: each call made counted once, a cache hit nothing new.

A priced run over the real local server, with cache hits in every kind of job (questions, episodes whose
llm and shadow modes make the same agent calls, provider-batch questions), reports what the server's own
records price its traffic at; a second run answered from the cache reports nothing spent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from knowwhen_runner.jsonio import iter_jsonl
from knowwhen_runner.provider.prices import BATCH_FALLBACK_RATE
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set

pytestmark = pytest.mark.slow

PER_REQUEST = {"lexical": 0.001, "agent-sim": 0.002}  # by the model name the server records
BATCH_TOKENS = (1000.0, 2000.0)  # lexical-llm, USD per million input and output tokens


def _config(folder: Path, base: str, scenario: Path, cache: Path) -> Path:
    models = [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": base,
            "pricing": {"per_request": PER_REQUEST["lexical"]},
        },
        {
            "id": "agent",
            "model": "openai/agent-sim",
            "kind": "llm",
            "api_base": f"{base}/v1",
            "pricing": {"per_request": PER_REQUEST["agent-sim"]},
        },
        {
            "id": "batched",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": f"{base}/v1",
            "pricing": {"input_per_million": BATCH_TOKENS[0], "output_per_million": BATCH_TOKENS[1]},
            "batch": {"max_requests": 20, "collect_s": 1.0, "poll_s": 0.2},
        },
    ]
    config = {
        "name": "priced",
        "output": str(folder / "out"),
        "models": models,
        "modes": ["llm", "model", "shadow"],
        "scenarios": [
            {"id": "qs", "path": str(scenario)},
            {"id": "l3", "kind": "episodes", "agent": "agent", "suite": "common", "split": "bench", "n": 4},
        ],
        "cache": {"path": str(cache)},
        "workers": {"concurrency": 8, "lease_seconds": 10},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "c.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder / "c.yaml"


def _batches(server: ServerProcess) -> list[Any]:
    return list(openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused").batches.list())


def _traffic_usd(server: ServerProcess, earlier: set[str]) -> float:
    """What the server's own records price the traffic at: each answered request of a model priced per
    request, and each line of the provider batches not in ``earlier`` by the usage in its output file, at
    the batch price."""
    usd = 0.0
    for row in server.stats(records=False)["counts"]:
        if row["status"] == 200 and row["model"] in PER_REQUEST and row["endpoint"] != "batch_line":
            usd += row["count"] * PER_REQUEST[row["model"]]
    client = openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="unused")
    for batch in client.batches.list():
        if batch.id in earlier or batch.output_file_id is None:
            continue
        for line in client.files.content(batch.output_file_id).text.splitlines():
            usage = json.loads(line)["response"]["body"]["usage"]
            tokens = usage["prompt_tokens"] * BATCH_TOKENS[0] + usage["completion_tokens"] * BATCH_TOKENS[1]
            usd += tokens / 1e6 * BATCH_FALLBACK_RATE
    return usd


def _reported(stdout: str) -> float:
    found = re.search(r"cost \$([0-9.]+)", " ".join(stdout.split()))
    assert found, stdout
    return float(found.group(1))


def _status_spend(folder: Path) -> float:
    done = knowwhen("status", str(folder / "out"), "--json")
    assert done.returncode == 0, done.stderr
    return sum(m["cost_usd"] for m in json.loads(done.stdout)["models"].values())


def _episode_hits(folder: Path) -> int:
    return sum(
        int(r["cache_hits"])
        for p in (folder / "out" / "l3").glob("episodes_*.jsonl.gz")
        for _l, r in iter_jsonl(p)
    )


def test_a_priced_run_reports_what_its_traffic_was_worth(server: ServerProcess, tmp_path: Path) -> None:
    """The run's cost line and its status equal the server's traffic priced, though its episodes found
    calls in the cache; a second run of the same work from the cache reports $0 and the server saw nothing."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)
    cache = tmp_path / "responses.db"
    first = _config(tmp_path / "a", server.base_url, scenario, cache)
    earlier = {b.id for b in _batches(server)}  # the session's server keeps other tests' batches
    done = knowwhen("run", str(first), "-q", "--no-probe")
    assert done.returncode == 0, done.stdout + done.stderr
    worth = _traffic_usd(server, earlier)
    assert worth > 0.01 and server.count(endpoint="batch_line") > 0
    assert _episode_hits(tmp_path / "a") > 0  # shadow and llm episodes make the same agent calls
    assert _reported(done.stdout) == pytest.approx(worth, abs=6e-5)
    assert _status_spend(tmp_path / "a") == pytest.approx(worth, abs=1e-9)

    server.reset_stats()
    second = _config(tmp_path / "b", server.base_url, scenario, cache)
    again = knowwhen("run", str(second), "-q", "--no-probe")
    assert again.returncode == 0, again.stdout + again.stderr
    assert server.stats(records=False)["total"] == 0
    said = " ".join(again.stdout.split())
    assert "0 model calls" in said and _reported(again.stdout) == 0.0
    assert _status_spend(tmp_path / "b") == 0.0
    rows = [r for p in (tmp_path / "b" / "out" / "qs").glob("answers_*.jsonl.gz") for _l, r in iter_jsonl(p)]
    assert rows and all(r["cache_hit"] for r in rows)
    assert sum(r["cost_usd"] or 0.0 for r in rows) > 0  # an answer keeps its call's price, spent or not
