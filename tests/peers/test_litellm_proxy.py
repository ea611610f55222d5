"""A sweep through a real LiteLLM Proxy in front of ``knowwhen serve``, as many labs reach their models.

The proxy (no database) serves three model groups: ``lexical`` (System One, which the proxy forwards to
the server's ``/v1/systemone``), ``lexical-llm`` (two deployments of one model, each with an rpm limit,
which the proxy states as ``x-ratelimit-limit-requests``) and ``agent-sim``, whose deployment is down
(the server answers it 503) with a ``fallbacks:`` entry to ``lexical-llm``. What the proxy really sends
(read by hand with curl and litellm): a fallback's reply says ``"model": "lexical-llm"`` with
``x-litellm-attempted-fallbacks: 1`` and ``x-litellm-model-group: lexical-llm``; a provider's 429 comes
back with its hint as ``llm_provider-retry-after`` (no plain ``retry-after``); a group with rpm limits
states their sum as ``x-ratelimit-limit-requests`` (it does not enforce it without its database).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config
from tests.litellm_proxy import LitellmProxy, start_litellm_proxy

pytestmark = pytest.mark.slow

QUESTIONS = 18  # make_question_set(n_tasks=4)


def _proxy_config(base_url: str) -> dict[str, Any]:
    def deployment(group: str, model: str, api_base: str, **extra: Any) -> dict[str, Any]:
        params = {"model": model, "api_base": api_base, "api_key": "none", **extra}
        return {"model_name": group, "litellm_params": params}

    return {
        "model_list": [
            deployment("lexical", "hosted_vllm/lexical", base_url),
            deployment("lexical-llm", "openai/lexical-llm", f"{base_url}/v1", rpm=100),
            deployment("lexical-llm", "openai/lexical-llm", f"{base_url}/v1", rpm=100),
            deployment("agent-sim", "openai/agent-sim", f"{base_url}/v1"),
            # priced by the proxy, which states each reply's cost in x-litellm-response-cost
            deployment(
                "priced-llm",
                "openai/lexical-llm",
                f"{base_url}/v1",
                input_cost_per_token=1e-6,
                output_cost_per_token=2e-6,
            ),
        ],
        "router_settings": {
            "fallbacks": [{"agent-sim": ["lexical-llm"]}],
            "num_retries": 0,  # retries are the runner's
            "disable_cooldowns": True,
        },
        "litellm_settings": {"drop_params": True},
    }


@pytest.fixture(scope="module")
def proxy(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with start_litellm_proxy(_proxy_config(serve.base_url), tmp_path_factory.mktemp("proxy")) as running:
        yield running


def _sweep(folder: Path, proxy: LitellmProxy) -> Path:
    scenario = make_question_set(folder / "qs", n_tasks=4)

    def model(model_id: str, model_string: str, kind: str, base: str, **extra: Any) -> dict[str, Any]:
        return {"id": model_id, "model": model_string, "kind": kind, "api_base": base,
                "api_key_env": "KW_PROXY_KEY", **extra}  # fmt: skip

    models = [
        model("lexical", "hosted_vllm/lexical", "decision", proxy.url),
        model("lexical-llm", "openai/lexical-llm", "llm", f"{proxy.url}/v1",
              rate_limit={"requests_per_minute": 6000, "max_in_flight": 8}),
        model("agent-sim", "openai/agent-sim", "llm", f"{proxy.url}/v1"),
    ]  # fmt: skip
    episodes = {
        "id": "l3",
        "kind": "episodes",
        "agent": "agent-sim",
        "suite": "common",
        "split": "bench",
        "n": 2,
    }
    return write_config(
        folder / "c.yaml",
        proxy.url,
        scenario,
        models=models,
        modes=["llm", "model"],
        scenarios=[{"id": "qs", "path": str(scenario)}, episodes],
        cache={"path": str(folder / "cache.db")},
        workers={"concurrency": 8, "lease_seconds": 10, "max_attempts": 2},
    )


def _jobs(config: Path) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(model, scenario, status) -> (jobs, their attempts summed)."""
    with sqlite3.connect(config.parent / "out" / "knowwhen.db") as conn:
        rows = conn.execute(
            "SELECT model_id, scenario, status, count(*), sum(attempts) FROM kw_jobs "
            "GROUP BY model_id, scenario, status"
        )
        return {(m, sc, st): (n, a) for m, sc, st, n, a in rows}


@pytest.mark.journey("quarantine.fallback")
def test_a_sweep_through_a_litellm_proxy_keeps_only_the_models_own_answers(
    server: ServerProcess, proxy: LitellmProxy, tmp_path: Path
) -> None:
    """The proxy falls back from agent-sim (down) to lexical-llm: no agent-sim answer is recorded or
    cached, the summary names the replies and the set-aside model, and the run exits 3; the System One
    model's 429s, whose hint the proxy forwards as llm_provider-retry-after, spend no attempt; the
    proxy's stated limit for lexical-llm is kept without `adaptive`, and its configured limit above it
    is named. With agent-sim's deployment back, as the quarantine's sentence says, the same command answers
    its jobs with its own replies."""
    server.set_faults(
        [
            {"fault": "503", "model": "agent-sim", "endpoint": "chat"},  # the primary deployment is down
            {"fault": "429", "model": "lexical", "endpoint": "systemone", "count": 8, "retry_after": 0.5},
        ]
    )
    config = _sweep(tmp_path, proxy)
    done = knowwhen("run", str(config), "--no-probe", env={"KW_PROXY_KEY": proxy.master_key}, timeout=240)
    said = done.stdout + done.stderr
    assert done.returncode == 3, said

    jobs = _jobs(config)
    assert not [k for k in jobs if k[0] == "agent-sim" and k[2] != "pending"], jobs  # no answer recorded
    assert jobs[("agent-sim", "qs", "pending")][1] == 0  # and no attempt spent
    assert {k[2] for k in jobs if k[1] == "l3"} == {"pending"}  # no episode played by another agent
    assert "came from another model" in said and "replies to agent-sim" in said
    assert "quarantined agent-sim" in said and "falls back from 'openai/agent-sim' to lexical-llm" in said
    with sqlite3.connect(tmp_path / "cache.db") as conn:
        cached = dict(conn.execute("SELECT model, count(*) FROM kw_cache GROUP BY model").fetchall())
    assert "openai/agent-sim" not in cached and cached["openai/lexical-llm"] == QUESTIONS

    # the decision model answered through the proxy's System One route, every 429 waited out, unspent
    assert server.count(model="lexical", endpoint="systemone", status=429) == 8
    assert jobs[("lexical", "qs", "done")] == (QUESTIONS, QUESTIONS)  # each on its first attempt
    assert jobs[("lexical-llm", "qs", "done")] == (QUESTIONS, QUESTIONS)

    # the proxy states 200 requests/min for lexical-llm (two deployments of 100): kept and named
    assert "lexical-llm: its provider states a limit of 200 requests/min, below the configured 6,000" in said

    assert "bring its deployment back (or remove the fallback) and run again" in " ".join(said.split())
    server.clear_faults()  # the deployment is back
    again = knowwhen(
        "run", str(config), "--no-probe", "-q", env={"KW_PROXY_KEY": proxy.master_key}, timeout=240
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "another model" not in again.stdout
    assert {k[2] for k in _jobs(config) if k[0] == "agent-sim"} == {"done"}


def test_a_gateway_that_states_its_price_is_priced_whatever_name_reaches_it(
    server: ServerProcess, proxy: LitellmProxy, tmp_path: Path
) -> None:
    """A model the proxy prices, reached by a name that is not loopback's (0.0.0.0): its pre-flight row is
    priced by the cost the reply states, the same the row shows, and it is a go under a budget."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=1)
    port = proxy.url.rsplit(":", 1)[1]
    models = [
        {"id": "priced-llm", "model": "openai/priced-llm", "kind": "llm",
         "api_base": f"http://0.0.0.0:{port}/v1", "api_key_env": "KW_PROXY_KEY"},
    ]  # fmt: skip
    config = write_config(tmp_path / "c.yaml", proxy.url, scenario, models=models, budget={"usd": 1.0})
    shown = knowwhen("plan", str(config), "--probe", "--json", env={"KW_PROXY_KEY": proxy.master_key})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    (probe,) = json.loads(shown.stdout)["probes"]
    assert probe["go"] is True and probe["price"] == "ok" and probe["problem"] is None, probe
    assert probe["cost_usd"] > 0 and "priced by the cost its provider states" in probe["note"]
