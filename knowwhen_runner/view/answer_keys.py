"""The answer key of each states scenario, per question: which tools are right at each occurrence.

Read from the scenario's own question-set files (occurrences and questions) as the benchmark reads
them; a nosurf variant's renaming is applied to the answer first, as scoring does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import SweepConfig
from ..dataset import load_question_set
from ..exceptions import KnowwhenError

__all__ = ["KeyEntry", "answer_keys"]


def _norm(name: str) -> str:
    return name.strip().lower()


@dataclass(frozen=True, slots=True)
class KeyEntry:
    """One occurrence of a question: its task, stratum and the tools that are right there."""

    task: str
    stratum: str
    acceptable: frozenset[str]
    rename: tuple[tuple[str, str], ...] = ()

    def accepts(self, choice: Any) -> bool:
        if not isinstance(choice, str):
            return False
        name = _norm(choice)
        return dict(self.rename).get(name, name) in self.acceptable


def answer_keys(config: SweepConfig) -> dict[str, dict[str, list[KeyEntry]]]:
    """scenario -> qhash -> its occurrences' keys; a scenario whose files cannot be read is left out."""
    out: dict[str, dict[str, list[KeyEntry]]] = {}
    for spec in config.scenarios:
        if spec.kind != "states" or spec.path is None:
            continue
        stem = "questions" if spec.variant in (None, "main") else f"questions_{spec.variant}"
        try:
            qset = load_question_set(spec.path, questions_stem=stem)
        except KnowwhenError:
            continue
        keys: dict[str, list[KeyEntry]] = {}
        for occ in qset.occurrences:
            question = qset.questions.get(occ.qhash)
            rename = tuple((_norm(k), _norm(v)) for k, v in (question.map or {}).items()) if question else ()
            ok = frozenset(_norm(t) for t in (occ.acceptable_tools or (occ.gold,)))
            keys.setdefault(occ.qhash, []).append(KeyEntry(occ.task, occ.stratum, ok, rename))
        out[spec.id] = keys
    return out
