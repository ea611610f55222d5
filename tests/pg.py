"""A throwaway PostgreSQL database per test module, on the local server (trust auth)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

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
