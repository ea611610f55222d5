"""A throwaway PostgreSQL database per test module, on the local server (trust auth)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

PG_HOST = os.environ.get("KNOWWHEN_TEST_PGHOST", "127.0.0.1")
PG_PORT = int(os.environ.get("KNOWWHEN_TEST_PGPORT", "5432"))


def _admin_conn() -> psycopg.Connection:
    last: Exception | None = None
    for user in ("postgres", "root"):
        try:
            return psycopg.connect(
                host=PG_HOST, port=PG_PORT, user=user, dbname="test", autocommit=True, connect_timeout=5
            )
        except psycopg.OperationalError as exc:
            last = exc
    raise RuntimeError(f"PostgreSQL is not reachable: {last}")


@contextmanager
def temporary_database() -> Iterator[str]:
    """Create a fresh database, yield its SQLAlchemy URL, drop it afterwards."""
    name = f"kw_test_{uuid.uuid4().hex[:12]}"
    with _admin_conn() as conn:
        user = conn.info.user
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql+psycopg://{user}@{PG_HOST}:{PG_PORT}/{name}"
    finally:
        with _admin_conn() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A throwaway PostgreSQL database for the test module."""
    with temporary_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test runs twice: on a SQLite file, and on the module's PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'limits.db'}"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def fresh_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The test runs twice: on a SQLite file of its own, and on a PostgreSQL database of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'run.db'}"
        return
    with temporary_database() as url:
        yield url
