"""The reliability summary's counts (kills survived, faults injected, bad inputs tried, database outages
waited out, SIGTERM hand-overs, stale workers taken over, results lost).

Each test process adds to ``TALLY``; under pytest-xdist each worker hands its counts to the main process
when it ends (tests/conftest.py), which prints the one summary.
"""

from __future__ import annotations

from collections import Counter

__all__ = ["NAMES", "TALLY"]

TALLY: Counter[str] = Counter()
NAMES = (
    "kills survived",
    "faults injected",
    "bad inputs tried",
    "database outages waited out",
    "sigterm hand-overs",
    "stale workers taken over",
    "results lost",
    "fuzz inputs tried",
    "fuzz tracebacks",
)
