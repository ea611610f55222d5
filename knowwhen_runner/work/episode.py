"""The closed loop (L3): one DecisionGym episode, run by an agent LLM with a decision model under a mode.

The agent LLM gets the customer's request and every option as a tool; the environment executes each
call and its output goes back into the conversation, until the agent replies to the customer or the
step budget runs out. At each tool choice the mode says who picks: ``llm`` (the LLM), ``model`` (the
decision model, reading the state exactly as recorded question sets render it; the LLM then only writes
the arguments, with ``tool_choice`` forced to that tool), ``gated`` (the decision model when its
confidence reaches τ, else the LLM) or ``shadow`` (the LLM, with the decision model's answer recorded).

Every call goes through the cache and is written at once, and the episode is a pure function of the
responses (tool-call ids are ours, not the provider's), so a killed episode replays its finished calls
on resume and reaches the same trajectory.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from ..config import ModelSpec
from ..dataset.answer_rows import choice_confidence
from ..exceptions import ProviderError
from ..gym import (
    AFTER_OFF_PLAN,
    ON_PLAN,
    GymEnv,
    Suite,
    Task,
    key_for_env,
    make_task,
    render_state,
    tool_schema,
)
from ..gym.tools import ASK, REPLY
from ..jobs import EpisodeCost, Items, Job
from ..jsonio import loads
from ..provider import CallKind, ModelFailing, decision_body
from .calls import CachedCalls

__all__ = ["EpisodeContext", "agent_messages", "run_episode"]

_SYSTEM = (
    "You are a customer-service agent of an online shop. Handle the customer's request with the tools: "
    "call exactly one tool per turn and read its result before the next. When you need something only "
    "the customer knows, ask them with {ask}. When the request is handled, call {reply} with your final "
    "message to the customer; that ends the conversation."
)
_NUDGE = "Call exactly one of the tools."


@dataclass
class EpisodeContext:
    """What a worker hands an episode: the run's models and items, its cached calls, and the job."""

    models: dict[str, ModelSpec]
    items: Items
    calls: CachedCalls
    job: Job


@functools.lru_cache(maxsize=1024)
def _task(suite_json: str, seed: int) -> Task:
    return make_task(Suite.from_json(suite_json), seed)


def agent_messages(task: Task) -> list[dict[str, Any]]:
    """The conversation's opening: the agent's instructions (naming the task's ask and reply tools) and the request."""
    names = {t.role: t.name for t in task.tools}
    system = _SYSTEM.format(ask=names[ASK], reply=names[REPLY])
    return [{"role": "system", "content": system}, {"role": "user", "content": task.request}]


def _arguments(raw: Any) -> Any:
    """The call's arguments as a dict; anything else is passed on, and the env answers with an error."""
    if raw is None or raw == "":
        return {}
    try:
        return loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError:
        return str(raw)


def _invalid(response: dict[str, Any], options: tuple[str, ...]) -> str | None:
    """Why a decision answer cannot be acted on, or None when it can."""
    choice, confidence = response.get("choice"), choice_confidence(response)
    if choice is None:
        return "invalid answer: no choice"
    if choice not in options:
        return f"invalid answer: {choice!r} is not an option"
    if not isinstance(confidence, int | float) or not math.isfinite(confidence):
        return "invalid answer: no confidence"
    return None


@dataclass
class _Spend:
    """Calls, cost and latency of one kind of call (decision or llm) within an episode: ``cost_usd`` at the
    price of every call, ``spent_usd`` of those made now (a cache hit's price was spent when it was made)."""

    calls: int = 0
    cost_usd: float = 0.0
    spent_usd: float = 0.0
    latency_ms: float = 0.0

    def add(self, response: dict[str, Any], *, cache_hit: bool) -> None:
        self.calls += 1
        price = response.get("cost_usd") or 0.0
        self.cost_usd += price
        self.spent_usd += 0.0 if cache_hit else price
        self.latency_ms += response.get("latency_ms") or 0.0


@dataclass
class _Episode:
    """The state of one running episode: environment, conversation, and what was decided so far."""

    ctx: EpisodeContext
    task: Task
    agent: ModelSpec
    decider: ModelSpec | None
    mode: str
    tau: float | None
    seed: int | None = None
    env: GymEnv = field(init=False)
    messages: list[dict[str, Any]] = field(init=False)
    tools: list[dict[str, Any]] = field(init=False)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    spend: dict[str, _Spend] = field(default_factory=lambda: {"decision": _Spend(), "llm": _Spend()})
    cache_hits: int = 0
    stratum: str = ON_PLAN
    extra_calls: list[dict[str, Any]] = field(default_factory=list)  # tool calls after the first, per step

    def __post_init__(self) -> None:
        self.env = GymEnv(self.task)
        self.messages = agent_messages(self.task)
        self.tools = [tool_schema(t) for t in self.task.tools]

    async def _call(self, model: ModelSpec, kind: CallKind, body: dict[str, Any]) -> dict[str, Any]:
        got = await self.ctx.calls.call(model, kind, body)
        self.cache_hits += got.cache_hit
        self.spend[kind].add(got.response, cache_hit=got.cache_hit)
        return got.response

    async def ask_model(self, decision: dict[str, Any]) -> str | None:
        """The decision model's pick at this state (recorded in ``decision``), or None when unusable."""
        assert self.decider is not None
        options = self.task.options
        item = {
            "state": render_state(self.task, self.env.history),
            "options": list(options),
            "descriptions": [t.description for t in self.task.tools],
        }
        try:
            response = await self._call(self.decider, "decision", decision_body(item))
        except ProviderError as exc:
            if self.mode == "model" or exc.kind in ("down", "budget") or isinstance(exc, ModelFailing):
                # The model alone decides here, or it is down (an outage must not turn into fallbacks
                # that change the result): the episode stops and its job waits in the queue.
                raise
            self.spend["decision"].calls += 1
            decision["error"] = str(exc)
            return None
        choice = response.get("choice")
        decision["model_choice"], decision["model_confidence"] = choice, choice_confidence(response)
        decision["model_reported_confidence"] = response.get("confidence")
        decision["model_correct"] = None if choice is None else choice in decision["acceptable"]
        decision["error"] = _invalid(response, options)
        return None if decision["error"] else choice

    async def ask_llm(self, forced: str | None) -> tuple[str | None, Any, str | None]:
        """(tool, raw arguments, text) from the agent LLM; ``forced`` makes it write arguments for that tool."""
        choice: Any = (
            self.agent.tool_choice if forced is None else {"type": "function", "function": {"name": forced}}
        )
        body = {"messages": list(self.messages), "tools": self.tools, "tool_choice": choice}
        if self.seed is not None:  # a repeat: its own sample of the agent (and its own cache entries)
            body["seed"] = self.seed
        response = await self._call(self.agent, "llm", body)
        tool, raw = response.get("choice"), response.get("arguments")
        extra = response.get("extra_tool_calls") or []
        if extra:  # only the first call is acted on; the rest are kept with the step
            self.extra_calls.append({"step": len(self.decisions), "calls": extra})
        if forced is not None:
            raw = raw if tool == forced else "{}"  # an LLM that ignores the forced tool wrote no usable args
            tool = forced
        return tool, raw, response.get("content")

    def confident(self, confidence: Any) -> bool:
        return self.tau is not None and isinstance(confidence, int | float) and confidence >= self.tau

    async def step(self, n: int) -> None:
        """One tool choice: the mode decides who picks, the LLM writes arguments, the env executes."""
        key = key_for_env(self.env, stratum=self.stratum)
        decision: dict[str, Any] = {
            "step": n,
            "decided_by": "llm",
            "tool": None,
            "model_choice": None,
            "model_confidence": None,
            "model_reported_confidence": None,
            "llm_choice": None,
            "acceptable": list(key.acceptable),
            "model_correct": None,
            "llm_correct": None,
            "fallback": False,
            "error": None,
            "stratum": key.stratum,
        }
        pick = await self.ask_model(decision) if self.mode != "llm" else None
        if self.mode in ("model", "gated") and decision["error"] is not None:
            decision["fallback"] = True
        if pick is not None and (
            self.mode == "model" or (self.mode == "gated" and self.confident(decision["model_confidence"]))
        ):
            decision["decided_by"] = "model"
            tool, raw, text = await self.ask_llm(forced=pick)
        else:
            tool, raw, text = await self.ask_llm(forced=None)
            decision["llm_choice"] = tool
            decision["llm_correct"] = tool in decision["acceptable"]
        decision["tool"] = tool
        self.decisions.append(decision)
        self.act(n, tool, raw, text, key.acceptable)

    def act(self, n: int, tool: str | None, raw: Any, text: str | None, acceptable: tuple[str, ...]) -> None:
        """Execute the call and append it and its result to the conversation (a turn without one is nudged)."""
        if tool is None:
            self.messages += [
                {"role": "assistant", "content": text or ""},
                {"role": "user", "content": _NUDGE},
            ]
            self.trajectory.append(
                {"step": n, "tool": None, "arguments": None, "observation": None, "text": text}
            )
            return
        if tool not in acceptable:
            self.stratum = AFTER_OFF_PLAN
        call_id = f"call_{n}"  # ours, so the conversation (and every later cache key) is reproducible
        raw_text = raw if isinstance(raw, str) else "{}"
        call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": raw_text}}
        # content "" rather than null or absent: strict chat templates (llama.cpp's) refuse the other two
        self.messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        arguments = _arguments(raw)
        observation = self.env.execute(tool, arguments)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": observation})
        shown = arguments if isinstance(arguments, dict) else raw_text
        self.trajectory.append({"step": n, "tool": tool, "arguments": shown, "observation": observation})


async def run_episode(ctx: EpisodeContext) -> dict[str, Any]:
    """Run one episode to its end; the result row is what the finaliser reads (fields listed in ``_result``)."""
    job = ctx.job
    item = ctx.items[(job.scenario_id, job.item)]
    payload = job.payload
    decider_id = payload.get("decision_model")
    run = _Episode(
        ctx=ctx,
        task=_task(item["suite"], int(item["seed"])),
        agent=ctx.models[payload["agent"]],
        decider=ctx.models[decider_id] if decider_id else None,
        mode=job.mode,
        tau=payload.get("tau"),
        seed=payload.get("seed"),
    )
    max_steps = int(payload["max_steps"])
    for n in range(max_steps):
        if run.env.done:
            break
        await run.step(n)
    return _result(job, run, max_steps)


def _mean(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def _result(job: Job, run: _Episode, max_steps: int) -> dict[str, Any]:
    decisions = run.decisions
    by_model = [d for d in decisions if d["decided_by"] == "model"]
    by_llm = [d for d in decisions if d["decided_by"] == "llm"]
    return {
        "kind": "episode",
        "scenario": job.scenario_id,
        "task_id": job.item,
        "mode": job.mode,
        "decision_model": job.model_id,  # in mode llm: the agent's own id (no decision model takes part)
        "llm": run.agent.id,
        "tau": run.tau,
        "success": run.env.success(),
        "steps": len(decisions),
        "max_steps": max_steps,
        "budget_exhausted": not run.env.done,
        "decisions": decisions,
        "coverage": len(by_model) / len(decisions) if decisions else 0.0,
        "model_accuracy": _mean([bool(d["model_correct"]) for d in by_model]),
        "llm_accuracy": _mean([bool(d["llm_correct"]) for d in by_llm]),
        "llm_calls": run.spend["llm"].calls,
        "llm_calls_saved": len(by_model),  # tool choices the LLM did not make (it only wrote arguments)
        "decision_calls": run.spend["decision"].calls,
        "fallbacks": sum(d["fallback"] for d in decisions),
        "cost_usd": EpisodeCost(decision=run.spend["decision"].cost_usd, llm=run.spend["llm"].cost_usd),
        "spent_usd": EpisodeCost(decision=run.spend["decision"].spent_usd, llm=run.spend["llm"].spent_usd),
        "latency_ms": {k: round(s.latency_ms, 3) for k, s in run.spend.items()},
        "cache_hits": run.cache_hits,
        "extra_tool_calls": sum(len(e["calls"]) for e in run.extra_calls),
        "extra_calls": run.extra_calls,
        "fit": job.payload.get("fit"),
        "repeat": int(job.payload.get("repeat") or 0),
        "seed": run.seed,
        "trajectory": run.trajectory,
        "reply": run.env.reply_message,
    }
