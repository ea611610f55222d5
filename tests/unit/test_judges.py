"""A suite whose third-party judge is missing is skipped on a developer's machine and fails in CI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.judges import judge_missing, needs_judge

ROOT = Path(__file__).resolve().parents[2]
PROBE = "KNOWWHEN_JUDGE_PROBE"

if os.environ.get(PROBE):

    @needs_judge(True, "the probe's judge is never installed")
    def test_probe_with_a_missing_judge() -> None:
        """Collected only by the tests below, in a pytest of their own."""


def _probe(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env[PROBE] = "1"
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider",
         f"{Path(__file__).relative_to(ROOT)}::test_probe_with_a_missing_judge"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_judge_missing_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """``judge_missing`` skips a test where CI is unset and fails it, with the same reason, where CI=true."""
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        judge_missing("no chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run this judge, and it is missing: no chromium"):
        judge_missing("no chromium")


@pytest.mark.slow
def test_a_marked_suite_fails_under_ci_and_skips_without() -> None:
    """The conftest hook reads the ``judge_missing`` mark: the same test is skipped without CI, an error with it."""
    local, ci = _probe(None), _probe("true")
    assert "1 skipped" in local.stdout and local.returncode == 0, local.stdout + local.stderr
    assert "1 error" in ci.stdout and ci.returncode == 1, ci.stdout + ci.stderr
    assert "the probe's judge is never installed" in ci.stdout
