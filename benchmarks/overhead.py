"""Runner against a bare litellm loop, alternated round by round on one server (the overhead case).

Each round runs the hand-written loop (``bare_litellm.py``, litellm's defaults, in its own process)
and ``knowwhen run`` twice, with the direct transport and through litellm (``transport:``), over the
same number of distinct 69-option questions at the same concurrency, decision path and LLM path. Per
round and path it reports:

- the ratio of request rates, each taken from the server's own timestamps (first to last request):
  the direct runner's over the bare loop's (``ratio``), and the runner through litellm's
  (``litellm_ratio``);
- CPU ms per request in the steady phase (the child's CPU time, read from ``/proc`` while the server
  counted the middle 80% of the requests), so imports and exit are left out on both sides;
- the runner's exit time: from the server's last request to the process's end (with finalising).

The median and the min–max of the ratios over rounds are the figures; the machine's load is noted.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from knowwhen_runner.serve import ServerProcess

HERE = Path(__file__).parent
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux ``/proc``), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


class _Sampler(threading.Thread):
    """Pairs (requests the server counted, the child's CPU seconds) every 50 ms while the child runs."""

    def __init__(self, server: ServerProcess, pid: int) -> None:
        super().__init__(daemon=True)
        self.server, self.pid = server, pid
        self.points: list[tuple[int, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            cpu = _cpu_seconds(self.pid)
            if cpu is None:
                return
            self.points.append((int(self.server.stats(records=False)["total"]), cpu))


def _steady_cpu_ms(points: list[tuple[int, float]], n: int) -> float | None:
    """CPU ms per request between the samples at 10% and 90% of the requests."""
    low = next((p for p in points if p[0] >= n * 0.1), None)
    high = next((p for p in reversed(points) if p[0] <= n * 0.9), None)
    if low is None or high is None or high[0] - low[0] < n * 0.3:
        return None
    return 1000 * (high[1] - low[1]) / (high[0] - low[0])


def timed(
    server: ServerProcess,
    command: list[str],
    n: int,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Run one contender; its rate, steady CPU per request and exit time, all from the server's view."""
    server.reset_stats()
    child = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd
    )
    sampler = _Sampler(server, child.pid)
    sampler.start()
    _out, err = child.communicate()
    ended = time.time()
    sampler.stop.set()
    sampler.join()
    assert child.returncode == 0, err[-2000:]
    records = server.stats()["records"]
    if len(records) < 2:
        return {"requests": len(records), "per_s": 0.0, "cpu_ms": None, "exit_s": None}
    first, last = records[0][0], records[-1][0]
    return {
        "requests": len(records),
        "per_s": (len(records) - 1) / max(1e-9, last - first),
        "cpu_ms": _steady_cpu_ms(sampler.points, n),
        "exit_s": ended - last,
    }


def fresh_run(config: Path) -> None:
    """Remove a config's output and its response store, so its next run makes every request again."""
    shutil.rmtree(config.parent / "out", ignore_errors=True)
    for store in config.parent.glob("responses.db*"):  # the store and its journal files
        store.unlink()


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 1)
    except OSError:
        return None


def compare(
    server: ServerProcess,
    configs: dict[tuple[str, str], Path],
    n: int,
    rounds: int,
    concurrency: int = 32,
    *,
    finalize: bool = True,
) -> dict[str, Any]:
    """``rounds`` alternated rounds per path; ``configs`` maps a path (decision, llm) and a transport
    (direct, litellm) to its run config. ``ratio`` is the direct runner's rate over the bare loop's."""
    out: dict[str, Any] = {"calls": n, "concurrency": concurrency, "rounds": rounds, "load_before": _load()}
    for kind in dict.fromkeys(k for k, _t in configs):
        per_round = []
        for r in range(rounds):
            bare = timed(
                server,
                [
                    sys.executable,
                    str(HERE / "bare_litellm.py"),
                    "--base",
                    server.base_url,
                    "--kind",
                    kind,
                    "--n",
                    str(n),
                    "--concurrency",
                    str(concurrency),
                    "--tag",
                    f"r{r}",
                ],
                n,
            )
            runs = {}
            for transport in ("direct", "litellm"):
                config = configs[(kind, transport)]
                fresh_run(config)  # no answer from an earlier round's calls
                args = ["run", str(config), "-q"] + ([] if finalize else ["--no-finalize"])
                runs[transport] = timed(server, [sys.executable, "-m", "knowwhen_runner", *args], n)
                assert runs[transport]["requests"] == n, runs[transport]
            runner, through = runs["direct"], runs["litellm"]
            per_round.append(
                {
                    "ratio": round(runner["per_s"] / bare["per_s"], 3),
                    "litellm_ratio": round(through["per_s"] / bare["per_s"], 3),
                    "bare_per_s": round(bare["per_s"], 1),
                    "runner_per_s": round(runner["per_s"], 1),
                    "runner_litellm_per_s": round(through["per_s"], 1),
                    "bare_cpu_ms": _round(bare["cpu_ms"]),
                    "runner_cpu_ms": _round(runner["cpu_ms"]),
                    "runner_litellm_cpu_ms": _round(through["cpu_ms"]),
                    "bare_exit_s": round(bare["exit_s"], 2),
                    "runner_exit_s": round(runner["exit_s"], 2),
                    "runner_requests": runner["requests"],
                }
            )
        ratios = [r["ratio"] for r in per_round]
        cpu = [
            r["bare_cpu_ms"] / r["runner_cpu_ms"]
            for r in per_round
            if r["bare_cpu_ms"] and r["runner_cpu_ms"]
        ]
        out[kind] = {
            "rounds": per_round,
            "ratio_median": round(statistics.median(ratios), 3),
            "ratio_min_max": [min(ratios), max(ratios)],
            "litellm_ratio_median": round(statistics.median(r["litellm_ratio"] for r in per_round), 3),
            "cpu_ratio_median": round(statistics.median(cpu), 3) if cpu else None,
            "runner_cpu_ms": _spread([r["runner_cpu_ms"] for r in per_round]),
            "runner_litellm_cpu_ms": _spread([r["runner_litellm_cpu_ms"] for r in per_round]),
            "bare_cpu_ms": _spread([r["bare_cpu_ms"] for r in per_round]),
            "runner_exit_s_median": round(statistics.median(r["runner_exit_s"] for r in per_round), 2),
            "bare_exit_s_median": round(statistics.median(r["bare_exit_s"] for r in per_round), 2),
        }
    out["load_after"] = _load()
    return out


def _spread(values: list[float | None]) -> list[float] | None:
    """Median, min and max of the figures that were measured (None: none was)."""
    seen = [v for v in values if v is not None]
    if not seen:
        return None
    return [round(statistics.median(seen), 3), min(seen), max(seen)]


def _round(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None
