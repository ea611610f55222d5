"""Word back from a run: the config's ``notify`` command or URL is told of each event.

Events: ``finish`` (every job answered), ``failure`` (jobs failed or were left pending), ``budget`` (a
budget is spent), ``quarantine`` (a model was quarantined), ``set_aside`` (a process's test says a model's
requests surely fail: it is probed every workers.set_aside_probe_s) and ``back`` (a probe of a model set aside answered); each of
the last two once per model for the fleet (the process that wrote or cleared its row). A command gets ``KNOWWHEN_EVENT``,
``KNOWWHEN_RUN`` and ``KNOWWHEN_MESSAGE`` in its environment; a URL gets ``{run, event, message}`` as
JSON. Word back never stops or fails a run: a hook that fails is reported on stderr in one line.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading

import httpx

from ..config import SweepConfig
from ..redaction import redact

__all__ = ["flush_notices", "notify"]

_TIMEOUT_S = 30.0
_pending: list[threading.Thread] = []  # hooks started with wait=False, not yet known to be done


def _say(what: str) -> None:
    print(redact(f"knowwhen: notify: {what}"), file=sys.stderr, flush=True)


def _run_command(command: str, env: dict[str, str]) -> None:
    try:
        done = subprocess.run(
            shlex.split(command),
            env={**os.environ, **env},
            timeout=_TIMEOUT_S,
            capture_output=True,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        _say(f"the command failed: {type(exc).__name__}: {exc}")
        return
    if done.returncode != 0:
        _say(f"the command exited {done.returncode}")


def _post(url: str, body: dict[str, str]) -> None:
    try:
        httpx.post(url, json=body, timeout=_TIMEOUT_S).raise_for_status()
    except httpx.HTTPError as exc:
        _say(f"posting to the URL failed: {type(exc).__name__}")


def notify(config: SweepConfig, event: str, message: str, *, wait: bool = True) -> None:
    """Tell the config's hooks of ``event``; ``wait=False`` returns at once (a hook runs on a thread)."""
    hooks = config.notify
    if hooks is None or (hooks.command is None and hooks.url is None):
        return
    if wait:
        flush_notices()  # earlier notices arrive first: a quarantine's before the run's end
    message = redact(message)  # a hook may forward it anywhere: no secret goes with it
    env = {"KNOWWHEN_EVENT": event, "KNOWWHEN_RUN": config.name, "KNOWWHEN_MESSAGE": message}
    body = {"run": config.name, "event": event, "message": message}
    jobs = []
    if hooks.command is not None:
        jobs.append(threading.Thread(target=_run_command, args=(hooks.command, env), daemon=True))
    if hooks.url is not None:
        jobs.append(threading.Thread(target=_post, args=(hooks.url, body), daemon=True))
    for job in jobs:
        job.start()
    if wait:
        for job in jobs:
            job.join(_TIMEOUT_S + 5)
    else:
        _pending[:] = [*(t for t in _pending if t.is_alive()), *jobs]


def flush_notices() -> None:
    """Wait for hooks still running from ``notify(wait=False)`` (a run ends: its notices must arrive)."""
    while _pending:
        _pending.pop().join(_TIMEOUT_S + 5)
