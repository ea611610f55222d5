"""Intervals, paired tests and pass^k: hand-computed values, and seeded simulations with a known truth."""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

from knowwhen_runner import intervals
from knowwhen_runner.dataset.metrics import fit_threshold
from knowwhen_runner.intervals import (
    Interval,
    bootstrap_over_clusters,
    cluster_bootstrap,
    mcnemar,
    mean_of_cluster_means,
    miss,
    paired_cluster_bootstrap,
    pass_hat_k,
    per_task_success,
    pooled_mean,
    wilson,
    within,
)

REPLICATIONS = 1000
Clusters = dict[str, np.ndarray]


# ---------------------------------------------------------------------------------------------------
# Synthetic models with a known truth
# ---------------------------------------------------------------------------------------------------

MU, SIGMA = 1.5, 1.0  # task accuracy = logistic(MU + SIGMA·z): mean about 0.78, spread like real tasks


def _population_accuracy(mu: float, sigma: float) -> float:
    """E[logistic(mu + sigma·Z)] by Gauss–Hermite quadrature: the L2 accuracy over the task population."""
    z, w = np.polynomial.hermite_e.hermegauss(80)
    return float(np.sum(w / np.sqrt(2 * np.pi) / (1 + np.exp(-(mu + sigma * z)))))


def _clustered(seed: int, *, n_tasks: int = 200, sigma: float = SIGMA, size: int | None = None) -> Clusters:
    """L2-like data: tasks drawn from the population, each with ~20 occurrences answered at its own rate."""
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-(MU + sigma * rng.standard_normal(n_tasks))))
    sizes = np.full(n_tasks, size) if size else 1 + rng.poisson(19, n_tasks)
    return {f"task{i:03d}": rng.random(sizes[i]) < p[i] for i in range(n_tasks)}


def _items(clusters: Clusters) -> dict[str, list[bool]]:
    """Every item its own cluster: the unclustered bootstrap."""
    return {f"{c}/{j}": [bool(v)] for c, vs in clusters.items() for j, v in enumerate(vs)}


def _binomial_bounds(n: int, p: float, mass: float = 0.999) -> tuple[int, int]:
    """Counts that hold ``mass`` of Binomial(n, p) between them (equal tails)."""
    cdf = np.cumsum([math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)])
    tail = (1 - mass) / 2
    return int(np.searchsorted(cdf, tail)), int(np.searchsorted(cdf, 1 - tail))


def _coverage(truth: float, found: Sequence[Interval]) -> float:
    return sum(within(truth, iv) for iv in found) / len(found)


# ---------------------------------------------------------------------------------------------------
# Wilson
# ---------------------------------------------------------------------------------------------------


def test_wilson_matches_the_textbook_value() -> None:
    """8 of 10 at 95% gives the Wilson interval (0.4902, 0.9433) and names how it was made."""
    iv = wilson(8, 10)
    assert (iv.low, iv.high) == (pytest.approx(0.49016, abs=1e-5), pytest.approx(0.94331, abs=1e-5))
    assert (iv.estimate, iv.method, iv.level, iv.n, iv.seed) == (0.8, "wilson", 0.95, 10, None)


def test_wilson_stays_inside_zero_one_at_the_extremes() -> None:
    """0 of 20 and 20 of 20 give intervals that touch 0 and 1 but do not cross them."""
    assert wilson(0, 20).low == 0.0 and 0 < wilson(0, 20).high < 0.2
    assert wilson(20, 20).high == 1.0 and 0.8 < wilson(20, 20).low < 1


@pytest.mark.parametrize(
    ("n", "p"),
    [(3991, 0.85), (200, 0.895)],  # exact coverage 0.949 and 0.951 (Wilson oscillates with p)
    ids=["L1-pooled-3991-items", "L3-success-200-tasks"],
)
def test_wilson_covers_the_truth_about_95_percent_of_the_time(n: int, p: float) -> None:
    """Over 1,000 seeded binomial samples the 95% Wilson interval holds the true rate 93–97% of the time."""
    successes = np.random.default_rng(7).binomial(n, p, REPLICATIONS)
    assert 0.93 <= _coverage(p, [wilson(int(k), n) for k in successes]) <= 0.97


# ---------------------------------------------------------------------------------------------------
# Cluster bootstrap
# ---------------------------------------------------------------------------------------------------


def test_cluster_bootstrap_estimate_is_the_cards_per_task_then_mean() -> None:
    """Tasks at 1/1 and 1/4 give 62.5% (per task, then mean), not the pooled 2/5."""
    iv = cluster_bootstrap({"a": [1.0], "b": [1.0, 0.0, 0.0, 0.0]}, reps=50)
    assert iv.estimate == pytest.approx(0.625)
    assert cluster_bootstrap({"a": [1.0], "b": [1, 0, 0, 0]}, statistic=pooled_mean, reps=50).estimate == 0.4
    assert (iv.method, iv.n, iv.reps, iv.seed, iv.skipped) == ("cluster bootstrap, percentile", 2, 50, 0, 0)


@pytest.mark.slow
def test_cluster_bootstrap_covers_the_population_accuracy_about_95_percent_of_the_time() -> None:
    """On 1,000 seeded L2-like sets (200 tasks with task-level random effects) the interval covers 93–97%."""
    truth = _population_accuracy(MU, SIGMA)
    found = [cluster_bootstrap(_clustered(s), reps=400, seed=s) for s in range(REPLICATIONS)]
    assert 0.93 <= _coverage(truth, found) <= 0.97


@pytest.mark.slow
def test_the_coverage_simulation_rejects_an_interval_that_ignores_tasks() -> None:
    """Resampling items instead of tasks on the same kind of data covers far less than 93% (the check bites)."""
    truth = _population_accuracy(MU, SIGMA)
    found = [
        cluster_bootstrap(
            _items(_clustered(s, n_tasks=100, size=20)), statistic=pooled_mean, reps=200, seed=s
        )
        for s in range(100)
    ]
    assert _coverage(truth, found) < 0.85


def _width(iv: Interval) -> float:
    return iv.high - iv.low


def test_clustered_interval_is_wider_on_correlated_tasks_and_about_equal_on_independent_items() -> None:
    """With task effects resampling tasks widens the interval well over 1.4×; without them it is within 10%."""
    for sigma, low, high in [(SIGMA, 1.4, 3.0), (0.0, 0.9, 1.1)]:
        ratios = []
        for seed in range(3):
            data = _clustered(seed, sigma=sigma, size=20)
            clustered = cluster_bootstrap(data, statistic=pooled_mean, reps=1000, seed=seed)
            unclustered = cluster_bootstrap(_items(data), statistic=pooled_mean, reps=1000, seed=seed)
            ratios.append(_width(clustered) / _width(unclustered))
        assert low < float(np.mean(ratios)) < high, (sigma, ratios)


def test_same_seed_gives_identical_intervals_and_another_seed_does_not() -> None:
    """Finalising twice with one seed gives equal intervals; a different seed moves the ends."""
    data = _clustered(3)
    assert cluster_bootstrap(data, seed=11) == cluster_bootstrap(data, seed=11)
    assert cluster_bootstrap(data, seed=11) != cluster_bootstrap(data, seed=12)
    paired = {task: ~values for task, values in data.items()}
    assert paired_cluster_bootstrap(data, paired, seed=5) == paired_cluster_bootstrap(data, paired, seed=5)
    fn = _task_mean
    clusters = list(data.values())
    assert bootstrap_over_clusters(clusters, fn, reps=100, seed=2) == bootstrap_over_clusters(
        clusters, fn, reps=100, seed=2
    )


def test_cluster_bootstrap_refuses_empty_input_and_empty_clusters() -> None:
    """No clusters, a cluster without values, a level given as a percent or zero resamples are refused."""
    with pytest.raises(ValueError, match="no clusters"):
        cluster_bootstrap({})
    with pytest.raises(ValueError, match="without values"):
        cluster_bootstrap({"a": [1.0], "b": []})
    with pytest.raises(ValueError, match="level"):
        cluster_bootstrap({"a": [1.0]}, level=95)
    with pytest.raises(ValueError, match="at least one resample"):
        cluster_bootstrap({"a": [1.0]}, reps=0)


# ---------------------------------------------------------------------------------------------------
# Bootstrap with a refit per resample
# ---------------------------------------------------------------------------------------------------


def _task_mean(clusters: list[np.ndarray]) -> float | None:
    """The card's per-task-then-mean rule, refitted from a list of tasks."""
    return float(np.mean([np.mean(c) for c in clusters]))


def test_refit_bootstrap_agrees_with_the_vectorised_one_for_the_same_seed() -> None:
    """Refitting the per-task mean on each resample draws the same clusters, so the interval is the same."""
    data = _clustered(5)
    fast = cluster_bootstrap(data, reps=300, seed=9)
    slow = bootstrap_over_clusters(list(data.values()), _task_mean, reps=300, seed=9)
    assert (slow.estimate, slow.low, slow.high) == pytest.approx((fast.estimate, fast.low, fast.high))
    assert (slow.n, slow.reps, slow.seed, slow.skipped) == (200, 300, 9, 0)


def test_refit_bootstrap_of_the_fitted_threshold_skips_and_counts_unreachable_resamples() -> None:
    """τ for a 90% target is refitted on each resample; resamples where no τ reaches 90% are counted as skipped."""
    rng = np.random.default_rng(0)
    tasks = []
    for _ in range(40):
        conf = rng.random(10)
        tasks.append((conf, rng.random(10) < conf))

    def tau(resample: list[tuple[np.ndarray, np.ndarray]]) -> float | None:
        fit = fit_threshold(
            np.concatenate([c for c, _ in resample]), np.concatenate([k for _, k in resample]), 0.9
        )
        return fit.threshold

    iv = bootstrap_over_clusters(tasks, tau, reps=200, seed=1)
    assert iv.low <= iv.estimate <= iv.high and iv.method == "cluster bootstrap with refit, percentile"

    def sometimes(resample: list[int]) -> float | None:
        return None if resample[0] == 3 else float(np.mean(resample))

    skipping = bootstrap_over_clusters(list(range(4)), sometimes, reps=400, seed=3)
    assert 60 < skipping.skipped < 140  # the first draw is cluster 3 a quarter of the time
    with pytest.raises(ValueError, match="undefined on the data"):
        bootstrap_over_clusters([0, 1], lambda r: None, reps=10)


# ---------------------------------------------------------------------------------------------------
# Paired comparisons
# ---------------------------------------------------------------------------------------------------


def test_mcnemar_uses_the_exact_binomial_for_few_discordant_pairs() -> None:
    """1 vs 9 discordant: p = 2·(1 + 10)/1024, from the exact binomial."""
    a = [True] * 1 + [False] * 9 + [True] * 5
    b = [False] * 1 + [True] * 9 + [True] * 5
    test = mcnemar(a, b)
    assert (test.a_only, test.b_only, test.n, test.method) == (1, 9, 15, "mcnemar exact binomial")
    assert test.p_value == pytest.approx(22 / 1024)
    assert test.difference == pytest.approx(8 / 15)


def test_mcnemar_uses_corrected_chi_square_for_many_discordant_pairs() -> None:
    """10 vs 30 discordant: χ² = (|30 − 10| − 1)² / 40 = 9.025, two-sided p = 2·(1 − Φ(√9.025))."""
    test = mcnemar([True] * 10 + [False] * 30, [False] * 10 + [True] * 30)
    assert test.statistic == pytest.approx(9.025)
    assert test.p_value == pytest.approx(2 * (1 - NormalDist().cdf(math.sqrt(9.025))))
    assert test.method == "mcnemar chi-square, continuity-corrected"
    assert mcnemar([True, False], [True, False]).p_value == 1.0


def _null_pair(seed: int, n_tasks: int = 30, per_task: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Two systems with the same per-question success rate (tasks of varying difficulty), answering apart."""
    rng = np.random.default_rng(seed)
    p = np.repeat(1 / (1 + np.exp(-(MU + SIGMA * rng.standard_normal(n_tasks)))), per_task)
    return rng.random(p.size) < p, rng.random(p.size) < p


def _regressed_pair(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """B is A with 30 of A's right answers made wrong (−10 points on 300) and 10 random answers flipped."""
    rng = np.random.default_rng(seed)
    a, _ = _null_pair(seed)
    b = a.copy()
    b[rng.choice(np.flatnonzero(a), 30, replace=False)] = False
    churn = rng.choice(a.size, 10, replace=False)
    b[churn] = ~b[churn]
    return a, b


def _by_task(x: np.ndarray, per_task: int = 10) -> dict[str, np.ndarray]:
    return {f"task{i:02d}": x[i * per_task : (i + 1) * per_task] for i in range(x.size // per_task)}


def test_paired_tests_detect_a_planted_ten_point_regression() -> None:
    """On 300 questions in 30 tasks, McNemar and the paired bootstrap give p < 0.05 for every seed."""
    for seed in range(10):
        a, b = _regressed_pair(seed)
        assert mcnemar(a, b).p_value < 0.05
        paired = paired_cluster_bootstrap(_by_task(a), _by_task(b), reps=1000, seed=seed)
        assert paired.p_value < 0.05 and paired.interval.high < 0
        assert paired.difference == pytest.approx(b.mean() - a.mean())  # equal task sizes: the item mean
        assert paired.interval.low < -0.05


def test_paired_tests_flag_a_null_change_at_about_the_nominal_rate() -> None:
    """Over 1,000 seeds of two equal systems, p < 0.05 happens as often as Binomial(1000, 5%) allows."""
    low, high = _binomial_bounds(1000, 0.05)  # 29 and 74: a one-sided or halved p-value lands above
    pairs = [_null_pair(seed) for seed in range(1000)]
    mcnemar_hits = sum(mcnemar(a, b).p_value < 0.05 for a, b in pairs)
    bootstrap_hits = sum(
        paired_cluster_bootstrap(_by_task(a), _by_task(b), reps=400, seed=s).p_value < 0.05
        for s, (a, b) in enumerate(pairs)
    )
    assert low <= mcnemar_hits <= high, mcnemar_hits
    assert low <= bootstrap_hits <= high, bootstrap_hits


def test_paired_bootstrap_refuses_unpaired_inputs() -> None:
    """Different tasks, or a different number of values in a task, cannot be paired."""
    with pytest.raises(ValueError, match="same clusters"):
        paired_cluster_bootstrap({"a": [1.0]}, {"b": [1.0]})
    with pytest.raises(ValueError, match="same number"):
        paired_cluster_bootstrap({"a": [1.0]}, {"a": [1.0, 0.0]})


def test_paired_bootstrap_pairs_l3_repeats_by_task() -> None:
    """L3 (task, repeat) successes: B solving every repeat A failed gives a positive difference of 0.25."""
    a = {"t1": [True, True, False, True], "t2": [True, False, True, True]}
    b = {"t1": [True, True, True, True], "t2": [True, True, True, True]}
    paired = paired_cluster_bootstrap(a, b, reps=200)
    assert paired.difference == pytest.approx(0.25)
    assert paired.interval.method == "paired cluster bootstrap, percentile" and paired.interval.n == 2


# ---------------------------------------------------------------------------------------------------
# pass^k
# ---------------------------------------------------------------------------------------------------

REPEATS = {
    "a": [True, True, True, False],
    "b": [True, True, True, True],
    "c": [False, True, False, False],
}


def test_pass_hat_k_on_hand_computed_examples() -> None:
    """3/4, 4/4, 1/4 successes: pass^1 = 2/3, pass^2 = (3/6 + 1 + 0)/3 = 1/2, pass^4 = 1/3."""
    assert pass_hat_k(REPEATS, 1).value == pytest.approx(2 / 3)
    two = pass_hat_k(REPEATS, 2)
    assert two.per_task == {"a": 0.5, "b": 1.0, "c": 0.0} and two.value == pytest.approx(0.5)
    assert (two.k, two.n_tasks) == (2, 3)
    assert pass_hat_k(REPEATS, 4).value == pytest.approx(1 / 3)


def test_per_task_success_is_each_tasks_share_of_successful_repeats() -> None:
    """Shares 3/4, 4/4 and 1/4, whose mean is pass^1."""
    assert per_task_success(REPEATS) == {"a": 0.75, "b": 1.0, "c": 0.25}


def test_pass_hat_k_refuses_tasks_with_fewer_than_k_repeats() -> None:
    """pass^5 is not defined from 4 repeats, and k must be at least 1."""
    with pytest.raises(ValueError, match="fewer than k=5"):
        pass_hat_k(REPEATS, 5)
    with pytest.raises(ValueError, match="at least 1"):
        pass_hat_k(REPEATS, 0)


# ---------------------------------------------------------------------------------------------------
# Published numbers against intervals
# ---------------------------------------------------------------------------------------------------


def test_within_and_miss_measure_a_published_number_against_an_interval() -> None:
    """0.949 is inside (0.93, 0.96); 0.97 misses by +0.01, 0.90 by −0.03, and slack absorbs rounding."""
    iv = Interval(estimate=0.945, low=0.93, high=0.96, method="wilson", level=0.95, n=1000)
    assert within(0.949, iv) and miss(0.949, iv) == 0.0
    assert not within(0.97, iv) and miss(0.97, iv) == pytest.approx(0.01)
    assert miss(0.90, iv) == pytest.approx(-0.03)
    assert within(0.9604, iv, slack=0.0005) and miss(0.9604, iv, slack=0.0005) == 0.0


# ---------------------------------------------------------------------------------------------------
# Surface
# ---------------------------------------------------------------------------------------------------


def test_module_imports_nothing_from_the_package_so_it_can_move() -> None:
    """intervals.py imports only numpy and the standard library (no package or relative imports)."""
    tree = ast.parse(Path(intervals.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        f"{'.' * n.level}{n.module}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
    }
    assert not any(name.startswith((".", "knowwhen_runner")) for name in imported), imported


def test_public_names_are_pinned() -> None:
    """The exported names change only on purpose."""
    assert sorted(intervals.__all__) == [
        "ClusterStatistic",
        "Interval",
        "PairedComparison",
        "PairedTest",
        "PassHatK",
        "bootstrap_over_clusters",
        "cluster_bootstrap",
        "draw_cluster_weights",
        "mcnemar",
        "mean_of_cluster_means",
        "miss",
        "paired_cluster_bootstrap",
        "pass_hat_k",
        "per_task_success",
        "percentile_interval",
        "pooled_mean",
        "wilson",
        "within",
    ]
    assert mean_of_cluster_means is intervals.mean_of_cluster_means
