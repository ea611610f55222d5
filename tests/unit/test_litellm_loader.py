"""Importing litellm with the collector off: it is on again afterwards (unless the caller had it off),
with the thresholds the loader sets, and the import's objects frozen out of its sight."""

from __future__ import annotations

import subprocess
import sys

import pytest

_CHECK = """
import gc
{before}
from knowwhen_runner.provider.litellm_loader import _GC_THRESHOLDS, load_litellm
load_litellm()
print(gc.isenabled(), gc.get_threshold() == _GC_THRESHOLDS, gc.get_freeze_count() > 100_000)
"""


@pytest.mark.parametrize(("before", "enabled"), [("", "True"), ("gc.disable()", "False")])
def test_collector_state_after_the_import(before: str, enabled: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHECK.format(before=before)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [enabled, "True", "True"]
