"""``knowwhen export``: a finalised run laid out as an AgentDecisionBench dataset folder, with its own card.

Read in this order: ``source`` (what an export reads of a run, and what it wrote), ``folder`` (the
folder's layout and the files copied or rewritten into it), ``headline_rows`` (the leaderboard's headline
numbers), ``card`` (the dataset card, ``README.md``, with every config's declared features).
"""

from __future__ import annotations

from .folder import set_folder_name, write_export
from .source import ExportSummary, RunSource

__all__ = ["ExportSummary", "RunSource", "set_folder_name", "write_export"]
