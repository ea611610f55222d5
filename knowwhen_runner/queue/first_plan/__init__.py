"""A plan's bulk insert: a first plan builds the jobs table's secondary indexes after its rows, SQLite keeps
a bigger page cache while a plan is inserted and binds only what differs between a cell's jobs, and
PostgreSQL takes a plan's jobs by COPY."""

from __future__ import annotations

from .bulk import copy_jobs, defer_indexes, insert_cell, plan_cache

__all__ = ["copy_jobs", "defer_indexes", "insert_cell", "plan_cache"]
