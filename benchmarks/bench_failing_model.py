"""Requests spent on a model that answers 500 to everything, in the quickstart, with and without the test
that sets such a model aside (``workers.set_aside_error_rate``).

The quickstart's config (``configs/quickstart.yaml``) is run against a local server of its own whose
agent LLM (``agent-sim``) answers HTTP 500 to every request; the server counts the requests it got for
each model. Three runs, each from scratch: the rule off (``set_aside_error_rate: null``: every job tries
``max_attempts`` times, each call retried by the client: the runner before any rule), the rule on
without the pre-flight (what the run itself spends: the requests until the model is set aside, and the
probes, one every 30 s, while the run waits for it alone, ``max_outage_s: 45`` here), and the rule on
with the pre-flight (its no-go).
By default only the quickstart's closed-loop scenarios run, with 2 tasks each (14 episodes), so the run
without the rule ends in about three minutes; ``--full`` keeps every scenario (an hour without the rule).
Run from the repository root: ``python -m benchmarks.bench_failing_model [--json FILE]``; it prints the
requests, wall time and exit code of each run and the ratio the target is stated on (<= 5 %).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from knowwhen_runner.serve import start_server_process

ROOT = Path(__file__).resolve().parent.parent
FAILING = "agent-sim"
WAIT_S = 45  # workers.max_outage_s: the run waits this long for the model set aside alone (one probe)


def _config(folder: Path, base_url: str, args: argparse.Namespace, rule: bool) -> Path:
    """The quickstart's config against ``base_url``, trimmed unless ``--full``, its paths made absolute."""
    source = ROOT / "configs" / "quickstart.yaml"
    config: dict[str, Any] = yaml.safe_load(source.read_text())
    config.pop("serve", None)
    config["output"] = str(folder / "out")
    config["cache"] = {"policy": "read-write", "path": str(folder / "cache.db")}
    for model in config["models"]:
        model["api_base"] = base_url + ("/v1" if model["api_base"].endswith("/v1") else "")
    scenarios = []
    for scenario in config["scenarios"]:
        if "path" in scenario:
            scenario["path"] = str((source.parent / scenario["path"]).resolve())
        if not args.full:
            if scenario["kind"] != "episodes":
                continue
            scenario["n"] = args.tasks
        scenarios.append(scenario)
    config["scenarios"] = scenarios
    if not rule:
        config["workers"]["set_aside_error_rate"] = None
    config["workers"]["max_outage_s"] = WAIT_S
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "quickstart.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def measure(work: Path, args: argparse.Namespace, *, rule: bool, probe: bool) -> dict[str, Any]:
    """One run from scratch against a server whose ``agent-sim`` answers 500: requests, seconds, exit."""
    name = f"rule-{'on' if rule else 'off'}-probe-{'on' if probe else 'off'}"
    folder = work / name
    env = {**os.environ, "KNOWWHEN_CACHE_DIR": str(folder / "user-cache")}
    with start_server_process() as server:
        server.set_faults([{"fault": "500", "model": FAILING}])
        path = _config(folder, server.base_url, args, rule)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "knowwhen_runner", "run", str(path), "-q", *([] if probe else ["--no-probe"])],
            capture_output=True, text=True, env=env, check=False, cwd=ROOT,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        failing = server.count(model=FAILING)
        times = sorted(r[0] for r in server.stats()["records"] if r[1] == FAILING)
        # the requests before the first pause of 25 s or more: those it took to set the model aside
        burst = next((i + 1 for i in range(len(times) - 1) if times[i + 1] - times[i] >= 25), len(times))
        figures = {
            "run": name,
            "requests_failing": failing,
            "before_set_aside": burst,
            "probes": failing - burst,
            "requests_others": server.count() - failing,
        }
    last = [line for line in done.stderr.strip().splitlines() if line.startswith(("knowwhen:", "error:"))]
    return {**figures, "seconds": round(seconds, 1), "exit": done.returncode, "said": last[-1:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help="every scenario (an hour without the rule)")
    parser.add_argument("--tasks", type=int, default=2, help="tasks of each episodes scenario (not --full)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="knowwhen-failing-"))
    runs = [
        measure(work, args, rule=False, probe=True),
        measure(work, args, rule=True, probe=False),
        measure(work, args, rule=True, probe=True),
    ]
    before = runs[0]["requests_failing"]
    scope = "every scenario" if args.full else f"episodes only ({args.tasks} tasks a scenario)"
    print(f"quickstart, {scope}; {FAILING} answers 500 to every request")
    for r in runs:
        share = r["requests_failing"] / before if before else float("nan")
        print(
            f"{r['run']:<22} {r['requests_failing']:>5} requests to {FAILING} ({share:6.1%}; "
            f"{r['before_set_aside']} before it was set aside, {r['probes']} probes), "
            f"{r['requests_others']} to the others; exit {r['exit']} after {r['seconds']} s"
        )
        for line in r["said"]:
            print(f"    {line[:160]}")
    ratio = runs[1]["requests_failing"] / before if before else float("nan")
    print(f"ratio, the run with the rule to the run before it: {ratio:.1%} (target <= 5%)")
    if args.json:
        args.json.write_text(json.dumps({"scope": scope, "runs": runs, "ratio": round(ratio, 4)}, indent=2))


if __name__ == "__main__":
    main()
