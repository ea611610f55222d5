"""Read-outs: a plain language model on an OpenAI-compatible server (vLLM, SGLang, llama.cpp) answering a
decision question with one probability per option, read from its log-probabilities.

Read in this order: ``prompts`` (what is asked: labelled options, the constraint in each server's
dialect, the prompts a likelihood scores), ``reading`` (log-probabilities into probabilities, and why a
reply cannot be read), ``driver`` (the requests of one question and the response the cache stores, with
its diagnostics). The transport supplies the wire (``ReadoutWire``): litellm's chat and text completions.
"""

from __future__ import annotations

from .driver import ChatTop, EchoReply, ReadoutWire, read_out
from .prompts import (
    TOKEN_SYSTEM_PROMPT,
    ShownQuestion,
    constraint,
    likelihood_prompts,
    question_of,
    token_messages,
)
from .reading import EchoLine, Unreadable

__all__ = [
    "TOKEN_SYSTEM_PROMPT",
    "ChatTop",
    "EchoLine",
    "EchoReply",
    "ReadoutWire",
    "ShownQuestion",
    "Unreadable",
    "constraint",
    "likelihood_prompts",
    "question_of",
    "read_out",
    "token_messages",
]
