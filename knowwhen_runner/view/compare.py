"""Two runs side by side: the questions and the episodes whose outcome flipped between them.

A question is matched by (scenario, model, qhash) and flips when it is right in one run and wrong in
the other; an episode is matched by (scenario, model, mode, task) — not τ, which a refit may move — and
flips when it succeeds in one run only.
"""

from __future__ import annotations

from typing import Any

from .data import RunData
from .questions import judged_rows

__all__ = ["flipped", "flips"]

_QUESTION = ("scenario", "model", "qhash")
_EPISODE = ("scenario", "model", "mode", "task_id")


def flipped(
    questions: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    episodes: tuple[list[dict[str, Any]], list[dict[str, Any]]],
) -> dict[str, Any]:
    """Rows of run A and run B whose judgement differs, each pair side by side."""
    qa = {tuple(r[k] for k in _QUESTION): r for r in questions[0]}
    out_q = []
    for row in questions[1]:
        before = qa.get(tuple(row[k] for k in _QUESTION))
        judged = before is not None and None not in (before["right"], row["right"])
        if judged and before is not None and before["right"] != row["right"]:
            out_q.append(
                {**{k: row[k] for k in _QUESTION}, "a_answer": before["answer"],
                 "a_confidence": before["confidence"], "a_right": before["right"], "b_answer": row["answer"],
                 "b_confidence": row["confidence"], "b_right": row["right"]}
            )  # fmt: skip
    ea = {tuple(r[k] for k in _EPISODE): r for r in episodes[0]}
    out_e = []
    for row in episodes[1]:
        before = ea.get(tuple(row[k] for k in _EPISODE))
        if before is not None and before["success"] != row["success"]:
            out_e.append(
                {**{k: row[k] for k in _EPISODE}, "a_id": before["id"], "a_success": before["success"],
                 "a_by": before["by"], "b_success": row["success"], "b_by": row["by"]}
            )  # fmt: skip
    return {"questions": out_q, "episodes": out_e, "compared": [len(questions[1]), len(episodes[1])]}


async def flips(a: RunData, b: RunData) -> dict[str, Any]:
    """What flipped from run ``a`` to run ``b``."""
    questions = ((await judged_rows(a, None))["rows"], (await judged_rows(b, None))["rows"])
    return {
        "a": a.queue.run,
        "b": b.queue.run,
        **flipped(questions, (await a.episodes(), await b.episodes())),
    }
