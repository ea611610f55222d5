"""The sweep: stages planned into the queue, workers that fill it, episodes, fits, the fleet, stored runs.

Read in this order: ``sweep`` (``run``: plan, work, finalise), ``stages``, ``worker`` (claim, call,
record; its recorder and heartbeat in ``recording``), ``scheduler`` and ``lanes`` (work in hand per
limit group), ``holds`` (what the worker leaves alone), ``outcome`` (what its loops hand on), ``calls``
(cache-through calls), ``batch_lane`` (questions through provider Batch APIs), ``episode`` (one
closed-loop episode), ``fits`` (τ from shadow episodes),
``fleet`` (many processes and machines), ``stored`` (reopen a run), ``export`` (a stored run as a dataset
folder), ``reports`` (``plan``, ``status``; each model's pace: ``queue.pace``), ``cache_commands``
(``knowwhen cache``), ``preflight`` (probe each model before spending), ``budget`` (spending caps),
``forecast`` (the cost forecast of ``plan``), ``pause`` (pause and resume a model), ``quarantine`` (which
failures hold a model back), ``importer`` (published answers), ``progress``, ``local_server``,
``event_loop`` (uvloop for workers), ``outputs`` (finalising, with the viewer's offline drill-down in the
report).
"""

from __future__ import annotations

from .cache_commands import cache_export, cache_import, cache_report, store_url
from .fleet import JoinSummary, finalize_once, join_run, run_fleet
from .importer import import_dataset
from .pause import pause_model, resume_model
from .preflight import PreflightError, Probe
from .reports import PlanReport, plan_report, probe_report, status_report
from .stored import config_from_run, open_existing, stored_config
from .sweep import Preflight, RunSummary, finalize_config, run_sweep, work_queue
from .worker import Worker, WorkStats

__all__ = [
    "JoinSummary",
    "PlanReport",
    "Preflight",
    "PreflightError",
    "Probe",
    "RunSummary",
    "WorkStats",
    "Worker",
    "cache_export",
    "cache_import",
    "cache_report",
    "config_from_run",
    "finalize_config",
    "finalize_once",
    "import_dataset",
    "join_run",
    "open_existing",
    "pause_model",
    "plan_report",
    "probe_report",
    "resume_model",
    "run_fleet",
    "run_sweep",
    "status_report",
    "store_url",
    "stored_config",
    "work_queue",
]
