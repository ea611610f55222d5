"""System One request parsing, answer building and body decoding of the local server, without a server."""

from __future__ import annotations

import gzip
from typing import Any

import pytest
import zstandard

from knowwhen_runner.serve.encoding import BodyTooLarge, UndecodableBody, UnsupportedEncoding, decode_body
from knowwhen_runner.serve.systemone import (
    InvalidRequest,
    build_answer,
    choice_confidence,
    flatten_text,
    parse_request,
    score_confidence,
)


def _body(**question: Any) -> dict[str, Any]:
    return {"model": "lexical", "state": "s", "questions": {"q": question}}


def test_structured_text_flattens_to_lines() -> None:
    """Objects become ``key: value`` lines and arrays one line per item, nested all the way down."""
    text = flatten_text({"owns": ["invoices", "refunds"], "n": 2, "none": None})
    assert text == "owns: invoices\nrefunds\nn: 2\nnone: "


def test_structured_choice_descriptions_and_instructions_are_accepted() -> None:
    """Choice descriptions and instructions may be objects or arrays; the models see them as text."""
    q = parse_request(
        _body(
            type="choice",
            instructions=["Route the ticket.", "Pick one."],
            criteria={"Billing": {"owns": ["refunds"]}, "Technical": ["bugs"], "Sales": None},
        )
    ).questions["q"]
    assert q.labels == ("Billing", "Technical", "Sales")
    assert q.descriptions == ("owns: refunds", "bugs", None)


def test_structured_noul_gives_hashable_descriptions() -> None:
    """A noul with structured instructions and criteria yields string descriptions (the lexical cache hashes them)."""
    q = parse_request(
        _body(type="noul", instructions={"task": "refund?"}, criteria={"false": ["questions", "complaints"]})
    ).questions["q"]
    assert q.labels == ("true", "false")
    assert q.descriptions == ("task: refund?", "questions\ncomplaints")
    hash(q.descriptions)


def test_score_levels_become_options_zero_to_n_minus_one() -> None:
    """A score's ordered levels are options "0".."n-1", described by the levels' text and kept for the legend."""
    levels = ["Calm", {"label": "Very angry"}]
    q = parse_request(_body(type="score", criteria=levels)).questions["q"]
    assert q.labels == ("0", "1") and q.descriptions == ("Calm", "label: Very angry")
    assert q.levels == tuple(levels)


@pytest.mark.parametrize(
    ("question", "loc"),
    [
        (
            {"type": "score", "criteria": {"0": "Calm", "1": "Angry"}},
            ["body", "questions", "q", "score", "criteria"],
        ),
        ({"type": "score", "criteria": ["Calm"]}, ["body", "questions", "q", "score", "criteria"]),
        (
            {"type": "score", "criteria": [str(i) for i in range(11)]},
            ["body", "questions", "q", "score", "criteria"],
        ),
        ({"type": "score", "criteria": ["Calm", None]}, ["body", "questions", "q", "score", "criteria", 1]),
        ({"type": "choice", "criteria": {"a": 3}}, ["body", "questions", "q", "choice", "criteria", "a"]),
        ({"type": "choice", "criteria": {}}, ["body", "questions", "q", "choice", "criteria"]),
        ({"type": "noul", "criteria": {"maybe": "x"}}, ["body", "questions", "q", "noul", "criteria"]),
        ({"type": "boolean"}, ["body", "questions", "q"]),
    ],
)
def test_invalid_questions_name_where_they_fail(question: dict[str, Any], loc: list[Any]) -> None:
    """Map-form or out-of-range scores, non-text descriptions and unknown types fail with the vendor's loc."""
    with pytest.raises(InvalidRequest) as caught:
        parse_request({"model": "m", "state": "s", "questions": {"q": question}})
    detail = caught.value.detail()
    assert detail["loc"] == loc and detail["msg"] and detail["type"]


@pytest.mark.parametrize("missing", ["model", "state", "questions"])
def test_missing_top_level_field_is_reported(missing: str) -> None:
    """Each required top-level field that is absent is reported as missing at its own loc."""
    body = {k: v for k, v in _body(type="noul").items() if k != missing}
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body)
    assert caught.value.detail() == {"loc": ["body", missing], "msg": "Field required", "type": "missing"}


def test_state_may_be_an_object_or_array_and_unknown_fields_are_ignored() -> None:
    """state may be a string, object or array; fields the server does not know are ignored."""
    for state in ("text", {"a": 1}, [1, 2]):
        assert parse_request({**_body(type="noul"), "state": state, "seed": 7}).state == state


@pytest.mark.parametrize(
    ("probs", "expected"),
    [([0.25, 0.25, 0.25, 0.25], 0.0), ([1.0, 0.0], 1.0), ([0.5, 0.3, 0.2], 0.25), ([1.0], 1.0)],
)
def test_choice_confidence_is_the_vendor_formula(probs: list[float], expected: float) -> None:
    """Choice confidence is (max(p) - 1/K) / (1 - 1/K) clipped to [0, 1], and 1 for a single option."""
    assert choice_confidence(probs) == pytest.approx(expected)


def test_choice_answer_carries_the_formula_not_the_top_probability() -> None:
    """A built choice answer's confidence is the documented formula, not p_max."""
    q = parse_request(_body(type="choice", criteria={"a": None, "b": None, "c": None})).questions["q"]
    answer = build_answer(q, [0.5, 0.3, 0.2])
    assert answer["choice"] == "a" and answer["confidence"] == pytest.approx(0.25)
    assert answer["probabilities"] == {"a": 0.5, "b": 0.3, "c": 0.2}


def test_score_answer_has_expectation_legend_probabilities_and_confidence() -> None:
    """A score answer's score is Σ i·p_i, its legend maps "0".."n-1" to the levels as sent."""
    levels = ["Calm", "Frustrated", {"label": "Very angry"}]
    q = parse_request(_body(type="score", criteria=levels)).questions["q"]
    answer = build_answer(q, [0.2, 0.3, 0.5])
    assert answer["score"] == pytest.approx(1.3)
    assert answer["legend"] == {"0": "Calm", "1": "Frustrated", "2": {"label": "Very angry"}}
    assert answer["probabilities"] == {"0": 0.2, "1": 0.3, "2": 0.5}
    assert answer["confidence"] == pytest.approx(score_confidence([0.2, 0.3, 0.5]))


def test_score_confidence_is_one_when_certain_and_zero_when_uniform() -> None:
    """Score confidence is 1 with all mass on one level and 0 for a uniform distribution."""
    assert score_confidence([0.0, 1.0, 0.0]) == pytest.approx(1.0)
    assert score_confidence([1 / 3] * 3) == pytest.approx(0.0)


DATA = b'{"model": "lexical", "state": "' + b"x" * 4000 + b'"}'


@pytest.mark.parametrize(
    ("encoded", "header"),
    [
        (zstandard.ZstdCompressor().compress(DATA), "zstd"),
        (zstandard.ZstdCompressor(write_content_size=False).compress(DATA), "zstd"),
        (gzip.compress(DATA), "gzip"),
        (gzip.compress(zstandard.ZstdCompressor().compress(DATA)), "zstd, gzip"),
        (DATA, "identity"),
    ],
    ids=["zstd", "zstd-unsized", "gzip", "zstd-then-gzip", "identity"],  # gzip's bytes hold the time
)
def test_encoded_bodies_decode(encoded: bytes, header: str) -> None:
    """zstd (with or without a declared size), gzip, both in sequence, and identity all decode to the body."""
    assert decode_body(encoded, header)[0] == DATA


def test_decoding_refuses_unknown_corrupt_and_oversized_bodies() -> None:
    """An unknown coding, corrupt data and a body past the cap raise their own errors."""
    with pytest.raises(UnsupportedEncoding):
        decode_body(DATA, "br")
    with pytest.raises(UndecodableBody):
        decode_body(b"not zstd", "zstd")
    with pytest.raises(UndecodableBody):
        decode_body(gzip.compress(DATA)[:30], "gzip")
    with pytest.raises(BodyTooLarge):
        decode_body(zstandard.ZstdCompressor().compress(DATA), "zstd", limit=1000)
    with pytest.raises(BodyTooLarge):
        decode_body(gzip.compress(DATA), "gzip", limit=1000)
