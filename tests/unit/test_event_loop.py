"""Workers run on uvloop where it is installed; ``KNOWWHEN_EVENT_LOOP=asyncio`` keeps asyncio's loop."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import anyio
import pytest

from knowwhen_runner.work.event_loop import loop_options
from tests.judges import needs_judge


def _loop_module() -> str:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    return anyio.run(which, backend_options=loop_options())


@needs_judge(importlib.util.find_spec("uvloop") is None or sys.platform == "win32", "uvloop not installed")
def test_a_worker_loop_is_uvloop_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """With uvloop installed and no setting, the loop ``anyio.run`` starts is uvloop's."""
    monkeypatch.delenv("KNOWWHEN_EVENT_LOOP", raising=False)
    assert _loop_module().startswith("uvloop")


def test_the_setting_keeps_asyncio_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """``KNOWWHEN_EVENT_LOOP=asyncio`` gives asyncio's own loop."""
    monkeypatch.setenv("KNOWWHEN_EVENT_LOOP", "asyncio")
    assert loop_options() == {}
    assert _loop_module().startswith("asyncio")
