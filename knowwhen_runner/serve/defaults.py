"""The DecisionGym models of the local server: a simulated agent LLM, a learned prior, and test doubles.

Registered beside the lexical baselines by ``default_registry``. Names say what each one is: ``agent-sim``
is a simulator (not a real LLM), ``prior`` a reference decision model, ``*-test-double`` for tests only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .agent_sim import AgentSim
from .prior import PriorDecisionModel
from .test_doubles import OracleDecisionModel, RandomDecisionModel

if TYPE_CHECKING:
    from .models import ModelRegistry

__all__ = ["register_gym_models"]


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
