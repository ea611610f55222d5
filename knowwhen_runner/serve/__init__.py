"""``knowwhen serve``: a local HTTP server with reference models, reached through litellm like any provider.

It speaks System One (``/v1/systemone``) and OpenAI chat completions (``/v1/chat/completions``) for
honest baselines (``lexical``, ``lexical-llm``), and injects faults and rate limits on request so tests
can watch the runner cope with a misbehaving provider without touching the internet.
"""

from __future__ import annotations

from .defaults import ServedModel, default_registry, served_models
from .faults import FAULT_KINDS, FaultRule, parse_fault_spec, parse_rpm_spec
from .models import ChatModel, DecisionModel, ModelRegistry
from .process import ServerProcess, start_server_process
from .server import listen_socket, run_server

__all__ = [
    "FAULT_KINDS",
    "ChatModel",
    "DecisionModel",
    "FaultRule",
    "ModelRegistry",
    "ServedModel",
    "ServerProcess",
    "default_registry",
    "listen_socket",
    "parse_fault_spec",
    "parse_rpm_spec",
    "run_server",
    "served_models",
    "start_server_process",
]
