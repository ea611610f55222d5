"""Budgets: each model call reserves its expected cost in the run's ledger first, and settles after.

Scopes are ``run`` (the whole run), ``model:<id>`` and ``group:<limit_group>``, with caps from the
config's ``budget``. A call whose reservation would pass a cap is not made: it raises ``ProviderError``
of kind ``budget``, its job goes back to pending, and the models under that scope are held back for the
rest of the run. The expected cost is the call's input tokens (request characters / 4) at its price plus
a generous output; a call can cost more than it reserved, so the overshoot is bounded by the calls in
flight.
"""

from __future__ import annotations

from typing import Any

from ..config import Cap, ModelSpec, SweepConfig
from ..exceptions import ProviderError
from ..messages import say
from ..provider import token_prices
from ..queue import BudgetAsk, BudgetTally, HoldingBack

__all__ = ["BudgetGuard", "BudgetSpent", "budget_sentence", "scope_label"]

_OUT_TOKENS = {"decision": 0, "llm": 200}  # output reserved per call: a verbose tool call


class BudgetSpent(ProviderError):
    """A call not made: its reservation would pass the cap of ``scope``."""

    def __init__(self, scope: str) -> None:
        super().__init__(f"{scope_label(scope)} is spent", kind="budget")
        self.scope = scope


def scope_label(scope: str) -> str:
    """The config line a scope's cap comes from."""
    kind, _, name = scope.partition(":")
    return "budget" if kind == "run" else f"budget.{kind}s.{name}"


def budget_sentence(config: SweepConfig, scope: str, tallies: list[BudgetTally], pending: int) -> str:
    """What a spent budget bought and what remains, in one sentence."""
    tally = next((t for t in tallies if t.scope == scope), BudgetTally(scope, 0.0, 0.0, 0, 0, 0))
    cap = _cap(config, scope)
    limits = []
    if cap is not None and cap.usd is not None:
        limits.append(f"${tally.spent_usd:.4f} of ${cap.usd:g}")
    if cap is not None and cap.tokens is not None:
        limits.append(f"{tally.spent_tokens:,} of {cap.tokens:,} tokens")
    label = scope_label(scope)
    return say(
        "budget.spent", scope=label, limits=", ".join(limits) or "capped", calls=tally.calls, pending=pending
    )


def _cap(config: SweepConfig, scope: str) -> Cap | None:
    budget = config.budget
    if budget is None:
        return None
    kind, _, name = scope.partition(":")
    if kind == "run":
        return budget
    return (budget.models if kind == "model" else budget.groups).get(name)


class BudgetGuard:
    """Reserves and settles the cost of one process's calls against the run's caps."""

    def __init__(self, config: SweepConfig, queue: HoldingBack) -> None:
        self.config, self.queue = config, queue
        self._models = {m.id: m for m in config.models}

    def scopes(self, model: ModelSpec) -> list[tuple[str, Cap]]:
        """The caps a call of ``model`` counts against."""
        budget = self.config.budget
        if budget is None:
            return []
        found: list[tuple[str, Cap]] = []
        if budget.usd is not None or budget.tokens is not None:
            found.append(("run", budget))
        if model.id in budget.models:
            found.append((f"model:{model.id}", budget.models[model.id]))
        if model.limit_group is not None and model.limit_group in budget.groups:
            found.append((f"group:{model.limit_group}", budget.groups[model.limit_group]))
        return found

    def models_under(self, scope: str) -> list[str]:
        """The models a spent scope holds back."""
        kind, _, name = scope.partition(":")
        if kind == "run":
            return list(self._models)
        if kind == "model":
            return [name]
        return [m.id for m in self._models.values() if m.limit_group == name]

    @staticmethod
    def expected(model: ModelSpec, body: dict[str, Any]) -> tuple[float, int]:
        """What a call is expected to cost at most: USD (0 when the price is unknown) and tokens."""
        tokens_in, tokens_out = len(str(body)) // 4, _OUT_TOKENS[model.kind]
        price = token_prices(model) or (0.0, 0.0)
        extra = model.pricing.per_request if model.pricing is not None else 0.0
        return tokens_in * price[0] + tokens_out * price[1] + extra, tokens_in + tokens_out

    async def reserve(self, model: ModelSpec, body: dict[str, Any]) -> list[BudgetAsk]:
        """Reserve the call's expected cost in every scope, or raise ``ProviderError`` kind ``budget``."""
        scopes = self.scopes(model)
        if not scopes:
            return []
        usd, tokens = self.expected(model, body)
        asks = [BudgetAsk(scope, usd, tokens, cap.usd, cap.tokens) for scope, cap in scopes]
        spent = await self.queue.budget_reserve(asks)
        if spent is not None:
            raise BudgetSpent(spent)
        return asks

    async def settle(self, asks: list[BudgetAsk], response: dict[str, Any] | None) -> None:
        """Swap the reservations for what the call cost (nothing when it failed)."""
        if not asks:
            return
        usd = float((response or {}).get("cost_usd") or 0.0)
        tokens = int((response or {}).get("input_tokens") or 0) + int(
            (response or {}).get("output_tokens") or 0
        )
        await self.queue.budget_settle(asks, usd, tokens)
