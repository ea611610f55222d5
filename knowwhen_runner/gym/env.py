"""The DecisionGym environment: executes tool calls against a task's world and judges the outcome.

`GymEnv(task)` starts a conversation; `execute(tool, arguments)` returns the observation text (an error
observation for an unknown tool or bad arguments, never an exception); `done` turns true once the final
reply is sent; `success()` compares the final world with the expected one. Harmful calls change the
world as they would in a real shop, so a wrong cancellation or an extra refund fails the task.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .noise import add_noise
from .render import render_state
from .tasks import Task
from .tools import (
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
    ToolSpec,
)
from .world import SPEEDS, Customer, Order, World, fmt_money

__all__ = ["GymEnv", "Step", "replay"]


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call of an episode: the tool name as offered, its arguments, and what it returned."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    observation: str = ""


def _customer_line(c: Customer) -> str:
    return f"customer {c.id}: {c.name} | e-mail {c.email} | zip {c.zip} | phone {c.phone}"


def _order_block(o: Order) -> str:
    items = "; ".join(f"{i.name} ({i.sku}) {fmt_money(i.price_cents)}" for i in o.items)
    lines = [
        f"order {o.id} | placed {o.placed} ({o.age_days} days ago) | status {o.status} | total {fmt_money(o.total_cents)}",
        f"  items: {items}",
        f"  shipping: {o.speed} to {o.address}",
    ]
    if o.refunded_cents or o.credited_cents:
        lines.append(f"  refunded {fmt_money(o.refunded_cents)} | store credit {fmt_money(o.credited_cents)}")
    return "\n".join(lines)


class GymEnv:
    """One episode of one task. Tool names are the task's option names (shifted names on the shift)."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self._tools: dict[str, ToolSpec] = {t.name: t for t in task.tools}
        self._handlers: dict[str, Callable[[dict[str, Any]], str]] = {
            LOOKUP_EMAIL: self._lookup_email,
            LOOKUP_NAME_ZIP: self._lookup_name_zip,
            LIST_ORDERS: self._list_orders,
            CANCEL: self._cancel,
            REFUND: lambda a: self._pay(a, "refunded_cents", "Refunded"),
            CREDIT: lambda a: self._pay(a, "credited_cents", "Issued store credit of"),
            SET_SPEED: self._set_speed,
            SET_ADDRESS: self._set_address,
            ASK: lambda a: f'Customer: "{self.customer_reply(str(a["question"]))}"',
            REPLY: self._reply,
        }
        self.reset()

    def reset(self) -> str:
        """Start over from the task's initial world; returns the rendered state."""
        self.world: World = copy.deepcopy(self.task.world)
        self.history: list[Step] = []
        self.known: set[str] = set(self.task.given)
        self.found: set[str] = set()
        self.listed: set[str] = set()
        self.reply_message: str | None = None
        return self.state()

    @property
    def done(self) -> bool:
        return self.reply_message is not None

    def state(self) -> str:
        return render_state(self.task, self.history)

    def role_of(self, tool_name: str) -> str | None:
        spec = self._tools.get(tool_name)
        return spec.role if spec else None

    def execute(self, tool_name: str, arguments: dict[str, Any] | None = None) -> str:
        """Run one tool call and record it; returns the observation text."""
        if self.done:
            return "ERROR: the conversation is closed; no more tool calls are possible."
        args = dict(arguments or {}) if isinstance(arguments, dict) or arguments is None else arguments
        spec = self._tools.get(tool_name)
        error = self._check(spec, tool_name, args)
        if error:
            text = f"ERROR: {error}"
        elif spec is not None and spec.role == DISTRACTOR:
            text = self._distractor(spec, args)
        else:
            assert spec is not None
            text = self._handlers[spec.role](args)
        if spec is None or spec.role not in (ASK, REPLY):
            text = add_noise(text, seed=self.task.seed, step=len(self.history), rate=self.task.suite.noise)
        self.history.append(Step(tool_name, args if isinstance(args, dict) else {}, text))
        return text

    @staticmethod
    def _check(spec: ToolSpec | None, name: str, args: Any) -> str:
        if spec is None:
            return f"unknown tool '{name}'."
        if not isinstance(args, dict):
            return f"arguments of {name} must be a JSON object."
        missing = [p for p in spec.params if p not in args]
        extra = sorted(set(args) - set(spec.params))
        if missing:
            return f"{name} is missing required argument(s): {', '.join(missing)}."
        if extra:
            return f"{name} got unexpected argument(s): {', '.join(extra)}."
        for p, schema in spec.parameters["properties"].items():
            ok = isinstance(args[p], str) if schema["type"] == "string" else _is_number(args[p])
            if not ok:
                return f"argument '{p}' of {name} must be a {schema['type']}."
        return ""

    # --- read tools -------------------------------------------------------------------------------
    def _found(self, matches: list[Customer], what: str) -> str:
        if not matches:
            return f"No customer found with {what}."
        self.found.update(c.id for c in matches)
        return "\n".join(_customer_line(c) for c in matches)

    def _lookup_email(self, a: dict[str, Any]) -> str:
        email = a["email"].strip().lower()
        return self._found([c for c in self.world.customers if c.email == email], f"e-mail {a['email']}")

    def _lookup_name_zip(self, a: dict[str, Any]) -> str:
        name, zip_code = " ".join(a["name"].lower().split()), a["zip"].strip()
        hits = [c for c in self.world.customers if c.name.lower() == name and c.zip == zip_code]
        return self._found(hits, f"name {a['name']} and zip {a['zip']}")

    def _list_orders(self, a: dict[str, Any]) -> str:
        cid = a["customer_id"].strip()
        if self.world.customer(cid) is None:
            return f"ERROR: no customer with id {cid}."
        self.listed.add(cid)
        orders = self.world.orders_of(cid)
        return "\n".join(_order_block(o) for o in orders) if orders else f"customer {cid} has no orders."

    # --- write tools ------------------------------------------------------------------------------
    def _open_order(self, a: dict[str, Any], refusal: str) -> Order | str:
        """The order named in `a` if it has not shipped, else the error text (`refusal` says what not)."""
        order = self.world.order(a["order_id"].strip())
        if order is None:
            return f"ERROR: no order with id {a['order_id']}."
        if order.status != "processing":
            return f"ERROR: order {order.id} is {order.status}; {refusal}."
        return order

    def _cancel(self, a: dict[str, Any]) -> str:
        order = self._open_order(a, "it can no longer be cancelled")
        if isinstance(order, str):
            return order
        order.status = "cancelled"
        return f"Order {order.id} cancelled."

    def _pay(self, a: dict[str, Any], field_name: str, verb: str) -> str:
        order = self.world.order(a["order_id"].strip())
        if order is None:
            return f"ERROR: no order with id {a['order_id']}."
        cents = round(float(a["amount"]) * 100)
        paid_back = order.refunded_cents + order.credited_cents
        if cents <= 0 or paid_back + cents > order.total_cents:
            return f"ERROR: amount must be positive and at most {fmt_money(order.total_cents - paid_back)}."
        setattr(order, field_name, getattr(order, field_name) + cents)
        return f"{verb} {fmt_money(cents)} for order {order.id}."

    def _set_speed(self, a: dict[str, Any]) -> str:
        if a["speed"] not in SPEEDS:
            return f"ERROR: speed must be one of {', '.join(SPEEDS)}."
        order = self._open_order(a, "its shipping speed can no longer be changed")
        if isinstance(order, str):
            return order
        order.speed = a["speed"]
        return f"Order {order.id} now ships {order.speed}."

    def _set_address(self, a: dict[str, Any]) -> str:
        order = self._open_order(a, "its address can no longer be changed")
        if isinstance(order, str):
            return order
        order.address = " ".join(a["address"].split())
        return f"Order {order.id} will ship to {order.address}."

    def _reply(self, a: dict[str, Any]) -> str:
        self.reply_message = a["message"]
        return "Message sent to the customer. The conversation is closed."

    def _distractor(self, spec: ToolSpec, a: dict[str, Any]) -> str:
        if spec.effect == "read":
            return "No matching records found."
        self.world.side_effects.append(f"{spec.name} {json.dumps(a, sort_keys=True)}")
        return f"OK: {spec.name} completed."

    # --- the customer -----------------------------------------------------------------------------
    def customer_reply(self, question: str) -> str:
        """What the customer answers to a question, from the task's hidden facts; reveals those facts."""
        facts = self._asked_facts(question) or self._next_unknown_fact()
        if not facts:
            return "I think I've already told you everything you need."
        self.known.update(facts)
        c, parts = self.task.customer, []
        sentences = {
            "email": f"My e-mail is {c.email}.",
            "name_zip": f"I'm {c.name}, zip code {c.zip}.",
            "order": f"It's order {self.task.order_id}.",
            "address": f"The new address is {self.task.new_address}.",
        }
        parts = [sentences[f] for f in ("email", "name_zip", "order", "address") if f in facts]
        return " ".join(parts)

    def _asked_facts(self, question: str) -> list[str]:
        q = question.lower()
        facts = []
        if "mail" in q:
            facts.append("email")
        if any(w in q for w in ("zip", "postal", "postcode", "name")):
            facts.append("name_zip")
        if any(w in q for w in ("order", "which", "purchase")):
            facts.append("order")
        q = q.replace("e-mail address", "").replace("email address", "")
        if self.task.new_address and any(w in q for w in ("address", "where", "ship it to")):
            facts.append("address")
        return facts

    def _next_unknown_fact(self) -> list[str]:
        wanted = ["email", "order"] + (["address"] if self.task.new_address else [])
        return [f for f in wanted if f not in self.known][:1]

    # --- judging ----------------------------------------------------------------------------------
    def expected_snapshot(self) -> dict[str, Any]:
        """The world as it should be at the end: the task's goals applied, nothing else changed."""
        world = copy.deepcopy(self.task.world)
        for goal in self.task.goals:
            order = world.order(goal.order_id)
            assert order is not None
            setattr(order, goal.field, goal.value)
        return world.snapshot()

    def success(self) -> bool:
        """Replied to the customer, with exactly the required changes made (and the status told)."""
        if self.reply_message is None or self.world.snapshot() != self.expected_snapshot():
            return False
        return not self.task.status_word or self.task.status_word in self.reply_message.lower()


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, str)


def replay(task: Task, history: Sequence[Step | tuple[str, dict[str, Any]]]) -> GymEnv:
    """A fresh environment after re-running the calls of `history` (its stored observations are ignored)."""
    env = GymEnv(task)
    for step in history:
        tool, args = (step.tool, step.arguments) if isinstance(step, Step) else step
        env.execute(tool, args)
    return env
