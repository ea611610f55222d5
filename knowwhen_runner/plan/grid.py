"""Planning: a pure function from a config and its loaded scenarios to jobs.

The grid is models x modes x scenarios x items. Open loop (``states``, ``isolated``): a decision model
answers in mode ``model``, an LLM in mode ``llm``; ``gated`` needs no calls of its own (it is computed at
finalise time from both) and ``shadow`` exists only in the closed loop. Planning the same config again
yields the same job ids, so enqueuing them again adds nothing: ``run`` after a crash is the resume.

Closed loop (``episodes``): one job per episode, see ``_episode_jobs``. An ``llm`` episode has no
decision model: its job (and result) carries the agent LLM's id as its model, as an LLM's open-loop
answers do. A fitted τ is identified by its reference (fit set, target), not by the number it fits to.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..config import ModelSpec, ScenarioSpec, SweepConfig, TauFit
from ..jobs import Items, Job, Mode, job_id, job_ids
from ..scenarios import Scenario
from .draws import with_draws

__all__ = ["FitRequest", "Plan", "fit_requests", "missing_source_notes", "open_loop_mode", "plan"]


def open_loop_mode(model: ModelSpec) -> str:
    """The only mode in which a model answers open-loop questions itself."""
    return "model" if model.kind == "decision" else "llm"


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
    """Expand the grid into jobs (pure: same inputs, same jobs, same order).

    ``fits`` holds thresholds fitted from finished jobs (closed loop: ``shadow`` episodes on a fit task
    set); jobs that need a fit not yet available are left out and planned again once it is.
    """
    jobs: list[Job] = []
    items: Items = {}
    skipped: list[str] = []
    waiting: set[str] = set()
    for spec in config.scenarios:
        scenario = scenarios[spec.id]
        for item_id, payload in scenario.items.items():
            items[(scenario.id, item_id)] = payload
        if scenario.kind == "episodes":
            jobs.extend(_episode_jobs(config, spec, scenario, fits or {}, skipped, waiting))
            continue
        answering, asked = 0, []
        for model in config.models:
            for mode in config.modes:
                if scenario.kind in ("states", "isolated"):
                    if mode != open_loop_mode(model):
                        if mode in ("model", "llm"):
                            skipped.append(
                                f"{model.id} x {mode} x {scenario.id}: a {model.kind} model "
                                f"answers open-loop questions in mode {open_loop_mode(model)!r}"
                            )
                        continue
                    asked.extend(_question_jobs(model, mode, scenario))
                    answering += 1
        jobs.extend(with_draws(config, scenario, asked))
        skipped.extend(missing_source_notes(scenario, answering))
    jobs.extend(_fit_shadow_jobs(config, scenarios))
    return Plan(_unique(jobs), items, skipped, waiting)


def missing_source_notes(scenario: Scenario, answering: int) -> list[str]:
    """One sentence per L1 source left out for want of its files: what, how many jobs, how to fetch it."""
    return [
        f"{scenario.id}: {m.source} is missing ({m.where}), which leaves out up to {m.items * answering:,} "
        f"jobs ({m.items:,} items x {answering} model{'' if answering == 1 else 's'}); fetch it with `{m.fetch}`"
        for m in scenario.missing
    ]


def _unique(jobs: list[Job]) -> list[Job]:
    """First occurrence of each job id (a fit set's own shadow episodes are also the ones a fit needs)."""
    return list({job.id: job for job in reversed(jobs)}.values())[::-1]


def _question_jobs(model: ModelSpec, mode: Mode, scenario: Scenario) -> list[Job]:
    payload = {"kind": "question"}
    items = list(scenario.items)
    ids = job_ids(
        model_id=model.id,
        model=model.served_model(),
        params=model.identity_params(),
        mode=mode,
        scenario_id=scenario.id,
        scenario_version=scenario.version,
        items=items,
    )
    return [
        Job(id=ident, model_id=model.id, mode=mode, scenario_id=scenario.id, item=item_id, payload=payload)
        for ident, item_id in zip(ids, items, strict=True)
    ]


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


def fit_requests(config: SweepConfig) -> list[FitRequest]:
    """Every fit the config asks for, in config order (pure; the planner and ``compute_fits`` share it)."""
    out: dict[str, FitRequest] = {}
    for spec in config.scenarios:
        if spec.kind != "episodes" or not isinstance(spec.tau, TauFit):
            continue
        agent = config.agent_of(spec)
        for model in _decision_models(config):
            key = f"{spec.tau.fit}/{model.id}/{agent.id}/target={spec.tau.target}/min_support={spec.tau.min_support}"
            out.setdefault(
                key, FitRequest(key, spec.tau.fit, model.id, agent.id, spec.tau.target, spec.tau.min_support)
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
        return {
            "fit": tau.fit,
            "fit_version": fit_set.version,
            "target": tau.target,
            "min_support": tau.min_support,
        }
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
    ident = job_id(
        model_id=model.id,
        model=model.served_model(),
        params=model.identity_params(),
        mode=mode,
        scenario_id=scenario.id,
        scenario_version=scenario.version,
        item=item_id,
        extra=extra,
    )
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
