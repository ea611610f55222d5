"""Reading DecisionGym text the way a model on the other end of the wire has to: from the words alone.

The served DecisionGym models see only what a real model would — the customer's request, the tool
calls and their printed results (noise lines included), the rendered state — never a task object. This
module turns that text back into facts: who the customer says they are, which order and what change they
want, what lookups and listings returned, what the customer answered, and which calls a state's HISTORY
holds. Tool roles are recognised by the tools' published names (original and shifted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..dataset.files import QUESTION_TEXT
from ..gym import Suite, suite_tools
from ..gym.tools import ASK, CANCEL, CREDIT, DISTRACTOR, LIST_ORDERS, REFUND, SET_ADDRESS, SET_SPEED

__all__ = [
    "Call",
    "Order",
    "Request",
    "Shop",
    "history_calls",
    "parse_request",
    "role_of",
    "roles_offered",
    "state_calls",
    "state_sections",
]

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_NAME = re.compile(r"(?:this is|Hello,|I'm) ([A-Z][a-z]+ [A-Z][a-z]+)\b")
_ZIP = re.compile(r"zip(?: code)? (\d{5})")
_ORDER_ID = re.compile(r"\bO-\d{5}\b")
_ADDRESS = re.compile(r"\d{1,5} [A-Za-z ]+?, [A-Za-z ]+, [A-Z]{2} \d{5}")
_SPEED = re.compile(r"\b(express|overnight)\b")
_CUSTOMER = re.compile(r"customer (C-\d+): (.+?) \| e-mail (\S+) \| zip (\S+) \| phone (\S+)")
_ORDER = re.compile(
    r"order (O-\d+) \| placed \S+ \((\d+) days ago\) \| status (\w+) \| total \$(\d+)\.(\d\d)"
)
_ITEM = re.compile(r"(.+?) \(SKU-\d+\) \$(\d+)\.(\d\d)")
_SHIPPING = re.compile(r"^\s+shipping: (\w+) to (.+)$")
_CALL = re.compile(r"^\d+\. (\S+) (\{.*\})$")
_SECTION = re.compile(r"^(TASK|HISTORY|CURRENT OBSERVATION):[ ]?", re.MULTILINE)
_RESULT_OF = re.compile(r"\A\(result of step \d+\)\n?")
_INDENT = "   "  # how render_state indents an earlier call's result


def _role_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for shift in (False, True):
        for spec in suite_tools(Suite(shift=shift, multi_rule="tier", n_distractors=0)):
            table[spec.name] = spec.role
    return table


_ROLES = _role_table()


def role_of(tool_name: str) -> str:
    """The role of a tool by its name (``distractor`` for any tool that is not a core one)."""
    return _ROLES.get(tool_name, DISTRACTOR)


def roles_offered(names: Iterable[str]) -> dict[str, str]:
    """Role -> offered name, for the core tools among ``names``."""
    return {_ROLES[n]: n for n in names if n in _ROLES}


@dataclass
class Request:
    """What the customer's first message says (kind is a keyword reading of the request)."""

    text: str
    kind: str
    email: str | None
    name: str | None
    zip: str | None
    order_id: str | None
    address: str | None
    speed: str | None


def _kind(text: str) -> str:
    t = text.lower()
    if "cancelled" in t and any(w in t for w in ("refund", "money back", "charged")):
        return "refund_cancelled"
    if "cancel" in t:
        return "cancel"
    if "refund" in t:
        return "refund_partial" if any(w in t for w in ("broken", "damaged", "that item")) else "refund_full"
    if "status" in t or "where is" in t:
        return "status"
    moving = any(w in t for w in ("address", "moved", "send "))
    speed = _SPEED.search(t) is not None
    if moving and speed:
        return "address_and_expedite"
    return "change_address" if moving else "expedite" if speed else "unknown"


def _first(pattern: re.Pattern[str], text: str, group: int = 0) -> str | None:
    match = pattern.search(text)
    return match.group(group) if match else None


def parse_request(text: str) -> Request:
    """Read the customer's request."""
    return Request(
        text=text,
        kind=_kind(text),
        email=_first(_EMAIL, text),
        name=_first(_NAME, text, 1),
        zip=_first(_ZIP, text, 1),
        order_id=_first(_ORDER_ID, text),
        address=_first(_ADDRESS, text),
        speed=_first(_SPEED, text.lower(), 1),
    )


@dataclass
class Order:
    """An order as a listing printed it."""

    id: str
    customer_id: str
    age_days: int
    status: str
    total_cents: int
    items: dict[str, int] = field(default_factory=dict)
    speed: str = ""
    address: str = ""


@dataclass
class Shop:
    """Everything learned so far: the request, the customer's answers, lookups, listings and changes made."""

    request: Request
    customers: dict[str, tuple[str, str, str, str]] = field(
        default_factory=dict
    )  # id -> name, email, zip, phone
    looked_up: set[tuple[str, str]] = field(default_factory=set)  # (role, argument JSON) already tried
    listed: set[str] = field(default_factory=set)
    orders: dict[str, Order] = field(default_factory=dict)
    done: set[tuple[str, str]] = field(default_factory=set)  # (role, order id) of changes that went through
    asked: int = 0

    def learn(self, tool: str, arguments: Mapping[str, Any], observation: str) -> None:
        """Take in one executed call and what it printed."""
        role = role_of(tool)
        if role == ASK:
            self.asked += 1
            self._answer(observation)
        elif role == LIST_ORDERS:
            self._listing(str(arguments.get("customer_id", "")), observation)
        elif role in (CANCEL, REFUND, CREDIT, SET_SPEED, SET_ADDRESS) and "ERROR:" not in observation:
            self.done.add((role, str(arguments.get("order_id", "")).strip()))
        if role != DISTRACTOR:
            self.looked_up.add((role, json.dumps(dict(arguments), sort_keys=True)))
        for cid, name, email, zip_code, phone in _CUSTOMER.findall(observation):
            self.customers[cid] = (name, email, zip_code, phone)

    def _answer(self, observation: str) -> None:
        r = self.request
        r.email = r.email or _first(_EMAIL, observation)
        name_zip = re.search(r"I'm ([A-Z][a-z]+ [A-Z][a-z]+), zip code (\d{5})", observation)
        if name_zip:
            r.name, r.zip = r.name or name_zip.group(1), r.zip or name_zip.group(2)
        r.order_id = r.order_id or _first(_ORDER_ID, observation)
        r.address = r.address or _first(_ADDRESS, observation)

    def _listing(self, customer_id: str, observation: str) -> None:
        if not _ORDER.search(observation):
            return
        self.listed.add(customer_id)
        current: Order | None = None
        for line in observation.splitlines():
            head = _ORDER.search(line)
            if head:
                oid, age, status, dollars, cents = head.groups()
                current = Order(oid, customer_id, int(age), status, int(dollars) * 100 + int(cents))
                self.orders[oid] = current
            elif current is not None and line.strip().startswith("items:"):
                for part in line.split("items:", 1)[1].split(";"):
                    item = _ITEM.search(part.strip())
                    if item:
                        current.items[item.group(1)] = int(item.group(2)) * 100 + int(item.group(3))
            elif current is not None and (ship := _SHIPPING.match(line)):
                current.speed, current.address = ship.group(1), ship.group(2)

    def customer(self) -> str | None:
        """The id of the customer the request (or their answers) identify, once a lookup found them."""
        r = self.request
        for cid, (name, email, zip_code, _phone) in sorted(self.customers.items()):
            if (r.email and email == r.email.lower()) or (
                r.name and r.zip and (name, zip_code) == (r.name, r.zip)
            ):
                return cid
        return None

    def candidates(self, customer_id: str) -> list[Order]:
        """The customer's listed orders the request can mean (by id, else by an item it names)."""
        orders = [o for o in self.orders.values() if o.customer_id == customer_id]
        if self.request.order_id:
            return [o for o in orders if o.id == self.request.order_id]
        text = self.request.text.lower()
        return [o for o in orders if any(name in text for name in o.items)]


def state_sections(state: str) -> dict[str, str]:
    """The TASK, HISTORY and CURRENT OBSERVATION parts of a rendered state."""
    marks = list(_SECTION.finditer(state))
    return {
        m.group(1): state[m.end() : marks[i + 1].start() if i + 1 < len(marks) else len(state)].strip("\n")
        for i, m in enumerate(marks)
    }


class Call(NamedTuple):
    """One executed call as the agent read it: the tool's name, its arguments and what it printed."""

    tool: str
    arguments: dict[str, Any]
    observation: str


def _arguments(raw: object) -> dict[str, Any]:
    """Call arguments as a dict; unreadable or non-object JSON counts as no arguments."""
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def state_calls(state: str) -> list[Call]:
    """The calls a rendered state's HISTORY lists, each with what it printed.

    Earlier results are indented under their call; the latest call's result is the CURRENT OBSERVATION.
    """
    sections = state_sections(state)
    found: list[tuple[str, str, list[str]]] = []
    for line in sections.get("HISTORY", "").splitlines():
        match = _CALL.match(line)
        if match:
            found.append((match.group(1), match.group(2), []))
        elif found:
            found[-1][2].append(line.removeprefix(_INDENT))
    current = _RESULT_OF.sub("", sections.get("CURRENT OBSERVATION", ""), count=1)
    return [
        Call(tool, _arguments(raw), current if n == len(found) else "\n".join(printed))
        for n, (tool, raw, printed) in enumerate(found, start=1)
    ]


def history_calls(state: str) -> list[tuple[str, dict[str, Any]]]:
    """The (tool, arguments) calls listed in a rendered state's HISTORY, in order."""
    return [(call.tool, call.arguments) for call in state_calls(state)]


def _rendered_state(text: str) -> str | None:
    """The rendered state an open-loop question sends as its user message (question text dropped), if any."""
    if not text.startswith("TASK: "):
        return None
    state = text.removesuffix(QUESTION_TEXT).rstrip("\n")
    return state if {"TASK", "HISTORY", "CURRENT OBSERVATION"} <= state_sections(state).keys() else None


def conversation(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[Call]]:
    """The request and the executed calls of a conversation.

    Closed loop, the calls are the assistant's tool calls and their tool messages. An open-loop question
    arrives as one user message holding a rendered state; then the request is its TASK and the calls are
    its HISTORY, so the agent reads the same facts either way.
    """
    request = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    results = {
        m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"
    }
    calls: list[Call] = []
    for message in messages:
        for call in message.get("tool_calls") or [] if message.get("role") == "assistant" else []:
            function = call.get("function", {})
            observation = results.get(call.get("id"), "")
            calls.append(
                Call(str(function.get("name")), _arguments(function.get("arguments") or "{}"), observation)
            )
    state = _rendered_state(request) if not calls else None
    if state is not None:
        return state_sections(state)["TASK"], state_calls(state)
    return request, calls
