"""What a response store is: the ``CacheStore`` protocol every backend implements, the entries it holds,
and how a store's URL is shown to people.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["CacheEntry", "CacheStore", "StoredEntry", "describe_url"]


class CacheEntry(NamedTuple):
    """One response to store: its key, the litellm model string that answered, the normalised response."""

    key: str
    model: str
    response: dict[str, Any]


class StoredEntry(NamedTuple):
    """One stored entry as it sits in a store (the response as its JSON text), for export and import."""

    key: str
    model: str
    response_json: str
    created_at: float


class CacheStore(Protocol):
    """What runs, reports and ``knowwhen cache`` may ask of a response store."""

    location: str
    """Where the store is, for people (a file path, or a database URL with its password hidden)."""

    async def get(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored responses of those keys that are in the store (one query per 500 keys)."""
        ...

    async def put(self, entries: Sequence[CacheEntry], *, overwrite: bool = False) -> int:
        """Store entries; a key already stored keeps its response unless ``overwrite``. Returns rows written."""
        ...

    async def put_stored(self, rows: Sequence[StoredEntry]) -> int:
        """Store entries as exported (first stored wins); returns how many were new."""
        ...

    async def scan(self, after: str, limit: int, models: Sequence[str] | None = None) -> list[StoredEntry]:
        """Up to ``limit`` entries with keys after ``after``, in key order (of ``models`` only, if given)."""
        ...

    async def stats(self) -> dict[str, int]:
        """Entries per litellm model string."""
        ...

    async def prune(self, *, model: str | None = None, older_than_s: float | None = None) -> int:
        """Delete the entries of ``model`` and/or stored more than ``older_than_s`` ago; returns how many."""
        ...

    async def close(self) -> None: ...
    async def __aenter__(self) -> CacheStore: ...
    async def __aexit__(self, *exc: object) -> None: ...


def describe_url(url: str) -> str:
    """A store's URL for people: a SQLite file's path, or the URL with any password hidden."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    # start-up: SQLAlchemy, only to show a database URL
    from ..queue.engine import safe_url

    return safe_url(url)
