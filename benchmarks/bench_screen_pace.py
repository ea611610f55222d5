"""Requests a screen's dropped model sends on a fast server: the quickstart's two decision models over its
common states (383 questions), ``screen: {scenario: common, keep: {top: 1}}``, with no rate limit (a model
served on one's own GPU) and at 100 requests a second.

Each run starts from scratch against a local server of its own, which counts the requests it got per model;
the run's screen record says after how many questions the screen dropped the worse model (lexical). The
figure the target is stated on: the dropped model's requests saved, as a share of the 383 a full run asks
(target >= 50 %); and its requests beyond its decision point (at most the claim window, 16, plus what was
in flight). Run from the repository root: ``python -m benchmarks.bench_screen_pace [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from knowwhen_runner.serve import start_server_process

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = 383
RATES = {"no limit": None, "100/s": 6000}


def _config(folder: Path, base_url: str, rpm: int | None) -> Path:
    """The quickstart's decision models (no limit, or ``rpm``) over its common states, screened for top 1."""
    quick = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    models = []
    for m in quick["models"]:
        if m["kind"] != "decision":
            continue
        limit = {"max_in_flight": m["rate_limit"]["max_in_flight"]}
        if rpm is not None:
            limit["requests_per_minute"] = rpm
        models.append({**m, "api_base": base_url, "rate_limit": limit})
    config: dict[str, Any] = {
        "name": "screened",
        "output": str(folder / "out"),
        "models": models,
        "modes": ["model"],
        "scenarios": [{"id": "common", "kind": "states", "path": str(ROOT / "scenarios/decisiongym/common")}],
        "cache": {"policy": "off"},
        "screen": {"scenario": "common", "alpha": 0.05, "keep": {"top": 1}},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "screened.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _record(folder: Path) -> dict[str, Any]:
    """The run's screen record, read from its SQLite file."""
    with sqlite3.connect(folder / "out" / "knowwhen.db") as conn:
        (meta,) = conn.execute("SELECT meta FROM kw_runs WHERE name = 'screened'").fetchone()
    return dict(json.loads(meta).get("screen") or {})


def measure(work: Path, name: str, rpm: int | None) -> dict[str, Any]:
    """One screened run from scratch: each model's requests, the drop's question, seconds, exit code."""
    folder = work / name.replace("/", "-").replace(" ", "-")
    with start_server_process() as server:
        path = _config(folder, server.base_url, rpm)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "knowwhen_runner", "run", str(path), "-q", "--no-probe"],
            capture_output=True, text=True, env=dict(os.environ), check=False, cwd=ROOT,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        requests = {m: server.count(model=m) for m in ("lexical", "prior")}
    models = _record(folder).get("models") or {}
    dropped = [m for m, line in models.items() if line.get("decision") == "drop"]
    model = dropped[0] if dropped else "lexical"
    decided_at = models.get(model, {}).get("tasks")
    sent = requests[model]
    return {
        "run": name,
        "dropped": dropped,
        "decided_after": decided_at,
        "requests": requests,
        "saved_pct": round(100 * (1 - sent / QUESTIONS), 1),
        "beyond_decision": None if decided_at is None else sent - decided_at,
        "seconds": round(seconds, 1),
        "exit": done.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="knowwhen-screen-pace-"))
    runs = [measure(work, name, rpm) for name, rpm in RATES.items()]
    print(f"quickstart's decision models over common ({QUESTIONS} questions), keep: {{top: 1}}")
    for r in runs:
        print(
            f"{r['run']:<9} dropped {r['dropped'] or 'none'} after {r['decided_after']} questions; requests "
            f"{r['requests']}; saved {r['saved_pct']} % of the dropped model's calls "
            f"({r['beyond_decision']} beyond its decision); exit {r['exit']} after {r['seconds']} s"
        )
    if args.json:
        args.json.write_text(json.dumps({"runs": runs}, indent=2))


if __name__ == "__main__":
    main()
