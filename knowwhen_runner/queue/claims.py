"""A claim's statements (SQLite and PostgreSQL): return expired leases to pending, then lease jobs.

A claim takes up to ``n`` jobs in id order, leaving some models out (``Queue.claim``), or up to ``n``
jobs of each of several groups of models in one transaction (``Queue.claim_each``): one arm per group,
each its own ``LIMIT``, so a scheduler keeps work in hand per group without one round trip per group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Select, select

from ..jobs import Job
from . import ClaimQuota
from . import schema as s

__all__ = ["JOB_COLUMNS", "claim_sql", "job_from_row", "jobs_where"]

JOB_COLUMNS = "id, model_id, mode, scenario, item, payload, attempts"


def jobs_where(*where: Any) -> Select[Any]:
    """``SELECT JOB_COLUMNS FROM kw_jobs WHERE ...``, for ``job_from_row``."""
    return select(*(s.jobs.c[name.strip()] for name in JOB_COLUMNS.split(","))).where(*where)


def job_from_row(row: Any) -> Job:
    """The ``Job`` of a row whose first columns are ``JOB_COLUMNS``."""
    return Job(
        id=row[0],
        model_id=row[1],
        mode=row[2],
        scenario_id=row[3],
        item=row[4],
        payload=orjson.loads(row[5]),
        attempts=row[6],
    )


def _arms(
    dialect: str, exclude: frozenset[str] | None, quotas: Sequence[ClaimQuota], params: dict[str, Any]
) -> list[str]:
    """One ``SELECT id`` of pending jobs per group (or one for a plain claim), in id order, limited.

    A one-model group walks its model's pending jobs in id order (``kw_jobs_pending_model``). A group
    of several models walks all pending jobs in id order (``kw_jobs_pending``) and stops at ``n``: on
    SQLite the model test is kept off the indexes (``+``), so the planner never gathers every pending
    job of those models through the per-model index to sort them, once per claim."""
    base = "SELECT id FROM kw_jobs WHERE run = :run AND status = 'pending'"
    if exclude is not None:
        names = []
        for i, model in enumerate(sorted(exclude)):
            params[f"x{i}"] = model
            names.append(f":x{i}")
        excl = f" AND model_id NOT IN ({', '.join(names)})" if names else ""
        return [f"{base}{excl} ORDER BY id LIMIT :n"]
    arms = []
    for i, quota in enumerate(quotas):
        names = []
        for j, model in enumerate(sorted(quota.models)):
            params[f"m{i}_{j}"] = model
            names.append(f":m{i}_{j}")
        params[f"n{i}"] = quota.n
        if len(names) == 1:
            test = f"model_id = {names[0]}"
        else:
            test = f"{'+' if dialect == 'sqlite' else ''}model_id IN ({', '.join(names)})"
        arms.append(f"{base} AND {test} ORDER BY id LIMIT :n{i}")
    return arms


def claim_sql(
    dialect: str,
    now: str,
    params: dict[str, Any],
    *,
    exclude: frozenset[str] | None = None,
    quotas: Sequence[ClaimQuota] = (),
    bulk: bool = False,
) -> tuple[str, list[str]]:
    """The expiry statement and the claim's statements (one, or lease and read-after-commit when ``bulk``)."""
    arms = _arms(dialect, exclude, quotas, params)
    lease = (
        f"status = 'running', lease_owner = :w, lease_expires = {now} + :lease, updated_at = {now}, "
        "claim_key = :ck"
    )
    if dialect == "postgresql":
        return _postgres(arms, lease, now)
    # SQLite: BEGIN IMMEDIATE already serialises claims, so a plain subquery is exact.
    expire = (
        "UPDATE kw_jobs SET status = 'pending', lease_owner = NULL WHERE run = :run "
        f"AND status = 'running' AND lease_expires < {now}"
    )
    pending = arms[0] if len(arms) == 1 else " UNION ALL ".join(f"SELECT id FROM ({arm})" for arm in arms)
    if not bulk:
        return expire, [
            f"UPDATE kw_jobs SET {lease}, attempts = attempts + 1 WHERE run = :run AND id IN ({pending}) "
            f"RETURNING {JOB_COLUMNS}"
        ]
    # Lease, then read back what this claim leased (its key) after the commit: each statement yields
    # one row at most, as ``SqlQueue._bulk`` explains, where RETURNING would step once per job with the
    # write lock held; and the read takes no write lock at all.
    return expire, [
        f"UPDATE kw_jobs SET {lease}, attempts = attempts + 1 WHERE run = :run AND id IN ({pending})",
        f"SELECT json_group_array(json_array({JOB_COLUMNS})) FROM kw_jobs WHERE run = :run "
        "AND lease_owner = :w AND claim_key = :ck AND status = 'running'",
    ]


def _postgres(arms: list[str], lease: str, now: str) -> tuple[str, list[str]]:
    """PostgreSQL's statements: MATERIALIZED, so each CTE runs once and a claim takes at most n rows (a
    plain IN (subquery ... SKIP LOCKED) may be re-evaluated by the planner and take more). FOR UPDATE is
    not allowed in a UNION's arms, so each group is its own CTE and the union reads them."""
    expire = (
        "WITH gone AS MATERIALIZED (SELECT id FROM kw_jobs WHERE run = :run AND status = 'running' "
        f"AND lease_expires < {now} FOR UPDATE SKIP LOCKED) UPDATE kw_jobs j SET status = 'pending', "
        "lease_owner = NULL FROM gone WHERE j.run = :run AND j.id = gone.id"
    )
    if len(arms) == 1:
        ctes = f"picked AS MATERIALIZED ({arms[0]} FOR UPDATE SKIP LOCKED)"
    else:
        ctes = ", ".join(f"p{i} AS MATERIALIZED ({arm} FOR UPDATE SKIP LOCKED)" for i, arm in enumerate(arms))
        ctes += ", picked AS (" + " UNION ALL ".join(f"SELECT id FROM p{i}" for i in range(len(arms))) + ")"
    claim = (
        f"WITH {ctes} UPDATE kw_jobs j SET {lease}, attempts = j.attempts + 1 FROM picked "
        "WHERE j.run = :run AND j.id = picked.id RETURNING "
        + ", ".join(f"j.{c.strip()}" for c in JOB_COLUMNS.split(","))
    )
    return expire, [claim]
