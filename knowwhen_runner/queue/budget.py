"""A run's spending ledger: what each budget scope has spent and has reserved for calls in flight.

Every process of the run reserves a call's expected cost here before making it (refused when a cap
would be passed) and settles the actual cost after, so the caps hold across processes and machines
and an overshoot is bounded by what the calls in flight cost beyond their reservations. A mixin of
``SqlQueue``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from . import schema as s
from .engine import RunStatements, on_db_thread

__all__ = ["BudgetAsk", "BudgetTally", "ControlBudget"]


@dataclass(frozen=True, slots=True)
class BudgetAsk:
    """Reserve (or settle) ``usd`` and ``tokens`` against one scope, whose caps are ``cap_usd``/``cap_tokens``."""

    scope: str
    usd: float
    tokens: int
    cap_usd: float | None = None
    cap_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class BudgetTally:
    """One scope's spending: settled, reserved for calls in flight, and calls settled."""

    scope: str
    spent_usd: float
    reserved_usd: float
    spent_tokens: int
    reserved_tokens: int
    calls: int


def _over(row: BudgetTally, ask: BudgetAsk) -> bool:
    usd = ask.cap_usd is not None and row.spent_usd + row.reserved_usd + ask.usd > ask.cap_usd + 1e-12
    tok = ask.cap_tokens is not None and row.spent_tokens + row.reserved_tokens + ask.tokens > ask.cap_tokens
    return usd or tok


class ControlBudget(RunStatements):
    """Budget operations of ``SqlQueue``."""

    def _tally(self, conn: Connection, scope: str, *, lock: bool) -> BudgetTally:
        t = s.budget
        conn.execute(
            self._insert(t)
            .values(
                run=self.run,
                scope=scope,
                spent_usd=0.0,
                reserved_usd=0.0,
                spent_tokens=0,
                reserved_tokens=0,
                calls=0,
            )
            .on_conflict_do_nothing()
        )
        stmt = select(
            t.c.spent_usd, t.c.reserved_usd, t.c.spent_tokens, t.c.reserved_tokens, t.c.calls
        ).where(t.c.run == self.run, t.c.scope == scope)
        if lock and self._engine.dialect.name == "postgresql":
            stmt = stmt.with_for_update()
        row = conn.execute(stmt).one()
        return BudgetTally(scope, float(row[0]), float(row[1]), int(row[2]), int(row[3]), int(row[4]))

    @on_db_thread
    def budget_reserve(self, asks: list[BudgetAsk]) -> str | None:
        """Reserve every ask at once, or none: returns the first scope whose cap would be passed."""
        t = s.budget
        with self._engine.begin() as conn:
            for ask in sorted(asks, key=lambda a: a.scope):  # one lock order: no deadlocks
                if _over(self._tally(conn, ask.scope, lock=True), ask):
                    return ask.scope  # nothing reserved (the rows created empty are harmless)
            for ask in asks:
                conn.execute(
                    update(t)
                    .where(t.c.run == self.run, t.c.scope == ask.scope)
                    .values(
                        reserved_usd=t.c.reserved_usd + ask.usd,
                        reserved_tokens=t.c.reserved_tokens + ask.tokens,
                    )
                )
        return None

    @on_db_thread
    def budget_settle(self, reserved: list[BudgetAsk], actual_usd: float, actual_tokens: int) -> None:
        """Give back these reservations and count what the call really cost."""
        t = s.budget
        with self._engine.begin() as conn:
            for ask in sorted(reserved, key=lambda a: a.scope):
                conn.execute(
                    update(t)
                    .where(t.c.run == self.run, t.c.scope == ask.scope)
                    .values(
                        reserved_usd=t.c.reserved_usd - ask.usd,
                        reserved_tokens=t.c.reserved_tokens - ask.tokens,
                        spent_usd=t.c.spent_usd + actual_usd,
                        spent_tokens=t.c.spent_tokens + actual_tokens,
                        calls=t.c.calls + 1,
                    )
                )

    @on_db_thread
    def budget_tallies(self) -> list[BudgetTally]:
        """Every scope of this run's ledger."""
        t = s.budget
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(
                    t.c.scope,
                    t.c.spent_usd,
                    t.c.reserved_usd,
                    t.c.spent_tokens,
                    t.c.reserved_tokens,
                    t.c.calls,
                )
                .where(t.c.run == self.run)
                .order_by(t.c.scope)
            ).fetchall()
        return [BudgetTally(r[0], float(r[1]), float(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows]

    @on_db_thread
    def budget_forget_reservations(self) -> None:
        """Drop every reservation (a new run starts: the calls that held them are over)."""
        t = s.budget
        with self._engine.begin() as conn:
            conn.execute(update(t).where(t.c.run == self.run).values(reserved_usd=0.0, reserved_tokens=0))
