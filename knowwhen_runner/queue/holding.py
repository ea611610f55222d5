"""What holds a model's work back for every process: controls and budgets, in the run database.

Controls: models a run holds back from claims, quarantined by a fatal provider error, paused by hand, or
screened out (a screen settled that the model is not kept); and models a process has set aside. Rows
live in ``kw_model_controls`` so every worker of the fleet, on any machine, obeys them: workers read them
every few seconds and stop claiming the model's jobs, which stay pending. A ``set_aside`` row only
tells: a process's sequential test says the model's requests surely fail (``provider/failing.py``), and
``status``, the live view and the hooks name it; each process runs its own test and probes, so no process
holds back on another's row (``HOLDING_STATES`` are those obeyed). The last process to set the model
aside writes its cause; a probe answered clears the row.

Budgets: what each budget scope has spent and has reserved for calls in flight. Every process of the run
reserves a call's expected cost here before making it (refused when a cap would be passed) and settles
the actual cost after, so the caps hold across processes and machines and an overshoot is bounded by what
the calls in flight cost beyond their reservations.

``HoldingTables`` is the store (``SqlQueue.holding``), over the queue's ``RunDatabase``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection

from ..redaction import redact
from . import schema as s
from .engine import RunStatements, on_db_thread

__all__ = [
    "CONTROL_STATES",
    "HOLDING_STATES",
    "BudgetAsk",
    "BudgetTally",
    "ControlState",
    "HoldingTables",
    "ModelControl",
    "state_words",
]

ControlState = Literal["quarantined", "paused", "screened", "set_aside"]
CONTROL_STATES: tuple[str, ...] = ("quarantined", "paused", "screened", "set_aside")
HOLDING_STATES: frozenset[str] = frozenset({"quarantined", "paused", "screened"})
"""The states every worker obeys (it claims none of the model's jobs); ``set_aside`` only tells."""


def state_words(state: str) -> str:
    """A state as a sentence says it (``set_aside``: "set aside")."""
    return state.replace("_", " ")


@dataclass(frozen=True, slots=True)
class ModelControl:
    """One model held back: why (one sentence saying what to fix) and since when (epoch seconds)."""

    model_id: str
    state: ControlState
    reason: str
    since: float


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


class HoldingTables(RunStatements):
    """The controls and the budget ledger of a run (the ``HoldingBack`` role)."""

    # -- controls -------------------------------------------------------------------------------------

    @on_db_thread
    def set_control(self, model_id: str, state: ControlState, reason: str, *, replace: bool = False) -> bool:
        """Hold ``model_id`` back; False when it already was in this state (the first reason stays, or with
        ``replace`` the last: its reason and since are this call's)."""
        reason = redact(reason)
        row = {"run": self.run, "model_id": model_id, "state": state, "reason": reason, "since": time.time()}
        t = s.model_controls
        with self._engine.begin() as conn:
            stmt = self._insert(t).values(**row).on_conflict_do_nothing()
            added = conn.execute(stmt.returning(t.c.model_id)).first()
            if added is None and replace:
                mine = (t.c.run == self.run) & (t.c.model_id == model_id) & (t.c.state == state)
                conn.execute(update(t).where(mine).values(reason=reason, since=row["since"]))
        return added is not None

    @on_db_thread
    def clear_controls(self, state: ControlState, model_id: str | None = None) -> int:
        """Let the run claim these models' jobs again (every model held in ``state`` when None)."""
        t = s.model_controls
        stmt = delete(t).where(t.c.run == self.run, t.c.state == state)
        if model_id is not None:
            stmt = stmt.where(t.c.model_id == model_id)
        with self._engine.begin() as conn:
            cleared = int(conn.execute(stmt).rowcount or 0)
            if cleared and state == "screened":  # their pending jobs are open again: finalise once more
                runs = s.runs
                conn.execute(
                    update(runs).where(runs.c.name == self.run).values(finalized_at=None, finalized_by=None)
                )
            return cleared

    @on_db_thread
    def controls(self) -> list[ModelControl]:
        """Every model this run holds back, oldest first."""
        t = s.model_controls
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(t.c.model_id, t.c.state, t.c.reason, t.c.since)
                .where(t.c.run == self.run)
                .order_by(t.c.since, t.c.model_id)
            ).fetchall()
        return [ModelControl(r[0], r[1], r[2], float(r[3])) for r in rows]

    # -- budget ---------------------------------------------------------------------------------------

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
