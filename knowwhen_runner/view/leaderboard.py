"""The run's ranking as the viewer shows it: the report's own (``results.ranking``, by the config's
``report.rank_by``), read from the manifests of the last finalise, with the models the config pins.

Before the first finalise there are no manifests, so no ranks: models are then listed by id. The ranking
is read again only when a manifest file changed. A model a screen stopped has no rank (its figure covers a
prefix of the drawn order); it carries its screening bounds instead (``screened_out``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..results import manifest_path
from ..results.ranking import plot_focus, rank_models
from ..results.screen_record import screen_mark, screened_out
from .data import RunData

__all__ = ["Standings", "standings"]


@dataclass(frozen=True)
class Standings:
    """Each model's rank (None: no figure, screened out, or not finalised), whether the config pins it,
    whether the report's plots name it, and a screened-out model's screening bounds."""

    ranked_by: str | None = None
    order: list[str] = field(default_factory=list)
    ranks: dict[str, int | None] = field(default_factory=dict)
    pinned: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()
    screened: dict[str, str] = field(default_factory=dict)  # stopped by a screen: its screening bounds

    def position(self, model_id: str) -> tuple[int, str]:
        """A sort key: the ranking's order, then the id (models it does not know come last, by id)."""
        return (self.order.index(model_id) if model_id in self.order else len(self.order), model_id)

    def describe(self, model_id: str) -> dict[str, object]:
        return {
            "rank": self.ranks.get(model_id),
            "pinned": model_id in self.pinned,
            "named": model_id in self.named,
            "screened_out": self.screened.get(model_id),
        }


async def standings(data: RunData) -> Standings:
    """The ranking of the last finalise (kept until a manifest changes)."""
    config = await data.config()
    folder = data.output or config.output
    paths = [manifest_path(folder, m.id) for m in config.models]
    stamp = tuple(p.stat().st_mtime_ns if p.is_file() else 0 for p in paths)

    if data.standings is not None and data.standings[0] == stamp:
        return data.standings[1]  # type: ignore[no-any-return]
    manifests = data.manifests(config)
    pinned = frozenset(config.report.highlight)
    if manifests:
        ranking = rank_models(manifests, config.report.rank_by)
        focus = plot_focus(manifests, ranking, config.report.highlight, config.report.named)
        stopped = {
            m.model.id: screen_mark(m.screen) for m in manifests if m.screen and screened_out(m.screen)
        }
        value = Standings(
            ranking.scenario, ranking.order, ranking.ranks, pinned, frozenset(focus.named), stopped
        )
    else:
        value = Standings(pinned=pinned)
    data.standings = (stamp, value)
    return value
