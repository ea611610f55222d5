"""Planning: a pure function from a config and its loaded scenarios to jobs.

``grid`` expands models × modes × scenarios into jobs and says which gated cells wait for a fit;
``stamp`` records what a plan was made from, so a resume that changes nothing need not plan again.
"""

from __future__ import annotations

from .grid import FitRequest, Plan, fit_requests, open_loop_mode, plan
from .stamp import plan_stamp

__all__ = ["FitRequest", "Plan", "fit_requests", "open_loop_mode", "plan", "plan_stamp"]
