"""The generated shop behind a DecisionGym task: customers, their orders, and what the tools change.

Everything is built from one `random.Random`, so a seed gives the same world. Money is kept in cents;
dates are relative to a fixed `TODAY` so that a world never depends on the clock.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "SPEEDS",
    "STATUSES",
    "TODAY",
    "Customer",
    "Item",
    "Order",
    "World",
    "fmt_money",
    "generate_world",
    "new_address",
    "random_items",
    "random_order",
]

TODAY = dt.date(2026, 3, 1)

_FIRST = [
    "Ava",
    "Ben",
    "Chloe",
    "Daniel",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Iris",
    "Jonas",
    "Keiko",
    "Liam",
    "Maya",
    "Noah",
    "Olga",
    "Pablo",
    "Quinn",
    "Rosa",
    "Samir",
    "Tara",
    "Umar",
    "Vera",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
]
_LAST = [
    "Adler",
    "Brooks",
    "Castillo",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Lopez",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quinteros",
    "Rossi",
    "Schmidt",
    "Tanaka",
    "Usman",
    "Varga",
    "Weber",
    "Xu",
    "Yilmaz",
    "Zimmer",
]
_DOMAINS = ("example.com", "mail.example.org", "inbox.example.net")
_STREETS = (
    "Oak St",
    "Maple Ave",
    "Cedar Ln",
    "Harbor Rd",
    "Elm Ct",
    "Willow Way",
    "Pine St",
    "Lakeview Dr",
    "Birch Pl",
    "Mill Rd",
)
_CITIES = (
    ("Springfield", "IL", "627"),
    ("Riverton", "WY", "825"),
    ("Fairview", "OR", "970"),
    ("Madison", "WI", "537"),
    ("Georgetown", "TX", "786"),
    ("Salem", "MA", "019"),
    ("Franklin", "TN", "370"),
    ("Clinton", "IA", "527"),
)
_CATALOG = (
    ("wireless headphones", 8999),
    ("usb-c cable", 1299),
    ("phone case", 1999),
    ("coffee grinder", 4950),
    ("yoga mat", 2800),
    ("desk lamp", 3450),
    ("water bottle", 1800),
    ("bluetooth speaker", 5999),
    ("running shoes", 11900),
    ("backpack", 6500),
    ("mechanical keyboard", 12900),
    ("throw blanket", 3900),
    ("chef's knife", 7400),
    ("e-reader", 13999),
    ("smart plug", 2499),
    ("rain jacket", 8800),
    ("cast iron pan", 4200),
    ("board game", 3599),
    ("wall clock", 2650),
    ("camping lantern", 3150),
)
STATUSES = ("processing", "shipped", "delivered", "cancelled")
SPEEDS = ("standard", "express", "overnight")


def fmt_money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


@dataclass(slots=True)
class Item:
    sku: str
    name: str
    price_cents: int


@dataclass(slots=True)
class Customer:
    id: str
    name: str
    email: str
    zip: str
    phone: str


@dataclass(slots=True)
class Order:
    id: str
    customer_id: str
    items: list[Item]
    age_days: int
    status: str
    speed: str
    address: str
    refunded_cents: int = 0
    credited_cents: int = 0

    @property
    def total_cents(self) -> int:
        return sum(item.price_cents for item in self.items)

    @property
    def placed(self) -> str:
        return (TODAY - dt.timedelta(days=self.age_days)).isoformat()


@dataclass(slots=True)
class World:
    """The shop's state; tools read and change it, and success compares it with the expected state."""

    customers: list[Customer]
    orders: list[Order]
    side_effects: list[str] = field(default_factory=list)

    def customer(self, customer_id: str) -> Customer | None:
        return next((c for c in self.customers if c.id == customer_id), None)

    def order(self, order_id: str) -> Order | None:
        return next((o for o in self.orders if o.id == order_id), None)

    def orders_of(self, customer_id: str) -> list[Order]:
        return [o for o in self.orders if o.customer_id == customer_id]

    def snapshot(self) -> dict[str, Any]:
        """Everything a tool can change, as plain data (for comparing final and expected states)."""
        return {
            "orders": {o.id: asdict(o) for o in self.orders},
            "side_effects": list(self.side_effects),
        }


def new_address(rng: random.Random) -> str:
    city, state, zip3 = rng.choice(_CITIES)
    return f"{rng.randint(10, 9899)} {rng.choice(_STREETS)}, {city}, {state} {zip3}{rng.randint(10, 99)}"


def _unique_id(rng: random.Random, prefix: str, digits: int, taken: set[str]) -> str:
    while True:
        value = f"{prefix}-{rng.randint(10 ** (digits - 1), 10**digits - 1)}"
        if value not in taken:
            taken.add(value)
            return value


def _customer(rng: random.Random, taken: set[str]) -> Customer:
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    sep = rng.choice((".", "_", ""))
    email = f"{first.lower()}{sep}{last.lower()}{rng.randint(1, 99)}@{rng.choice(_DOMAINS)}"
    _, _, zip3 = rng.choice(_CITIES)
    return Customer(
        id=_unique_id(rng, "C", 4, taken),
        name=f"{first} {last}",
        email=email,
        zip=f"{zip3}{rng.randint(10, 99)}",
        phone=f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
    )


def random_items(rng: random.Random, k: int, avoid: tuple[str, ...] = ()) -> list[Item]:
    pool = [entry for entry in _CATALOG if entry[0] not in avoid]
    return [Item(_sku(n), n, p) for n, p in rng.sample(pool, k)]


def _sku(name: str) -> str:
    """A stable SKU for an item name (Python's hash() is salted per process, so not that)."""
    return f"SKU-{sum((i + 1) * ord(ch) for i, ch in enumerate(name)) % 9000 + 1000}"


def random_order(
    rng: random.Random, customer: Customer, taken: set[str], *, status: str | None = None
) -> Order:
    status = status or rng.choice(STATUSES)
    age = {"processing": (0, 3), "shipped": (2, 9)}.get(status, (5, 120))
    return Order(
        id=_unique_id(rng, "O", 5, taken),
        customer_id=customer.id,
        items=random_items(rng, rng.randint(1, 3)),
        age_days=rng.randint(*age),
        status=status,
        speed=rng.choice(("standard", "standard", "express")),
        address=new_address(rng),
    )


def generate_world(rng: random.Random, n_customers: int = 6) -> World:
    """Customers with one to three orders each; the task generator then shapes the target's orders."""
    taken: set[str] = set()
    customers = [_customer(rng, taken) for _ in range(n_customers)]
    orders = [random_order(rng, c, taken) for c in customers for _ in range(rng.randint(1, 3))]
    return World(customers, orders)
