"""What a read-out reads (pure): a server's log-probabilities turned into one probability per option.

A token question's labels are found among the first token's ``top_logprobs`` (``A`` and `` A`` are the
same label: their probabilities add up) and renormalised over the labels; the mass the labels held
before that is a diagnostic, and so is a label the top list left out (it gets probability 0: the
server's cut-off, not the model's judgement). Groups of options are joined by Luce's choice axiom: an
option's strength is its probability in its group scaled by how its group's leader fared in the round of
leaders, exact when the model's preferences between two options do not depend on the others shown.
A likelihood question's options are scored by the log-probabilities of their own tokens, summed or
averaged per token, and turned into probabilities by a softmax over the options.

Anything a reply lacks or gets wrong (no log-probabilities, no label at all, a log-probability that is
not a number) raises ``Unreadable`` with the reason, which becomes the answer's error, never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "EchoLine",
    "LabelRead",
    "Unreadable",
    "continuation_logprobs",
    "join_groups",
    "read_labels",
    "softmax",
]


class Unreadable(Exception):
    """A reply a read-out cannot turn into probabilities; the message is the answer's error."""


@dataclass(frozen=True, slots=True)
class LabelRead:
    """The labels' probabilities in one token reply: renormalised, the mass they held, the ones left out."""

    probabilities: dict[str, float]
    mass: float
    missing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EchoLine:
    """One echoed prompt of a completions reply: its tokens, their log-probabilities and where each starts."""

    tokens: Sequence[str]
    logprobs: Sequence[float | None]
    offsets: Sequence[int]


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Unreadable(f"the server returned {value!r} as the log-probability of {what}, not a number")
    if math.isnan(value) or value == math.inf:
        raise Unreadable(
            f"the server returned {value} as the log-probability of {what}, not a log-probability"
        )
    return float(value)


def read_labels(top: Sequence[tuple[str, object]] | None, labels: Sequence[str], asked: int) -> LabelRead:
    """The labels' probabilities among one reply's first-token ``top`` (``asked`` of them were asked)."""
    if not top:
        raise Unreadable(
            "the server returned no top_logprobs for the first token (does it support logprobs and "
            "top_logprobs on chat completions?)"
        )
    wanted = set(labels)
    found: dict[str, float] = {}
    for token, logprob in top:
        key = token.strip()
        if key in wanted:
            found[key] = found.get(key, 0.0) + math.exp(_number(logprob, repr(token)))
    mass = sum(found.values())
    if not found or mass <= 0.0:
        shown = f"{labels[0]}-{labels[-1]}" if len(labels) > 1 else labels[0]
        raise Unreadable(
            f"none of the labels {shown} is among the {min(len(top), asked)} most likely first tokens"
        )
    missing = tuple(label for label in labels if label not in found)
    return LabelRead({label: found.get(label, 0.0) / mass for label in labels}, mass, missing)


def join_groups(
    within: Sequence[dict[str, float]], leaders: Sequence[str], final: dict[str, float]
) -> dict[str, float]:
    """One distribution over every option from each group's own and the round of the groups' leaders.

    ``within[g]`` is group g's distribution over its options, ``leaders[g]`` the option that led it and
    ``final`` the leaders' distribution in their round. Under Luce's axiom an option's strength relative
    to its group's leader is the same in any company, so it is ``within[g][o] / within[g][leader]``
    times the leader's probability among the leaders.
    """
    strength: dict[str, float] = {}
    for group, leader in zip(within, leaders, strict=True):
        scale = final.get(leader, 0.0) / group[leader] if group[leader] > 0 else 0.0
        for option, p in group.items():
            strength[option] = p * scale
    total = sum(strength.values())
    if total <= 0.0:
        raise Unreadable("the round of the groups' leaders gave every leader probability 0")
    return {option: s / total for option, s in strength.items()}


def continuation_logprobs(line: EchoLine, start: int, end: int) -> list[float]:
    """The log-probabilities of the tokens that make up characters ``start:end`` of an echoed prompt.

    A token that straddles ``start`` belongs to the continuation (the tokenizer merged the option's
    first character into it); the first token of a prompt has no log-probability and is never an
    option's, since an option is never the start of its prompt.
    """
    if not (len(line.tokens) == len(line.logprobs) == len(line.offsets)) or not line.tokens:
        raise Unreadable("the server's echo has no per-token log-probabilities (does it support echo?)")
    out: list[float] = []
    for token, logprob, offset in zip(line.tokens, line.logprobs, line.offsets, strict=True):
        if offset < end and offset + max(len(token), 1) > start:
            if logprob is None:
                raise Unreadable(f"the server gave no log-probability for the option's token {token!r}")
            out.append(_number(logprob, repr(token)))
    if not out:
        raise Unreadable(
            "the server's echo does not reach the option (it returned log-probabilities for the "
            "generated tokens only: it ignores echo)"
        )
    return out


def softmax(scores: dict[str, float]) -> dict[str, float]:
    """Scores (log-probabilities) normalised into probabilities over the options."""
    top = max(scores.values())
    if top == -math.inf:
        raise Unreadable("every option has log-probability -inf")
    weights = {k: math.exp(v - top) for k, v in scores.items()}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}
