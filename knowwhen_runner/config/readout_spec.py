"""How a plain language model served by vLLM, SGLang or llama.cpp answers as a decision model.

The ``readout`` section of a decision model turns an OpenAI-compatible server's log-probabilities into
one probability per option: ``token`` reads the first answer token's ``top_logprobs`` over labelled
options, ``likelihood`` scores each option as a continuation of the prompt (``echo`` on completions).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .fields import _Frozen

__all__ = ["LABEL_SETS", "ReadoutSpec"]

LABEL_SETS: dict[str, tuple[str, ...]] = {
    # Capital letters are one token in every tokenizer the read-out was tried with, with or without a
    # leading space; numbers above 9 are split into digits by some (Gemma's, Llama 2's), so a group of
    # numbered options holds at most nine.
    "letters": tuple(chr(c) for c in range(ord("A"), ord("Z") + 1)),
    "numbers": tuple(str(n) for n in range(1, 10)),
}


class ReadoutSpec(_Frozen):
    """Per-option probabilities from a server's log-probabilities (part of job ids and cache keys)."""

    method: Literal["token", "likelihood"] = Field(
        description=(
            "'token': the options labelled in the prompt, the answer read from the first token's "
            "top_logprobs; 'likelihood': each option's log-probability as a continuation of the prompt "
            "(completions with echo), normalised over the options."
        )
    )
    server: Literal["vllm", "sglang", "llama.cpp", "openai"] = Field(
        "openai",
        description=(
            "The server, for how the answer is constrained to the labels: vLLM structured_outputs "
            "choice, SGLang regex, llama.cpp grammar; 'openai' sends no constraint."
        ),
    )
    labels: Literal["letters", "numbers"] = Field(
        "letters", description="token: option labels, A-Z (26 per group) or 1-9 (9 per group)."
    )
    top_logprobs: int = Field(
        20,
        ge=2,
        le=1000,
        description=(
            "token: how many log-probabilities the server returns per token (vLLM: 20 unless started "
            "with --max-logprobs; llama.cpp: any)."
        ),
    )
    too_many: Literal["groups", "refuse"] = Field(
        "groups",
        description=(
            "token: options beyond one group (the labels, or top_logprobs if fewer) are asked in groups "
            "whose leaders meet in a last round ('groups'), or the question is refused ('refuse')."
        ),
    )
    score: Literal["sum", "mean"] = Field(
        "sum",
        description=(
            "likelihood: an option's score is the sum of its tokens' log-probabilities ('sum') or their "
            "mean ('mean', length-normalised); both are kept in the diagnostics."
        ),
    )
    shuffle_seed: int | None = Field(
        None,
        description=(
            "Show the options in an order drawn per question from this seed, to measure position bias; "
            "none: the question's own order."
        ),
    )

    def group_size(self) -> int:
        """The most options one token question asks: the labels, or what the server returns if fewer."""
        return min(len(LABEL_SETS[self.labels]), self.top_logprobs)
