"""The simulated agent open loop: it reads a rendered state as it reads a conversation, and errs at its rate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.dataset.files import Answer, Question, load_question_set
from knowwhen_runner.dataset.scoring import score_l2
from knowwhen_runner.gym import (
    GymEnv,
    Task,
    canonical_plan,
    get_suite,
    key_for_env,
    split_tasks,
    tool_schema,
)
from knowwhen_runner.provider import llm_body
from knowwhen_runner.serve.agent_sim import DEFAULT_ERROR_RATE, AgentSim
from knowwhen_runner.serve.gym_text import state_calls
from knowwhen_runner.work.episode import agent_messages

BUNDLED = Path(__file__).resolve().parents[2] / "scenarios" / "decisiongym"
SETS = {  # scenario -> (folder, questions file stem, suite its states come from)
    "common": ("common", "questions", "common"),
    "shift": ("shift", "questions", "shift"),
    "shift-nosurf": ("shift", "questions_nosurf", "shift"),
}
# With ~300 correlated decisions per set, seed-to-seed spread of the observed accuracy is about ±0.03.
TOLERANCE = 0.05


def _ask(sim: AgentSim, state: str, options: Any, descriptions: Any) -> str:
    """The tool the simulator picks for one open-loop question, sent as the runner sends it."""
    body = llm_body({"state": state, "options": list(options), "descriptions": list(descriptions)})
    reply = sim.complete(body["messages"], body["tools"], body["tool_choice"])
    return str(reply["tool_calls"][0]["function"]["name"])


def _open_loop_accuracy(sim: AgentSim, scenario: str) -> float:
    """Accuracy (0..1) on a bundled question set, by the benchmark's rule (per task, then over tasks)."""
    folder, stem, _suite = SETS[scenario]
    qset = load_question_set(BUNDLED / folder, questions_stem=stem)
    answers = {}
    for q in qset.questions.values():
        name = _ask(sim, q.state, q.options, q.descriptions)
        answers[q.qhash] = Answer(q.qhash, name, None, True, None, 0.0, None, None)
    return score_l2(answers, qset).accuracy / 100


def _closed_loop(sim: AgentSim, task: Task) -> list[tuple[str, str, bool]]:
    """Plays one episode; per step: the state, the tool chosen in the conversation, and whether it was right."""
    env, messages = GymEnv(task), agent_messages(task)
    tools = [tool_schema(t) for t in task.tools]
    steps: list[tuple[str, str, bool]] = []
    for n in range(15):
        if env.done:
            break
        call = sim.complete(messages, tools, "required")["tool_calls"][0]
        name = call["function"]["name"]
        steps.append((env.state(), name, name in key_for_env(env).acceptable))
        call["id"] = f"call_{n}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        observation = env.execute(name, json.loads(call["function"]["arguments"]))
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": observation})
    return steps


@pytest.mark.parametrize("scenario", sorted(SETS))
def test_open_loop_accuracy_matches_closed_loop_step_accuracy_and_the_error_rate(scenario: str) -> None:
    """At the default rate, open-loop accuracy on a bundled set is within 0.05 of 1 - rate and of closed-loop step accuracy."""
    sim = AgentSim(error_rate=DEFAULT_ERROR_RATE)
    open_loop = _open_loop_accuracy(sim, scenario)
    steps = [
        ok
        for task in split_tasks(get_suite(SETS[scenario][2]), "fit", 60)
        for *_, ok in _closed_loop(sim, task)
    ]
    closed_loop = sum(steps) / len(steps)
    expected = 1 - DEFAULT_ERROR_RATE
    assert abs(open_loop - expected) <= TOLERANCE, (open_loop, expected)
    assert abs(closed_loop - expected) <= TOLERANCE, (closed_loop, expected)
    assert abs(open_loop - closed_loop) <= TOLERANCE, (open_loop, closed_loop)


@pytest.mark.parametrize("scenario", sorted(SETS))
def test_without_errors_the_agent_answers_the_bundled_states_as_the_answer_key_does(scenario: str) -> None:
    """At rate 0 the careful policy is right on (nearly) every bundled state, off-plan ones included."""
    assert _open_loop_accuracy(AgentSim(error_rate=0.0), scenario) >= 0.98


@pytest.mark.parametrize("suite", ["common", "shift"])
def test_a_state_asked_open_loop_gets_the_tool_the_conversation_got(suite: str) -> None:
    """At every state of erring episodes, the question built from the rendered state gets the closed-loop choice."""
    sim = AgentSim(error_rate=0.2, seed=3)
    states = 0
    for task in split_tasks(get_suite(suite), "fit", 40):
        descriptions = [t.description for t in task.tools]
        for state, chosen, _ok in _closed_loop(sim, task):
            assert _ask(sim, state, task.options, descriptions) == chosen, (task.task_id, state)
            states += 1
    assert states > 100  # about five states an episode


def test_open_loop_errors_are_seeded_by_the_request() -> None:
    """The same question gets the same reply from any simulator with the same seed; another seed moves some errors."""
    qset = load_question_set(BUNDLED / "common")
    questions: list[Question] = list(qset.questions.values())

    def replies(sim: AgentSim) -> list[dict[str, Any]]:
        bodies = [
            llm_body({"state": q.state, "options": q.options, "descriptions": q.descriptions})
            for q in questions
        ]
        return [sim.complete(b["messages"], b["tools"], b["tool_choice"]) for b in bodies]

    first = replies(AgentSim(error_rate=0.1, seed=7))
    assert first == replies(AgentSim(error_rate=0.1, seed=7))
    assert first != replies(AgentSim(error_rate=0.1, seed=8))


def test_state_calls_reads_back_each_call_its_arguments_and_what_it_printed() -> None:
    """Every step of a rendered state comes back with its tool, arguments and full observation, noise included."""
    for task in split_tasks(get_suite("hard"), "fit", 20):
        env = GymEnv(task)
        for step in canonical_plan(task):
            env.execute(step.tool, step.arguments)
            calls = state_calls(env.state())
            assert [tuple(c) for c in calls] == [(s.tool, s.arguments, s.observation) for s in env.history]
