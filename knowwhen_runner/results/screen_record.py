"""What a model's CXS manifest says of the screen a run applied (``screen:`` in the config), if any.

Its bounds are anytime-valid screening bounds on the screened scenario's accuracy, not the fixed-sample
figures of a finished model: a model the screen dropped answered only a prefix of the drawn order of
tasks, and its open-loop cell of that scenario covers only those questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ScreenRecord",
    "mask_screened",
    "screen_mark",
    "screen_note",
    "screen_record",
    "screened_out",
    "screened_table",
    "sequence_svg",
    "unscreened",
]

T = TypeVar("T")


class ScreenRecord(BaseModel):
    """The screen of the run and where this model stands in it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: str = Field(description="The states scenario whose accuracy was screened.")
    alpha: float = Field(description="Chance that any decision of the screen is wrong, at most.")
    alpha_each: float = Field(
        description="The level of each model's sequence (alpha split across the models)."
    )
    keep: dict[str, Any] = Field(
        description="The question: {top: N} (with within: w, its indifference zone), {floor: x} or {not_worse_than: {...}}."
    )
    seed: int = Field(description="Seed of the drawn order of tasks.")
    tasks: int = Field(description="Tasks of the screened scenario (the population the bounds are about).")
    tasks_answered: int = Field(
        description="Tasks of the drawn order this model completed when last looked at."
    )
    lower: float = Field(
        description="Anytime-valid lower bound on the accuracy (on the difference, for not_worse_than)."
    )
    upper: float = Field(description="Anytime-valid upper bound, likewise.")
    decision: Literal["keep", "drop"] | None = Field(description="What the screen settled; None while open.")
    decided_at: float | None = Field(description="When it settled it (epoch seconds).")
    calls_saved: int = Field(
        description="Jobs of this model the screen left pending (asked by a later full run)."
    )
    leaders: list[str] | None = Field(
        None,
        description=(
            "Plain top: k: the k models of highest accuracy over the first questions of the drawn order; a model "
            "is dropped once every leader is surely more accurate (paired tests). None for the other questions."
        ),
    )
    alpha_pair: float | None = Field(
        None,
        description="Plain top: k: the level of each one-sided paired sequence leader - model (alpha / k).",
    )
    leaders_above: int | None = Field(
        None,
        description=(
            "Plain top: k: how many leaders were surely more accurate than this model when last looked at "
            "(all of them: dropped). None for a leader."
        ),
    )
    history: list[tuple[int, float, float, float]] = Field(
        default_factory=list,
        description=(
            "The sequence over time: [tasks answered, lower, upper, when (epoch seconds)] at the looks that saw "
            "more answers, up to the decision; at most 48 points (older ones thinned, the first and last kept)."
        ),
    )
    unit: Literal["tasks", "questions"] = Field(
        "tasks",
        description=(
            "What the drawn order is of, and what tasks and tasks_answered count: questions for plain top: k "
            "(each weighted by its share of the card's accuracy), tasks otherwise."
        ),
    )
    bounds: Literal["screening"] = Field(
        "screening",
        description="These bounds are screening bounds (anytime-valid), not fixed-sample intervals.",
    )


def screen_record(meta: dict[str, Any] | None, model_id: str, pending: int) -> ScreenRecord | None:
    """The record of ``model_id`` from the run's meta (``screen``), None when the run was not screened."""
    screen = (meta or {}).get("screen")
    row = (screen or {}).get("models", {}).get(model_id)
    if not screen or row is None:
        return None
    return ScreenRecord(
        scenario=screen["scenario"],
        alpha=screen["alpha"],
        alpha_each=screen["alpha_each"],
        keep=screen["keep"],
        seed=screen["seed"],
        tasks=screen["tasks"],
        tasks_answered=row["tasks"],
        lower=row["lower"],
        upper=row["upper"],
        decision=row["decision"],
        decided_at=row["decided_at"],
        calls_saved=pending if row["decision"] == "drop" else 0,
        leaders=screen.get("leaders"),
        alpha_pair=screen.get("alpha_pair"),
        leaders_above=row.get("leaders_above"),
        history=[tuple(p) for p in row.get("history") or []],
        unit=screen.get("unit", "tasks"),
    )


_KEPT_COLUMNS = (
    "rank",
    "model",
    "kind",
    "cost",
    "p50",
    "ce:",
    "le:",
)  # not figures of answers: cost, latency


def screened_out(record: ScreenRecord | None) -> bool:
    """Whether the screen stopped the model with jobs left: its figures cover a prefix of the drawn order."""
    return record is not None and record.decision == "drop" and record.calls_saved > 0


def screen_mark(record: ScreenRecord) -> str:
    """What every surface shows for a screened-out model in place of its figures: its screening bounds."""
    what = "difference" if "not_worse_than" in record.keep else "accuracy"
    return (
        f"screened out after {record.tasks_answered}/{record.tasks} {record.unit} ({what} {100 * record.lower:.1f} "
        f"to {100 * record.upper:.1f}: screening bounds)"
    )


def unscreened(manifests: Sequence[Any]) -> list[Any]:
    """The manifests of models the screen did not stop (plots draw only these: a stopped model's curve would
    read as a finished model's)."""
    return [m for m in manifests if not screened_out(m.screen)]


def mask_screened(row: dict[str, Any], record: ScreenRecord | None, ci: str) -> dict[str, Any]:
    """A table row with a stopped model's figures replaced: its fixed-sample figures and intervals would read
    as a finished model's. The screened scenario's columns say the screening bounds instead; text stays."""
    if record is None or not screened_out(record):
        return row
    bounds = screen_mark(record)
    out = dict(row)
    for key, value in row.items():
        if key.startswith(_KEPT_COLUMNS) or isinstance(value, str) or value is None:
            continue
        own = key.removesuffix(ci).split(":")[-1] == record.scenario and key.split(":")[0] in (
            record.scenario,
            "l2",
        )
        out[key] = None if key.endswith(ci) else bounds if own else "screened out"
    return out


def screened_table(table: T, manifests: Sequence[Any], ci: str) -> T:
    """``table`` (a ``tables.Table``) with the rows of screened-out models masked and a note saying so."""
    records = {m.model.id: m.screen for m in manifests}
    note = screen_note(list(records.values()))
    if not note:
        return table
    rows = [mask_screened(row, records.get(row.get("model", "")), ci) for row in table.rows]  # type: ignore[attr-defined]
    return replace(table, rows=rows, note=f"{table.note}{note}".strip())  # type: ignore[attr-defined, type-var]


def screen_note(records: Sequence[ScreenRecord | None]) -> str:
    """The line a table adds when some models were screened out; empty otherwise."""
    stopped = [r for r in records if r is not None and screened_out(r)]
    if not stopped:
        return ""
    r = stopped[0]
    return (
        f" Screened out: models the screen on {r.scenario} (alpha {r.alpha:g}) stopped; their figures are "
        "anytime-valid screening bounds over the tasks they answered, not fixed-sample figures."
    )


def sequence_svg(record: ScreenRecord, width: int = 160, height: int = 36) -> str:
    """A model's screening sequence over the drawn order as a small inline SVG: the band between its lower
    and upper bounds (accuracy 0 at the bottom, 1 at the top; the difference's -1 to 1 for not_worse_than)
    against the tasks (or questions) answered, out of all of them. Empty without a history."""
    points = record.history
    if not points:
        return ""
    low_end = -1.0 if "not_worse_than" in record.keep else 0.0

    def xy(tasks: float, bound: float) -> str:
        x = width * tasks / max(record.tasks, 1)
        y = height * (1 - (bound - low_end) / (1 - low_end))
        return f"{x:.1f},{y:.1f}"

    band = [xy(p[0], p[2]) for p in points] + [xy(p[0], p[1]) for p in reversed(points)]
    return (
        f'<svg class="sequence" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f"<title>screening bounds after {', '.join(f'{p[0]}: {p[1]:.3f} to {p[2]:.3f}' for p in points[-3:])}"
        f'</title><rect width="{width}" height="{height}" fill="none" stroke="#ccc"/>'
        f'<polygon points="{" ".join(band)}" fill="#4c78a8" fill-opacity="0.35" stroke="#4c78a8"/></svg>'
    )
