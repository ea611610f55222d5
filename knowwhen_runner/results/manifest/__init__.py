"""The CXS manifest, one versioned JSON document per model, in reading order: ``intervals`` (the
interval parts every cell shares), ``selective`` (calibration, coverage curves, fits and gates of a
decision model's open-loop cell), ``deferral`` (its deferral scorecard and the τ with a guarantee), ``document`` (the cells, the manifest itself, and its reading and writing).
"""

from .deferral import Deferral, DeferralPoint, EqualMassCalibration, RiskGuarantee
from .document import (
    MANIFEST_SCHEMA_VERSION,
    ClosedLoopCell,
    Cost,
    CxsManifest,
    IsolatedCell,
    JobTally,
    Latency,
    ModelRef,
    OpenLoopCell,
    Operations,
    RunProvenance,
    ScenarioProvenance,
    Scope,
    Stratum,
    Tokens,
    Validity,
    load_manifest,
    manifest_path,
)
from .intervals import (
    BandPoint,
    ClosedLoopIntervals,
    ConfidenceInterval,
    IsolatedIntervals,
    OpenLoopIntervals,
)
from .selective import Calibration, CoverageCurve, CurvePoint, Fit, Gate, GatePoint, ReliabilityBin

__all__ = [
    "MANIFEST_SCHEMA_VERSION",
    "BandPoint",
    "Calibration",
    "ClosedLoopCell",
    "ClosedLoopIntervals",
    "ConfidenceInterval",
    "Cost",
    "CoverageCurve",
    "CurvePoint",
    "CxsManifest",
    "Deferral",
    "DeferralPoint",
    "EqualMassCalibration",
    "Fit",
    "Gate",
    "GatePoint",
    "IsolatedCell",
    "IsolatedIntervals",
    "JobTally",
    "Latency",
    "ModelRef",
    "OpenLoopCell",
    "OpenLoopIntervals",
    "Operations",
    "ReliabilityBin",
    "RiskGuarantee",
    "RunProvenance",
    "ScenarioProvenance",
    "Scope",
    "Stratum",
    "Tokens",
    "Validity",
    "load_manifest",
    "manifest_path",
]
