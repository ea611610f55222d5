"""Named points where the reliability tests make the process kill itself, deterministically.

``KNOWWHEN_CRASH_AT=record:3`` sends SIGKILL to this process the third time it reaches ``record``. Unset
(always, outside those tests) every check is one dictionary lookup. Points: ``claim`` (jobs leased, not
started), ``call`` (a model answered, nothing recorded), ``record`` (inside the transaction that writes
a batch's cache entries and results, which the kill rolls back), ``finalize`` (some output files
written, others not), ``batch_open`` (a provider batch's row written, the provider not yet asked) and
``batch_submit`` (the provider created the batch; its id not yet written down).
"""

from __future__ import annotations

import os
import signal

__all__ = ["crashpoint"]


def _parse(spec: str) -> tuple[str, int] | None:
    name, _, count = spec.partition(":")
    return (name, int(count or 1)) if name else None


_TARGET = _parse(os.environ.get("KNOWWHEN_CRASH_AT", ""))
_seen: dict[str, int] = {}


def crashpoint(name: str) -> None:
    """Kill this process here if the environment asks for it (reliability tests only)."""
    if _TARGET is None or _TARGET[0] != name:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] >= _TARGET[1]:
        os.kill(os.getpid(), signal.SIGKILL)
