"""Which wire a model's requests take: the ones the runner speaks itself (``transport:``), else litellm.

The runner knows two wires exactly, as litellm sends them: System One decisions (``POST {base}/v1/systemone``,
for the litellm providers whose decisions config is the plain System One one) and OpenAI-compatible chat
completions (``POST {base}/chat/completions``, for ``openai/`` and ``hosted_vllm/`` models). A model goes
direct only with its ``api_base`` given and with params whose meaning on that wire is known; a read-out,
batches and every other provider stay with litellm.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["DIRECT_CHAT_PARAMS", "TransportChoice", "Wire", "direct_wire", "why_not_direct"]

TransportChoice = Literal["auto", "direct", "litellm"]
Wire = Literal["systemone", "chat"]

SYSTEMONE_PROVIDERS = ("hosted_vllm", "lm_studio", "ollama", "typesafe", "eu_jev", "nace")
"""litellm providers whose decisions config is the plain System One wire: path ``/v1/systemone``, a bearer
key, the request and reply as the vendor's format has them (litellm's ``BaseDecisionsConfig`` unchanged)."""
CHAT_PROVIDERS = ("openai", "hosted_vllm")
DIRECT_DECISION_PARAMS = frozenset({"extra_headers"})
DIRECT_CHAT_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "extra_body",
        "extra_headers",
    }
)
"""Params litellm sends to these chat servers as they are (``extra_body`` merged into the body,
``extra_headers`` into the headers); a model with any other param stays with litellm."""


def _special_openai_name(name: str) -> bool:
    """A name litellm sends through its own request rules (o-series, GPT-5: renamed or dropped params)."""
    return (len(name) > 1 and name[0] == "o" and name[1].isdigit()) or name.startswith("gpt-5")


def why_not_direct(
    model: str, kind: str, api_base: str | None, params: dict[str, Any], readout: bool
) -> str | None:
    """Why a model cannot go direct (a sentence), or None when it can."""
    provider, slash, name = model.partition("/")
    if not slash:
        return f"'{model}' names no provider (a direct wire is chosen by the prefix before '/')"
    if readout:
        return "a read-out goes through litellm"
    if kind == "decision":
        if provider not in SYSTEMONE_PROVIDERS:
            return (
                f"the runner speaks System One directly to {', '.join(SYSTEMONE_PROVIDERS)}, not {provider}"
            )
        known = DIRECT_DECISION_PARAMS
    else:
        if provider not in CHAT_PROVIDERS:
            return (
                f"the runner speaks chat completions directly to {', '.join(CHAT_PROVIDERS)}, not {provider}"
            )
        if provider == "openai" and _special_openai_name(name):
            return f"litellm rewrites requests to {name} (o-series and GPT-5 rules)"
        known = DIRECT_CHAT_PARAMS
    if api_base is None:
        return "it has no api_base"
    unknown = sorted(set(params) - known)
    if unknown:
        return f"its params {', '.join(unknown)} are litellm's to translate"
    return None


def direct_wire(
    model: str, kind: str, api_base: str | None, params: dict[str, Any], readout: bool
) -> Wire | None:
    """The wire the runner speaks itself to this model, or None (litellm's)."""
    if why_not_direct(model, kind, api_base, params, readout) is not None:
        return None
    return "systemone" if kind == "decision" else "chat"
