"""L1 test data as the outside world serves it: a bfcl-eval wheel of the fixture's BFCL files, and
nvidia/When2Call on a local Hub server (``tests/hub_server.py``)."""

from __future__ import annotations

import zipfile
from pathlib import Path

from knowwhen_runner.dataset.l1_fetch import BFCL_RELEASE, WHEN2CALL_FILE, WHEN2CALL_REPO
from tests.hub_server import HubRepo

__all__ = ["COMMIT", "FIXTURE", "make_wheel", "when2call_repo"]

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "isolated"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def make_wheel(folder: Path, version: str = BFCL_RELEASE, prefix: str = "BFCL_v4_") -> Path:
    """A bfcl-eval wheel holding the fixture's BFCL files (named ``prefix``) and a METADATA with ``version``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"bfcl_eval-{version}-py3-none-any.whl"
    info = f"bfcl_eval-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: bfcl-eval\nVersion: {version}\n")
        wheel.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info}/RECORD", "")
        wheel.writestr("bfcl_eval/__init__.py", "")
        for file in sorted((FIXTURE / "bfcl").rglob("*.json")):
            rel = file.relative_to(FIXTURE / "bfcl").as_posix().replace("BFCL_v4_", prefix)
            wheel.writestr(f"bfcl_eval/data/{rel}", file.read_bytes())
    return path


def when2call_repo() -> HubRepo:
    """nvidia/When2Call as the local hub serves it: the fixture's test file at one commit."""
    data = (FIXTURE / "when2call" / "when2call_test_mcq.jsonl").read_bytes()
    return HubRepo(WHEN2CALL_REPO, COMMIT, {WHEN2CALL_FILE: data, "README.md": b"# When2Call\n"})
