"""Per-model rate limits: requests per minute, tokens per minute, requests in flight, and back-off.

Requests are spaced evenly (GCRA with no burst): at N requests/min a request may start every 60/N s, so
no sliding minute ever sees more than N. Tokens work the same way with the estimated size of each request.
A 429/529 pauses the model for everyone in this process (``penalize``). A model whose requests keep failing
unreachable (no HTTP response, 502/503/504: see ``retry.Verdict``) is *down* (the circuit breaker opens): it is paused for longer each time, up to ``_BREAKER_MAX_S``, and when
a pause ends one request at a time probes it (half-open) until one succeeds. While a model is down its
jobs wait rather than spend their attempts (see ``client.ModelClient.call``); ``max_outage_s`` bounds how
long a run waits for it.

A limit the config does not give is learned (``adaptive``): the limiter of such a model starts low and
follows an ``AdaptiveRate`` fed by what responses say (rate-limit headers, 429s) and by requests queueing
for it; its state is a row of the run database's ledger (``LearnedLimits``), so a fleet sends at one
learned rate, and a later run starts where this one ended. Any other limiter keeps to a limit its
provider states (rate-limit headers) when the config gives none or a higher one, wherever the server
runs, and says so once (``tell_stated``).

One process keeps its limits in memory (``Limiter``). When several processes work one run (a shared
database), ``Limiters`` given ``fleet=FleetLimits(ledger, holder)`` hand out ``FleetLimiter``s: the
same interface, with request slots and in-flight permits reserved in the database, so a model's limits
hold for the whole fleet (see ``queue.limits``).

``limiter`` holds ``Limiter`` (one process), ``fleet_limiter`` holds ``FleetLimiter`` (a fleet), and this
module the ``Limiters`` that hand them out, one per limit key; every name stays importable from here.
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
