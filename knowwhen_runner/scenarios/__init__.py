"""Scenarios: what a sweep asks its models, loaded from files into items the planner can expand.

Each scenario kind has a loader returning a ``Scenario``: its id, kind, version and items, where an
item is the JSON-able data one job needs (a question's state and options, or an episode's task).
Items are stored with the run, so a worker on another machine needs no copy of the files. Read
``scenario`` first, then a loader per kind: ``states``, ``episodes``, ``isolated`` (``isolated_params``).
"""

from __future__ import annotations

from ..config import ScenarioSpec
from ..exceptions import ScenarioError
from .scenario import MissingSource, Scenario

__all__ = ["MissingSource", "Scenario", "load_scenario"]


def load_scenario(spec: ScenarioSpec) -> Scenario:
    """Load one scenario of any kind."""
    if spec.kind == "states":
        from .states import load_states  # start-up: each kind loads only what it reads (episodes: the gym)

        return load_states(spec)
    if spec.kind == "episodes":
        from .episodes import load_episodes  # start-up: the gym, only for an episodes scenario

        return load_episodes(spec)
    if spec.kind == "isolated":
        from .isolated import load_isolated  # start-up: the L1 readers, only for an isolated scenario

        return load_isolated(spec)
    raise ScenarioError(f"scenario {spec.id!r}: kind {spec.kind!r} is not supported by this version")
