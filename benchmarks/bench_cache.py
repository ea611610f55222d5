"""Benchmark of the shared response store: lookup cost per call on a big store, export and import rates.

Not a test: it prints figures. ``python benchmarks/bench_cache.py [--entries 1000000] [--pg]``
fills a fresh SQLite store (and throwaway PostgreSQL databases with ``--pg``) with ``--entries``
synthetic responses the size of a decision answer, then measures: a worker's batched lookup (64 keys
per query, as claimed) and a single lookup (an episode's step), hits and misses, in microseconds per
call; exporting the whole store to a bundle and importing it into a fresh store, in entries per second.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from knowwhen_runner.cache import CacheStore, StoredEntry, open_cache
from knowwhen_runner.cache.bundle import export_bundle, import_bundle

_RESPONSE = orjson.dumps(
    {
        "choice": "tool_07",
        "confidence": 0.81,
        "probabilities": {f"tool_{i:02d}": round(1 / 69, 6) for i in range(69)},
        "input_tokens": 812,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "latency_ms": 41.0,
    }
).decode()


def _key(i: int) -> str:
    return hashlib.sha256(f"entry {i}".encode()).hexdigest()


async def _fill(store: CacheStore, n: int) -> float:
    started = time.perf_counter()
    now = time.time()
    for start in range(0, n, 20_000):
        rows = [
            StoredEntry(_key(i), f"hosted_vllm/m{i % 39:02d}", _RESPONSE, now)
            for i in range(start, min(n, start + 20_000))
        ]
        await store.put_stored(rows)
    return time.perf_counter() - started


async def _lookups(store: CacheStore, n: int, batch: int, rounds: int, hit: bool) -> float:
    """Microseconds per key looked up, ``batch`` keys per query."""
    rng = random.Random(7)
    spent = 0.0
    for _ in range(rounds):
        keys = (
            [_key(i) for i in rng.sample(range(n), batch)]
            if hit
            else [uuid.uuid4().hex * 2 for _ in range(batch)]
        )
        started = time.perf_counter()
        found = await store.get(keys)
        spent += time.perf_counter() - started
        assert len(found) == (batch if hit else 0)
    return spent / (rounds * batch) * 1e6


async def _measure(url: str, fresh_url: str, n: int, work: Path) -> None:
    async with open_cache(url) as store:
        fill_s = await _fill(store, n)
        print(f"{url.split(':')[0]:<10} filled {n:,} entries in {fill_s:.1f} s ({n / fill_s:,.0f}/s)")
        for batch, rounds, what in ((64, 200, "worker batch of 64"), (1, 2000, "single (episode step)")):
            for hit in (True, False):
                us = await _lookups(store, n, batch, rounds, hit)
                print(f"  lookup, {what}, {'hits' if hit else 'misses'}: {us:,.1f} us per call")
        started = time.perf_counter()
        path, manifest = await export_bundle(store, work / "bundle.jsonl.gz")
        export_s = time.perf_counter() - started
        size_mb = path.stat().st_size / 1e6
        print(
            f"  export: {manifest.entries:,} entries in {export_s:.1f} s ({manifest.entries / export_s:,.0f}/s), {size_mb:.0f} MB"
        )
    async with open_cache(fresh_url) as fresh:
        started = time.perf_counter()
        summary = await import_bundle(fresh, path)
        import_s = time.perf_counter() - started
        print(f"  import: {summary.added:,} entries in {import_s:.1f} s ({summary.added / import_s:,.0f}/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument(
        "--pg", action="store_true", help="also on throwaway databases of the PostgreSQL server the tests use"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        anyio.run(
            _measure, f"sqlite:///{work / 'big.db'}", f"sqlite:///{work / 'fresh.db'}", args.entries, work
        )
        if args.pg:
            from tests.pg import temporary_database

            with temporary_database() as big, temporary_database() as fresh:
                anyio.run(_measure, big, fresh, args.entries, work)


if __name__ == "__main__":
    main()
