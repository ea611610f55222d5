"""Throughput of one run worked by 1, 2 and 4 worker processes, and the cost of the fleet's rate limits.

Not a test. Starts the local model server (``knowwhen serve``, which answers at once), writes a question
set of ``--questions`` questions for one decision model, and runs ``knowwhen run --processes P`` on a
fresh database for each P. From the queue's own timestamps it reports jobs per second over the whole
work (first to last recorded job) and steady (between 30% and 90% of the jobs recorded, when every
process is working: each one's interpreter and litellm start-up, and the last one's tail, left out),
the steady rate against one process, and the CPU the runner's processes and the server spent per job:
over the whole run (start-up included: each process spends about 3 s of CPU importing litellm) and in
the steady phase, sampled from ``/proc`` while the run works (the cores each side keeps busy then).
Then it times rate-limit reservations and in-flight renewals against the ledger, one call at a time.

The server shares the machine with the workers: on N cores, P processes can at best reach
N / (runner cpu + server cpu per job) jobs per second, whatever the runner does.

Run: ``python benchmarks/bench_fleet.py [--questions 3000] [--processes 1 2 4] [--pg URL]``, where
``--pg`` names a PostgreSQL database the benchmark may create throwaway databases from.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from knowwhen_runner.dataset.files import compute_qhash
from knowwhen_runner.queue.limits import LimitLedger
from knowwhen_runner.serve import start_server_process

TOOLS = {f"tool_{i:02d}": f"Does thing number {i} for the customer." for i in range(12)}


def _write_questions(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    options, descriptions = list(TOOLS), list(TOOLS.values())
    questions, occurrences = [], []
    for i in range(n):
        state = f"TASK: request {i}\nHISTORY:\n(none)\nCURRENT OBSERVATION: customer {i} needs tool {i % 12}"
        qhash = compute_qhash(state, options, descriptions)
        questions.append({"qhash": qhash, "state": state, "options": options, "descriptions": descriptions})
        gold = options[i % len(options)]
        occurrences.append(
            {"task": f"task-{i:05d}", "step": 0, "qhash": qhash, "gold": gold, "gold_status": "ok"}
            | {"gold_aux": {"acceptable_tools": [gold]}, "stratum": "on_plan", "dp": "tool_select"}
        )
    for name, rows in (("questions", questions), ("occurrences", occurrences)):
        with gzip.open(folder / f"{name}.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    eligible = [o["task"] for o in occurrences]
    (folder / "corpus.json").write_text(json.dumps({"eligible_tasks": eligible}))


def _write_config(folder: Path, base_url: str, questions: Path) -> Path:
    config = {
        "name": "bench",
        "output": str(folder / "out"),
        "models": [
            {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base_url}
        ],
        "scenarios": [{"id": "qs", "path": str(questions)}],
        "cache": {"store": "run"},  # each measured run has a fresh database, so a cold cache
    }
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@contextmanager
def _database(pg: str | None, folder: Path) -> Iterator[str]:
    """A fresh database: a SQLite file, or a throwaway database on the given PostgreSQL server."""
    if pg is None:
        yield f"sqlite:///{folder / f'bench-{uuid.uuid4().hex[:8]}.db'}"
        return
    url = make_url(pg).set(drivername="postgresql+psycopg")
    name = f"kw_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _done_times(db: str) -> list[float]:
    """When each job was recorded (the queue's own timestamps), sorted."""
    engine = create_engine(db.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT updated_at FROM kw_jobs WHERE status = 'done'")).fetchall()
    engine.dispose()
    return sorted(float(r[0]) for r in rows)


def _steady_rate(times: list[float], lo: float = 0.3, hi: float = 0.9) -> float:
    """Jobs per second between the lo and hi fractions of the jobs recorded: every process is working
    then (the first ones start while the last still import litellm, and the tail is one process's)."""
    i, j = int(len(times) * lo), int(len(times) * hi) - 1
    return (j - i) / (times[j] - times[i]) if j > i and times[j] > times[i] else 0.0


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the steady phase's CPU, sampled while the run works (Linux /proc) ---------------------------------

_POLL_S = 0.1


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _live_cpu_s(pid: int) -> float:
    """CPU seconds of one process; 0 if it has gone."""
    try:
        return _cpu_s(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def _tree(root: int) -> set[int]:
    """``root`` and every live process descended from it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree and pid not in tree}
        tree |= more
        grew = bool(more)
    return tree


@dataclass(frozen=True, slots=True)
class SteadyCpu:
    """Between 30% and 90% of the jobs recorded: seconds, jobs, and each side's CPU seconds."""

    seconds: float
    jobs: int
    runner_cpu_s: float
    server_cpu_s: float

    def figures(self) -> dict[str, float]:
        return {
            "steady_runner_cores": self.runner_cpu_s / self.seconds,
            "steady_server_cores": self.server_cpu_s / self.seconds,
            "steady_runner_cpu_ms_per_job": 1000 * self.runner_cpu_s / self.jobs,
            "steady_server_cpu_ms_per_job": 1000 * self.server_cpu_s / self.jobs,
        }


def sample_steady_cpu(
    proc: subprocess.Popen[bytes], db: str, total: int, server_pid: int
) -> SteadyCpu | None:
    """Poll the run's recorded jobs until ``proc`` ends; None if the steady phase was not seen whole."""
    engine = create_engine(db.replace("postgresql://", "postgresql+psycopg://"))
    marks = [int(total * 0.3), int(total * 0.9)]
    seen: list[tuple[float, int, float, float]] = []  # (when, jobs done, runner cpu, server cpu)
    pids: set[int] = set()
    try:
        while proc.poll() is None and len(seen) < len(marks):
            time.sleep(_POLL_S)
            try:
                with engine.connect() as conn:
                    done = conn.execute(text("SELECT count(*) FROM kw_jobs WHERE status = 'done'")).scalar()
            except Exception:  # not planned yet (no table), or a lock: ask again
                continue
            if done is None or done < marks[len(seen)]:
                continue
            pids = pids or _tree(proc.pid)  # every process of the run works by then (the same set twice)
            seen.append((time.perf_counter(), int(done), sum(map(_live_cpu_s, pids)), _cpu_s(server_pid)))
    finally:
        engine.dispose()
    if len(seen) < len(marks) or seen[1][1] == seen[0][1]:
        return None  # (a run that passed both marks between two polls, on a busy machine: no phase seen)
    (t0, n0, r0, s0), (t1, n1, r1, s1) = seen
    return SteadyCpu(seconds=t1 - t0, jobs=n1 - n0, runner_cpu_s=r1 - r0, server_cpu_s=s1 - s0)


def bench_processes(
    config: Path, processes: int, pg: str | None, folder: Path, server_pid: int, questions: int
) -> dict[str, float]:
    with _database(pg, folder) as db:
        server_cpu = _cpu_s(server_pid)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        command = ["run", str(config), "-q", "--no-finalize", "--processes", str(processes), "--db", db]
        proc = subprocess.Popen(
            [sys.executable, "-m", "knowwhen_runner", *command],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        steady = sample_steady_cpu(proc, db, questions, server_pid)
        _, err = proc.communicate()
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"knowwhen run failed: {err.decode().strip().splitlines()[-1:]}")
        times = _done_times(db)
    n = len(times)
    runner_cpu = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    return {
        "jobs": n,
        "wall_s": wall,
        "work_s": times[-1] - times[0],
        "jobs_per_s": (n - 1) / (times[-1] - times[0]) if n > 1 else 0.0,
        "steady_jobs_per_s": _steady_rate(times),
        "runner_cpu_ms_per_job": 1000 * runner_cpu / n,
        "server_cpu_ms_per_job": 1000 * (_cpu_s(server_pid) - server_cpu) / n,
        **(steady.figures() if steady else {}),
    }


async def _ledger_costs(db: str, n: int) -> dict[str, float]:
    ledger = LimitLedger(db)
    key = f"bench-{hashlib.sha256(db.encode()).hexdigest()[:8]}"
    await ledger.reserve(key, 1, 1e-6)  # creates the schema and the key's row
    started = time.perf_counter()
    for _ in range(n):
        await ledger.reserve(key, 1, 1e-6)
    one = (time.perf_counter() - started) / n
    started = time.perf_counter()
    for i in range(n):
        await ledger.hold(key, "bench", want=8, in_use=i % 8, cap=16, ttl=60.0)
    hold = (time.perf_counter() - started) / n
    await ledger.close()
    return {"reserve_ms": one * 1000, "hold_ms": hold * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=6000)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--pg", help="PostgreSQL URL to create throwaway databases from (also run there)")
    parser.add_argument("--ledger-calls", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    backends: list[str | None] = [None] + ([args.pg] if args.pg else [])
    figures: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, start_server_process() as server:
        folder = Path(tmp)
        _write_questions(folder / "qs", args.questions)
        config = _write_config(folder, server.base_url, folder / "qs")
        print(
            f"{'database':<11} {'processes':>9} {'jobs':>6} {'wall s':>7} {'jobs/s':>7} {'steady':>7} "
            f"{'x one':>6} {'runner cpu ms/job':>18} {'server cpu ms/job':>18} "
            f"{'steady: runner cores':>20} {'server cores':>12} {'runner ms/job':>13} {'server ms/job':>13}"
        )
        for pg in backends:
            label = "postgresql" if pg else "sqlite"
            for p in args.processes:
                server.reset_stats()
                r = bench_processes(config, p, pg, folder, server.process.pid, args.questions)
                figures.setdefault(label, {})[str(p)] = r
                one = figures[label].get("1", {}).get("steady_jobs_per_s") or 0.0
                ratio = f"{r['steady_jobs_per_s'] / one:.2f}" if one else "-"
                print(
                    f"{label:<11} {p:>9} {r['jobs']:>6.0f} {r['wall_s']:>7.1f} {r['jobs_per_s']:>7.0f} "
                    f"{r['steady_jobs_per_s']:>7.0f} {ratio:>6} {r['runner_cpu_ms_per_job']:>18.2f} "
                    f"{r['server_cpu_ms_per_job']:>18.2f} {r.get('steady_runner_cores', 0):>20.2f} "
                    f"{r.get('steady_server_cores', 0):>12.2f} {r.get('steady_runner_cpu_ms_per_job', 0):>13.2f} "
                    f"{r.get('steady_server_cpu_ms_per_job', 0):>13.2f}"
                )
        print()
        print(f"{'database':<11} {'reserve ms':>11} {'renew share ms':>15}  (one call at a time)")
        for pg in backends:
            with _database(pg, folder) as db:
                costs = anyio.run(_ledger_costs, db, args.ledger_calls)
            label = "postgresql" if pg else "sqlite"
            figures.setdefault("ledger", {})[label] = costs
            print(f"{label:<11} {costs['reserve_ms']:>11.3f} {costs['hold_ms']:>15.3f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
