"""The deferral scorecard of a decision model's open-loop and closed-loop cells (manifest schema 8): when to hand a decision
to it rather than to the LLM, in the terms routing papers use (RouteLLM's APGR and CPT, RouterBench's AIQ,
HELM's calibration figures), and the τ chosen with a guarantee (Learn-then-Test). Filled by
``selective_cells`` from ``dataset.deferral`` and ``dataset.risk_control``; see docs/deferral.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .intervals import ManifestPart

__all__ = [
    "ClosedLoopDeferral",
    "Deferral",
    "DeferralPoint",
    "EpisodeDeferral",
    "EpisodePassK",
    "EpisodeRouterPoint",
    "EqualMassCalibration",
    "RiskGuarantee",
    "Transfer",
]


class DeferralPoint(ManifestPart):
    """The gate at one τ: the share of decisions sent to the LLM, the pooled accuracy, the cost per
    decision (USD: the model asked every time, the LLM on what is deferred; null without both prices)."""

    threshold: float
    llm_share: float
    accuracy: float
    cost: float | None


class EqualMassCalibration(ManifestPart):
    """HELM's calibration figures of the chosen option's confidence (pooled over occurrences)."""

    ece: float = Field(description="ECE over 10 equal-mass bins (HELM's ece_10_bin).")
    small_sample: bool = Field(description="Fewer than 300 occurrences: the 10-bin ECE is mostly noise.")
    platt_coef: float | None = Field(
        description="Platt scaling σ(coef · logit(p) + intercept); null when all right or all wrong."
    )
    platt_intercept: float | None
    ece_platt: float = Field(
        description="The same ECE after Platt scaling (0 when all right or all wrong, as HELM)."
    )
    top10_accuracy: float = Field(
        description="Accuracy of the ⌊N/10⌋ + 1 most confident (HELM's selective_acc@10)."
    )


class RiskGuarantee(ManifestPart):
    """τ chosen by Learn-then-Test: every τ in ``valid`` has error ≤ ``risk`` among the decisions it
    delegates, with probability ≥ 1 − ``delta`` over the draw of the occurrences it was fitted on.
    ``threshold`` is the lowest valid τ (the most coverage); null when none is valid, and then the gate
    delegates nothing (coverage 0, the LLM's accuracy)."""

    risk: float
    delta: float
    method: str
    n: int = Field(description="Occurrences the test rests on.")
    grid: list[float] = Field(description="The τ tried, ascending (tested from the highest down).")
    min_support: int = Field(
        description="A τ delegating fewer decisions cannot be shown valid and is passed over."
    )
    valid: list[float] = Field(description="The valid region: every τ of the grid shown valid, ascending.")
    threshold: float | None
    coverage: float
    error: float | None = Field(
        description="Error among the decisions delegated at the chosen τ (on the fit set)."
    )
    support: int
    gated_accuracy: float = Field(description="Pooled gated accuracy at the chosen τ (the LLM's when none).")


class Transfer(ManifestPart):
    """A τ chosen on another scenario (``source``) applied here: what it promised there and the error it
    achieves among the decisions it delegates here, with a 95% Wilson interval. A promise holds on the
    distribution it was made on; ``broken`` says the interval lies wholly above it here."""

    source: str = Field(description="The scenario whose data chose τ (the fit set).")
    tau: float
    promise: Literal["guarantee", "fitted"] = Field(
        description="guarantee: Learn-then-Test (error ≤ risk w.p. ≥ 1 − delta there); fitted: a point fit to a target accuracy."
    )
    promised_error: float = Field(description="risk, or 1 − the target accuracy of a fitted τ.")
    delta: float | None
    n: int = Field(description="Decisions delegated here whose right answer is known.")
    errors: int
    error: float | None
    low: float | None
    high: float | None
    broken: bool


class Deferral(ManifestPart):
    """The deferral scorecard over ``llm``: accuracy against the share of LLM calls (``curve``), the
    oracle (which defers only what the model gets wrong and the LLM right: ``oracle_gain`` of the items)
    and random deferral (the straight line between the model alone and the LLM alone). Accuracies are
    pooled over occurrences, as the peers compute them."""

    llm: str
    n: int
    model_accuracy: float
    llm_accuracy: float
    oracle_gain: float = Field(description="Share of occurrences the model gets wrong and the LLM right.")
    apgr: float | None = Field(
        description="RouteLLM's average performance gap recovered (null without a gap)."
    )
    apgr_oracle: float | None = Field(description="Area above the model alone, as a share of the oracle's.")
    cpt50: float | None = Field(description="Least share of LLM calls recovering 50% of the gap (RouteLLM).")
    cpt80: float | None = Field(description="Least share of LLM calls recovering 80% of the gap (RouteLLM).")
    aiq: float | None = Field(
        description="RouterBench's AIQ over cost per decision (or LLM share, see aiq_basis)."
    )
    aiq_basis: Literal["usd", "llm_calls"]
    aurc: float
    aurc_oracle: float = Field(description="AURC of a perfect ranking of the same answers.")
    aurc_excess: float = Field(description="aurc − aurc_oracle (E-AURC).")
    calibration: EqualMassCalibration
    curve: list[DeferralPoint] = Field(
        description="From nothing deferred to everything; thinned to ~200 points."
    )
    thinned: bool
    guarantee: RiskGuarantee | None = Field(None, description="Present when the config's gate sets a risk.")
    transfers: list[Transfer] = Field(
        default_factory=list, description="The τ with a guarantee of each other question set, applied here."
    )


class EpisodeRouterPoint(ManifestPart):
    """One episodes cell as a router point: the share of decisions the LLM took, the task success, the
    cost per episode (USD, null when the run priced nothing)."""

    tau: float | None = Field(description="The gated cell's τ; null for the model alone and the LLM alone.")
    llm_share: float
    success: float
    cost: float | None


class EpisodePassK(ManifestPart):
    """The same router points scored by pass^k (every one of k repeats of a task succeeds)."""

    k: int = Field(description="The largest k every cell of the scenario has repeats for.")
    model_success: float
    llm_success: float
    success: list[float] = Field(description="pass^k of each of ``points``, in their order.")
    apgr: float | None
    cpt50: float | None
    cpt80: float | None


class EpisodeDeferral(ManifestPart):
    """The closed loop's deferral scorecard over episodes: the model alone (share 0), each gated τ (at
    its share of decisions the LLM took) and the LLM alone (the shadow episodes, share 1) as router
    points of task success. The oracle hands whole episodes to the LLM where the model alone fails and the
    LLM alone succeeds (episodes paired by task and repeat); random deferral is the straight line."""

    llm: str
    n: int = Field(
        description="Episodes paired by task and repeat between the model alone and the LLM alone."
    )
    model_success: float
    llm_success: float
    oracle_gain: float = Field(
        description="Share of paired episodes the model alone fails and the LLM alone succeeds."
    )
    points: list[EpisodeRouterPoint] = Field(description="From the model alone to the LLM alone by share.")
    apgr: float | None
    apgr_oracle: float | None
    cpt50: float | None
    cpt80: float | None
    aiq: float | None
    aiq_basis: Literal["usd", "llm_calls"]
    above_oracle: list[float] = Field(
        description="τ whose success exceeds the whole-episode oracle at its share (a gate mixes decisions within an episode, which the oracle does not)."
    )
    pass_k: EpisodePassK | None = Field(None, description="With repeats: the same points by pass^k.")


class ClosedLoopDeferral(ManifestPart):
    """What an episodes cell of a decision model says of delegation (see docs/deferral.md): the
    calibration of its decision points, the per-decision scorecard where every decision has both
    outcomes (shadow), the scenario's episode scorecard (on the shadow cell), and a gated cell's τ
    transferred from its fit set. ``missing`` names each null figure with the reason it is not recorded."""

    transfer: Transfer | None = None
    calibration: EqualMassCalibration | None = Field(
        None,
        description="Decision points the model answered: its confidence and whether its pick was acceptable.",
    )
    decisions: Deferral | None = Field(
        None, description="Shadow: the open-loop scorecard over the decision points of the LLM's episodes."
    )
    episodes: EpisodeDeferral | None = Field(
        None, description="On the shadow cell: the scenario's cells as router points of task success."
    )
    missing: dict[str, str] = Field(default_factory=dict, description="Figure -> why it is null here.")
