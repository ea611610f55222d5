"""What an export reads of a run and what it wrote: the two shapes the folder and its card share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config import SweepConfig
from ...dataset.subset import SubsetRecord

__all__ = ["ExportSummary", "RunSource"]


@dataclass(frozen=True)
class RunSource:
    """What an export reads of a run besides its files: the stored config, the task items of each
    episodes scenario, and the run's record (its config text and metadata)."""

    config: SweepConfig
    tasks: dict[str, list[dict[str, Any]]]
    info: dict[str, Any]


@dataclass
class ExportSummary:
    """What an export wrote: the folder, its question-set folders (by scenario) and every file."""

    out: Path
    sets: dict[str, str] = field(default_factory=dict)  # scenario id -> folder name
    files: list[Path] = field(default_factory=list)
    subsets: dict[str, SubsetRecord] = field(default_factory=dict)  # folder -> the sample it holds
