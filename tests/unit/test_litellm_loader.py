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


_WAITERS = """
import anyio
from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider.litellm_loader import litellm_loaded
from knowwhen_runner.provider.transport import LitellmTransport

models = [ModelSpec(id=f"m{i}", model="hosted_vllm/lexical", kind="decision", api_base="http://127.0.0.1:9")
          for i in range(30)]

async def main():
    transport, most = LitellmTransport(), 0
    pool = anyio.to_thread.current_default_thread_limiter()
    async with anyio.create_task_group() as tg:
        for m in models:
            tg.start_soon(transport.prepare, m)
        while not litellm_loaded():
            most = max(most, pool.borrowed_tokens)
            await anyio.sleep(0.005)
    print(most, litellm_loaded())

anyio.run(main)
"""


def test_calls_waiting_for_the_import_leave_the_thread_pool_to_the_database() -> None:
    """Thirty calls that need litellm while it loads hold at most one token of the thread pool, not one
    each: the queue's database work runs on those threads meanwhile."""
    done = subprocess.run([sys.executable, "-c", _WAITERS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    most, loaded = done.stdout.split()
    assert loaded == "True"
    assert int(most) <= 1
