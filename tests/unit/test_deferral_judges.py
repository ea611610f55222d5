"""The deferral scorecard and the τ with a guarantee, judged by code this project did not write.

MAPIE's Learn-then-Test and the ``calibration`` package HELM uses run here (dev extras). RouteLLM (its
package requires torch and transformers) and RouterBench (not published as a package) are transcribed
from their source files, named on each function, and our figures must equal theirs to 1e-9 where the
definitions match.
"""

from __future__ import annotations

import warnings

import calibration as helm_cal
import numpy as np
import pytest
from mapie.risk_control import BinaryClassificationController

from knowwhen_runner.dataset.deferral import (
    aiq,
    calls_to_recover,
    deferral_scorecard,
    ece_equal_mass,
    platt_fit,
    platt_scale,
    top_accuracy,
)
from knowwhen_runner.dataset.metrics import aurc
from knowwhen_runner.dataset.risk_control import DEFAULT_GRID, binomial_cdf, learn_then_test, min_support


# --- RouteLLM, routellm/evals/evaluate.py (generate_results: pct_call_metric, auc_metric, apgr_metric) ----
def _routellm_cpt(shares_pct: np.ndarray, accs: np.ndarray, weak: float, strong: float, pct: float) -> float:
    order = np.argsort(shares_pct, kind="stable")
    return float(np.interp(pct * (strong - weak) + weak, accs[order], shares_pct[order]))


def _routellm_apgr(shares_pct: np.ndarray, accs: np.ndarray, weak: float, strong: float) -> float:
    order = np.argsort(shares_pct, kind="stable")
    x, y = shares_pct[order] / 100, accs[order]
    auc = np.trapezoid(y, x)
    weak_auc = np.trapezoid(np.full(len(x), weak), x)
    strong_auc = np.trapezoid(np.full(len(x), strong), x)
    return float((auc - weak_auc) / (strong_auc - weak_auc))


# --- RouterBench, evaluation/AIQ.py (get_non_descreasing_convex_hull_of, calc_AIQ for one router) ---------
def _routerbench_hull(points: np.ndarray) -> np.ndarray:
    pts = points[points[:, 0].argsort()]
    new: list[list[float]] = []
    for i in range(len(pts)):
        for j in range(i, len(pts)):
            x1, y1 = pts[i]
            x2, y2 = pts[j]
            for k in range(len(pts)):
                x, y = pts[k]
                if x1 < x < x2:
                    yi = np.interp(x, [x1, x2], [y1, y2])
                    if y < yi:
                        if x not in [mx for mx, _ in new]:
                            new.append([x, yi])
                        else:
                            for m in range(len(new)):
                                xn, yn = new[m]
                                if xn == x and yn < yi:
                                    new[m] = [x, yi]
                                    break
                                elif xn == x and yn > yi:
                                    new[m] = [x, yn]
                    if y >= yi:
                        if x not in [mx for mx, _ in new]:
                            new.append([x, y])
                        else:
                            for m in range(len(new)):
                                xn, yn = new[m]
                                if xn == x and yn < y:
                                    new[m] = [x, y]
                                    break
                                elif xn == x and yn > y:
                                    new[m] = [x, yn]
    if pts[-1][0] not in [mx for mx, _ in new] and pts[-1][1] >= new[-1][1]:
        new.append(list(pts[-1]))
    if pts[0][0] not in [mx for mx, _ in new]:
        new = [list(pts[0]), *new]
    hull = np.array(new)
    hull = hull[hull[:, 0].argsort()]
    drop = [i for i in range(1, len(hull)) if hull[i][1] < hull[i - 1][1]]
    return np.delete(hull, drop, axis=0)


def _routerbench_aiq(routers: list[np.ndarray]) -> list[float]:
    hulls = [_routerbench_hull(points) for points in routers]
    max_x = max(np.max(hull[:, 0]) for hull in hulls)
    hulls = [np.vstack((hull, np.array([max_x, hull[-1, 1]]))) for hull in hulls]
    return [float(np.trapezoid(hull[:, 1], hull[:, 0]) / max_x) for hull in hulls]


def _aiq_beside_its_top_cost(points: np.ndarray) -> float:
    """RouterBench's AIQ of a router compared with one that reaches its highest cost (the LLM alone, for a
    gate): the frame in which a gate's AIQ is read."""
    low, high = points[:, 0].min(), points[:, 0].max()
    top = np.array([[low, 0.0], [(low + high) / 2, 0.0], [high, 0.0]])  # its hull needs three points
    return _routerbench_aiq([np.unique(points, axis=0), top])[0]


def _items(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct confidences, a model right about as often as it is confident, an LLM right 85 % of the time."""
    rng = np.random.default_rng(seed)
    conf = rng.permutation(np.linspace(0.05, 0.995, n)) + rng.uniform(0, 1e-6, n)
    return conf, rng.uniform(size=n) < conf, rng.uniform(size=n) < 0.85


@pytest.mark.parametrize("seed", range(12))
def test_apgr_and_cpt_equal_routellm_on_the_same_curve(seed: int) -> None:
    """APGR equals RouteLLM's to 1e-9 on any curve, and CPT(50 %), CPT(80 %) wherever its np.interp is
    defined (accuracy rising with the share of strong calls)."""
    conf, model, llm = _items(seed, 400)
    card = deferral_scorecard(conf, model, llm)
    shares = np.array([p.llm_share for p in card.curve])
    accs = np.array([p.accuracy for p in card.curve])
    weak, strong = card.model_accuracy, card.llm_accuracy
    assert card.apgr == pytest.approx(_routellm_apgr(100 * shares, accs, weak, strong), abs=1e-9)
    # np.interp needs accuracy strictly rising with the share: keep the points that set a new best.
    ordered, by_share = np.sort(shares), accs[np.argsort(shares, kind="stable")]
    record = np.r_[True, by_share[1:] > np.maximum.accumulate(by_share)[:-1]]
    ordered, rising = ordered[record], by_share[record]
    for pct in (0.5, 0.8):
        ours = calls_to_recover(ordered, rising, weak, strong, pct)
        assert ours == pytest.approx(_routellm_cpt(100 * ordered, rising, weak, strong, pct) / 100, abs=1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_aiq_equals_routerbench_on_the_same_points(seed: int) -> None:
    """AIQ of a set of (cost, quality) points equals RouterBench's calc_AIQ to 1e-9."""
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 25))
    points = np.column_stack([rng.permutation(rng.uniform(0.1, 5.0, n)), rng.uniform(0.3, 0.9, n)])
    assert aiq(points[:, 0], points[:, 1]) == pytest.approx(_aiq_beside_its_top_cost(points), abs=1e-9)


def test_aiq_equals_routerbench_on_a_gated_cost_curve() -> None:
    """On a real gated curve's (cost per decision, accuracy) points, AIQ equals RouterBench's."""
    conf, model, llm = _items(3, 60)
    card = deferral_scorecard(
        conf, model, llm, model_cost=np.full(60, 1e-5), llm_cost=np.linspace(1e-3, 3e-3, 60)
    )
    assert card.aiq_basis == "usd"
    points = np.array([[p.cost, p.accuracy] for p in card.curve])
    assert card.aiq == pytest.approx(_aiq_beside_its_top_cost(points), abs=1e-9)


@pytest.mark.parametrize(("seed", "n"), [(0, 1000), (1, 357), (2, 37), (3, 9), (4, 3)])
def test_equal_mass_ece_equals_helms(seed: int, n: int) -> None:
    """ECE over 10 equal-mass bins equals calibration.get_ece_em (HELM's ece_10_bin) to 1e-9, with ties and
    with fewer items than bins."""
    rng = np.random.default_rng(seed)
    conf = np.round(rng.uniform(0.2, 1.0, n), 2)  # rounded: ties cross the bin edges
    correct = (rng.uniform(size=n) < conf).astype(int)
    assert ece_equal_mass(conf, correct) == pytest.approx(
        helm_cal.get_ece_em(conf, correct, num_bins=10), abs=1e-9
    )


@pytest.mark.parametrize("seed", range(5))
def test_platt_scaling_matches_helms_fit(seed: int) -> None:
    """Platt coefficients match HELM's scikit-learn fit (its solver stops at a tolerance, ours at the
    optimum: 1e-3), and the ECE after scaling matches to 1e-4."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.3, 0.999, 800)
    correct = (rng.uniform(size=800) < conf**2).astype(int)
    ours = platt_fit(conf, correct)
    scaler, clf = helm_cal.get_platt_scaler(conf, correct, get_clf=True)
    assert ours is not None
    assert ours.coef == pytest.approx(clf.coef_[0][0], abs=1e-3)
    assert ours.intercept == pytest.approx(clf.intercept_[0], abs=1e-3)
    theirs = helm_cal.get_ece_em(scaler(conf), correct, num_bins=10)
    assert ece_equal_mass(platt_scale(conf, ours), correct) == pytest.approx(theirs, abs=1e-4)


@pytest.mark.parametrize("seed", range(5))
def test_selective_figures_equal_helms(seed: int) -> None:
    """Accuracy of the most confident 10 % and 1 − AURC equal HELM's selective_acc@10 and
    selective_cov_acc_area (distinct confidences, where its sort order is unambiguous)."""
    conf, model, _ = _items(seed, 523)
    area, top = helm_cal.get_selective_stats(conf, model.astype(int))
    assert top_accuracy(conf, model) == pytest.approx(top, abs=1e-9)
    assert 1.0 - (aurc(conf, model) or 0.0) == pytest.approx(area, abs=1e-9)


def _mapie(
    conf: np.ndarray, correct: np.ndarray, risk: float, delta: float, grid: np.ndarray
) -> BinaryClassificationController:
    controller = BinaryClassificationController(
        lambda x: np.column_stack([1 - x, x]),
        risk="precision",
        target_level=1 - risk,
        confidence_level=1 - delta,
        list_predict_params=grid,
        fwer_method="fixed_sequence",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its note that a grid of probabilities is used as such
        controller.calibrate(conf, correct)
    return controller


@pytest.mark.parametrize("seed", range(40))
def test_learn_then_test_gives_mapies_valid_thresholds(seed: int) -> None:
    """For the same risk, delta and grid, the valid τ are MAPIE's (precision of the delegated set, fixed
    sequence) and so are the p-values; where MAPIE's float ceil(n·r̂) counts one error too many, its
    binomial term is that of one more error, and its valid set can only be smaller, never larger."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(80, 900))
    conf = rng.uniform(0.2, 1.0, n)
    correct = (rng.uniform(size=n) < np.sqrt(conf)).astype(int)
    risk, delta = float(rng.choice([0.05, 0.1, 0.2])), float(rng.choice([0.05, 0.1, 0.2]))
    covered = np.array([(conf >= t).sum() for t in DEFAULT_GRID])
    grid = np.array(DEFAULT_GRID)[covered >= min_support(risk, delta)]  # MAPIE would stop at a thin top
    theirs = _mapie(conf, correct, risk, delta, grid)
    ours = learn_then_test(conf, correct, risk, delta, grid)
    mapie_p = theirs.p_values[:, 0]
    ours_p = np.array(ours.p_values, dtype=float)
    n_at = np.array([(conf >= t).sum() for t in grid])
    e_at = np.array([((conf >= t) & (correct == 0)).sum() for t in grid])
    r = np.minimum(e_at / n_at, risk)
    with np.errstate(divide="ignore", invalid="ignore"):
        h1 = np.where(r > 0, r * np.log(r / risk), 0.0) + (1 - r) * np.log((1 - r) / (1 - risk))
    one_more = np.minimum(
        np.exp(-n_at * h1), binomial_cdf(e_at + 1, n_at, risk)
    )  # Hoeffding takes r̂ as it is
    same = np.isclose(mapie_p, ours_p, rtol=1e-9, atol=1e-300)
    assert np.all(same | np.isclose(mapie_p, one_more, rtol=1e-9))
    if same.all():
        assert ours.valid == sorted(theirs.valid_predict_params.tolist())
    else:
        assert set(theirs.valid_predict_params.tolist()) <= set(ours.valid)
    if ours.valid and same.all():
        assert ours.threshold == pytest.approx(theirs.best_predict_param)
