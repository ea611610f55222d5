"""A run's stages: plan each into the queue, or find its plan already there (``plan.stamp``).

Gated episodes wait for a fitted τ, so a run plans in stages: what can be planned now, then what the
fits from finished jobs release. Any process of the fleet (``run`` or ``worker``) may find a later stage's
inputs complete; the stage is planned once fleet-wide: ``Queue.take_stage`` names the one process that
plans it, and the others wait for its plan (``_STAGE_WAIT_S`` at most, then plan it themselves: planning
is idempotent, so a planner that died half-way costs nothing but the wait).

A config changed since the last plan is re-planned cell by cell (``plan.cells``): the cells whose stamps
differ from those kept with the run are planned, the cells gone are set aside, the others are left alone.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Set as AbstractSet
from typing import Any, NamedTuple

import anyio

from ..cache import CacheStore
from ..config import SweepConfig
from ..jobs import WHOLE_RUN, Cell, Items
from ..plan import Grid, cell_stamps, cells_of, expand, notes_stamps, plan_stamp
from ..plan.draws import draw_places, order_unit
from ..provider import CacheMode, preload_litellm_for
from ..queue import Queue
from ..scenarios import Scenario, load_scenario
from ..work.calls import question_call

__all__ = ["Stages"]


_KEEP_STAMPS = 16  # plans remembered per run (a config edited back and forth finds its plan again)
_STAGE_WAIT_S = 60.0  # how long a process waits for the one planning a later stage


class Stages:
    """Plans a run's stages into its queue, or finds a stage's plan already there (``plan_stamp``)."""

    def __init__(
        self,
        config: SweepConfig,
        queue: Queue,
        meta: dict[str, Any],
        *,
        cache: CacheStore | None,
        work: bool = True,
        who: str | None = None,
    ) -> None:
        self.config, self.queue, self.cache, self.work = config, queue, cache, work
        self.who = who or uuid.uuid4().hex
        self.known: dict[str, Any] = dict(meta.get("plans") or {})
        # The queue holds one config's plan at a time (jobs of an earlier one are set aside): a kept
        # stamp is a fast path only while the config it came from is the one the queue holds.
        self.live, self.config_stamp = meta.get("live_plan"), plan_stamp(config, None)
        self.drawn: dict[str, Any] | None = meta.get("screen_draws")  # the screen whose order the jobs have
        self.scenarios: dict[str, Scenario] | None = None
        self.items: Items | None = None
        self.planned = self.added = 0
        self.skipped: list[str] = []
        # The live plan's cells (stamp, jobs) and each scenario's notes (stamp, notes), as kept with the
        # run; None for a run planned by a release that kept none (it is planned whole once more).
        kept = meta.get("cells") if self.live is not None else None
        self.cells: dict[Cell, tuple[str, int]] | None = (
            {Cell(sc, m, mode): (st, n) for sc, m, mode, st, n in kept} if kept is not None else None
        )
        self.notes: dict[str, tuple[str, list[str]]] = {
            sid: (st, list(notes)) for sid, (st, notes) in (meta.get("cell_notes") or {}).items()
        }

    async def plan(self, fits: dict[str, Any] | None) -> Items:
        """Enqueue the plan at these thresholds (unless it is in the queue already); the items to work."""
        stamp = plan_stamp(self.config, fits)
        done_before = self.known.get(stamp)
        if done_before is not None and self.live == self.config_stamp:
            self.planned, self.skipped = done_before["jobs"], list(done_before["skipped"])
            if self.items is None:
                self.items = await self._open_items()  # the done jobs' are not needed
            await self._draw_screen()
            return self.items
        stage = _stage_key(fits) if fits else None
        if stage is not None:
            await self._wait_for_planner(stage)
        # A run's first plan has nothing to set aside; a run whose cells are kept re-plans those changed.
        fresh = not self.known and self.live is None and not await self.queue.status_totals()
        change = _Change.of(self.config, fits, None if fresh else self.cells, self.notes)
        self._load(change.reread)
        assert self.scenarios is not None
        grid = expand(self.config, self.scenarios, fits, only=change.todo)
        if self.work and self.cache is not None:
            await _preload_if_calls_coming(self.config, self.cache, grid)
        scopes = None if fresh else change.scopes
        self.added += await self.queue.enqueue(grid, grid.items, cells=scopes, keep=grid.waiting)
        await self._keep(change, grid, stamp, stage)
        whole = all(spec.id in self.scenarios for spec in self.config.scenarios)
        self.items = {**(self.items or {}), **grid.items} if whole else await self._open_items()
        await self._draw_screen()
        return self.items

    async def _draw_screen(self) -> None:
        """Give the screened scenario's jobs planned before the screen their places in its drawn order
        (once per screen; answered jobs keep their results, and the order is the seed's, as at planning)."""
        screen = self.config.screen
        drawn = (
            None
            if screen is None
            else {"scenario": screen.scenario, "seed": screen.seed, "unit": order_unit(screen)}
        )
        if drawn == self.drawn:
            return
        if screen is not None:
            self._load({screen.scenario})
            assert self.scenarios is not None
            places = draw_places(self.config, self.scenarios[screen.scenario])
            await self.queue.set_draws(screen.scenario, places or {})
        await self.queue.update_meta({"screen_draws": drawn})  # a screen added again draws again
        self.drawn = drawn

    async def _keep(self, change: _Change, grid: Grid, stamp: str, stage: str | None) -> None:
        """Keep with the run what was planned: the plan's stamp, its cells' and its notes' stamps."""
        kept = self.cells or {}
        self.cells = {
            c: (st, grid.cells.get(c, 0) if change.todo is None or c in change.todo else kept[c][1])
            for c, st in change.cells.items()
        }
        self.notes = {
            spec.id: (change.notes[spec.id], grid.notes.get(spec.id, self.notes.get(spec.id, ("", []))[1]))
            for spec in self.config.scenarios
        }
        self.planned = sum(n for _st, n in self.cells.values())
        self.skipped = [note for _st, notes in self.notes.values() for note in notes]
        self.known[stamp] = {"jobs": self.planned, "skipped": self.skipped}
        self.known = dict(list(self.known.items())[-_KEEP_STAMPS:])
        self.live = self.config_stamp
        await self.queue.update_meta(
            {
                "plans": self.known,
                "live_plan": self.live,
                "cells": [[c.scenario, c.model_id, c.mode, st, n] for c, (st, n) in self.cells.items()],
                "cell_notes": {sid: [st, notes] for sid, (st, notes) in self.notes.items()},
                **({stage: self.who} if stage else {}),
            }
        )

    def _load(self, scenario_ids: AbstractSet[str]) -> None:
        """Read the scenarios named (each once per process)."""
        self.scenarios = self.scenarios or {}
        for spec in self.config.scenarios:
            if spec.id in scenario_ids and spec.id not in self.scenarios:
                self.scenarios[spec.id] = load_scenario(spec)

    async def _open_items(self) -> Items:
        """The items of the open jobs (none for a process that only plans)."""
        return await self.queue.items(of_open_jobs=True) if self.work else {}

    async def _wait_for_planner(self, stage: str) -> None:
        """Unless this process plans ``stage``, wait (bounded) until the one that does has planned it."""
        planner = await self.queue.take_stage(stage, self.who)
        deadline = time.monotonic() + _STAGE_WAIT_S
        while planner != self.who and time.monotonic() < deadline:
            info = await self.queue.run_info()
            if info is not None and stage in info["meta"]:
                return  # planned: planning it here again adds nothing and finds its items
            await anyio.sleep(0.5)


def _stage_key(fits: dict[str, Any]) -> str:
    """A later stage's name, from the fits it is planned from (the same in every process of the fleet)."""
    return "stage:" + hashlib.sha256(json.dumps(fits, sort_keys=True, default=str).encode()).hexdigest()[:32]


async def _preload_if_calls_coming(
    config: SweepConfig, cache: CacheStore, grid: Grid, sample: int = 512
) -> None:
    """Start importing litellm now (it takes seconds) if some job planned now will need a real call
    through it (``preload_litellm_for``: a run whose models all go direct never imports it).

    Answered jobs have their responses in the cache, so a planned question whose key is missing from the
    cache will be called; a run answered wholly from the cache never imports litellm.
    """
    if not CacheMode(config.cache.policy).read or grid.has_episodes():
        preload_litellm_for(config.models, config.workers.transport)
        return
    cells = grid.questions()
    step = max(1, sum(len(scenario.items) for _m, scenario in cells) // sample)
    keys = [
        question_call(model, scenario.items[item]).key
        for model, scenario in cells
        for item in list(scenario.items)[::step]
    ]
    if keys and len(await cache.get(keys)) < len(keys):
        preload_litellm_for(config.models, config.workers.transport)


class _Change(NamedTuple):
    """What a plan must do to the queue: the cells to plan (None: all), the scenarios to read, the cells
    whose other jobs are set aside (changed or gone), and the stamps of the config's cells and notes."""

    todo: frozenset[Cell] | None
    reread: frozenset[str]
    scopes: list[Cell]
    cells: dict[Cell, str]
    notes: dict[str, str]

    @classmethod
    def of(
        cls,
        config: SweepConfig,
        fits: dict[str, Any] | None,
        kept: dict[Cell, tuple[str, int]] | None,
        kept_notes: dict[str, tuple[str, list[str]]],
    ) -> _Change:
        cells, notes = cell_stamps(config, cells_of(config), fits), notes_stamps(config, fits)
        if kept is None:  # nothing kept to compare with: the whole plan, and the whole run is its scope
            return cls(None, frozenset(notes), [WHOLE_RUN], cells, notes)
        todo = {c for c, st in cells.items() if kept.get(c, ("", 0))[0] != st}
        episodes = {s.id for s in config.scenarios if s.kind == "episodes"}
        if any(c.model_id is None for c in todo):  # the closed loop is planned whole
            todo |= {c for c in cells if c.scenario in episodes}
        reread = {c.scenario for c in todo} | {
            s for s, st in notes.items() if kept_notes.get(s, ("", []))[0] != st
        }
        if reread & episodes:
            reread |= episodes
            todo |= {c for c in cells if c.scenario in episodes}
        scopes = [c for c in kept if c not in cells or c in todo]
        return cls(frozenset(todo), frozenset(reread), scopes, cells, notes)
