"""One contract for the response store on both engines: SQLite and PostgreSQL behave the same."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from knowwhen_runner.cache import CacheEntry, CacheStore, StoredEntry, open_cache
from tests.pg import temporary_database


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with temporary_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cache.db'}"
    else:
        url = request.getfixturevalue("pg_url")
        yield url
        # one database per module: empty the table so each test starts from nothing
        anyio.run(_empty, url)


async def _empty(url: str) -> None:
    async with open_cache(url) as store:
        await store.prune()


def _do(url: str, fn: Any) -> Any:
    async def go() -> Any:
        async with open_cache(url) as store:
            return await fn(store)

    return anyio.run(go)


def test_first_answer_stored_wins_and_refresh_overwrites(store_url: str) -> None:
    """A key keeps the first response put; only ``overwrite`` (the refresh policy) replaces it."""

    async def go(s: CacheStore) -> list[Any]:
        first = await s.put([CacheEntry("k1", "m", {"a": 1}), CacheEntry("k2", "m", {"a": 2})])
        second = await s.put([CacheEntry("k1", "m", {"a": 3})])
        kept = await s.get(["k1", "k2", "k3"])
        await s.put([CacheEntry("k1", "m", {"a": 4})], overwrite=True)
        return [first, second, kept, await s.get(["k1"])]

    first, second, kept, refreshed = _do(store_url, go)
    assert (first, second) == (2, 0)
    assert kept == {"k1": {"a": 1}, "k2": {"a": 2}}
    assert refreshed == {"k1": {"a": 4}}


def test_many_keys_are_looked_up_at_once(store_url: str) -> None:
    """A lookup of 1,200 keys (more than one IN chunk) returns exactly the stored ones."""

    async def go(s: CacheStore) -> dict[str, Any]:
        await s.put([CacheEntry(f"k{i:05d}", "m", {"i": i}) for i in range(0, 1200, 2)])
        return await s.get([f"k{i:05d}" for i in range(1200)])

    found = _do(store_url, go)
    assert len(found) == 600 and found["k00010"] == {"i": 10} and "k00011" not in found


def test_scan_stats_and_prune(store_url: str) -> None:
    """Scan pages in key order (optionally by model), stats count per model, prune by model and by age."""

    async def go(s: CacheStore) -> list[Any]:
        await s.put([CacheEntry(f"a{i}", "m1", {"i": i}) for i in range(5)])
        await s.put_stored([StoredEntry(f"b{i}", "m2", '{"j":1}', time.time() - 90_000) for i in range(3)])
        page = await s.scan("a1", 3)
        only_m2 = await s.scan("", 10, ["m2"])
        stats = await s.stats()
        old = await s.prune(older_than_s=86_400)
        by_model = await s.prune(model="m1")
        return [page, only_m2, stats, old, by_model, await s.stats()]

    page, only_m2, stats, old, by_model, left = _do(store_url, go)
    assert [r.key for r in page] == ["a2", "a3", "a4"]
    assert [r.key for r in only_m2] == ["b0", "b1", "b2"] and only_m2[0].response_json.replace(
        " ", ""
    ) == '{"j":1}'
    assert stats == {"m1": 5, "m2": 3}
    assert (old, by_model, left) == (3, 5, {})


def _writer(url: str, tag: str, n: int, go: Any) -> None:
    go.wait()

    async def put() -> None:
        async with open_cache(url) as store:
            for start in range(0, n, 100):
                await store.put(
                    [CacheEntry(f"key{i:05d}", "m", {"by": tag}) for i in range(start, start + 100)]
                )

    anyio.run(put)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_processes_writing_the_same_keys(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two processes putting the same 2,000 keys at once: one entry per key, one writer's answer each, no error."""
    url = f"sqlite:///{tmp_path / 'shared.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    _do(url, lambda s: s.stats())  # tables first, so the writers race on rows, not on CREATE TABLE
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(url, tag, 2000, go)) for tag in ("one", "two")]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    found = _do(url, lambda s: s.get([f"key{i:05d}" for i in range(2000)]))
    stats = _do(url, lambda s: s.stats())
    assert len(found) == 2000 and stats == {"m": 2000}
    assert {r["by"] for r in found.values()} <= {"one", "two"}
    if backend == "postgresql":
        anyio.run(_empty, url)


def test_a_store_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    """A cache file written by a newer release is refused with one line naming it, not misread."""
    import sqlite3

    from knowwhen_runner.exceptions import QueueError

    path = tmp_path / f"{uuid.uuid4().hex}.db"
    _do(f"sqlite:///{path}", lambda s: s.stats())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE kw_cache_info SET value = '9' WHERE key = 'schema_version'")
    with pytest.raises(QueueError, match="cache schema 9"):
        _do(f"sqlite:///{path}", lambda s: s.stats())
