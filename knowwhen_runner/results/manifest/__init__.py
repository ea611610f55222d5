"""The CXS manifest, one versioned JSON document per model, in reading order: ``intervals`` (the
interval parts every cell shares), ``selective`` (calibration, coverage curves, fits and gates of a
decision model's open-loop cell), ``readout`` (a read-out model's diagnostics), ``document`` (the cells, the manifest itself, and its reading and writing).
"""

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
from .readout import PositionBias, ReadoutAgreement, ReadoutRecord, readout_record
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
    "PositionBias",
    "ReadoutAgreement",
    "ReadoutRecord",
    "ReliabilityBin",
    "RunProvenance",
    "ScenarioProvenance",
    "Scope",
    "Stratum",
    "Tokens",
    "Validity",
    "load_manifest",
    "manifest_path",
    "readout_record",
]
