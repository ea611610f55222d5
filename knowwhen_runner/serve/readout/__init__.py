"""The reference decision models answering read-out requests, as vLLM or llama.cpp would serve a plain
language model: a one-token chat completion with ``top_logprobs`` over labelled options, and a batch of
completions with ``echo``. Log-probabilities are derived from the model's own option probabilities, so a
read-out of ``prior`` or ``lexical`` records what their System One answers give.

``logprobs`` reads the runner's read-out prompts back into a question and answers it.
"""

from __future__ import annotations

from .logprobs import MAX_LOGPROBS, LogprobsRefusal, echo_choices, first_token_logprobs

__all__ = ["MAX_LOGPROBS", "LogprobsRefusal", "echo_choices", "first_token_logprobs"]
