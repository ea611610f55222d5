"""AgentDecisionBench's formats and rules: its files, answer rows, scoring, and getting the dataset.

``rows`` says what a published row of each kind may hold (typed models every reader checks rows
against); ``files`` reads the benchmark's layout (questions, answer keys, answers, corpus, models,
leaderboard);
``answer_rows`` is one answer as the runner writes it; ``answer_key`` is the compiled answer key and
``scoring`` reproduces the card's numbers (numpy's metrics, loaded on first use);
``score_folder`` is the ``score`` command; ``hub`` fetches the dataset; ``features`` declares the
files' column types for a dataset card; ``publish`` uploads a dataset folder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .answer_key import AnswerKey, compile_key
from .answer_rows import (
    ANSWER_SCHEMA_VERSION,
    AnswerRow,
    AnswerRowDict,
    answer_row,
    choice_confidence,
    failed_row,
)
from .files import QUESTION_TEXT, QuestionSet, compute_qhash, load_answers, load_question_set

if TYPE_CHECKING:
    from .scoring import score_l1, score_l2

__all__ = [
    "ANSWER_SCHEMA_VERSION",
    "QUESTION_TEXT",
    "AnswerKey",
    "AnswerRow",
    "AnswerRowDict",
    "QuestionSet",
    "answer_row",
    "choice_confidence",
    "compile_key",
    "compute_qhash",
    "failed_row",
    "load_answers",
    "load_question_set",
    "score_l1",
    "score_l2",
]

_SCORING = frozenset({"score_l1", "score_l2"})


def __getattr__(name: str) -> Any:
    """The scoring names, loaded on first use: reading questions (a run's start) needs neither them nor
    numpy under them."""
    if name in _SCORING:
        from . import scoring  # start-up: numpy loads only when something is scored

        return getattr(scoring, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
