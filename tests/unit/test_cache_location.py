"""Where a config's response store is: the user's file, the run's database, or the place it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowwhen_runner.cache import cache_url
from knowwhen_runner.config import parse_config
from knowwhen_runner.exceptions import ConfigError

_BASE = """
name: t
output: out
models: [{id: m, model: hosted_vllm/m, kind: decision}, {id: a, model: openai/a, kind: llm}]
scenarios: [{id: e, kind: episodes, suite: common, split: fit, n: 1}]
"""


def _config(extra: str, tmp_path: Path):
    return parse_config(_BASE + extra, base=tmp_path, source="c.yaml", check_files=False)


def test_default_is_the_user_store_for_sqlite_and_the_run_database_for_postgresql(tmp_path: Path) -> None:
    """A SQLite run shares the user's file ($KNOWWHEN_CACHE_DIR); a PostgreSQL run its own database."""
    user = cache_url(_config("", tmp_path))
    assert user.startswith("sqlite:///") and user.endswith("responses.db")
    import os

    assert user.removeprefix("sqlite:///").startswith(os.environ["KNOWWHEN_CACHE_DIR"])
    pg = "postgresql://u@127.0.0.1/db"
    assert cache_url(_config(f"db: {pg}\n", tmp_path)) == pg
    assert cache_url(_config("cache: {store: user}\n" + f"db: {pg}\n", tmp_path)) == user
    assert (
        cache_url(_config("cache: {store: run}\n", tmp_path))
        == f"sqlite:///{tmp_path / 'out' / 'knowwhen.db'}"
    )


def test_a_named_place_is_resolved_against_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cache.path is relative to the config's folder; cache.url expands ${VAR}."""
    assert (
        cache_url(_config("cache: {path: shared/c.db}\n", tmp_path))
        == f"sqlite:///{tmp_path / 'shared' / 'c.db'}"
    )
    monkeypatch.setenv("KW_CACHE_HOST", "10.0.0.9")
    got = cache_url(_config("cache: {url: 'postgresql://u@${KW_CACHE_HOST}/c'}\n", tmp_path))
    assert got == "postgresql://u@10.0.0.9/c"


def test_two_places_at_once_are_refused(tmp_path: Path) -> None:
    """store, path and url are alternatives: giving two is one error line naming the cache field."""
    with pytest.raises(ConfigError, match=r"c.yaml:\d+: cache.*give one of store, path and url"):
        _config("cache: {store: run, path: x.db}\n", tmp_path)
