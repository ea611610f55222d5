"""The questions view: answered questions of the states scenarios, judged against their answer key, a page
at a time, and one question in full.

A filter the database can apply (scenario, model, confidence range, order) goes to ``Queue.answers``, so
the first page of a large run reads one page of answers, never the whole run. Stratum and right/wrong
need the answer key (``answer_keys``): the answers the rest of the filter selects are then read (a few
fields each), judged here and paged, and kept while no job finishes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import anyio

from ..config import SweepConfig
from ..queue import AnswerQuery, RecordedAnswer
from ..results import CxsManifest
from ..results.screen_record import screen_mark, screened_out
from .answer_keys import KeyEntry
from .data import RunData
from .leaderboard import standings

__all__ = ["PAGE_SIZE", "QuestionFilter", "judged_rows", "public_answer", "question_detail", "question_page"]

PAGE_SIZE = 500
"""Answers listed per page."""
_MAX_PAGE = 5000
_MAX_OFFSET = 2**62  # past any run's answers, and within what SQLite and PostgreSQL take as an OFFSET

Keys = dict[str, dict[str, list[KeyEntry]]]


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class QuestionFilter:
    """What the questions view lists: the page's filters as the page's address spells them."""

    model: str = ""
    scenario: str = ""
    stratum: str = ""
    right: Literal["", "right", "wrong"] = ""
    min_confidence: float | None = None
    max_confidence: float | None = None
    by_confidence: bool = False
    """Most confident first (the confident-but-wrong list), else by scenario, model and question."""
    offset: int = 0
    limit: int = PAGE_SIZE
    llm_later: bool = False
    """Leave the gate LLM's answers out until they have been read once (the page asks again for them)."""

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> QuestionFilter:
        """From the page's query (``model``, ``scenario``, ``stratum``, ``right``, ``cmin``, ``cmax``,
        ``sort``, ``offset``, ``limit``, ``llm=later``); a value that is not a number is ignored."""
        right = params.get("right", "")
        offset, limit = _number(params.get("offset")), _number(params.get("limit"))
        return cls(
            model=params.get("model", ""),
            scenario=params.get("scenario", ""),
            stratum=params.get("stratum", ""),
            right=right if right in ("right", "wrong") else "",  # type: ignore[arg-type]
            min_confidence=_number(params.get("cmin")),
            max_confidence=_number(params.get("cmax")),
            by_confidence=params.get("sort") == "confidence",
            offset=int(min(_MAX_OFFSET, max(0, offset or 0))),
            limit=min(_MAX_PAGE, max(1, int(limit or PAGE_SIZE))),
            llm_later=params.get("llm") == "later",
        )

    def query(self, states: list[str]) -> AnswerQuery:
        """What the database can select of this filter, over the ``states`` scenarios."""
        return AnswerQuery(
            scenarios=frozenset(s for s in states if self.scenario in ("", s)),
            models=frozenset({self.model}) if self.model else None,
            min_confidence=self.min_confidence,
            max_confidence=self.max_confidence,
            order="confidence" if self.by_confidence else "question",
        )


def _right(choice: Any, entries: list[KeyEntry] | None) -> bool | None:
    if not entries:
        return None
    return all(e.accepts(choice) for e in entries)


def _thresholds(manifests: list[CxsManifest]) -> dict[str, dict[str, float | None]]:
    """The fitted open-loop τ per model and scenario."""
    out: dict[str, dict[str, float | None]] = {}
    for manifest in manifests:
        for cell in manifest.open_loop:
            out.setdefault(manifest.model.id, {})[cell.scenario] = cell.fit.threshold if cell.fit else None
    return out


def _screened(manifests: list[CxsManifest]) -> dict[str, str]:
    """The models a screen stopped, each with its screening bounds: their answers are a prefix of the drawn
    order and their τ is fitted on those alone, not a finished model's."""
    return {m.model.id: screen_mark(m.screen) for m in manifests if m.screen and screened_out(m.screen)}


def _row(answer: RecordedAnswer, keys: Keys, llm: RecordedAnswer | None) -> dict[str, Any]:
    entries = keys.get(answer.scenario_id, {}).get(answer.item)
    return {
        "scenario": answer.scenario_id, "model": answer.model_id, "qhash": answer.item, "answer": answer.answer,
        "confidence": answer.confidence, "right": _right(answer.answer, entries),
        "stratum": entries[0].stratum if entries else None, "task": entries[0].task if entries else None,
        "llm_answer": llm.answer if llm else None, "llm_right": _right(llm.answer, entries) if llm else None,
    }  # fmt: skip


def _passes(answer: RecordedAnswer, chosen: QuestionFilter, keys: Keys) -> bool:
    entries = keys.get(answer.scenario_id, {}).get(answer.item)
    if chosen.stratum and not (entries and entries[0].stratum == chosen.stratum):
        return False
    return not chosen.right or _right(answer.answer, entries) is (chosen.right == "right")


def _states(config: SweepConfig) -> list[str]:
    return sorted(s.id for s in config.scenarios if s.kind == "states")


async def question_page(data: RunData, chosen: QuestionFilter) -> dict[str, Any]:
    """One page of the answers ``chosen`` selects, judged, each with the gate LLM's answer to it."""
    config = await data.config()
    gate_llm = config.gate.llm if config.gate else None
    states = _states(config)
    query = chosen.query(states)
    if chosen.stratum or chosen.right:
        keys = await data.keys()
        selected = (await data.kept(("answers", query), lambda: data.queue.answers(query))).rows
        matched = [a for a in selected if _passes(a, chosen, keys)]
        rows, total = matched[chosen.offset : chosen.offset + chosen.limit], len(matched)
    else:
        async with anyio.create_task_group() as tg:  # the keys are read while the database finds the page
            tg.start_soon(data.keys)
            page = await data.queue.answers(replace(query, limit=chosen.limit, offset=chosen.offset))
        rows, total = page.rows, page.total
        keys = await data.keys()
    llm: dict[tuple[str, str], RecordedAnswer] = {}
    pending = False
    if gate_llm and any(a.model_id != gate_llm for a in rows):
        scenarios = query.scenarios or frozenset()
        pending = chosen.llm_later and data.known(("llm", scenarios)) is None
        llm = {} if pending else await _llm_answers(data, gate_llm, scenarios)
    unfiltered = chosen.min_confidence is None and chosen.max_confidence is None
    unfiltered &= not (chosen.model or chosen.scenario or chosen.stratum or chosen.right)
    answered = (
        total
        if unfiltered
        else sum(c.n for c in await data.counts() if c.status == "done" and c.scenario_id in keys)
    )
    return {
        "rows": [
            _row(a, keys, llm.get((a.scenario_id, a.item)) if a.model_id != gate_llm else None) for a in rows
        ],
        "total": total,
        "answers": answered,
        "offset": chosen.offset,
        "limit": chosen.limit,
        "options": {
            "model": sorted((m.id for m in config.models), key=(await standings(data)).position),
            "scenario": states,
            "stratum": sorted({e[0].stratum for qs in keys.values() for e in qs.values() if e}),
        },
        "thresholds": _thresholds(data.manifests(config)),
        "screened": _screened(data.manifests(config)),
        "llm": gate_llm,
        "llm_pending": pending,
    }


async def _llm_answers(
    data: RunData, gate_llm: str, scenarios: frozenset[str]
) -> dict[tuple[str, str], RecordedAnswer]:
    """The gate LLM's answers in ``scenarios`` by (scenario, question): one list of a few fields, kept."""

    async def read() -> dict[tuple[str, str], RecordedAnswer]:
        found = await data.queue.answers(AnswerQuery(scenarios=scenarios, models=frozenset({gate_llm})))
        return {(a.scenario_id, a.item): a for a in found.rows}

    return dict(await data.kept(("llm", scenarios), read))


async def judged_rows(data: RunData, manifests: list[CxsManifest] | None) -> dict[str, Any]:
    """Every answer of the states scenarios judged, with the gate LLM's; τ of ``manifests`` (else the run's)."""
    config, keys = await data.config(), await data.keys()
    gate_llm = config.gate.llm if config.gate else None
    every = (await data.queue.answers(AnswerQuery(scenarios=frozenset(_states(config))))).rows
    llm = {(a.scenario_id, a.item): a for a in every if a.model_id == gate_llm}
    rows = [
        _row(a, keys, llm.get((a.scenario_id, a.item)) if a.model_id != gate_llm else None) for a in every
    ]
    found = data.manifests(config) if manifests is None else manifests
    return {"rows": rows, "thresholds": _thresholds(found), "screened": _screened(found), "llm": gate_llm}


async def question_detail(data: RunData, scenario: str, model: str, qhash: str) -> dict[str, Any] | None:
    """One question: state, options with the model's probabilities, answer key, both answers."""
    config, keys = await data.config(), await data.keys()
    gate_llm = config.gate.llm if config.gate else None
    asked = AnswerQuery(
        scenarios=frozenset({scenario}),
        models=frozenset({model} | ({gate_llm} if gate_llm else set())),
        items=frozenset({qhash}),
        with_result=True,
    )
    found = {a.model_id: a.result for a in (await data.queue.answers(asked)).rows}
    answer = found.get(model)
    if answer is None:
        return None
    item = (await data.items(scenario)).get((scenario, qhash))
    item = item or {"options": sorted(answer.get("probabilities") or {})}  # a run without stored items
    entries = keys.get(scenario, {}).get(qhash, [])
    llm = found.get(gate_llm) if gate_llm and gate_llm != model else None
    manifests = data.manifests(config)
    tau = _thresholds(manifests).get(model, {}).get(scenario)
    return {
        "scenario": scenario, "model": model, "qhash": qhash, "state": item.get("state"),
        "options": list(item.get("options") or []), "descriptions": list(item.get("descriptions") or []),
        "key": [{"task": e.task, "stratum": e.stratum, "acceptable": sorted(e.acceptable)} for e in entries],
        "answer": public_answer(answer), "right": _right(answer.get("answer"), entries),
        "llm_model": gate_llm if llm else None, "llm": public_answer(llm) if llm else None,
        "llm_right": _right(llm.get("answer"), entries) if llm else None, "tau": tau,
        "screened": _screened(manifests).get(model),
    }  # fmt: skip


def public_answer(row: dict[str, Any]) -> dict[str, Any]:
    keep = ("answer", "confidence", "probabilities", "valid", "error", "cost_usd", "latency_ms", "cache_hit")
    return {k: row.get(k) for k in keep}
