"""A model of the sweep: how it is reached, how hard it may be driven, its prices and provider batches."""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from ..redaction import secret_digest
from .fields import _ENV_NAME, _ID, _KEY_SHAPE, _RUNNER_PARAMS, _Frozen
from .readout_spec import ReadoutSpec
from .transport_spec import TransportChoice, Wire, direct_wire, why_not_direct


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


BATCH_PROVIDERS = ("openai", "azure", "vertex_ai", "bedrock", "mistral", "xai")
"""litellm providers whose files and batches endpoints litellm drives (docs/batches.md)."""
OPENAI_COMPATIBLE = ("hosted_vllm", "litellm_proxy", "openai_like", "custom_openai")
"""Providers that, given an ``api_base``, are OpenAI-compatible servers: batched through OpenAI's endpoints."""


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
    max_errors: int = Field(
        5,
        ge=1,
        le=1000,
        description=(
            "Provider requests for one batch (looking it up, reading its status or files) that may fail in a "
            "row; then the batch is given up and its questions are answered synchronously, each once."
        ),
    )


# A provider's dated or numbered snapshot of the name asked: OpenAI's ``gpt-4o-2024-08-06`` and older
# ``gpt-4-0613``, Anthropic's ``claude-3-5-sonnet-20241022``, Mistral's ``mistral-large-2411`` (asked as
# ``-latest``), Google's ``gemini-1.5-pro-002``. Nothing else may follow the name asked.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{3,4})")


def _same_model(asked: str, answered: str) -> bool:
    """Whether ``answered`` names the model ``asked`` (a litellm model string or a ``served_as`` alias):
    the same name, with or without the litellm provider prefix (``hosted_vllm/x`` asked, ``x`` answered),
    or a snapshot of it (``_SNAPSHOT``). Case is ignored."""
    asked, answered = asked.strip().casefold(), answered.strip().casefold()
    provider, slash, bare = asked.partition("/")
    names = {asked, bare} if slash else {asked}
    if slash and answered.startswith(provider + "/"):
        answered = answered[len(provider) + 1 :]  # litellm puts its provider back in front of some replies
    if answered in names:
        return True
    for name in names:
        base = name.removesuffix("-latest")
        if answered.startswith(base) and _SNAPSHOT.fullmatch(answered[len(base) :]):
            return True
    return False


class ModelSpec(_Frozen):
    """A decision model or an LLM, reached through litellm or the runner's own HTTP client (``transport``)."""

    id: str = Field(pattern=_ID, description="Short id used in files and tables, e.g. 'e12'.")
    model: str = Field(min_length=1, description="litellm model string, e.g. 'hosted_vllm/lexical'.")
    kind: Literal["decision", "llm"] = Field(description="'decision' (System One) or 'llm' (chat + tools).")
    api_base: str | None = Field(
        None,
        description=(
            "Base URL; ${VAR} is expanded from the environment. A password, a credential query param or a "
            "secret path must come from a variable; what a variable gives is shown as ${VAR}, and a base no "
            "variable gave whole only in its public form."
        ),
    )
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the key.")
    rate_limit: RateLimit = Field(
        default_factory=lambda: RateLimit(), description="Requests/tokens per minute, in flight."
    )
    limit_group: str | None = Field(None, description="Models with the same group share one rate limit.")
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout in seconds (runtime knob).")
    pricing: Pricing | None = Field(None, description="Price override; default: litellm's price list.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Output-affecting request params. A credential in them (an extra_headers token, an extra_query "
            "key) is written ${VAR}: expanded only when a request is sent, never stored or hashed."
        ),
    )
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
    served_as: str | list[str] | None = Field(
        None,
        description=(
            "Other names the provider answers this model with (the `model` of its replies), when they are "
            "neither the model string nor one of its documented forms: a reply naming any other model is "
            "not this model's answer."
        ),
    )
    tool_choice: Literal["required", "auto"] = Field(
        "required",
        description=(
            "LLMs: the tool_choice sent when the LLM picks the tool ('auto' for servers that refuse "
            "'required'; a reply without a tool call is then nudged in episodes and invalid open loop)."
        ),
    )
    readout: ReadoutSpec | None = Field(
        None,
        description=(
            "Decision models: a plain language model on an OpenAI-compatible server (vLLM, SGLang, "
            "llama.cpp) answers through its log-probabilities instead of System One (docs/models.md)."
        ),
    )

    transport: TransportChoice | None = Field(
        None,
        description=(
            "How requests are sent (runtime knob): 'direct' (the runner's own HTTP client, for System One "
            "and OpenAI-compatible chat servers given an api_base), 'litellm', or 'auto' (direct where the "
            "wire is known, else litellm). Default: workers.transport (docs/transport.md)."
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
    def _readout_for_decisions(self) -> ModelSpec:
        if self.readout is not None and self.kind != "decision":
            raise ValueError("readout: only decision models (kind: decision) answer through a read-out")
        return self

    @model_validator(mode="after")
    def _batch_for_llms(self) -> ModelSpec:
        if self.batch is not None and self.batch.enabled and self.kind != "llm":
            raise ValueError("batch: only LLMs (kind: llm) answer through a Batch API")
        provider = self.model.split("/", 1)[0] if "/" in self.model else "openai"
        reached = provider in BATCH_PROVIDERS or (self.api_base is not None and provider in OPENAI_COMPATIBLE)
        if self.batch is not None and self.batch.enabled and not reached:
            raise ValueError(
                f"batch: litellm creates no provider batches for '{provider}' (it does for "
                f"{', '.join(BATCH_PROVIDERS)}, and OpenAI-compatible servers given an api_base); "
                "remove the batch section"
            )
        return self

    @model_validator(mode="after")
    def _direct_known(self) -> ModelSpec:
        if self.transport == "direct" and (why := self.why_not_direct()) is not None:
            raise ValueError(f"transport: direct: {why}; use auto or litellm")
        return self

    def why_not_direct(self) -> str | None:
        """Why the runner cannot send this model's requests itself (a sentence), None when it can."""
        return why_not_direct(self.model, self.kind, self.api_base, self.params, self.readout is not None)

    def wire(self, default: TransportChoice = "auto") -> Wire | None:
        """The wire the runner speaks itself to this model, None where litellm sends its requests
        (``transport``; ``default``: the workers' choice, for a model that makes none)."""
        if (self.transport or default) == "litellm":
            return None
        return direct_wire(self.model, self.kind, self.api_base, self.params, self.readout is not None)

    def batches(self) -> bool:
        """Whether this model's open-loop questions go to provider batches."""
        return self.batch is not None and self.batch.enabled

    def answers_as(self, name: str) -> bool:
        """Whether a reply that says it came from ``name`` is this model's own (see ``_SNAPSHOT``)."""
        aliases = [self.served_as] if isinstance(self.served_as, str) else list(self.served_as or ())
        return any(_same_model(asked, name) for asked in (self.model, *aliases))

    def served_model(self) -> str:
        """The litellm model string, with ``@revision`` when a revision is declared (for job ids)."""
        return self.model if self.revision is None else f"{self.model}@{self.revision}"

    def identity_params(self) -> dict[str, Any]:
        """The params that decide this model's answers, for job ids (a non-default tool_choice too)."""
        extra: dict[str, Any] = {}
        if self.tool_choice != "required":  # as before the setting existed: earlier job ids stay the same
            extra["tool_choice"] = self.tool_choice
        if self.readout is not None:
            extra["readout"] = self.readout.model_dump()
        return {**self.params, **extra} if extra else self.params

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
        """Which models share a limit: the explicit group, else the same model string, base URL and key variable.

        The base URL and the key variable enter as a digest: the key is stored (``kw_limits``) and shown,
        and a base may carry a credential or a secret path."""
        if self.limit_group:
            return f"group:{self.limit_group}"
        provider = self.model.split("/", 1)[0]
        where = secret_digest(f"{self.api_base or ''}|{self.api_key_env or ''}")
        return f"{provider}|{self.model}|{where}"
