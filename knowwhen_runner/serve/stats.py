"""Request accounting, so tests can count the calls the runner made and check its per-minute rates.

Counts per (model, endpoint, status) are kept forever (until a reset); individual request records are
kept in a bounded ring buffer, so a long benchmark cannot grow the server without limit. Request bodies
that arrived content-encoded are counted by encoding, so tests can see that a client compressed them.
"""

from __future__ import annotations

import time
from collections import Counter, deque

__all__ = ["RECORDS_KEPT", "Stats"]

RECORDS_KEPT = 200_000

# Status recorded for a request whose connection was dropped on purpose (no HTTP status was sent).
STATUS_RESET = 0


class Stats:
    """Counts and recent records of model requests (not admin or health calls)."""

    def __init__(self, maxlen: int = RECORDS_KEPT) -> None:
        self.counts: Counter[tuple[str, str, int]] = Counter()
        self.records: deque[tuple[float, str, str, int]] = deque(maxlen=maxlen)
        self.encodings: Counter[str] = Counter()
        self.body_bytes: Counter[str] = Counter()  # request body bytes (as decoded) per POST path
        self.bodies: Counter[str] = Counter()

    def record(self, model: str, endpoint: str, status: int) -> None:
        """Count one request; the timestamp is wall-clock seconds so rates can be compared across processes."""
        self.counts[(model, endpoint, status)] += 1
        self.records.append((time.time(), model, endpoint, status))

    def record_encoding(self, encoding: str) -> None:
        """Count one request body that arrived with this ``Content-Encoding`` (e.g. ``zstd``)."""
        self.encodings[encoding] += 1

    def record_body(self, path: str, size: int) -> None:
        """Count one POSTed body of ``size`` bytes (after content decoding), so a benchmark can check that
        two clients sent requests of the same size."""
        self.body_bytes[path] += size
        self.bodies[path] += 1

    def reset(self) -> None:
        """Forget every count and record."""
        self.counts.clear()
        self.records.clear()
        self.encodings.clear()
        self.body_bytes.clear()
        self.bodies.clear()

    def snapshot(self, *, since: float | None = None, records: bool = True) -> dict[str, object]:
        """JSON view: total, counts as rows, body encodings, and records as [timestamp, model, endpoint,
        status] lists."""
        rows = [
            {"model": model, "endpoint": endpoint, "status": status, "count": n}
            for (model, endpoint, status), n in sorted(self.counts.items())
        ]
        out: dict[str, object] = {
            "total": sum(self.counts.values()),
            "counts": rows,
            "encodings": dict(self.encodings),
            "body_bytes": {
                p: {"bodies": n, "bytes": self.body_bytes[p]} for p, n in sorted(self.bodies.items())
            },
        }
        if records:
            kept = self.records if since is None else (r for r in self.records if r[0] >= since)
            out["records"] = [list(r) for r in kept]
        return out
