"""Selective-prediction metrics on small inputs whose values are worked out by hand in each test."""

from __future__ import annotations

import math

import pytest

from knowwhen_runner.dataset.metrics import (
    ThresholdPoint,
    accuracy_at_coverage,
    aurc,
    brier_score,
    coverage_accuracy_curve,
    expected_calibration_error,
    fit_threshold,
    gated_at,
    gated_curve,
)

CONF = [0.9, 0.8, 0.8, 0.5]
RIGHT = [True, False, True, False]


def test_ece_weights_each_bin_gap_by_its_share() -> None:
    """Bins 9, 5, 1 with gaps .45, .45, .15 and shares 2/4, 1/4, 1/4 give .225 + .1125 + .0375 = .375."""
    assert expected_calibration_error([0.95, 0.95, 0.55, 0.15], [1, 0, 1, 0]) == pytest.approx(0.375)


def test_ece_puts_confidence_one_in_the_last_bin() -> None:
    """conf 1.0 shares the [0.9, 1.0] bin with 0.91: |mean conf .955 − acc .5| = .455 (not .545 if apart)."""
    assert expected_calibration_error([1.0, 0.91], [False, True]) == pytest.approx(0.455)


def test_ece_of_a_perfectly_calibrated_bin_is_zero() -> None:
    """Four items at 0.75 with three right have no calibration error."""
    assert expected_calibration_error([0.75] * 4, [1, 1, 1, 0]) == pytest.approx(0.0)


def test_brier_is_mean_squared_gap_on_the_chosen_option() -> None:
    """(0.8 − 1)² and (0.3 − 0)² average to 0.065."""
    assert brier_score([0.8, 0.3], [True, False]) == pytest.approx(0.065)


def test_empty_inputs_give_none_or_nothing() -> None:
    """With no items there is no ECE, Brier, AURC or curve, and no threshold reaches a target."""
    assert expected_calibration_error([], []) is None and brier_score([], []) is None and aurc([], []) is None
    assert coverage_accuracy_curve([], []) == []
    assert not fit_threshold([], [], 0.5).reachable


def test_mismatched_lengths_and_missing_confidences_are_rejected() -> None:
    """Parallel inputs of different lengths, or a NaN confidence, are caller errors."""
    with pytest.raises(ValueError, match="same length"):
        brier_score([0.5], [True, False])
    with pytest.raises(ValueError, match="finite"):
        brier_score([math.nan], [True])


def test_curve_has_one_point_per_distinct_confidence_with_ties_covered_together() -> None:
    """τ = 0.9 covers 1 item (1/1), τ = 0.8 both tied items (2/3), τ = 0.5 all four (2/4)."""
    assert coverage_accuracy_curve(CONF, RIGHT) == [
        ThresholdPoint(0.9, 0.25, 1.0, 1),
        ThresholdPoint(0.8, 0.75, pytest.approx(2 / 3), 3),  # type: ignore[arg-type]
        ThresholdPoint(0.5, 1.0, 0.5, 4),
    ]


def test_aurc_is_the_step_integral_of_risk_over_coverage() -> None:
    """.25·0 + .5·(1/3) + .25·(1/2) = 0.291666…, whatever the order of tied items."""
    assert aurc(CONF, RIGHT) == pytest.approx(0.25 * 0 + 0.5 / 3 + 0.25 * 0.5)
    assert aurc([0.8, 0.5, 0.9, 0.8], [True, False, True, False]) == pytest.approx(aurc(CONF, RIGHT))


def test_aurc_without_ties_is_the_mean_risk_of_the_top_k() -> None:
    """Risks 0, 1/2, 1/3 for the top 1, 2, 3 items average to 5/18."""
    assert aurc([0.9, 0.8, 0.7], [1, 0, 1]) == pytest.approx(5 / 18)


def test_accuracy_at_coverage_takes_the_first_threshold_reaching_it() -> None:
    """50% coverage is first reached at τ = 0.8 (75% covered, acc 2/3); 100% at τ = 0.5."""
    points = accuracy_at_coverage(CONF, RIGHT, (0.5, 1.0))
    assert [(p.target_coverage, p.threshold, p.coverage, p.support) for p in points] == [
        (0.5, 0.8, 0.75, 3),
        (1.0, 0.5, 1.0, 4),
    ]
    assert points[0].accuracy == pytest.approx(2 / 3)


def test_fit_threshold_takes_the_lowest_qualifying_threshold() -> None:
    """For a 0.6 target the accuracies 1, 2/3, 1/2 qualify down to τ = 0.8, covering 3 items."""
    fit = fit_threshold(CONF, RIGHT, 0.6)
    assert (fit.reachable, fit.threshold, fit.coverage, fit.support) == (True, 0.8, 0.75, 3)
    assert fit.accuracy == pytest.approx(2 / 3)
    assert fit_threshold(CONF, RIGHT, 1.0).threshold == 0.9


def test_fit_threshold_does_not_assume_accuracy_falls_with_tau() -> None:
    """Accuracies 0, 1/2, 2/3 at τ = .9, .8, .7: a 0.6 target is met only at the lowest, τ = 0.7."""
    assert fit_threshold([0.9, 0.8, 0.7], [0, 1, 1], 0.6).threshold == 0.7


def test_fit_threshold_unreachable_target_and_min_support() -> None:
    """No τ reaches 1.01, and with min_support=2 none reaches 1.0: both say unreachable, no τ."""
    for fit in (fit_threshold(CONF, RIGHT, 1.01), fit_threshold(CONF, RIGHT, 1.0, min_support=2)):
        assert (fit.reachable, fit.threshold, fit.accuracy, fit.support, fit.coverage) == (
            False,
            None,
            None,
            0,
            0.0,
        )


def test_fit_threshold_reaches_a_target_met_exactly() -> None:
    """99 right of 100 meets a 0.99 target despite floating-point rounding."""
    fit = fit_threshold([0.5] * 100, [True] * 99 + [False], 0.99)
    assert fit.reachable and fit.support == 100


GATE = ([0.9, 0.5, 0.5, 0.2], [True, True, False, False], [False, True, True, True])


def test_gated_curve_end_points_and_steps() -> None:
    """LLM alone .75; delegating item 0 gains .25; items 1–2 lose .25; item 3 loses .25; τ = 0 is the model's .5."""
    curve = gated_curve(*GATE)
    assert [(p.coverage, p.accuracy) for p in curve] == [
        (0.0, pytest.approx(0.75)),
        (0.25, pytest.approx(1.0)),
        (0.75, pytest.approx(0.75)),
        (1.0, pytest.approx(0.5)),
        (1.0, pytest.approx(0.5)),
    ]
    assert curve[0].threshold > 0.9 and [p.threshold for p in curve[1:]] == [0.9, 0.5, 0.2, 0.0]


def test_gated_curve_with_task_weights() -> None:
    """Item 0 is task A (weight .5), items 1–3 task B (1/6 each): LLM alone .5, model alone .5 + 1/6."""
    weights = [0.5, 1 / 6, 1 / 6, 1 / 6]
    curve = gated_curve(*GATE, weights)
    assert curve[0].accuracy == pytest.approx(0.5) and curve[-1].accuracy == pytest.approx(0.5 + 1 / 6)
    assert gated_at(*GATE, 0.9, weights).accuracy == pytest.approx(1.0)


def test_gated_at_agrees_with_every_curve_point() -> None:
    """Evaluating one τ directly gives the same coverage and accuracy as the curve's one-pass sum."""
    for point in gated_curve(*GATE):
        direct = gated_at(*GATE, point.threshold)
        assert (direct.coverage, direct.accuracy) == (
            pytest.approx(point.coverage),
            pytest.approx(point.accuracy),
        )


def test_gated_weights_must_sum_to_one() -> None:
    """Weights that are not a distribution are rejected rather than silently rescaled."""
    with pytest.raises(ValueError, match="sum to 1"):
        gated_curve(*GATE, [1.0, 1.0, 1.0, 1.0])
