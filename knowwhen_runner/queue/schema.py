"""Tables of a run database (SQLite or PostgreSQL), and its schema version.

A database holds any number of runs (keyed by run name) and the rate-limit ledger shared by every
process that calls the same provider through it. (The response cache has its own tables: ``cache/``;
databases of earlier releases also hold ``kw_cache``, which ``cache/`` reads and empties.)
``SCHEMA_VERSION`` changes whenever a table or what its values mean changes; a database of an older
version is upgraded in place when ``MIGRATIONS`` knows how (``engine.ensure_schema``), else refused, as
is one of a newer version.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    inspect,
    text,
)

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "attempts",
    "batches",
    "budget",
    "items",
    "jobs",
    "learned_limits",
    "limit_holds",
    "limits",
    "meta",
    "metadata",
    "model_controls",
    "runs",
    "workers",
]

# 2: kw_runs.finalized_at/finalized_by (finalise once per fleet), kw_limits and kw_limit_holds.
# 3: kw_jobs.status may be aside:<status>, a job of an earlier plan (an older release would work and
#    finalise it). No table changes, so a version-2 database is upgraded by writing the new number.
# 4: kw_batches (provider batches and their jobs); created by ``create_all``, nothing else changes.
# 5: kw_model_controls (a run's quarantined and paused models) and kw_budget (what a run spent and has
#    reserved per budget scope); created by ``create_all`` on upgrade.
# 6: kw_learned_limits (limits found by the adaptive controller, kept for the next run); created by
#    ``create_all`` on upgrade.
# 7: kw_jobs_pending_model, an index of pending jobs by model: a claim per model (``claim_each``)
#    finds a model's few jobs among many of others' without walking past them.
# 8: kw_jobs.claim_key, the claim that leased a running job: a claim sent again because its reply was
#    lost (the database went away after its commit) returns the jobs the first one leased.
# 9: kw_jobs_done_at, an index of done jobs by when they were done: the jobs done lately (pace, ETA,
#    and what ``status`` adds to each model's kept sums) are found without walking past the others.
# 10: kw_jobs.draw, the claim order of a screened job (its task's place in the order drawn for the screen,
#     counted from -tasks; 0 for every other job): claims take pending jobs by (draw, id), so a screened
#     model answers its tasks in the drawn order, before its other jobs. The pending indexes gain it.
# 11: kw_jobs_owner holds leased jobs only (lease_owner set): pending and done jobs have none, and kept
#    under NULL they made every claim and every completion rewrite a page of that index per job.
# 12: kw_jobs.cost_usd, called and cache_hit, a job's part of its model's tally (``tallies.tally_values``
#     of its result: what it spent, 1 if it made a call, 1 if it was a cache hit; 0 without a result),
#     written with the result; kw_jobs_tally, an index of done jobs that holds them, so each model's sums
#     read that index alone, never a result. An upgrade computes them from the results once.
SCHEMA_VERSION = 12
_DONE_AT = "CREATE INDEX IF NOT EXISTS kw_jobs_done_at ON kw_jobs (run, updated_at) WHERE status = 'done'"
_PENDING_BY_MODEL = (
    "CREATE INDEX IF NOT EXISTS kw_jobs_pending_model ON kw_jobs (run, model_id, id) WHERE status = 'pending'"
)
_DRAWN_PENDING = (
    "DROP INDEX IF EXISTS kw_jobs_pending",
    "DROP INDEX IF EXISTS kw_jobs_pending_model",
    "CREATE INDEX IF NOT EXISTS kw_jobs_pending ON kw_jobs (run, draw, id) WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS kw_jobs_pending_model ON kw_jobs (run, model_id, draw, id) "
    "WHERE status = 'pending'",
)


_LEASED = "CREATE INDEX IF NOT EXISTS kw_jobs_owner ON kw_jobs (lease_owner) WHERE lease_owner IS NOT NULL"


def _add_claim_key(conn: Connection) -> None:
    if "claim_key" not in {c["name"] for c in inspect(conn).get_columns("kw_jobs")}:
        conn.execute(text("ALTER TABLE kw_jobs ADD COLUMN claim_key VARCHAR(32)"))


_TALLY = (
    "CREATE INDEX IF NOT EXISTS kw_jobs_tally ON kw_jobs "
    "(run, status, model_id, scenario, cost_usd, called, cache_hit, updated_at) WHERE status = 'done'"
)
# A result's tally values in SQL, as ``tallies.tally_values`` computes them (an upgrade's one pass over the
# results): what it spent, nothing for a cache hit, an episode's ``spent_usd`` parts added, else its
# ``cost_usd`` (a number, or an object of parts whose numbers are added); a call when the result is not
# empty and not a cache hit.
_SQLITE_TALLY = (
    "UPDATE kw_jobs SET cost_usd = CASE WHEN json_extract(result, '$.cache_hit') THEN 0 "
    "WHEN json_type(result, '$.spent_usd') = 'object' THEN (SELECT "
    "total(value) FROM json_each(result, '$.spent_usd') WHERE type IN ('integer', 'real')) "
    "ELSE CASE json_type(result, '$.cost_usd') WHEN 'object' THEN (SELECT "
    "total(value) FROM json_each(result, '$.cost_usd') WHERE type IN ('integer', 'real')) "
    "WHEN 'real' THEN json_extract(result, '$.cost_usd') WHEN 'integer' THEN json_extract(result, '$.cost_usd') "
    "ELSE 0 END END, cache_hit = CASE WHEN json_extract(result, '$.cache_hit') THEN 1 ELSE 0 END, "
    "called = CASE WHEN result = '{}' OR json_extract(result, '$.cache_hit') THEN 0 ELSE 1 END "
    "WHERE result IS NOT NULL"
)
_NUMBER = r"'^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'"
_POSTGRES_TALLY = (
    "UPDATE kw_jobs SET cost_usd = CASE WHEN x.h IN ('true', '1') THEN 0 "
    "WHEN json_typeof(x.s) = 'object' THEN (SELECT "
    f"coalesce(sum(value::float8), 0) FROM json_each_text(x.s) WHERE value ~ {_NUMBER}) "
    "ELSE CASE json_typeof(x.c) WHEN 'object' THEN (SELECT "
    f"coalesce(sum(value::float8), 0) FROM json_each_text(x.c) WHERE value ~ {_NUMBER}) "
    "WHEN 'number' THEN (x.c #>> '{}')::float8 ELSE 0 END END, "
    "cache_hit = CASE WHEN x.h IN ('true', '1') THEN 1 ELSE 0 END, "
    "called = CASE WHEN x.empty OR x.h IN ('true', '1') THEN 0 ELSE 1 END "
    "FROM (SELECT run, id, result::json -> 'cost_usd' AS c, result::json -> 'spent_usd' AS s, "
    "result::json ->> 'cache_hit' AS h, "
    "result::jsonb = '{}'::jsonb AS empty FROM kw_jobs WHERE result IS NOT NULL) AS x "
    "WHERE kw_jobs.run = x.run AND kw_jobs.id = x.id"
)


def _add_tally_columns(conn: Connection) -> None:
    have = {c["name"] for c in inspect(conn).get_columns("kw_jobs")}
    for name, kind in (("cost_usd", "FLOAT"), ("called", "INTEGER"), ("cache_hit", "INTEGER")):
        if name not in have:
            conn.execute(text(f"ALTER TABLE kw_jobs ADD COLUMN {name} {kind} NOT NULL DEFAULT 0"))
    conn.execute(text(_POSTGRES_TALLY if conn.dialect.name == "postgresql" else _SQLITE_TALLY))
    conn.execute(text(_TALLY))
    conn.execute(text("DELETE FROM kw_meta WHERE key LIKE 'tally:%'"))  # kept sums: summed again from these


def _add_draw(conn: Connection) -> None:
    if "draw" not in {c["name"] for c in inspect(conn).get_columns("kw_jobs")}:
        conn.execute(text("ALTER TABLE kw_jobs ADD COLUMN draw INTEGER NOT NULL DEFAULT 0"))


MIGRATIONS: dict[int, tuple[str | Callable[[Connection], None], ...]] = {
    2: (),
    3: (),
    4: (),
    5: (),
    6: (_PENDING_BY_MODEL,),
    7: (_add_claim_key,),
    8: (_DONE_AT,),
    9: (_add_draw, *_DRAWN_PENDING),
    10: ("DROP INDEX IF EXISTS kw_jobs_owner", _LEASED),
    11: (_add_tally_columns,),
}
"""Older version -> the statements (or steps) that bring its tables to the next version (run in one
transaction)."""

metadata = MetaData()

meta = Table(
    "kw_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "kw_runs",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("config_text", Text, nullable=False),
    Column("meta", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    # Set by the one process that finalises the run once every job is finished; cleared when jobs are
    # added or re-queued, so the run is finalised again after more work.
    Column("finalized_at", Float),
    Column("finalized_by", String(128)),
)

items = Table(
    "kw_items",
    metadata,
    Column("run", String(64), nullable=False),
    Column("scenario", String(64), nullable=False),
    Column("item", String(128), nullable=False),
    Column("payload", Text, nullable=False),
    PrimaryKeyConstraint("run", "scenario", "item"),
)

jobs = Table(
    "kw_jobs",
    metadata,
    Column("run", String(64), nullable=False),
    Column("id", String(64), nullable=False),
    Column("model_id", String(64), nullable=False),
    Column("mode", String(16), nullable=False),
    Column("scenario", String(64), nullable=False),
    Column("item", String(128), nullable=False),
    Column("payload", Text, nullable=False),
    Column("status", String(16), nullable=False, server_default="pending"),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("lease_owner", String(128)),
    Column("lease_expires", Float),
    Column("claim_key", String(32)),  # the claim that leased it (a claim sent again finds its jobs)
    Column("draw", Integer, nullable=False, server_default="0"),  # claim order: a screened job's drawn place
    # The job's part of its model's tally, written with its result (``tallies.tally_values``): 0 without one.
    Column("cost_usd", Float, nullable=False, server_default="0"),
    Column("called", Integer, nullable=False, server_default="0"),
    Column("cache_hit", Integer, nullable=False, server_default="0"),
    Column("result", Text),
    Column("error", Text),
    Column("updated_at", Float),
    PrimaryKeyConstraint("run", "id"),
    Index("kw_jobs_status", "run", "status"),
    # PostgreSQL: keep claims flat as finished rows pile up (a plain (status, id) index scans past them).
    Index(
        "kw_jobs_pending",
        "run",
        "draw",
        "id",
        postgresql_where=text("status = 'pending'"),
        sqlite_where=text("status = 'pending'"),
    ),
    Index(
        "kw_jobs_pending_model",
        "run",
        "model_id",
        "draw",
        "id",
        postgresql_where=text("status = 'pending'"),
        sqlite_where=text("status = 'pending'"),
    ),
    Index(
        "kw_jobs_owner",
        "lease_owner",
        postgresql_where=text("lease_owner IS NOT NULL"),
        sqlite_where=text("lease_owner IS NOT NULL"),
    ),
    Index(
        "kw_jobs_done_at",
        "run",
        "updated_at",
        postgresql_where=text("status = 'done'"),
        sqlite_where=text("status = 'done'"),
    ),
    # Each model's done jobs with what they recorded: its sums (``tallies``) read this index alone (status
    # is in it so that a query naming it is covered; updated_at too, for the kept sums' cut).
    Index(
        "kw_jobs_tally",
        "run",
        "status",
        "model_id",
        "scenario",
        "cost_usd",
        "called",
        "cache_hit",
        "updated_at",
        postgresql_where=text("status = 'done'"),
        sqlite_where=text("status = 'done'"),
    ),
)

attempts = Table(
    "kw_attempts",
    metadata,
    Column("run", String(64), nullable=False),
    Column("job_id", String(64), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("worker", String(128), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("error", Text, nullable=False),
    Column("at", Float, nullable=False),
    Index("kw_attempts_job", "run", "job_id"),
)

workers = Table(
    "kw_workers",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("run", String(64), nullable=False),
    Column("host", String(256), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("jobs_done", Integer, nullable=False, server_default="0"),
    Column("stopped_at", Float),
)

# Fleet-wide rate limits, one row per limit key (provider + model + a digest of base and key variable, or
# a group: ``ModelSpec.limit_key``).
# ``next_slot`` is the GCRA "theoretical arrival time" in database-clock seconds: reserving k requests
# moves it k intervals on; ``next_token`` does the same for tokens per minute.
limits = Table(
    "kw_limits",
    metadata,
    Column("key", String(512), primary_key=True),
    Column("next_slot", Float, nullable=False),
    Column("next_token", Float, nullable=False),
)

# Fleet-wide requests in flight: each process holds a leased share of a key's max_in_flight.
limit_holds = Table(
    "kw_limit_holds",
    metadata,
    Column("key", String(512), nullable=False),
    Column("holder", String(128), nullable=False),
    Column("permits", Integer, nullable=False),
    Column("wants", Integer, nullable=False),
    Column("expires", Float, nullable=False),
    PrimaryKeyConstraint("key", "holder"),
)

# Limits learned for limit keys the config gives no requests-per-minute for (``provider.adaptive``): one
# row per key, shared by the fleet and kept for the next run of this database. Times are wall-clock seconds.
learned_limits = Table(
    "kw_learned_limits",
    metadata,
    Column("key", String(512), primary_key=True),
    Column("rpm", Float, nullable=False),
    Column("tpm", Float),
    Column("ceiling", Float),
    Column("source", String(16), nullable=False),
    Column("changed_at", Float, nullable=False),
    Column("cut_at", Float, nullable=False),
)

# Provider batches (Batch APIs): one row per batch, written before the provider is asked to create it, so
# a process that dies at any point leaves a row that the next poller resumes instead of submitting again.
# Its jobs stay ``running`` with ``lease_owner = 'batch:<key>'`` and a lease no claim expires.
batches = Table(
    "kw_batches",
    metadata,
    Column("run", String(64), nullable=False),
    Column("key", String(64), nullable=False),
    Column("model_id", String(64), nullable=False),
    Column("provider_id", String(256)),
    Column("status", String(16), nullable=False),
    Column("job_ids", Text, nullable=False),
    Column("owner", String(128)),
    Column("lease_expires", Float, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("counts", Text, nullable=False, server_default="{}"),
    Column("error", Text),
    PrimaryKeyConstraint("run", "key"),
    Index("kw_batches_status", "run", "status"),
)

# A run's models held back from claims: quarantined (a fatal provider error; cleared when the run starts
# again) or paused by hand (``knowwhen pause``/``resume``). Every worker of the fleet reads these rows.
model_controls = Table(
    "kw_model_controls",
    metadata,
    Column("run", String(64), nullable=False),
    Column("model_id", String(64), nullable=False),
    Column("state", String(16), nullable=False),
    Column("reason", Text, nullable=False),
    Column("since", Float, nullable=False),
    PrimaryKeyConstraint("run", "model_id", "state"),
)

# What a run has spent and has reserved for calls in flight, per budget scope ("run", "model:<id>",
# "group:<name>"). A call reserves its expected cost before it is made and settles its actual cost after.
budget = Table(
    "kw_budget",
    metadata,
    Column("run", String(64), nullable=False),
    Column("scope", String(200), nullable=False),
    Column("spent_usd", Float, nullable=False),
    Column("reserved_usd", Float, nullable=False),
    Column("spent_tokens", Integer, nullable=False),
    Column("reserved_tokens", Integer, nullable=False),
    Column("calls", Integer, nullable=False),
    PrimaryKeyConstraint("run", "scope"),
)
