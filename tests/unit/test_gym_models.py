"""The served DecisionGym models, in process: the simulated agent, the learned prior and the test doubles."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from knowwhen_runner.gym import GymEnv, Task, canonical_plan, get_suite, key_for_env, split_tasks, tool_schema
from knowwhen_runner.serve import default_registry
from knowwhen_runner.serve.agent_sim import AgentSim
from knowwhen_runner.serve.gym_text import role_of
from knowwhen_runner.serve.prior import PriorDecisionModel
from knowwhen_runner.serve.test_doubles import OracleDecisionModel, RandomDecisionModel
from knowwhen_runner.work.episode import agent_messages


def _play(task: Task, sim: AgentSim, decider: Any = None) -> tuple[GymEnv, list[bool]]:
    """An episode as the runner plays it: the decider (if any) picks, the simulated agent writes arguments."""
    env, messages = GymEnv(task), agent_messages(task)
    tools = [tool_schema(t) for t in task.tools]
    right: list[bool] = []
    for n in range(15):
        if env.done:
            break
        choice: Any = "required"
        if decider is not None:
            probs = decider.decide(env.state(), task.options, [t.description for t in task.tools])
            choice = {
                "type": "function",
                "function": {"name": task.options[max(range(len(probs)), key=probs.__getitem__)]},
            }
        call = sim.complete(messages, tools, choice)["tool_calls"][0]
        name = call["function"]["name"]
        right.append(name in key_for_env(env).acceptable)
        call["id"] = f"call_{n}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        observation = env.execute(name, json.loads(call["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": observation})
    return env, right


@pytest.mark.parametrize("suite", ["common", "shift", "hard"])
def test_the_agent_without_errors_solves_every_task_from_the_text_alone(suite: str) -> None:
    """Error rate 0: the simulated agent reads request and tool output and succeeds on 60 tasks of each suite."""
    for task in split_tasks(get_suite(suite), "fit", 60):
        env, right = _play(task, AgentSim(error_rate=0.0))
        assert env.success() and all(right), task.task_id


def test_the_agent_errs_at_its_rate_in_both_ways_and_the_same_request_gets_the_same_answer() -> None:
    """Rate 0.2: about a fifth of choices go wrong, as near-miss distractors and skipped questions; replay is identical."""
    sim = AgentSim(error_rate=0.2, seed=3)
    tasks = split_tasks(get_suite("common"), "fit", 80)
    steps = [_play(task, sim)[1] for task in tasks]
    wrong = sum(not ok for run in steps for ok in run) / sum(len(run) for run in steps)
    assert 0.12 < wrong < 0.3
    assert steps == [_play(task, sim)[1] for task in tasks]
    histories = [_play(task, sim)[0].history for task in tasks]
    assert any(role_of(s.tool) == "distractor" for h in histories for s in h)
    skipped = [
        h
        for h, t in zip(histories, tasks, strict=True)
        if "ask_user" in [s.tool for s in canonical_plan(t)] and "ask_user" not in [s.tool for s in h]
    ]
    assert skipped, "some episode should skip a question the customer had to answer"
    assert sum(_play(t, sim)[0].success() for t in tasks) < len(tasks)


def test_a_forced_tool_choice_gets_that_tool_with_arguments_the_env_accepts() -> None:
    """Forced to the canonical tool at every state, the agent writes arguments that reach the goal."""
    for task in split_tasks(get_suite("shift"), "fit", 30):
        env, messages = GymEnv(task), agent_messages(task)
        tools = [tool_schema(t) for t in task.tools]
        for n, step in enumerate(canonical_plan(task)):
            forced = {"type": "function", "function": {"name": step.tool}}
            call = AgentSim(error_rate=1.0).complete(messages, tools, forced)["tool_calls"][0]
            assert call["function"]["name"] == step.tool
            call["id"] = f"call_{n}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            observation = env.execute(step.tool, json.loads(call["function"]["arguments"]))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": observation})
        assert env.success(), task.task_id


def _top(probs: Sequence[float], labels: Sequence[str]) -> str:
    return labels[max(range(len(labels)), key=probs.__getitem__)]


@pytest.mark.slow
def test_the_oracle_answers_the_answer_key_even_for_requests_that_repeat() -> None:
    """Driving the agent, the oracle is right at every state and every task succeeds (generic requests included)."""
    oracle = OracleDecisionModel()
    for task in split_tasks(get_suite("common"), "fit", 200):
        env, right = _play(task, AgentSim(error_rate=0.3), oracle)
        assert env.success() and all(right), task.task_id


@pytest.mark.slow
def test_the_prior_learns_deterministically_and_transfers_only_within_its_tool_names() -> None:
    """Training gives the same model twice; right on most common states, lost on the shift.

    (How long training takes is a benchmark figure, not a test: these machines are shared and noisy.)
    """
    prior = PriorDecisionModel()
    prior.train()
    again = PriorDecisionModel()
    again.train()
    assert prior.counts == again.counts

    def accuracy(suite: str) -> float:
        hits = total = 0
        for task in split_tasks(get_suite(suite), "fit", 60):
            env = GymEnv(task)
            for step in canonical_plan(task):
                probs = prior.decide(env.state(), task.options, [t.description for t in task.tools])
                assert sum(probs) == pytest.approx(1.0)
                hits += _top(probs, task.options) in key_for_env(env).acceptable
                total += 1
                env.execute(step.tool, step.arguments)
        return hits / total

    assert accuracy("common") > 0.85
    assert accuracy("shift") < 0.2


def test_the_random_double_is_a_distribution_fixed_by_the_question() -> None:
    """Same question, same probabilities; they sum to one and the confidence varies between questions."""
    model, labels = RandomDecisionModel(), ["a", "b", "c", "d"]
    first = model.decide("state 1", labels, [None] * 4)
    assert first == model.decide("state 1", labels, [None] * 4) and sum(first) == pytest.approx(1.0)
    tops = {round(max(model.decide(f"state {i}", labels, [None] * 4)), 3) for i in range(20)}
    assert len(tops) > 10


def test_the_server_registry_names_the_simulator_and_the_test_doubles() -> None:
    """`knowwhen serve` offers agent-sim (chat), prior, and the two *-test-double decision models."""
    registry = default_registry()
    assert "agent-sim" in registry.chat
    assert {"prior", "oracle-test-double", "random-test-double", "lexical"} <= set(registry.decision)
