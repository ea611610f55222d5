"""Screening's statistics: confidence sequences valid at every look, and the rules that stop a model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from knowwhen_runner.screening import (
    Bounds,
    Decision,
    Floor,
    NotWorseThan,
    TopK,
    alpha_each,
    alpha_pair,
    betting_cs,
    decide,
    paired_cs,
    race,
)
from knowwhen_runner.screening import replay as replay_module
from knowwhen_runner.screening.leaders import leaders_after
from knowwhen_runner.screening.rules import settle_by_leaders

N = 100
ALPHA = 0.1
SHAPES = [(40.0, 1.0), (8.0, 2.0), (1.0, 1.0), (0.3, 0.3)]  # near 1, skewed, flat, at both ends


def _draws(seed: int, sequences: int) -> tuple[np.ndarray, np.ndarray]:
    """Populations of N task accuracies of several shapes, each in a random order, and their means."""
    rng = np.random.default_rng(seed)
    shapes = [SHAPES[i % len(SHAPES)] for i in range(sequences)]
    population = np.stack([rng.beta(a, b, size=N) for a, b in shapes])
    order = np.argsort(rng.random(population.shape), axis=1)
    return np.take_along_axis(population, order, axis=1), population.mean(axis=1)


def _betting(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cs = betting_cs(x, N, ALPHA, grid=500)
    return cs.lower, cs.upper


def _fixed_sample(x: np.ndarray, population: int = N) -> tuple[np.ndarray, np.ndarray]:
    """A fixed-sample normal interval (with the finite-population correction), as if looked at only once."""
    t = np.arange(1, x.shape[-1] + 1)
    mean = np.cumsum(x, axis=-1) / t
    sd = np.sqrt(np.maximum(np.cumsum(x * x, axis=-1) / t - mean**2, 1e-12))
    half = 1.6449 * sd / np.sqrt(t) * np.sqrt(np.maximum(population - t, 0) / max(population - 1, 1))
    return mean - half, mean + half


def _ever_missed(interval, seed: int = 7, sequences: int = 240) -> float:  # type: ignore[no-untyped-def]
    x, mu = _draws(seed, sequences)
    lower, upper = interval(x)
    looks = slice(4, N - 1)  # from the fifth task on, before the last (where every interval is exact)
    missed = (lower[:, looks] > mu[:, None] + 1e-9) | (upper[:, looks] < mu[:, None] - 1e-9)
    return float(missed.any(axis=1).mean())


def test_the_sequences_cover_the_mean_at_every_look_at_once() -> None:
    """Over many populations, the share whose bounds ever leave the true mean, at any look, is at most alpha."""
    assert _ever_missed(_betting) <= ALPHA


def test_a_fixed_sample_interval_looked_at_every_task_does_not() -> None:
    """The same check catches a fixed-sample interval monitored after every task: it misses far more than alpha."""
    assert _ever_missed(_fixed_sample) > 2 * ALPHA


def test_every_task_seen_gives_the_exact_mean_and_the_bounds_only_narrow() -> None:
    """Without replacement, all N tasks seen pin the mean; before that the bounds never widen."""
    x, mu = _draws(3, 8)
    cs = betting_cs(x, N, ALPHA, grid=500)
    assert np.allclose(cs.lower[:, -1], mu) and np.allclose(cs.upper[:, -1], mu)
    assert (np.diff(cs.lower, axis=1) >= 0).all() and (np.diff(cs.upper, axis=1) <= 0).all()
    assert (cs.upper - cs.lower)[:, 50].mean() < (cs.upper - cs.lower)[:, 10].mean() < 1


def test_a_sample_too_big_for_its_population_is_refused() -> None:
    """More draws than tasks cannot be a sample without replacement."""
    with pytest.raises(ValueError, match="population of 3"):
        betting_cs(np.ones(4), 3, 0.05)


def test_the_paired_difference_covers_the_difference_of_means() -> None:
    """Bounds on a - b over the same drawn tasks hold the true difference at every look."""
    rng = np.random.default_rng(11)
    difficulty = rng.normal(0, 1, size=(120, N))
    a = 1 / (1 + np.exp(-(difficulty + 1.0)))
    b = 1 / (1 + np.exp(-(difficulty + 0.7)))
    cs = paired_cs(a, b, N, ALPHA)
    truth = (a - b).mean(axis=1)
    missed = (cs.lower > truth[:, None] + 1e-9) | (cs.upper < truth[:, None] - 1e-9)
    assert missed.any(axis=1).mean() <= ALPHA
    assert np.allclose(cs.lower[:, -1], truth)


def test_a_floor_keeps_and_drops_only_what_the_bounds_settle() -> None:
    """Above the floor is kept, below it dropped, straddling it left open."""
    bounds = {"a": Bounds(0.85, 0.95), "b": Bounds(0.5, 0.79), "c": Bounds(0.7, 0.9)}
    assert decide(Floor(0.8), bounds) == {"a": Decision.KEEP, "b": Decision.DROP}


def test_top_k_settles_membership_and_completes_the_set() -> None:
    """A model surely above all but k-1 is kept; surely below k others, dropped; k kept drops the rest."""
    bounds = {
        "best": Bounds(0.90, 0.95),
        "good": Bounds(0.85, 0.92),
        "mid": Bounds(0.60, 0.80),
        "low": Bounds(0.10, 0.30),
    }
    assert decide(TopK(2), bounds) == {
        "best": Decision.KEEP,
        "good": Decision.KEEP,
        "mid": Decision.DROP,
        "low": Decision.DROP,
    }
    open_race = {"a": Bounds(0.80, 0.95), "b": Bounds(0.82, 0.93), "c": Bounds(0.1, 0.2)}
    assert decide(TopK(1), open_race) == {"c": Decision.DROP}


@pytest.mark.parametrize(
    ("bounds", "zone"),
    [  # kept: surely no more than within below the k-th best; dropped: surely no more than within above it
        ({"a": (0.97, 0.995), "b": (0.975, 0.99), "c": (0.5, 0.6)}, {"a": "keep", "b": "keep"}),
        ({"a": (0.97, 0.99), "d": (0.80, 0.99), "c": (0.5, 0.6)}, {"a": "keep", "d": "drop"}),
    ],
)
def test_top_k_within_settles_models_too_close_to_tell_apart(
    bounds: dict[str, tuple[float, float]], zone: dict[str, str]
) -> None:
    """With ``within``, models near the k-th best are settled without a full ranking; without it they stay open,
    and a zone of 0.01 is too narrow for these bounds."""
    b = {n: Bounds(*v) for n, v in bounds.items()}
    assert decide(TopK(1), b) == {"c": Decision.DROP}
    assert decide(TopK(1, within=0.01), b) == {"c": Decision.DROP}
    assert decide(TopK(1, within=0.05), b) == {
        "c": Decision.DROP,
        **{n: Decision(d) for n, d in zone.items()},
    }


def test_top_k_within_drops_inside_the_zone_only_once_k_are_kept() -> None:
    """Zone drops never leave fewer than k kept: they wait until k models are kept (decisions are final)."""
    given = {"a": (0.90, 0.99), "b": (0.90, 0.99), "d": (0.80, 0.94), "c": (0.1, 0.2)}
    bounds = {n: Bounds(*v) for n, v in given.items()}
    rule = TopK(2, within=0.05)
    assert decide(rule, bounds) == {"c": Decision.DROP}
    kept = {"a": Decision.KEEP, "b": Decision.KEEP}
    assert decide(rule, bounds, kept) == {"c": Decision.DROP, "d": Decision.DROP}
    assert decide(rule, bounds, {"a": Decision.KEEP, "b": Decision.DROP}) == {"c": Decision.DROP}


def test_top_k_within_races_decide_within_the_zone_and_keep_at_least_k() -> None:
    """Across seeds of near-tied models, every kept model is at most ``within`` below the k-th best, every
    dropped one at most ``within`` above it (or outside the best k), at least k are kept, and the zone saves tasks."""
    within, k, wrong, seeds = 0.05, 2, 0, 20
    saved = []
    for seed in range(seeds):
        values = _clustered(300 + seed, [0.95, 0.94, 0.94, 0.93, 0.7, 0.5])
        truth = {n: float(v.mean()) for n, v in values.items()}
        kth = sorted(truth.values(), reverse=True)[k - 1]
        zone = race(TopK(k, within=within), values, ALPHA)
        assert sum(d is Decision.KEEP for d in zone.decisions.values()) >= k
        wrong += any(
            (d is Decision.KEEP and truth[n] < kth - within)
            or (d is Decision.DROP and truth[n] >= kth and truth[n] > kth + within)
            for n, d in zone.decisions.items()
        )
        saved.append(sum(race(TopK(k), values, ALPHA).tasks.values()) - sum(zone.tasks.values()))
    assert wrong / seeds <= ALPHA
    assert np.mean(saved) > 0


def test_not_worse_than_reads_the_difference_to_the_reference() -> None:
    """Kept when the difference is surely above minus the margin, dropped when surely below."""
    rule = NotWorseThan("prior", 0.02)
    bounds = {"x": Bounds(-0.01, 0.03), "y": Bounds(-0.10, -0.05), "z": Bounds(-0.04, 0.0)}
    assert decide(rule, bounds) == {"x": Decision.KEEP, "y": Decision.DROP}
    assert alpha_each(rule, 5, 0.05) == pytest.approx(0.0125)
    assert alpha_each(TopK(2), 5, 0.05) == pytest.approx(0.01)


def _clustered(seed: int, accuracies: list[float]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 1, N)
    order = rng.permutation(N)
    return {
        f"m{i}": (1 / (1 + np.exp(-(math.log(a / (1 - a)) + difficulty))))[order]
        for i, a in enumerate(accuracies)
    }


def test_a_race_stops_the_clearly_worse_models_early_and_decides_rightly() -> None:
    """Models far from the question stop after a fraction of the tasks; every decision matches the full means."""
    values = _clustered(1, [0.95, 0.9, 0.5, 0.2, 0.1])
    outcome = race(Floor(0.7), values, 0.05)
    truth = {n: float(v.mean()) for n, v in values.items()}
    for name, decision in outcome.decisions.items():
        assert decision is (Decision.KEEP if truth[name] >= 0.7 else Decision.DROP)
    assert outcome.tasks["m4"] < N / 3 and outcome.tasks["m3"] < N / 2
    assert outcome.bounds["m4"].upper < 0.7 <= outcome.bounds["m0"].lower


def test_the_reference_of_a_comparison_runs_as_long_as_any_comparison() -> None:
    """The reference answers every task its comparisons need and is never dropped."""
    values = _clustered(2, [0.8, 0.79, 0.3])
    outcome = race(NotWorseThan("m0", 0.05), values, 0.05)
    assert outcome.decisions["m0"] is Decision.KEEP
    assert outcome.decisions["m2"] is Decision.DROP
    assert outcome.tasks["m0"] == max(outcome.tasks["m1"], outcome.tasks["m2"])


def test_races_over_many_seeds_make_a_wrong_decision_at_most_alpha_of_the_time() -> None:
    """Simultaneous validity: across seeds, the share with any decision the full sweep contradicts is <= alpha."""
    wrong = 0
    seeds = 30
    for seed in range(seeds):
        values = _clustered(100 + seed, [0.9, 0.85, 0.8, 0.75, 0.7, 0.6])
        truth = {n: float(v.mean()) for n, v in values.items()}
        outcome = race(Floor(0.78), values, ALPHA)
        wrong += any(
            d is not None and (d is Decision.KEEP) != (truth[n] >= 0.78) for n, d in outcome.decisions.items()
        )
    assert wrong / seeds <= ALPHA


def test_plain_top_k_drops_a_model_once_every_leader_is_surely_above_it() -> None:
    """Dropped: all k leaders surely more accurate; all but k dropped keeps the rest; once
    every model left has answered every task, their exact accuracies settle them (a tie at the cut stays open)."""
    names = ["a", "b", "c", "d"]
    assert settle_by_leaders(2, names, {"c": 2, "d": 1}, {}) == {"c": Decision.DROP}
    assert settle_by_leaders(2, names, {"d": 2}, {"c": Decision.DROP}) == {
        "d": Decision.DROP,
        "a": Decision.KEEP,
        "b": Decision.KEEP,
    }
    exact = {"a": 0.9, "b": 0.8, "c": 0.8}
    assert settle_by_leaders(2, names, {"b": 0, "c": 1}, {"d": Decision.DROP}, exact) == {"a": Decision.KEEP}
    assert alpha_pair(TopK(5), 0.05) == pytest.approx(0.01)


def test_plain_top_k_names_its_leaders_on_the_first_questions_alone() -> None:
    """The leaders are the k best over the first questions of the drawn order (a fortieth, at least 20);
    what comes after never changes them."""
    values = _clustered(11, [0.95, 0.9, 0.6, 0.3])
    first = leaders_after(N)
    assert first == 20 and leaders_after(4000) == 100
    heads = {n: float(v[:first].mean()) for n, v in values.items()}
    expected = tuple(sorted(heads, key=lambda n: (-heads[n], n))[:2])
    assert race(TopK(2), values, 0.05).leaders == expected
    later = {n: np.concatenate([v[:first], np.zeros(N - first)]) for n, v in values.items()}
    assert race(TopK(2), later, 0.05).leaders == expected


def test_plain_top_k_races_stop_the_clearly_worse_early_and_decide_rightly() -> None:
    """Far below the leaders: dropped after a fraction of the questions; every decision matches the full means."""
    values = _clustered(12, [0.95, 0.93, 0.5, 0.2])
    outcome = race(TopK(2), values, 0.05)
    truth = {n: float(v.mean()) for n, v in values.items()}
    kth = sorted(truth.values(), reverse=True)[1]
    for name, decision in outcome.decisions.items():
        assert decision is (Decision.KEEP if truth[name] >= kth else Decision.DROP)
    assert outcome.tasks["m3"] < N / 3 and outcome.tasks["m2"] < N / 2


def _fixed_sample_crossings(
    leader: np.ndarray, other: np.ndarray, population: int, alpha: float, after: int
) -> np.ndarray:
    """``crossings`` with a fixed-sample bound on ``leader - other`` over the questions after ``after``
    (finite-population correction), as if looked at only once: the first look where it is above 0."""
    d = leader - other
    n = d.shape[-1]
    lower, _ = _fixed_sample(d[..., after:], population - after)
    known = d[..., :after].sum(axis=-1, keepdims=True)
    above = (known + (population - after) * lower) / population > 0
    return np.where(above.any(axis=-1), after + np.argmax(above, axis=-1) + 1, n + 1)


def _wrong_drops(seeds: int) -> float:
    """Flat, independent populations of 4 models, top 2: the share of orders that drop a model truly among
    the best 2 (above the third's accuracy)."""
    wrong = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        values = {f"m{i}": rng.beta(1, 1, N) for i in range(4)}
        truth = {n: float(v.mean()) for n, v in values.items()}
        third = sorted(truth.values(), reverse=True)[2]
        out = race(TopK(2), values, ALPHA)
        wrong += any(d is Decision.DROP and truth[n] > third for n, d in out.decisions.items())
    return wrong / seeds


def test_leaders_paired_bounds_drop_wrongly_at_most_alpha_where_fixed_sample_bounds_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Near-equal models: the paired tests drop a model of the best k in at most alpha of the orders;
    fixed-sample bounds looked at after every question, swapped in, do it far more often."""
    assert _wrong_drops(100) <= ALPHA
    monkeypatch.setattr(replay_module, "crossings", _fixed_sample_crossings)
    assert _wrong_drops(100) > 2 * ALPHA
