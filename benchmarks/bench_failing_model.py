"""Requests spent on a model that answers 500 to everything, in the quickstart.

The quickstart's config (``configs/quickstart.yaml``) is run against a local server of its own whose
agent LLM (``agent-sim``) answers HTTP 500 to every request, and the server counts the requests it got
for that model. By default only the quickstart's closed-loop scenarios run, with fewer tasks (``--fit``
and ``--bench`` tasks), so the run without the rule ends in minutes; ``--full`` keeps every scenario.
``--rule off`` sets ``workers.quarantine_failures: null`` (the run before the rule: every job tries
``max_attempts`` times, each call retried by the client); ``--rule default`` leaves the setting out, and
``--rule keep`` writes nothing at all (for code that does not know the setting); ``--no-probe`` leaves
the pre-flight out, so the run's own rule is what stops the spending (with it, the pre-flight's no-go).
Run from the repository root: ``python -m benchmarks.bench_failing_model [--rule off]``; it prints the
requests at the server, the run's wall time and exit code, and, given ``--today N`` (the requests of a
run before the rule), the ratio.
"""

from __future__ import annotations

import argparse
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


def _config(folder: Path, base_url: str, args: argparse.Namespace) -> Path:
    """The quickstart's config against ``base_url``, trimmed unless ``--full``, its paths made absolute."""
    source = ROOT / "configs" / "quickstart.yaml"
    config: dict[str, Any] = yaml.safe_load(source.read_text())
    config.pop("serve", None)
    config["output"] = str(folder / "out")
    config["cache"] = {"policy": "read-write", "path": str(folder / "cache.db")}
    for model in config["models"]:
        suffix = "/v1" if model["api_base"].endswith("/v1") else ""
        model["api_base"] = base_url + suffix
    scenarios = []
    for scenario in config["scenarios"]:
        scenario["path"] = str((source.parent / scenario["path"]).resolve()) if "path" in scenario else None
        if scenario["path"] is None:
            del scenario["path"]
        if not args.full:
            if scenario["kind"] != "episodes":
                continue
            scenario["n"] = args.fit if scenario["id"] == "l3-fit" else args.bench
        scenarios.append(scenario)
    config["scenarios"] = scenarios
    if args.rule == "off":
        config["workers"]["quarantine_failures"] = None
    path = folder / "quickstart.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rule", choices=["default", "off", "keep"], default="default")
    parser.add_argument(
        "--full", action="store_true", help="every scenario of the quickstart (long without the rule)"
    )
    parser.add_argument("--fit", type=int, default=2, help="tasks of l3-fit (not with --full)")
    parser.add_argument("--bench", type=int, default=2, help="tasks of l3 (not with --full)")
    parser.add_argument(
        "--no-probe", action="store_true", help="leave the pre-flight out (the run's own rule)"
    )
    parser.add_argument("--today", type=int, help="requests of a run before the rule, for the ratio")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="knowwhen-failing-"))
    env = {**os.environ, "KNOWWHEN_CACHE_DIR": str(folder / "user-cache")}
    with start_server_process() as server:
        server.set_faults([{"fault": "500", "model": FAILING}])
        path = _config(folder, server.base_url, args)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "knowwhen_runner", "run", str(path), "-q",
             *(["--no-probe"] if args.no_probe else [])],
            capture_output=True, text=True, env=env, check=False, cwd=ROOT,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        failing = server.count(model=FAILING)
        others = server.count() - failing
    print(
        f"rule: {args.rule}; pre-flight: {'no' if args.no_probe else 'yes'}; scenarios: {'all' if args.full else f'episodes only (fit {args.fit}, bench {args.bench})'}"
    )
    print(f"requests to the always-500 {FAILING}: {failing}; to the other models: {others}")
    print(f"run: exit {done.returncode} after {seconds:.1f} s")
    for line in (done.stdout + done.stderr).strip().splitlines()[-6:]:
        print(f"  | {line}")
    if args.today:
        print(f"ratio to the run before the rule: {failing / args.today:.1%} (target <= 5%)")


if __name__ == "__main__":
    main()
