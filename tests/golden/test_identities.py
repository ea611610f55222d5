"""Job ids and cache keys are versioned identities: a change to them must be deliberate."""

from __future__ import annotations

import hashlib

from knowwhen_runner.config import ModelSpec, RateLimit
from knowwhen_runner.jobs import JOB_ID_VERSION, job_id
from knowwhen_runner.provider import decision_body
from knowwhen_runner.provider.cache_keys import CACHE_KEY_VERSION, cache_key, legacy_cache_key

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
    """Two models, revisions, params, kinds or bodies never share an entry (model A's answer is not B's)."""
    body = decision_body(ITEM)
    keys = {
        cache_key(_model(), "decision", body),
        cache_key(_model(model="hosted_vllm/prior"), "decision", body),
        cache_key(_model(revision="ckpt-2"), "decision", body),
        cache_key(_model(params={"temperature": 0.5}), "decision", body),
        cache_key(_model(), "llm", body),
        cache_key(_model(), "decision", {**body, "state": "other"}),
    }
    assert len(keys) == 6


def test_cache_keys_are_pinned() -> None:
    """Version-2 keys and the version-1 keys of earlier runs must not change unless bumped on purpose."""
    body = decision_body(ITEM)
    assert CACHE_KEY_VERSION == 2
    assert cache_key(_model(), "decision", body) == (
        "dbfb541e6b8e3a98357c53db1b6ec57d05503207a9bc1ae72d3650c160e391c2"
    )
    assert cache_key(_model(revision="2026-01"), "decision", body) == (
        "9bb94a648e499311b8b5143e4d4b57aeb2968cdbce19b308ce4696f4980f7a12"
    )
    # The key release 0.1.0 (cache key version 1) gave this call: runs made before are still found.
    assert legacy_cache_key(_model(), "decision", body) == (
        "a0751b080beac7c9870dca4091888cb20e15b50067f944d5c10f9ed54d9769d9"
    )
    assert legacy_cache_key(_model(revision="2026-01"), "decision", body) is None


def test_cache_key_follows_the_model_not_the_port() -> None:
    """A model served on another port or machine keeps its key, unless its identity is the endpoint."""
    body = decision_body(ITEM)
    here = cache_key(_model(), "decision", body)
    assert cache_key(_model(api_base="http://10.0.0.7:9999/v1"), "decision", body) == here
    assert cache_key(_model(api_base=None), "decision", body) == here
    endpoint = cache_key(_model(identity="endpoint"), "decision", body)
    assert endpoint != here
    assert cache_key(_model(identity="endpoint", api_base="http://127.0.0.1:8765/v1/"), "decision", body) == (
        endpoint
    )
    assert cache_key(_model(identity="endpoint", api_base="http://127.0.0.1:9999"), "decision", body) != (
        endpoint
    )


def test_revision_changes_job_ids_only_when_declared() -> None:
    """A declared revision re-runs the model's jobs; a config without one keeps the ids it had."""
    from knowwhen_runner.config import ModelSpec as Spec

    plain = _model()
    assert plain.served_model() == "hosted_vllm/lexical"
    assert Spec.model_validate({**plain.model_dump(), "revision": "r2"}).served_model() == (
        "hosted_vllm/lexical@r2"
    )
