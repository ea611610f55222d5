"""The local server judged by jevcompat, the System One conformance suite, run as its command line.

Its JSON report gives one result per requirement. Every MUST must pass, and every SHOULD that applies.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.serve import ServerProcess

pytestmark = pytest.mark.slow

#: Requirements that cannot apply to a server without authentication (every key, or none, is accepted),
#: with why. Of the two auth MUSTs exactly one applies; here it is auth.ignored-when-off.
NOT_APPLICABLE = {
    "auth.bearer": "the server reads no key at all, so there is no key to read from the Bearer header",
    "auth.missing": "the server has no authentication: a request without a key is meant to be answered",
    "auth.invalid": "the server has no authentication: there is no wrong key to refuse",
}


def _jevcompat() -> str:
    found = shutil.which("jevcompat", path=str(Path(sys.executable).parent)) or shutil.which("jevcompat")
    if found is None:
        pytest.fail("jevcompat is not installed: install the dev extras")
    return found


def _report(server: ServerProcess, model: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"jevcompat-{model}.json"
    command = [_jevcompat(), "test", server.base_url, "--model", model, "--timeout", "30", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert out.exists(), f"jevcompat wrote no report (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return report


def _failures(report: dict[str, Any], level: str) -> list[str]:
    return [
        f"{r['id']}: {r['findings'][0]['message'] if r['findings'] else r['reason']}"
        for r in report["results"]
        if r["level"] == level and r["status"] != "pass" and r["id"] not in NOT_APPLICABLE
    ]


@pytest.mark.parametrize("model", ["prior", "jev-latest"])
def test_every_must_and_applicable_should_passes(server: ServerProcess, model: str, tmp_path: Path) -> None:
    """jevcompat finds the server conformant for the prior and for the SDK's default alias: all MUSTs and
    every applicable SHOULD pass, and only the listed auth requirements go untested."""
    report = _report(server, model, tmp_path)
    assert report["aborted"] is None, report["aborted"]
    assert _failures(report, "MUST") == []
    assert _failures(report, "SHOULD") == []
    skipped = {r["id"] for r in report["results"] if r["status"] == "skip"}
    assert skipped == set(NOT_APPLICABLE)
    assert report["summary"]["verdict"] == "conformant"
    assert report["info"]["typesafe_sdk"], "jevcompat ran without the vendor SDK: dropin.sdk-python untested"
