"""Each model's tally (jobs per status, what they spent, calls and cache hits), counted by the database.

``status`` and the live view show one row per model; reading every job's result into Python for it costs
time that follows the whole plan (a million-job run's results are gigabytes). A job's part of its tally is
written beside its result, in plain columns (``tally_values``: cost, call, cache hit), and
``model_tallies()`` asks the database for the sums of those columns, grouped by model, status and
scenario: the done jobs' sums read one index (``kw_jobs_tally``), never a result. ``TallyTables`` is a
part of ``SqlQueue``; ``tallies_of`` does the same over results read whole (what the tests check it by).
Set-aside jobs are counted under ``set_aside`` only (their results are the record of an earlier plan, not
this one's spending); a job counts as a call when it has a result that is not a cache hit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from sqlalchemy import text

from ..jobs import job_spend
from . import schema as s
from .engine import RunStatements, on_db_thread
from .roles import ModelTally

__all__ = ["BY_TIME", "TallyTables", "kept_key", "tallies_of", "tally_values"]


def tally_values(result: Mapping[str, Any] | None) -> tuple[float, int, int]:
    """A job's part of its model's tally, from its result: what it spent (``job_spend``: a cache hit
    spends nothing), 1 if it made a call (a result that is not a cache hit), 1 if it was a cache hit;
    nothing without a result. Written to ``kw_jobs`` (``cost_usd``, ``called``, ``cache_hit``) with the
    result, by every writer of one."""
    if not result:
        return 0.0, 0, 0
    hit = bool(result.get("cache_hit"))
    return job_spend(result), int(not hit), int(hit)


def tallies_of(rows: Iterable[tuple[Any, ...]]) -> dict[str, ModelTally]:
    """Tallies of (model id, status, result[, scenario]) rows of the run, by model id."""
    out: dict[str, ModelTally] = {}
    for model_id, status, result, *scenario in rows:
        tally = out.setdefault(model_id, ModelTally(model_id))
        tally.add(status, 1, *tally_values(result), *scenario[:1])
    return dict(sorted(out.items()))


# Each group's count and sums of the columns its results wrote. A set-aside job adds its count alone (its
# row's columns are not read: on SQLite they follow the result in a row of a database upgraded in place).
_SUMS = (
    "SELECT model_id, status, scenario, count(*), sum(cost_usd), sum(called), sum(cache_hit) "
    "FROM kw_jobs{by} WHERE run = :run AND {where} GROUP BY model_id, status, scenario"
)
_COUNTS = (
    "SELECT model_id, status, scenario, count(*), 0, 0, 0 "
    "FROM kw_jobs WHERE run = :run AND {where} GROUP BY model_id, status, scenario"
)
# Done jobs never change (a set-aside one changes status, and setting aside forgets the kept sums), so
# each model's done jobs up to a moment are summed once and kept in kw_meta; ``status`` then adds what
# was done since (an index of done jobs by time), the open and failed jobs (the status index) and the
# set-aside ones: its cost follows the work left and the work done lately, not the plan. (The first sum
# reads ``kw_jobs_tally`` alone: about 0.3 s of CPU for 1.5M done jobs on SQLite.)
_SETTLED_S = 300.0  # done longer ago than this: no transaction still in flight records one older
_REFRESH_S = 600.0  # kept sums older than this are summed again (what is added to them stays small)
_KEEP_FROM = 5000  # done jobs: below this, summing them each time costs less than a write (and a status
# of a small run stays read-only, as a damaged file asks)
_SETTLED = "status = 'done' AND (updated_at IS NULL OR updated_at <= :upto)"
_LATELY = "status = 'done' AND updated_at > :upto"
_BETWEEN = "status = 'done' AND updated_at > :since AND updated_at <= :upto"
_OPEN = "status IN ('pending', 'running', 'failed')"
_ASIDE = "status > 'aside:' AND status < 'aside;'"  # every 'aside:...' status, by index range
# SQLite without statistics prefers ``kw_jobs_tally`` (it covers the query) to a range of the index of
# done jobs by time, and so reads every done job of the run for the few done lately: told which to use.
BY_TIME = " INDEXED BY kw_jobs_done_at"


_KEPT = text("SELECT value FROM kw_meta WHERE key = :k")


def kept_key(run: str) -> str:
    """The kw_meta key of a run's kept sums (forgotten whenever jobs are set aside or brought back)."""
    return "tally:" + hashlib.sha256(run.encode()).hexdigest()[:40]


class TallyTables(RunStatements):
    """``model_tallies`` of ``SqlQueue``."""

    def _sums(self, conn: Any, where: str, params: dict[str, Any], into: dict[str, ModelTally]) -> None:
        by = BY_TIME if self.dialect == "sqlite" and where in (_LATELY, _BETWEEN) else ""
        sql = (_COUNTS if where == _ASIDE else _SUMS).format(where=where, by=by)
        rows = conn.execute(text(sql), {"run": self.run, **params})
        for model_id, status, scenario, n, cost, calls, hits in rows:
            tally = into.setdefault(model_id, ModelTally(model_id))
            tally.add(status, int(n), float(cost or 0.0), int(calls or 0), int(hits or 0), scenario)

    @on_db_thread
    def model_tallies(self) -> dict[str, ModelTally]:
        """Each model's jobs of the plan per status, recorded cost, calls and cache hits (by model id)."""
        key = kept_key(self.run)
        with self._reading() as conn:
            now = float(conn.execute(text(f"SELECT {self._clock.sql}"), self._clock.params()).scalar_one())
            raw = conn.execute(_KEPT, {"k": key}).scalar()
        kept = orjson.loads(raw) if raw else None
        if kept is not None and "scenarios" not in kept:
            kept = None  # kept by a release that summed no scenarios: summed again, once
        if kept is None or now - kept["upto"] > _SETTLED_S + _REFRESH_S:
            kept = self._keep(key, now - _SETTLED_S, kept)
        out = _from_kept(kept)
        with self._reading() as conn:
            for where in (_LATELY, _OPEN, _ASIDE):
                self._sums(conn, where, {"upto": kept["upto"]}, out)
        return dict(sorted(out.items()))

    def _keep(self, key: str, upto: float, earlier: dict[str, Any] | None) -> dict[str, Any]:
        """Sum each model's jobs done up to ``upto`` and keep the sums: every done job the first time,
        then only those done since the ``earlier`` sums (the index of done jobs by time finds them)."""
        found = _from_kept(earlier or {"models": {}, "scenarios": {}})
        with self._engine.begin() as conn:
            if earlier is not None and conn.execute(_KEPT, {"k": key}).scalar() is None:
                earlier, found = None, {}  # set aside since it was read: sum every done job again
            if earlier is None:
                self._sums(conn, _SETTLED, {"upto": upto}, found)
            else:
                self._sums(conn, _BETWEEN, {"since": earlier["upto"], "upto": upto}, found)
            kept = {
                "upto": upto,
                "models": {
                    m: [t.statuses.get("done", 0), t.cost_usd, t.calls, t.cache_hits]
                    for m, t in found.items()
                },
                "scenarios": {
                    m: {sc: c.get("done", 0) for sc, c in t.scenarios.items()} for m, t in found.items()
                },
            }
            if earlier is None and sum(t.statuses.get("done", 0) for t in found.values()) < _KEEP_FROM:
                return kept  # not kept: cheaper to sum again next time
            stmt = self._insert(s.meta).values(key=key, value=orjson.dumps(kept).decode())
            conn.execute(
                stmt.on_conflict_do_update(index_elements=["key"], set_={"value": stmt.excluded.value})
            )
        return kept


def _from_kept(kept: dict[str, Any]) -> dict[str, ModelTally]:
    """Each model's done jobs (in all and per scenario), cost, calls and cache hits, as kept."""
    scenarios = kept["scenarios"]
    return {
        m: ModelTally(
            m, {"done": n}, cost, calls, hits, {sc: {"done": k} for sc, k in scenarios.get(m, {}).items()}
        )
        for m, (n, cost, calls, hits) in kept["models"].items()
    }
