"""Time the viewer on a large run: 150,000 answers (30 models x 5,000 questions, 69 options) and 5,000 episodes.

Not a test. Records a synthetic finished run into a SQLite queue in a temporary folder (through the
Queue protocol, as workers do), then times: on a cold viewer, the first and a second answer of each JSON
endpoint; the first paint of the live and questions views, each on a cold viewer, in a headless Chromium
already open (from asking for the page until the view's count is in its DOM, over the DevTools protocol);
and the report's drill-down (build time and size).
Run: ``python benchmarks/bench_viewer.py [--models 30] [--questions 5000] [--episodes 5000]``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from websockets.sync.client import connect

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


def _timed_get(url: str) -> tuple[float, httpx.Response]:
    start = time.perf_counter()
    answer = httpx.get(url, timeout=600)
    return time.perf_counter() - start, answer


@contextmanager
def _viewer(folder: Path, port: int) -> Iterator[str]:
    """A cold ``knowwhen view`` of the run: up (its page served), nothing of the run read yet."""
    view = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "view", str(folder), "--port", str(port)],
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                httpx.get(base + "/", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base
    finally:
        view.terminate()
        view.wait(timeout=30)


class _Browser:
    """A headless Chromium driven over its DevTools protocol: load a page, wait for an element."""

    def __init__(self, chromium: str, profile: Path) -> None:
        port = _free_port()
        self.process = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", f"--user-data-dir={profile}", f"--remote-debugging-port={port}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(300):
            try:
                pages = [
                    t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"
                ]
                if pages:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.held = ExitStack()
        self.socket = self.held.enter_context(connect(pages[0]["webSocketDebuggerUrl"], max_size=None))
        self.calls = 0

    def call(self, method: str, **params: Any) -> Any:
        self.calls += 1
        self.socket.send(json.dumps({"id": self.calls, "method": method, "params": params}))
        while True:
            answer = json.loads(self.socket.recv())
            if answer.get("id") == self.calls:
                return answer.get("result")

    def paint(self, url: str, ready: str, timeout_s: float = 120.0) -> float:
        """Seconds from asking for ``url`` until the script ``ready`` is true in it (polled every 10 ms)."""
        self.call("Page.navigate", url="about:blank")
        start = time.perf_counter()
        self.call("Page.navigate", url=url)
        while time.perf_counter() - start < timeout_s:
            found = self.call("Runtime.evaluate", expression=ready, returnByValue=True)
            if found and found["result"].get("value") is True:
                return time.perf_counter() - start
            time.sleep(0.01)
        return float("nan")

    def close(self) -> None:
        self.held.close()
        self.process.terminate()
        self.process.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


ENDPOINTS = (
    "api/live",
    "api/questions?llm=later",  # what the page asks first: the LLM's answers follow
    "api/questions",
    "api/spend",
    "api/questions?right=wrong&cmin=0.8&sort=confidence",
    f"api/question?scenario=qs&model=dm01&qhash={5:064x}",
    "api/episodes",
    "api/episode?id=ep-00001",
)
SHOWN = "document.getElementById('{}') !== null"
FILLED = "document.querySelector('{0}') !== null && ![...document.querySelectorAll('{0}')].some(e => e.textContent === '…')"
PAINTS = (  # what is measured, the view's address, and what is true in the page once it is there
    ("#live", "#live", SHOWN.format("done-total")),
    ("#live, its spend filled in", "#live", FILLED.format("#spend-total")),
    ("#questions", "#questions", SHOWN.format("q-count")),
    ("#questions, its LLM column filled in", "#questions", FILLED.format("#kw-view td[data-llm]")),
    ("confident but wrong", "#questions?right=wrong&cmin=0.8&sort=confidence", SHOWN.format("q-count")),
)


def _endpoints(folder: Path, port: int, n_answers: int) -> None:
    with _viewer(folder, port) as base:
        for path in ENDPOINTS:
            cold, answer = _timed_get(f"{base}/{path}")
            if answer.status_code == 404:
                print(f"{path:52s} (no such endpoint)")
                continue
            answer.raise_for_status()
            print(f"{path:52s} first {cold:6.2f} s   again {_timed_get(f'{base}/{path}')[0]:6.2f} s")
        listed = httpx.get(f"{base}/api/questions", timeout=600).json()
        total = listed.get("total", len(listed["rows"]))
        print(f"questions listed: {total:,} (must equal the {n_answers:,} answers recorded)")


def _paints(folder: Path, port: int) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("no chromium: first paint not measured")
        return
    with tempfile.TemporaryDirectory() as profile:
        browser = _Browser(chromium, Path(profile))
        try:
            for label, fragment, ready in PAINTS:
                with _viewer(folder, port) as base:  # a cold viewer for each view
                    seconds = browser.paint(f"{base}/{fragment}", ready)
                print(f"first paint {label:38s} {seconds:6.2f} s (cold viewer, browser already open)")
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--questions", type=int, default=5000)
    parser.add_argument("--episodes", type=int, default=5000)
    parser.add_argument("--port", type=int, default=0, help="the viewer's port (default: a free one)")
    parser.add_argument(
        "--keep", type=Path, help="record the run in this folder, or time the run already there"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        db = f"sqlite:///{folder / 'knowwhen.db'}"
        if not (folder / "knowwhen.db").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            start = time.perf_counter()
            anyio.run(_record, db, folder, args.models, args.questions, args.episodes)
            print(f"recorded {args.models * args.questions:,} answers + {args.episodes:,} episodes "
                  f"in {time.perf_counter() - start:.1f} s")  # fmt: skip
        port = args.port or _free_port()
        _endpoints(folder, port, args.models * args.questions)
        _paints(folder, port)
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
