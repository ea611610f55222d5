"""The models the local server starts with, in one registry (``default_registry``): the lexical
baselines, and DecisionGym's simulated agent LLM, learned prior and test doubles. Names say what each one
is: ``agent-sim`` is a simulator (not a real LLM), ``prior`` a reference decision model,
``*-test-double`` for tests only.
"""

from __future__ import annotations

from .agent_sim import AgentSim
from .models import DEFAULT_ALIAS, LexicalChatModel, LexicalDecisionModel, ModelRegistry
from .prior import PriorDecisionModel
from .test_doubles import OracleDecisionModel, RandomDecisionModel

__all__ = ["default_registry", "register_gym_models"]


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
