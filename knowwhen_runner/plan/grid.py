"""Planning: a pure function from a config and its loaded scenarios to jobs.

The grid is models x modes x scenarios x items. Open loop (``states``, ``isolated``): a decision model
answers in mode ``model``, an LLM in mode ``llm``; ``gated`` needs no calls of its own (it is computed at
finalise time from both) and ``shadow`` exists only in the closed loop. Planning the same config again
yields the same job ids, so enqueuing them again adds nothing: ``run`` after a crash is the resume.
``expand`` gives the grid as cells (``jobs.Cell``) whose jobs are made as they are read, so a large plan
is written batch by batch (as rows, ``Grid.row_batches``); ``plan`` lists them all (a dry run, tests).

Closed loop (``episodes``): one job per episode, see ``_episode_jobs``. An ``llm`` episode has no
decision model: its job (and result) carries the agent LLM's id as its model, as an LLM's open-loop
answers do. A fitted τ is identified by its reference (fit set, target), not by the number it fits to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

from ..config import ModelSpec, ScenarioSpec, SweepConfig, TauFit
from ..jobs import Cell, CellRows, Items, Job, JobRow, Mode, id_halves, job_id, job_ids, job_rows
from ..jsonio import dumps
from ..messages import say
from ..scenarios import Scenario
from .cells import open_loop_mode
from .draws import draw_places
from .rows import QuestionCell, question_rows

__all__ = [
    "FitRequest",
    "Grid",
    "Plan",
    "expand",
    "fit_requests",
    "missing_source_notes",
    "plan",
]


@dataclass
class Plan:
    """Jobs and the item data they read."""

    jobs: list[Job]
    items: Items
    skipped: list[str] = field(default_factory=list)  # why a model x mode x scenario cell has no jobs
    waiting: set[str] = field(default_factory=set)  # ids of the config's jobs that wait for a τ fit

    def job_ids(self) -> set[str]:
        """Every job of the config: those planned and those waiting for a fit (the queue's whole plan)."""
        return {j.id for j in self.jobs} | self.waiting

    def counts(self) -> Counter[tuple[str, str, str]]:
        return Counter((j.model_id, j.mode, j.scenario_id) for j in self.jobs)


def plan(config: SweepConfig, scenarios: dict[str, Scenario], fits: dict[str, Any] | None = None) -> Plan:
    """Expand the grid into jobs (pure: same inputs, same jobs, same order), all of them in one list.

    ``fits`` holds thresholds fitted from finished jobs (closed loop: ``shadow`` episodes on a fit task
    set); jobs that need a fit not yet available are left out and planned again once it is. A large grid
    is better enqueued from ``expand`` (its jobs are made as they are inserted, never all held at once).
    """
    grid = expand(config, scenarios, fits)
    return Plan(list(grid.jobs()), grid.items, grid.skipped, grid.waiting)


@dataclass
class Grid:
    """A config's plan as cells whose jobs are made on demand: ``jobs()`` yields them one at a time (an
    open-loop cell's ids are hashed as they are asked for), so a caller holds a batch, never the grid."""

    cells: dict[Cell, int]  # the cells expanded, with how many jobs each plans
    items: Items
    skipped: list[str]
    waiting: set[str]
    notes: dict[str, list[str]]  # the skipped notes of each scenario expanded, by scenario id
    _parts: list[tuple[ModelSpec, Mode, Scenario] | list[Job]]  # question cells and episodes, in order
    draws: dict[str, dict[str, int]] = field(default_factory=dict)  # a screened scenario's drawn places

    def __iter__(self) -> Iterator[Job]:
        return self.jobs()

    def jobs(self) -> Iterator[Job]:
        """Every planned job of the cells expanded, in config order (``plan``'s order); made anew each
        time it is asked for."""
        for part in self._parts:
            if isinstance(part, list):
                yield from part
            elif (places := self.draws.get(part[2].id)) is None:
                yield from _question_jobs(*part)
            else:
                yield from (replace(j, draw=places.get(j.item, 0)) for j in _question_jobs(*part))

    def row_batches(self, run: str, size: int) -> Iterator[list[JobRow] | CellRows]:
        """The same jobs as ``jobs()``, as the queue's rows of ``run`` (``jobs.JobRows``): at most ``size``
        a batch, each sorted by id; a large grid's question rows are made in a child process (``rows``)."""
        cells: list[QuestionCell] = []
        lists: dict[str, int] = {}  # each scenario's items, once
        payload = dumps(_QUESTION).decode()
        for part in self._parts:
            if isinstance(part, list):
                yield from job_rows(run, part, size)
                continue
            model, mode, scenario = part
            head, tail = id_halves(**_identity(model, mode, scenario))
            at = lists.setdefault(scenario.id, len(lists))
            draws = self.draws.get(scenario.id)
            cells.append(QuestionCell(head, tail, model.id, mode, scenario.id, payload, at, draws))
        scenarios = {part[2].id: part[2] for part in self._parts if isinstance(part, tuple)}
        yield from question_rows(run, cells, [list(scenarios[sid].items) for sid in lists], size)

    def questions(self) -> list[tuple[ModelSpec, Scenario]]:
        """The open-loop cells expanded, as (model, scenario): what a sample of their calls is drawn from."""
        return [(part[0], part[2]) for part in self._parts if isinstance(part, tuple)]

    def has_episodes(self) -> bool:
        return any(isinstance(part, list) and part for part in self._parts)


def expand(
    config: SweepConfig,
    scenarios: dict[str, Scenario],
    fits: dict[str, Any] | None = None,
    only: AbstractSet[Cell] | None = None,
) -> Grid:
    """The grid of the scenarios given (all of ``config``'s, or those ``only``'s cells need), cell by cell.

    ``only``: expand these cells alone (a re-plan of what changed); the closed loop is one unit (its
    fit sets' shadow episodes are shared between its scenarios), so it is expanded whole or not at all.
    """
    grid = Grid({}, {}, [], set(), {}, [])
    closed = only is None or any(c.model_id is None for c in only)
    episodes: list[list[Job]] = []
    for spec in config.scenarios:
        scenario = scenarios.get(spec.id)
        if scenario is None:
            continue
        grid.items.update({(scenario.id, item_id): p for item_id, p in scenario.items.items()})
        notes = grid.notes.setdefault(spec.id, [])
        if scenario.kind == "episodes":
            if closed:
                episodes.append(_episode_jobs(config, spec, scenario, fits or {}, notes, grid.waiting))
                grid.cells[Cell(spec.id)] = 0
                grid._parts.append(episodes[-1])
            continue
        _open_loop(grid, config, scenario, notes, only)
        if (places := draw_places(config, scenario)) is not None:
            grid.draws[scenario.id] = places
    if episodes:
        episodes.append(_fit_shadow_jobs(config, scenarios))
        grid._parts.append(episodes[-1])
        _once(grid, episodes)
    grid.skipped = [note for notes in grid.notes.values() for note in notes]
    return grid


def _open_loop(
    grid: Grid, config: SweepConfig, scenario: Scenario, notes: list[str], only: AbstractSet[Cell] | None
) -> None:
    """Add an open-loop scenario's cells (those of ``only``) to ``grid``, and its notes to ``notes``."""
    answering = 0
    for model in config.models:
        for mode in config.modes:
            if mode != open_loop_mode(model):
                if mode in ("model", "llm"):
                    notes.append(
                        f"{model.id} x {mode} x {scenario.id}: a {model.kind} model "
                        f"answers open-loop questions in mode {open_loop_mode(model)!r}"
                    )
                continue
            answering += 1
            cell = Cell(scenario.id, model.id, mode)
            if only is None or cell in only:
                grid.cells[cell] = len(scenario.items)
                grid._parts.append((model, mode, scenario))
    notes.extend(missing_source_notes(scenario, answering))


def _once(grid: Grid, episodes: list[list[Job]]) -> None:
    """Keep the first of each episode (a fit set's own shadow episodes are also the ones a fit needs),
    and count each scenario's cell (a fit set's also holds the shadow episodes fitted on it)."""
    seen: set[str] = set()
    for part in episodes:
        kept = []
        for job in part:
            if job.id not in seen:
                seen.add(job.id)
                kept.append(job)
                cell = Cell(job.scenario_id)
                grid.cells[cell] = grid.cells.get(cell, 0) + 1
        part[:] = kept


def missing_source_notes(scenario: Scenario, answering: int) -> list[str]:
    """One sentence per L1 source left out for want of its files: what, how many jobs, how to fetch it."""
    models = f"{answering} model{'' if answering == 1 else 's'}"
    return [
        say(
            "l1.source_missing",
            scenario=scenario.id,
            source=m.source,
            where=m.where,
            jobs=f"{m.items * answering:,}",
            items=f"{m.items:,}",
            models=models,
            fetch=m.fetch,
        )
        for m in scenario.missing
    ]


_QUESTION = {"kind": "question"}  # a question job's payload


def _identity(model: ModelSpec, mode: Mode, scenario: Scenario) -> dict[str, Any]:
    """What a job's id hashes of its cell (model, mode, scenario), for questions and episodes alike."""
    return {
        "model_id": model.id,
        "model": model.served_model(),
        "params": model.identity_params(),
        "mode": mode,
        "scenario_id": scenario.id,
        "scenario_version": scenario.version,
    }


def _question_jobs(model: ModelSpec, mode: Mode, scenario: Scenario) -> Iterator[Job]:
    """One cell's questions, made 5,000 at a time (their ids hashed as a batch, one payload shared)."""
    payload = dict(_QUESTION)
    items, model_id, scenario_id = list(scenario.items), model.id, scenario.id
    for start in range(0, len(items), 5000):
        chunk = items[start : start + 5000]
        ids = job_ids(**_identity(model, mode, scenario), items=chunk)
        # Positional: a frozen dataclass's keyword call costs a third more, a second over 1.5M jobs.
        yield from (
            Job(ident, model_id, mode, scenario_id, item_id, payload)
            for ident, item_id in zip(ids, chunk, strict=True)
        )


# --- closed loop ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitRequest:
    """A τ some gated episodes wait for: fitted on ``shadow`` episodes of a fit set, per decision model."""

    key: str
    scenario: str  # the fit set
    decision_model: str
    agent: str
    target: float | str
    min_support: int
    risk: float | None = None  # set: τ chosen by Learn-then-Test for this risk, at ``delta``
    delta: float = 0.1


def fit_requests(config: SweepConfig) -> list[FitRequest]:
    """Every fit the config asks for, in config order (pure; the planner and ``compute_fits`` share it)."""
    out: dict[str, FitRequest] = {}
    for spec in config.scenarios:
        if spec.kind != "episodes" or not isinstance(spec.tau, TauFit):
            continue
        agent = config.agent_of(spec)
        for model in _decision_models(config):
            key = f"{spec.tau.fit}/{model.id}/{agent.id}/target={spec.tau.target}/min_support={spec.tau.min_support}"
            if spec.tau.risk is not None:  # only then: the keys of fits without a risk stay as they were
                key += f"/risk={spec.tau.risk}/delta={spec.tau.delta}"
            out.setdefault(
                key,
                FitRequest(
                    key,
                    spec.tau.fit,
                    model.id,
                    agent.id,
                    spec.tau.target,
                    spec.tau.min_support,
                    spec.tau.risk,
                    spec.tau.delta,
                ),
            )
    return list(out.values())


def _decision_models(config: SweepConfig) -> list[ModelSpec]:
    return [m for m in config.models if m.kind == "decision"]


def _spec(config: SweepConfig, scenario_id: str) -> ScenarioSpec:
    return next(s for s in config.scenarios if s.id == scenario_id)


def _tau_identity(config: SweepConfig, tau: float | TauFit) -> dict[str, Any]:
    """What a gated job's id records of its τ: the fixed number, or the fit's reference (never its value)."""
    if isinstance(tau, TauFit):
        fit_set = _spec(config, tau.fit)
        identity: dict[str, Any] = {
            "fit": tau.fit,
            "fit_version": fit_set.version,
            "target": tau.target,
            "min_support": tau.min_support,
        }
        if tau.risk is not None:  # only then, so that a fit without a risk keeps its jobs' ids
            identity |= {"risk": tau.risk, "delta": tau.delta}
        return identity
    return {"fixed": tau}


def _episode_job(
    spec: ScenarioSpec,
    scenario: Scenario,
    mode: Mode,
    agent: ModelSpec,
    decider: ModelSpec | None,
    item_id: str,
    gate: tuple[dict[str, Any], float | None, dict[str, Any] | None] | None = None,
    repeat: int = 0,
) -> Job:
    """One episode: (decision model or, in mode llm, the agent itself) x agent x mode x τ x task x repeat.

    Repeat 0 is the episode of a scenario without repeats (same id); repeat r > 0 adds seed r to the id
    and the payload, and the episode sends it to the agent LLM."""
    model = decider or agent
    extra: dict[str, Any] = {
        "agent": {"id": agent.id, "model": agent.model, "params": agent.identity_params()},
        "max_steps": spec.steps,
    }
    payload: dict[str, Any] = {
        "kind": "episode",
        "agent": agent.id,
        "decision_model": decider.id if decider else None,
        "max_steps": spec.steps,
        "tau": None,
        "fit": None,
    }
    if gate is not None:
        extra["tau"], payload["tau"], payload["fit"] = gate
    if repeat:
        extra["seed"] = payload["seed"] = payload["repeat"] = repeat
    ident = job_id(**_identity(model, mode, scenario), item=item_id, extra=extra)
    return Job(id=ident, model_id=model.id, mode=mode, scenario_id=scenario.id, item=item_id, payload=payload)


def _gate(
    config: SweepConfig, spec: ScenarioSpec, decider: ModelSpec, fits: dict[str, Any], skipped: list[str]
) -> tuple[dict[str, Any], float | None, dict[str, Any] | None] | None:
    """(τ identity, numeric τ, fit record) of a gated cell, or None (with the reason) when it must wait."""
    if spec.tau is None:
        skipped.append(
            f"{decider.id} x gated x {spec.id}: no tau (give a number or {{fit: ..., target: ...}})"
        )
        return None
    if not isinstance(spec.tau, TauFit):
        return _tau_identity(config, spec.tau), float(spec.tau), None
    agent = config.agent_of(spec)
    request = next(
        r
        for r in fit_requests(config)
        if (r.scenario, r.decision_model, r.agent) == (spec.tau.fit, decider.id, agent.id)
        and r.target == spec.tau.target
        and r.min_support == spec.tau.min_support
        and (r.risk, r.delta) == (spec.tau.risk, spec.tau.delta)
    )
    fit = fits.get(request.key)
    if fit is None:
        skipped.append(f"{decider.id} x gated x {spec.id}: waits for the τ fit on {spec.tau.fit}")
        return None
    return _tau_identity(config, spec.tau), fit.get("tau"), fit


def _episode_jobs(
    config: SweepConfig,
    spec: ScenarioSpec,
    scenario: Scenario,
    fits: dict[str, Any],
    skipped: list[str],
    waiting: set[str],
) -> list[Job]:
    """The scenario's own episodes: every mode it runs, every decision model, every task.

    Gated episodes that wait for a fit are not planned, but their ids (which name the fit, not the τ it
    gives) go to ``waiting``, so the queue keeps them as part of the config's plan.
    """
    agent = config.agent_of(spec)
    deciders = _decision_models(config)
    jobs: list[Job] = []
    for mode in spec.modes if spec.modes is not None else config.modes:
        if mode == "llm":
            jobs += [
                _episode_job(spec, scenario, mode, agent, None, item, repeat=r)
                for item in scenario.items
                for r in range(spec.repeats or 1)
            ]
            continue
        if not deciders:
            skipped.append(f"{mode} x {spec.id}: the config has no decision-kind model")
        for decider in deciders:
            gate = _gate(config, spec, decider, fits, skipped) if mode == "gated" else None
            if mode == "gated" and gate is None:
                if isinstance(spec.tau, TauFit):
                    pending = (_tau_identity(config, spec.tau), None, None)
                    waiting.update(
                        _episode_job(spec, scenario, mode, agent, decider, item, pending, r).id
                        for item in scenario.items
                        for r in range(spec.repeats or 1)
                    )
                continue
            jobs += [
                _episode_job(spec, scenario, mode, agent, decider, item, gate, r)
                for item in scenario.items
                for r in range(spec.repeats or 1)
            ]
    return jobs


def _fit_shadow_jobs(config: SweepConfig, scenarios: dict[str, Scenario]) -> list[Job]:
    """The shadow episodes every requested fit is computed from, on its fit set, with the gated agent."""
    jobs: list[Job] = []
    for request in fit_requests(config):
        spec, scenario = _spec(config, request.scenario), scenarios[request.scenario]
        agent, decider = config.model(request.agent), config.model(request.decision_model)
        jobs += [_episode_job(spec, scenario, "shadow", agent, decider, item) for item in scenario.items]
    return jobs
