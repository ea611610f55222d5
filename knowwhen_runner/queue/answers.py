"""Open-loop answers read for lists, and each model's spend, without reading whole results.

A large run's results are hundreds of MB (every answer keeps its options' probabilities), while a list
shows a few fields of one page. ``answers(AnswerQuery)`` filters the done question jobs of the plan by
scenario, model, item and confidence, orders them by question or by confidence, and returns one page
(``limit``/``offset``) with the number that matched; ``spend()`` sums what each model's done jobs spent
(the column written beside each result). The database does the work (SQLite's or PostgreSQL's JSON functions): ``AnswerTables`` is a mixin of
``SqlQueue``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import orjson
from sqlalchemy import text

from .engine import RunStatements, on_db_thread

__all__ = [
    "AnswerOrder",
    "AnswerPage",
    "AnswerQuery",
    "AnswerTables",
    "RecordedAnswer",
]

AnswerOrder = Literal["question", "confidence"]


@dataclass(frozen=True, slots=True)
class AnswerQuery:
    """Which answers to read. A filter left at None does not filter; ``limit`` None reads every match."""

    scenarios: frozenset[str] | None = None
    models: frozenset[str] | None = None
    items: frozenset[str] | None = None
    min_confidence: float | None = None
    """Only answers this confident or more (an answer without a confidence is left out)."""
    max_confidence: float | None = None
    order: AnswerOrder = "question"
    """``question``: by scenario, model, item; ``confidence``: most confident first (none last), then so."""
    limit: int | None = None
    offset: int = 0
    with_result: bool = False
    """Also return each answer's whole result (for one question's page, not for lists)."""


class RecordedAnswer(NamedTuple):
    """One recorded answer of a question job: what the model chose and how sure it was."""

    scenario_id: str
    model_id: str
    item: str
    answer: str | None
    confidence: float | None
    result: dict[str, Any] | None = None


class AnswerPage(NamedTuple):
    """The rows of one page and how many answers matched the query in all."""

    rows: list[RecordedAnswer]
    total: int


def _sort_key(row: RecordedAnswer) -> tuple[Any, ...]:
    return (row.scenario_id, row.model_id, row.item)


class _Dialect(NamedTuple):
    """The few expressions SQLite and PostgreSQL spell differently."""

    kind: str  # the job payload's kind
    page_from: (
        str  # joined to a page's rows ``j``: the result ``{r}`` that ``answer`` and ``confidence`` read
    )
    page_result: str
    answer: str
    confidence: str
    member: str  # ``{col} in the list :{name}`` (a JSON array on SQLite, an array on PostgreSQL)
    scan_from: str  # joined to kw_jobs where every row's confidence is read: opens each result once
    scan_confidence: str


_NUMBER = r"'^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'"
_SQLITE = _Dialect(
    kind="json_extract(payload, '$.kind')",
    page_from="",
    page_result="j.result",
    answer="json_extract({r}, '$.answer')",
    confidence="(CASE WHEN json_type({r}, '$.confidence') IN ('integer', 'real') "
    "THEN json_extract({r}, '$.confidence') END)",
    member="{col} IN (SELECT value FROM json_each(:{name}))",
    scan_from="",
    scan_confidence="(CASE WHEN json_type(result, '$.confidence') IN ('integer', 'real') "
    "THEN json_extract(result, '$.confidence') END)",
)
# PostgreSQL keeps large results compressed apart (TOAST): each mention of ``result`` unpacks and parses
# it again, so a scan reads the field it needs once, in a lateral subquery (OFFSET 0 keeps it from being
# inlined back into every mention).
_POSTGRES = _Dialect(
    kind="(payload::json ->> 'kind')",
    page_from=" CROSS JOIN LATERAL (SELECT j.result::json AS r OFFSET 0) AS y",
    page_result="y.r",
    answer="({r} ->> 'answer')",
    confidence=f"(CASE WHEN ({{r}} ->> 'confidence') ~ {_NUMBER} THEN ({{r}} ->> 'confidence')::float8 END)",
    member="{col} = ANY(:{name})",
    scan_from=" CROSS JOIN LATERAL (SELECT result::json ->> 'confidence' AS v OFFSET 0) AS x",
    scan_confidence=f"(CASE WHEN x.v ~ {_NUMBER} THEN x.v::float8 END)",
)


class AnswerTables(RunStatements):
    """``answers`` and ``spend`` of ``SqlQueue``."""

    @property
    def _spelled(self) -> _Dialect:
        return _POSTGRES if self.dialect == "postgresql" else _SQLITE

    def _where(self, query: AnswerQuery, params: dict[str, Any]) -> str:
        d = self._spelled
        where = [f"run = :run AND status = 'done' AND {d.kind} = 'question'"]
        for name, col, values in (
            ("scenarios", "scenario", query.scenarios),
            ("models", "model_id", query.models),
            ("items", "item", query.items),
        ):
            if values is not None:
                listed = sorted(values)
                params[name] = listed if self.dialect == "postgresql" else orjson.dumps(listed).decode()
                where.append(d.member.format(col=col, name=name))
        if query.min_confidence is not None:
            params["cmin"] = query.min_confidence
            where.append(f"{d.scan_confidence} >= :cmin")
        if query.max_confidence is not None:
            params["cmax"] = query.max_confidence
            where.append(f"{d.scan_confidence} <= :cmax")
        return " AND ".join(where)

    @on_db_thread
    def answers(self, query: AnswerQuery) -> AnswerPage:
        """One page of the done question jobs' answers that ``query`` selects, and how many it selects."""
        d = self._spelled
        params: dict[str, Any] = {"run": self.run, "offset": query.offset}
        where = self._where(query, params)
        by_question = "p.scenario, p.model_id, p.item"
        order = f"p.c DESC NULLS LAST, {by_question}" if query.order == "confidence" else by_question
        # The page's ids are chosen first and only its rows' results are opened: ordering by question
        # never parses a result the page does not show. That scan also counts the matches, unless it
        # sorts by confidence (counting over it would sort every match, not keep the top of them).
        by_confidence = query.order == "confidence"
        conf = f", {d.scan_confidence} AS c" if by_confidence else ""
        scan = (
            d.scan_from
            if by_confidence or query.min_confidence is not None or query.max_confidence is not None
            else ""
        )
        counted = "NULL" if by_confidence else "count(*) OVER ()"
        params["limit"] = -1 if query.limit is None and self.dialect == "sqlite" else query.limit
        whole = ", j.result" if query.with_result else ""
        fields = f"j.scenario, j.model_id, j.item, {d.answer.format(r=d.page_result)}, " + (
            f"{d.confidence.format(r=d.page_result)}"
        )
        if query.limit is None and query.offset == 0:  # every match: one pass, no page to choose first
            direct = order.replace("p.c", d.scan_confidence).replace("p.", "j.")
            sql = f"SELECT {fields}, NULL{whole} FROM kw_jobs j{scan}{d.page_from} WHERE {where} ORDER BY {direct}"
        else:
            sql = (
                f"SELECT {fields}, p.n{whole} FROM (SELECT id, scenario, model_id, item{conf}, {counted} AS n "
                f"FROM kw_jobs{scan} WHERE {where} ORDER BY {order.replace('p.', '')} LIMIT :limit OFFSET :offset) "
                f"AS p JOIN kw_jobs j ON j.run = :run AND j.id = p.id{d.page_from} ORDER BY {order}"
            )
        with self._reading() as conn:
            found = conn.execute(text(sql), params).fetchall()
            if query.limit is None and query.offset == 0:
                total = len(found)
            elif found and found[0][5] is not None:
                total = int(found[0][5])
            else:  # ordered by confidence, or a page past the end
                count = text(f"SELECT count(*) FROM kw_jobs{scan} WHERE {where}")
                total = int(conn.execute(count, params).scalar() or 0)
        rows = [
            RecordedAnswer(r[0], r[1], r[2], None if r[3] is None else str(r[3]),
                           None if r[4] is None else float(r[4]),
                           orjson.loads(r[6]) if query.with_result and r[6] else None)
            for r in found
        ]  # fmt: skip
        return AnswerPage(rows, total)

    @on_db_thread
    def spend(self) -> dict[str, float]:
        """Per model, what its done jobs of the plan spent (``job_spend``, written beside each result)."""
        # Each done job's spend, written beside its result (``tally_values``): the tally index alone is read.
        sql = (
            "SELECT model_id, sum(cost_usd) FROM kw_jobs WHERE run = :run AND status = 'done' "
            "GROUP BY model_id ORDER BY model_id"
        )
        with self._reading() as conn:
            return {r[0]: float(r[1] or 0.0) for r in conn.execute(text(sql), {"run": self.run})}
