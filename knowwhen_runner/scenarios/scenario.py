"""What every scenario loader returns: a ``Scenario`` (its items keyed by id), and the sources an
isolated scenario planned without because their files are absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..dataset.subset import SubsetRecord

__all__ = ["MissingSource", "Scenario"]


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
    subset: SubsetRecord | None = None  # with a limit: what was drawn of what the scenario holds
