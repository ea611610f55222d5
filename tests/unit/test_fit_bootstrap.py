"""The vectorised refit bootstrap agrees with the plain one (fit_threshold and friends on resampled tasks)."""

from __future__ import annotations

import numpy as np
import pytest

from knowwhen_runner.dataset.metrics import (
    accuracy_at_coverage,
    aurc,
    expected_calibration_error,
    fit_threshold,
    gated_at,
)
from knowwhen_runner.intervals import bootstrap_over_clusters
from knowwhen_runner.results.fit_bootstrap import FitData, fit_intervals

Task = list[tuple[float, bool, bool]]  # (confidence, model right, LLM right) per occurrence


def _tasks(seed: int, n_tasks: int = 30) -> list[Task]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_tasks):
        skill = rng.uniform(0.5, 1.0)
        size = int(rng.integers(1, 8))
        conf = np.round(rng.uniform(0.2, 1.0, size), 2)  # ties on purpose
        out.append(
            [(float(c), bool(rng.random() < skill * 0.2 + c - 0.1), bool(rng.random() < 0.85)) for c in conf]
        )
    return out


def _flat(tasks: list[Task]) -> tuple[list[float], list[bool], list[bool], list[int], list[float]]:
    conf, mk, lk, index, weights = [], [], [], [], []
    for t, task in enumerate(tasks):
        for c, m, llm in task:
            conf.append(c)
            mk.append(m)
            lk.append(llm)
            index.append(t)
            weights.append(1.0 / (len(task) * len(tasks)))
    return conf, mk, lk, index, weights


def _llm_accuracy(tasks: list[Task]) -> float:
    return sum(sum(x[2] for x in t) / len(t) for t in tasks) / len(tasks)


@pytest.mark.parametrize("target", [0.9, "llm"])
def test_vectorised_refit_equals_the_plain_refit(target: float | str) -> None:
    """τ, coverage and gated accuracy at τ, ECE and AURC match bootstrap_over_clusters with the same seed."""
    tasks = _tasks(3)
    conf, mk, lk, index, _ = _flat(tasks)
    got = fit_intervals(FitData(conf, mk, index, target, lk), reps=200, seed=5)  # type: ignore[arg-type]

    def fit(sample: list[Task]):  # type: ignore[no-untyped-def]
        c, m, _, _, _ = _flat(sample)
        return fit_threshold(c, m, _llm_accuracy(sample) if target == "llm" else float(target))

    def gated(sample: list[Task]) -> float:
        c, m, llm, _, w = _flat(sample)
        found = fit(sample)
        tau = found.threshold if found.threshold is not None else 2.0  # unreachable: the LLM alone
        return gated_at(c, m, llm, tau, w).accuracy

    plain = {
        "tau": lambda s: fit(s).threshold,
        "coverage": lambda s: fit(s).coverage,
        "gated_accuracy": gated,
        "ece": lambda s: expected_calibration_error(_flat(s)[0], _flat(s)[1]),
        "aurc": lambda s: aurc(_flat(s)[0], _flat(s)[1]),
    }
    for name, fn in plain.items():
        want = bootstrap_over_clusters(tasks, fn, reps=200, seed=5)
        have = getattr(got, name)
        assert have is not None, name
        assert have.estimate == pytest.approx(want.estimate, abs=1e-12), name
        assert (have.low, have.high) == pytest.approx((want.low, want.high), abs=1e-12), name
        assert have.skipped == want.skipped, name
        assert (have.reps, have.seed, have.n) == (200, 5, 30)


def test_unreachable_target_has_no_tau_interval() -> None:
    """A target no threshold reaches leaves τ and gated accuracy without an interval; coverage is 0."""
    tasks = _tasks(4)
    conf, _, lk, index, _ = _flat(tasks)
    got = fit_intervals(FitData(conf, [False] * len(conf), index, 0.9, lk), reps=50, seed=1)
    assert got.tau is None and got.gated_accuracy is None
    assert got.coverage is not None and (got.coverage.estimate, got.coverage.high) == (0.0, 0.0)


def test_the_band_is_covered_accuracy_at_each_coverage_refitted_on_every_resample() -> None:
    """The band's estimates are accuracy_at_coverage on the data, its bounds the plain bootstrap's."""
    tasks = _tasks(5)
    conf, mk, lk, index, _ = _flat(tasks)
    got = fit_intervals(FitData(conf, mk, index, 0.9, lk), reps=100, seed=2)
    assert [c for c, _ in got.band] == [round(0.05 * i, 2) for i in range(1, 21)]
    on_data = accuracy_at_coverage(conf, mk, [c for c, _ in got.band])
    assert [ci.estimate for _, ci in got.band] == pytest.approx([p.accuracy for p in on_data])
    for coverage, ci in (got.band[3], got.band[12], got.band[-1]):

        def at(sample: list[Task], coverage: float = coverage) -> float:
            c, m, _, _, _ = _flat(sample)
            return accuracy_at_coverage(c, m, [coverage])[0].accuracy

        want = bootstrap_over_clusters(tasks, at, reps=100, seed=2)
        assert (ci.low, ci.high) == pytest.approx((want.low, want.high), abs=1e-12)
