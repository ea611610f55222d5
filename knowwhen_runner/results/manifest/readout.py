"""How a read-out model's answers were read (manifest schema 8): the diagnostics of its answers pooled.

A model answering through a read-out (``readout:`` in its config) records per answer how much of the
first token's probability sat on the labels, how many labels the server's top list cut off, the
server's logprobs mode when it states it, and where the chosen option was shown. Pooled here: with a
shuffled order a model without position bias picks the first shown option at the rate 1/options on
average, so the two figures side by side measure the bias; and two read-outs of the same served model
in one run are compared question by question.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import Field

from .intervals import ManifestPart

__all__ = ["PositionBias", "ReadoutAgreement", "ReadoutRecord", "readout_record"]


class PositionBias(ManifestPart):
    """Where the chosen option was shown, over answers whose options were shuffled."""

    answers: int = Field(description="Valid answers of shuffled questions.")
    first_shown_rate: float = Field(description="Share of them that chose the option shown first.")
    first_shown_expected: float = Field(
        description="The same share for a model without position bias: the mean of 1/options."
    )
    mean_position: float = Field(description="Mean shown position (0-based) of the chosen option.")
    mean_position_expected: float = Field(description="The same without bias: the mean of (options-1)/2.")


class ReadoutAgreement(ManifestPart):
    """This read-out against another read-out of the same served model in the run."""

    model: str = Field(description="The other model's id.")
    method: str = Field(description="The other model's read-out method.")
    questions: int = Field(description="Questions both answered validly.")
    disagree: int = Field(description="Of those, how many they answered differently.")


class ReadoutRecord(ManifestPart):
    """The model's read-out and its answers' diagnostics, pooled over every question it answered."""

    settings: dict[str, Any] = Field(description="The model's readout section as configured.")
    answers: int = Field(description="Answers read out (cache hits included).")
    invalid: int = Field(description="Answers the read-out could not read (their error says why).")
    requests_per_answer: float | None = Field(description="Mean requests one answer took.")
    label_mass_mean: float | None = Field(
        description="token: mean probability mass the labels held on the first token (the lowest of an "
        "answer's requests); near 1 means the model answers with a label."
    )
    label_mass_min: float | None = Field(description="token: the lowest label mass of any answer.")
    cut_off_answers: int = Field(description="Answers where the server's top_logprobs left out a label.")
    logprobs_modes: list[str] = Field(description="The logprobs modes the server stated (none: it did not).")
    sum_mean_disagree: int | None = Field(
        None, description="likelihood: answers where summed and length-normalised scores chose differently."
    )
    position_bias: PositionBias | None = Field(description="Shuffled questions only; null otherwise.")
    agreement: list[ReadoutAgreement] = Field(
        default_factory=list, description="Against other read-outs of the same served model in the run."
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def readout_record(
    settings: dict[str, Any],
    rows: Iterable[Mapping[str, Any]],
    others: Mapping[str, tuple[str, Iterable[Mapping[str, Any]]]],
) -> ReadoutRecord | None:
    """The pooled diagnostics of a read-out model's answer rows; ``others`` maps another read-out model
    of the same served model to its method and rows. None when no row carries a read-out's diagnostics."""
    read = [(r, r["readout"]) for r in rows if isinstance(r.get("readout"), Mapping)]
    if not read:
        return None
    masses = [float(d["label_mass"]) for _, d in read if isinstance(d.get("label_mass"), int | float)]
    requests = [float(d["requests"]) for _, d in read if isinstance(d.get("requests"), int | float)]
    modes = sorted({str(d["logprobs_mode"]) for _, d in read if d.get("logprobs_mode")})
    shuffled = [
        (d["position"], d["options"])
        for r, d in read
        if d.get("shuffled") and r.get("valid") and isinstance(d.get("position"), int) and d.get("options")
    ]
    bias = None
    if shuffled:
        bias = PositionBias(
            answers=len(shuffled),
            first_shown_rate=sum(p == 0 for p, _ in shuffled) / len(shuffled),
            first_shown_expected=sum(1 / n for _, n in shuffled) / len(shuffled),
            mean_position=sum(p for p, _ in shuffled) / len(shuffled),
            mean_position_expected=sum((n - 1) / 2 for _, n in shuffled) / len(shuffled),
        )
    likelihood = [d for _, d in read if d.get("method") == "likelihood" and d.get("sum_choice")]
    mine = {str(r.get("qhash")): r.get("answer") for r, _ in read if r.get("valid")}
    agreement = []
    for other_id, (method, other_rows) in sorted(others.items()):
        theirs = {str(r.get("qhash")): r.get("answer") for r in other_rows if r.get("valid")}
        both = sorted(set(mine) & set(theirs))
        agreement.append(
            ReadoutAgreement(
                model=other_id,
                method=method,
                questions=len(both),
                disagree=sum(mine[q] != theirs[q] for q in both),
            )
        )
    return ReadoutRecord(
        settings=settings,
        answers=len(read),
        invalid=sum(1 for _, d in read if d.get("invalid")),
        requests_per_answer=_mean(requests),
        label_mass_mean=_mean(masses),
        label_mass_min=min(masses) if masses else None,
        cut_off_answers=sum(1 for _, d in read if d.get("cut_off")),
        logprobs_modes=modes,
        sum_mean_disagree=sum(d["sum_choice"] != d["mean_choice"] for d in likelihood)
        if likelihood
        else None,
        position_bias=bias,
        agreement=agreement,
    )
