"""Comparison tables of a run, built from its CXS manifests alone: Markdown, CSV and LaTeX.

``comparison`` has one row per model with the paper's columns (L1 isolated, L2 all states, L2 must-ask,
L3 success) plus coverage at the fitted threshold, cost and latency; ``gated`` is the gated curve of each
decision model at a few thresholds; ``closed-loop`` and ``details`` give the rest. A missing value is
shown as "–", never as 0. CSV cells keep six decimals; the other formats print what the paper prints.
A figure with a confidence interval prints as "94.9 [93.1, 96.4]"; in CSV the bounds get columns of their
own ("<header> low", "<header> high"), so the figure's column stays a plain number.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .manifest import ConfidenceInterval, CxsManifest
from .ranking import Ranking, headline_figure, rank_models

__all__ = [
    "MISSING",
    "Column",
    "Table",
    "closed_loop_table",
    "comparison_table",
    "details_table",
    "headline_table",
    "subset_notes",
    "with_subset_note",
]

MISSING = "–"

_FORMATS = {
    "pct": lambda v: f"{v:.1f}",  # already a percent
    "frac": lambda v: f"{100 * v:.1f}",  # a fraction shown as a percent
    "usd": lambda v: f"{v:.4f}",
    "ms": lambda v: f"{v:.1f}",
    "tau": lambda v: f"{v:.3f}",
    "num": lambda v: f"{v:.3f}",
    "int": lambda v: f"{int(v)}",
}


CI = "~ci"
"""Suffix of the row key holding a column's ``ConfidenceInterval`` (in the figure's unit)."""


@dataclass(frozen=True)
class Column:
    """A column: the row key it reads, its header, and how its values print (see ``_FORMATS``).

    ``ci``: the column's figures may carry an interval, under the row key ``key + CI``.
    """

    key: str
    header: str
    fmt: str = "text"
    ci: bool = False


@dataclass(frozen=True)
class Table:
    """A titled table of rows (dicts keyed by column key); ``name`` is its file stem."""

    name: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def cell(self, row: dict[str, Any], column: Column, *, precise: bool = False) -> str:
        value = row.get(column.key)
        if value is None or value == "":
            return MISSING
        if column.fmt == "text" or isinstance(value, str):
            return str(value)
        if precise and column.fmt not in ("int", "text"):
            return self._number(value, column, precise=True)
        text = _FORMATS[column.fmt](value)
        ci = self._interval(row, column)
        if ci is not None:
            text += f" [{_FORMATS[column.fmt](ci.low)}, {_FORMATS[column.fmt](ci.high)}]"
        return text

    @staticmethod
    def _number(value: float, column: Column, *, precise: bool) -> str:
        if not precise:
            return _FORMATS[column.fmt](value)
        return f"{100 * value if column.fmt == 'frac' else value:.6f}"

    @staticmethod
    def _interval(row: dict[str, Any], column: Column) -> ConfidenceInterval | None:
        if not column.ci or isinstance(row.get(column.key), str):
            return None  # a cell whose jobs failed shows no figure, so no interval either
        ci = row.get(column.key + CI)
        return ci if isinstance(ci, ConfidenceInterval) else None

    def _csv_cells(self, row: dict[str, Any], column: Column) -> list[str]:
        cells = [self.cell(row, column, precise=True)]
        if column.ci:
            ci = self._interval(row, column)
            bounds = (
                [MISSING, MISSING]
                if ci is None
                else [self._number(b, column, precise=True) for b in (ci.low, ci.high)]
            )
            cells += bounds
        return cells

    def to_markdown(self) -> str:
        align = ["---" if c.fmt == "text" else "---:" for c in self.columns]
        lines = [f"# {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        lines.append("| " + " | ".join(c.header for c in self.columns) + " |")
        lines.append("|" + "|".join(align) + "|")
        for row in self.rows:
            cells = [self.cell(row, c).replace("|", "\\|") for c in self.columns]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        headers = [
            [c.header, f"{c.header} low", f"{c.header} high"] if c.ci else [c.header] for c in self.columns
        ]
        writer.writerow([h for hs in headers for h in hs])
        for row in self.rows:
            writer.writerow([text for c in self.columns for text in self._csv_cells(row, c)])
        return buf.getvalue()

    def to_latex(self) -> str:
        spec = "".join("l" if c.fmt == "text" else "r" for c in self.columns)
        lines = [f"% {_tex(self.title)}", f"\\begin{{tabular}}{{{spec}}}", "\\toprule"]
        lines.append(" & ".join(_tex(c.header) for c in self.columns) + " \\\\")
        lines.append("\\midrule")
        for row in self.rows:
            lines.append(" & ".join(_tex(self.cell(row, c)) for c in self.columns) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}"]
        return "\n".join(lines) + "\n"


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "τ": r"$\tau$",
}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)


# --- the tables ----------------------------------------------------------------------------------------


def _scenarios(manifests: Sequence[CxsManifest], kind: str) -> list[str]:
    return [s.id for s in manifests[0].scenarios if s.kind == kind] if manifests else []


def _suffix(ids: list[str], sc: str) -> str:
    return f" ({sc})" if len(ids) > 1 else ""


def _unless_failed(value: float | None, failed: int, *, scored: bool = True) -> float | str | None:
    """A cell's figure, or no figure when some of its jobs failed for good: a call that never got an
    answer is not a wrong answer, so the number would not be true for what was asked (the manifest
    withholds it too). ``scored``: whether the cell would have the figure at all (an LLM has no coverage)."""
    return f"{MISSING} ({failed} failed)" if failed and scored else value


def _own_mode(m: CxsManifest) -> str:
    return "model" if m.model.kind == "decision" else "llm"


def _own_cells(m: CxsManifest) -> dict[str, Any]:
    """The model's first closed-loop cell per scenario in its own mode (not a fit set's shadow runs)."""
    out: dict[str, Any] = {}
    for e in m.closed_loop:
        if e.mode == _own_mode(m):
            out.setdefault(e.scenario, e)
    return out


_COMPARISON_NOTE = (
    "Accuracy and success in %, L2 per task then mean over the eligible tasks; coverage: share of "
    "decisions at or above the threshold fitted for the target accuracy. [low, high]: 95% interval "
    "(L2: bootstrap over tasks; L1: Wilson; L3: Wilson, or bootstrap over tasks with repeats; "
    "coverage: bootstrap over tasks of the whole fit)."
)


def comparison_table(manifests: Sequence[CxsManifest], ranking: Ranking | None = None) -> Table:
    """One row per model, ranked: the paper's columns, coverage at the fitted τ, cost and latency.

    Cost and latency are per 1,000 decisions (open loop and isolated) when the run has decisions, and
    per episode for each closed-loop scenario a model ran in its own mode.
    """
    iso, states = _scenarios(manifests, "isolated"), _scenarios(manifests, "states")
    # An episodes scenario gets an L3 column when some model ran it in its own mode (not a fit set).
    eps = [sc for sc in _scenarios(manifests, "episodes") if any(sc in _own_cells(m) for m in manifests)]
    decisions = any(m.totals.decisions for m in manifests) or not eps
    ranking = ranking or rank_models(manifests)
    cols = [Column("rank", "rank", "int"), Column("model", "model"), Column("kind", "kind")]
    cols += [Column(f"l1:{sc}", "L1 isolated" + _suffix(iso, sc), "pct", ci=True) for sc in iso or [""]]
    for sc in states:
        cols += [
            Column(f"l2:{sc}", "L2 all states" + _suffix(states, sc), "pct", ci=True),
            Column(f"ask:{sc}", "L2 must-ask" + _suffix(states, sc), "pct", ci=True),
        ]
    cols += [Column(f"l3:{sc}", "L3 success" + _suffix(eps, sc), "frac", ci=True) for sc in eps or [""]]
    cols += [Column(f"cov:{sc}", "coverage @ τ" + _suffix(states, sc), "frac", ci=True) for sc in states]
    if decisions:
        cols += [Column("cost", "cost / 1k decisions (USD)", "usd"), Column("p50", "latency p50 (ms)", "ms")]
    for sc in eps:
        cols += [
            Column(f"ce:{sc}", "cost / episode (USD)" + _suffix(eps, sc), "usd"),
            Column(f"le:{sc}", "episode latency p50 (ms)" + _suffix(eps, sc), "ms"),
        ]
    rows = []
    for m in manifests:
        row: dict[str, Any] = {"rank": ranking.rank(m.model.id), "model": m.model.id, "kind": m.model.kind}
        for cell in m.isolated:
            row[f"l1:{cell.scenario}"] = cell.pooled_pct
            row[f"l1:{cell.scenario}{CI}"] = cell.intervals.pooled_pct if cell.intervals else None
        for c in m.open_loop:
            failed, ci = c.failed_rows(), c.intervals
            row[f"l2:{c.scenario}"] = _unless_failed(c.accuracy_pct, failed)
            row[f"ask:{c.scenario}"] = _unless_failed(c.must_ask_pct, failed, scored=c.n_must_ask > 0)
            decides = m.model.kind == "decision"
            row[f"cov:{c.scenario}"] = _unless_failed(
                c.fit.coverage if c.fit else None, failed, scored=decides
            )
            if ci is not None:
                row[f"l2:{c.scenario}{CI}"], row[f"ask:{c.scenario}{CI}"] = ci.accuracy_pct, ci.must_ask_pct
                row[f"cov:{c.scenario}{CI}"] = ci.coverage_at_tau
        for sc, e in _own_cells(m).items():
            row[f"l3:{sc}"], row[f"ce:{sc}"], row[f"le:{sc}"] = (
                _unless_failed(e.success_rate, e.failed),
                e.cost_per_episode_usd,
                e.latency.p50_ms,
            )
            row[f"l3:{sc}{CI}"] = e.intervals.success_rate if e.intervals else None
        row["cost"], row["p50"] = m.totals.cost.per_1k_decisions_usd, m.totals.latency.p50_ms
        rows.append(row)
    note = f"{_ranked_note(ranking)} {_COMPARISON_NOTE}" if ranking.scenario else _COMPARISON_NOTE
    return Table("comparison", f"{_run_name(manifests)}: comparison", cols, ranking.sorted_rows(rows), note)


def headline_table(manifests: Sequence[CxsManifest], ranking: Ranking | None = None) -> Table:
    """``table.md``: one column per scenario with its headline figure, one row per model that has one,
    ranked (best first, with the rank).

    States: L2 accuracy (benchmark rule); isolated: L1 pooled accuracy; episodes: L3 success in the
    model's own mode. A scenario no model has a figure for gets no column.
    """
    ranking = ranking or rank_models(manifests)
    values: dict[str, dict[str, Any]] = {}
    order = [s.id for s in manifests[0].scenarios] if manifests else []
    for m in manifests:
        row: dict[str, Any] = {}
        for sc in order:
            figure = headline_figure(m, sc)
            if figure is not None:
                row[sc] = _unless_failed(figure.value, figure.failed)
                row[sc + CI] = figure.interval
        values[m.model.id] = row
    shown = [sc for sc in order if any(row.get(sc) is not None for row in values.values())]
    kinds = {s.kind for s in manifests[0].scenarios if s.id in shown} if manifests else set()
    cols = [Column("rank", "rank", "int"), Column("model", "model")]
    cols += [Column(sc, sc, "pct", ci=True) for sc in shown]
    rows = [
        {"rank": ranking.rank(m), "model": m, **row}
        for m, row in values.items()
        if any(row.get(sc) is not None for sc in shown)
    ]
    notes = [_ranked_note(ranking)] if ranking.scenario else []
    if "states" in kinds:
        notes.append("Per task, then mean over the eligible tasks (AgentDecisionBench rule).")
    if "isolated" in kinds:
        notes.append("Isolated (L1): pooled accuracy over the items.")
    if "episodes" in kinds:
        notes.append("Episodes (L3): task success in the model's own mode.")
    what = "accuracy and success" if "episodes" in kinds else "accuracy"
    title = f"{_run_name(manifests)}: {what} (%)"
    return Table("table", title, cols, ranking.sorted_rows(rows), "\n".join(notes))


def subset_notes(manifests: Sequence[CxsManifest]) -> list[str]:
    """One line per scenario the run asked a subset of (a ``limit``): what was asked of what it holds."""
    if not manifests:
        return []
    scopes = {c.scenario: c.scope for m in manifests for c in m.open_loop if c.scope and c.scope.subset}
    notes = []
    for sc in manifests[0].scenarios:
        scope = scopes.pop(sc.id, None)
        if sc.subset is None and scope is None:
            continue
        said = [] if scope is None else [scope.describe()]
        said += [] if sc.subset is None else [_subset_sentence(sc.subset)]
        notes.append(f"{sc.id}: a subset was scored, {'; '.join(said)}")
    return notes


def _subset_sentence(subset: Any) -> str:
    return f"a seeded sample of {subset.asked:,} of {subset.of:,} {subset.unit} (seed {subset.seed})"


def with_subset_note(table: Table, manifests: Sequence[CxsManifest]) -> Table:
    """``table`` with a note naming the subsets its figures are over (they are not full-set figures)."""
    notes = subset_notes(manifests)
    if not notes:
        return table
    said = "Subsets (figures over what was asked, not the full set): " + "; ".join(notes) + "."
    return replace(table, note=f"{table.note} {said}".strip())


def _ranked_note(ranking: Ranking) -> str:
    note = f"Ranked by {ranking.scenario}, best first; ties broken by the 95% interval's lower bound."
    if any(a != b for a, b in ranking.groups.values()):
        note += (
            " A rank like 2–4 is a tie group: models a paired bootstrap over the shared tasks cannot tell "
            "apart at 95% (per pair), ordered inside by their figure."
        )
    return note


def _run_name(manifests: Sequence[CxsManifest]) -> str:
    return manifests[0].run.name if manifests else "run"


def closed_loop_table(manifests: Sequence[CxsManifest], ranking: Ranking | None = None) -> Table:
    """Every closed-loop cell: success, coverage, what the model saved and what it cost."""
    cols = [
        Column("model", "model"),
        Column("scenario", "scenario"),
        Column("mode", "mode"),
        Column("tau", "τ", "tau"),
        Column("episodes", "episodes", "int"),
        Column("failed", "failed", "int"),
        Column("success_rate", "success (%)", "frac", ci=True),
        Column("coverage", "coverage (%)", "frac"),
        Column("model_accuracy", "model accuracy (%)", "frac"),
        Column("shadow_accuracy", "model in shadow (%)", "frac"),
        Column("llm_calls_saved", "LLM calls saved", "int"),
        Column("fallbacks", "fallbacks", "int"),
        Column("cost_per_episode_usd", "cost / episode (USD)", "usd"),
    ]
    rows = [
        {
            **c.model_dump(exclude={"outcomes", "per_task_success", "intervals"}),
            "model": m.model.id,
            "success_rate": _unless_failed(c.success_rate, c.failed),
            "success_rate" + CI: c.intervals.success_rate if c.intervals else None,
        }
        for m in manifests
        for c in m.closed_loop
    ]
    rows = (ranking or rank_models(manifests)).sorted_rows(rows)
    return Table("closed-loop", f"{_run_name(manifests)}: closed loop", cols, rows)


def details_table(manifests: Sequence[CxsManifest], ranking: Ranking | None = None) -> Table:
    """Per model and scenario: validity, calibration, the curve's area, latency, tokens and cache hits."""
    cols = [
        Column("model", "model"),
        Column("scenario", "scenario"),
        Column("items", "items", "int"),
        Column("valid", "valid (%)", "frac"),
        Column("failed", "failed (%)", "frac"),
        Column("ece", "ECE", "num", ci=True),
        Column("brier", "Brier", "num"),
        Column("area", "curve area", "num", ci=True),
        Column("tau", "fitted τ", "tau", ci=True),
        Column("p50", "p50 (ms)", "ms"),
        Column("p95", "p95 (ms)", "ms"),
        Column("p99", "p99 (ms)", "ms"),
        Column("tokens_in", "tokens in", "int"),
        Column("cache_hits", "cache hits", "int"),
    ]
    rows = []
    for m in manifests:
        for c in m.open_loop:
            cal, curve, fit, ci = c.calibration, c.curve, c.fit, c.intervals
            rows.append(
                {
                    "ece" + CI: ci.ece if ci else None,
                    "area" + CI: _area(ci.aurc) if ci else None,
                    "tau" + CI: ci.tau if ci else None,
                    "model": m.model.id,
                    "scenario": c.scenario,
                    "items": c.items,
                    "valid": c.validity.valid_rate,
                    "failed": c.validity.failed_rate,
                    "ece": cal.ece if cal else None,
                    "brier": cal.brier if cal else None,
                    "area": curve.area if curve else None,
                    "tau": fit.threshold if fit else None,
                    "p50": c.latency.p50_ms,
                    "p95": c.latency.p95_ms,
                    "p99": c.latency.p99_ms,
                    "tokens_in": c.tokens.input,
                    "cache_hits": c.cache_hits,
                }
            )
    rows = (ranking or rank_models(manifests)).sorted_rows(rows)
    return Table("details", f"{_run_name(manifests)}: open-loop details", cols, rows)


def _area(aurc: ConfidenceInterval | None) -> ConfidenceInterval | None:
    """The curve area's interval from AURC's (area = 1 − AURC)."""
    if aurc is None:
        return None
    return aurc.model_copy(update={"estimate": 1 - aurc.estimate, "low": 1 - aurc.high, "high": 1 - aurc.low})
