"""The project's own checks: ruff (lint and format) and mypy on the package, as part of the suite; and
mypy's strictness, package by package (pyproject.toml, ``[[tool.mypy.overrides]]``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mypy.main import process_options
from mypy.options import PER_MODULE_OPTIONS

from tests.structure_counts import COUNTS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "knowwhen_runner"

NOT_STRICT: dict[str, str] = {}
"""Subpackages and top-level modules mypy checks without --strict's flags, with the reason."""


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


def _strict_flags() -> dict[str, Any]:
    """The per-module flags ``mypy --strict`` sets, with their values, as mypy itself defines them."""
    _, strict = process_options(["--strict", "--config-file", "", "-c", "pass"])
    _, plain = process_options(["--config-file", "", "-c", "pass"])
    return {
        name: getattr(strict, name)
        for name in sorted(PER_MODULE_OPTIONS)
        if getattr(strict, name) != getattr(plain, name)
    }


def _units() -> set[str]:
    """The package's subpackages and top-level modules (``knowwhen_runner`` for its ``__init__``)."""
    top = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"} | {"knowwhen_runner"}
    return top | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def _unit(pattern: str) -> str:
    parts = pattern.removesuffix(".*").split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_mypy_is_strict_on_every_package_but_those_named() -> None:
    """One override of pyproject.toml sets every per-module flag of mypy's own ``--strict`` (or the global
    section does), on each subpackage and top-level module but those in NOT_STRICT."""
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in mypy.get("overrides", []) if o.get("disallow_untyped_defs")]
    assert len(strict) == 1, "one [[tool.mypy.overrides]] holds the strict flags"
    glob = {k: v for k, v in mypy.items() if k != "overrides"}
    effective = {name: strict[0].get(name, glob.get(name)) for name in _strict_flags()}
    assert effective == _strict_flags()
    assert glob.get("warn_redundant_casts") is True  # --strict's one global flag
    covered = {_unit(m) for m in strict[0]["module"]}
    assert covered | set(NOT_STRICT) == _units(), "give a new package a place: strict, or NOT_STRICT"
    assert not covered & set(NOT_STRICT)
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    COUNTS["mypy strict subpackages"] = len(covered & packages)
    print(f"mypy strict: {len(covered & packages)} of {len(packages)} subpackages, not {sorted(NOT_STRICT)}")
