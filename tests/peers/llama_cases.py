"""What the llama-cpp-python cassettes hold: the raw litellm calls and the small sweep, defined once.

The recorder (``record_llm``) and the replay tests build their requests from here, so a replay sends
byte-for-byte what was recorded. Sampling is pinned (temperature 0, seed 0) so a re-recording against
the same server and model gives the same answers, and replies are capped at 64 tokens: given a string
argument, a small model can otherwise write until its context is full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowwhen_runner.jsonio import find_jsonl, iter_jsonl, write_jsonl
from knowwhen_runner.provider import llm_body

__all__ = [
    "CASSETTES",
    "MODEL",
    "PARAMS",
    "RAW_CASES",
    "RawCase",
    "runner_item",
    "sweep_config",
]

MODEL = "gemma-3-270m"  # the server's --model_alias: what the server names itself in replies
PARAMS: dict[str, Any] = {"temperature": 0, "seed": 0, "max_tokens": 64}
CASSETTES = Path(__file__).resolve().parents[1] / "fixtures" / "llama_cpp"
_SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "decisiongym"


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in properties.items()},
                "required": list(properties),
            },
        },
    }


_TOOLS = [
    _tool("find_customer", "Look up a customer by e-mail address.", email="The customer's e-mail."),
    _tool("get_orders", "List the orders of a customer.", customer_id="The customer's id."),
    _tool("ask_user", "Ask the customer for missing information.", question="What to ask."),
]
_SYSTEM = {"role": "system", "content": "You are a customer-service agent. Use the tools."}
_USER = {"role": "user", "content": "I am ann@example.com. Which orders do I have?"}
_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "find_customer", "arguments": '{"email": "ann@example.com"}'},
}
_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": '{"customer_id": "C-17", "name": "Ann"}'}


def _after_call(assistant: dict[str, Any]) -> list[dict[str, Any]]:
    return [_SYSTEM, _USER, assistant, _RESULT]


def runner_item() -> dict[str, Any]:
    """A small open-loop question in the runner's item shape (state, options, descriptions)."""
    return {
        "state": "TASK: ann@example.com wants to cancel order #1001\nHISTORY:\n(none)\n"
        "CURRENT OBSERVATION: the customer wrote in",
        "options": ["find_customer", "get_orders", "cancel_order", "ask_user"],
        "descriptions": [
            "Look up a customer by e-mail address.",
            "List the orders of a customer by customer id.",
            "Cancel an order that has not shipped yet.",
            "Ask the customer for missing information.",
        ],
    }


@dataclass(frozen=True)
class RawCase:
    """One litellm call and what the issue says the server does with it."""

    name: str
    purpose: str
    kwargs: dict[str, Any] = field(default_factory=dict)


_RUNNER = llm_body(runner_item())
RAW_CASES = [
    RawCase(
        "runner_required",
        "the runner's open-loop request as this branch builds it (tool_choice 'required')",
        {"messages": _RUNNER["messages"], "tools": _RUNNER["tools"], "tool_choice": "required"},
    ),
    RawCase(
        "runner_auto",
        "the same request with tool_choice 'auto'",
        {"messages": _RUNNER["messages"], "tools": _RUNNER["tools"], "tool_choice": "auto"},
    ),
    RawCase(
        "required",
        "tool_choice 'required' with tools",
        {"messages": [_SYSTEM, _USER], "tools": _TOOLS, "tool_choice": "required"},
    ),
    RawCase(
        "auto",
        "tool_choice 'auto' with tools",
        {"messages": [_SYSTEM, _USER], "tools": _TOOLS, "tool_choice": "auto"},
    ),
    RawCase(
        "forced",
        "tool_choice naming one function",
        {
            "messages": [_SYSTEM, _USER],
            "tools": _TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "find_customer"}},
        },
    ),
    RawCase(
        "history_no_content",
        "an assistant tool-call turn without a content key",
        {
            "messages": _after_call({"role": "assistant", "tool_calls": [_CALL]}),
            "tools": _TOOLS,
            "tool_choice": "auto",
        },
    ),
    RawCase(
        "history_content_null",
        "an assistant tool-call turn with content null (what this branch's episodes send)",
        {
            "messages": _after_call({"role": "assistant", "content": None, "tool_calls": [_CALL]}),
            "tools": _TOOLS,
            "tool_choice": "auto",
        },
    ),
    RawCase(
        "history_content_empty",
        "an assistant tool-call turn with content ''",
        {
            "messages": _after_call({"role": "assistant", "content": "", "tool_calls": [_CALL]}),
            "tools": _TOOLS,
            "tool_choice": "auto",
        },
    ),
    RawCase(
        "several_calls",
        "a request that invites two tool calls in one reply",
        {
            "messages": [
                _SYSTEM,
                {
                    "role": "user",
                    "content": "Look up ann@example.com and bob@example.com: call find_customer twice, "
                    "once for each e-mail, in this one reply.",
                },
            ],
            "tools": _TOOLS,
            "tool_choice": "auto",
        },
    ),
]


def first_questions(dest: Path, n: int = 10) -> Path:
    """A question set of the common states' first ``n`` questions by qhash (the ones the cassette holds),
    their occurrences, and those occurrences' tasks eligible: written into ``dest``."""
    source = _SCENARIOS / "common"
    rows = [row for _line, row in iter_jsonl(find_jsonl(source, "questions") or source)]
    kept = set(sorted(row["qhash"] for row in rows)[:n])
    occurrences = [
        r for _l, r in iter_jsonl(find_jsonl(source, "occurrences") or source) if r["qhash"] in kept
    ]
    write_jsonl(dest / "questions.jsonl.gz", [r for r in rows if r["qhash"] in kept])
    write_jsonl(dest / "occurrences.jsonl.gz", occurrences)
    corpus = json.loads((source / "corpus.json").read_text())
    tasks = {r["task"] for r in occurrences}
    corpus["eligible_tasks"] = [t for t in corpus["eligible_tasks"] if t in tasks]
    (dest / "corpus.json").write_text(json.dumps(corpus))
    return dest


def sweep_config(llm_base: str, decision_base: str, output: Path, model: str = MODEL) -> dict[str, Any]:
    """The small sweep: 10 open-loop questions and 2 short episodes, the LLM in two modes.

    ``llm_base`` is the OpenAI-compatible base (ending in /v1); ``decision_base`` is ``knowwhen serve``.
    The LLM is asked for tool_choice 'auto' (llama-cpp refuses 'required'). The questions are the common
    states' first 10 by qhash, written beside ``output`` (a ``limit`` draws a seeded sample instead).
    """
    questions = first_questions(output.parent / "first-questions")
    llm: dict[str, Any] = {
        "id": "gemma",
        "model": f"openai/{model}",
        "kind": "llm",
        "api_base": llm_base,
        "timeout_s": 300,
        "params": PARAMS,
        "rate_limit": {"max_in_flight": 1},  # the server computes one reply at a time
        "tool_choice": "auto",  # llama-cpp refuses "required" with a 500
    }
    return {
        "name": "llama",
        "output": str(output),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": decision_base},
            llm,
        ],
        "modes": ["llm", "model"],
        "scenarios": [
            {"id": "common", "kind": "states", "path": str(questions)},
            {
                "id": "l3",
                "kind": "episodes",
                "agent": "gemma",
                "suite": "common",
                "split": "bench",
                "n": 2,
                "max_steps": 4,
            },
        ],
        "workers": {"concurrency": 4, "max_attempts": 1},
    }
