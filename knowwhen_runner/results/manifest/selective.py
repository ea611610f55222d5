"""What a decision model's open-loop cell of a CXS manifest adds to its scores: calibration, the coverage
curve, the fitted threshold and the gate over the LLM (filled by ``selective_cells``).
"""

from __future__ import annotations

from typing import Literal

from .intervals import ManifestPart

__all__ = ["Calibration", "CoverageCurve", "CurvePoint", "Fit", "Gate", "GatePoint", "ReliabilityBin"]


class ReliabilityBin(ManifestPart):
    lower: float
    upper: float
    n: int
    mean_confidence: float
    accuracy: float


class Calibration(ManifestPart):
    """Calibration of the chosen option's confidence, pooled over occurrences (10 equal-width bins)."""

    ece: float | None
    brier: float | None
    bins: list[ReliabilityBin]


class CurvePoint(ManifestPart):
    threshold: float
    coverage: float
    accuracy: float
    support: int


class CoverageCurve(ManifestPart):
    """Selective accuracy: the occurrences with confidence ≥ τ, their share and their accuracy (pooled).

    ``area`` is the area under accuracy over coverage (= 1 − ``aurc``). Long curves are thinned to about
    200 points for storage; ``n_thresholds`` says how many distinct confidences the full curve had.
    """

    points: list[CurvePoint]
    area: float | None
    aurc: float | None
    n_thresholds: int
    thinned: bool


class Fit(ManifestPart):
    """The lowest τ whose covered accuracy reaches ``target``; ``target_source`` says where it came from."""

    target: float
    target_source: Literal["config", "llm", "default"]
    reachable: bool
    threshold: float | None
    coverage: float
    accuracy: float | None
    support: int


class GatePoint(ManifestPart):
    threshold: float
    coverage: float
    accuracy: float


class Gate(ManifestPart):
    """Open-loop gating over ``llm``: the model's answer where its confidence ≥ τ, the LLM's elsewhere.

    Accuracies are per task then mean (as L2 is scored), as fractions. ``curve`` may be thinned like the
    coverage curve; ``at_thresholds`` are exact, at a few fixed τ."""

    llm: str
    llm_accuracy: float
    model_accuracy: float
    at_fit: GatePoint | None
    at_thresholds: list[GatePoint]
    curve: list[GatePoint]
    thinned: bool
