"""DecisionGym tasks: a world, a customer request, the facts the customer holds back, and the goal.

`make_task(suite, seed)` is deterministic: one `random.Random` per purpose, derived from the seed. With
probability `suite.ask_rate` the request leaves out one thing the agent needs (who the customer is, which
of two similar orders, or the new address), so asking the customer is the right step at some state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .suite import Suite, sub_rng
from .tools import CANCEL, CREDIT, REFUND, SET_ADDRESS, SET_SPEED, ToolSpec, suite_tools
from .world import Customer, Order, World, generate_world, new_address, random_items, random_order

__all__ = ["Goal", "Task", "make_task", "task_id_for"]

_ADDRESS_KINDS = ("change_address", "address_and_expedite")
_SENTENCES: dict[str, tuple[str, ...]] = {
    "cancel": ("Please cancel {ref}.", "I'd like to cancel {ref}, I don't need it any more."),
    "refund_full": (
        "{Ref} arrived but I'm not happy with it; please refund it in full.",
        "I want a full refund for {ref}.",
    ),
    "refund_partial": (
        "The {item} {inref} arrived broken. Please refund just that item.",
        "The {item} {inref} came damaged; can I get a refund for that item only?",
    ),
    "expedite": (
        "Can you upgrade {ref} to {speed} shipping?",
        "I need {ref} sooner, please switch it to {speed} shipping.",
    ),
    "status": ("What's the status of {ref}?", "Where is {ref}? I haven't heard anything."),
    "change_address": (
        "Please ship {ref} to my new address: {addr}.",
        "I moved. Can you send {ref} to {addr} instead?",
    ),
    "change_address/missing": (
        "I moved, so please change the delivery address of {ref}.",
        "{Ref} needs to go to my new address, can you update it?",
    ),
    "address_and_expedite": ("Please send {ref} to {addr} and upgrade it to {speed} shipping.",),
    "address_and_expedite/missing": (
        "I've moved: please change the address of {ref} and upgrade it to {speed} shipping.",
    ),
    "refund_cancelled": (
        "I cancelled {ref} but never got my money back. Please refund it.",
        "{Ref} was cancelled, yet I was still charged. I'd like my refund.",
    ),
}
_STATUS_BY_KIND = {
    "cancel": "processing",
    "expedite": "processing",
    "change_address": "processing",
    "address_and_expedite": "processing",
    "refund_full": "delivered",
    "refund_partial": "delivered",
    "refund_cancelled": "cancelled",
}


@dataclass(frozen=True, slots=True)
class Goal:
    """One change the task requires: after it, `order.<field>` equals `value`."""

    role: str
    order_id: str
    field: str
    value: Any
    arguments: tuple[tuple[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Task:
    """A generated task. `world` is the initial state; nothing may mutate it (the env works on a copy)."""

    task_id: str
    seed: int
    suite: Suite
    kind: str
    request: str
    world: World
    customer_id: str
    order_id: str
    given: frozenset[str]
    order_hint: str
    goals: tuple[Goal, ...]
    new_address: str
    status_word: str
    variant: str
    tools: tuple[ToolSpec, ...]

    @property
    def customer(self) -> Customer:
        customer = self.world.customer(self.customer_id)
        assert customer is not None
        return customer

    @property
    def order(self) -> Order:
        order = self.world.order(self.order_id)
        assert order is not None
        return order

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)


@dataclass(slots=True)
class _Variant:
    identity: str  # email | name_zip | both | name_only | none
    order: str  # id | hint | ambiguous
    address: str  # given | missing | n/a


def _variant(rng: random.Random, suite: Suite, kind: str) -> _Variant:
    identity = rng.choice(("email", "email", "name_zip", "both"))
    order = rng.choice(("id", "hint", "hint"))
    address = "given" if kind in _ADDRESS_KINDS else "n/a"
    if rng.random() < suite.ask_rate:
        missing = ["identity", "order"] + (["address"] if kind in _ADDRESS_KINDS else [])
        what = rng.choice(missing)
        if what == "identity":
            identity = rng.choice(("none", "name_only"))
        elif what == "order":
            order = "ambiguous"
        else:
            address = "missing"
    return _Variant(identity, order, address)


def _target_order(rng: random.Random, suite: Suite, kind: str, customer: Customer, taken: set[str]) -> Order:
    status = _STATUS_BY_KIND.get(kind) or rng.choice(("processing", "shipped", "delivered"))
    order = random_order(rng, customer, taken, status=status)
    if status == "processing":
        order.age_days, order.speed = rng.randint(0, 3), "standard"
    elif suite.multi_rule == "tier" and kind.startswith("refund"):
        order.age_days = rng.choice((rng.randint(3, 30), rng.randint(31, 110)))
    if kind == "refund_partial" and len(order.items) == 1:
        order.items += random_items(rng, 1, avoid=(order.items[0].name,))
    return order


def _shape_orders(rng: random.Random, world: World, target: Order, hint: str, ambiguous: bool) -> None:
    """Make the hint item unique among the customer's other orders, or shared with exactly one (ambiguous)."""
    taken = {o.id for o in world.orders} | {c.id for c in world.customers}
    others = [o for o in world.orders if o.customer_id == target.customer_id]
    for other in others:
        other.items = random_items(rng, len(other.items), avoid=(hint,))
    if ambiguous:
        customer = world.customer(target.customer_id)
        assert customer is not None
        twin = random_order(rng, customer, taken, status=target.status)
        twin.items = [next(i for i in target.items if i.name == hint), *random_items(rng, 1, avoid=(hint,))]
        world.orders.append(twin)
    world.orders.append(target)
    world.orders.sort(key=lambda o: (o.customer_id, o.age_days, o.id))


def _goals(suite: Suite, kind: str, order: Order, item: str, speed: str, address: str) -> tuple[Goal, ...]:
    def goal(role: str, field: str, value: Any, **args: Any) -> Goal:
        return Goal(role, order.id, field, value, (("order_id", order.id), *sorted(args.items())))

    if kind == "cancel":
        return (goal(CANCEL, "status", "cancelled"),)
    if kind in ("refund_full", "refund_partial", "refund_cancelled"):
        cents = order.total_cents
        if kind == "refund_partial":
            cents = next(i.price_cents for i in order.items if i.name == item)
        credit = suite.multi_rule == "tier" and order.age_days > 30
        role, field = (CREDIT, "credited_cents") if credit else (REFUND, "refunded_cents")
        return (goal(role, field, cents, amount=cents / 100),)
    out: list[Goal] = []
    if kind in _ADDRESS_KINDS:
        out.append(goal(SET_ADDRESS, "address", address, address=address))
    if kind in ("expedite", "address_and_expedite"):
        out.append(goal(SET_SPEED, "speed", speed, speed=speed))
    return tuple(out)


def _identity_text(v: _Variant, c: Customer) -> str:
    return {
        "email": f"Hi, my e-mail is {c.email}.",
        "name_zip": f"Hi, this is {c.name}, zip code {c.zip}.",
        "both": f"Hello, {c.name} here ({c.email}, zip {c.zip}).",
        "name_only": f"Hi, this is {c.name}.",
        "none": "Hi there.",
    }[v.identity]


def _request(rng: random.Random, kind: str, v: _Variant, c: Customer, order: Order, **slots: str) -> str:
    key = f"{kind}/missing" if v.address == "missing" else kind
    template = rng.choice(_SENTENCES[key])
    ref = f"order {order.id}" if v.order == "id" else f"my order with the {slots['hint']}"
    inref = f"in order {order.id}" if v.order == "id" else "I ordered"
    sentence = template.format(ref=ref, Ref=ref[0].upper() + ref[1:], inref=inref, **slots)
    return f"{_identity_text(v, c)} {sentence}"


def _given(v: _Variant) -> frozenset[str]:
    facts = {"email": {"email"}, "name_zip": {"name_zip"}, "both": {"email", "name_zip"}}.get(
        v.identity, set()
    )
    if v.order == "id":
        facts.add("order")
    if v.address == "given":
        facts.add("address")
    return frozenset(facts)


def task_id_for(suite: Suite, seed: int) -> str:
    """`dg-<suite digest>-<seed>`: the same settings and seed always give the same id."""
    return f"dg-{suite.digest}-{seed}"


def make_task(suite: Suite, seed: int) -> Task:
    """Build the task of `suite` and `seed` (same inputs, same task, on any machine)."""
    rng = sub_rng(seed, "task")
    kind = rng.choice(suite.kinds)
    world = generate_world(sub_rng(seed, "world"))
    customer = rng.choice(world.customers)
    v = _variant(rng, suite, kind)
    if v.identity == "name_only" or rng.random() < 0.3:
        _add_namesake(rng, world, customer)
    taken = {o.id for o in world.orders} | {c.id for c in world.customers}
    order = _target_order(rng, suite, kind, customer, taken)
    hint = rng.choice(order.items).name
    _shape_orders(rng, world, order, hint, v.order == "ambiguous")
    speed = rng.choice(("express", "overnight"))
    address = new_address(rng) if kind in _ADDRESS_KINDS else ""
    request = _request(rng, kind, v, customer, order, hint=hint, item=hint, speed=speed, addr=address)
    return Task(
        task_id=task_id_for(suite, seed),
        seed=seed,
        suite=suite,
        kind=kind,
        request=request,
        world=world,
        customer_id=customer.id,
        order_id=order.id,
        given=_given(v),
        order_hint="" if v.order == "id" else hint,
        goals=_goals(suite, kind, order, hint, speed, address),
        new_address=address,
        status_word=order.status if kind == "status" else "",
        variant=f"identity={v.identity},order={v.order},address={v.address}",
        tools=suite_tools(suite),
    )


def _add_namesake(rng: random.Random, world: World, customer: Customer) -> None:
    """Another customer with the same name in another zip code, so a name alone identifies no one."""
    zips = {c.zip for c in world.customers}
    zip_code = customer.zip
    while zip_code in zips:
        zip_code = f"{rng.randint(100, 999)}{rng.randint(10, 99)}"
    taken = {c.id for c in world.customers} | {o.id for o in world.orders}
    cid = next(f"C-{n}" for n in iter(lambda: rng.randint(1000, 9999), None) if f"C-{n}" not in taken)
    first = customer.name.split()[0].lower()
    twin = Customer(
        cid, customer.name, f"{first}{rng.randint(100, 999)}@example.com", zip_code, "555-010-0000"
    )
    world.customers.append(twin)
    world.orders.append(random_order(rng, twin, taken))
