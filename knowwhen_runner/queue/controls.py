"""Models a run holds back from claims: quarantined by a fatal provider error, paused by hand, or screened
out (a screen settled that the model is not kept); and models a process has set aside.

Rows live in the run database (``kw_model_controls``) so every worker of the fleet, on any machine,
obeys them: workers read them every few seconds and stop claiming the model's jobs, which stay pending.
A ``set_aside`` row only tells: a process's sequential test says the model's requests surely fail
(``provider/failing.py``), and ``status``, the live view and the hooks name it; each process runs its own
test and probes, so no process holds back on another's row (``HOLDING_STATES`` are those obeyed). The
last process to set the model aside writes its cause; a probe answered clears the row.
A mixin of ``SqlQueue`` (it uses the queue's ``_call``, ``_engine``, ``_insert`` and ``_clock``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import delete, select, update

from ..redaction import redact
from . import schema as s
from .engine import RunStatements, on_db_thread

__all__ = ["CONTROL_STATES", "HOLDING_STATES", "ControlState", "ControlTables", "ModelControl", "state_words"]

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


class ControlTables(RunStatements):
    """Quarantine and pause rows of ``SqlQueue``."""

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
