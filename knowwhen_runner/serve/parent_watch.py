"""A server started for a run ends with the run, even when the run is killed with -9.

Linux: ``PR_SET_PDEATHSIG`` asks the kernel to send SIGTERM when the parent dies. Everywhere (and as a
fallback): a thread polls the parent's pid and, once it is gone, sends the process SIGTERM (uvicorn's
graceful stop), then exits outright if that has not ended it within a few seconds.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

__all__ = ["watch_parent"]

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.5
_GRACE_S = 5.0


def _parent_alive(pid: int) -> bool:
    if os.getppid() != pid:  # re-parented: the parent is gone
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _die_with_parent() -> None:
    """Ask the kernel for SIGTERM when the parent exits (Linux only; silently skipped elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _poll(pid: int) -> None:
    while _parent_alive(pid):
        time.sleep(_POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(_GRACE_S)
    os._exit(0)


def watch_parent(pid: int) -> None:
    """End this process when process ``pid`` (its parent) ends."""
    _die_with_parent()
    if not _parent_alive(pid):  # it died before the kernel was asked
        os._exit(0)
    threading.Thread(target=_poll, args=(pid,), name="parent-watch", daemon=True).start()
