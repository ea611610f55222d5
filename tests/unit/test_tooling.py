"""The project's own checks: ruff (lint and format) and mypy on the package, as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_finds_nothing() -> None:
    """ruff's lint rules (pyproject.toml) pass on the package, tests and benchmarks."""
    done = _run("ruff", "check", "knowwhen_runner", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_code_is_formatted() -> None:
    """ruff format would change nothing."""
    done = _run("ruff", "format", "--check", "knowwhen_runner", "tests", "benchmarks")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    """mypy (with the pydantic plugin) type-checks the package cleanly."""
    done = _run("mypy", "knowwhen_runner")
    assert done.returncode == 0, done.stdout + done.stderr
