"""One model call: request bodies, the transport (litellm, the runner's own, or a fake for tests),
retries, rate limits, cache keys, secrets and prices.

Read in this order: ``bodies`` (what is sent), ``transport`` (every request, batches' too; only
``LitellmTransport`` sends through litellm), ``direct`` (the runner's own requests to the wires it
knows, and ``AutoTransport``, which picks direct or litellm per model), ``mock_transport`` (the
in-process fake), ``retry`` (what a failure means), ``limit_keys`` (a run's limiters, one per limit key:
``limiter`` for one process, with its slots, pauses and a down model, ``fleet_limiter`` for a fleet),
``adaptive`` (a limit nobody gave, learned from headers and 429s), ``client`` (a logical call: slots +
requests + retries), ``failing`` (a model whose requests surely fail: set aside, probed), ``batch_wire``
and ``batch_client`` (provider Batch APIs), ``cache_keys``, ``secrets``, ``prices``.
"""

from __future__ import annotations

from .adaptive import AdaptiveRate, LearnedLimit
from .bodies import QUESTION_NAME, decision_body, llm_body
from .cache_keys import CACHE_KEY_VERSION, CacheMode, cache_key, legacy_cache_key
from .client import CallOutcome, ModelClient
from .direct import AutoTransport, DirectTransport, litellm_needed, preload_litellm_for
from .failing import FOR_JOB, FailingModels, ModelFailing
from .limit_keys import REQUEST_STARTED, FleetLimits, LearnedLimits, Limiter, Limiters
from .litellm_loader import load_litellm, preload_litellm
from .mock_transport import MockTransport, Sent
from .prices import token_prices
from .retry import Verdict, classify, transport_failure
from .secrets import Secrets
from .transport import BatchTransport, CallKind, LitellmTransport, Origin, ProviderTransport, Reply, Transport

__all__ = [
    "CACHE_KEY_VERSION",
    "FOR_JOB",
    "QUESTION_NAME",
    "REQUEST_STARTED",
    "AdaptiveRate",
    "AutoTransport",
    "BatchTransport",
    "CacheMode",
    "CallKind",
    "CallOutcome",
    "DirectTransport",
    "FailingModels",
    "FleetLimits",
    "LearnedLimit",
    "LearnedLimits",
    "Limiter",
    "Limiters",
    "LitellmTransport",
    "MockTransport",
    "ModelClient",
    "ModelFailing",
    "Origin",
    "ProviderTransport",
    "Reply",
    "Secrets",
    "Sent",
    "Transport",
    "Verdict",
    "cache_key",
    "classify",
    "decision_body",
    "legacy_cache_key",
    "litellm_needed",
    "llm_body",
    "load_litellm",
    "preload_litellm",
    "preload_litellm_for",
    "token_prices",
    "transport_failure",
]
