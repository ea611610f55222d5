"""Fixtures of the unit tests that run on SQLite and on PostgreSQL (the fleet's limits ledger)."""

from tests.pg import db_url, pg_url  # noqa: F401
