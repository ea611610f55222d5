"""`knowwhen cache ...`: the shared response store: where it is, what it holds, pruning, replay bundles.

A thin typer layer over ``stored.cache_commands``. A store is named by a config file or run folder (the
store that run uses), by ``--store`` (a SQLite file or a database URL), or by nothing (the user's).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..exceptions import ConfigError

__all__ = ["cache_app"]

cache_app = typer.Typer(
    no_args_is_help=True,
    help="The response cache shared by runs: what it holds, pruning it, and replay bundles.",
)
out = Console(emoji=False)

_Target = Annotated[
    Path | None,
    typer.Argument(help="A config file or run folder: the store that run uses (default: the user's store)."),
]
_Store = Annotated[
    str | None, typer.Option("--store", help="A store by its SQLite file or database URL instead.")
]
_Db = Annotated[str | None, typer.Option(help="Database URL of the run, for runs on PostgreSQL.")]
_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _age_s(text: str) -> float:
    found = _AGE.match(text.strip())
    if not found:
        raise ConfigError(f"--older-than {text!r}: give a number and a unit, e.g. 30d, 12h or 2w")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def _print_counts(location: str, counts: dict[str, int]) -> None:
    out.print(f"cache: {location}", highlight=False)
    for model, n in sorted(counts.items()):
        out.print(f"{model}: {n}", highlight=False)
    out.print(f"total: {sum(counts.values())}")


@cache_app.command("stats")
def cache_stats(target: _Target = None, store: _Store = None, db: _Db = None) -> None:
    """Where the store is, and its cached responses per model string."""
    # start-up: a command loads only the stages it runs
    from ..stored import cache_report, store_url

    location, counts, _ = cache_report(store_url(target, db=db, store=store))
    _print_counts(location, counts)


@cache_app.command("prune")
def cache_prune(
    target: _Target = None,
    model: Annotated[str | None, typer.Option(help="Only this litellm model string.")] = None,
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="Only entries stored longer ago than this (30d, 12h).")
    ] = None,
    all_entries: Annotated[bool, typer.Option("--all", help="Every cached response.")] = False,
    store: _Store = None,
    db: _Db = None,
) -> None:
    """Delete cached responses by model and/or age (recorded answers stay)."""
    # start-up: a command loads only the stages it runs
    from ..stored import cache_report, store_url

    if not (model or older_than or all_entries):
        raise ConfigError("cache prune: name a --model, an --older-than age, or give --all")
    age = _age_s(older_than) if older_than else None
    url = store_url(target, db=db, store=store)
    location, counts, pruned = cache_report(url, prune_model=model, older_than_s=age, prune_all=all_entries)
    out.print(f"pruned {pruned}; {sum(counts.values())} cached responses left in {location}", highlight=False)


@cache_app.command("clear")
def cache_clear(
    run_dir: Annotated[Path, typer.Argument(help="Run folder or config: the store that run uses.")],
    model: Annotated[str | None, typer.Option(help="Only this litellm model string.")] = None,
    all_models: Annotated[bool, typer.Option("--all", help="Every cached response.")] = False,
    db: _Db = None,
) -> None:
    """Delete cached responses of a run's store (rerun with cache policy refresh to re-ask instead)."""
    # start-up: a command loads only the stages it runs
    from ..stored import cache_report, store_url

    if not model and not all_models:
        raise ConfigError("cache clear: name a --model or give --all")
    _loc, left, _ = cache_report(store_url(run_dir, db=db), prune_model=model, prune_all=all_models)
    out.print(f"cleared; {sum(left.values())} cached responses left")


@cache_app.command("export")
def cache_export(
    configs: Annotated[
        list[Path] | None,
        typer.Argument(help="Configs or run folders whose models' responses to bundle (default: all)."),
    ] = None,
    out_path: Annotated[
        str,
        typer.Option(
            "--out",
            help="Bundle file (a name ending in .jsonl.gz), or a folder (created if new) for "
            "knowwhen-cache-<sha256>.jsonl.gz.",
        ),
    ] = ".",
    store: _Store = None,
    db: _Db = None,
) -> None:
    """Write a replay bundle: one content-addressed file with a manifest (counts, models, sha256)."""
    # start-up: a command loads only the stages it runs
    from ..stored import cache_export as export
    from ..stored import store_url

    targets = list(configs or [])
    url = store_url(targets[0] if targets else None, db=db, store=store)
    path, manifest = export(out_path, targets, url=url, db=db)
    out.print(
        f"wrote {path}: {manifest.entries} responses of {len(manifest.models)} models "
        f"(cache key version {manifest.cache_key_version}, sha256 {manifest.sha256})",
        highlight=False,
    )


@cache_app.command("import")
def cache_import(
    bundle: Annotated[Path, typer.Argument(help="A bundle written by knowwhen cache export.")],
    target: _Target = None,
    store: _Store = None,
    db: _Db = None,
) -> None:
    """Load a replay bundle into a store (responses stored already keep theirs)."""
    # start-up: a command loads only the stages it runs
    from ..stored import cache_import as load
    from ..stored import store_url

    location, summary = load(bundle, url=store_url(target, db=db, store=store))
    out.print(
        f"imported {summary.added} responses into {location} ({summary.already} were there already)",
        highlight=False,
    )
