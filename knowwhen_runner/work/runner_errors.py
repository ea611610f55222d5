"""Exceptions raised by the runner's own code while it works a job: bugs, never the job's failure.

Only a provider's answer may fail a job. Anything else that goes wrong in a worker's hands (a limiter, the
cache, a serializer) is logged with its traceback to ``runner-errors.log`` in the run folder, counted,
and the job goes back to pending with its attempt unspent. A worker that meets many of them stops
claiming (a bug that fails every job would otherwise spin); the run then exits non-zero.
"""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

from ..redaction import redact

__all__ = ["LOG_NAME", "STOP_AFTER", "RunnerErrors"]

LOG_NAME = "runner-errors.log"
STOP_AFTER = 50  # runner errors after which a worker stops claiming (its jobs stay pending)
_SAY_FIRST = 3  # runner errors said on stderr (the rest are in the log only)


class RunnerErrors:
    """Counts the runner's own errors of one worker and writes each one's traceback to the run's log."""

    def __init__(self, folder: Path, worker: str) -> None:
        self.path = folder / LOG_NAME
        self.worker = worker
        self.count = 0

    def note(self, job_id: str, exc: BaseException) -> None:
        """Log one runner error met while working ``job_id`` (the job goes back to pending)."""
        self.count += 1
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        text = redact("".join(traceback.format_exception(exc)))  # a message may quote a URL or a header
        entry = f"--- {stamp} worker {self.worker} job {job_id}\n{text}\n"
        where = str(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as log:
                log.write(entry)
        except OSError:
            where = "stderr"
            print(entry, file=sys.stderr, flush=True)
        if self.count <= _SAY_FIRST:
            first = redact(str(exc).strip().splitlines()[0]) if str(exc).strip() else ""
            print(
                f"\nknowwhen: runner error on job {job_id} ({type(exc).__name__}: {first}); the job goes "
                f"back to pending, its attempt unspent; traceback in {where}",
                file=sys.stderr,
                flush=True,
            )

    @property
    def too_many(self) -> bool:
        return self.count >= STOP_AFTER
