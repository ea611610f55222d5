"""Reliability tests: every test here is marked ``reliability`` and adds to one printed summary.

``pytest -m reliability`` runs them alone and ends with the counts: kills survived, faults injected,
bad inputs tried, database outages waited out, SIGTERM hand-overs, stale workers taken over, results
lost (which must be 0). The counts live in tests/reliability/tally.py and the summary is printed by
tests/conftest.py, which also gathers them from pytest-xdist's worker processes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.reliability.tally import TALLY


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/reliability/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.reliability)


@pytest.fixture
def tally() -> Iterator[Counter[str]]:
    """Counts what a reliability test did (kills, faults, bad inputs, lost results)."""
    yield TALLY
