"""What a read-out asks (pure): the question of a System One body as labelled prompts or continuations.

``ShownQuestion`` is the decision body read back (state, instructions, options in the order shown). A token
question lists its options under labels and asks for one label; the server is asked to constrain its
answer to the labels in its own dialect. A likelihood question is one prompt per option, the option's
name as the continuation of a prompt shared by all of them.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from ...config.readout_spec import LABEL_SETS, ReadoutSpec

__all__ = [
    "TOKEN_SYSTEM_PROMPT",
    "ShownQuestion",
    "constraint",
    "groups",
    "likelihood_prompts",
    "question_of",
    "token_messages",
]

TOKEN_SYSTEM_PROMPT = (
    "You are the tool-choice step of a customer-service agent. Read the agent's state and answer with the "
    "label of the one option the agent should take next."
)


@dataclass(frozen=True, slots=True)
class ShownQuestion:
    """One decision question as a read-out shows it: ``shown`` is the options in the order presented."""

    state: str
    instructions: str
    shown: tuple[str, ...]
    descriptions: dict[str, str]


def question_of(body: dict[str, Any], spec: ReadoutSpec) -> ShownQuestion:
    """The question of a System One body (``decision_body``), its options in the order they are shown.

    With ``shuffle_seed`` the order is a permutation drawn from the seed and the question's own text, so
    the same question is shown the same way on every run and two questions are shuffled independently.
    """
    (ask,) = body["questions"].values()
    criteria: dict[str, Any] = ask["criteria"]
    options = list(criteria)
    if spec.shuffle_seed is not None:
        digest = hashlib.sha256(f"{spec.shuffle_seed}|{body['state']}|{'|'.join(options)}".encode()).digest()
        random.Random(digest).shuffle(options)
    descriptions = {name: str(desc or "") for name, desc in criteria.items()}
    return ShownQuestion(str(body["state"]), str(ask.get("instructions") or ""), tuple(options), descriptions)


def groups(options: tuple[str, ...], size: int) -> list[tuple[str, ...]]:
    """Options split into as few groups of at most ``size`` as will hold them, as even as can be."""
    count = -(-len(options) // size)
    base, extra = divmod(len(options), count)
    out, start = [], 0
    for i in range(count):
        end = start + base + (i < extra)
        out.append(options[start:end])
        start = end
    return out


def token_messages(
    question: ShownQuestion, options: tuple[str, ...], spec: ReadoutSpec
) -> list[dict[str, str]]:
    """The chat messages of a token question over ``options`` (at most one group), labelled in order."""
    labels = LABEL_SETS[spec.labels]
    lines = [
        f"{labels[i]}. {name}: {question.descriptions.get(name, '')}".rstrip(": ")
        for i, name in enumerate(options)
    ]
    what = "letter" if spec.labels == "letters" else "number"
    user = (
        f"{question.state}\n\n{question.instructions}\n\nOptions:\n"
        + "\n".join(lines)
        + f"\n\nAnswer with the {what} of one option only."
    )
    return [{"role": "system", "content": TOKEN_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def constraint(spec: ReadoutSpec, labels: tuple[str, ...]) -> dict[str, Any]:
    """The request fields that constrain the answer to ``labels``, in the server's own dialect.

    vLLM (0.12 and later): ``structured_outputs.choice``; SGLang: ``regex``; llama.cpp: a GBNF
    ``grammar``. The log-probabilities stay the model's own on all three (read before the constraint),
    so the constraint only keeps the sampled token a label; an unknown server gets none.
    """
    if spec.server == "vllm":
        return {"structured_outputs": {"choice": list(labels)}}
    if spec.server == "sglang":
        return {"regex": "(" + "|".join(labels) + ")"}
    if spec.server == "llama.cpp":
        return {"grammar": "root ::= " + " | ".join(f'"{label}"' for label in labels)}
    return {}


def likelihood_prompts(question: ShownQuestion) -> tuple[str, list[str]]:
    """The prompt every option continues, and the continuation of each option in ``question.shown``."""
    lines = [f"- {name}: {question.descriptions.get(name, '')}".rstrip(": ") for name in question.shown]
    prompt = f"{question.state}\n\n{question.instructions}\n\nOptions:\n" + "\n".join(lines) + "\n\nAnswer:"
    return prompt, [f" {name}" for name in question.shown]
