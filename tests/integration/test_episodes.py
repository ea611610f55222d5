"""The closed loop end to end: episodes against the real local server and a real SQLite file."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from knowwhen_runner.queue import open_queue
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.sweep import RunRequest, run_sweep
from tests.helpers import knowwhen

pytestmark = pytest.mark.slow

_VOLATILE = ("cache_hits", "spent_usd", "latency_ms")  # how a result was obtained, not what it is


def _models(base: str, *deciders: str, slow: bool = False) -> list[dict[str, Any]]:
    limit = {"max_in_flight": 2 if slow else 16}
    models = [
        {"id": d, "model": f"hosted_vllm/{d}", "kind": "decision", "api_base": base, "rate_limit": limit}
        for d in deciders
    ]
    agent = {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base}/v1"}
    return [*models, {**agent, "rate_limit": limit}]


def _tasks(scenario_id: str, split: str, n: int, **fields: Any) -> dict[str, Any]:
    return {"id": scenario_id, "kind": "episodes", "suite": "common", "split": split, "n": n, **fields}


def _write(
    folder: Path, models: list[dict[str, Any]], scenarios: list[dict[str, Any]], modes: list[str]
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "name": "l3",
        "output": str(folder / "out"),
        "models": models,
        "modes": modes,
        "scenarios": scenarios,
        "workers": {"concurrency": 8, "lease_seconds": 10},
    }
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _results(folder: Path) -> dict[tuple[str, str, str], dict[str, dict[str, Any]]]:
    """Done episodes by (scenario, model, mode), then task id."""

    async def read() -> list[Any]:
        queue = open_queue(f"sqlite:///{folder / 'out' / 'knowwhen.db'}", "l3")
        try:
            return await queue.results()
        finally:
            await queue.close()

    out: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for job, status, result, _error in anyio.run(read):
        if status == "done" and result is not None:
            out[(job.scenario_id, job.model_id, job.mode)][job.item] = result
    return out


def _run(config: Path) -> None:
    summary = run_sweep(RunRequest(config, finalize=False, progress=False))
    assert summary.counts == {"done": summary.planned}, summary.counts


def _who(results: dict[str, dict[str, Any]]) -> set[str]:
    return {d["decided_by"] for r in results.values() for d in r["decisions"]}


def _path(result: dict[str, Any]) -> list[tuple[str | None, Any]]:
    return [(s["tool"], s["arguments"]) for s in result["trajectory"]]


def test_the_perfect_decision_model_in_mode_model_succeeds_on_every_task(
    server: ServerProcess, tmp_path: Path
) -> None:
    """With the answer-key oracle choosing every tool and the agent only writing arguments, all 16 tasks succeed."""
    config = _write(
        tmp_path, _models(server.base_url, "oracle-test-double"), [_tasks("t", "fit", 16)], ["model"]
    )
    _run(config)
    episodes = _results(tmp_path)[("t", "oracle-test-double", "model")]
    assert len(episodes) == 16
    for result in episodes.values():
        assert result["success"] and not result["budget_exhausted"]
        assert result["coverage"] == 1.0 and result["model_accuracy"] == 1.0
        assert result["llm_calls"] == result["decision_calls"] == result["steps"] == result["llm_calls_saved"]
        assert result["fallbacks"] == 0 and result["cache_hits"] == 0


def test_each_mode_lets_the_right_party_decide(server: ServerProcess, tmp_path: Path) -> None:
    """llm: all LLM; model: all model; shadow: LLM-run, model answers recorded; gated τ=0 ≡ model, τ>1 ≡ llm."""
    scenarios = [
        _tasks("all", "fit", 8, modes=["llm", "model", "shadow"]),
        _tasks("tau0", "fit", 8, modes=["gated"], tau=0.0),
        _tasks("tau2", "fit", 8, modes=["gated"], tau=1.5),
    ]
    _run(_write(tmp_path, _models(server.base_url, "prior"), scenarios, ["llm"]))
    got = _results(tmp_path)
    llm, model = got[("all", "agent", "llm")], got[("all", "prior", "model")]
    shadow, tau0, tau2 = (
        got[("all", "prior", "shadow")],
        got[("tau0", "prior", "gated")],
        got[("tau2", "prior", "gated")],
    )
    assert len(llm) == len(model) == len(shadow) == len(tau0) == len(tau2) == 8
    assert _who(llm) == {"llm"} and _who(shadow) == {"llm"} and _who(tau2) == {"llm"}
    assert _who(model) == {"model"} and _who(tau0) == {"model"}
    assert all(r["decision_calls"] == 0 and r["coverage"] == 0.0 for r in llm.values())
    for task, result in shadow.items():
        assert all(
            d["model_choice"] is not None and d["model_confidence"] is not None for d in result["decisions"]
        )
        assert result["decision_calls"] == result["steps"] and result["coverage"] == 0.0
        assert _path(result) == _path(llm[task]) and result["success"] == llm[task]["success"]
    for task in llm:
        assert _path(tau0[task]) == _path(model[task]) and _path(tau2[task]) == _path(llm[task])
        assert tau0[task]["tau"] == 0.0 and tau2[task]["tau"] == 1.5
    assert _path(model[next(iter(model))]) != [], "episodes make calls"
    assert any(_path(model[t]) != _path(llm[t]) for t in llm), "the model and the LLM should differ somewhere"


def test_gating_at_a_fitted_tau_keeps_a_bad_model_out_and_lets_a_good_one_in(
    server: ServerProcess, tmp_path: Path
) -> None:
    """At τ fitted to the LLM's accuracy the random model is never trusted (no worse than llm), the oracle always."""
    scenarios = [
        _tasks("fit", "fit", 10, modes=[]),
        _tasks("ev", "bench", 16, tau={"fit": "fit", "target": "llm"}),
    ]
    models = _models(server.base_url, "random-test-double", "oracle-test-double")
    _run(_write(tmp_path, models, scenarios, ["llm", "gated"]))
    got = _results(tmp_path)
    llm = got[("ev", "agent", "llm")]
    bad, good = got[("ev", "random-test-double", "gated")], got[("ev", "oracle-test-double", "gated")]
    assert len(got[("fit", "random-test-double", "shadow")]) == 10 and len(bad) == len(good) == len(llm) == 16
    llm_wins = sum(r["success"] for r in llm.values())
    assert llm_wins < 16, "the simulated agent should fail some task, or gating has nothing to show"
    assert sum(r["success"] for r in bad.values()) >= llm_wins
    assert sum(r["success"] for r in good.values()) == 16
    bad_fit, good_fit = next(iter(bad.values()))["fit"], next(iter(good.values()))["fit"]
    assert bad_fit["reachable"] is False and bad_fit["tau"] is None and bad_fit["decisions"] > 30
    assert good_fit["reachable"] and good_fit["tau"] == 1.0 and good_fit["support"] == good_fit["decisions"]
    assert 0.5 < good_fit["target_accuracy"] == good_fit["llm_accuracy"] < 1.0
    assert all(r["coverage"] == 0.0 for r in bad.values()) and all(
        r["coverage"] == 1.0 for r in good.values()
    )


def test_decision_model_errors_in_gated_fall_back_to_the_llm_and_are_counted(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Three invalid answers and two rejected requests: five steps decided by the LLM, each flagged with its error."""
    server.set_faults(
        [
            {"fault": "bad_choice", "model": "prior", "count": 3},
            {"fault": "401", "model": "prior", "count": 2},
        ]
    )
    _run(_write(tmp_path, _models(server.base_url, "prior"), [_tasks("t", "fit", 6, tau=0.0)], ["gated"]))
    decisions = [d for r in _results(tmp_path)[("t", "prior", "gated")].values() for d in r["decisions"]]
    fallbacks = [d for d in decisions if d["fallback"]]
    assert len(fallbacks) == 5 and all(d["decided_by"] == "llm" and d["llm_choice"] for d in fallbacks)
    errors = sorted(d["error"].split(":")[0] for d in fallbacks)
    assert errors == ["HTTP 401 AuthenticationError"] * 2 + ["invalid answer"] * 3
    assert all(d["decided_by"] == "model" for d in decisions if not d["fallback"])


def test_kill_9_mid_episode_then_resume_gives_the_uninterrupted_trajectories(
    server: ServerProcess, tmp_path: Path
) -> None:
    """kill -9 while episodes are half done, run again: identical results, and no finished call made twice."""
    server.set_faults([{"fault": "slow", "endpoint": "chat", "delay_s": 0.1}])  # time to land the kill
    scenarios = [_tasks("t", "fit", 8, tau=0.5)]
    reference = _write(tmp_path / "ref", _models(server.base_url, "prior", slow=True), scenarios, ["gated"])
    server.reset_stats()
    own_cache = {"KNOWWHEN_CACHE_DIR": str(tmp_path / "ref" / "cache")}  # else the killed run replays it
    assert knowwhen("run", str(reference), "-q", "--no-finalize", env=own_cache).returncode == 0
    uninterrupted, needed = _results(tmp_path / "ref"), server.count()

    killed = _write(tmp_path / "killed", _models(server.base_url, "prior", slow=True), scenarios, ["gated"])
    server.reset_stats()
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(killed), "-q", "--no-finalize"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while server.count() < needed // 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    at_kill = server.count()
    finished = _results(tmp_path / "killed").get(("t", "prior", "gated"), {})
    calls_of_finished = sum(r["llm_calls"] + r["decision_calls"] for r in finished.values())
    assert len(finished) < 8 and at_kill > calls_of_finished, "the kill should land mid-episode"

    resumed = knowwhen("run", str(killed), "-q", "--no-finalize")
    assert resumed.returncode == 0, resumed.stderr

    def stable(results: dict[Any, dict[str, dict[str, Any]]]) -> dict[Any, Any]:
        return {
            cell: {task: {k: v for k, v in r.items() if k not in _VOLATILE} for task, r in rows.items()}
            for cell, rows in results.items()
        }

    assert stable(_results(tmp_path / "killed")) == stable(uninterrupted)
    in_flight_at_kill = 2 + 2  # max_in_flight of the agent and of the decision model
    assert needed <= server.count() <= needed + in_flight_at_kill


def test_a_finished_episode_run_makes_no_calls_when_run_again(server: ServerProcess, tmp_path: Path) -> None:
    """Every episode call is cached as it is made: a second run of a finished config asks the server nothing."""
    config = _write(
        tmp_path, _models(server.base_url, "prior"), [_tasks("t", "fit", 4, tau=0.5)], ["gated", "shadow"]
    )
    _run(config)
    made = server.count()
    assert made > 0
    summary = run_sweep(RunRequest(config, finalize=False, progress=False))
    assert summary.added == 0 and server.count() == made
