"""The state text a decision model reads: `TASK:`, `HISTORY:` and `CURRENT OBSERVATION:`.

`render_state` is pure and stable: recorded question sets, the closed loop and served reference models
all call it, and a change to its output changes every qhash. Earlier calls appear in HISTORY with their
arguments and results (noise lines included); the latest call's result is the CURRENT OBSERVATION.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .tasks import Task

__all__ = ["render_call", "render_state"]

_START = "(the conversation has just started; no tool has been called yet)"


class _StepLike(Protocol):
    """Anything with a tool name, its arguments and its observation (e.g. `env.Step`)."""

    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> Mapping[str, Any]: ...
    @property
    def observation(self) -> str: ...


def render_call(tool: str, arguments: Mapping[str, Any]) -> str:
    """`tool {"arg": value}` with the arguments as sorted compact JSON."""
    args = json.dumps(dict(arguments), sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
    return f"{tool} {args}"


def _indent(text: str) -> str:
    return "\n".join(f"   {line}" for line in text.splitlines() or [""])


def render_state(task: Task, history: Sequence[_StepLike]) -> str:
    """The state before the next decision of `task` after the calls in `history`."""
    lines = [f"TASK: {task.request}", "HISTORY:"]
    if not history:
        lines += ["(none)", "CURRENT OBSERVATION:", _START]
        return "\n".join(lines)
    for n, step in enumerate(history, start=1):
        lines.append(f"{n}. {render_call(step.tool, step.arguments)}")
        if n < len(history):
            lines.append(_indent(step.observation))
    lines += ["CURRENT OBSERVATION:", f"(result of step {len(history)})", history[-1].observation]
    return "\n".join(lines)
