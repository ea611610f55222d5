"""The fleet's rate-limit ledger: request slots and requests in flight, kept in the run database.

When several processes work one run (PostgreSQL, or a SQLite file worked by ``--processes N``), a
model's limits must hold for all of them together, so they are kept where all of them look: here.
``provider.fleet_limiter.FleetLimiter`` is the only user.

Requests per minute are GCRA with no burst: ``kw_limits.next_slot`` is the earliest start of the key's
next request on the database clock. Reserving k requests is one ``UPDATE ... RETURNING`` that moves it
k intervals past ``max(next_slot, now)``; the caller owns the k start times in between, one interval
apart, so no two requests of the fleet start closer than an interval. A caller that will not use the
last of its starts gives them back (``give_back``): ``next_slot`` moves back to the first unused one,
if nobody reserved after them.
Learned limits (``kw_learned_limits``) are the adaptive controller's state per key (``provider.adaptive``):
a cut by a 429 is taken at most once per hold time fleet-wide, a raise only if nobody changed the row
since the raiser read it, and a stated limit (headers) always; the loser of a race adopts the winner's row.
Requests in flight are shares: each process holds a leased number of permits of a key's
``max_in_flight`` in ``kw_limit_holds``, asks for what it needs, gets its max-min fair share of what the
others do not hold, and loses the share if it stops renewing it (a killed process).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from sqlalchemy import Connection, text

from ..provider.adaptive import LearnedLimit
from .engine import DbClock, OnOneThread, make_engine, on_db_thread
from .outage import is_busy

__all__ = ["LimitLedger", "Reservation", "fair_shares"]

_LEARNED = "rpm, tpm, ceiling, source, changed_at, cut_at"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reservation:
    """``count`` request starts from ``start``, one interval apart, and the ledger's ``now`` (its clock).

    ``end`` is the key's ``next_slot`` as this reservation left it: ``give_back`` needs it unchanged.
    """

    start: float
    now: float
    end: float


def fair_shares(cap: int, wants: dict[str, int]) -> dict[str, int]:
    """Max-min fair split of ``cap`` permits: nobody gets more than it wants, the hungriest share the rest."""
    share = dict.fromkeys(wants, 0)
    left = cap
    hungry = sorted(h for h, w in wants.items() if w > 0)
    while left > 0 and hungry:
        each = max(1, left // len(hungry))
        for holder in list(hungry):
            give = min(each, wants[holder] - share[holder], left)
            share[holder] += give
            left -= give
            if share[holder] >= wants[holder]:
                hungry.remove(holder)
            if left == 0:
                break
    return share


class LimitLedger(OnOneThread):
    """Reservations and in-flight shares in one database; one per process, on its own connection."""

    _what = "rate-limit ledger: "

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine = make_engine(url, pool_size=1)
        self._clock = DbClock(self._engine.dialect.name)
        self._greatest = "GREATEST" if self._clock.server_side else "MAX"
        self._kept: Connection | None = None

    def _connection(self) -> Connection:
        """The ledger's one connection, kept open between statements.

        A request may wait for its slot's round trip, so a statement pays no pool checkout, liveness
        ping or per-transaction setting (a reservation on PostgreSQL took 1.0-1.2 ms so, 0.45 ms kept).
        Its commits do not wait for the disk: losing the last few milliseconds of reservations in a
        server crash costs nothing worth a flush per request (the fleet would at worst start a few
        requests one interval early, once).
        """
        if self._kept is None:
            conn = self._engine.connect()
            if self._clock.server_side:
                conn.exec_driver_sql("SET synchronous_commit TO OFF")
                conn.commit()
            self._kept = conn
        return self._kept

    def _forget_connection(self) -> None:
        conn, self._kept = self._kept, None
        if conn is not None:
            with suppress(Exception):  # a connection the server dropped may fail to close cleanly
                conn.close()

    @contextmanager
    def _begin(self) -> Iterator[Connection]:
        """One transaction on the kept connection; a failure drops it (the next call reconnects), but for
        SQLite's lock held by another process, which leaves it sound (``wait_for_lock`` runs it again)."""
        try:
            conn = self._connection()
            with conn.begin():
                yield conn
        except BaseException as exc:
            if not is_busy(exc):
                self._forget_connection()
            raise

    async def close(self) -> None:
        if self._limiter is None:
            self._forget_connection()
        else:  # after a statement still running on the ledger's thread, not beside it
            await anyio.to_thread.run_sync(self._forget_connection, limiter=self._limiter)
        await super().close()

    def _ensure_key(self, conn: Connection, key: str) -> None:
        conn.execute(
            text(
                "INSERT INTO kw_limits (key, next_slot, next_token) VALUES (:key, 0, 0) "
                "ON CONFLICT (key) DO NOTHING"
            ),
            {"key": key},
        )

    # -- requests per minute ----------------------------------------------------------------------------

    @on_db_thread
    def reserve(
        self,
        key: str,
        count: int,
        interval: float,
        *,
        tokens: int = 0,
        token_interval: float = 0.0,
        pause_until: float = 0.0,
    ) -> Reservation:
        """Reserve ``count`` request starts (and ``tokens`` of the token budget); none before ``pause_until``."""
        now = self._clock.sql
        base = f"{self._greatest}(next_slot, next_token, {now}, :pause)"
        stmt = text(
            f"UPDATE kw_limits SET next_slot = {base} + :k * :iv, next_token = {base} + :tok * :tiv "
            f"WHERE key = :key RETURNING next_slot, {now}"
        )
        params = {
            **self._clock.params(),
            "key": key,
            "k": count,
            "iv": interval,
            "tok": tokens,
            "tiv": token_interval,
            "pause": pause_until,
        }
        with self._begin() as conn:
            row = conn.execute(stmt, params).first()
            if row is None:
                self._ensure_key(conn, key)
                row = conn.execute(stmt, params).first()
        assert row is not None
        end = float(row[0])
        return Reservation(start=end - count * interval, now=float(row[1]), end=end)

    @on_db_thread
    def give_back(self, key: str, first: float, end: float) -> bool:
        """Give back the starts from ``first`` to a reservation's ``end``; False if others reserved after.

        The key's next start becomes ``first`` (or now, if later). Only the last reservation of a key
        can come back: starts reserved after it must keep their distance from what was used before.
        """
        now = self._clock.sql
        stmt = text(
            f"UPDATE kw_limits SET next_slot = {self._greatest}(:first, {now}) "
            "WHERE key = :key AND next_slot = :end"
        )
        params = {**self._clock.params(), "key": key, "first": first, "end": end}
        with self._begin() as conn:
            return conn.execute(stmt, params).rowcount > 0

    # -- requests in flight -----------------------------------------------------------------------------

    @on_db_thread
    def hold(self, key: str, holder: str, *, want: int, in_use: int, cap: int, ttl: float) -> int:
        """Renew this holder's share of ``cap`` for ``ttl`` s; returns how many permits it may use now.

        The share is the holder's fair share of ``cap`` given every holder's wants, but never what
        others still hold (they shrink to their own fair share when they renew). The row records at
        least ``in_use``: permits in use are given back as their requests end, not revoked.
        """
        now = self._clock.sql
        params: dict[str, Any] = {**self._clock.params(), "key": key, "h": holder, "ttl": ttl}
        with self._begin() as conn:
            self._ensure_key(conn, key)
            lock = " FOR UPDATE" if self._clock.server_side else ""  # SQLite: BEGIN IMMEDIATE is the lock
            conn.execute(text(f"SELECT key FROM kw_limits WHERE key = :key{lock}"), params)
            conn.execute(text(f"DELETE FROM kw_limit_holds WHERE key = :key AND expires < {now}"), params)
            others = conn.execute(
                text("SELECT holder, permits, wants FROM kw_limit_holds WHERE key = :key AND holder <> :h"),
                params,
            ).fetchall()
            held = sum(r[1] for r in others)
            shares = fair_shares(cap, {**{r[0]: r[2] for r in others}, holder: want})
            share = max(0, min(shares[holder], cap - held))
            permits = max(share, in_use)
            if permits == 0 and want == 0:
                conn.execute(text("DELETE FROM kw_limit_holds WHERE key = :key AND holder = :h"), params)
                return 0
            conn.execute(
                text(
                    "INSERT INTO kw_limit_holds (key, holder, permits, wants, expires) "
                    f"VALUES (:key, :h, :p, :w, {now} + :ttl) ON CONFLICT (key, holder) DO UPDATE SET "
                    "permits = excluded.permits, wants = excluded.wants, expires = excluded.expires"
                ),
                {**params, "p": permits, "w": want},
            )
        return int(share)

    # -- learned limits ---------------------------------------------------------------------------------

    @on_db_thread
    def learned(self) -> dict[str, LearnedLimit]:
        """Every key's learned limits."""
        with self._begin() as conn:
            rows = conn.execute(text(f"SELECT key, {_LEARNED} FROM kw_learned_limits")).fetchall()
        return {row[0]: _learned_limit(row[1:]) for row in rows}

    @on_db_thread
    def learn(self, key: str, state: LearnedLimit, how: str, *, seen: float, hold_s: float) -> LearnedLimit:
        """Record a change of a key's learned limits; returns the row as the fleet now has it.

        ``how``: ``"cut"`` (a 429; taken unless another cut came within ``hold_s``), ``"raise"`` (taken
        only if the row did not change after ``seen``, when the raiser read it) or ``"set"`` (always).
        """
        values = {
            "key": key,
            "rpm": state.rpm,
            "tpm": state.tpm,
            "ceiling": state.ceiling,
            "source": state.source,
            "changed_at": state.changed_at,
            "cut_at": state.cut_at,
        }
        where = {
            "cut": "kw_learned_limits.cut_at < :cut_at - :hold",
            "raise": "kw_learned_limits.changed_at <= :seen",
            "set": "1 = 1",
        }[how]
        with self._begin() as conn:
            conn.execute(
                text(
                    f"INSERT INTO kw_learned_limits (key, {_LEARNED}) VALUES "
                    "(:key, :rpm, :tpm, :ceiling, :source, :changed_at, :cut_at) ON CONFLICT (key) DO UPDATE SET "
                    "rpm = excluded.rpm, tpm = excluded.tpm, ceiling = excluded.ceiling, "
                    "source = excluded.source, changed_at = excluded.changed_at, cut_at = excluded.cut_at "
                    f"WHERE {where}"
                ),
                {**values, "hold": hold_s, "seen": seen},
            )
            row = conn.execute(
                text(f"SELECT {_LEARNED} FROM kw_learned_limits WHERE key = :key"), {"key": key}
            ).first()
        assert row is not None
        return _learned_limit(row)

    @on_db_thread
    def drop(self, holder: str) -> None:
        """Give back every share this holder has (a process that is done)."""
        with self._begin() as conn:
            conn.execute(text("DELETE FROM kw_limit_holds WHERE holder = :h"), {"h": holder})


def _learned_limit(row: Any) -> LearnedLimit:
    rpm, tpm, ceiling, source, changed_at, cut_at = row
    return LearnedLimit(
        rpm=float(rpm),
        tpm=None if tpm is None else float(tpm),
        ceiling=None if ceiling is None else float(ceiling),
        source=source,
        changed_at=float(changed_at),
        cut_at=float(cut_at),
    )
