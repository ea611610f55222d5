"""One read-out answer: the requests a question needs, sent through a ``ReadoutWire``, read into a
normalised decision response (what the cache stores), diagnostics and all.

The wire is the transport's (litellm's chat and text completions); this module decides what to ask and
in what order, so the same logic serves every server. A reply it cannot read makes an answer with no
choice and the reason under ``readout.invalid``: an invalid answer, never a failed call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ...config.readout_spec import LABEL_SETS, ReadoutSpec
from .prompts import ShownQuestion, constraint, groups, likelihood_prompts, question_of, token_messages
from .reading import EchoLine, Unreadable, continuation_logprobs, join_groups, read_labels, softmax

__all__ = ["ChatTop", "EchoReply", "ReadoutWire", "read_out"]


@dataclass(frozen=True, slots=True)
class ChatTop:
    """A chat reply's first token: its ``top_logprobs`` as (token, log-probability), and the usage."""

    top: list[tuple[str, Any]] | None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    logprobs_mode: str | None = None


@dataclass(frozen=True, slots=True)
class EchoReply:
    """A completions reply to a batch of prompts with ``echo``: one line per prompt, in order."""

    lines: list[EchoLine]
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0


class ReadoutWire(Protocol):
    """The two requests read-outs make of an OpenAI-compatible server."""

    async def first_token(
        self, messages: list[dict[str, str]], top_logprobs: int, extra_body: dict[str, Any]
    ) -> ChatTop:
        """A chat completion of one token with ``logprobs`` and ``top_logprobs``."""
        ...

    async def echo(self, prompts: list[str]) -> EchoReply:
        """A completion of a batch of prompts with ``echo`` and ``logprobs``."""
        ...


@dataclass
class _Spent:
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    masses: list[float] = field(default_factory=list)
    cut: int = 0  # options whose label the top list left out
    modes: set[str] = field(default_factory=set)

    def add(self, reply: ChatTop | EchoReply) -> None:
        self.requests += 1
        self.input_tokens += reply.input_tokens
        self.output_tokens += reply.output_tokens
        if self.cost_usd is not None:
            self.cost_usd = None if reply.cost_usd is None else self.cost_usd + reply.cost_usd


async def read_out(spec: ReadoutSpec, body: dict[str, Any], wire: ReadoutWire) -> dict[str, Any]:
    """The normalised decision response of one question (``decision_body``) read out through ``wire``."""
    question = question_of(body, spec)
    spent = _Spent()
    diag: dict[str, Any] = {"method": spec.method, "invalid": None}
    probs: dict[str, float] | None = None
    try:
        if spec.method == "token":
            probs = await _token(question, question.shown, spec, wire, spent)
        else:
            probs = await _likelihood(question, spec, wire, spent, diag)
    except Unreadable as exc:
        diag["invalid"] = str(exc)
    choice = (
        None if probs is None else max(question.shown, key=lambda o: (probs[o], -question.shown.index(o)))
    )
    diag.update(
        requests=spent.requests,
        label_mass=min(spent.masses) if spent.masses else None,
        cut_off=spent.cut,
        logprobs_mode=",".join(sorted(spent.modes)) or None,
        shuffled=spec.shuffle_seed is not None,
        options=len(question.shown),
        position=None if choice is None else question.shown.index(choice),
    )
    original = next(iter(body["questions"].values()))["criteria"]
    return {
        "choice": choice,
        "confidence": None if probs is None or choice is None else probs[choice],
        "probabilities": None if probs is None else {o: probs[o] for o in original},
        "input_tokens": spent.input_tokens,
        "output_tokens": spent.output_tokens,
        "cost_usd": spent.cost_usd,
        "readout": diag,
    }


def _refusal(count: int, spec: ReadoutSpec) -> str:
    size = spec.group_size()
    setting = {
        "vllm": "start vLLM with --max-logprobs and raise readout.top_logprobs",
        "sglang": "raise readout.top_logprobs to what the server returns",
        "llama.cpp": "raise readout.top_logprobs (llama.cpp returns as many as asked)",
        "openai": "raise readout.top_logprobs to what the server returns",
    }[spec.server]
    return (
        f"{count} options, but one token question reads at most {size} "
        f"(readout.top_logprobs {spec.top_logprobs}, {len(LABEL_SETS[spec.labels])} {spec.labels}): "
        f"{setting}, or set readout.too_many to 'groups'"
    )


async def _token(
    question: ShownQuestion, options: tuple[str, ...], spec: ReadoutSpec, wire: ReadoutWire, spent: _Spent
) -> dict[str, float]:
    """Each option's probability in a token question over ``options`` (groups and rounds when many)."""
    size = spec.group_size()
    if len(options) <= size:
        labels = LABEL_SETS[spec.labels][: len(options)]
        reply = await wire.first_token(
            token_messages(question, options, spec), spec.top_logprobs, constraint(spec, labels)
        )
        spent.add(reply)
        if reply.logprobs_mode:
            spent.modes.add(reply.logprobs_mode)
        read = read_labels(reply.top, labels, spec.top_logprobs)
        spent.masses.append(read.mass)
        spent.cut += len(read.missing)
        return {option: read.probabilities[label] for option, label in zip(options, labels, strict=False)}
    if spec.too_many == "refuse":
        raise Unreadable(_refusal(len(options), spec))
    within = [await _token(question, group, spec, wire, spent) for group in groups(options, size)]
    leaders = tuple(max(group, key=lambda o: group[o]) for group in within)
    final = await _token(question, leaders, spec, wire, spent)
    return join_groups(within, leaders, final)


async def _likelihood(
    question: ShownQuestion, spec: ReadoutSpec, wire: ReadoutWire, spent: _Spent, diag: dict[str, Any]
) -> dict[str, float]:
    """Each option's probability from its log-likelihood as the prompt's continuation."""
    prompt, continuations = likelihood_prompts(question)
    reply = await wire.echo([prompt + c for c in continuations])
    spent.add(reply)
    if len(reply.lines) != len(continuations):
        raise Unreadable(f"the server answered {len(reply.lines)} of {len(continuations)} prompts")
    sums: dict[str, float] = {}
    means: dict[str, float] = {}
    tokens: list[int] = []
    for option, cont, line in zip(question.shown, continuations, reply.lines, strict=True):
        logprobs = continuation_logprobs(line, len(prompt), len(prompt) + len(cont))
        sums[option] = sum(logprobs)
        means[option] = sums[option] / len(logprobs)
        tokens.append(len(logprobs))
    by_sum, by_mean = softmax(sums), softmax(means)
    diag["option_tokens"] = sum(tokens) / len(tokens)
    diag["sum_choice"] = max(by_sum, key=lambda o: by_sum[o])
    diag["mean_choice"] = max(by_mean, key=lambda o: by_mean[o])
    return by_sum if spec.score == "sum" else by_mean
