"""Log-probabilities for read-out requests, derived from a decision model's probabilities (pure).

A token question is the read-out's user message (the state, the instructions, ``Options:`` with one
``LABEL. name: description`` line each); its labels get ``log(LABEL_MASS * p)`` and a token that is no
label the rest, so a read-out finds LABEL_MASS on the labels, as it would with a real model that mostly
answers with a label. The top list is cut at what the request asks, and a request for more than
MAX_LOGPROBS is refused, as vLLM refuses more than its ``--max-logprobs`` (20 by default). An echoed
prompt (the likelihood read-out's: ``- name: description`` lines, then ``Answer:`` and the option) is
split into whitespace-led tokens; the option's tokens share ``log p`` of the option.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["LABEL_MASS", "MAX_LOGPROBS", "LogprobsRefusal", "echo_choices", "first_token_logprobs"]

MAX_LOGPROBS = 20
LABEL_MASS = 0.95
_LABELLED = re.compile(r"^([A-Z]|[1-9])\. ([^:\n]+?)(?:: (.*))?$")
_LISTED = re.compile(r"^- ([^:\n]+?)(?:: (.*))?$")
_PIECE = re.compile(r"\s*\S+")

Decide = Callable[[str, Sequence[str], Sequence[str | None]], Sequence[float]]


class LogprobsRefusal(ValueError):
    """A read-out request the server refuses (HTTP 400), with the reason."""


def _split(text: str, marker: str) -> tuple[str, list[str], str]:
    """(state, option lines, the rest) of a read-out prompt: the instructions are its last paragraph
    before ``Options:``."""
    head, found, tail = text.rpartition("\n\nOptions:\n")
    if not found:
        raise LogprobsRefusal("the prompt lists no options (no 'Options:' paragraph)")
    state, _, _instructions = head.rpartition("\n\n")
    block, found, rest = tail.partition(marker)
    if not found:
        raise LogprobsRefusal("the prompt's options are not followed by the question's answer line")
    return state or head, block.split("\n"), rest


def first_token_logprobs(
    messages: Sequence[dict[str, Any]], top: int, decide: Decide
) -> list[dict[str, Any]]:
    """The first token's ``top_logprobs`` for a token read-out's chat ``messages``, best first."""
    if top > MAX_LOGPROBS:
        raise LogprobsRefusal(f"top_logprobs {top} is more than this server returns ({MAX_LOGPROBS})")
    users = [m for m in messages if m.get("role") == "user"]
    text = str(users[-1].get("content") or "") if users else ""
    state, lines, _rest = _split(text, "\n\nAnswer with")
    parsed = [_LABELLED.match(line) for line in lines]
    if not parsed or not all(parsed):
        raise LogprobsRefusal("an option line is not 'LABEL. name: description'")
    labels = [m.group(1) for m in parsed if m]
    probs = decide(state, [m.group(2) for m in parsed if m], [m.group(3) for m in parsed if m])
    entries = [
        (label, math.log(LABEL_MASS * p) if p > 0 else -math.inf)
        for label, p in zip(labels, probs, strict=True)
    ]
    entries.append(("The", math.log(1 - LABEL_MASS)))
    entries.sort(key=lambda e: -e[1])
    return [
        {"token": t, "logprob": lp if lp > -math.inf else -9999.0, "bytes": list(t.encode())}
        for t, lp in entries[:top]
    ]


def echo_choices(prompts: Sequence[str], decide: Decide) -> list[dict[str, Any]]:
    """One echoed completion per likelihood prompt: every token of prompt and option with its
    log-probability and offset, and the generated token after them."""
    out = []
    cache: dict[str, Sequence[float]] = {}
    for index, full in enumerate(prompts):
        cut = full.rfind("\n\nAnswer:")
        if cut < 0:
            raise LogprobsRefusal("the prompt has no 'Answer:' line for the option to continue")
        prompt, option = full[: cut + len("\n\nAnswer:")], full[cut + len("\n\nAnswer:") :].strip()
        state, lines, _rest = _split(prompt, "\n\nAnswer:")
        parsed = [_LISTED.match(line) for line in lines]
        if not parsed or not all(parsed):
            raise LogprobsRefusal("an option line is not '- name: description'")
        names = [m.group(1) for m in parsed if m]
        if option not in names:
            raise LogprobsRefusal(f"the continuation {option!r} is not one of the listed options")
        if prompt not in cache:
            cache[prompt] = decide(state, names, [m.group(2) for m in parsed if m])
        p = cache[prompt][names.index(option)]
        tokens: list[str] = []
        logprobs: list[float | None] = []
        offsets: list[int] = []
        pieces = list(_PIECE.finditer(full))
        own = [m for m in pieces if m.start() >= len(prompt)]
        for m in pieces:
            tokens.append(m.group(0))
            offsets.append(m.start())
            if m.start() >= len(prompt):
                logprobs.append(math.log(p) / len(own) if p > 0 else -9999.0)
            else:
                logprobs.append(None if m.start() == 0 else -1.0)
        tokens.append(".")
        offsets.append(len(full))
        logprobs.append(-0.5)
        out.append(
            {
                "index": index,
                "text": full + ".",
                "logprobs": {
                    "tokens": tokens,
                    "token_logprobs": logprobs,
                    "text_offset": offsets,
                    "top_logprobs": None,
                },
                "finish_reason": "length",
            }
        )
    return out
