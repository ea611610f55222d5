"""Planning: a pure function from a config and its loaded scenarios to jobs.

``grid`` expands models × modes × scenarios into jobs, cell by cell and as they are enqueued, and says
which gated cells wait for a fit; ``stamp`` records what a plan was made from, so a resume that changes
nothing need not plan again, and ``cells`` what each cell was made from, so a changed config re-plans only
the cells it changed.
"""

from __future__ import annotations

from .cells import cell_stamps, cells_of, notes_stamps, open_loop_mode
from .grid import FitRequest, Grid, Plan, expand, fit_requests, plan
from .stamp import plan_stamp

__all__ = [
    "FitRequest",
    "Grid",
    "Plan",
    "cell_stamps",
    "cells_of",
    "expand",
    "fit_requests",
    "notes_stamps",
    "open_loop_mode",
    "plan",
    "plan_stamp",
]
