"""The viewer's single page: inline CSS and vanilla JS, no network reference but its own JSON endpoints.

Views are addressed by the fragment (``#live``, ``#questions?model=m&right=wrong``, ``#question?...``,
``#episodes``, ``#episode?id=...``), so every view and filter has a link of its own.
"""

from __future__ import annotations

__all__ = ["NAV", "PAGE", "VIEW_CSS", "VIEW_JS"]

_PAGE_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
main{padding:12px 16px}
"""

VIEW_CSS = """
.kw-nav{background:#263238;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}
.kw-nav a{color:#cfd8dc;text-decoration:none}.kw-nav a.on{color:#fff;font-weight:600}
#kw-view table{border-collapse:collapse;background:#fff;margin:6px 0 14px;width:auto}
#kw-view td,#kw-view th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top;white-space:normal}
#kw-view th{background:#eceff1}#kw-view td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{background:#e0e0e0;height:10px;width:160px;display:inline-block;position:relative}
.bar i{position:absolute;top:0;bottom:0;left:0;background:#1e88e5}
.bar b{position:absolute;top:-3px;bottom:-3px;width:2px;background:#d32f2f}
.ok{color:#2e7d32}.bad{color:#c62828}.tag{padding:0 6px;border-radius:3px;font-size:12px}
.paused{background:#ffe0b2}.model{background:#1e88e5;color:#fff}.llm{background:#fb8c00;color:#fff}
.strip{display:inline-flex;gap:1px}.strip span{width:10px;height:12px;display:inline-block}
.strip .model{background:#1e88e5}.strip .llm{background:#fb8c00}
#timeline{gap:3px;margin:4px 0}#timeline span{width:auto;min-width:28px;height:auto;color:#fff;font-size:11px;padding:2px 5px}
pre{white-space:pre-wrap;background:#fff;border:1px solid #ddd;padding:6px;max-height:260px;overflow:auto}
.step{background:#fff;border:1px solid #ddd;border-left:6px solid #999;margin:8px 0;padding:6px 10px}
.step.model{border-left-color:#1e88e5;color:inherit}.step.llm{border-left-color:#fb8c00;color:inherit}
form{display:flex;gap:10px;flex-wrap:wrap;align-items:end;margin-bottom:8px}label{font-size:12px}
.muted{color:#777}
"""
"""Styles of the views, shared by the served page and the report's drill-down."""

_FETCH_JS = r"""
const TOKEN = new URLSearchParams(location.search).get('token');
const H = TOKEN ? {'X-Knowwhen-Token': TOKEN} : {};
async function get(path) { const r = await fetch(path, {headers: H}); if (!r.ok) throw new Error(await r.text()); return r.json(); }
const START = 'live';
"""

VIEW_JS = r"""
const $ = s => document.querySelector(s);
const esc = v => String(v ?? '').replace(/[&<>"']/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;',"'":'&#39;'}[c]));
const pct = v => v == null ? '–' : (100 * v).toFixed(1) + '%';
const num = v => v == null ? '–' : Number(v).toLocaleString();
const usd = v => '$' + Number(v || 0).toFixed(4);
const mark = v => v == null ? '<span class="muted">–</span>' : v ? '<span class="ok">✓</span>' : '<span class="bad">✗</span>';
const stopped = (S, m) => S && S[m] ? ` <span class="tag paused" title="${esc(S[m])}">screened out</span>` : '';
const stoppedNote = S => S && Object.keys(S).length ? `<p class="note" id="screened-note">Screened out (a screen stopped them; their answers cover only the tasks asked before, and their figures are screening bounds, not a finished model's): ${Object.entries(S).map(([m, t]) => `<b>${esc(m)}</b> ${esc(t)}`).join('; ')}</p>` : '';
const bar = (v, tau) => `<span class="bar"><i style="width:${100 * (v || 0)}%"></i>${tau == null ? '' : `<b style="left:${100 * tau}%"></b>`}</span>`;
function params() { const [v, q] = location.hash.slice(1).split('?'); return [v || START, new URLSearchParams(q || '')]; }
function link(view, p) { return '#' + view + (p && [...new URLSearchParams(p)].length ? '?' + new URLSearchParams(p) : ''); }
let timer = null, spending = false, cache = {};

async function route() {
  clearTimeout(timer);
  const [view, p] = params();
  document.querySelectorAll('.kw-nav a').forEach(a => a.classList.toggle('on', a.dataset.v === view));
  try { await (VIEWS[view] || VIEWS[START])(p); } catch (e) { $('#kw-view').innerHTML = `<p class="bad">${esc(e.message)}</p>`; }
}

function eta(s) { if (s == null) return '–'; if (s < 90) return Math.round(s) + ' s'; if (s < 5400) return Math.round(s / 60) + ' min'; return (s / 3600).toFixed(1) + ' h'; }

function sequence(h, total, low) {  // a model's screening bounds over the drawn order, as the report draws them
  if (!h || !h.length) return '';
  const W = 160, H = 36, xy = (t, b) => `${(W * t / Math.max(total, 1)).toFixed(1)},${(H * (1 - (b - low) / (1 - low))).toFixed(1)}`;
  const band = h.map(p => xy(p[0], p[2])).concat(h.slice().reverse().map(p => xy(p[0], p[1]))).join(' ');
  return `<svg class="sequence" width="${W}" height="${H}" role="img"><rect width="${W}" height="${H}" fill="none" stroke="#ccc"/><polygon points="${band}" fill="#4c78a8" fill-opacity="0.35" stroke="#4c78a8"/></svg>`;
}

function screenTable(S) {  // the run's screen: each model's anytime-valid bounds over time, its decision and the calls saved
  if (!S) return '';
  const unit = S.unit || 'tasks', low = S.keep && S.keep.not_worse_than ? -1 : 0, now = Date.now() / 1000;
  const rows = Object.keys(S.models).sort().map(m => { const r = S.models[m];
    return `<tr data-screen="${esc(m)}"><td>${esc(m)}</td><td class="n">${r.tasks}/${S.tasks}</td><td class="n">${r.lower.toFixed(3)}</td>
      <td class="n">${r.upper.toFixed(3)}</td><td>${esc(r.decision || 'open')}</td><td class="n">${r.decided_at == null ? '' : Math.round(now - r.decided_at) + ' s ago'}</td>
      <td class="n">${num(r.calls_saved)}</td><td>${sequence(r.history, S.tasks, low)}</td></tr>`; }).join('');
  return `<h3>Screen</h3><p class="muted">on ${esc(S.scenario)}, alpha ${S.alpha}: anytime-valid screening bounds on accuracy over the ${esc(unit)} of the drawn order, not the full run's figures${S.leaders ? `; leaders ${esc(S.leaders.join(', '))}` : ''}</p>
    <table id="live-screen"><tr><th>model</th><th>${esc(unit)}</th><th>lower</th><th>upper</th><th>decision</th><th>decided</th><th>calls saved</th><th>over time</th></tr>${rows}</table>`;
}

const VIEWS = {
  async live() {
    const d = await get('api/live');
    const held = x => ['paused', 'quarantined', 'screened', 'set_aside'].map(k => x[k] ? `<span class="tag paused" title="${esc(x[k + '_reason'])}">${k.replace('_', ' ')}</span>` : '').join(' ');
    const who = x => `${x.rank == null ? '' : `<span class="muted">#${x.rank}</span> `}${x.named ? `<b>${esc(x.model)}</b>` : esc(x.model)}${x.pinned ? ' <span title="pinned by report.highlight">★</span>' : ''}${x.screened_out ? ` <span class="muted screened-out">${esc(x.screened_out)}</span>` : ''}`;
    const m = d.models.map(x => `<tr data-model="${esc(x.model)}" data-rank="${x.rank == null ? '' : x.rank}"><td>${who(x)} ${held(x)}</td>
      <td class="n">${num(x.done)}</td><td class="n">${num(x.pending)}</td><td class="n">${num(x.running)}</td>
      <td class="n">${num(x.failed)}</td><td class="n" data-spend="${esc(x.model)}">${x.spend_usd == null ? '…' : usd(x.spend_usd)}</td>
      <td>${esc(x.pace || '')}</td></tr>`).join('');
    const c = d.cells.map(x => { const all = x.done + x.pending + x.running + x.failed;
      return `<tr><td>${esc(x.model)}</td><td>${esc(x.scenario)}</td><td>${bar(all ? x.done / all : 0)}</td>
      <td class="n">${num(x.done)}</td><td class="n">${num(x.pending)}</td><td class="n">${num(x.running)}</td>
      <td class="n">${num(x.failed)}</td><td class="n">${num(x.set_aside)}</td></tr>`; }).join('');
    const w = d.workers.map(x => `<tr><td>${esc(x.id)}</td><td>${esc(x.host)}</td><td class="n">${x.pid}</td>
      <td>${esc(x.state)}</td><td class="n">${x.heartbeat_age_s} s ago</td><td class="n">${num(x.jobs_done)}</td></tr>`).join('');
    $('#kw-view').innerHTML = `<h2>Run ${esc(d.run)}</h2>
      <p>done <b id="done-total" data-n="${d.done}">${num(d.done)}</b> · open ${num(d.open)} ·
      rate ${d.rate_per_s == null ? '–' : d.rate_per_s.toFixed(1) + '/s'} · ETA ${eta(d.eta_s)} · spend <span id="spend-total">${d.spend_usd == null ? '…' : usd(d.spend_usd)}</span></p>
      ${d.ranked_by ? `<p class="muted" id="ranked-by">models ranked by ${esc(d.ranked_by)}, best first, as in the report (bold: named in its plots)</p>` : ''}
      <table id="live-models"><tr><th>model</th><th>done</th><th>pending</th><th>running</th><th>failed</th><th>spend</th><th>pace</th></tr>${m}</table>
      <table><tr><th>model</th><th>scenario</th><th>progress</th><th>done</th><th>pending</th><th>running</th><th>failed</th><th>set aside</th></tr>${c}</table>
      ${screenTable(d.screen)}
      <h3>Workers</h3><table><tr><th>worker</th><th>host</th><th>pid</th><th>state</th><th>last heartbeat</th><th>jobs</th></tr>${w}</table>`;
    if (!spending) {  // spend reads every result's cost: asked for after the view is painted, one at a time
      spending = true;
      get('api/spend').then(s => {
        const total = $('#spend-total');
        if (total) total.textContent = usd(s.spend_usd);
        document.querySelectorAll('[data-spend]').forEach(td => { td.textContent = usd(s.models[td.dataset.spend]); });
      }).catch(() => {}).finally(() => { spending = false; });
    }
    timer = setTimeout(route, 2000);
  },

  async questions(p) {
    const f = {model: p.get('model') || '', scenario: p.get('scenario') || '', stratum: p.get('stratum') || '',
      right: p.get('right') || '', cmin: p.get('cmin') || '', cmax: p.get('cmax') || ''};
    const q = new URLSearchParams(Object.entries(f).filter(([, v]) => v));
    if (p.get('sort')) q.set('sort', p.get('sort'));
    const asked = new URLSearchParams([...q, ...(p.get('offset') ? [['offset', p.get('offset')]] : [])]);
    const d = await get('api/questions?' + asked + '&llm=later');  // the LLM's answers may follow the list
    const said = r => `${esc(r.llm_answer)} ${r.llm_answer == null ? '' : mark(r.llm_right)}`;
    const named = r => r.scenario + '\n' + r.model + '\n' + r.qhash, key = r => esc(named(r));
    const opts = (k, vals) => ['', ...vals].map(v => `<option ${v === f[k] ? 'selected' : ''} value="${esc(v)}">${esc(v || 'all')}</option>`).join('');
    const shown = d.rows.map(r => `<tr><td><a href="${link('question', {scenario: r.scenario, model: r.model, qhash: r.qhash})}">${esc(r.qhash.slice(0, 10))}</a></td>
      <td>${esc(r.model)}${stopped(d.screened, r.model)}</td><td>${esc(r.scenario)}</td><td>${esc(r.stratum)}</td><td>${esc(r.answer)}</td>
      <td class="n">${pct(r.confidence)}</td><td>${mark(r.right)}</td><td data-llm="${key(r)}">${d.llm_pending ? '…' : said(r)}</td></tr>`).join('');
    const at = o => link('questions', new URLSearchParams([...q, ...(o ? [['offset', o]] : [])]));
    const end = d.offset + d.rows.length;
    const pages = d.total > d.rows.length ? ` · rows ${num(d.offset + 1)}–${num(end)}`
      + (d.offset > 0 ? ` · <a href="${at(Math.max(0, d.offset - d.limit))}">previous ${d.limit}</a>` : '')
      + (end < d.total ? ` · <a href="${at(end)}">next ${d.limit}</a>` : '') : '';
    $('#kw-view').innerHTML = `<h2>${p.get('sort') === 'confidence' ? 'Confident but wrong' : 'Questions'}</h2>
      <form id="qf"><label>model<br><select name="model">${opts('model', d.options.model)}</select></label>
      <label>scenario<br><select name="scenario">${opts('scenario', d.options.scenario)}</select></label>
      <label>stratum<br><select name="stratum">${opts('stratum', d.options.stratum)}</select></label>
      <label>answer<br><select name="right">${opts('right', ['right', 'wrong'])}</select></label>
      <label>confidence ≥<br><input name="cmin" size="4" value="${esc(f.cmin)}"></label>
      <label>≤<br><input name="cmax" size="4" value="${esc(f.cmax)}"></label></form>
      ${stoppedNote(d.screened)}<p><span id="q-count" data-n="${d.total}">${num(d.total)}</span> of ${num(d.answers)} answers${pages}</p>
      <table><tr><th>question</th><th>model</th><th>scenario</th><th>stratum</th><th>answer</th><th>confidence</th><th>right</th><th>LLM ${esc(d.llm || '')}</th></tr>${shown}</table>`;
    $('#qf').onchange = () => { const q = new URLSearchParams(new FormData($('#qf')));
      if (p.get('sort')) q.set('sort', p.get('sort')); [...q.keys()].forEach(k => q.get(k) || q.delete(k)); location.hash = link('questions', q); };
    if (d.llm_pending) get('api/questions?' + asked).then(full => {
      const by = new Map(full.rows.map(r => [named(r), r]));
      document.querySelectorAll('#kw-view td[data-llm]').forEach(td => { const r = by.get(td.dataset.llm); td.innerHTML = r ? said(r) : ''; });
    }).catch(() => {});
  },

  async question(p) {
    const d = await get('api/question?' + p);
    const a = d.answer, l = d.llm || {}, ok = new Set(d.key.flatMap(k => k.acceptable));
    const probs = a.probabilities || {};
    const order = d.options.map((o, i) => [o, probs[o], d.descriptions[i]]).sort((x, y) => (y[1] ?? 0) - (x[1] ?? 0));
    const opt = order.map(([o, pr, desc]) => `<tr><td>${ok.has(o.toLowerCase()) ? '<span class="ok">✓ key</span>' : ''}</td>
      <td title="${esc(desc)}">${esc(o)}</td><td>${bar(pr)} ${pct(pr)}</td>
      <td>${o === a.answer ? `<span class="tag model">${esc(d.model)}</span>` : ''} ${o === l.answer ? `<span class="tag llm">${esc(d.llm_model)}</span>` : ''}</td></tr>`).join('');
    $('#kw-view').innerHTML = `<h2>Question ${esc(d.qhash.slice(0, 12))} <span class="muted">${esc(d.scenario)}</span></h2>
      <p><b>${esc(d.model)}</b> answered <b>${esc(a.answer)}</b> ${mark(d.right)} with confidence ${pct(a.confidence)}
      ${bar(a.confidence, d.tau)} τ ${d.tau == null ? 'not fitted' : d.tau.toFixed(3)}
      → ${d.tau == null ? '' : (a.confidence >= d.tau ? 'the gate would delegate to it' : 'the gate would ask the LLM')}</p>
      ${d.screened ? `<p class="note" id="screened-note"><b>${esc(d.model)}</b> ${esc(d.screened)}: its τ is fitted on those answers alone</p>` : ''}
      <p>${d.llm ? `LLM <b>${esc(d.llm_model)}</b> answered <b>${esc(l.answer)}</b> ${mark(d.llm_right)}` : 'no LLM answer'}</p>
      <h3>Answer key</h3><ul>${d.key.map(k => `<li>task ${esc(k.task)} (${esc(k.stratum)}): ${k.acceptable.map(esc).join(', ')}</li>`).join('')}</ul>
      <h3>State</h3><pre>${esc(d.state)}</pre>
      <h3>Options</h3><table id="options"><tr><th>key</th><th>option</th><th>probability</th><th>picked by</th></tr>${opt}</table>`;
  },

  async episodes(p) {
    const d = cache.e || (cache.e = await get('api/episodes'));
    const rows = d.rows.filter(r => ['model', 'scenario', 'mode'].every(k => !p.get(k) || r[k] === p.get(k))
      && (!p.get('success') || String(r.success) === p.get('success')));
    const strip = by => `<span class="strip">${by.map(b => `<span class="${esc(b)}"></span>`).join('')}</span>`;
    const sel = (k, vals) => `<label>${k}<br><select name="${k}">${['', ...new Set(vals)].map(v => `<option ${v === (p.get(k) || '') ? 'selected' : ''} value="${esc(v)}">${esc(v || 'all')}</option>`).join('')}</select></label>`;
    $('#kw-view').innerHTML = `<h2>Episodes</h2><form id="ef">${['model', 'scenario', 'mode'].map(k => sel(k, d.rows.map(r => r[k]))).join('')}
      ${sel('success', ['true', 'false'])}</form><p>${num(rows.length)} episodes · <span class="tag model">decision model decided</span> <span class="tag llm">LLM decided</span></p>
      <table><tr><th>task</th><th>model</th><th>scenario</th><th>mode</th><th>τ</th><th>steps</th><th>success</th></tr>
      ${rows.slice(0, 500).map(r => `<tr><td><a href="${link('episode', {id: r.id})}">${esc(r.task_id)}</a></td><td>${esc(r.model)}</td>
      <td>${esc(r.scenario)}</td><td>${esc(r.mode)}</td><td class="n">${r.tau == null ? '–' : r.tau.toFixed(3)}</td>
      <td>${strip(r.by)}</td><td>${mark(r.success)}</td></tr>`).join('')}</table>`;
    $('#ef').onchange = () => { const q = new URLSearchParams(new FormData($('#ef')));
      [...q.keys()].forEach(k => q.get(k) || q.delete(k)); location.hash = link('episodes', q); };
  },

  async episode(p) {
    const d = await get('api/episode?' + p);
    const steps = d.steps.map(s => `<div class="step ${esc(s.decided_by)}" data-step="${s.step}">
      <b>step ${s.step}</b> <span class="tag ${esc(s.decided_by)}">${esc(s.decided_by)} decided</span> → <b>${esc(s.tool ?? '(no call)')}</b>
      ${s.tool == null ? '' : mark(s.acceptable.includes(s.tool))} <span class="muted">${esc(s.stratum)}</span>
      <br>decision model${d.mode === 'shadow' ? ' (shadow)' : ''}: ${s.model_choice == null ? '–' : `${esc(s.model_choice)} ${mark(s.model_correct)}`}
      ${s.model_confidence == null ? '' : `${bar(s.model_confidence, d.tau)} ${pct(s.model_confidence)}`}
      · LLM: ${s.llm_choice == null ? '–' : `${esc(s.llm_choice)} ${mark(s.llm_correct)}`} · key: ${s.acceptable.map(esc).join(', ')}
      ${s.error ? `<br><span class="bad">${esc(s.error)}</span>` : ''}
      ${s.arguments == null ? '' : `<br>arguments <code>${esc(s.arguments)}</code>`}
      ${s.observation == null ? '' : `<pre>${esc(s.observation)}</pre>`}${s.text ? `<pre>${esc(s.text)}</pre>` : ''}
      ${s.state == null ? '' : `<details><summary>state</summary><pre>${esc(s.state)}</pre></details>`}</div>`).join('');
    $('#kw-view').innerHTML = `<h2>Episode ${esc(d.task_id)} <span class="muted">${esc(d.scenario)} · ${esc(d.mode)} · ${esc(d.model)}</span></h2>
      <p>${d.success ? '<span class="ok">success</span>' : '<span class="bad">failure</span>'}${d.budget_exhausted ? ' (step budget exhausted)' : ''}
      · τ ${d.tau == null ? '–' : d.tau.toFixed(3)} · coverage ${pct(d.coverage)} · LLM ${esc(d.llm)}</p>
      <div id="timeline" class="strip">${d.steps.map(s => `<span class="${esc(s.decided_by)}" title="step ${s.step}: ${esc(s.tool)}">${s.step} ${esc(s.tool ?? '–')}${s.acceptable.includes(s.tool) ? '' : ' ✗'}</span>`).join('')}</div>
      ${steps}${d.reply ? `<h3>Reply</h3><pre>${esc(d.reply)}</pre>` : ''}`;
  },

  async flips() {
    const d = await get('api/flips');
    const strip = by => `<span class="strip">${by.map(b => `<span class="${esc(b)}"></span>`).join('')}</span>`;
    $('#kw-view').innerHTML = `<h2>Two runs: A ${esc(d.a)} → B ${esc(d.b)}</h2>
      <h3><span id="flip-q" data-n="${d.questions.length}">${num(d.questions.length)}</span> questions flipped</h3>
      <table><tr><th>question</th><th>model</th><th>scenario</th><th>A ${esc(d.a)}</th><th>B ${esc(d.b)}</th></tr>
      ${d.questions.slice(0, 500).map(r => `<tr><td><a href="${link('question', {scenario: r.scenario, model: r.model, qhash: r.qhash})}">${esc(r.qhash.slice(0, 10))}</a></td>
      <td>${esc(r.model)}</td><td>${esc(r.scenario)}</td><td>${esc(r.a_answer)} ${pct(r.a_confidence)} ${mark(r.a_right)}</td>
      <td>${esc(r.b_answer)} ${pct(r.b_confidence)} ${mark(r.b_right)}</td></tr>`).join('')}</table>
      <h3><span id="flip-e" data-n="${d.episodes.length}">${num(d.episodes.length)}</span> tasks flipped</h3>
      <table><tr><th>task</th><th>model</th><th>scenario</th><th>mode</th><th>A ${esc(d.a)}</th><th>B ${esc(d.b)}</th></tr>
      ${d.episodes.slice(0, 500).map(r => `<tr><td><a href="${link('episode', {id: r.a_id})}">${esc(r.task_id)}</a></td><td>${esc(r.model)}</td>
      <td>${esc(r.scenario)}</td><td>${esc(r.mode)}</td><td>${strip(r.a_by)} ${mark(r.a_success)}</td><td>${strip(r.b_by)} ${mark(r.b_success)}</td></tr>`).join('')}</table>`;
  },
};
window.addEventListener('hashchange', route);
route();
"""
"""The views; they read through ``get(path)`` (the server's endpoints, or the report's inline data)."""

NAV = """<nav class="kw-nav"><b>knowwhen</b>{live}<a data-v="questions" href="#questions">Questions</a>
<a href="#questions?right=wrong&cmin=0.8&sort=confidence">Confident but wrong</a>
<a data-v="episodes" href="#episodes">Episodes</a>{flips}</nav>"""

PAGE = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>knowwhen viewer</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_PAGE_CSS}{VIEW_CSS}</style></head>
<body>{NAV.format(live='<a data-v="live" href="#live">Live</a>', flips='<a data-v="flips" href="#flips">Two runs</a>')}
<main id="kw-view"><p class="muted">loading…</p></main>
<script>{_FETCH_JS}{VIEW_JS}</script></body></html>
"""
