"""The sweep config: one YAML file that is a whole reproducible run.

Typed, frozen pydantic models with a docstring per field; ``load_config`` turns every problem into a
``ConfigError`` of the form ``file:line: field: message``. Secrets never live here: a model names the
environment variable that holds its key (``api_key_env``), every other credential (a header, a URL's
password or secret path, a hook's token) is a ``${VAR}`` reference, and a literal one is refused.
Relative paths resolve against the folder of the config file, so a config can be run from anywhere.

The models live in one module per concern, read in this order: ``fields`` (the frozen base and shared
shapes), ``model_spec`` (a model: rate limits, prices, provider batches), ``scenario_spec`` (a scenario
and its τ), ``settings`` (cache, workers, server, gates, caps, budget, notifications), ``screen_spec`` (the ``screen:``
block), ``sweep_config``
(the whole sweep), ``credentials`` (``${VAR}`` references, literal credentials found) and ``loader`` (files, ``${VAR}`` expansion, line numbers, errors).
"""

from __future__ import annotations

from .credentials import params_env_refs, resolve_params
from .fields import CONFIG_SCHEMA_VERSION, CachePolicy
from .loader import config_hash, load_config, parse_config
from .model_spec import BatchSettings, ModelSpec, Pricing, RateLimit
from .scenario_spec import DEFAULT_MAX_STEPS, IsolatedSource, ScenarioSpec, TauFit
from .screen_spec import Keep, NotWorseThanSpec, ScreenSettings
from .settings import (
    Budget,
    CacheSettings,
    Cap,
    GateSettings,
    Notify,
    ReportSettings,
    ServeSettings,
    WorkerSettings,
)
from .sweep_config import SweepConfig

__all__ = [
    "CONFIG_SCHEMA_VERSION",
    "DEFAULT_MAX_STEPS",
    "BatchSettings",
    "Budget",
    "CachePolicy",
    "CacheSettings",
    "Cap",
    "GateSettings",
    "IsolatedSource",
    "Keep",
    "ModelSpec",
    "NotWorseThanSpec",
    "Notify",
    "Pricing",
    "RateLimit",
    "ReportSettings",
    "ScenarioSpec",
    "ScreenSettings",
    "ServeSettings",
    "SweepConfig",
    "TauFit",
    "WorkerSettings",
    "config_hash",
    "load_config",
    "params_env_refs",
    "parse_config",
    "resolve_params",
]
