"""A response store in a dict: for in-process tests of the worker loop (one per ``open_cache``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson

from .store import CacheEntry, StoredEntry

__all__ = ["MemoryCacheStore"]


class MemoryCacheStore:
    """A ``CacheStore`` that forgets everything when the process ends."""

    location = "memory"

    def __init__(self) -> None:
        self._rows: dict[str, StoredEntry] = {}

    async def get(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {k: orjson.loads(self._rows[k].response_json) for k in keys if k in self._rows}

    async def put(self, entries: Sequence[CacheEntry], *, overwrite: bool = False) -> int:
        now = time.time()
        rows = [StoredEntry(e.key, e.model, orjson.dumps(e.response).decode(), now) for e in entries]
        return self._write(rows, overwrite)

    async def put_stored(self, rows: Sequence[StoredEntry]) -> int:
        return self._write(list(rows), False)

    def _write(self, rows: list[StoredEntry], overwrite: bool) -> int:
        written = 0
        for row in rows:
            if overwrite or row.key not in self._rows:
                self._rows[row.key] = row
                written += 1
        return written

    async def scan(self, after: str, limit: int, models: Sequence[str] | None = None) -> list[StoredEntry]:
        keys = sorted(k for k, r in self._rows.items() if k > after and (models is None or r.model in models))
        return [self._rows[k] for k in keys[:limit]]

    async def stats(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self._rows.values():
            out[row.model] = out.get(row.model, 0) + 1
        return out

    async def prune(self, *, model: str | None = None, older_than_s: float | None = None) -> int:
        cutoff = None if older_than_s is None else time.time() - older_than_s
        doomed = [
            k
            for k, r in self._rows.items()
            if (model is None or r.model == model) and (cutoff is None or r.created_at < cutoff)
        ]
        for key in doomed:
            del self._rows[key]
        return len(doomed)

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> MemoryCacheStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None
