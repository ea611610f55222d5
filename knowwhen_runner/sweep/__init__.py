"""The sweep: stages planned into the queue, the workers set to fill it, the fleet, finalising.

Read in this order: ``request`` (what ``run`` is asked), ``sweep`` (``run``: plan, work, finalise),
``working`` (the queue worked in this process), ``stages`` and ``advance`` (the next stage once its
inputs are complete), ``fits`` (τ from shadow episodes), ``fleet`` (many processes and machines),
``preflight`` (probe each model before spending), ``guards`` (a run folder and a config are the run's
own), ``local_server`` (``knowwhen serve`` when a config needs it), ``progress``, ``notify``, ``outputs``
(finalising, with the viewer's offline drill-down in the report), ``reports`` (``plan`` and ``plan
--probe``), ``forecast`` (the cost forecast of ``plan``), ``importer`` and ``episode_import`` (published
answers and episodes recorded as a run).
"""

from __future__ import annotations

from .fleet import JoinSummary, finalize_once, join_run, run_fleet
from .importer import import_dataset
from .preflight import Preflight, PreflightError, Probe
from .reports import PlanReport, plan_report, probe_report
from .request import RunRequest
from .sweep import RunSummary, finalize_config, run_sweep
from .working import work_queue

__all__ = [
    "JoinSummary",
    "PlanReport",
    "Preflight",
    "PreflightError",
    "Probe",
    "RunRequest",
    "RunSummary",
    "finalize_config",
    "finalize_once",
    "import_dataset",
    "join_run",
    "plan_report",
    "probe_report",
    "run_fleet",
    "run_sweep",
    "work_queue",
]
