"""Reliability tests: every test here is marked ``reliability`` and adds to one printed summary.

``pytest -m reliability`` runs them alone and ends with the counts: kills survived, faults injected,
bad inputs tried, database outages waited out, SIGTERM hand-overs, stale workers taken over, results
lost (which must be 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

TALLY: Counter[str] = Counter()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/reliability/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.reliability)


@pytest.fixture
def tally() -> Iterator[Counter[str]]:
    """Counts what a reliability test did (kills, faults, bad inputs, lost results)."""
    yield TALLY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLY:
        return
    terminalreporter.section("reliability summary")
    names = ("kills survived", "faults injected", "bad inputs tried", "database outages waited out",
             "sigterm hand-overs", "stale workers taken over", "results lost")  # fmt: skip
    for name in names:
        terminalreporter.write_line(f"{name}: {TALLY.get(name, 0)}")
