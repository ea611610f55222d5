"""The structure's counts the tests measure: queue implementations, skips in the queue contract, and skips
that stay skips under ``CI=true`` (tests/unit/test_structure_counts.py); the import contracts kept
(tests/unit/test_import_contracts.py); the subpackages mypy checks with --strict's flags
(tests/unit/test_tooling.py). Printed once at the end of a run
(tests/conftest.py); under pytest-xdist each worker hands its counts to the main process as it ends.
"""

from __future__ import annotations

__all__ = ["COUNTS"]

COUNTS: dict[str, int] = {}
