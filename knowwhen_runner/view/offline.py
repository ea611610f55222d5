"""The report's offline drill-down: the viewer's question and episode views over data inlined in the page.

The data (the same JSON the viewer's endpoints serve) is gzipped and base64-encoded into a script
element; the browser's own ``DecompressionStream`` unpacks it, so the report still makes no network
request. Answers keep their ``TOP_OPTIONS`` most probable options. A run too large for one file (past
``MAX_ANSWERS`` or ``MAX_EPISODES``, or ``max_bytes`` compressed) gets a note pointing at ``knowwhen view``.
"""

from __future__ import annotations

import base64
import gzip
from collections.abc import Sequence
from typing import Any

from ..jsonio import dumps
from ..results import CxsManifest
from .data import RunData
from .page import NAV, VIEW_CSS, VIEW_JS
from .questions import judged_rows, public_answer

__all__ = ["MAX_BYTES", "drilldown_data", "drilldown_html"]

MAX_BYTES = 64 * 1024 * 1024
"""The largest compressed drill-down put into a report."""
MAX_ANSWERS = 50_000
MAX_EPISODES = 5_000
"""Past these a run's drill-down is not built (it would take minutes and gigabytes): the viewer shows it."""
TOP_OPTIONS = 10
"""Options whose probability an answer keeps in the report (the rest show as –)."""

_OFFLINE_JS = r"""
const START = 'questions';
let DATA = null;
async function load() {
  if (DATA) return DATA;
  const raw = atob(document.getElementById('kw-data').textContent.trim());
  const bytes = Uint8Array.from(raw, c => c.charCodeAt(0));
  DATA = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).json();
  return DATA;
}
function questionPage(Q, q) {  // what the viewer's /api/questions answers, over the inline rows
  const f = k => q.get(k) || '', bound = k => f(k) === '' || isNaN(+f(k)) ? null : +f(k);
  const cmin = bound('cmin'), cmax = bound('cmax');
  let rows = Q.rows.filter(r => ['model', 'scenario', 'stratum'].every(k => !f(k) || r[k] === f(k))
    && (!f('right') || r.right === (f('right') === 'right'))
    && (cmin == null || (r.confidence != null && r.confidence >= cmin)) && (cmax == null || (r.confidence != null && r.confidence <= cmax)));
  if (f('sort') === 'confidence') rows = rows.slice().sort((a, b) => (b.confidence ?? -1) - (a.confidence ?? -1));
  const offset = Math.max(0, +f('offset') || 0), limit = 500;
  const uniq = k => [...new Set(Q.rows.map(r => r[k]).filter(v => v != null))].sort();
  return {...Q, rows: rows.slice(offset, offset + limit), total: rows.length, answers: Q.rows.length, offset, limit,
    options: {model: uniq('model'), scenario: uniq('scenario'), stratum: uniq('stratum')}};
}
async function get(path) {
  const D = await load(), [name, query] = path.split('?'), q = new URLSearchParams(query || '');
  if (name === 'api/questions') return questionPage(D.questions, q);
  if (name === 'api/episodes') return {rows: D.episodes};
  if (name === 'api/episode') { const e = D.episode[q.get('id')]; if (!e) throw new Error('no such episode'); return e; }
  if (name === 'api/question') {
    const s = q.get('scenario'), m = q.get('model'), h = q.get('qhash');
    const item = D.items[s + '\n' + h], a = D.answers[s + '\n' + m + '\n' + h];
    if (!item || !a) throw new Error('no such question');
    const row = D.questions.rows.find(r => r.scenario === s && r.model === m && r.qhash === h) || {};
    const lm = D.questions.llm && D.questions.llm !== m ? D.questions.llm : null;
    const l = lm ? D.answers[s + '\n' + lm + '\n' + h] : null;
    return {...item, scenario: s, model: m, qhash: h, answer: a, right: row.right, llm_model: l ? lm : null,
      llm: l || null, llm_right: row.llm_right, tau: (D.questions.thresholds[m] || {})[s] ?? null,
      screened: (D.questions.screened || {})[m] || null};
  }
  throw new Error('not in this report: ' + name);
}
"""

_SCROLL_JS = """
const nav = document.querySelector('.kw-nav');  // a drill-down link opens the report at the drill-down
const toDrill = () => load().then(() => setTimeout(() => nav.scrollIntoView(), 0));
if (location.hash) toDrill();
window.addEventListener('hashchange', toDrill);
"""


async def drilldown_data(data: RunData, manifests: Sequence[CxsManifest]) -> dict[str, Any]:
    """Every answered question (with its state, options and key) and every episode with its steps."""
    questions = await judged_rows(data, list(manifests))
    keys = await data.keys()
    items: dict[str, Any] = {}
    answers: dict[str, Any] = {}
    for (scenario, model, qhash), row in (await data.answers()).items():
        answer = public_answer(row)
        probs = answer.get("probabilities")
        if isinstance(probs, dict) and len(probs) > TOP_OPTIONS:
            top = sorted(probs.items(), key=lambda kv: -(kv[1] if isinstance(kv[1], int | float) else 0))
            answer["probabilities"] = dict(top[:TOP_OPTIONS])
        answers[f"{scenario}\n{model}\n{qhash}"] = answer
        ref = f"{scenario}\n{qhash}"
        if ref not in items:
            item = (await data.items(scenario)).get((scenario, qhash)) or {}
            items[ref] = {
                "state": item.get("state"),
                "options": list(item.get("options") or sorted(row.get("probabilities") or {})),
                "descriptions": list(item.get("descriptions") or []),
                "key": [
                    {"task": e.task, "stratum": e.stratum, "acceptable": sorted(e.acceptable)}
                    for e in keys.get(scenario, {}).get(qhash, [])
                ],
            }
    episodes = await data.episodes()
    detail = {e["id"]: await data.episode(e["id"]) for e in episodes}
    return {
        "questions": questions,
        "items": items,
        "answers": answers,
        "episodes": episodes,
        "episode": detail,
    }


async def _finished(data: RunData) -> tuple[int, int]:
    """Answers and episodes recorded, from the job counts (a large run is not read to be turned down)."""
    episodic = {s.id for s in (await data.config()).scenarios if s.kind == "episodes"}
    done = [c for c in await data.counts(fresh=True) if c.status == "done"]
    episodes = sum(c.n for c in done if c.scenario_id in episodic)
    return sum(c.n for c in done) - episodes, episodes


def _too_large(what: str) -> str:
    return (
        f'<h2>Drill-down</h2><p class="note">This run\'s answers and episodes ({what}) are too many for one '
        "page: open them with <code>knowwhen view RUN_DIR</code>.</p>"
    )


async def drilldown_html(
    data: RunData, manifests: Sequence[CxsManifest], *, max_bytes: int = MAX_BYTES
) -> str:
    """The report section: the views, their data inline (compressed), and the script that reads it."""
    n_answers, n_episodes = await _finished(data)
    if n_answers > MAX_ANSWERS or n_episodes > MAX_EPISODES:
        return _too_large(f"{n_answers:,} answers and {n_episodes:,} episodes")
    packed = gzip.compress(dumps(await drilldown_data(data, manifests)), compresslevel=6, mtime=0)
    if len(packed) > max_bytes:
        return _too_large(f"{len(packed) >> 20} MB compressed")
    encoded = base64.b64encode(packed).decode()
    return (
        f"<h2>Drill-down</h2><style>{VIEW_CSS}</style>{NAV.format(live='', flips='')}"
        '<div id="kw-view"><p class="note">unpacking…</p></div>'
        f'<script type="application/octet-stream" id="kw-data">{encoded}</script>'
        f"<script>{_OFFLINE_JS}{VIEW_JS}{_SCROLL_JS}</script>"
    )
