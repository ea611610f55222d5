"""Scenarios: what a sweep asks its models, loaded from files into items the planner can expand.

Each scenario kind has a loader returning a ``Scenario``: its id, kind, version and items, where an
item is the JSON-able data one job needs (a question's state and options, or an episode's task).
Items are stored with the run, so a worker on another machine needs no copy of the files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import ScenarioSpec
from ..exceptions import ScenarioError

__all__ = ["MissingSource", "Scenario", "load_scenario"]


@dataclass(frozen=True)
class MissingSource:
    """A source of an isolated scenario whose files are absent: planned without it, said in one sentence."""

    source: str  # "when2call", or "bfcl:<category>"
    where: str  # the file or folder looked for
    items: int  # items it would have given (its cap)
    fetch: str  # the command that fetches it


@dataclass(frozen=True)
class Scenario:
    """A loaded scenario: items keyed by their id (a question's qhash, an episode's task id)."""

    id: str
    kind: str
    version: str
    items: dict[str, dict[str, Any]]
    files: dict[str, str] = field(default_factory=dict)  # file name -> sha256, for provenance
    variant: str | None = None
    missing: tuple[MissingSource, ...] = ()  # isolated: sources left out because their files are absent


def load_scenario(spec: ScenarioSpec) -> Scenario:
    """Load one scenario of any kind."""
    if spec.kind == "states":
        from .states import load_states

        return load_states(spec)
    if spec.kind == "episodes":
        from .episodes import load_episodes

        return load_episodes(spec)
    if spec.kind == "isolated":
        from .isolated import load_isolated

        return load_isolated(spec)
    raise ScenarioError(f"scenario {spec.id!r}: kind {spec.kind!r} is not supported by this version")
