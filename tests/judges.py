"""Third-party judges the suite needs (Chromium, poppler, Slurm, Prism, the BFCL wheel, a private
PostgreSQL, the LiteLLM Proxy): a suite whose judge is missing is skipped on a developer's machine, saying
why, and fails under ``CI=true``, where ``.ci/run`` installs every judge and a green run must mean that each
one ran."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["in_ci", "judge_missing", "needs_judge"]


def in_ci() -> bool:
    """True in CI (``CI=true``, as every CI service sets it): a missing judge is a failure there."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def judge_missing(reason: str) -> NoReturn:
    """Skip the test, saying ``reason``; in CI, fail it with the same sentence."""
    if in_ci():
        pytest.fail(f"CI must run this judge, and it is missing: {reason}", pytrace=False)
    pytest.skip(reason)


def needs_judge(missing: bool, reason: str) -> pytest.MarkDecorator:
    """A mark for a module or test whose judge is ``missing``: skipped locally, failed in CI (the
    ``judge_missing`` marker is read by tests/conftest.py before each test is set up)."""
    if missing:
        return pytest.mark.judge_missing(reason)
    return pytest.mark.judge_present
