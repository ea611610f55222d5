"""The deferral scorecard's properties and the Learn-then-Test guarantee on simulated data."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from knowwhen_runner.dataset.deferral import apgr, deferral_scorecard, oracle_accuracy
from knowwhen_runner.dataset.risk_control import (
    fixed_sequence,
    hoeffding_bentkus_p,
    learn_then_test,
    min_support,
)

_items = st.integers(min_value=1, max_value=60).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None)
@given(_items)
def test_the_oracle_curve_dominates_every_gate(items: tuple[list[float], list[bool], list[bool]]) -> None:
    """At every share of LLM calls, no confidence gate beats the oracle (it defers only what the LLM alone gets right)."""
    conf, model, llm = items
    card = deferral_scorecard(conf, model, llm)
    shares = np.array([p.llm_share for p in card.curve])
    accs = np.array([p.accuracy for p in card.curve])
    assert np.all(accs <= oracle_accuracy(model, llm, shares) + 1e-12)
    if card.apgr_oracle is not None:
        assert card.apgr_oracle <= 1.0 + 1e-9


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(2, 50))
def test_apgr_is_zero_for_the_weak_model_alone_and_one_for_the_strong(
    weak: float, strong: float, n: int
) -> None:
    """A curve that stays at the weak model's accuracy recovers nothing (APGR 0), one at the strong model's
    everything (APGR 1); with no gap there is no APGR."""
    shares = np.linspace(0.0, 1.0, n)
    if strong == weak:
        assert apgr(shares, np.full(n, weak), weak, strong) is None
        return
    assert abs(apgr(shares, np.full(n, weak), weak, strong) or 0.0) < 1e-9
    assert abs((apgr(shares, np.full(n, strong), weak, strong) or 0.0) - 1.0) < 1e-9


def test_apgr_relative_to_the_oracle_is_one_for_the_oracles_own_ranking() -> None:
    """Where the LLM is right whenever the model is, confidences that put the items only the LLM gets right
    lowest give the oracle's own curve (apgr_oracle 1), and random confidences give less."""
    rng = np.random.default_rng(4)
    model = rng.uniform(size=500) < 0.6
    llm = model | (rng.uniform(size=500) < 0.5)
    oracle_conf = np.where(~model & llm, 0.0, 1.0) + rng.uniform(0, 1e-3, 500)
    assert abs((deferral_scorecard(oracle_conf, model, llm).apgr_oracle or 0.0) - 1.0) < 1e-9
    assert (deferral_scorecard(rng.uniform(size=500), model, llm).apgr_oracle or 0.0) < 0.9


def test_no_valid_threshold_gates_nothing() -> None:
    """When no τ shows an error ≤ risk (a model wrong half the time), none is chosen."""
    rng = np.random.default_rng(0)
    found = learn_then_test(rng.uniform(size=400), rng.uniform(size=400) < 0.5, 0.05, 0.1)
    assert found.threshold is None and found.valid == [] and found.coverage == 0.0


def test_a_model_that_is_always_right_above_a_confidence_is_trusted_there() -> None:
    """A model right on every item with confidence ≥ 0.6 and wrong below gets τ = 0.6 at risk 0.05
    (the rule must leave a clearly safe region alone, not only refuse)."""
    conf = np.linspace(0.0, 1.0, 2001)
    found = learn_then_test(conf, conf >= 0.6, 0.05, 0.1)
    assert found.threshold is not None and 0.55 <= found.threshold <= 0.6
    assert found.error is not None and found.error <= 0.05


def test_the_chosen_threshold_errs_beyond_the_risk_in_at_most_delta_of_1000_fit_sets() -> None:
    """Calibrated confidences (right with probability c, c uniform on [0.5, 1]) have a known error (1 − τ)/2
    among the decisions delegated at τ; over 1,000 fit sets of 600 items the τ chosen for risk 0.05 has a
    true error above 0.05 in at most δ = 10 % of them, and one is found in at least a fifth of them (the test
    is not vacuous: the 5 % error must be shown on a few hundred delegated decisions)."""
    seeds, n, risk, delta = 1000, 600, 0.05, 0.1
    grid = np.round(np.arange(0.99, 0.69, -0.01), 2)  # tested from the top, as learn_then_test does
    rng = np.random.default_rng(20261207)
    conf = rng.uniform(0.5, 1.0, (seeds, n))
    wrong = rng.uniform(size=(seeds, n)) >= conf
    covered = conf[:, :, None] >= grid[None, None, :]
    counts, errors = covered.sum(axis=1), (covered & wrong[:, :, None]).sum(axis=1)
    p = hoeffding_bentkus_p(errors.ravel(), counts.ravel(), risk).reshape(counts.shape)
    p = np.where(counts >= min_support(risk, delta), p, np.nan)
    rejected = fixed_sequence(p, delta)
    chosen = np.full(seeds, np.nan)
    for s in np.flatnonzero(rejected):
        chosen[s] = grid[np.flatnonzero(~np.isnan(p[s]))[rejected[s] - 1]]
    true_error = (1.0 - chosen) / 2.0
    exceed = np.mean(np.nan_to_num(true_error, nan=0.0) > risk + 1e-12)
    assert exceed <= delta
    assert np.mean(~np.isnan(chosen)) > 0.2
    # The same data through the one-set function gives the same τ (the vectorised path is the real one).
    one = learn_then_test(conf[0], ~wrong[0], risk, delta, grid)
    assert (one.threshold is None and np.isnan(chosen[0])) or one.threshold == chosen[0]
