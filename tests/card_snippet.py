"""The AgentDecisionBench card's own L2 scoring snippet, kept as the reference our scorer must agree with."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def card_score(key: list[dict[str, Any]], answers: dict[str, dict[str, Any]]) -> float:
    """The card's snippet on plain rows: occurrences of the answer key, and answers by qhash."""

    def correct(occ: dict[str, Any], a: dict[str, Any] | None) -> bool:
        if a is None or a["error"] or not a["valid"] or a["answer"] is None:
            return False
        ok = occ["gold_aux"]["acceptable_tools"] or [occ["gold"]]
        return a["answer"].strip().lower() in {x.strip().lower() for x in ok}

    per_task: dict[str, list[bool]] = defaultdict(list)
    for occ in key:
        per_task[occ["task"]].append(correct(occ, answers.get(occ["qhash"])))
    return 100 * sum(sum(v) / len(v) for v in per_task.values()) / len(per_task)
