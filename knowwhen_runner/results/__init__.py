"""From recorded results to what a user reads: answers files, CXS manifests, tables, plots, the report.

Read in this order: ``collect`` (queue results grouped per cell), ``cells`` (the
numbers of each cell), ``manifest/`` (the versioned document per model, in three parts), ``ranking`` (the leaderboard's
order, and which models a plot names), ``tables``, ``gated_tables`` and ``table_files`` (every table,
ranked), ``figures/`` (the plots: SVG for the report, matplotlib for a paper; its ``__init__`` gives its
own order), ``report``, ``finalize`` (all of it, idempotently), ``compare`` (two runs), ``cell_intervals``
(each cell's uncertainty, from the statistics of ``knowwhen_runner.intervals``), ``export/`` (a finalised
run as a dataset folder, with its headline numbers and card).
"""

from __future__ import annotations

from .compare import compare_runs
from .finalize import finalize_run
from .manifest import MANIFEST_SCHEMA_VERSION, CxsManifest, load_manifest, manifest_path

__all__ = [
    "MANIFEST_SCHEMA_VERSION",
    "CxsManifest",
    "compare_runs",
    "finalize_run",
    "load_manifest",
    "manifest_path",
]
