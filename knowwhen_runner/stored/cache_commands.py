"""What ``knowwhen cache`` does: find a run's response store, count and prune it, export and import bundles.

A store is named by a config file or a run folder (the store that run uses), by ``--store`` (a SQLite
file or a database URL), or by nothing (the user-level store).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

from ..cache import cache_url, open_cache, user_cache_dir
from ..cache.bundle import BundleManifest, ImportSummary, export_bundle, import_bundle
from ..config import SweepConfig, load_config
from .reader import with_db
from .run_meta import config_from_run

__all__ = ["cache_export", "cache_import", "cache_report", "store_url"]


def _config(target: Path, db: str | None) -> SweepConfig:
    if target.is_dir():
        return anyio.run(lambda: config_from_run(target, db=db))
    return with_db(load_config(target), db)


def store_url(target: Path | None = None, *, db: str | None = None, store: str | None = None) -> str:
    """The URL of the store named by ``store``, else by a config file or run folder, else the user's."""
    if store:
        return store if "://" in store else f"sqlite:///{Path(store).resolve()}"
    if target is not None:
        return cache_url(_config(target, db))
    return f"sqlite:///{user_cache_dir() / 'responses.db'}"


def cache_report(
    url: str, *, prune_model: str | None = None, older_than_s: float | None = None, prune_all: bool = False
) -> tuple[str, dict[str, int], int]:
    """(where the store is, entries per litellm model string, entries pruned first)."""

    async def go() -> tuple[str, dict[str, int], int]:
        async with open_cache(url) as cache:
            pruned = 0
            if prune_all or prune_model or older_than_s is not None:
                pruned = await cache.prune(model=prune_model, older_than_s=older_than_s)
            return cache.location, await cache.stats(), pruned

    return anyio.run(go)


def cache_export(
    out: Path | str, configs: Sequence[Path], *, url: str, db: str | None = None
) -> tuple[Path, BundleManifest]:
    """Bundle the store's responses of the configs' models (every response when no config is given)."""
    models: list[str] | None = None
    if configs:
        models = sorted({m.model for target in configs for m in _config(target, db).models})

    async def go() -> tuple[Path, BundleManifest]:
        async with open_cache(url) as cache:
            return await export_bundle(cache, out, models)

    return anyio.run(go)


def cache_import(bundle: Path, *, url: str) -> tuple[str, ImportSummary]:
    """Load a bundle into the store at ``url``; (where the store is, what was added)."""

    async def go() -> tuple[str, ImportSummary]:
        async with open_cache(url) as cache:
            return cache.location, await import_bundle(cache, bundle)

    return anyio.run(go)
