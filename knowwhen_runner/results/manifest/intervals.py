"""The confidence intervals of a CXS manifest's cells (manifest schema 3 on): each names its method, level,
number of units, resamples and seed, so the same data always gives the same interval.

Their figures are computed in ``cell_intervals``; ``manifest`` holds the cells that carry them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BandPoint",
    "ClosedLoopIntervals",
    "ConfidenceInterval",
    "IsolatedIntervals",
    "ManifestPart",
    "OpenLoopIntervals",
]


class ManifestPart(BaseModel):
    """A part of a CXS manifest: frozen, and strict about extra fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfidenceInterval(ManifestPart):
    """A two-sided confidence interval of the figure it names, in that figure's unit (percent for a
    ``_pct``, else a fraction or a threshold). A bootstrap records its resamples and seed, so the same
    data always gives the same interval; ``skipped`` resamples left the statistic undefined."""

    estimate: float
    low: float
    high: float
    method: str = Field(description="wilson, cluster bootstrap, or cluster bootstrap with refit.")
    level: float
    n: int = Field(description="Units counted (Wilson: items) or resampled (bootstrap: tasks).")
    reps: int = 0
    seed: int | None = None
    skipped: int = 0


class BandPoint(ManifestPart):
    """Covered accuracy of the most confident items that cover ``coverage`` of them, with its interval."""

    coverage: float
    accuracy: float
    low: float
    high: float


class OpenLoopIntervals(ManifestPart):
    """Intervals of an open-loop cell: accuracy and must-ask (bootstrap over tasks, per task then mean); τ,
    coverage, gated accuracy and its gain over the LLM (paired, a fraction) at τ (the whole fit redone on
    each resample of the tasks); ECE and AURC (bootstrap over tasks)."""

    accuracy_pct: ConfidenceInterval | None = None
    must_ask_pct: ConfidenceInterval | None = None
    tau: ConfidenceInterval | None = None
    coverage_at_tau: ConfidenceInterval | None = None
    gated_accuracy_at_tau: ConfidenceInterval | None = None
    gain_at_tau: ConfidenceInterval | None = None
    ece: ConfidenceInterval | None = None
    aurc: ConfidenceInterval | None = None
    coverage_band: list[BandPoint] = Field(
        default_factory=list,
        description="The band around the coverage curve: covered accuracy at every 5% of coverage, with its "
        "interval (same bootstrap as ``tau``).",
    )


class IsolatedIntervals(ManifestPart):
    """Wilson intervals of L1 accuracy (percent): pooled, BFCL tool choice, every tool choice, arguments."""

    pooled_pct: ConfidenceInterval | None = None
    bfcl_tool_choice_pct: ConfidenceInterval | None = None
    tool_choice_pct: ConfidenceInterval | None = None
    argument_pct: ConfidenceInterval | None = None


class ClosedLoopIntervals(ManifestPart):
    """Interval of L3 success (a fraction): Wilson over episodes with one repeat per task, else a
    bootstrap over tasks of the per-task success."""

    success_rate: ConfidenceInterval | None = None
