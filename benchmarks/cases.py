"""Benchmark cases of the runner against the local server: overhead, cached replay, plan/resume, rate limits.

Not tests: each case prints figures and returns a dict for ``benchmarks/results.json``. Rates are taken
from the server's own request timestamps (first to last request), so interpreter and import start-up
are left out of both sides of a comparison.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP)
from knowwhen_runner.dataset.files import compute_qhash
from knowwhen_runner.queue.tallies import tally_values
from knowwhen_runner.serve import ServerProcess

OPTIONS = [f"tool_{i:02d}" for i in range(69)]
DESCRIPTIONS = [f"Does thing number {i} for the customer's order." for i in range(69)]


def write_states(folder: Path, n_questions: int, *, per_task: int = 20) -> Path:
    """A question set of ``n_questions`` distinct 69-option states (synthetic, benchmark layout)."""
    folder.mkdir(parents=True, exist_ok=True)
    questions, occurrences = [], []
    for i in range(n_questions):
        state = f"TASK: order {i} needs help\nHISTORY:\n(none)\nCURRENT OBSERVATION: step {i}"
        qhash = compute_qhash(state, OPTIONS, DESCRIPTIONS)
        questions.append({"qhash": qhash, "state": state, "options": OPTIONS, "descriptions": DESCRIPTIONS})
        occurrences.append(
            {
                "task": f"t{i // per_task:05d}",
                "qhash": qhash,
                "gold": OPTIONS[i % 69],
                "gold_aux": {"acceptable_tools": [OPTIONS[i % 69]]},
                "stratum": "on_plan",
                "step": i,
            }
        )
    for name, rows in (("questions", questions), ("occurrences", occurrences)):
        with gzip.open(folder / f"{name}.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    tasks = sorted({o["task"] for o in occurrences})
    (folder / "corpus.json").write_text(json.dumps({"eligible_tasks": tasks}))
    return folder


def write_config(
    path: Path,
    server: ServerProcess,
    scenario: Path,
    *,
    models: list[dict[str, Any]],
    concurrency: int = 32,
    transport: str = "auto",
    **extra: Any,
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    workers = {"concurrency": concurrency, "lease_seconds": 120, "batch_size": 64, "transport": transport}
    config = {
        "name": extra.pop("name", "bench"),
        "output": str(path.parent / "out"),
        "models": models,
        "scenarios": [{"id": "s", "path": str(scenario)}],
        "workers": workers,
        # A response store per config folder: a rerun of the same config replays it (the cached case),
        # but no measured run is answered by another's calls through the user-level store.
        "cache": {"path": str(path.parent / "responses.db")},
        **extra,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def decision_model(server: ServerProcess, model_id: str = "lexical", **kw: Any) -> dict[str, Any]:
    return {
        "id": model_id,
        "model": "hosted_vllm/lexical",
        "kind": "decision",
        "api_base": server.base_url,
        "rate_limit": {"max_in_flight": 64},
        **kw,
    }


def llm_model(server: ServerProcess) -> dict[str, Any]:
    return {
        "id": "lexical-llm",
        "model": "openai/lexical-llm",
        "kind": "llm",
        "api_base": f"{server.base_url}/v1",
        "rate_limit": {"max_in_flight": 64},
    }


def knowwhen(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "knowwhen_runner", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def server_rate(server: ServerProcess) -> tuple[float, int]:
    """Requests per second between the first and the last request the server saw since its last reset."""
    records = server.stats()["records"]
    if len(records) < 2:
        return 0.0, len(records)
    first, last = records[0][0], records[-1][0]
    return (len(records) - 1) / max(1e-9, last - first), len(records)


# --- (1) overhead -----------------------------------------------------------------------------------------


def overhead(server: ServerProcess, work: Path, n: int, rounds: int, concurrency: int = 32) -> dict[str, Any]:
    """The same uncached calls in a bare litellm loop and through ``knowwhen run``, direct and through
    litellm (``transport:``), alternated per round."""
    from benchmarks.overhead import compare

    scenario = write_states(work / "overhead-qs", n)
    configs = {
        (kind, transport): write_config(
            work / f"overhead-{kind}-{transport}" / "c.yaml",
            server,
            scenario,
            models=[model],
            concurrency=concurrency,
            transport=transport,
            modes=["model" if kind == "decision" else "llm"],
        )
        for kind, model in (("decision", decision_model(server)), ("llm", llm_model(server)))
        for transport in ("direct", "litellm")
    }
    return compare(server, configs, n, rounds, concurrency)


def inspect_side_by_side(
    server: ServerProcess, work: Path, n: int, rounds: int, *, install: bool = True
) -> dict[str, Any]:
    """``inspect eval`` and ``knowwhen run`` over the same LLM requests (inspect_ai in its own venv)."""
    from benchmarks.inspect_side import compare
    from knowwhen_runner.provider import llm_body

    scenario = write_states(work / "inspect-qs", n)
    with gzip.open(scenario / "questions.jsonl.gz", "rt") as fh:
        items = [json.loads(line) for line in fh]
    body = llm_body(items[0])
    system = body["messages"][0]["content"]
    texts = [llm_body(item)["messages"][1]["content"] for item in items]
    tools = list(zip(OPTIONS, DESCRIPTIONS, strict=True))
    config = write_config(
        work / "inspect-runner" / "c.yaml", server, scenario, models=[llm_model(server)], modes=["llm"]
    )
    return compare(server, work, config, texts, tools, system, rounds, install=install)


# --- (2) cached replay and (3) plan / resume at scale -------------------------------------------------------


def _seed_cache(config_path: Path, response: dict[str, Any]) -> int:
    """Fill the run's response store with a response for every job of the config (as a finished sweep would)."""
    import anyio

    from knowwhen_runner.cache import CacheEntry, cache_url, open_cache
    from knowwhen_runner.config import load_config
    from knowwhen_runner.provider import decision_body
    from knowwhen_runner.provider.cache_keys import cache_key
    from knowwhen_runner.sweep.sweep import load_and_plan

    config = load_config(config_path)
    _scenarios, the_plan = load_and_plan(config)
    models = {m.id: m for m in config.models}
    entries = {}
    for job in the_plan.jobs:
        model = models[job.model_id]
        body = decision_body(the_plan.items[(job.scenario_id, job.item)])
        entries[cache_key(model, "decision", body)] = CacheEntry("", model.model, response)

    async def put() -> None:
        async with open_cache(cache_url(config)) as store:
            rows = [e._replace(key=k) for k, e in entries.items()]
            for i in range(0, len(rows), 10_000):
                await store.put(rows[i : i + 10_000])

    anyio.run(put)
    return len(entries)


def cached_replay(server: ServerProcess, work: Path, n_models: int, n_questions: int) -> dict[str, Any]:
    """A sweep whose every answer is in the cache: jobs per second, wall time, and no model call."""
    scenario = write_states(work / "replay-qs", n_questions)
    models = [decision_model(server, f"m{i:02d}", params={"variant": i}) for i in range(n_models)]
    db = f"sqlite:///{work / 'replay.db'}"
    cfg = write_config(work / "replay" / "c.yaml", server, scenario, models=models, db=db, name="replay")
    response = {
        "choice": OPTIONS[0],
        "confidence": 0.9,
        "probabilities": None,
        "input_tokens": 10,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "latency_ms": 1.0,
    }
    seeded = _seed_cache(cfg, response)
    server.reset_stats()
    started, cpu = time.perf_counter(), _children_cpu_s()
    # Python lists every module it imports on stderr (PYTHONPROFILEIMPORTTIME): litellm must not be one.
    done = knowwhen("run", str(cfg), "-q", "--no-finalize", env={"PYTHONPROFILEIMPORTTIME": "1"})
    wall, cpu = time.perf_counter() - started, _children_cpu_s() - cpu
    assert done.returncode == 0, done.stderr[-2000:]
    jobs = n_models * n_questions
    return {
        "jobs": jobs,
        "cache_entries": seeded,
        "wall_s": round(wall, 2),
        "jobs_per_s": round(jobs / wall, 1),
        "run_cpu_s": round(cpu, 2),  # the run process's CPU time: steadier than wall on a busy machine
        "model_requests": server.count(),
        "litellm_imported": "| litellm" in done.stderr,
    }


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of the child processes waited for so far (the server is not one)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _to_first_call(server: ServerProcess, args: list[str], limit_s: float = 180.0) -> float | None:
    """Seconds from starting a ``knowwhen`` process to the first model request the server sees (it is
    then killed): what a resume or a worker joining a run costs before it does any work."""
    server.reset_stats()
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    started = time.time()
    first = None
    while first is None and proc.poll() is None and time.time() - started < limit_s:
        records = server.stats()["records"]
        first = records[0][0] if records else None
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    return round(first - started, 2) if first else None


def _timed(args: list[str]) -> float:
    """Wall seconds of one ``knowwhen`` command, which must succeed."""
    started = time.perf_counter()
    done = knowwhen(*args)
    assert done.returncode == 0, done.stderr[-2000:]
    return round(time.perf_counter() - started, 2)


def plan_and_resume(
    server: ServerProcess, work: Path, n_models: int, n_questions: int, open_jobs: int, *, tag: str = "plan"
) -> dict[str, Any]:
    """Plan a big grid into a fresh database (seconds, peak RSS); mark all but ``open_jobs`` done; then
    time a rerun and a joining worker to their first model call, and ``knowwhen status``."""
    scenario = write_states(work / f"{tag}-qs", n_questions)
    models = [decision_model(server, f"m{i:02d}", params={"variant": i}) for i in range(n_models)]
    cfg = write_config(work / tag / "c.yaml", server, scenario, models=models, name=tag.replace(".", "_"))
    # Planned as a user plans, with ``knowwhen run --plan-only`` (the run keeps its plan's stamp, as any
    # run does), in a process that reports its own peak memory.
    code = (
        "import resource, sys\nfrom knowwhen_runner.cli.main import main\nsys.argv[0] = 'knowwhen'\n"
        "try:\n    main()\nfinally:\n"
        "    print('peak_rss_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    )
    started = time.perf_counter()
    planned = subprocess.run(
        [sys.executable, "-c", code, "run", str(cfg), "-q", "--plan-only"], capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    assert planned.returncode == 0, planned.stderr
    rss_kb = int(planned.stderr.split("peak_rss_kb")[-1].split()[0])
    import sqlite3

    db = work / tag / "out" / "knowwhen.db"
    with sqlite3.connect(db) as conn:
        (n,) = conn.execute("SELECT count(*) FROM kw_jobs").fetchone()
        # Done as the queue records a result: with its tally values (cost, call, cache hit) beside it.
        conn.execute(
            "UPDATE kw_jobs SET status = 'done', result = '{}', cost_usd = ?, called = ?, cache_hit = ? "
            "WHERE id NOT IN (SELECT id FROM kw_jobs ORDER BY id LIMIT ?)",
            (*tally_values({}), open_jobs),
        )
    rerun = _to_first_call(server, ["run", str(cfg), "-q", "--no-finalize"])
    join = _to_first_call(server, ["worker", "--db", f"sqlite:///{db}", "-q", "--no-finalize"])
    # The first status after a plan sums every done job once and keeps the sums; later ones add what
    # was done since: both are reported.
    status_first = _timed(["status", str(work / tag / "out")])
    status = _timed(["status", str(work / tag / "out")])
    return {
        "jobs": int(n),
        "plan_s": round(seconds, 2),
        "plan_peak_rss_mb": round(rss_kb / 1024, 1),
        "already_done": int(n) - open_jobs,
        "start_to_first_call_s": rerun,
        "worker_join_to_first_call_s": join,
        "status_first_s": status_first,
        "status_s": status,
    }


def ratios(big: dict[str, Any], small: dict[str, Any]) -> dict[str, float | None]:
    """Each start-up figure of a big plan over the same figure of a small one with the same work left
    (the target: at most 1.5, the cost follows the work left, not the plan)."""
    keys = ("start_to_first_call_s", "worker_join_to_first_call_s", "status_first_s", "status_s")
    return {key: round(big[key] / small[key], 2) if big.get(key) and small.get(key) else None for key in keys}


# --- (4) finalising a large answered run --------------------------------------------------------------


def _answered(db: Path, run: str, seed: int = 0) -> int:
    """Mark every planned job of the SQLite run at ``db`` done with a 69-option answer (probabilities,
    tokens, cost, latency), as a finished sweep records it: one transaction of bulk updates."""
    import random
    import sqlite3

    rng = random.Random(seed)
    with sqlite3.connect(db) as conn:
        jobs = conn.execute("SELECT id, model_id, item FROM kw_jobs WHERE run = ?", (run,)).fetchall()
        rows = []
        for job_id, model_id, qhash in jobs:
            weights = [rng.random() ** 4 for _ in OPTIONS]
            total = sum(weights)
            probs = {o: w / total for o, w in zip(OPTIONS, weights, strict=True)}
            choice = max(probs, key=probs.__getitem__)
            result = {
                "model": model_id, "qhash": qhash, "answer": choice, "confidence": probs[choice],
                "probabilities": probs, "valid": True, "error": None, "attempts": 1, "requests": 1,
                "cost_usd": 0.0001, "latency_ms": 20.0, "wall_ms": 21.0, "input_tokens": 1600,
                "output_tokens": 0, "cache_hit": False, "retry_errors": [], "extra_choices": None,
            }  # fmt: skip
            rows.append((json.dumps(result), *tally_values(result), time.time(), run, job_id))
        conn.executemany(
            "UPDATE kw_jobs SET status = 'done', attempts = 1, result = ?, cost_usd = ?, called = ?, "
            "cache_hit = ?, updated_at = ? WHERE run = ? AND id = ?",  # by the primary key (run, id)
            rows,
        )
    return len(rows)


def finalise_at_scale(server: ServerProcess, work: Path, n_models: int, n_questions: int) -> dict[str, Any]:
    """Plan ``n_models`` (one of them the gate's LLM) over ``n_questions`` states, record an answer for
    every job straight into the SQLite queue, then time ``knowwhen finalize`` as a process (its peak RSS)."""
    tag = "finalise"
    scenario = write_states(work / f"{tag}-qs", n_questions)
    models = [decision_model(server, f"m{i:02d}", params={"variant": i}) for i in range(n_models - 1)]
    models.append(llm_model(server))
    cfg = write_config(
        work / tag / "c.yaml", server, scenario, models=models, name=tag, modes=["llm", "model"],
        gate={"llm": "lexical-llm", "target": 0.95},
    )  # fmt: skip
    planned = knowwhen("run", str(cfg), "-q", "--plan-only")
    assert planned.returncode == 0, planned.stderr[-2000:]
    started = time.perf_counter()
    answered = _answered(work / tag / "out" / "knowwhen.db", tag)
    write_s = time.perf_counter() - started
    code = (
        "import resource, sys\nfrom knowwhen_runner.cli.main import main\nsys.argv[0] = 'knowwhen'\n"
        "try:\n    main()\nfinally:\n"
        "    print('peak_rss_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, "finalize", str(work / tag / "out")], capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    rss_kb = int(done.stderr.split("peak_rss_kb")[-1].split()[0])
    return {
        "jobs": answered,
        "write_answers_s": round(write_s, 1),
        "finalize_s": round(seconds, 2),
        "finalize_peak_rss_mb": round(rss_kb / 1024, 1),
    }


# --- (5) rate-limit fidelity -------------------------------------------------------------------------------


def rate_limit_fidelity(server: ServerProcess, work: Path, rpm: int, seconds: float) -> dict[str, Any]:
    """A model limited to ``rpm`` against a server enforcing exactly that: achieved rate and 429s."""
    n = int(rpm * seconds / 60) + 1
    scenario = write_states(work / "rate-qs", n)
    model = decision_model(server, rate_limit={"requests_per_minute": rpm, "max_in_flight": 32})
    cfg = write_config(work / "rate" / "c.yaml", server, scenario, models=[model], name="rate")
    server.reset_stats()
    server.set_rpm_limits({"lexical": rpm})
    try:
        done = knowwhen("run", str(cfg), "-q", "--no-finalize")
    finally:
        server.set_rpm_limits({})
    assert done.returncode == 0, done.stderr
    rate, seen = server_rate(server)
    rejected = server.count(status=429)
    return {
        "limit_rpm": rpm,
        "requests": seen,
        "achieved_rpm": round(rate * 60, 1),
        "share_of_limit": round(rate * 60 / rpm, 3),
        "http_429": rejected,
    }


def _cpu_seconds(pid: int) -> float:
    """CPU seconds a running process's main thread (the server's event loop) has used so far, to the
    nanosecond (Linux ``/proc/PID/schedstat``)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def _big_post(base: str, path: str, size: int, *, declared: bool, chunk: int = 2**20) -> dict[str, Any]:
    """POST ``size`` bytes to ``path``, with a Content-Length or in chunks of unknown total, from httpx's
    client (which sends the whole body before it reads, and reads the reply after a failed send)."""
    import httpx  # start-up: only this case posts bodies itself

    block = b"x" * chunk
    sent = 0

    def body() -> Any:
        nonlocal sent
        while sent < size:
            sent += len(block)
            yield block

    headers = {"content-type": "application/json", **({"content-length": str(size)} if declared else {})}
    started = time.perf_counter()
    reply = httpx.post(base + path, content=body(), headers=headers, timeout=120)
    return {
        "status": reply.status_code,
        "seconds": round(time.perf_counter() - started, 3),
        "client_sent_mb": round(sent / 2**20, 1),
    }


def _latency_meanwhile(base: str, work: Any) -> tuple[Any, list[float]]:
    """``work()`` run in a thread while this one asks ``/health`` every 10 ms: its result and the latencies."""
    import threading

    import httpx  # start-up: only this case posts bodies itself

    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()))
    latencies: list[float] = []
    with httpx.Client(base_url=base) as client:
        thread.start()
        while thread.is_alive():
            started = time.perf_counter()
            assert client.get("/health").status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.01)
    thread.join()
    return result[0], sorted(latencies)


def big_bodies(server: ServerProcess, size: int) -> dict[str, Any]:
    """What a body of ``size`` bytes costs the server, for an unknown route, a known route with a declared
    length past the limit, and a known route sent in chunks of unknown total: its CPU time over the POST
    alone (its event loop is its one thread), then the latency of small requests sent during a second."""
    figures: dict[str, Any] = {"body_mb": round(size / 2**20)}
    attacks = {
        "unknown_route_declared": ("/v1/nowhere", True),
        "chat_declared": ("/v1/chat/completions", True),
        "chat_chunked": ("/v1/chat/completions", False),
    }
    pid = server.process.pid
    for name, (path, declared) in attacks.items():
        cpu = []
        for _ in range(3):
            before = _cpu_seconds(pid)
            result = _big_post(server.base_url, path, size, declared=declared)
            cpu.append(_cpu_seconds(pid) - before)
        _, latencies = _latency_meanwhile(
            server.base_url, lambda p=path, d=declared: _big_post(server.base_url, p, size, declared=d)
        )
        figures[name] = {
            **result,
            "server_cpu_ms_median_of_3": round(sorted(cpu)[1] * 1000, 1),
            "health_requests_meanwhile": len(latencies),
            "health_p50_ms": round(latencies[len(latencies) // 2] * 1000, 2),
            "health_max_ms": round(latencies[-1] * 1000, 2),
        }
    return figures


def scratch() -> Path:
    """A scratch folder; the user-level response store of every run started from here goes in it too."""
    work = Path(tempfile.mkdtemp(prefix="knowwhen-bench-"))
    os.environ["KNOWWHEN_CACHE_DIR"] = str(work / "user-cache")
    return work
