"""The vendor's Python client (typesafe-sdk) against the local server: sync and async, zstd-compressed."""

from __future__ import annotations

from typing import Any

import pytest
from typesafe_sdk import (
    AsyncTypeSafeClient,
    Choice,
    Noul,
    RetryPolicy,
    Score,
    TypeSafeClient,
    TypeSafeNotFoundError,
    TypeSafeUnprocessableEntityError,
)
from typesafe_sdk._core.compression import COMPRESSORS, MIN_COMPRESSED_BODY_LENGTH

from knowwhen_runner.serve import ServerProcess

pytestmark = pytest.mark.anyio

# Long enough that every request body passes the SDK's compression threshold.
STATE = (
    "TASK: Please cancel my order 4411, I no longer need it.\n"
    "HISTORY:\nfind_customer(email='ann@example.com') -> customer 17\n"
    "CURRENT OBSERVATION:\nOrder 4411 is pending and can still be cancelled. " + "Notes: none. " * 120
)
QUESTIONS = {
    "done": Noul(instructions="Has the order been cancelled?", criteria={"false": ["still pending"]}),
    "next_tool": Choice(
        instructions=["Which tool should the agent call next?"],
        criteria={
            "find_customer": "Look up a customer by e-mail.",
            "cancel_order": {"does": "Cancel a pending order."},
            "ask_user": None,
        },
    ),
    "urgency": Score(criteria=["Can wait", "Today", {"label": "Right now"}]),
}


@pytest.fixture
def anyio_backend() -> str:
    """The SDK's async client runs on asyncio here."""
    return "asyncio"


def _client(server: ServerProcess, **kwargs: Any) -> TypeSafeClient:
    return TypeSafeClient(
        api_key="local", base_url=server.base_url, retry=RetryPolicy(max_retries=0), timeout=10, **kwargs
    )


def _check_answers(response: Any) -> None:
    """Every question type parses into its SDK answer type, with the server's documented numbers."""
    assert 0.0 <= response.nouls["done"].noul <= 1.0
    choice = response.choices["next_tool"]
    assert choice.choice == "cancel_order"
    k, top = 3, choice.probabilities["cancel_order"]
    assert choice.confidence == pytest.approx((top - 1 / k) / (1 - 1 / k))
    score = response.scores["urgency"]
    assert set(score.legend) == set(score.probabilities) == {0, 1, 2}
    assert score.legend[2] == {"label": "Right now"}
    assert score.score == pytest.approx(sum(i * p for i, p in score.probabilities.items()))


def _zstd_bodies(server: ServerProcess) -> int:
    return int(server.stats(records=False)["encodings"].get("zstd", 0))


def test_sdk_can_compress() -> None:
    """The pinned SDK has a zstd compressor, so the compression tests below are not vacuous."""
    assert "zstd" in COMPRESSORS


def test_sync_client_answers_every_type_over_zstd(server: ServerProcess) -> None:
    """TypeSafeClient.system_one sends a zstd body the server decodes, and parses noul, choice and score answers."""
    with _client(server) as client:
        response = client.system_one(state=STATE, questions=QUESTIONS, model="lexical")
    _check_answers(response)
    assert response.model == "lexical" and response.usage.input_tokens > MIN_COMPRESSED_BODY_LENGTH // 4
    assert _zstd_bodies(server) == 1


async def test_async_client_answers_every_type_over_zstd(server: ServerProcess) -> None:
    """AsyncTypeSafeClient.system_one does the same, concurrently, each body zstd-encoded."""
    import anyio

    results: list[Any] = []

    async with AsyncTypeSafeClient(
        api_key="local", base_url=server.base_url, retry=RetryPolicy(max_retries=0), timeout=10
    ) as client:

        async def ask() -> None:
            results.append(await client.system_one(state=STATE, questions=QUESTIONS, model="lexical"))

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(ask)
    for response in results:
        _check_answers(response)
    assert len(results) == 4 and _zstd_bodies(server) == 4


def test_uncompressed_bodies_are_not_counted_as_zstd(server: ServerProcess) -> None:
    """With compression off the same call is answered and no zstd body is counted (the counter tells them apart)."""
    with _client(server, compression=False) as client:
        _check_answers(client.system_one(state=STATE, questions=QUESTIONS, model="lexical"))
    assert _zstd_bodies(server) == 0


def test_default_model_is_served_as_an_alias(server: ServerProcess) -> None:
    """Without a model the SDK asks for jev-latest, which the server answers as lexical and says so."""
    with _client(server) as client:
        response = client.system_one(state=STATE, questions=QUESTIONS)
    _check_answers(response)
    assert response.model == "lexical"
    assert server.count(model="jev-latest", endpoint="systemone", status=200) == 1


async def test_models_list_in_both_clients(server: ServerProcess) -> None:
    """models.list parses the vendor's shape, sync and async, and describes jev-latest as an alias of lexical."""
    with _client(server) as client:
        listed = client.models.list()
    async with AsyncTypeSafeClient(api_key="local", base_url=server.base_url) as aclient:
        alisted = await aclient.models.list()
    assert listed.models == alisted.models
    by_name = {m.name: m for m in listed.models}
    assert {"lexical", "prior", "jev-latest"} <= set(by_name)
    assert by_name["jev-latest"].description.startswith("Alias of lexical")
    assert all(m.description and len(m.release_date) == 10 for m in listed.models)


def test_errors_map_to_the_sdk_exception_classes(server: ServerProcess) -> None:
    """An unknown model raises TypeSafeNotFoundError and an invalid score TypeSafeUnprocessableEntityError,
    each with the server's message extracted from the vendor's error body."""
    with _client(server) as client:
        with pytest.raises(TypeSafeNotFoundError, match="does not exist"):
            client.system_one(state=STATE, questions=QUESTIONS, model="no-such-model")
        with pytest.raises(TypeSafeUnprocessableEntityError, match="levels"):
            client.system_one(state=STATE, questions={"q": {"type": "score", "criteria": ["one"]}})
