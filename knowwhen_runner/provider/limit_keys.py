"""A run's rate limiters, one per limit key: ``Limiters`` gives each model the limiter of its key, so models
that share a key share its limits.

One process keeps its limits in memory (``limiter.Limiter``, where requests are spaced, paused and a down
model probed). Processes that work one run together (a shared database) are given
``fleet=FleetLimits(ledger, holder)`` and get ``fleet_limiter.FleetLimiter``s, which reserve request slots
and in-flight permits in the run database (``queue.limits``), so a model's limits hold for the whole
fleet. A model whose config gives no limit gets an ``adaptive.AdaptiveRate``, its learned state kept in
``LearnedLimits``, so a fleet sends at one learned rate and a later run starts where this one ended. The
names of ``limiter`` and ``fleet_limiter`` stay importable from here.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import ModelSpec
from .adaptive import AdaptiveRate, LearnedLimit
from .fleet_limiter import FleetLimiter, FleetLimits, Ledger
from .limiter import _DEFAULT_MAX_OUTAGE_S, REQUEST_STARTED, LearnedLimits, Limiter

__all__ = ["REQUEST_STARTED", "FleetLimiter", "FleetLimits", "LearnedLimits", "Ledger", "Limiter", "Limiters"]


class Limiters:
    """One ``Limiter`` per limit key; models with the same key share it.

    With ``fleet``, the limiters are ``FleetLimiter``s on its ledger: the limits hold for every process.
    """

    def __init__(
        self,
        models: list[ModelSpec],
        *,
        fleet: FleetLimits | None = None,
        max_outage_s: float = _DEFAULT_MAX_OUTAGE_S,
        learned: LearnedLimits | None = None,
    ) -> None:
        self.max_outage_s = max_outage_s  # how long the run waits for a model down (or set aside) alone
        self._by_key: dict[str, Limiter] = {}
        self._by_model: dict[str, Limiter] = {}
        learned = learned if learned is not None else (fleet.ledger if fleet is not None else None)
        for spec in models:
            key = spec.limit_key()
            if key not in self._by_key:
                adaptive = AdaptiveRate(shared=fleet is not None) if spec.adapts() else None
                self._by_key[key] = (
                    FleetLimiter(
                        spec.id,
                        spec.rate_limit,
                        key=key,
                        fleet=fleet,
                        ttl=max(30.0, 2 * spec.timeout_s),
                        max_outage_s=max_outage_s,
                        adaptive=adaptive,
                        learned=learned,
                    )
                    if fleet is not None
                    else Limiter(
                        spec.id,
                        spec.rate_limit,
                        max_outage_s=max_outage_s,
                        adaptive=adaptive,
                        key=key,
                        learned=learned,
                    )
                )
            self._by_model[spec.id] = self._by_key[key]

    def __getitem__(self, model_id: str) -> Limiter:
        return self._by_model[model_id]

    def tell_stated(self, tell: Callable[[str, str, float, float], None]) -> None:
        """Call ``tell(name, "requests" or "tokens", stated, configured)`` once per limit group and kind
        whose configured limit is above the one its provider states (it is then sent at the stated one)."""
        for limiter in self._by_key.values():
            limiter.on_stated = tell

    async def settle(self) -> None:
        """The worker has no job left to start: fleet limiters give back the permits they do not use."""
        for limiter in self._by_key.values():
            await limiter.settle()

    def learned(self) -> dict[str, LearnedLimit]:
        """Each adaptive model's learned limits as this process follows them."""
        return {
            model_id: lim.adaptive.state
            for model_id, lim in self._by_model.items()
            if lim.adaptive is not None
        }

    def backing_off(self) -> list[tuple[str, float, bool]]:
        """The limit groups that hold their requests now: (name, seconds until the next may start, whether
        its model is down, an outage, rather than slowed down by its provider's 429s)."""
        return [
            (lim.name, lim.paused_for(), lim.down())
            for lim in self._by_key.values()
            if lim.paused_for() > 0 or lim.down()
        ]

    def given_up(self) -> dict[str, str]:
        """Models down for longer than the run waits, with their last error."""
        return {
            model_id: lim.breaker.last_error or "no answer"
            for model_id, lim in self._by_model.items()
            if lim.gave_up()
        }
