"""Time the viewer on a large run: 150,000 answers (30 models x 5,000 questions, 69 options) and 5,000 episodes.

Not a test. Records a synthetic finished run into a SQLite queue in a temporary folder (through the
Queue protocol, as workers do), then times: the first and a cached answer of each JSON endpoint, the
first paint of the questions and live views in headless Chromium (wall time of ``--dump-dom`` until the
view's count is in the DOM, minus an empty page's), and the report's drill-down (build time and size).
Run: ``python benchmarks/bench_viewer.py [--models 30] [--questions 5000] [--episodes 5000]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from knowwhen_runner.jobs import Job
from knowwhen_runner.jsonio import write_jsonl
from knowwhen_runner.queue import open_queue

TOOLS = [f"tool_{i:02d}" for i in range(69)]


def _question_set(folder: Path, n_questions: int, rng: random.Random) -> list[str]:
    qhashes = [f"{i:064x}" for i in range(n_questions)]
    state = "TASK: a customer wants help\nHISTORY:\n" + "1. find_customer {}\n" * 4 + "CURRENT OBSERVATION: "
    write_jsonl(
        folder / "questions.jsonl.gz", ({"qhash": q, "state": state + q, "options": TOOLS} for q in qhashes)
    )
    occurrences = [
        {
            "task": f"task_{i % 200:03d}",
            "qhash": q,
            "gold": rng.choice(TOOLS),
            "stratum": "on_plan",
            "step": i,
        }
        for i, q in enumerate(qhashes)
    ]
    write_jsonl(folder / "occurrences.jsonl.gz", occurrences)
    return qhashes


def _config(folder: Path, n_models: int) -> str:
    models = "".join(
        f"  - {{id: dm{i:02d}, model: hosted_vllm/dm{i:02d}, kind: decision}}\n" for i in range(n_models)
    )
    return (
        f"name: big\noutput: {folder}\nmodels:\n{models}"
        "  - {id: llm, model: openai/llm, kind: llm}\n"
        f"scenarios:\n  - {{id: qs, kind: states, path: {folder / 'qs'}}}\n"
        "  - {id: eps, kind: episodes, suite: common, split: bench, n: 10}\n"
        "gate: {llm: llm}\n"
    )


def _answer(model: str, qhash: str, rng: random.Random) -> dict[str, Any]:
    weights = [rng.random() ** 4 for _ in TOOLS]
    total = sum(weights)
    probs = {t: w / total for t, w in zip(TOOLS, weights, strict=True)}
    choice = max(probs, key=probs.__getitem__)
    return {"model": model, "qhash": qhash, "answer": choice, "confidence": probs[choice], "probabilities": probs,
            "valid": True, "error": None, "cost_usd": 0.0, "latency_ms": 12.0, "cache_hit": False}  # fmt: skip


def _episode(task: str, rng: random.Random) -> dict[str, Any]:
    steps = rng.randint(3, 12)
    decisions, trajectory = [], []
    for n in range(steps):
        by = "model" if rng.random() < 0.6 else "llm"
        tool = rng.choice(TOOLS)
        decisions.append({"step": n, "decided_by": by, "tool": tool, "model_choice": tool, "model_confidence": 0.8,
                          "llm_choice": None if by == "model" else tool, "acceptable": [tool], "model_correct": True,
                          "llm_correct": True, "fallback": False, "error": None, "stratum": "on_plan"})  # fmt: skip
        trajectory.append(
            {"step": n, "tool": tool, "arguments": {"id": n}, "observation": f"result {n} " * 20}
        )
    return {"kind": "episode", "scenario": "eps", "task_id": task, "mode": "gated", "decision_model": "dm00",
            "llm": "llm", "tau": 0.7, "success": rng.random() < 0.7, "steps": steps, "max_steps": 15,
            "budget_exhausted": False, "decisions": decisions, "coverage": 0.6, "cost_usd": {"decision": 0, "llm": 0},
            "trajectory": trajectory, "reply": "done"}  # fmt: skip


async def _record(db: str, folder: Path, n_models: int, n_questions: int, n_episodes: int) -> None:
    rng = random.Random(7)
    qhashes = _question_set(folder / "qs", n_questions, rng)
    queue = open_queue(db, "big")
    await queue.init_run(_config(folder, n_models), {"base_dir": str(folder)})
    results: dict[str, dict[str, Any]] = {}
    jobs, items = [], {("qs", q): {"state": f"state {q}", "options": TOOLS} for q in qhashes}
    for m in [f"dm{i:02d}" for i in range(n_models)]:
        for q in qhashes:
            job = Job(f"{m}-{q[-8:]}", m, "model", "qs", q, {"kind": "question"})
            jobs.append(job)
            results[job.id] = _answer(m, q, rng)
    for e in range(n_episodes):
        job = Job(f"ep-{e:05d}", "dm00", "gated", "eps", f"task-{e:05d}", {"kind": "episode"})
        jobs.append(job)
        results[job.id] = _episode(job.item, rng)
    await queue.enqueue(jobs, items)
    while claimed := await queue.claim("bench", 5000, 600.0):
        await queue.complete("bench", [(j.id, results[j.id]) for j in claimed])
    await queue.close()


def _timed_get(url: str) -> float:
    start = time.perf_counter()
    httpx.get(url, timeout=600).raise_for_status()
    return time.perf_counter() - start


def _paint(chromium: str, url: str, marker: str) -> float:
    """Wall seconds until a headless Chromium's DOM of ``url`` holds ``marker`` (polled, up to 10 minutes)."""
    start = time.perf_counter()
    for budget in (2000, 10000, 60000, 600000):
        dom = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--virtual-time-budget={budget}", "--dump-dom", url],
            capture_output=True, text=True, timeout=900,
        ).stdout  # fmt: skip
        if marker in dom:
            return time.perf_counter() - start
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--questions", type=int, default=5000)
    parser.add_argument("--episodes", type=int, default=5000)
    parser.add_argument("--port", type=int, default=8791)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = f"sqlite:///{folder / 'knowwhen.db'}"
        start = time.perf_counter()
        anyio.run(_record, db, folder, args.models, args.questions, args.episodes)
        print(f"recorded {args.models * args.questions:,} answers + {args.episodes:,} episodes "
              f"in {time.perf_counter() - start:.1f} s")  # fmt: skip
        view = subprocess.Popen(
            [sys.executable, "-m", "knowwhen_runner", "view", str(folder), "--port", str(args.port)],
            stdout=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{args.port}"
        try:
            for _ in range(300):
                try:
                    httpx.get(base + "/", timeout=2)
                    break
                except httpx.TransportError:
                    time.sleep(0.2)
            for path in ("api/live", "api/questions", "api/episodes", "api/episode?id=ep-00001"):
                cold = _timed_get(f"{base}/{path}")
                print(f"{path:28s} first {cold:7.2f} s   again {_timed_get(f'{base}/{path}'):7.2f} s")
            shown = len(httpx.get(f"{base}/api/questions", timeout=600).json()["rows"])
            print(f"questions listed: {shown:,} (must equal the answers recorded)")
            chromium = shutil.which("chromium") or shutil.which("chromium-browser")
            if chromium:
                empty = _paint(chromium, "data:text/html,<p id=x>x</p>", 'id="x"')
                for view_name, marker in (("live", 'id="done-total"'), ("questions", 'id="q-count"')):
                    seconds = _paint(chromium, f"{base}/#{view_name}", marker) - empty
                    print(
                        f"first paint #{view_name:10s} {seconds:7.2f} s (browser start-up of {empty:.2f} s excluded)"
                    )
            else:
                print("no chromium: first paint not measured")
        finally:
            view.terminate()
            view.wait(timeout=30)
        from knowwhen_runner.view.data import RunData
        from knowwhen_runner.view.offline import drilldown_html

        async def drill() -> str:
            queue = open_queue(db, "big")
            try:
                return await drilldown_html(RunData(queue, output=folder), [])
            finally:
                await queue.close()

        start = time.perf_counter()
        html = anyio.run(drill)
        note = " (too large: a note in its place)" if "too many" in html else ""
        print(f"report drill-down: {len(html) / 2**20:.1f} MB in {time.perf_counter() - start:.1f} s{note}")


if __name__ == "__main__":
    main()
