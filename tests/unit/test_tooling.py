"""The project's own checks: ruff (lint and format) and mypy on the package, as part of the suite."""

from __future__ import annotations

import os
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


def _mypy_cache() -> str:
    """mypy's incremental cache, kept per machine outside the checkout (``KNOWWHEN_MYPY_CACHE``, default
    ~/.cache/knowwhen-mypy): a clean clone then checks only what changed. mypy keys each entry by the
    file's hash, its own version and options, so a stale entry is never trusted (a minute of CPU cold)."""
    default = Path.home() / ".cache" / "knowwhen-mypy"
    return os.environ.get("KNOWWHEN_MYPY_CACHE") or str(default)


@pytest.mark.slow
def test_mypy_finds_nothing() -> None:
    """mypy (with the pydantic plugin) type-checks the package cleanly."""
    done = _run("mypy", "--cache-dir", _mypy_cache(), "knowwhen_runner")
    assert done.returncode == 0, done.stdout + done.stderr
