"""How a sweep runs: the response cache, workers, the local server, gates, caps, the budget, notifications,
and how its report ranks and highlights the models."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from .fields import CachePolicy, _Frozen
from .transport_spec import TransportChoice


class CacheSettings(_Frozen):
    """The response cache: its policy, and which store the run shares its answers through."""

    policy: CachePolicy = Field(
        "read-write", description="read-write (default), read-only, refresh (call and overwrite), off."
    )
    store: Literal["user", "run"] | None = Field(
        None,
        description=(
            "user: a SQLite file in the user's cache folder ($KNOWWHEN_CACHE_DIR), shared by every run of "
            "this user; run: the run's own database (a PostgreSQL fleet shares it). Default: run for a "
            "run on PostgreSQL, user otherwise."
        ),
    )
    path: Path | None = Field(None, description="A SQLite file to keep the cache in (instead of store).")
    url: str | None = Field(
        None,
        description=(
            "A database URL to keep the cache in (instead of store); ${VAR} is expanded (a password must "
            "come from one)."
        ),
    )

    @model_validator(mode="after")
    def _one_place(self) -> CacheSettings:
        given = [name for name in ("store", "path", "url") if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give one of store, path and url, not {' and '.join(given)}")
        return self


class WorkerSettings(_Frozen):
    """Runtime knobs; none of them changes a job's identity or a cache key."""

    concurrency: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description=(
            "An upper bound on jobs in progress at once per process. Default: none, because the work in hand "
            "is already sized per model from its own rate, latency and max_in_flight (a sweep of forty "
            "models with 16 in flight each needs 640 open at once, and a common cap would let the slow "
            "ones' waiting jobs crowd out the fast); set it to spare a small machine."
        ),
    )
    lease_seconds: float = Field(60.0, ge=2, description="A claimed job returns to the queue after this.")
    max_attempts: int = Field(5, ge=1, le=100, description="Attempts per job before it is failed.")
    max_outage_s: float = Field(
        1800.0,
        gt=0,
        description=(
            "How long a model may stay down (every request failing) before the run stops waiting for it; "
            "its jobs stay pending for the next run. A down model's jobs never spend attempts. A model set "
            "aside (set_aside_error_rate) is waited for alone this long from when it was set aside."
        ),
    )
    max_db_outage_s: float = Field(
        600.0,
        gt=0,
        description=(
            "How long a process (run, worker, status) waits for its run database when it is away (a "
            "restart, a failover, a dropped connection, a SQLite file locked by another process) before it "
            "stops with exit code 6; answers already in hand are recorded once it is back, and a process "
            "that stops leaves its jobs pending."
        ),
    )
    stop_grace_s: float = Field(
        20.0,
        gt=0,
        le=25,
        description=(
            "On SIGTERM (a scheduler's preemption), how long a worker lets its calls in flight finish "
            "before abandoning them; below Slurm's default KillWait of 30 s. Unstarted jobs are given back "
            "at once; the process exits with code 75 (may be requeued)."
        ),
    )
    batch_size: int = Field(64, ge=1, le=1024, description="Jobs claimed and recorded per transaction.")
    transport: TransportChoice = Field(
        "auto",
        description=(
            "How requests are sent, for every model that does not say: 'auto' (the runner's own HTTP "
            "client where it knows the wire, else litellm), 'direct' or 'litellm' (docs/transport.md)."
        ),
    )
    quarantine_invalid_share: float | None = Field(
        0.8,
        gt=0,
        le=1,
        description=(
            "Quarantine a model for the run once this share of its answers (after quarantine_min_answers) "
            "is invalid; its remaining jobs stay pending. None: never."
        ),
    )
    quarantine_min_answers: int = Field(20, ge=1, description="Answers seen before the invalid share counts.")
    set_aside_error_rate: float | None = Field(
        0.01,
        gt=0,
        le=0.1,
        description=(
            "Set a model aside once a sequential test on its requests says it answers less than 30 % of "
            "them (failed with an answer: a 5xx other than 502/503/504, a malformed reply; failures for at "
            "least 3 different jobs since its last answer), with this false set-aside rate for a model that "
            "answers 30 % or more (1 %: 14 failed requests when it never answered, 48 after hours of "
            "answers). A model set aside is probed every set_aside_probe_s and comes back when a probe "
            "answers; its jobs wait unspent, and the run waits for it alone up to max_outage_s. None: never."
        ),
    )
    set_aside_probe_s: float = Field(
        30.0,
        ge=0.5,
        le=3600,
        description=(
            "A model set aside is sent one probe request this often (seconds); a model back up is noticed "
            "within this. Shorter for a server of one's own that restarts in seconds."
        ),
    )


class ServeSettings(_Frozen):
    """Start the built-in local model server (`knowwhen serve`) for this run, or reuse the one an earlier
    command of the run started; any other program on the port is refused."""

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)


class GateSettings(_Frozen):
    """Open-loop gating computed at finalise time: decision model when confident, else this LLM."""

    llm: str = Field(description="Model id of the LLM whose answers fill in below the threshold.")
    target: float | Literal["llm"] = Field(0.99, description="Accuracy the fitted threshold must reach.")
    risk: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description=(
            "Also choose τ with a guarantee (Learn-then-Test): the error among delegated decisions is at most "
            "this, with probability at least 1 - delta over the draw of the scored questions."
        ),
    )
    delta: float = Field(0.1, gt=0.0, lt=1.0, description="The chance the guarantee of `risk` may fail.")


class ReportSettings(_Frozen):
    """How the tables, plots, report and viewer order and name the models; no figure changes with it."""

    rank_by: str | None = Field(
        None,
        description=(
            "The scenario id whose headline figure ranks the models, best first (states: L2 accuracy; "
            "episodes: L3 success in the model's own mode; isolated: L1 pooled accuracy). Default: the "
            "first states scenario, else the first episodes scenario, else the first isolated one."
        ),
    )
    highlight: list[str] = Field(
        default_factory=list,
        description="Model ids every plot names, whatever their rank (beside the top of the ranking).",
    )
    named: int = Field(
        10,
        ge=1,
        le=40,
        description="How many models a plot names at most, pinned ones and the LLMs included.",
    )


class Cap(_Frozen):
    """A spending cap: USD and/or tokens (input + output); none = no cap on that."""

    usd: float | None = Field(None, ge=0, description="USD the calls may cost.")
    tokens: int | None = Field(None, ge=0, description="Input + output tokens the calls may use.")


class Budget(Cap):
    """What the run may spend, across every process and machine: in all, per model, per limit group.

    Each call reserves its expected cost first and settles its actual cost after; a call that would
    pass a cap is not made, and its job stays pending. Raise the cap and rerun to continue."""

    models: dict[str, Cap] = Field(default_factory=dict, description="Caps per model id.")
    groups: dict[str, Cap] = Field(default_factory=dict, description="Caps per limit_group.")


class Notify(_Frozen):
    """Word back when a run finishes, fails, spends a budget, quarantines a model or sets one aside (and
    when it is back)."""

    command: str | None = Field(
        None,
        description=(
            "A command run on each event (split like a shell would, not run by one), with "
            "KNOWWHEN_EVENT, KNOWWHEN_RUN and KNOWWHEN_MESSAGE in its environment; a token in it is "
            "written ${VAR}."
        ),
    )
    url: str | None = Field(
        None,
        description="A URL the event is posted to as JSON {run, event, message}; ${VAR} is expanded.",
    )
