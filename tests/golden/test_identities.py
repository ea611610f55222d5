"""Job ids and cache keys are versioned identities: a change to them must be deliberate."""

from __future__ import annotations

import hashlib

from knowwhen_runner.config import ModelSpec, RateLimit
from knowwhen_runner.jobs import JOB_ID_VERSION, job_id
from knowwhen_runner.provider import decision_body
from knowwhen_runner.provider.cache_keys import cache_key

ITEM = {
    "state": "TASK: cancel order 7\nHISTORY:\n(none)\nCURRENT OBSERVATION: start",
    "options": ["cancel_order", "ask_user"],
    "descriptions": ["Cancel an order.", None],
}


def _model(**kw: object) -> ModelSpec:
    base = {
        "id": "lexical",
        "model": "hosted_vllm/lexical",
        "kind": "decision",
        "api_base": "http://127.0.0.1:8765",
    }
    return ModelSpec.model_validate({**base, **kw})


def test_job_ids_are_pinned() -> None:
    """These ids must not change unless JOB_ID_VERSION is bumped on purpose (it re-runs every job)."""
    assert JOB_ID_VERSION == 1
    common = {
        "model_id": "lexical",
        "model": "hosted_vllm/lexical",
        "params": {},
        "scenario_id": "common",
        "scenario_version": "1",
    }
    assert job_id(mode="model", item="a" * 64, **common) == "a8d6a8c662547b1f9300d74097ccb9af"
    assert job_id(mode="llm", item="a" * 64, **common) == "9736fb0f63b5174518ea1d2c0dc5312e"
    assert job_id(mode="model", item="b" * 64, **{**common, "params": {"temperature": 0}}) == (
        "54b84f3c4c5e175496379495aa9261cd"
    )


def test_job_id_is_sha256_of_documented_json() -> None:
    """The id is the first 32 hex chars of sha256 over compact, key-sorted JSON of its inputs."""
    canonical = (
        '{"item":"q1","mode":"model","model":{"id":"lexical","model":"hosted_vllm/lexical","params":{}},'
        '"scenario":{"id":"common","version":"1"},"v":1}'
    )
    expected = hashlib.sha256(canonical.encode()).hexdigest()[:32]
    assert (
        job_id(
            model_id="lexical",
            model="hosted_vllm/lexical",
            params={},
            mode="model",
            scenario_id="common",
            scenario_version="1",
            item="q1",
        )
        == expected
    )


def test_job_id_changes_with_what_decides_the_output() -> None:
    """Model, params, mode, scenario version and item each change the id."""
    base = {
        "model_id": "m",
        "model": "p/m",
        "params": {},
        "mode": "model",
        "scenario_id": "s",
        "scenario_version": "1",
        "item": "q",
    }
    ids = {job_id(**base)}
    for field, value in (
        ("model_id", "n"),
        ("model", "p/n"),
        ("params", {"t": 1}),
        ("mode", "llm"),
        ("scenario_id", "t"),
        ("scenario_version", "2"),
        ("item", "r"),
    ):
        ids.add(job_id(**{**base, field: value}))
    assert len(ids) == 8


def test_cache_key_ignores_runtime_knobs_and_keys() -> None:
    """Concurrency, timeouts, rate limits and the key variable never change a cache key."""
    body = decision_body(ITEM)
    plain = cache_key(_model(), "decision", body)
    assert (
        cache_key(
            _model(
                timeout_s=5,
                rate_limit=RateLimit(requests_per_minute=10, max_in_flight=1),
                api_key_env="OTHER_KEY",
            ),
            "decision",
            body,
        )
        == plain
    )
    assert cache_key(_model(api_base="http://127.0.0.1:8765/v1/"), "decision", body) == plain


def test_cache_key_names_the_model() -> None:
    """Two models, two params or two bases never share an entry (model A's answer is not model B's)."""
    body = decision_body(ITEM)
    keys = {
        cache_key(_model(), "decision", body),
        cache_key(_model(model="hosted_vllm/prior"), "decision", body),
        cache_key(_model(api_base="http://127.0.0.1:9999"), "decision", body),
        cache_key(_model(params={"temperature": 0.5}), "decision", body),
        cache_key(_model(), "llm", body),
        cache_key(_model(), "decision", {**body, "state": "other"}),
    }
    assert len(keys) == 6
