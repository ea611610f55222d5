"""The models the local server can answer as, behind two small interfaces.

A ``DecisionModel`` answers System One choice questions with one probability per option; a
``ChatModel`` answers chat completions with a message (usually one tool call). The app only sees a
``ModelRegistry``, so new reference models (a learned tool-sequence prior, an answer-key oracle for
tests, a simulated agent LLM for DecisionGym) are added by registering them, never by editing the app.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .lexical import DEFAULT_TEMPERATURE, lexical_probabilities

#: The vendor SDK's default model name; served as an alias of the lexical baseline (``defaults``).
DEFAULT_ALIAS = "jev-latest"
#: The date the reference models last changed what they answer, for the vendor's model list.
RELEASE_DATE = "2026-12-01"

__all__ = [
    "DEFAULT_ALIAS",
    "RELEASE_DATE",
    "ChatModel",
    "DecisionModel",
    "LexicalChatModel",
    "LexicalDecisionModel",
    "ModelRegistry",
]


@runtime_checkable
class DecisionModel(Protocol):
    """Answers one choice question: a probability for every label, in label order, summing to 1."""

    def decide(
        self, state: object, labels: Sequence[str], descriptions: Sequence[str | None]
    ) -> Sequence[float]:
        """Score the options for this state."""
        ...


@runtime_checkable
class ChatModel(Protocol):
    """Answers a chat completion with an OpenAI assistant message (``content`` and/or ``tool_calls``)."""

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        tool_choice: object,
        *,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """Return the assistant message for these messages and tools (``seed``: the request's, if any)."""
        ...


@dataclass(frozen=True)
class LexicalDecisionModel:
    """Reference baseline: TF-IDF similarity of the state's task and observation to each option."""

    temperature: float = DEFAULT_TEMPERATURE

    def decide(
        self, state: object, labels: Sequence[str], descriptions: Sequence[str | None]
    ) -> Sequence[float]:
        """Softmax over cosine similarities; deterministic."""
        return lexical_probabilities(state, labels, descriptions, temperature=self.temperature)


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


@dataclass
class LexicalChatModel:
    """Reference baseline LLM: calls the tool whose name and description best match the last user message.

    It writes no arguments (``"{}"``): it stands in for an LLM's tool choice, not its argument filling.
    """

    scorer: LexicalDecisionModel = field(default_factory=LexicalDecisionModel)
    _ids: itertools.count[int] = field(default_factory=itertools.count, repr=False)

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        tool_choice: object,
        *,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """One tool call for the best-matching tool; plain text when no tools are offered or choice is "none"."""
        functions = [t.get("function", t) for t in tools if isinstance(t, Mapping)]
        names = [str(f.get("name", "")) for f in functions]
        if isinstance(tool_choice, Mapping):  # {"type": "function", "function": {"name": ...}}
            forced = tool_choice.get("function", {}).get("name")
            if forced in names:
                names = [forced]
                functions = [f for f in functions if f.get("name") == forced]
        if not names or tool_choice == "none":
            return {"role": "assistant", "content": "I have nothing to call."}
        user = [m for m in messages if m.get("role") == "user"]
        text = _message_text(user[-1]) if user else ""
        probs = self.scorer.decide(text, names, [f.get("description") for f in functions])
        best = max(range(len(names)), key=probs.__getitem__)
        call = {
            "id": f"call_{next(self._ids):08d}",
            "type": "function",
            "function": {"name": names[best], "arguments": "{}"},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}


def _summary(model: object) -> str:
    """The first line of a model's class docstring: what the model list says about it by default."""
    return next(iter((type(model).__doc__ or "").strip().splitlines()), type(model).__name__)


@dataclass
class ModelRegistry:
    """Model names the server answers as, per endpoint kind; an unknown name is a 404.

    An alias answers with its target's model and reports the target's name in responses, as the
    vendor's moving aliases do.
    """

    decision: dict[str, DecisionModel] = field(default_factory=dict)
    chat: dict[str, ChatModel] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)

    def add_decision(self, name: str, model: DecisionModel, description: str | None = None) -> None:
        """Serve ``model`` at ``/v1/systemone`` as ``name`` (described by its docstring unless told)."""
        self.decision[name] = model
        self.descriptions[name] = description or _summary(model)

    def add_chat(self, name: str, model: ChatModel, description: str | None = None) -> None:
        """Serve ``model`` at ``/v1/chat/completions`` as ``name`` (described by its docstring unless told)."""
        self.chat[name] = model
        self.descriptions[name] = description or _summary(model)

    def add_decision_alias(self, alias: str, target: str) -> None:
        """Serve the decision model ``target`` as ``alias`` too."""
        self.decision[alias] = self.decision[target]
        self.aliases[alias] = target
        self.descriptions[alias] = f"Alias of {target}: {self.descriptions[target]}"

    def resolve(self, name: str) -> str:
        """The name of the model that answers as ``name`` (itself unless it is an alias)."""
        return self.aliases.get(name, name)

    def describe(self, name: str) -> str:
        """One line on what the model is."""
        return self.descriptions.get(name, "")

    def names(self) -> list[str]:
        """Every served model name, sorted."""
        return sorted({*self.decision, *self.chat})
