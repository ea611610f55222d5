"""The runner against inspect_ai's ``inspect eval`` on the same LLM requests, alternated per round.

inspect_ai is not a dependency of the package: the benchmark installs it (with ``openai``, its client
for OpenAI-compatible servers) into a virtual environment of its own under a cache folder
(``KNOWWHEN_BENCH_CACHE``, default ``~/.cache/knowwhen-bench``) and skips the case with a message when
that fails (``--quick`` never installs: it uses the environment when a full run left one). One sample is one request: the state as the user message, the 69 options as tools, a tool
call required and not executed (``generate(tool_calls="none")``). The server counts the request bodies
of both sides, and the case checks that their mean sizes agree within 30%.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

from knowwhen_runner.serve import ServerProcess

_TASK = """
import json
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.solver import generate, system_message, use_tools
from inspect_ai.tool import ToolDef

SPEC = json.load(open({spec!r}))


def _noop():
    async def execute() -> str:
        return ""
    return execute


@task
def side_by_side():
    tools = [ToolDef(_noop(), name=o, description=d, parameters={{}}) for o, d in SPEC["tools"]]
    samples = [Sample(input=text, id=i) for i, text in enumerate(SPEC["inputs"])]
    return Task(
        dataset=samples,
        solver=[system_message(SPEC["system"]), use_tools(tools, tool_choice="any"), generate(tool_calls="none")],
    )
"""


def cache_folder() -> Path:
    return Path(os.environ.get("KNOWWHEN_BENCH_CACHE") or Path.home() / ".cache" / "knowwhen-bench")


def ensure_inspect(cache: Path, *, install: bool = True) -> tuple[Path | None, str]:
    """The ``inspect`` executable of the benchmark's own environment, installing it on first use."""
    env = cache / "inspect-venv"
    exe = env / ("Scripts" if os.name == "nt" else "bin") / "inspect"
    if exe.is_file():
        return exe, "cached"
    if not install:
        return None, f"inspect_ai is not installed in {env} (a full run of python -m benchmarks installs it)"
    try:
        shutil.rmtree(env, ignore_errors=True)
        venv.create(env, with_pip=True)
        pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q", "inspect_ai", "openai"]
        done = subprocess.run(pip, capture_output=True, text=True, check=False, timeout=900)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"could not create the inspect_ai environment in {env}: {exc}"
    if done.returncode != 0 or not exe.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"pip could not install inspect_ai into {env}: {tail[0]}"
    return exe, "installed"


def write_task(folder: Path, inputs: list[str], tools: list[tuple[str, str]], system: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    spec = folder / "spec.json"
    spec.write_text(json.dumps({"inputs": inputs, "tools": tools, "system": system}))
    path = folder / "side_by_side.py"
    path.write_text(_TASK.format(spec=str(spec)))
    return path


def _mean_body(server: ServerProcess, path: str = "/v1/chat/completions") -> float:
    row = server.stats(records=False)["body_bytes"].get(path) or {"bodies": 0, "bytes": 0}
    return row["bytes"] / max(1, row["bodies"])


def compare(
    server: ServerProcess,
    work: Path,
    runner_config: Path,
    texts: list[str],
    tools: list[tuple[str, str]],
    system: str,
    rounds: int,
    concurrency: int = 32,
    *,
    install: bool = True,
) -> dict[str, Any]:
    """Alternate ``inspect eval`` and ``knowwhen run`` over the same requests; ratio of rates per round."""
    from benchmarks.overhead import fresh_run, timed

    exe, how = ensure_inspect(cache_folder(), install=install)
    if exe is None:
        print(f"skipped inspect_ai side by side: {how}", file=sys.stderr)
        return {"skipped": how}
    task = write_task(work / "inspect", texts, tools, system)
    n = len(texts)
    env = {**os.environ, "OPENAI_BASE_URL": f"{server.base_url}/v1", "OPENAI_API_KEY": "not-needed"}
    per_round = []
    sizes: dict[str, float] = {}
    for r in range(rounds):
        logs = work / "inspect" / f"logs-{r}"
        command = [
            str(exe),
            "eval",
            task.name,
            "--model",
            "openai/lexical-llm",
            "-M",
            "responses_api=false",  # chat completions, as the runner sends
            "--max-connections",
            str(concurrency),
            "--log-dir",
            str(logs),
            "--display",
            "none",
            "--max-retries",
            "0",
        ]
        theirs = timed(server, command, n, env, cwd=task.parent)
        if theirs["requests"] < n:  # inspect eval exits 0 when its samples fail
            return {"skipped": f"inspect eval made {theirs['requests']} of {n} requests (logs: {logs})"}
        sizes["inspect_ai"] = _mean_body(server)
        fresh_run(runner_config)
        ours = timed(server, [sys.executable, "-m", "knowwhen_runner", "run", str(runner_config), "-q"], n)
        sizes["runner"] = _mean_body(server)
        per_round.append(
            {
                "ratio": round(ours["per_s"] / theirs["per_s"], 2),
                "inspect_per_s": round(theirs["per_s"], 1),
                "runner_per_s": round(ours["per_s"], 1),
                "inspect_cpu_ms": theirs["cpu_ms"] and round(theirs["cpu_ms"], 2),
                "runner_cpu_ms": ours["cpu_ms"] and round(ours["cpu_ms"], 2),
                "inspect_requests": theirs["requests"],
            }
        )
    ratios = [r["ratio"] for r in per_round]
    size_ratio = sizes["inspect_ai"] / max(1.0, sizes["runner"])
    return {
        "inspect_ai": how,
        "calls": n,
        "rounds": per_round,
        "ratio_median": statistics.median(ratios),
        "ratio_min_max": [min(ratios), max(ratios)],
        "mean_body_bytes": {k: round(v) for k, v in sizes.items()},
        "bodies_within_30pct": 1 / 1.3 <= size_ratio <= 1.3,
    }
