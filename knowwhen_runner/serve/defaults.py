"""The models the local server starts with, in one registry (``default_registry``): the lexical
baselines, and DecisionGym's simulated agent LLM, learned prior and test doubles. Names say what each one
is: ``agent-sim`` is a simulator (not a real LLM), ``prior`` a reference decision model,
``*-test-double`` for tests only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .agent_sim import AgentSim
from .models import DEFAULT_ALIAS, LexicalChatModel, LexicalDecisionModel, ModelRegistry
from .prior import PriorDecisionModel
from .test_doubles import OracleDecisionModel, RandomDecisionModel

__all__ = ["ServedModel", "default_registry", "register_gym_models", "served_models"]


@dataclass(frozen=True)
class ServedModel:
    """A model the local server answers as: its name, kind, one line on what it is, and (an alias) the model
    that answers for it."""

    name: str
    kind: Literal["decision", "llm"]
    description: str
    alias_of: str | None = None

    @property
    def model(self) -> str:
        """The litellm model string a config reaches it with (System One for a decision model, chat else)."""
        return f"{'hosted_vllm' if self.kind == 'decision' else 'openai'}/{self.name}"

    def config_entry(self, base_url: str, model_id: str | None = None) -> dict[str, Any]:
        """The model as a config's ``models:`` entry for the server at ``base_url`` (an alias names the model
        its replies come from, ``served_as``)."""
        api_base = base_url.rstrip("/") + ("/v1" if self.kind == "llm" else "")
        entry: dict[str, Any] = {"id": model_id or self.name, "model": self.model, "kind": self.kind}
        entry["api_base"] = api_base
        if self.alias_of is not None:
            entry["served_as"] = self.alias_of
        return entry


def served_models(registry: ModelRegistry | None = None) -> list[ServedModel]:
    """Every model ``knowwhen serve`` answers as, by name (the default registry unless given)."""
    registry = registry or default_registry()
    return [
        ServedModel(
            name,
            "decision" if name in registry.decision else "llm",
            registry.describe(name),
            registry.aliases.get(name),
        )
        for name in registry.names()
    ]


def register_gym_models(registry: ModelRegistry) -> None:
    """Add ``agent-sim`` (chat), ``prior``, ``oracle-test-double`` and ``random-test-double`` (decision)."""
    registry.add_chat(
        "agent-sim", AgentSim.from_env(), "Simulated DecisionGym agent LLM (a simulator, not a real LLM)."
    )
    registry.add_decision(
        "prior", PriorDecisionModel(), "Reference model: next DecisionGym tool from the tools called so far."
    )
    registry.add_decision(
        "oracle-test-double", OracleDecisionModel(), "Test double: answers DecisionGym's answer key."
    )
    registry.add_decision(
        "random-test-double", RandomDecisionModel(), "Test double: a random option with a random confidence."
    )


def default_registry() -> ModelRegistry:
    """The reference models the server starts with."""
    registry = ModelRegistry()
    lexical = LexicalDecisionModel()
    registry.add_decision(
        "lexical", lexical, "Reference baseline: TF-IDF similarity of the state to each option."
    )
    registry.add_chat(
        "lexical-llm",
        LexicalChatModel(scorer=lexical),
        "Reference baseline LLM: calls the best-matching tool.",
    )
    register_gym_models(registry)
    # lexical, not prior: the SDK's default must answer any question from its descriptions, and prior only
    # knows DecisionGym's tool names.
    registry.add_decision_alias(DEFAULT_ALIAS, "lexical")
    return registry
