"""The canonical plan of a task and the answer key at any state of an episode.

The plan is a function of what the agent has established so far (who the customer is, whether the
orders were listed, which facts the customer gave, which required changes are made), so it applies to
recorded trajectories and to live closed-loop episodes alike. At each state it gives the acceptable next
tools (the canonical one first), the same set before removing tools the agent cannot use yet for lack of
information (`unfiltered`), and the stratum: `after_off_plan` once an earlier call was not acceptable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .env import GymEnv, Step
from .tasks import Goal, Task
from .tools import ASK, CREDIT, DISTRACTOR, LIST_ORDERS, LOOKUP_EMAIL, LOOKUP_NAME_ZIP, REPLY, SET_ADDRESS
from .world import fmt_money

__all__ = [
    "AFTER_OFF_PLAN",
    "ON_PLAN",
    "StateKey",
    "acceptable_tools",
    "answer_key",
    "canonical_plan",
    "key_for_env",
]

ON_PLAN = "on_plan"
AFTER_OFF_PLAN = "after_off_plan"
_MAX_STEPS = 30
_QUESTIONS = {
    "identity": "Could you tell me the e-mail address on your account, or your full name and zip code?",
    "order": "Which order do you mean? Could you give me the order number?",
    "address": "What is the new delivery address?",
}


@dataclass(frozen=True, slots=True)
class StateKey:
    """What is right at one state. Tool names are the task's option names; empty once the episode ended."""

    gold: str
    acceptable: tuple[str, ...]
    unfiltered: tuple[str, ...]
    stratum: str
    gold_arguments: dict[str, Any] = field(default_factory=dict)


def _pending(env: GymEnv) -> list[Goal]:
    """Required changes not yet attempted (a field still at its initial value)."""
    out = []
    for goal in env.task.goals:
        now, before = env.world.order(goal.order_id), env.task.world.order(goal.order_id)
        assert now is not None and before is not None
        if getattr(now, goal.field) == getattr(before, goal.field):
            out.append(goal)
    return out


def _ambiguous(task: Task) -> bool:
    if not task.order_hint:
        return False
    orders = task.world.orders_of(task.customer_id)
    return sum(any(i.name == task.order_hint for i in o.items) for o in orders) > 1


def _roles(env: GymEnv) -> tuple[list[str], list[str], str]:
    """(acceptable roles, unfiltered roles, what an ask would be about), canonical role first."""
    task, known = env.task, env.known
    if env.done:
        return [], [], ""
    if task.customer_id not in env.found:
        lookups = [r for r, f in ((LOOKUP_EMAIL, "email"), (LOOKUP_NAME_ZIP, "name_zip")) if f in known]
        return lookups or [ASK], [*(lookups or [ASK]), LOOKUP_EMAIL, LOOKUP_NAME_ZIP], "identity"
    if task.customer_id not in env.listed:
        return [LIST_ORDERS], [LIST_ORDERS], ""
    pending = [g.role for g in _pending(env)]
    if "order" not in known and _ambiguous(task):
        return [ASK], [ASK, *(pending or [REPLY])], "order"
    if pending:
        ready = [r for r in pending if r != SET_ADDRESS or "address" in known]
        if SET_ADDRESS in pending and "address" not in known:
            return [ASK, *ready], [ASK, *pending], "address"
        return ready, pending, ""
    return [REPLY], [REPLY], ""


def _unique(names: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def _reply_text(env: GymEnv) -> str:
    task = env.task
    oid = task.order_id
    if task.status_word:
        return f"Your order {oid} is currently {task.status_word}."
    sentences = {
        "cancel_order": f"Your order {oid} has been cancelled.",
        "refund_order": "I've refunded {amount} for order {oid} to your original payment method.",
        CREDIT: "Order {oid} was placed more than 30 days ago, so I've issued {amount} in store credit.",
        "update_shipping_speed": "Order {oid} now ships {value}.",
        SET_ADDRESS: "Order {oid} will now ship to {value}.",
    }
    parts = []
    for goal in task.goals:
        amount = fmt_money(int(goal.value)) if goal.field.endswith("_cents") else ""
        parts.append(sentences[goal.role].format(oid=oid, amount=amount, value=goal.value))
    return " ".join(parts) + " Is there anything else I can help with?"


def _arguments(role: str, env: GymEnv, ask_about: str) -> dict[str, Any]:
    task, c = env.task, env.task.customer
    if role == LOOKUP_EMAIL:
        return {"email": c.email}
    if role == LOOKUP_NAME_ZIP:
        return {"name": c.name, "zip": c.zip}
    if role == LIST_ORDERS:
        return {"customer_id": c.id}
    if role == ASK:
        return {"question": _QUESTIONS[ask_about]}
    if role == REPLY:
        return {"message": _reply_text(env)}
    goal = next(g for g in task.goals if g.role == role)
    return dict(goal.arguments)


def key_for_env(env: GymEnv, *, stratum: str = ON_PLAN) -> StateKey:
    """The answer key at the current state of a live environment."""
    names = {t.role: t.name for t in env.task.tools if t.role != DISTRACTOR}
    acceptable, unfiltered, ask_about = _roles(env)
    if not acceptable:
        return StateKey("", (), (), stratum)
    gold = acceptable[0]
    return StateKey(
        gold=names[gold],
        acceptable=_unique([names[r] for r in acceptable]),
        unfiltered=_unique([names[r] for r in acceptable + unfiltered]),
        stratum=stratum,
        gold_arguments=_arguments(gold, env, ask_about),
    )


def answer_key(task: Task, history: Sequence[Step | tuple[str, dict[str, Any]]]) -> StateKey:
    """The answer key after the calls in `history` (re-run from the task's initial world)."""
    env = GymEnv(task)
    stratum = ON_PLAN
    for step in history:
        tool, args = (step.tool, step.arguments) if isinstance(step, Step) else step
        if tool not in key_for_env(env).acceptable:
            stratum = AFTER_OFF_PLAN
        env.execute(tool, args)
    return key_for_env(env, stratum=stratum)


def acceptable_tools(
    task: Task, history: Sequence[Step | tuple[str, dict[str, Any]]]
) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """`(acceptable, unfiltered, stratum)` after the calls in `history`."""
    key = answer_key(task, history)
    return key.acceptable, key.unfiltered, key.stratum


def canonical_plan(task: Task) -> list[Step]:
    """The canonical trajectory: the gold call with its arguments at every state, until the reply."""
    env = GymEnv(task)
    while not env.done and len(env.history) < _MAX_STEPS:
        key = key_for_env(env)
        env.execute(key.gold, key.gold_arguments)
    return list(env.history)
