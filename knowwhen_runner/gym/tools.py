"""The tools of a DecisionGym task: core tools (with their shifted names) and near-miss distractors.

A tool's `role` is its original core name, or `distractor`. The environment and the answer key work in
roles; names are what an agent sees. Option lists are sorted by name, so every task of a suite offers
the same options in the same order (core plus the first `n_distractors` of the distractor pool).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..exceptions import ScenarioError
from .distractors import DISTRACTOR_ROWS
from .suite import Suite

__all__ = [
    "ASK",
    "CANCEL",
    "CORE_ROLES",
    "CREDIT",
    "DISTRACTOR",
    "LIST_ORDERS",
    "LOOKUP_EMAIL",
    "LOOKUP_NAME_ZIP",
    "REFUND",
    "REPLY",
    "SET_ADDRESS",
    "SET_SPEED",
    "ToolSpec",
    "core_roles",
    "shift_map",
    "suite_tools",
    "tool_schema",
]

LOOKUP_EMAIL = "find_customer_by_email"
LOOKUP_NAME_ZIP = "find_customer_by_name_zip"
LIST_ORDERS = "list_orders"
CANCEL = "cancel_order"
REFUND = "refund_order"
CREDIT = "issue_store_credit"
SET_SPEED = "update_shipping_speed"
SET_ADDRESS = "change_shipping_address"
ASK = "ask_user"
REPLY = "reply_to_customer"
DISTRACTOR = "distractor"

_NUMBER_PARAMS = frozenset({"amount", "points"})

# role -> (shifted name, parameters, description, shifted description)
_CORE: dict[str, tuple[str, tuple[str, ...], str, str]] = {
    LOOKUP_EMAIL: (
        "lookup_account_by_email",
        ("email",),
        "Find a customer account by the e-mail address on it.",
        "Return the shopper account registered under an e-mail address.",
    ),
    LOOKUP_NAME_ZIP: (
        "lookup_account_by_name_postcode",
        ("name", "zip"),
        "Find a customer account by full name and zip code.",
        "Return the shopper account matching a full name and postcode.",
    ),
    LIST_ORDERS: (
        "get_purchase_history",
        ("customer_id",),
        "List a customer's orders in full: items and prices, status, date, shipping speed and address.",
        "Show every purchase of a shopper account: line items, prices, state, date, delivery tier, address.",
    ),
    CANCEL: (
        "void_purchase",
        ("order_id",),
        "Cancel an order that has not shipped yet.",
        "Void a purchase that has not left the warehouse.",
    ),
    REFUND: (
        "issue_refund",
        ("order_id", "amount"),
        "Refund an amount in dollars of an order to the customer's original payment method.",
        "Pay back a dollar amount of a purchase to the shopper's original card.",
    ),
    CREDIT: (
        "grant_account_credit",
        ("order_id", "amount"),
        "Give store credit in dollars for an order instead of a refund.",
        "Add shop credit in dollars for a purchase instead of paying it back.",
    ),
    SET_SPEED: (
        "change_delivery_tier",
        ("order_id", "speed"),
        "Change the shipping speed of an unshipped order (standard, express or overnight).",
        "Set the delivery tier of a purchase not yet sent (standard, express or overnight).",
    ),
    SET_ADDRESS: (
        "redirect_delivery",
        ("order_id", "address"),
        "Change the delivery address of an unshipped order.",
        "Send a purchase that has not left the warehouse to another address.",
    ),
    ASK: (
        "request_clarification",
        ("question",),
        "Ask the customer a question and wait for the answer.",
        "Put a question to the shopper and wait for the reply.",
    ),
    REPLY: (
        "send_customer_message",
        ("message",),
        "Send the final reply to the customer; this ends the conversation.",
        "Send the closing message to the shopper; this ends the conversation.",
    ),
}
CORE_ROLES: tuple[str, ...] = tuple(_CORE)
_TIER_RULE = {
    REFUND: " Policy: only for orders placed within the last 30 days.",
    CREDIT: " Policy: use for orders placed more than 30 days ago.",
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as offered to the agent."""

    name: str
    role: str
    description: str
    params: tuple[str, ...]
    effect: str = "read"

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON Schema of the arguments (all required, no others)."""
        props = {
            p: {"type": "number" if p in _NUMBER_PARAMS else "string", "description": p.replace("_", " ")}
            for p in self.params
        }
        return {
            "type": "object",
            "properties": props,
            "required": list(self.params),
            "additionalProperties": False,
        }


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The OpenAI-style function definition of a tool (for an agent LLM's `tools`)."""
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters},
    }


def core_roles(suite: Suite) -> tuple[str, ...]:
    """The core tools of a suite: store credit is core only under the tier rule."""
    return tuple(r for r in CORE_ROLES if r != CREDIT or suite.multi_rule == "tier")


def _core_spec(role: str, suite: Suite, *, shifted: bool) -> ToolSpec:
    shift_name, params, description, shift_description = _CORE[role]
    text = shift_description if shifted else description
    if suite.multi_rule == "tier":
        text += _TIER_RULE.get(role, "")
    effect = "write" if role in {CANCEL, REFUND, CREDIT, SET_SPEED, SET_ADDRESS} else "read"
    return ToolSpec(shift_name if shifted else role, role, text, params, effect)


def _distractors(suite: Suite) -> list[ToolSpec]:
    reserved = set(CORE_ROLES) | {row[0] for row in _CORE.values()}
    pool = [row for row in DISTRACTOR_ROWS if row[0] not in reserved]
    if suite.n_distractors > len(pool):
        raise ScenarioError(f"suite asks for {suite.n_distractors} distractors; the pool has {len(pool)}")
    return [
        ToolSpec(name, DISTRACTOR, description, params, effect)
        for name, params, effect, description in pool[: suite.n_distractors]
    ]


def suite_tools(
    suite: Suite, *, original_names: bool = False, distractors: bool = True
) -> tuple[ToolSpec, ...]:
    """A suite's option list, sorted by name; `original_names` undoes the shift's renaming (nosurf)."""
    shifted = suite.shift and not original_names
    tools = [_core_spec(role, suite, shifted=shifted) for role in core_roles(suite)]
    if distractors:
        tools += _distractors(suite)
    return tuple(sorted(tools, key=lambda t: t.name))


def shift_map(suite: Suite) -> dict[str, str]:
    """Original tool name -> name in this suite, for every option (identity for distractors)."""
    return {(spec.role if spec.role != DISTRACTOR else spec.name): spec.name for spec in suite_tools(suite)}
