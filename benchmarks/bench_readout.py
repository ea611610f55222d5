"""Read-outs: requests and tokens per question, and questions per second, for each read-out.

Sweeps DecisionGym's common states (69 options) with ``knowwhen run``: ``prior`` of the local server
read out by ``token`` (20 top_logprobs, as vLLM returns by default) and by ``likelihood``; then, when
llama.cpp's server and the Gemma 3 270M file are in the cache ``.ci/llama-server`` fills, the ``token``
read-out of that real model (69 top_logprobs: four requests a question), one request at a time.
Prints one JSON object (and writes it to ``--json FILE``). Run from the repository root:
``python -m benchmarks.bench_readout``; ``--llama-questions 383`` sweeps every common state, the
quickstart's, through llama.cpp (more than an hour on two busy cores).
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
from tests.llama_server import CACHE, MODEL, SERVER, llama_server

ROOT = Path(__file__).resolve().parents[1]
COMMON = ROOT / "scenarios" / "decisiongym" / "common"


def _sweep(folder: Path, models: list[dict[str, Any]], questions: int) -> dict[str, Any]:
    """Run the models over ``questions`` common states; per model: requests, tokens and questions a second."""
    config = {
        "name": "bench-readout",
        "output": str(folder / "out"),
        "models": models,
        "modes": ["model"],
        "scenarios": [{"id": "common", "path": str(COMMON), "limit": questions}],
        "cache": {"policy": "off"},
    }
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "KNOWWHEN_CACHE_DIR": str(folder / "cache"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "knowwhen_runner", "run", str(path), "-q"],
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-3:]}
    out: dict[str, Any] = {"run_seconds": round(seconds, 1)}
    for model in models:
        manifest = json.loads((folder / "out" / "manifests" / f"{model['id']}.cxs.json").read_text())
        readout, totals = manifest["readout"], manifest["totals"]
        latency = totals.get("latency", {})
        tokens = totals.get("tokens", {})
        # The limit takes whole tasks: the questions asked, not the limit, divide the totals.
        asked = out["questions"] = readout["answers"]
        out[model["id"]] = {
            "invalid": readout["invalid"],
            "requests_per_question": readout["requests_per_answer"],
            "input_tokens_per_question": round((tokens.get("input") or 0) / max(asked, 1), 1),
            "output_tokens_per_question": round((tokens.get("output") or 0) / max(asked, 1), 2),
            "p50_latency_ms": latency.get("p50_ms"),
            "label_mass_mean": readout["label_mass_mean"],
        }
    return out


def _llama(folder: Path, questions: int, threads: int) -> dict[str, Any]:
    if questions <= 0:
        return {"skipped": "--llama-questions 0"}
    if not (SERVER.is_file() and MODEL.is_file()):
        return {"skipped": f"no llama-server or model file in {CACHE} (run .ci/llama-server)"}
    with llama_server(threads=threads) as base:
        model = {
            "id": "gemma-token",
            "model": "openai/gemma-3-270m",
            "kind": "decision",
            "api_base": f"{base}/v1",
            "rate_limit": {"max_in_flight": 1},
            "timeout_s": 600,
            "params": {"extra_body": {"cache_prompt": False}},
            "readout": {"method": "token", "server": "llama.cpp", "top_logprobs": 69},
        }
        figures = _sweep(folder, [model], questions)
        if "run_seconds" in figures:
            asked, seconds = figures["questions"], figures["run_seconds"]
            figures["threads"] = threads
            figures["questions_per_s"] = round(asked / seconds, 3)
            figures["requests_per_s"] = round(
                asked * figures["gemma-token"]["requests_per_question"] / seconds, 3
            )
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=120, help="common states on the local server")
    parser.add_argument(
        "--llama-questions",
        type=int,
        default=12,
        help="common states on llama.cpp (383: all, the quickstart's)",
    )
    parser.add_argument(
        "--llama-threads",
        type=int,
        default=2,
        help="llama.cpp's threads (1 on a machine busy with other work)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with start_server_process() as server:
            models = [
                {
                    "id": "prior-token",
                    "model": "hosted_vllm/prior",
                    "kind": "decision",
                    "api_base": f"{server.base_url}/v1",
                    "readout": {"method": "token", "server": "vllm", "top_logprobs": 20},
                },
                {
                    "id": "prior-likelihood",
                    "model": "hosted_vllm/prior",
                    "kind": "decision",
                    "api_base": f"{server.base_url}/v1",
                    "readout": {"method": "likelihood", "server": "vllm"},
                },
            ]
            (work / "serve").mkdir()
            local = _sweep(work / "serve", models, args.questions)
        (work / "llama").mkdir()
        llama = _llama(work / "llama", args.llama_questions, args.llama_threads)
    figures = {"local_server": local, "llama_cpp": llama}
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
