"""The run's static HTML report: one self-contained file with the tables, the plots and the provenance.

Everything is inline (CSS, a few lines of JS to sort any table column on click and to narrow every table's
rows by model id, plots as base64 data URIs); the page makes no network request, so it opens the same
offline, attached to an e-mail or years later. Models are ranked (``ranking``), best first, in every table.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from ..jsonio import atomic_write_bytes
from .manifest import CxsManifest, ScenarioProvenance
from .ranking import Ranking, rank_models
from .screen_record import screened_out, sequence_svg
from .tables import Table

__all__ = ["render_report", "write_report"]

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
 margin:0;color:#1d2433;background:#f6f7f9;font-size:14px;line-height:1.45}
main{max-width:1200px;margin:0 auto;padding:24px 28px 40px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d9dde3;
 padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.meta{color:#5a6270;margin:0}.note{color:#5a6270;font-size:13px;margin:4px 0 8px}
.wrap{overflow-x:auto;background:#fff;border:1px solid #d9dde3;border-radius:6px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:4px 6px;border-bottom:1px solid #eceef1}
th{background:#eef1f5;text-align:left;font-weight:600;cursor:pointer;user-select:none;white-space:normal;
 vertical-align:bottom;min-width:40px;max-width:96px}
td .ci{display:block;color:#6b7380;font-size:11.5px}td:not(.num){white-space:nowrap}
th.num,td.num{text-align:right}th:hover{background:#e2e7ee}
th[data-dir=asc]::after{content:" ▲";font-size:10px}th[data-dir=desc]::after{content:" ▼";font-size:10px}
tbody tr:hover{background:#f8fafc}td.missing{color:#9aa1ab}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:14px}
figure{margin:0;background:#fff;border:1px solid #d9dde3;border-radius:6px;padding:8px}
figure img{width:100%;height:auto;display:block}figcaption{color:#5a6270;font-size:12px;margin-top:4px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}dt{color:#5a6270}
dd{margin:0;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
footer{color:#5a6270;font-size:12px;margin-top:30px}
.filter{margin:14px 0 0;font-size:13px}.filter input{font:inherit;padding:3px 7px;width:260px;
 border:1px solid #c3c9d2;border-radius:4px}details{margin:10px 0}summary{cursor:pointer;color:#33507a}
"""

_JS = """
document.querySelectorAll("table.sortable th").forEach(th => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0], rows = Array.from(body.rows), i = th.cellIndex;
  const dir = th.dataset.dir === "asc" ? -1 : 1;
  th.closest("tr").querySelectorAll("th").forEach(h => delete h.dataset.dir);
  th.dataset.dir = dir > 0 ? "asc" : "desc";
  const v = r => { const c = r.cells[i], t = c.textContent.trim();
    if (c.dataset.v !== undefined) return Number(c.dataset.v);
    return t.startsWith("\\u2013") ? null : t; };
  rows.sort((a, b) => { const x = v(a), y = v(b);
    if (x === null) return y === null ? 0 : 1; if (y === null) return -1;
    return (x < y ? -1 : x > y ? 1 : 0) * dir; });
  rows.forEach(r => body.appendChild(r));
}));
const kwFilter = document.getElementById("model-filter");
if (kwFilter) kwFilter.addEventListener("input", () => {
  const q = kwFilter.value.trim().toLowerCase();
  document.querySelectorAll("table.sortable tbody tr[data-model]").forEach(r => {
    r.hidden = q !== "" && !r.dataset.model.toLowerCase().includes(q); });
});
"""


def _table_html(table: Table) -> str:
    head = "".join(
        f'<th class="{"" if c.fmt == "text" else "num"}">{escape(c.header)}</th>' for c in table.columns
    )
    body = []
    for row in table.rows:
        cells = []
        for c in table.columns:
            text, value = table.cell(row, c), row.get(c.key)
            cls = ("" if c.fmt == "text" else "num") + (" missing" if text.startswith("–") else "")
            # a figure sorts by its number, not by its text with the interval after it
            number = f' data-v="{value!r}"' if isinstance(value, int | float) and c.fmt != "text" else ""
            figure, _, interval = text.partition(" [") if c.ci else (text, "", "")
            shown = escape(figure) + (f' <span class="ci">[{escape(interval)}</span>' if interval else "")
            cells.append(f'<td class="{cls.strip()}"{number}>{shown}</td>')
        model = row.get("model")
        attr = f' data-model="{escape(str(model))}"' if model is not None else ""
        body.append(f"<tr{attr}>" + "".join(cells) + "</tr>")
    note = f'<p class="note">{escape(table.note)}</p>' if table.note else ""
    return (
        f'{note}<div class="wrap"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _figure_html(name: str, path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    caption = {
        "coverage": "Covered accuracy (solid) and gated accuracy (dotted) against coverage; dot: fitted τ; "
        "dashed: the LLM alone.",
        "reliability": "Reliability: accuracy per confidence bin (10 equal-width bins).",
        "deferral": "Accuracy (questions) or task success (episodes) against the share of LLM calls; "
        "dashed: the oracle; dotted: random deferral.",
        "cost": "Cost against accuracy (L2) or task success (L3); only cells with a known price.",
        "panels": "One small panel per decision model, in ranking order, on shared axes.",
        "pareto": "The ranking's figure against cost or latency; dashed: the Pareto frontier (no other "
        "model is both cheaper or faster and better).",
    }.get(name.split("-", 1)[0], "")
    return (
        f'<figure><img alt="{escape(name)}" src="data:image/svg+xml;base64,{data}">'
        f"<figcaption>{escape(name)}. {escape(caption)}</figcaption></figure>"
    )


def _dl(items: Sequence[tuple[str, str | None]]) -> str:
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v or '–')}</dd>" for k, v in items)
    return f"<dl>{rows}</dl>"


def _scenario_text(s: ScenarioProvenance) -> str:
    parts = [s.kind, f"version {s.version}"]
    parts += [f"variant {s.variant}"] if s.variant else []
    if s.subset is not None:
        parts.append(
            f"a seeded sample of {s.subset.asked:,} of {s.subset.of:,} {s.subset.unit} (seed {s.subset.seed})"
        )
    elif s.limit:
        parts.append(f"first {s.limit}")  # a manifest written before samples were drawn
    parts += [f"{k} {json.dumps(v, sort_keys=True)}" for k, v in sorted(s.settings.items())]
    return ", ".join(parts)


def _provenance(manifests: Sequence[CxsManifest]) -> str:
    run = manifests[0].run
    parts = [
        "<h3>Run</h3>",
        _dl(
            [
                ("config", run.config_file),
                ("config sha256", run.config_sha256),
                ("job id version", None if run.job_id_version is None else str(run.job_id_version)),
                ("created by", run.created_by and f"knowwhen_runner {run.created_by}"),
                ("created", run.created),
                ("work", f"{run.work_started or '–'} → {run.work_ended or '–'}"),
                *((name, v) for name, v in run.packages.items()),
            ]
        ),
        "<h3>Models</h3>",
        _dl(
            [
                (
                    m.model.id,
                    f"{m.model.model} ({m.model.kind}); jobs {m.jobs.done}/{m.jobs.total} done, "
                    f"{m.jobs.failed} failed, {m.jobs.attempts} attempts, {m.jobs.retried} retried",
                )
                for m in manifests
            ]
        ),
        "<h3>Scenarios</h3>",
        _dl([(s.id, _scenario_text(s)) for s in manifests[0].scenarios]),
        "<h3>Scenario files (sha256)</h3>",
        _dl(
            [(f"{s.id} / {name}", digest) for s in manifests[0].scenarios for name, digest in s.files.items()]
        ),
    ]
    return "".join(parts)


_SECTIONS = {
    "comparison": "Leaderboard",
    "gated-summary": "Gated at the fitted τ",
    "deferral": "When to delegate",
    "transfer": "τ applied beyond its fit set",
    "closed-loop": "Closed loop",
    "details": "Open-loop details",
}

_FILTER = (
    '<p class="filter"><label>Filter models: <input id="model-filter" type="search" '
    'placeholder="part of a model id" autocomplete="off"></label> '
    "(every table; click a column header to sort by it)</p>"
)


_HEADLINE = ("rank", "model", "kind", "l1:", "l2:", "l3:")
"""The leaderboard's own columns (by key or key prefix); the comparison's others follow in a table below."""
_MORE = {
    "ask:": "must-ask",
    "cov:": "coverage at τ",
    "cost": "cost",
    "p50": "latency",
    "ce:": "cost",
    "le:": "latency",
}
"""What the second table of the leaderboard holds, by column key prefix, for its heading."""


def _leaderboard_html(table: Table) -> str:
    """The comparison in two tables that each fit a laptop's page (1280 px): the headline figures (L1, L2 all
    states, L3), then must-ask, coverage at τ, cost and latency. ``tables/comparison.*`` keep it whole."""
    headline = [c for c in table.columns if c.key.startswith(_HEADLINE)]
    more = [c for c in table.columns if c not in headline]
    html = f"<h2>{_SECTIONS['comparison']}</h2>{_table_html(replace(table, columns=headline))}"
    if more and table.rows:
        named = list(dict.fromkeys(v for c in more for k, v in _MORE.items() if c.key.startswith(k)))
        what = " and ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named) or "more"
        rest = replace(table, columns=headline[:2] + more, note="")  # rank and model, then the rest
        html += f"<h3>{what[0].upper()}{what[1:]}</h3>{_table_html(rest)}"
    return f'<section id="leaderboard">{html}</section>'


def _gated_html(tables: Mapping[str, Table]) -> str:
    """The one-row-per-model summary, and every model's whole curve behind a fold."""
    summary, curve = tables.get("gated-summary"), tables.get("gated")
    out = f"<h2>{_SECTIONS['gated-summary']}</h2>{_table_html(summary)}" if summary and summary.rows else ""
    if curve is not None and curve.rows:
        out += (
            f"<details><summary>The whole gated curve of every model ({len(curve.rows)} rows; also in "
            f"tables/gated.csv)</summary>{_table_html(curve)}</details>"
        )
    return out


def _screen_html(manifests: Sequence[CxsManifest]) -> str:
    """The screen of a screened run: each model's screening bounds, decision and calls saved, named as such."""
    records = [(m.model.id, m.screen) for m in manifests if m.screen is not None]
    if not records:
        return ""
    first = records[0][1]
    keep = ", ".join(f"{k}: {v}" for k, v in first.keep.items())
    pairs = first.alpha_pair is not None
    rows = "".join(
        f"<tr><td>{escape(model)}</td><td>{r.tasks_answered}/{r.tasks} {r.unit}</td><td>{r.lower:.3f}</td>"
        f"<td>{r.upper:.3f}</td>"
        + (f"<td>{'leader' if r.leaders_above is None else r.leaders_above}</td>" if pairs else "")
        + f"<td>{escape(r.decision or 'open')}</td><td>{_when(r.decided_at)}</td><td>{r.calls_saved}</td>"
        f"<td>{sequence_svg(r)}</td></tr>"
        for model, r in records
    )
    by = ""
    if pairs:
        leaders = escape(", ".join(first.leaders or [])) or "none named yet"
        by = (
            f" The screen drew an order of questions. A model was dropped once every leader ({leaders}: the "
            "most accurate over the first questions of the drawn order) was surely more accurate, by paired "
            f"anytime-valid tests ({first.alpha_pair:.4g} each); the column <em>leaders above</em> counts the "
            "leaders that were."
        )
    return (
        f"<h2>Screen</h2><p>Screened on {escape(first.scenario)} ({escape(keep)}), alpha {first.alpha:g} "
        f"({first.alpha_each:.4g} per model). The bounds below are <strong>screening bounds</strong>: "
        "anytime-valid confidence sequences over the tasks answered in the drawn order, not the fixed-sample "
        f"intervals of the tables; a screened-out model's figures in the tables are replaced by them.{by}</p>"
        f"<table><thead><tr><th>model</th><th>{first.unit}</th><th>lower</th><th>upper</th>"
        + ("<th>leaders above</th>" if pairs else "")
        + "<th>decision</th><th>decided (UTC)</th><th>calls saved</th><th>bounds over the drawn order</th>"
        "</tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _readout_html(manifests: Sequence[CxsManifest]) -> str:
    """How each read-out model's answers were read (docs/models.md): label mass, cut-offs, position bias,
    and where two read-outs of the same served model disagree."""
    records = [(m.model.id, m.readout) for m in manifests if m.readout is not None]
    if not records:
        return ""

    def num(value: float | None, fmt: str = ".3f") -> str:
        return "–" if value is None else format(value, fmt)

    rows = []
    for model, r in records:
        bias = r.position_bias
        shown = (
            "–" if bias is None else f"{bias.first_shown_rate:.3f} (no bias: {bias.first_shown_expected:.3f})"
        )
        versus = "; ".join(
            f"{escape(a.model)} ({escape(a.method)}): {a.disagree}/{a.questions}" for a in r.agreement
        )
        rows.append(
            f"<tr><td>{escape(model)}</td><td>{escape(str(r.settings.get('method')))}</td><td>{r.answers}</td>"
            f"<td>{r.invalid}</td><td>{num(r.requests_per_answer, '.2f')}</td><td>{num(r.label_mass_mean)}</td>"
            f"<td>{num(r.label_mass_min)}</td><td>{r.cut_off_answers}</td>"
            f"<td>{escape(', '.join(r.logprobs_modes) or 'not stated')}</td><td>{shown}</td>"
            f"<td>{versus or '–'}</td></tr>"
        )
    return (
        "<h2>Read-outs</h2><p>Models read out of a server's log-probabilities: the first token's probability "
        "mass on the labels (mean and lowest), answers where the server's top list cut a label off, the "
        "logprobs mode the server stated, how often the option shown first was chosen over shuffled "
        "questions, and how many questions another read-out of the same served model answered "
        "differently.</p><table><thead><tr><th>model</th><th>read-out</th><th>answers</th><th>invalid</th>"
        "<th>requests/answer</th><th>label mass</th><th>lowest</th><th>cut off</th><th>logprobs mode</th>"
        "<th>first shown chosen</th><th>disagree with</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _when(at: float | None) -> str:
    """When a screen decision came, in UTC to the second (empty while open)."""
    return "" if at is None else datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _unplotted(manifests: Sequence[CxsManifest]) -> str:
    """The note naming the models a screen stopped, which the plots leave out."""
    stopped = [m.model.id for m in manifests if screened_out(m.screen)]
    if not stopped:
        return ""
    return (
        f'<p class="note" id="unplotted">Not drawn: {escape(", ".join(stopped))}, screened out (their '
        "figures cover only the tasks answered before the screen stopped them; their screening bounds are "
        "in the Screen section).</p>"
    )


def render_report(
    manifests: Sequence[CxsManifest],
    tables: Mapping[str, Table],
    plots: Mapping[str, Path],
    drilldown: str = "",
    ranking: Ranking | None = None,
) -> str:
    """The report as one HTML string; ``drilldown`` is the self-contained question and episode section."""
    if not manifests:
        return "<!doctype html><html><body><p>No models in this run.</p></body></html>\n"
    run = manifests[0].run
    ranking = ranking or rank_models(manifests)
    sections = [_FILTER]
    for name, title in _SECTIONS.items():
        table = tables.get(name)
        if name == "gated-summary":
            sections.append(_gated_html(tables))
        elif name == "comparison" and table is not None:
            sections.append(_leaderboard_html(table))
        elif table is not None and table.rows:
            sections.append(f"<h2>{title}</h2>{_table_html(table)}")
        if name == "comparison" and plots:
            figures = "".join(_figure_html(n, p) for n, p in plots.items())
            sections.append(f'<h2>Plots</h2>{_unplotted(manifests)}<div class="grid">{figures}</div>')
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(run.name)}: knowwhen report</title><style>{_CSS}</style></head>",
            "<body><main>",
            f"<h1>{escape(run.name)}</h1>",
            f'<p class="meta">Coverage × success of {len(manifests)} models, {escape(ranking.label)}; '
            f"config {escape(run.config_file or '–')}, created {escape(run.created or '–')}.</p>",
            _screen_html(manifests),
            *sections,
            _readout_html(manifests),
            drilldown,
            f"<h2>Provenance</h2>{_provenance(manifests)}",
            f'<footer data-time="finalized">Finalised {escape(run.finalized_at)}.</footer>',
            f"</main><script>{_JS}</script></body></html>",
            "",
        ]
    )


def write_report(
    path: Path,
    manifests: Sequence[CxsManifest],
    tables: Mapping[str, Table],
    plots: Mapping[str, Path],
    drilldown: str = "",
    ranking: Ranking | None = None,
) -> None:
    """Write ``report.html``."""
    atomic_write_bytes(path, render_report(manifests, tables, plots, drilldown, ranking).encode())
