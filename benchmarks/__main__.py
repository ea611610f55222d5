"""Run every benchmark case against the local server; print a table and write benchmarks/results.json.

``python -m benchmarks`` runs the sizes the targets are stated at (several minutes on two cores);
``--quick`` runs tiny sizes (a smoke test, figures meaningless; ``plan_resume_15k`` only when named, as it
is ``plan_resume`` at those sizes); ``--case NAME`` runs some cases only
(``fair_share``, several minutes of rate-limited work, ``failing_model``, a run that fails for three
minutes before the one it is compared with, ``screen_pace``, two screened runs of the quickstart's
decision models, and ``plan_resume_1.5m``, a 1.5M-job plan, run only when named). A run of some cases keeps the other cases' figures already in the output file; each case records
the date it was run.
With ``KNOWWHEN_BENCH_PG`` set to a PostgreSQL URL, the processes case runs there too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import cases
from knowwhen_runner.serve import start_server_process

HERE = Path(__file__).parent

TARGETS = {
    "overhead": (
        "ratio runner/bare >= 1.2 (decision and llm); exit after the last request <= 1.5 s + finalise; "
        "runner CPU per call with the direct transport: decision <= 0.5 ms, chat (69 tools) <= 1 ms"
    ),
    "inspect_ai": "runner/inspect eval on the same LLM requests (median of rounds); bodies within 30%",
    "cached_replay": ">= 3,000 jobs/s, no model request, litellm not imported",
    "plan_resume": "plan <= 10 s and <= 1 GB; run start to first new call <= 5 s",
    "plan_resume_1.5m": (
        "1,536,210 planned, 1,000 open: plan <= 15 s and <= 500 MB; rerun and worker join to first call "
        "<= 3 s and <= 1.5 x plan_resume_15k's; status <= 2 s and <= 1.5 x plan_resume_15k's"
    ),
    "plan_resume_15k": "15,366 planned, 1,000 open: the small figures plan_resume_1.5m is compared with",
    "processes": "2 processes >= 1.7 x one (steady jobs/s)",
    "rate_limit": ">= 95% of the limit with zero 429s",
    "big_body": "a 1 GB POST costs the server < 50 ms of CPU (its one event loop); small requests meanwhile answered",
    "scoring": "scoring 153,621 rows <= 5 s",
    "finalise_153k": "knowwhen finalize of 153,621 answered jobs (39 models x 3,939 states) <= 20 s and <= 1 GB peak",
    "screen": "simulated 40-model screen, 200 seeds: calls <= 40 % of the full sweep (top 5, floor 0.80); seeds with a wrong decision <= alpha",
    "screen_pace": "quickstart's decision models, keep top 1: the dropped model's calls saved >= 50 % of 383, with no rate limit and at 100/s",
    "readout": (
        "read-outs of 69-option states: requests and tokens per question (token: 5 at 20 top_logprobs, "
        "4 at 69 on llama.cpp; likelihood: 1), questions/s on the local server, questions/s and calls/s "
        "on llama.cpp's serving Gemma 3 270M"
    ),
    "failing_model": "requests to an always-500 agent in the quickstart <= 5% of the run without the rule",
    "fair_share": (
        "(a) fast models beside a 60/min one <= 1.1 x their time alone, the slow one >= 90% of its limit; "
        "(b, c on PostgreSQL with 2 processes) each model <= 1.1 x its own bound, the sweep <= 1.05 x the slowest's; (d) limits not told: >= 90% within 5 min, <= 1% 429s"
    ),
}


NAMED_ONLY = frozenset({"fair_share", "failing_model", "screen_pace", "plan_resume_1.5m"})
"""Minutes each: run only when named with ``--case``."""
QUICK_NAMED_ONLY = frozenset({"plan_resume_15k"})
"""Left out of ``--quick`` unless named: at the quick sizes plan_resume_15k is plan_resume over again (3
models, 50 questions, 20 open)."""


def _script(name: str, *args: str) -> dict[str, Any]:
    """Run one of the stand-alone benchmark scripts and keep its printed output."""
    started = time.perf_counter()
    # As a module from the repository's root, as each script's docstring says to run it: a script may
    # import the test suite's helpers (the read-out benchmark starts llama.cpp's server as its test does).
    module = "benchmarks." + name.removesuffix(".py")
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=HERE.parent, capture_output=True, text=True, check=False
    )
    return {
        "exit": done.returncode,
        "seconds": round(time.perf_counter() - started, 1),
        "output": done.stdout.strip().splitlines()[-12:],
        "stderr": done.stderr.strip().splitlines()[-3:],
    }


def _kept_cases(path: Path, quick: bool) -> dict[str, Any]:
    """The cases already recorded in ``path`` (of a run at the same sizes), kept beside those run now."""
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return dict(earlier.get("cases", {})) if earlier.get("quick") == quick else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--case", action="append", choices=sorted(TARGETS), help="run only these cases")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    q = args.quick
    named_only = set(NAMED_ONLY | (QUICK_NAMED_ONLY if q else set()))
    wanted = set(args.case or TARGETS) - (named_only if not args.case else set())
    work = cases.scratch()
    results: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "quick": q,
        "targets": TARGETS,
        "cases": _kept_cases(args.out, args.quick),
    }
    with start_server_process() as server:
        if "overhead" in wanted:
            results["cases"]["overhead"] = cases.overhead(server, work, 200 if q else 2000, 1 if q else 5)
        if "inspect_ai" in wanted:
            results["cases"]["inspect_ai"] = cases.inspect_side_by_side(
                server, work, 100 if q else 2000, 1 if q else 5, install=not q
            )
        if "cached_replay" in wanted:
            results["cases"]["cached_replay"] = cases.cached_replay(
                server, work, 3 if q else 39, 50 if q else 3939
            )
        if "plan_resume" in wanted:
            results["cases"]["plan_resume"] = cases.plan_and_resume(
                server, work, 3 if q else 39, 50 if q else 3939, open_jobs=20 if q else 4621
            )
        for name, n_questions in (("plan_resume_15k", 394), ("plan_resume_1.5m", 39390)):
            if name in wanted:
                results["cases"][name] = cases.plan_and_resume(
                    server, work, 3 if q else 39, 50 if q else n_questions, 20 if q else 1000, tag=name
                )
        if {"plan_resume_15k", "plan_resume_1.5m"} <= wanted:  # measured in the same run, so comparable
            results["cases"]["plan_resume_1.5m"]["vs_15k"] = cases.ratios(
                results["cases"]["plan_resume_1.5m"], results["cases"]["plan_resume_15k"]
            )
        if "finalise_153k" in wanted:
            results["cases"]["finalise_153k"] = cases.finalise_at_scale(
                server, work, 3 if q else 39, 50 if q else 3939
            )
        if "rate_limit" in wanted:
            results["cases"]["rate_limit"] = cases.rate_limit_fidelity(
                server, work, 600 if q else 1200, 5 if q else 60
            )
        if "big_body" in wanted:
            results["cases"]["big_body"] = cases.big_bodies(server, (64 if q else 1024) * 2**20)
    if "processes" in wanted and (HERE / "bench_fleet.py").exists():
        figures = work / "processes.json"
        extra = ["--questions", "200", "--processes", "1", "2"] if q else ["--questions", "6000"]
        pg = os.environ.get("KNOWWHEN_BENCH_PG")  # a PostgreSQL URL to also run on (throwaway databases)
        if pg:
            extra += ["--pg", pg]
        results["cases"]["processes"] = _script("bench_fleet.py", *extra, "--json", str(figures))
        if figures.is_file():
            results["cases"]["processes"]["figures"] = json.loads(figures.read_text())
    if "fair_share" in wanted:
        from benchmarks.bench_fair_share import fair_share

        # Parts a, b, d (and c, on PostgreSQL, with KNOWWHEN_BENCH_PG); KNOWWHEN_BENCH_FAIR picks some.
        parts = os.environ.get(
            "KNOWWHEN_BENCH_FAIR", "abcd" if os.environ.get("KNOWWHEN_BENCH_PG") else "abd"
        )
        today = time.strftime("%Y-%m-%d", time.gmtime())
        ran = {part: {**figures, "date": today} for part, figures in fair_share(work, parts, q).items()}
        # The parts not run now keep their stored figures, each with its own date.
        results["cases"]["fair_share"] = {**results["cases"].get("fair_share", {}), **ran}
    if "scoring" in wanted:
        extra = ["--models", "3", "--questions", "200"] if q else []
        results["cases"]["scoring"] = _script("bench_scoring.py", *extra)
    if "screen" in wanted:
        results["cases"]["screen"] = _script(
            "bench_screen.py", *(["--seeds", "2", "--models", "10"] if q else [])
        )
    if "screen_pace" in wanted:
        figures = work / "screen_pace.json"
        results["cases"]["screen_pace"] = _script("bench_screen_pace.py", "--json", str(figures))
        if figures.is_file():
            results["cases"]["screen_pace"]["figures"] = json.loads(figures.read_text())
    if "readout" in wanted:
        figures = work / "readout.json"
        results["cases"]["readout"] = _script(
            # quick: the local server only (the real llama.cpp server is the peers test's, minutes here)
            "bench_readout.py",
            *(["--questions", "3", "--llama-questions", "0"] if q else []),
            "--json",
            str(figures),
        )
        if figures.is_file():
            results["cases"]["readout"]["figures"] = json.loads(figures.read_text())
    if "failing_model" in wanted:
        figures = work / "failing_model.json"
        extra = ["--tasks", "1"] if q else []
        results["cases"]["failing_model"] = _script("bench_failing_model.py", *extra, "--json", str(figures))
        if figures.is_file():
            results["cases"]["failing_model"]["figures"] = json.loads(figures.read_text())
    today = time.strftime("%Y-%m-%d", time.gmtime())
    for name in wanted & set(results["cases"]):
        results["cases"][name]["date"] = today
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for name, figures in results["cases"].items():
        if name not in wanted:
            continue
        print(f"\n== {name}  (target: {TARGETS[name]})")
        print(json.dumps(figures, indent=2))
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
