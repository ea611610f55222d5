"""DecisionGym: seeded customer-service tasks with tools, an environment, answer keys and question sets.

Reading order: suite -> world -> tools (distractors) -> tasks -> env (noise, render) -> answer_key ->
record -> splits/bundle; ``knowwhen gym`` is ``cli/gym.py`` (so other commands start
without loading the gym). The names below are the surface other stages use (the closed loop, the
served reference models, the quickstart).
"""

from __future__ import annotations

from .answer_key import (
    AFTER_OFF_PLAN,
    ON_PLAN,
    StateKey,
    acceptable_tools,
    answer_key,
    canonical_plan,
    key_for_env,
)
from .bundle import BUNDLES, bundle, record_split
from .env import GymEnv, Step, replay
from .record import GYM_VERSION, RecordSummary, record_tasks, trajectories
from .render import render_call, render_state
from .splits import EVAL_ENV, SPLITS, EvalSeedError, check_eval_allowed, split_seeds, split_tasks, task_rows
from .suite import SUITES, Suite, get_suite
from .tasks import Task, make_task, task_id_for
from .tools import ToolSpec, shift_map, suite_tools, tool_schema

__all__ = [
    "AFTER_OFF_PLAN",
    "BUNDLES",
    "EVAL_ENV",
    "GYM_VERSION",
    "ON_PLAN",
    "SPLITS",
    "SUITES",
    "EvalSeedError",
    "GymEnv",
    "RecordSummary",
    "StateKey",
    "Step",
    "Suite",
    "Task",
    "ToolSpec",
    "acceptable_tools",
    "answer_key",
    "bundle",
    "canonical_plan",
    "check_eval_allowed",
    "get_suite",
    "key_for_env",
    "make_task",
    "record_split",
    "record_tasks",
    "render_call",
    "render_state",
    "replay",
    "shift_map",
    "split_seeds",
    "split_tasks",
    "suite_tools",
    "task_id_for",
    "task_rows",
    "tool_schema",
    "trajectories",
]
