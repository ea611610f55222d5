"""Request bodies (pure): what one open-loop question sends to a decision model or to an LLM.

A decision model gets one System One ``choice`` question over the options; an LLM gets the state as the
user message and every option as a tool.
"""

from __future__ import annotations

import functools
from typing import Any

from ..dataset.files import QUESTION_TEXT

__all__ = ["QUESTION_NAME", "decision_body", "llm_body"]

QUESTION_NAME = "next_tool"
_SYSTEM_PROMPT = (
    "You are the tool-choice step of a customer-service agent. Read the agent's state and call the one "
    "tool the agent should call next."
)


@functools.lru_cache(maxsize=256)
def _criteria(options: tuple[str, ...], descriptions: tuple[str | None, ...]) -> dict[str, str | None]:
    return dict(zip(options, descriptions, strict=True))


@functools.lru_cache(maxsize=256)
def _tools(options: tuple[str, ...], descriptions: tuple[str | None, ...]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": desc or "",
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for name, desc in zip(options, descriptions, strict=True)
    ]


def _question(item: dict[str, Any]) -> str:
    """The question an item asks: tool choice unless it says otherwise (an argument question does)."""
    return str(item.get("question") or QUESTION_TEXT)


def decision_body(item: dict[str, Any]) -> dict[str, Any]:
    """The System One request for one question: one ``choice`` question over the options.

    Questions of one set share their option list, so the criteria map is built once per list (and must
    not be mutated by callers).
    """
    criteria = _criteria(tuple(item["options"]), tuple(item["descriptions"]))
    return {
        "state": item["state"],
        "questions": {
            QUESTION_NAME: {"type": "choice", "instructions": _question(item), "criteria": criteria}
        },
    }


def llm_body(item: dict[str, Any], tool_choice: str = "required") -> dict[str, Any]:
    """The chat request for one question: the state as the user message, the options as tools.

    ``tool_choice`` is the model's setting (``ModelSpec.tool_choice``): some servers refuse "required".
    """
    messages = [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {"role": "user", "content": f"{item['state']}\n\n{_question(item)}"},
    ]
    tools = _tools(tuple(item["options"]), tuple(item["descriptions"]))
    return {"messages": messages, "tools": tools, "tool_choice": tool_choice}
