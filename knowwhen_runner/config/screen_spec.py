"""The ``screen:`` block: stop asking a model once an anytime-valid bound settles the user's question.

Off by default. ``keep`` is the question: the best ``top`` models, the models at or above a ``floor``,
or the models ``not_worse_than`` a reference by more than a margin (on the paired difference); ``top`` may
take an indifference zone, ``within``.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from .fields import _ID, _Frozen

__all__ = ["Keep", "NotWorseThanSpec", "ScreenSettings"]


class NotWorseThanSpec(_Frozen):
    """The reference model and how much worse than it a kept model may be."""

    model: str = Field(
        pattern=_ID, description="The id of the reference model (it answers every screened task)."
    )
    margin: float = Field(
        0.0, ge=0, lt=1, description="How far below the reference's accuracy a kept model may be."
    )


class Keep(_Frozen):
    """Which models a screen keeps: exactly one of ``top``, ``floor`` and ``not_worse_than``."""

    top: int | None = Field(None, ge=1, description="Keep the best this many models by accuracy.")
    floor: float | None = Field(
        None, gt=0, lt=1, description="Keep the models whose accuracy (a fraction, 0 to 1) is at least this."
    )
    not_worse_than: NotWorseThanSpec | None = Field(
        None, description="Keep the models not worse than this reference by more than its margin (paired)."
    )
    within: float | None = Field(
        None,
        gt=0,
        lt=1,
        description=(
            "With top: an indifference zone around the top-th best accuracy; a model no more than this "
            "below it may be kept, one no more than this above it may be dropped (near-ties settle early)."
        ),
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> Keep:
        given = [name for name in ("top", "floor", "not_worse_than") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of top, floor and not_worse_than")
        if self.within is not None and self.top is None:
            raise ValueError("within goes with top only")
        return self


class ScreenSettings(_Frozen):
    """A screen: which scenario's accuracy settles it, at which level, and which models it keeps."""

    scenario: str = Field(
        pattern=_ID,
        description=(
            "The id of the states scenario whose accuracy (per task, then the mean over tasks) is screened; "
            "its jobs are claimed in a seeded order of tasks drawn before the first call."
        ),
    )
    alpha: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Chance that any decision of the screen is wrong, at most (split across the models raced).",
    )
    keep: Keep = Field(
        description="{top: N} (or {top: N, within: w}), {floor: x} or {not_worse_than: {model: ID, margin: m}}."
    )
    seed: int = Field(
        0, ge=0, description="Seed of the drawn order of tasks (the same seed, the same order)."
    )
