"""Builders for test inputs: small question sets in the benchmark's layout, sweep configs, CLI runs."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from knowwhen_runner.dataset.files import compute_qhash
from tests.forkrun import run_cli, spawn_needed

TOOLS = {
    "find_customer": "Look up a customer by e-mail address.",
    "get_orders": "List the orders of a customer by customer id.",
    "cancel_order": "Cancel an order that has not shipped yet.",
    "refund_order": "Refund an order, fully or partly.",
    "ask_user": "Ask the customer for missing information.",
    "reply_to_customer": "Send the final reply to the customer.",
    "find_customer_by_phone": "Look up a customer by phone number.",
    "cancel_subscription": "Cancel a recurring subscription.",
}
_PLANS = [
    ["find_customer", "get_orders", "cancel_order", "reply_to_customer"],
    ["ask_user", "find_customer", "get_orders", "refund_order", "reply_to_customer"],
]
TIMING_FIELDS = ("latency_ms", "wall_ms", "attempts", "requests", "cache_hit", "retry_errors")


def make_question_set(folder: Path, n_tasks: int = 10) -> Path:
    """Write a question set (questions, occurrences, corpus) with one question per task step."""
    folder.mkdir(parents=True, exist_ok=True)
    options, descriptions = list(TOOLS), list(TOOLS.values())
    questions, occurrences = [], []
    for t in range(n_tasks):
        plan = _PLANS[t % len(_PLANS)]
        task = f"task-{t:03d}"
        for step, gold in enumerate(plan):
            history = "\n".join(f"- called {name}" for name in plan[:step]) or "(none)"
            state = (
                f"TASK: customer {t} wants help with order #{1000 + t}\nHISTORY:\n{history}\n"
                f"CURRENT OBSERVATION: step {step} of task {t}"
            )
            qhash = compute_qhash(state, options, descriptions)
            questions.append(
                {"qhash": qhash, "state": state, "options": options, "descriptions": descriptions}
            )
            occurrences.append(
                {
                    "task": task,
                    "source": "test",
                    "step": step,
                    "qhash": qhash,
                    "gold": gold,
                    "gold_aux": {"acceptable_tools": [gold], "acceptable_tools_unfiltered": [gold]},
                    "gold_status": "ok",
                    "dp": "tool_select",
                    "stratum": "on_plan",
                    "label_provenance": "plan",
                }
            )
    for name, rows in (("questions", questions), ("occurrences", occurrences)):
        with gzip.open(folder / f"{name}.jsonl.gz", "wt") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in rows)
    (folder / "corpus.json").write_text(
        json.dumps({"eligible_tasks": [f"task-{t:03d}" for t in range(n_tasks)]})
    )
    return folder


def rated_lexical(base_url: str, rpm: int, in_flight: int) -> list[dict[str, Any]]:
    """The models of a config with one decision model (``lexical``) at a rate limit and in-flight cap."""
    return [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": base_url,
            "rate_limit": {"requests_per_minute": rpm, "max_in_flight": in_flight},
        }
    ]


def write_config(path: Path, base_url: str, scenario: Path, **overrides: Any) -> Path:
    """A sweep config with one decision model and one LLM on the local server."""
    config: dict[str, Any] = {
        "name": "t",
        "output": str(path.parent / "out"),
        "models": [
            {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base_url},
            {"id": "lexical-llm", "model": "openai/lexical-llm", "kind": "llm", "api_base": f"{base_url}/v1"},
        ],
        "scenarios": [{"id": "qs", "path": str(scenario)}],
        "workers": {"concurrency": 8, "lease_seconds": 10},
    }
    config.update(overrides)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def knowwhen(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the knowwhen CLI in a process of its own, as a user would (forked from a warm interpreter,
    ``tests/forkrun.py``, unless the command needs a fresh one)."""
    full_env = {**os.environ, **(env or {})}
    if not spawn_needed(env or {}, args):
        return run_cli(list(args), full_env, cwd, timeout)
    return subprocess.run(
        [sys.executable, "-m", "knowwhen_runner", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
    )


def read_answers(path: Path, *, drop_timing: bool = True) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    if drop_timing:
        for row in rows:
            for name in TIMING_FIELDS:
                row.pop(name, None)
    return rows


def with_named_probabilities(path: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of an answers file with ``probabilities`` keyed by option again (their folder's main questions)."""
    from knowwhen_runner.dataset.answer_rows import probability_map
    from knowwhen_runner.dataset.files import load_question_set

    questions = load_question_set(path.parent).questions
    return [
        {**r, "probabilities": probability_map(r["probabilities"], questions[r["qhash"]].options)}
        for r in rows
    ]


def job_indexes(url: str) -> dict[str, str]:
    """Every index of the jobs table, by name, as the database's catalog spells its definition."""
    sql = (
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'kw_jobs'"
        if url.startswith("sqlite")
        else "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'kw_jobs'"
    )
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {r[0]: str(r[1]) for r in conn.execute(text(sql))}
    finally:
        engine.dispose()
