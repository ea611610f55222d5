"""``knowwhen score``: score answer files of a question-set folder, and check the published leaderboard.

Everything the command prints is built here as a JSON-able dict (``score_report``, ``leaderboard_report``),
which the command line draws as a table or writes as JSON (``cli/score_tables.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ..exceptions import ScenarioError
from ..intervals import miss
from ..jsonio import find_jsonl
from .files import (
    AnswerTable,
    LeaderboardRow,
    QuestionSet,
    load_answers,
    load_question_set,
    read_isolated_answers,
)
from .files import read_leaderboard as _read_leaderboard
from .leaderboard_ci import l1_interval, l2_interval
from .scoring import compile_key, gated_open_loop, score_l1, score_l2
from .subset import SubsetRecord, read_subset

if TYPE_CHECKING:
    from ..intervals import Interval

__all__ = [
    "VARIANTS",
    "L3Recompute",
    "LeaderboardCheck",
    "LeaderboardTarget",
    "check_leaderboard",
    "leaderboard_report",
    "leaderboard_target",
    "load_variant",
    "score_report",
]

VARIANTS = {"main": "questions", "nosurf": "questions_nosurf", "nodist": "questions_nodist"}
"""Variant name -> stem of its questions file; answers say their variant in the row (common states: main)."""


def load_variant(dataset_dir: Path, variant: str = "main") -> QuestionSet:
    """Load a question-set folder with the questions file of ``variant`` (same qhashes as main)."""
    if variant not in VARIANTS:
        raise ScenarioError(f"unknown variant '{variant}' (one of: {', '.join(VARIANTS)})")
    return load_question_set(Path(dataset_dir), questions_stem=VARIANTS[variant])


def _answers_of(table: AnswerTable, model: str, variant: str, folder: Path) -> dict[str, Any]:
    found = table.get((model, variant))
    if found is None:
        # The table may have been read for the wanted models only; list what the folder really holds.
        every = load_answers(folder)
        known = sorted({f"{m} ({v})" for m, v in every}) or ["none"]
        raise ScenarioError(f"{folder}: no answers of model '{model}' ({variant}); found: {', '.join(known)}")
    return found


def score_report(
    dataset_dir: Path,
    *,
    model: str | None = None,
    variant: str = "main",
    all_models: bool = False,
    gate_with: str | None = None,
    target: float = 0.99,
) -> dict[str, Any]:
    """Score one model (or every model with ``all_models``) and return a JSON-able report.

    With ``gate_with``, each scored model is also gated over that LLM's answers of the same variant.
    """
    folder = Path(dataset_dir)
    if not all_models and not model:
        raise ScenarioError("give --model ID, or --all to score every model in the folder")
    qset = load_variant(folder, variant)
    key = compile_key(qset)
    wanted = None if all_models else {m for m in (model, gate_with) if m}
    table = load_answers(folder, qset.questions, models=wanted, variant=variant)
    names = sorted({m for m, v in table if v == variant}) if all_models else [str(model)]
    llm = _answers_of(table, gate_with, variant, folder) if gate_with else None
    results: dict[str, Any] = {}
    for name in names:
        answers = _answers_of(table, name, variant, folder)
        entry = score_l2(answers, key).to_dict()
        if llm is not None:
            entry["gate"] = {"llm": gate_with, **gated_open_loop(answers, llm, key, target=target).to_dict()}
        results[name] = entry
    subset = _subset_of(folder)
    if all_models:
        return {"dataset": str(folder), "variant": variant, "subset": subset, "models": results}
    return {
        "dataset": str(folder),
        "variant": variant,
        "subset": subset,
        "model": model,
        **results[str(model)],
    }


def _subset_of(folder: Path) -> dict[str, Any] | None:
    """What a folder holding a subset (its ``subset.json``) is a sample of, JSON-able; None for a whole set."""
    record = read_subset(folder)
    return None if record is None else {**asdict(record), "sentence": record.sentence()}


# --- leaderboard check -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderboardCheck:
    """One leaderboard row against its recomputation; ``status`` is match, within interval (with
    ``--tolerance ci``: not equal at the printed precision, but inside the recomputation's 95% interval),
    differs, subset (the files hold a seeded sample, so their figure is not a full set's: never a match),
    no data or not recomputable. ``low``/``high``: that interval; ``miss``: how far outside it
    the published number lies (+ above, − below; 0 inside), both in points."""

    line: int
    model: str
    level: str
    task_set: str
    metric: str
    published: float | None
    recomputed: float | None
    status: str
    note: str = ""
    low: float | None = None
    high: float | None = None
    miss: float | None = None


Tolerance = Literal["exact", "ci"]


class LeaderboardTarget(NamedTuple):
    """What recomputes a leaderboard row: level, folder under the dataset root, variant, and measure."""

    level: str
    folder: str
    variant: str
    measure: str


def leaderboard_target(level: str, task_set: str, metric: str) -> LeaderboardTarget | None:
    """Map a leaderboard row to what recomputes it, or None when the files cannot (L3, unknown metric).

    L1 measures are ``pooled`` and ``bfcl_tool_choice`` (folder ``isolated``); L2 measures are
    ``accuracy``, ``must_ask`` or a stratum name, on ``shift`` or ``common_states`` and a variant. Names
    are matched loosely (case, separators, words like "bfcl", "must", "nosurf") because the published
    field values are free text copied from the paper's tables.
    """
    lvl = re.sub(r"[^a-z0-9]", "", level.lower())
    ts, m = task_set.lower(), metric.lower()
    text = f"{ts} {m}"
    if lvl in {"l1", "1", "isolated"}:
        if "bfcl" in text:
            return LeaderboardTarget("L1", "isolated", "", "bfcl_tool_choice")
        if "pooled" in text or "isolated" in text or m in {"accuracy", "acc"}:
            return LeaderboardTarget("L1", "isolated", "", "pooled")
        return None
    if lvl not in {"l2", "2", "openloop"}:
        return None
    folder = "shift" if "shift" in ts else "common_states" if "common" in ts else None
    variant = "nosurf" if "nosurf" in text else "nodist" if "nodist" in text else "main"
    if "must" in m:
        measure = "must_ask"
    elif "after_off_plan" in m or "on_plan" in m:
        measure = "after_off_plan" if "after_off_plan" in m else "on_plan"
    elif "accuracy" in m or m in {"acc", "all", "all_states", "l2"}:
        measure = "accuracy"
    else:
        return None
    return None if folder is None else LeaderboardTarget("L2", folder, variant, measure)


def _published(value: str, value_num: float | None) -> tuple[float | None, int]:
    """The printed number and its decimals (the precision to compare at); value_num when nothing prints."""
    found = re.search(r"-?\d+(?:\.(\d+))?", value)
    if found:
        return float(found.group(0)), len(found.group(1) or "")
    return value_num, 1


class _Recomputer:
    """Loads each question set, answer table and the isolated answers once, for all leaderboard rows."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._l2: dict[tuple[str, str], tuple[Any, AnswerTable]] = {}
        self._l1: dict[str, Any] | None = None

    def value(self, target: LeaderboardTarget, model: str) -> float | None:
        """The recomputed number (percent), or None when the files hold no answers of ``model``."""
        if target.level == "L1":
            return self._l1_value(model, target.measure)
        return self._l2_value(target.folder, target.variant, model, target.measure)

    def interval(self, target: LeaderboardTarget, model: str) -> Any:
        """The recomputation's 95% interval (``intervals.Interval``, percent), or None."""
        if target.level == "L1":
            self._l1_value(model, target.measure)  # loads the rows
            rows = (self._l1 or {}).get(model)
            return l1_interval(rows, target.measure) if rows else None
        key, table = self._l2_table(target.folder, target.variant)
        answers = table.get((model, target.variant))
        return None if answers is None else l2_interval(answers, key, target.measure)

    def _l2_table(self, folder: str, variant: str) -> tuple[Any, AnswerTable]:
        if (folder, variant) not in self._l2:
            qset = load_variant(self.root / folder, variant)
            table = load_answers(self.root / folder, qset.questions, variant=variant)
            self._l2[(folder, variant)] = (compile_key(qset), table)
        return self._l2[(folder, variant)]

    def _l2_value(self, folder: str, variant: str, model: str, kind: str) -> float | None:
        key, table = self._l2_table(folder, variant)
        answers = table.get((model, variant))
        if answers is None:
            return None
        result = score_l2(answers, key)
        if kind == "accuracy":
            return result.accuracy
        if kind == "must_ask":
            return result.must_ask
        stratum = result.strata.get(kind)
        return stratum.accuracy if stratum else None

    def _l1_value(self, model: str, kind: str) -> float | None:
        if self._l1 is None:
            path = find_jsonl(self.root / "isolated", "answers")
            if path is None:
                raise ScenarioError(f"{self.root / 'isolated'}: no answers.jsonl[.gz] (the isolated answers)")
            self._l1 = read_isolated_answers(path)
        rows = self._l1.get(model)
        if not rows:
            return None
        score = score_l1(rows)
        return score.pooled if kind == "pooled" else score.bfcl_tool_choice


L3Recompute = Callable[[str, str, str, str], "tuple[float | None, Interval | None] | None"]
"""(model, level, task set, metric) -> the recomputed number (percent) and its 95% interval, or None when
the row is not one it recomputes: how a caller that reads episode files checks the L3 rows."""


def check_leaderboard(
    root: Path, *, tolerance: Tolerance = "exact", l3: L3Recompute | None = None
) -> list[LeaderboardCheck]:
    """Recompute every L1/L2 leaderboard row the files allow (and, with ``l3``, the L3 rows) and compare at
    the printed precision; with ``tolerance="ci"`` a number that differs is still accepted inside the
    recomputation's 95% interval."""
    root = Path(root)
    path = find_jsonl(root / "leaderboard", "headline_numbers")
    if path is None:
        raise ScenarioError(f"{root / 'leaderboard'}: no headline_numbers.jsonl[.gz]")
    recompute = _Recomputer(root)
    out: list[LeaderboardCheck] = []
    for row in _read_leaderboard(path):
        published, decimals = _published(row.value, row.value_num)
        base = (row.line, row.model, row.level, row.task_set, row.metric, published)
        found = _recomputed(recompute, l3, row)
        if found is None:
            out.append(LeaderboardCheck(*base, None, "not recomputable", "no data for this level or metric"))
            continue
        got, interval, note = found
        if got is None or published is None:
            note = "no answers for this model" if got is None else "no published number"
            out.append(LeaderboardCheck(*base, got, "no data", note))
            continue
        slack = 0.5 * 10.0**-decimals + 1e-9  # the printed number is rounded
        same = abs(got - published) <= slack
        subset = _row_subset(root, row)
        if subset is not None:  # a sample's figure neither confirms nor refutes a full set's
            said = "equals the published number" if same else "differs from the published number"
            note = (
                f"{note}; recomputed over a subset, {subset.sentence()}: {said}, not comparable as an equal"
            )
            out.append(LeaderboardCheck(*base, got, "subset", note))
            continue
        if tolerance == "exact":
            out.append(LeaderboardCheck(*base, got, "match" if same else "differs", note))
            continue
        out.append(_within(base, published, got, same, note, interval(), slack))
    return out


def _row_subset(root: Path, row: LeaderboardRow) -> SubsetRecord | None:
    """The subset the files recomputing ``row`` hold (their folder's ``subset.json``), or None."""
    target = leaderboard_target(row.level, row.task_set, row.metric)
    folder = root / target.folder if target is not None else root / "episodes" / row.task_set
    return read_subset(folder) if folder.is_dir() else None


def _recomputed(
    recompute: _Recomputer, l3: L3Recompute | None, row: LeaderboardRow
) -> tuple[float | None, Callable[[], Any], str] | None:
    """(number, its interval when asked for, what recomputed it) of a leaderboard row, or None."""
    target = leaderboard_target(row.level, row.task_set, row.metric)
    if target is not None:
        return (
            recompute.value(target, row.model),
            lambda: recompute.interval(target, row.model),
            "/".join(filter(None, target)),
        )
    closed = l3(row.model, row.level, row.task_set, row.metric) if l3 else None
    if closed is None:
        return None
    return closed[0], lambda: closed[1], f"episodes/{row.task_set}"


def _within(
    base: tuple[int, str, str, str, str, float | None],
    published: float,
    got: float,
    same: bool,
    note: str,
    interval: Any,
    slack: float,
) -> LeaderboardCheck:
    """A row checked against the recomputation's interval (widened by the printed precision)."""
    check = LeaderboardCheck(*base, got, "match" if same else "differs", note)
    if interval is None:
        return check
    off = miss(published, interval, slack=slack)
    if same:
        status = "match"
    elif off == 0.0:
        status = "within interval"
    else:
        status = "differs"
        note += f"; {abs(off):.2f} points {'above' if off > 0 else 'below'} the 95% interval"
    return replace(check, status=status, note=note, low=interval.low, high=interval.high, miss=off)


def leaderboard_report(
    root: Path, *, tolerance: Tolerance = "exact", l3: L3Recompute | None = None
) -> dict[str, Any]:
    """JSON-able leaderboard check: every row and a count per status."""
    rows = check_leaderboard(root, tolerance=tolerance, l3=l3)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return {
        "dataset": str(root),
        "tolerance": tolerance,
        "counts": counts,
        "rows": [asdict(r) for r in rows],
    }
