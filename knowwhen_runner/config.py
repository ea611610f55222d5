"""The sweep config: one YAML file that is a whole reproducible run.

Typed, frozen pydantic models with a docstring per field; ``load_config`` turns every problem into a
``ConfigError`` of the form ``file:line: field: message``. Secrets never live here: a model names the
environment variable that holds its key (``api_key_env``), and a literal key is refused.
Relative paths resolve against the folder of the config file, so a config can be run from anywhere.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, cast
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from .exceptions import ConfigError
from .jobs import Mode

__all__ = [
    "CONFIG_SCHEMA_VERSION",
    "CacheSettings",
    "GateSettings",
    "ModelSpec",
    "Pricing",
    "RateLimit",
    "ScenarioSpec",
    "ServeSettings",
    "SweepConfig",
    "TauFit",
    "WorkerSettings",
    "load_config",
    "parse_config",
]

CONFIG_SCHEMA_VERSION = 1

CachePolicy = Literal["read-write", "read-only", "refresh", "off"]
_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Shapes of real provider keys; a value like this anywhere in a config is refused.
_KEY_SHAPE = re.compile(r"^(sk-|sk_|xai-|gsk_|AIza|hf_|ts-)[A-Za-z0-9_\-]{8,}$|^[A-Za-z0-9]{40,}$")
_SECRET_FIELDS = {"api_key", "apikey", "key", "token", "secret", "password", "authorization"}
# Request arguments the runner sets itself on every call: a model's params may not override them.
_RUNNER_PARAMS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "state",
        "questions",
        "api_base",
        "base_url",
        "api_key",
        "timeout",
        "max_retries",
        "num_retries",
        "stream",
    }
)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RateLimit(_Frozen):
    """How hard one model (or one group of models sharing a provider key) may be driven."""

    requests_per_minute: float | None = Field(
        None, gt=0, description="Requests per minute; none = unlimited."
    )
    tokens_per_minute: float | None = Field(None, gt=0, description="Input+output tokens per minute.")
    max_in_flight: int = Field(16, ge=1, le=4096, description="Requests open at once.")
    adaptive: bool | None = Field(
        None,
        description=(
            "Find the provider's requests-per-minute limit (stated rate-limit headers, else 429s), "
            "starting low and sharing what is learned across the fleet and with later runs. Default: "
            "on when requests_per_minute is not given and api_base is not this machine."
        ),
    )


class Pricing(_Frozen):
    """A price override, for models litellm has no list price for (USD)."""

    input_per_million: float = Field(0.0, ge=0, description="USD per million input tokens.")
    output_per_million: float = Field(0.0, ge=0, description="USD per million output tokens.")
    per_request: float = Field(0.0, ge=0, description="USD per request, on top of tokens.")


class BatchSettings(_Frozen):
    """A provider Batch API for an LLM's open-loop questions: about half price, answers within hours."""

    enabled: bool = Field(True, description="Send this model's open-loop questions in provider batches.")
    max_requests: int = Field(1000, ge=1, le=50_000, description="Most questions in one provider batch.")
    collect_s: float = Field(
        5.0, ge=0, description="Seconds to gather questions before a batch that is not full is submitted."
    )
    fallback_after_s: float = Field(
        86_400.0,
        gt=0,
        description=(
            "A batch unfinished after this many seconds is cancelled; its questions, like those of a "
            "failed or expired batch, are then answered synchronously."
        ),
    )
    poll_s: float = Field(30.0, gt=0, description="Seconds between status checks of a submitted batch.")


class ModelSpec(_Frozen):
    """A decision model or an LLM, reached through litellm."""

    id: str = Field(pattern=_ID, description="Short id used in files and tables, e.g. 'e12'.")
    model: str = Field(min_length=1, description="litellm model string, e.g. 'hosted_vllm/lexical'.")
    kind: Literal["decision", "llm"] = Field(description="'decision' (System One) or 'llm' (chat + tools).")
    api_base: str | None = Field(None, description="Base URL; ${VAR} is expanded from the environment.")
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the key.")
    rate_limit: RateLimit = Field(
        default_factory=lambda: RateLimit(), description="Requests/tokens per minute, in flight."
    )
    limit_group: str | None = Field(None, description="Models with the same group share one rate limit.")
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout in seconds (runtime knob).")
    pricing: Pricing | None = Field(None, description="Price override; default: litellm's price list.")
    params: dict[str, Any] = Field(default_factory=dict, description="Output-affecting request params.")
    batch: BatchSettings | None = Field(
        None, description="LLMs: answer open-loop questions through the provider's Batch API (runtime knob)."
    )
    revision: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:+@/-]{0,127}$",
        description=(
            "What is served under the model string, when the string alone does not pin it (a checkpoint, "
            "a commit, a release): part of job ids and cache keys. Change it to re-ask the model."
        ),
    )
    identity: Literal["model", "endpoint"] = Field(
        "model",
        description=(
            "What a cached answer belongs to: 'model' (the model string and revision: the same model on "
            "another port or machine shares its answers) or 'endpoint' (the api_base too: for servers "
            "whose model string does not say what they serve)."
        ),
    )
    tool_choice: Literal["required", "auto"] = Field(
        "required",
        description=(
            "LLMs: the tool_choice sent when the LLM picks the tool ('auto' for servers that refuse "
            "'required'; a reply without a tool call is then nudged in episodes and invalid open loop)."
        ),
    )

    @field_validator("params")
    @classmethod
    def _params_not_ours(cls, value: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(set(value) & _RUNNER_PARAMS)
        if taken:
            hint = " (use the model's tool_choice setting)" if "tool_choice" in taken else ""
            raise ValueError(f"{', '.join(taken)} is set by the runner and cannot be a param{hint}")
        return value

    @model_validator(mode="after")
    def _batch_for_llms(self) -> ModelSpec:
        if self.batch is not None and self.batch.enabled and self.kind != "llm":
            raise ValueError("batch: only LLMs (kind: llm) answer through a Batch API")
        return self

    def batches(self) -> bool:
        """Whether this model's open-loop questions go to provider batches."""
        return self.batch is not None and self.batch.enabled

    def served_model(self) -> str:
        """The litellm model string, with ``@revision`` when a revision is declared (for job ids)."""
        return self.model if self.revision is None else f"{self.model}@{self.revision}"

    def identity_params(self) -> dict[str, Any]:
        """The params that decide this model's answers, for job ids (a non-default tool_choice too)."""
        if self.tool_choice == "required":
            return self.params  # as before the setting existed: job ids of earlier runs stay the same
        return {**self.params, "tool_choice": self.tool_choice}

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if _KEY_SHAPE.match(value):
            raise ValueError(
                "looks like a literal API key; put the key in an environment variable "
                "and name that variable here"
            )
        if not _ENV_NAME.match(value):
            raise ValueError("must be the name of an environment variable, e.g. OPENAI_API_KEY")
        return value

    def adapts(self) -> bool:
        """Whether this model's requests-per-minute limit is learned (``rate_limit.adaptive``)."""
        if self.rate_limit.requests_per_minute is not None:
            return False
        if self.rate_limit.adaptive is not None:
            return self.rate_limit.adaptive
        host = urlsplit(self.api_base).hostname if self.api_base else None
        return host not in ("127.0.0.1", "localhost", "::1")

    def limit_key(self) -> str:
        """Which models share a limit: the explicit group, else provider + base URL + key variable."""
        if self.limit_group:
            return f"group:{self.limit_group}"
        provider = self.model.split("/", 1)[0]
        return f"{provider}|{self.api_base or ''}|{self.api_key_env or ''}|{self.model}"


Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
#: Tool calls an episode may make when its scenario does not say.
DEFAULT_MAX_STEPS = 15
_EPISODE_ONLY = ("agent", "suite", "split", "n", "max_steps", "tau", "modes", "allow_eval", "repeats")
_ISOLATED_ONLY = ("exclude", "caps")
#: Sources of an isolated scenario: the BFCL v4 categories, and When2Call.
IsolatedSource = Literal[
    "simple_python",
    "multiple",
    "live_simple",
    "live_multiple",
    "irrelevance",
    "live_irrelevance",
    "when2call",
]


class TauFit(_Frozen):
    """A gating threshold fitted on the ``shadow`` episodes of another (fit) task set, per decision model."""

    fit: str = Field(pattern=_ID, description="Id of the episodes scenario whose shadow episodes fit τ.")
    target: Fraction | Literal["llm"] = Field(
        description="Accuracy the delegated choices must reach; 'llm': the agent LLM's own on those states."
    )
    min_support: int = Field(
        10, ge=1, description="Fewest delegated choices a fitted τ may rest on (fewer is noise, not a fit)."
    )


def _tau_kind(value: Any) -> str:
    return "fit" if isinstance(value, dict | TauFit) else "fixed"


# Tagged, so that a bad fit reference reports the fit's field rather than "not a number".
Tau = Annotated[
    Annotated[float, Field(ge=0.0), Tag("fixed")] | Annotated[TauFit, Tag("fit")], Discriminator(_tau_kind)
]


class ScenarioSpec(_Frozen):
    """A question set (L1/L2) or a task set (L3)."""

    id: str = Field(pattern=_ID, description="Short id used in files and tables.")
    kind: Literal["states", "episodes", "isolated"] = Field("states", description="What one job is.")
    path: Path | None = Field(
        None,
        description="Folder in the AgentDecisionBench layout, or (episodes) a task list as written by "
        "`knowwhen gym tasks`; episodes may give suite + split + n instead.",
    )
    variant: Literal["main", "nosurf", "nodist"] | None = Field(
        None, description="Shift re-rendering to read (questions_<variant>.jsonl[.gz]); rows carry it."
    )
    limit: int | None = Field(None, ge=1, description="Use only the first N questions (sorted by qhash).")
    version: str = Field(
        "1", pattern=_ID, description="Bump to re-run every job of this scenario (items are content-hashed)."
    )
    agent: str | None = Field(
        None, description="Episodes: model id of the agent LLM; default: the config's only llm-kind model."
    )
    suite: str | None = Field(
        None, description="Episodes without a path: DecisionGym preset (common, shift, hard) or suite JSON."
    )
    split: Literal["train", "fit", "bench", "eval"] | None = Field(
        None, description="Episodes without a path: the seed range (eval needs allow_eval)."
    )
    n: int | None = Field(None, ge=1, description="Episodes: number of tasks (with a path: the first N).")
    start: int = Field(0, ge=0, description="Episodes without a path: first seed offset inside the split.")
    allow_eval: bool = Field(
        False, description="Episodes: allow the reserved evaluation seeds (or KNOWWHEN_EVAL_RUNS=1)."
    )
    max_steps: int | None = Field(
        None,
        ge=1,
        le=200,
        description=f"Episodes: tool calls allowed per episode (default {DEFAULT_MAX_STEPS}).",
    )
    tau: Tau | None = Field(
        None,
        description="Episodes, mode gated: a fixed threshold, or {fit: <scenario id>, target: <accuracy|llm>}.",
    )
    repeats: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Episodes: run each task this many times (default 1); repeat r > 0 sends seed r to "
        "the agent LLM (part of the job id and the cache key), so success gets a per-task rate and pass^k.",
    )
    modes: list[Mode] | None = Field(
        None,
        description="Episodes: modes run on this task set (default: the sweep's); [] for a fit set that "
        "only runs the shadow episodes other scenarios' fits need.",
    )
    exclude: Path | None = Field(
        None, description="Isolated: a file of item ids to leave out, one per line (the development items)."
    )
    caps: dict[IsolatedSource, Annotated[int, Field(ge=0)]] | None = Field(
        None,
        description="Isolated: most items per source, first in file order (default 200 per BFCL "
        "category, 1,000 When2Call; 0 leaves a source out).",
    )

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> ScenarioSpec:
        if self.kind != "isolated":
            given = [name for name in _ISOLATED_ONLY if getattr(self, name) is not None]
            if given:
                raise ValueError(f"{given[0]}: only isolated scenarios take this field")
        if self.kind != "episodes":
            given = [name for name in _EPISODE_ONLY if getattr(self, name) not in (None, False)]
            if given:
                raise ValueError(f"{given[0]}: only episodes scenarios take this field")
            if self.path is None:
                raise ValueError(f"a {self.kind} scenario needs a path")
            return self
        if self.path is None and (self.split is None or self.n is None):
            raise ValueError("an episodes scenario needs a path (a task list) or split and n (and a suite)")
        if self.path is not None and (self.suite or self.split):
            raise ValueError("give an episodes scenario either a path or suite + split + n, not both")
        return self

    @property
    def steps(self) -> int:
        """The step budget of one episode."""
        return self.max_steps or DEFAULT_MAX_STEPS


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
        None, description="A database URL to keep the cache in (instead of store); ${VAR} is expanded."
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
            "its jobs stay pending for the next run. A down model's jobs never spend attempts."
        ),
    )
    batch_size: int = Field(64, ge=1, le=1024, description="Jobs claimed and recorded per transaction.")
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


class ServeSettings(_Frozen):
    """Start the built-in local model server (`knowwhen serve`) for this run if it is not running."""

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=1, le=65535)


class GateSettings(_Frozen):
    """Open-loop gating computed at finalise time: decision model when confident, else this LLM."""

    llm: str = Field(description="Model id of the LLM whose answers fill in below the threshold.")
    target: float | Literal["llm"] = Field(0.99, description="Accuracy the fitted threshold must reach.")


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
    """Word back when a run finishes, fails, spends a budget or quarantines a model."""

    command: str | None = Field(
        None,
        description=(
            "A command run on each event (split like a shell would, not run by one), with "
            "KNOWWHEN_EVENT, KNOWWHEN_RUN and KNOWWHEN_MESSAGE in its environment."
        ),
    )
    url: str | None = Field(None, description="A URL the event is posted to as JSON {run, event, message}.")


class SweepConfig(_Frozen):
    """A whole sweep: models x modes x scenarios, plus how to run it."""

    schema_version: Literal[1] = Field(1, description="Config format version.")
    name: str = Field(pattern=_ID, description="Run name; also the run's key in a shared database.")
    output: Path = Field(description="Run folder (answers, manifests, tables, the SQLite database).")
    db: str | None = Field(None, description="Database URL; default: sqlite file in the run folder.")
    models: list[ModelSpec] = Field(min_length=1)
    modes: list[Mode] = Field(default_factory=lambda: cast(list[Mode], ["model", "llm"]))
    scenarios: list[ScenarioSpec] = Field(min_length=1)
    cache: CacheSettings = Field(default_factory=lambda: CacheSettings())
    workers: WorkerSettings = Field(default_factory=lambda: WorkerSettings())
    serve: ServeSettings | None = Field(None, description="Start the built-in local server for this run.")
    gate: GateSettings | None = Field(None, description="Open-loop gating against an LLM.")
    budget: Budget | None = Field(None, description="Spending caps for the run (USD, tokens).")
    notify: Notify | None = Field(
        None, description="A command or URL told of finish, failure, budget, quarantine."
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
        self._check_budget()
        return self

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


# --- loading -------------------------------------------------------------------------------------------

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env(value: str, where: str) -> str:
    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable {name} is not set")

    return _ENV_REF.sub(sub, value)


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """Follow a pydantic error location through the YAML node tree; return the deepest line found."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            if nxt is None:
                key = next((k for k, _ in node.value if getattr(k, "value", None) == part), None)
                return key.start_mark.line + 1 if key is not None else line
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


def _find_literal_secret(
    node: yaml.Node, path: tuple[Any, ...] = ()
) -> tuple[tuple[Any, ...], yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = str(getattr(key, "value", ""))
            if name.lower() in _SECRET_FIELDS:
                return (*path, name), key
            found = _find_literal_secret(value, (*path, name))
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _find_literal_secret(item, (*path, i))
            if found:
                return found
    elif (
        isinstance(node, yaml.ScalarNode)
        and isinstance(node.value, str)
        and _KEY_SHAPE.match(node.value)
        and (not path or path[-1] not in {"model", "id", "name", "qhash"})
    ):
        return path, node
    return None


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def _as_list(value: Any) -> list[Any]:
    """A list field as a list; anything else is left for validation to report."""
    return value if isinstance(value, list) else []


def _resolve_paths(data: dict[str, Any], base: Path, source: str) -> dict[str, Any]:
    data = dict(data)
    if isinstance(data.get("output"), str):
        data["output"] = str((base / _expand_env(data["output"], f"{source}: output")).resolve())
    if isinstance(data.get("db"), str):
        data["db"] = _expand_env(data["db"], f"{source}: db")
    scenarios = []
    for i, sc in enumerate(_as_list(data.get("scenarios"))):
        if isinstance(sc, dict) and isinstance(sc.get("path"), str):
            sc = dict(sc)
            sc["path"] = str((base / _expand_env(sc["path"], f"{source}: scenarios.{i}.path")).resolve())
        if isinstance(sc, dict) and isinstance(sc.get("exclude"), str):
            sc = dict(sc)
            where = f"{source}: scenarios.{i}.exclude"
            sc["exclude"] = str((base / _expand_env(sc["exclude"], where)).resolve())
        scenarios.append(sc)
    if scenarios:
        data["scenarios"] = scenarios
    cache = data.get("cache")
    if isinstance(cache, dict) and isinstance(cache.get("path"), str):
        cache = {**cache, "path": str((base / _expand_env(cache["path"], f"{source}: cache.path")).resolve())}
    if isinstance(cache, dict) and isinstance(cache.get("url"), str):
        cache = {**cache, "url": _expand_env(cache["url"], f"{source}: cache.url")}
    if cache is not None:
        data["cache"] = cache
    models = []
    for i, m in enumerate(_as_list(data.get("models"))):
        if isinstance(m, dict) and isinstance(m.get("api_base"), str):
            m = dict(m)
            m["api_base"] = _expand_env(m["api_base"], f"{source}: models.{i}.api_base")
        models.append(m)
    if models:
        data["models"] = models
    return data


def load_config(path: str | Path) -> SweepConfig:
    """Load and validate a sweep config; every failure is one ``ConfigError`` line naming file and field."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config ({exc})") from None
    return parse_config(text, base=path.parent, source=str(path))


def parse_config(text: str, *, base: Path, source: str, check_files: bool = True) -> SweepConfig:
    """Validate config text; relative paths resolve against ``base``; ``source`` names it in errors.

    ``check_files=False`` skips checking that scenario paths exist (a config stored with a run, read on
    a machine that has none of its files).
    """
    path = source
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict) or root is None:
        raise ConfigError(f"{path}:1: a config is a YAML mapping (models, scenarios, output, ...)")
    secret = _find_literal_secret(root)
    if secret:
        loc, node = secret
        raise ConfigError(
            f"{path}:{node.start_mark.line + 1}: {_dotted(loc)}: literal API keys are not allowed in a config; "
            "put the key in an environment variable and name it with api_key_env"
        )
    data = _resolve_paths(data, base, source)
    try:
        config = SweepConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line = _line_of(root, loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{path}:{line}: {_dotted(loc)}: {msg}{more}") from None
    for i, sc in enumerate(config.scenarios if check_files else ()):
        if sc.path is not None and not sc.path.exists():
            line = _line_of(root, ("scenarios", i, "path"))
            raise ConfigError(f"{path}:{line}: scenarios.{i}.path: {sc.path} does not exist")
        if sc.exclude is not None and not sc.exclude.is_file():
            at = _line_of(root, ("scenarios", i, "exclude"))
            raise ConfigError(f"{path}:{at}: scenarios.{i}.exclude: {sc.exclude} is not a file")
    return config


def config_hash(path: Path) -> str:
    """sha256 of the config file's bytes, recorded in manifests for provenance."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
