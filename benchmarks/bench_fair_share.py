"""Fair share across models: every model runs at its own limit, whatever the models beside it do.

(a) seven decision models at 300 requests/min with 100 questions each, alone, then beside an eighth at
60 requests/min: each fast model's finish time against its time alone (target <= 1.1x), and the slow
model's achieved rate against its limit (target >= 90%).
(b) many models with limits spread over 30-3,000 requests/min and answer latencies of 10 ms-3 s (the
server's ``slow`` fault rule): each model's finish against its own bound (its jobs / what its limit
and in-flight cap allow, plus start-up; target within 10%), and the sweep against the slowest model's
bound (target within 5%). The limits are scaled, all by one factor, until together they ask at most
half of what this machine sustains (measured first: one model, no limit): beyond that the CPU, not the
limits, sets the pace, which is not what the case measures. It prints the factor and the machine's rate.
(d) twenty models whose limits the server enforces without stating them (``--no-limit-headers``):
each model's achieved rate in its last minute against its limit (target >= 90% within 5 minutes) and
the share of 429s (target <= 1%).

Finish times are read from the server's own request records (first request of the run to a model's
last), so interpreter start-up is left out. Run with ``python -m benchmarks --case fair_share`` (parts a, b,
d; c too with ``KNOWWHEN_BENCH_PG``; ``KNOWWHEN_BENCH_FAIR=ab`` picks parts), or this file with ``--parts``.
(c) is (b) on a throwaway PostgreSQL database worked by two processes (``knowwhen run --processes 2``).
"""

from __future__ import annotations

import math
import os
import random
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.cases import knowwhen, write_states
from knowwhen_runner.serve import ServerProcess, start_server_process

__all__ = ["fair_share"]

_START_S = 1.5  # what a model's bound allows from the run's first request to its own first one


def _model(server: ServerProcess, name: str, rpm: float | None, in_flight: int = 16) -> dict[str, Any]:
    limit: dict[str, Any] = {"max_in_flight": in_flight}
    if rpm is not None:
        limit["requests_per_minute"] = rpm
    return {
        "id": name,
        "model": f"hosted_vllm/{name}",
        "kind": "decision",
        "api_base": server.base_url,
        "limit_group": name,
        "rate_limit": limit,
    }


def _run(
    work: Path,
    name: str,
    models: list[dict[str, Any]],
    scenarios: list[dict[str, Any]],
    *args: str,
    **extra: Any,
) -> float:
    """``knowwhen run`` on a fresh config; returns its wall time."""
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "name": name,
        "output": str(folder / "out"),
        "models": models,
        "scenarios": scenarios,
        "cache": {"path": str(folder / "responses.db")},
        **extra,
    }
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    started = time.perf_counter()
    done = knowwhen("run", str(path), "-q", "--no-finalize", *args)
    assert done.returncode == 0, done.stderr[-2000:]
    return time.perf_counter() - started


def _finishes(server: ServerProcess) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Seconds from the run's first request to each model's last answered one, and each model's times."""
    records = server.stats()["records"]
    start = min(r[0] for r in records)
    times: dict[str, list[float]] = {}
    for at, model, _endpoint, status in records:
        if status == 200:
            times.setdefault(model, []).append(at)
    return {m: max(ts) - start for m, ts in times.items()}, times


def _rate(times: list[float]) -> float:
    """Requests per second between a model's first and last request."""
    return (len(times) - 1) / max(1e-9, max(times) - min(times)) if len(times) > 1 else 0.0


def case_a(server: ServerProcess, work: Path, questions: int = 100) -> dict[str, Any]:
    """Seven models at 300/min alone, then beside one at 60/min."""
    scenario = [{"id": "s", "path": str(write_states(work / "a-qs", questions))}]
    fast = [f"fast{i}" for i in range(7)]
    server.set_rpm_limits({**{m: 300 for m in fast}, "slow0": 60})
    out: dict[str, Any] = {"questions_per_model": questions}
    alone: dict[str, float] = {}
    for label, names in (("alone", fast), ("beside_slow", [*fast, "slow0"])):
        server.reset_stats()
        models = [_model(server, m, 60 if m.startswith("slow") else 300) for m in names]
        wall = _run(work, f"a-{label}", models, scenario)
        finish, times = _finishes(server)
        out[f"{label}_wall_s"] = round(wall, 1)
        out[f"{label}_fast_finish_s"] = [round(finish[m], 1) for m in fast]
        if label == "alone":
            alone = finish
        else:
            ratios = [finish[m] / alone[m] for m in fast]
            out["fast_ratio_max"] = round(max(ratios), 3)
            out["fast_ratio_target"] = "<= 1.1"
            slow_rate = _rate(times["slow0"]) * 60
            out["slow_finish_s"] = round(finish["slow0"], 1)
            out["slow_share_of_limit"] = round(slow_rate / 60, 3)
            out["slow_share_target"] = ">= 0.90"
        out[f"{label}_http_429"] = server.count(status=429)
    server.set_rpm_limits({})
    return out


def _spread(n: int, scale: float = 1.0, seed: int = 7) -> list[tuple[str, float, float]]:
    """``n`` models: (name, limit per minute, latency in seconds), log-spread over 30-3,000/min (times
    ``scale``) and 10 ms-3 s, paired at random."""
    rng = random.Random(seed)
    rpms = [30 * scale * 100 ** (i / (n - 1)) for i in range(n)]
    lats = [0.01 * 300 ** (i / (n - 1)) for i in range(n)]
    rng.shuffle(lats)
    return [
        (f"b{i:02d}", max(1, round(r)), round(lat, 3))
        for i, (r, lat) in enumerate(zip(rpms, lats, strict=True))
    ]


def machine_rate(server: ServerProcess, work: Path, questions: int = 600) -> float:
    """Requests per second one ``knowwhen run`` sustains here against the server: one model, no rate
    limit, instant answers (what the runner and the server's CPU allow)."""
    scenario = [{"id": "s", "path": str(write_states(work / "cal-qs", questions))}]
    server.reset_stats()
    _run(work, "calibrate", [_model(server, "b00", None, in_flight=64)], scenario, "--no-probe")
    _finish, times = _finishes(server)
    return _rate(times["b00"])


def case_b(
    server: ServerProcess,
    work: Path,
    n_models: int = 40,
    questions: int = 8,
    pg: str | None = None,
    episodes: int = 1,
    load: float = 0.5,
    capacity: float | None = None,
) -> dict[str, Any]:
    """Many models with spread limits and latencies, the same ``questions`` each plus ``episodes``
    closed-loop DecisionGym episodes each (the simulated agent LLM at 3,000/min): each model against its
    own bound, the sweep against the slowest's. A model's bound: its requests at what its limit and
    in-flight cap allow, or its episode's chain of calls one after another if longer, plus start-up.

    The limits are scaled (all by one factor, so the spread stays 100 x) until together they ask at
    most ``load`` of what this machine sustains (``capacity``, measured first): beyond it the CPU, not
    the limits, would set the pace. Times run from the first request sent (no pre-flight probe). With
    ``pg`` (case c): on a throwaway PostgreSQL database, worked by two processes."""
    if capacity is None:
        capacity = machine_rate(server, work)
    full = sum(rpm for _, rpm, _ in _spread(n_models)) / 60 + (50.0 if episodes else 0.0)
    scale = min(1.0, load * capacity / full)
    spread = _spread(n_models, scale)
    in_flight = 64
    scenarios = [{"id": "s", "path": str(write_states(work / "b-qs", questions))}]
    server.set_rpm_limits({name: rpm for name, rpm, _ in spread})
    server.set_faults([{"fault": "slow", "model": name, "delay_s": lat} for name, _, lat in spread])
    models = [_model(server, name, rpm, in_flight) for name, rpm, _ in spread]
    agent_rpm = max(1, round(3000 * scale))
    agent = {"id": "agent-sim", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{server.base_url}/v1",
             "limit_group": "agent", "rate_limit": {"requests_per_minute": agent_rpm, "max_in_flight": 64}}  # fmt: skip
    if episodes:
        models.append(agent)
        scenarios.append({"id": "l3", "kind": "episodes", "agent": "agent-sim", "suite": "common",
                          "split": "bench", "n": episodes, "modes": ["model"]})  # fmt: skip
    server.reset_stats()
    try:
        if pg is None:
            wall = _run(work, "b", models, scenarios, "--no-probe", modes=["model"])
        else:
            from benchmarks.bench_fleet import _database

            with _database(pg, work) as db:
                wall = _run(work, "c", models, scenarios, "--no-probe", "--processes", "2", "--db", db,
                            modes=["model"])  # fmt: skip
    finally:
        server.clear_faults()
        server.set_rpm_limits({})
    named = [*spread, ("agent-sim", agent_rpm, 0.0)] if episodes else spread
    latency = {name: lat for name, _, lat in named}
    records = [r for r in server.stats()["records"] if r[3] == 200]
    origin = min(at - latency.get(model, 0.0) for at, model, _e, _s in records)  # the first request sent
    times: dict[str, list[float]] = {}
    for at, model, _endpoint, _status in records:
        times.setdefault(model, []).append(at - origin)
    finish = {m: max(ts) for m, ts in times.items()}
    rows, worst, slowest_bound = [], 0.0, 0.0
    for name, rpm, lat in named:
        requests = len(times.get(name, ()))
        chain = (requests - questions) / max(1, episodes) * (lat + 60 / rpm) if name != "agent-sim" else 0.0
        bound = max(requests / min(rpm / 60, in_flight / max(lat, 1e-3)), chain) + lat + _START_S
        slowest_bound = max(slowest_bound, bound)
        if name != "agent-sim":  # the agent LLM is paced by its episodes' decision models, each checked
            worst = max(worst, finish.get(name, math.inf) / bound)
        rows.append(
            f"{name} {rpm}/min {lat * 1000:.0f} ms: {finish.get(name, math.inf):.1f} s / {bound:.1f} s"
        )
    sweep = max(finish.values())
    return {
        "models": n_models,
        "machine_requests_per_s": round(capacity, 1),
        "limit_scale": round(scale, 3),
        "limits_per_min": [spread[0][1], spread[-1][1]],
        "limits_total_per_s": round(full * scale, 1),
        "questions": questions * n_models,
        "episodes": episodes * n_models,
        "requests": sum(len(t) for t in times.values()),
        "wall_s": round(wall, 1),
        "worst_model_finish_over_bound": round(worst, 3),
        "model_target": "<= 1.10",
        "sweep_finish_s": round(sweep, 1),
        "slowest_bound_s": round(slowest_bound, 1),
        "sweep_over_slowest_bound": round(sweep / slowest_bound, 3),
        "sweep_target": "<= 1.05",
        "http_429": server.count(status=429),
        "per_model": rows,
    }


def case_d(server: ServerProcess, work: Path, n_models: int = 20, seconds: float = 180.0) -> dict[str, Any]:
    """Models whose limits (60-300/min) the server enforces without stating them: each model's rate over
    the last minute of ``seconds`` against its limit, and the share of 429s. The run is stopped then."""
    import signal
    import subprocess
    import sys

    limits = {f"d{i:02d}": round(60 * 5 ** (i / max(1, n_models - 1))) for i in range(n_models)}
    questions = round(max(limits.values()) * seconds / 60 * 1.2)
    scenario = [{"id": "s", "path": str(write_states(work / "d-qs", questions))}]
    models = [
        {**_model(server, name, None), "rate_limit": {"max_in_flight": 16, "adaptive": True}}
        for name in limits
    ]
    folder = work / "d"
    folder.mkdir(parents=True, exist_ok=True)
    config = {"name": "d", "output": str(folder / "out"), "models": models, "scenarios": scenario,
              "cache": {"path": str(folder / "responses.db")}}  # fmt: skip
    (folder / "c.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    server.set_rpm_limits(limits, headers=False)
    server.reset_stats()
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(folder / "c.yaml"), "-q", "--no-finalize"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(seconds)
    finally:
        end = time.time()  # the figures are of the minute before the stop
        for sig, wait_s in ((signal.SIGINT, 60), (signal.SIGINT, 30), (signal.SIGKILL, 30)):
            proc.send_signal(sig)  # Ctrl-C lets started calls finish; a second one cancels them
            try:
                proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        server.set_rpm_limits({})
    records = [r for r in server.stats()["records"] if r[0] <= end]
    worst, rows = math.inf, []
    for name, limit in limits.items():
        last = [r for r in records if r[1] == name and r[3] == 200 and r[0] >= end - 60]
        share = len(last) / limit
        worst = min(worst, share)
        rows.append(f"{name} {limit}/min: {len(last)} in the last minute ({share:.0%})")
    total = sum(1 for r in records if r[1] in limits)
    rejected = sum(1 for r in records if r[1] in limits and r[3] == 429)
    return {
        "models": n_models,
        "seconds": seconds,
        "worst_share_of_limit_last_minute": round(worst, 3),
        "share_target": ">= 0.90 (within 5 minutes)",
        "http_429_share": round(rejected / max(1, total), 4),
        "http_429_target": "<= 0.01",
        "per_model": rows,
    }


def fair_share(work: Path, parts: str = "ab", quick: bool = False) -> dict[str, Any]:
    """The cases named in ``parts``, each on a server that serves every model name they use."""
    names = [f"fast{i}" for i in range(7)] + ["slow0"] + [f"b{i:02d}" for i in range(40)]
    names += [f"d{i:02d}" for i in range(20)]
    aliases = [arg for name in names for arg in ("--alias", f"{name}=lexical")]
    out: dict[str, Any] = {}
    with start_server_process(extra_args=aliases) as server:
        if "a" in parts:
            out["a"] = case_a(server, work, 20 if quick else 100)
        capacity = machine_rate(server, work, 100 if quick else 600) if "b" in parts or "c" in parts else 0.0
        if "b" in parts:
            out["b"] = case_b(server, work, 8 if quick else 40, 3 if quick else 8, capacity=capacity)
        if "c" in parts:
            pg = os.environ.get("KNOWWHEN_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
            out["c"] = case_b(server, work, 8 if quick else 40, 3 if quick else 8, pg=pg, capacity=capacity)
        if "d" in parts:
            out["d"] = case_d(server, work, 4 if quick else 20, 30.0 if quick else 180.0)
    return out


if __name__ == "__main__":
    import argparse
    import json
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--parts", default="a")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = fair_share(Path(tempfile.mkdtemp(prefix="knowwhen-fair-")), args.parts, args.quick)
    print(json.dumps(result, indent=2))
