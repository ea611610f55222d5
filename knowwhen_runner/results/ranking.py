"""The leaderboard of a run: its models ranked by one headline figure, best first, and which of them a plot
names.

The figure is a scenario's headline number as ``table.md`` prints it (states: L2 accuracy; episodes: L3
success in the model's own mode; isolated: L1 pooled accuracy), in percent. Ties in the figure are broken
by its interval (the higher lower bound first; equal figures and intervals share a rank); a model with no
figure (nothing recorded, or a job failed for good) comes last, unranked, and so does a model a screen stopped
(its figure covers a prefix of the drawn order, not the scenario). Ranking only orders rows: no
figure changes with it.

Where the per-task outcomes behind the figure are at hand (episodes: the manifests' ``outcomes``; states:
the per-task correctness ``finalize`` passes in), models that a paired bootstrap over the shared tasks
cannot tell apart at the 95% level share a **tie group**, shown as a rank range ("2–4"); inside a group
the order is by point estimate. Groups are contiguous in that order: any two models whose paired interval
holds 0 are in one group with every model between them. The level is per pair, not family-wise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..intervals import paired_cluster_bootstrap
from .cell_intervals import BOOTSTRAP_REPS, BOOTSTRAP_SEED, LEVEL
from .manifest import ConfidenceInterval, CxsManifest
from .screen_record import screened_out

__all__ = [
    "Clusters",
    "Figure",
    "Focus",
    "Ranking",
    "headline_figure",
    "plot_focus",
    "rank_models",
    "tie_groups",
]

Clusters = Mapping[str, Mapping[str, Sequence[float]]]
"""Per model, each task's outcomes (1.0 right or successful, 0.0 not) behind the ranking's figure."""

_DEFAULT_ORDER = ("states", "episodes", "isolated")


@dataclass(frozen=True)
class Figure:
    """A model's headline figure in one scenario (percent) with its interval; ``failed`` jobs withhold it."""

    value: float | None
    interval: ConfidenceInterval | None = None
    failed: int = 0


def _percent(ci: ConfidenceInterval | None) -> ConfidenceInterval | None:
    if ci is None:
        return None
    return ci.model_copy(update={"estimate": 100 * ci.estimate, "low": 100 * ci.low, "high": 100 * ci.high})


def _own_mode(m: CxsManifest) -> str:
    return "model" if m.model.kind == "decision" else "llm"


def headline_figure(m: CxsManifest, scenario: str) -> Figure | None:
    """The model's headline figure in ``scenario``, or None when it has no cell there."""
    cell = m.cell(scenario)
    if cell is not None:
        ci = cell.intervals.accuracy_pct if cell.intervals else None
        return Figure(cell.accuracy_pct, ci, cell.failed_rows())
    iso = next((i for i in m.isolated if i.scenario == scenario), None)
    if iso is not None:
        return Figure(iso.pooled_pct, iso.intervals.pooled_pct if iso.intervals else None)
    own = next((e for e in m.closed_loop if e.scenario == scenario and e.mode == _own_mode(m)), None)
    if own is None:
        return None
    success = None if own.success_rate is None else 100 * own.success_rate
    return Figure(success, _percent(own.intervals.success_rate if own.intervals else None), own.failed)


def default_rank_by(manifests: Sequence[CxsManifest]) -> str | None:
    """The first states scenario with a figure, else the first episodes scenario, else the first isolated."""
    scenarios = manifests[0].scenarios if manifests else []
    for kind in _DEFAULT_ORDER:
        for s in scenarios:
            if s.kind == kind and any(_shown(headline_figure(m, s.id)) is not None for m in manifests):
                return s.id
    return None


def _shown(figure: Figure | None) -> float | None:
    """The figure a table shows: none when a job of the cell failed for good."""
    return None if figure is None or figure.failed else figure.value


@dataclass(frozen=True)
class Ranking:
    """Models best first by the headline figure of ``scenario``; ``ranks`` is None for a model without one."""

    scenario: str | None
    order: list[str]
    ranks: dict[str, int | None] = field(default_factory=dict)
    groups: dict[str, tuple[int, int]] = field(default_factory=dict)

    def rank(self, model_id: str) -> int | str | None:
        """The model's rank, or its tie group's range of places ("2–4") when it shares one."""
        group = self.groups.get(model_id)
        if group is not None and group[0] != group[1]:
            return f"{group[0]}–{group[1]}"
        return self.ranks.get(model_id)

    def position(self, model_id: str) -> int:
        """Where the model sits in the ranking (a model it does not know sorts after every known one)."""
        return self.order.index(model_id) if model_id in self.order else len(self.order)

    def sorted_rows(self, rows: Sequence[dict[str, Any]], key: str = "model") -> list[dict[str, Any]]:
        """Rows ordered by their model's place (stable: a model's rows keep their own order)."""
        return sorted(rows, key=lambda r: self.position(str(r.get(key))))

    @property
    def label(self) -> str:
        if not self.scenario:
            return "in config order (no headline figure)"
        grouped = " (tie groups: paired 95% intervals over tasks)" if self.groups else ""
        return f"ranked by {self.scenario}{grouped}"


def tie_groups(order: Sequence[str], tied: Callable[[str, str], bool]) -> dict[str, tuple[int, int]]:
    """Contiguous groups of ``order`` (best first) closed under ``tied``: two tied models and every model
    between them share a group. Returns each model's group as its first and last place (1-based)."""
    reach = list(range(len(order)))
    for i, a in enumerate(order):
        for j in range(len(order) - 1, i, -1):
            if tied(a, order[j]):
                reach[i] = j
                break
    groups: dict[str, tuple[int, int]] = {}
    start = 0
    while start < len(order):
        end, i = reach[start], start
        while i <= end:
            end = max(end, reach[i])
            i += 1
        for k in range(start, end + 1):
            groups[order[k]] = (start + 1, end + 1)
        start = end + 1
    return groups


def _indistinct(clusters: Clusters) -> Callable[[str, str], bool]:
    """Whether a paired bootstrap over the tasks both models have puts 0 inside B − A's 95% interval."""

    def tied(a: str, b: str) -> bool:
        shared = sorted(
            t for t in clusters[a].keys() & clusters[b].keys() if clusters[a][t] and clusters[b][t]
        )
        if not shared:
            return True  # nothing to tell them apart on
        va = {t: list(clusters[a][t]) for t in shared}
        vb = {t: list(clusters[b][t][: len(va[t])]) for t in shared}
        va = {t: v[: len(vb[t])] for t, v in va.items()}
        test = paired_cluster_bootstrap(va, vb, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED, level=LEVEL)
        return test.interval.low <= 0.0 <= test.interval.high

    return tied


def _episode_clusters(manifests: Sequence[CxsManifest], scenario: str) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for m in manifests:
        own = next((e for e in m.closed_loop if e.scenario == scenario and e.mode == _own_mode(m)), None)
        if own is not None and own.outcomes:
            out[m.model.id] = {t: [float(x) for x in runs] for t, runs in own.outcomes.items()}
    return out


def rank_models(
    manifests: Sequence[CxsManifest], rank_by: str | None = None, clusters: Clusters | None = None
) -> Ranking:
    """Rank the run's models by ``rank_by``'s headline figure (default: see ``default_rank_by``), in tie
    groups where the per-task outcomes are known (``clusters`` of the ranked states scenario, or the
    episodes' own outcomes)."""
    ids = [m.model.id for m in manifests]
    scenario = rank_by or default_rank_by(manifests)
    if scenario is None:
        return Ranking(None, ids, dict.fromkeys(ids))
    figures = {
        m.model.id: None if screened_out(m.screen) else headline_figure(m, scenario) for m in manifests
    }

    def key(model_id: str) -> tuple[float, float, float, int]:
        figure = figures[model_id]
        value = _shown(figure)
        if figure is None or value is None:
            return (1.0, 0.0, 0.0, ids.index(model_id))
        low = figure.interval.low if figure.interval is not None else value
        return (0.0, -value, -low, ids.index(model_id))

    order = sorted(ids, key=key)
    ranks: dict[str, int | None] = {}
    previous: tuple[float, float] | None = None
    for i, model_id in enumerate(order):
        k = key(model_id)
        if k[0]:
            ranks[model_id] = None
            continue
        ranks[model_id] = ranks[order[i - 1]] if previous == k[1:3] else i + 1
        previous = k[1:3]
    known = dict(clusters) if clusters else _episode_clusters(manifests, scenario)
    ranked = [m for m in order if ranks[m] is not None]
    groups = {}
    if len(ranked) > 1 and all(m in known for m in ranked):
        groups = tie_groups(ranked, _indistinct(known))
    return Ranking(scenario, order, ranks, groups)


@dataclass(frozen=True)
class Focus:
    """Which models a plot names (in ranking order) and which it folds into "N others"."""

    named: list[str]
    others: list[str]

    def is_named(self, model_id: str) -> bool:
        return model_id in self.named

    @property
    def others_label(self) -> str:
        return f"{len(self.others)} other{'s' if len(self.others) != 1 else ''} (grey)"


def plot_focus(
    manifests: Sequence[CxsManifest], ranking: Ranking, highlight: Sequence[str] = (), named: int = 10
) -> Focus:
    """Name the pinned models and the LLMs, then the top of the ranking, up to ``named`` (at least the
    pinned ones and the LLMs); every other model is folded."""
    ids = [m.model.id for m in manifests]
    llms = [m.model.id for m in manifests if m.model.kind == "llm"]
    chosen = list(dict.fromkeys([*(h for h in highlight if h in ids), *llms]))
    for model_id in ranking.order:
        if len(chosen) >= named:
            break
        if model_id not in chosen:
            chosen.append(model_id)
    in_order = sorted(chosen, key=ranking.position)
    return Focus(in_order, [i for i in ranking.order if i not in chosen])
