"""``agent-sim``: a simulated agent LLM for offline DecisionGym runs (a simulator, not a real LLM).

It plays a DecisionGym episode from the conversation it is sent — the customer's request, its own
earlier tool calls and their printed results — like a careful support agent: find the customer, list
their orders, ask when something only the customer knows is missing, make the requested change, reply.
An open-loop question (one user message holding a rendered state) is read the same way: TASK is the
request, HISTORY the calls, so a state gets the same answer, errors included, in either form.
It also errs, at a configurable rate and seeded by the conversation (so the same request always gets the
same answer): it calls a near-miss distractor instead of the right tool, or skips a question the customer
had to answer (guessing the order, or putting the question in its final reply). That gives delegation
something to fix, and something to break. A forced ``tool_choice`` is honoured: it then only writes the
arguments of the named tool, from what it has read.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..gym.tools import (
    ASK,
    CANCEL,
    CREDIT,
    DISTRACTOR,
    LIST_ORDERS,
    LOOKUP_EMAIL,
    LOOKUP_NAME_ZIP,
    REFUND,
    REPLY,
    SET_ADDRESS,
    SET_SPEED,
)
from .gym_text import Order, Shop, conversation, parse_request, role_of, roles_offered

__all__ = ["ERROR_RATE_ENV", "AgentSim", "Move"]

ERROR_RATE_ENV = "KNOWWHEN_AGENT_SIM_ERROR_RATE"
SEED_ENV = "KNOWWHEN_AGENT_SIM_SEED"
DEFAULT_ERROR_RATE = 0.1
_QUESTIONS = {
    "identity": "Could you tell me the e-mail address on your account, or your full name and zip code?",
    "order": "Which order do you mean? Could you give me the order number?",
    "address": "What is the new delivery address?",
    "": "Is there anything else I should know about your request?",
}
_TEXT_PARAMS = {"message", "note", "summary", "reason", "question", "outcome", "instructions"}


@dataclass(frozen=True)
class Move:
    """A call the agent means to make: the tool's role, its arguments, and what an ask would be about."""

    role: str
    arguments: dict[str, Any]
    ask_about: str = ""


def _money(cents: int) -> float:
    return round(cents / 100, 2)


def _goal_moves(shop: Shop, order: Order, credit_offered: bool) -> list[Move]:
    """The changes the request asks for on ``order``, in the order a careful agent makes them."""
    kind, oid = shop.request.kind, order.id
    if kind == "cancel":
        return [Move(CANCEL, {"order_id": oid})]
    if kind.startswith("refund"):
        cents = order.total_cents
        if kind == "refund_partial":
            text = shop.request.text.lower()
            cents = next((c for name, c in order.items.items() if name in text), cents)
        role = CREDIT if credit_offered and order.age_days > 30 else REFUND
        return [Move(role, {"order_id": oid, "amount": _money(cents)})]
    moves = []
    if kind in ("change_address", "address_and_expedite"):
        moves.append(Move(SET_ADDRESS, {"order_id": oid, "address": shop.request.address or ""}))
    if kind in ("expedite", "address_and_expedite"):
        moves.append(Move(SET_SPEED, {"order_id": oid, "speed": shop.request.speed or "express"}))
    return moves


def _reply(shop: Shop, order: Order | None, done: Sequence[Move]) -> Move:
    if order is None:
        return Move(REPLY, {"message": "I'm sorry, I could not find the order you mean."})
    if shop.request.kind == "status":
        return Move(REPLY, {"message": f"Your order {order.id} is currently {order.status}."})
    parts = {
        CANCEL: f"Your order {order.id} has been cancelled.",
        REFUND: f"I've refunded ${{amount:.2f}} for order {order.id}.",
        CREDIT: f"I've issued ${{amount:.2f}} in store credit for order {order.id}.",
        SET_SPEED: f"Order {order.id} now ships {{speed}}.",
        SET_ADDRESS: f"Order {order.id} will now ship to {{address}}.",
    }
    text = " ".join(parts[m.role].format(**m.arguments) for m in done if m.role in parts)
    return Move(REPLY, {"message": f"{text} Is there anything else I can help with?".strip()})


def plan_next(shop: Shop, offered: Mapping[str, str], *, guess: bool = False) -> Move:
    """The careful next call; ``guess`` acts on the first candidate order instead of asking which one."""
    r = shop.request
    customer = shop.customer()
    if customer is None:
        for role, args in (
            (LOOKUP_EMAIL, {"email": r.email}),
            (LOOKUP_NAME_ZIP, {"name": r.name, "zip": r.zip}),
        ):
            if all(args.values()) and (role, json.dumps(args, sort_keys=True)) not in shop.looked_up:
                return Move(role, dict(args))
        return Move(ASK, {"question": _QUESTIONS["identity"]}, "identity")
    if customer not in shop.listed:
        return Move(LIST_ORDERS, {"customer_id": customer})
    candidates = shop.candidates(customer)
    if len(candidates) != 1 and not (guess and candidates):
        return Move(ASK, {"question": _QUESTIONS["order"]}, "order")
    order = candidates[0]
    goals = _goal_moves(shop, order, CREDIT in offered)
    for move in goals:
        if (move.role, order.id) in shop.done:
            continue
        if move.role == SET_ADDRESS and not r.address:
            return Move(ASK, {"question": _QUESTIONS["address"]}, "address")
        return move
    return _reply(shop, order, goals)


def _tokens(name: str) -> set[str]:
    return set(name.lower().split("_"))


def _fill(param: str, shop: Shop) -> Any:
    """A plausible value for a parameter, from what the agent has read."""
    r, customer = shop.request, shop.customer()
    person = shop.customers.get(customer or "", ("", "", "", ""))
    order = r.order_id or next(iter(shop.orders), "")
    values: dict[str, Any] = {
        "email": r.email or person[1],
        "name": r.name or person[0],
        "zip": r.zip or person[2],
        "phone": person[3],
        "customer_id": customer or "",
        "order_id": order,
        "amount": _money(shop.orders[order].total_cents) if order in shop.orders else 1.0,
        "points": 100,
        "address": r.address or "",
        "speed": r.speed or "standard",
    }
    if param in values:
        return values[param]
    return (
        f"Customer request: {r.text[:60]}" if param in _TEXT_PARAMS else f"{param.split('_')[0].upper()}-0000"
    )


@dataclass
class AgentSim:
    """The simulated agent. ``error_rate``: share of free tool choices that go wrong; ``seed`` varies which."""

    error_rate: float = DEFAULT_ERROR_RATE
    seed: int = 0

    @classmethod
    def from_env(cls) -> AgentSim:
        """Rate and seed from the environment of ``knowwhen serve`` (defaults: 0.1 and 0)."""
        return cls(
            float(os.environ.get(ERROR_RATE_ENV, DEFAULT_ERROR_RATE)), int(os.environ.get(SEED_ENV, 0))
        )

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        tool_choice: object,
        *,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """One tool call: the forced tool's arguments, or the next call the agent chooses.

        ``seed`` (the request's) varies which choices go wrong, as sampling would: a repeated episode
        sends its own seed, so repeats differ; without one the choices are those of earlier versions."""
        functions = {
            str(f.get("name")): f for f in (t.get("function", t) for t in tools if isinstance(t, Mapping))
        }
        if not functions or tool_choice == "none":
            return {"role": "assistant", "content": "How can I help you today?"}
        request, calls = conversation(messages)
        shop = Shop(parse_request(request))
        for tool, arguments, observation in calls:
            shop.learn(tool, arguments, observation)
        offered = roles_offered(functions)
        forced = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, Mapping) else None
        if forced in functions:
            name, arguments = forced, self._arguments_for(forced, functions[forced], shop, offered)
        else:
            salt = request if seed is None else f"{seed}|{request}"
            name, arguments = self._choose(shop, offered, functions, len(calls), salt)
        call = {
            "id": f"call_sim_{len(calls)}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, sort_keys=True)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def _arguments_for(
        self, name: str, function: Mapping[str, Any], shop: Shop, offered: Mapping[str, str]
    ) -> dict[str, Any]:
        role = role_of(name)
        params = list(function.get("parameters", {}).get("properties", {}))
        if role == DISTRACTOR:
            return {p: _fill(p, shop) for p in params}
        move = plan_next(shop, offered)
        if move.role == role:
            return move.arguments
        if role == ASK:
            return {"question": _QUESTIONS[self._missing(shop)]}
        if role == REPLY:
            customer = shop.customer()
            orders = shop.candidates(customer) if customer else []
            return _reply(shop, orders[0] if orders else None, []).arguments
        return {p: _fill(p, shop) for p in params}

    @staticmethod
    def _missing(shop: Shop) -> str:
        """What a question to the customer should be about now."""
        customer = shop.customer()
        if customer is None:
            return "identity"
        if customer in shop.listed and len(shop.candidates(customer)) != 1:
            return "order"
        if shop.request.kind in ("change_address", "address_and_expedite") and not shop.request.address:
            return "address"
        return ""

    def _choose(
        self, shop: Shop, offered: Mapping[str, str], functions: Mapping[str, Any], turn: int, request: str
    ) -> tuple[str, dict[str, Any]]:
        move = plan_next(shop, offered)
        digest = hashlib.sha256(f"{self.seed}|{turn}|{request}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "big"))
        if rng.random() < self.error_rate:
            if move.role == ASK:  # skip the question: guess the order, or ask it in the final reply
                if (
                    move.ask_about == "order"
                    and (guessed := plan_next(shop, offered, guess=True)).role != ASK
                ):
                    move = guessed
                else:
                    move = Move(REPLY, {"message": move.arguments["question"]})
            else:
                return self._near_miss(move, offered, functions, shop, rng)
        name = offered.get(move.role) or next(iter(functions))
        return name, move.arguments

    def _near_miss(
        self,
        move: Move,
        offered: Mapping[str, str],
        functions: Mapping[str, Any],
        shop: Shop,
        rng: random.Random,
    ) -> tuple[str, dict[str, Any]]:
        """The distractor whose name shares the most words with the right tool's."""
        right = _tokens(offered.get(move.role, move.role))
        distractors = sorted(n for n in functions if role_of(n) == DISTRACTOR)
        if not distractors:
            return offered.get(move.role) or next(iter(functions)), move.arguments
        best = max(len(_tokens(n) & right) for n in distractors)
        name = rng.choice([n for n in distractors if len(_tokens(n) & right) == best])
        params = list(functions[name].get("parameters", {}).get("properties", {}))
        return name, {p: _fill(p, shop) for p in params}
