"""The whole sweep config: models x modes x scenarios, plus how to run it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, cast

from pydantic import Field, model_validator

from ..jobs import Mode
from .fields import _ID, _Frozen
from .model_spec import ModelSpec
from .scenario_spec import ScenarioSpec, TauFit
from .screen_spec import ScreenSettings
from .settings import (
    Budget,
    CacheSettings,
    GateSettings,
    Notify,
    ReportSettings,
    ServeSettings,
    WorkerSettings,
)


class SweepConfig(_Frozen):
    """A whole sweep: models x modes x scenarios, plus how to run it."""

    schema_version: Literal[1] = Field(1, description="Config format version.")
    name: str = Field(pattern=_ID, description="Run name; also the run's key in a shared database.")
    output: Path = Field(description="Run folder (answers, manifests, tables, the SQLite database).")
    db: str | None = Field(
        None,
        description=(
            "Database URL; default: sqlite file in the run folder. ${VAR} is expanded (a password must come "
            "from one)."
        ),
    )
    models: list[ModelSpec] = Field(min_length=1)
    modes: list[Mode] = Field(default_factory=lambda: cast(list[Mode], ["model", "llm"]))
    scenarios: list[ScenarioSpec] = Field(min_length=1)
    cache: CacheSettings = Field(default_factory=lambda: CacheSettings())
    workers: WorkerSettings = Field(default_factory=lambda: WorkerSettings())
    serve: ServeSettings | None = Field(None, description="Start the built-in local server for this run.")
    gate: GateSettings | None = Field(None, description="Open-loop gating against an LLM.")
    budget: Budget | None = Field(None, description="Spending caps for the run (USD, tokens).")
    notify: Notify | None = Field(
        None, description="A command or URL told of finish, failure, budget, quarantine, set aside, back."
    )
    report: ReportSettings = Field(
        default_factory=lambda: ReportSettings(),
        description="How the tables, plots and report rank and highlight the models.",
    )
    screen: ScreenSettings | None = Field(
        None,
        description=(
            "Stop asking a model once an anytime-valid bound settles whether it is kept (off by default; "
            "see docs/screening.md)."
        ),
    )

    @model_validator(mode="after")
    def _unique_ids(self) -> SweepConfig:
        for what, ids in (
            ("models", [m.id for m in self.models]),
            ("scenarios", [s.id for s in self.scenarios]),
        ):
            dupes = sorted({i for i in ids if ids.count(i) > 1})
            if dupes:
                raise ValueError(f"duplicate {what} id {dupes[0]!r}")
        if self.gate and self.gate.llm not in {m.id for m in self.models if m.kind == "llm"}:
            raise ValueError(f"gate.llm {self.gate.llm!r} is not the id of an llm-kind model")
        self._check_episodes()
        self._check_transport()
        self._check_budget()
        self._check_report()
        self._check_screen()
        return self

    def _check_transport(self) -> None:
        """``workers.transport: direct`` holds for every model that does not choose: each must allow it."""
        if self.workers.transport != "direct":
            return
        for m in self.models:
            if m.transport is None and (why := m.why_not_direct()) is not None:
                raise ValueError(
                    f"workers.transport: direct: model {m.id!r} cannot go direct ({why}); give it "
                    "transport: litellm, or use auto"
                )

    def _check_screen(self) -> None:
        """A screen names a states scenario, races models that answer it, and compares with one of them."""
        if self.screen is None:
            return
        kinds = {s.id: s.kind for s in self.scenarios}
        if kinds.get(self.screen.scenario) != "states":
            raise ValueError(f"screen.scenario: {self.screen.scenario!r} is not the id of a states scenario")
        answering = [m.id for m in self.models if ("model" if m.kind == "decision" else "llm") in self.modes]
        reference = self.screen.keep.not_worse_than
        if reference is not None and reference.model not in answering:
            raise ValueError(
                f"screen.keep.not_worse_than.model: {reference.model!r} is not the id of a model that answers "
                f"{self.screen.scenario!r} (a decision model in mode model, an LLM in mode llm)"
            )
        top = self.screen.keep.top
        if top is not None and top >= len(answering):
            raise ValueError(
                f"screen.keep.top: {top} keeps every model that answers {self.screen.scenario!r}; "
                "nothing would be screened"
            )

    def _check_report(self) -> None:
        """The report ranks by a scenario of this config and highlights its models."""
        if self.report.rank_by is not None and self.report.rank_by not in {s.id for s in self.scenarios}:
            raise ValueError(f"report.rank_by: {self.report.rank_by!r} is not the id of a scenario")
        for i, model_id in enumerate(self.report.highlight):
            if model_id not in {m.id for m in self.models}:
                raise ValueError(f"report.highlight.{i}: {model_id!r} is not the id of a model")

    def _check_budget(self) -> None:
        """Budget caps name models and limit groups of this config."""
        if self.budget is None:
            return
        for model_id in self.budget.models:
            if model_id not in {m.id for m in self.models}:
                raise ValueError(f"budget.models.{model_id}: no model with that id")
        for group in self.budget.groups:
            if group not in {m.limit_group for m in self.models}:
                raise ValueError(f"budget.groups.{group}: no model has limit_group {group!r}")

    def _check_episodes(self) -> None:
        """Every episodes scenario has one agent LLM, and a fitted τ names another episodes scenario."""
        llms = [m.id for m in self.models if m.kind == "llm"]
        episodes = {s.id for s in self.scenarios if s.kind == "episodes"}
        for i, sc in enumerate(self.scenarios):
            if sc.kind != "episodes":
                continue
            if sc.agent is not None and sc.agent not in llms:
                raise ValueError(f"scenarios.{i}.agent: {sc.agent!r} is not the id of an llm-kind model")
            if sc.agent is None and len(llms) != 1:
                raise ValueError(
                    f"scenarios.{i}.agent: scenario {sc.id!r} needs its agent LLM named "
                    f"(the config has {len(llms)} llm-kind models)"
                )
            if isinstance(sc.tau, TauFit) and (sc.tau.fit not in episodes or sc.tau.fit == sc.id):
                raise ValueError(
                    f"scenarios.{i}.tau.fit: {sc.tau.fit!r} is not the id of another episodes scenario"
                )

    def agent_of(self, scenario: ScenarioSpec) -> ModelSpec:
        """The agent LLM of an episodes scenario (named, or the config's only llm-kind model)."""
        if scenario.agent is not None:
            return self.model(scenario.agent)
        return next(m for m in self.models if m.kind == "llm")

    def model(self, model_id: str) -> ModelSpec:
        for spec in self.models:
            if spec.id == model_id:
                return spec
        raise KeyError(model_id)

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.output / 'knowwhen.db'}"
