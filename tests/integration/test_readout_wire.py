"""Read-outs over real HTTP through litellm: request bodies per server, and replies that cannot be read."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.dataset.answer_rows import answer_row
from knowwhen_runner.exceptions import OtherModel
from knowwhen_runner.provider import (
    Limiters,
    LitellmTransport,
    ModelClient,
    Secrets,
    cache_key,
    decision_body,
)
from knowwhen_runner.provider.readout import TOKEN_SYSTEM_PROMPT
from tests.helpers import TOOLS
from tests.readout_server import ScriptedServer, scripted_server

ITEM = {"state": "TASK: cancel order #1001", "options": list(TOOLS), "descriptions": list(TOOLS.values())}


def _model(srv: ScriptedServer, behaviour: str, prefix: str = "openai", **readout: Any) -> ModelSpec:
    return ModelSpec(
        id="m", model=f"{prefix}/{behaviour}", kind="decision", api_base=srv.base_url, readout=readout
    )


def _ask(model: ModelSpec, item: dict[str, Any] = ITEM) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        transport = LitellmTransport()
        await transport.prepare(model)
        reply = await transport.send(model, "decision", decision_body(item), None)
        return reply.response

    return anyio.run(go)


def _labelled_user(labels: str) -> str:
    lines = [f"{label}. {name}: {desc}" for label, (name, desc) in zip(labels, TOOLS.items(), strict=False)]
    return (
        f"{ITEM['state']}\n\nWhich tool should the agent call next?\n\nOptions:\n"
        + "\n".join(lines)
        + "\n\nAnswer with the letter of one option only."
    )


@pytest.mark.parametrize(
    ("server", "prefix", "constraint"),
    [
        ("vllm", "hosted_vllm", {"structured_outputs": {"choice": list("ABCDEFGH")}}),
        ("sglang", "openai", {"regex": "(A|B|C|D|E|F|G|H)"}),
        ("llama.cpp", "openai", {"grammar": 'root ::= "A" | "B" | "C" | "D" | "E" | "F" | "G" | "H"'}),
        ("openai", "openai", {}),
    ],
)
def test_a_token_question_sends_each_servers_documented_fields(
    server: str, prefix: str, constraint: dict[str, Any]
) -> None:
    """A token read-out sends one chat completion whose every field is the server's documented one: the
    labelled options, logprobs with top_logprobs, one token, and the server's own label constraint."""
    with scripted_server() as srv:
        _ask(_model(srv, "first", prefix, method="token", server=server, top_logprobs=20))
        (body,) = srv.bodies("/v1/chat/completions")
    assert body == {
        "model": "first",
        "messages": [
            {"role": "system", "content": TOKEN_SYSTEM_PROMPT},
            {"role": "user", "content": _labelled_user("ABCDEFGH")},
        ],
        "logprobs": True,
        "top_logprobs": 20,
        "max_tokens": 1,
        **constraint,
    }


def test_a_likelihood_question_sends_every_option_as_one_batch_of_echoed_prompts() -> None:
    """A likelihood read-out sends one completions request: a prompt per option (the shared prompt, then
    the option's name), echo with logprobs, one token at temperature 0."""
    with scripted_server() as srv:
        got = _ask(_model(srv, "first", "hosted_vllm", method="likelihood", server="vllm"))
        (body,) = srv.bodies("/v1/completions")
    prompt = (
        f"{ITEM['state']}\n\nWhich tool should the agent call next?\n\nOptions:\n"
        + "\n".join(f"- {name}: {desc}" for name, desc in TOOLS.items())
        + "\n\nAnswer:"
    )
    assert body == {
        "model": "first",
        "prompt": [f"{prompt} {name}" for name in TOOLS],
        "echo": True,
        "logprobs": 1,
        "max_tokens": 1,
        "temperature": 0,
    }
    # The server scores the option listed first highest, each next one 2 nats lower.
    expected = [math.exp(-2.0 * i) for i in range(len(TOOLS))]
    assert got["choice"] == "find_customer"
    assert got["probabilities"] == pytest.approx(
        {n: e / sum(expected) for n, e in zip(TOOLS, expected, strict=True)}
    )
    assert got["readout"]["sum_choice"] == got["readout"]["mean_choice"] == "find_customer"


def test_a_token_answer_is_the_most_likely_label_renormalised_over_the_labels() -> None:
    """The recorded answer is the label of highest probability, its probability the confidence, the
    labels' probabilities renormalised over the labels (``A`` and `` A`` are one label), and the mass the
    labels held kept as a diagnostic."""
    with scripted_server() as srv:
        got = _ask(_model(srv, "first", method="token", top_logprobs=20))
    raw = [math.exp(-0.7 - 1.5 * i) for i in range(len(TOOLS))]
    assert got["choice"] == "find_customer"
    assert got["probabilities"] == pytest.approx({n: r / sum(raw) for n, r in zip(TOOLS, raw, strict=True)})
    assert got["confidence"] == got["probabilities"]["find_customer"]
    assert got["readout"]["label_mass"] == pytest.approx(sum(raw))
    assert got["readout"]["cut_off"] == 0
    assert got["readout"]["requests"] == 1


def test_options_beyond_one_group_are_asked_in_groups_and_a_round_of_leaders() -> None:
    """With fewer top_logprobs than options, the options are asked in groups and a last round of the
    groups' leaders: three requests for eight options at four per request, one distribution over all."""
    with scripted_server() as srv:
        got = _ask(_model(srv, "first", method="token", server="llama.cpp", top_logprobs=4))
        bodies = srv.bodies("/v1/chat/completions")
    assert len(bodies) == got["readout"]["requests"] == 3
    assert [b["grammar"].count("|") + 1 for b in bodies] == [4, 4, 2]
    assert sum(got["probabilities"].values()) == pytest.approx(1.0)
    assert got["choice"] == "find_customer"


def test_too_many_options_are_refused_naming_the_server_setting() -> None:
    """With ``too_many: refuse``, a question of more options than one request reads is an invalid answer
    whose error names the server's setting (vLLM's --max-logprobs), and no request is sent."""
    with scripted_server() as srv:
        got = _ask(
            _model(
                srv, "first", "hosted_vllm", method="token", server="vllm", top_logprobs=5, too_many="refuse"
            )
        )
        assert srv.received == []
    row = answer_row(
        model_id="m", qhash="q", item=ITEM, response=got, attempts=1, requests=0, wall_ms=0, cache_hit=False
    )
    assert row["valid"] is False
    assert "8 options, but one token question reads at most 5" in row["error"]
    assert "--max-logprobs" in row["error"]


@pytest.mark.parametrize(
    ("behaviour", "method", "reason"),
    [
        ("nolabels", "token", "none of the labels A-H is among the 3 most likely first tokens"),
        ("nan", "token", "the server returned nan as the log-probability of ' A', not a log-probability"),
        ("nologprobs", "token", "the server returned no top_logprobs for the first token"),
        ("nan", "likelihood", "the server returned nan as the log-probability of ' find_customer'"),
        ("noecho", "likelihood", "it ignores echo"),
    ],
)
def test_a_reply_that_cannot_be_read_is_an_invalid_answer_with_its_reason(
    behaviour: str, method: str, reason: str
) -> None:
    """Missing labels, NaN log-probabilities, no logprobs at all or an ignored echo give an answer with no
    choice whose row is invalid and says why, never an exception."""
    with scripted_server() as srv:
        got = _ask(_model(srv, behaviour, method=method))
    row = answer_row(
        model_id="m", qhash="q", item=ITEM, response=got, attempts=1, requests=1, wall_ms=0, cache_hit=False
    )
    assert got["choice"] is None and got["probabilities"] is None
    assert row["valid"] is False
    assert reason in row["error"]
    assert row["readout"]["invalid"] in row["error"]


def test_labels_the_top_list_cut_off_get_no_probability_and_are_counted() -> None:
    """A reply whose top_logprobs hold only some of the labels is still read over the labels it holds;
    the others get probability 0, and how many were cut off is recorded."""
    with scripted_server() as srv:
        got = _ask(_model(srv, "cutoff", method="token", top_logprobs=20))
    assert got["choice"] == "find_customer"
    assert got["probabilities"]["find_customer"] == pytest.approx(1.0)
    assert got["readout"]["cut_off"] == len(TOOLS) - 1


def test_the_cache_key_names_the_read_out_and_its_settings() -> None:
    """Two models that differ only in their read-out or its settings never share a cache entry, and the
    same read-out gives the same key."""
    body = decision_body(ITEM)
    base = {"id": "m", "model": "openai/x", "kind": "decision", "api_base": "http://127.0.0.1:1/v1"}
    keys = [
        cache_key(ModelSpec(**base, readout=readout), "decision", body)  # type: ignore[arg-type]
        for readout in (
            None,
            {"method": "token"},
            {"method": "token", "top_logprobs": 40},
            {"method": "token", "shuffle_seed": 1},
            {"method": "likelihood"},
            {"method": "likelihood", "score": "mean"},
        )
    ]
    assert len(set(keys)) == len(keys)
    again = cache_key(ModelSpec(**base, readout={"method": "token"}), "decision", body)  # type: ignore[arg-type]
    assert again == keys[1]


def test_a_shuffled_question_is_shown_in_one_seeded_order_and_answered_by_name() -> None:
    """With ``shuffle_seed`` the options are shown in an order drawn from the seed and the question (the
    same order every time), and the probabilities still belong to the options by name."""
    with scripted_server() as srv:
        first = _ask(_model(srv, "first", method="token", shuffle_seed=7))
        second = _ask(_model(srv, "first", method="token", shuffle_seed=7))
        shown = [b["messages"][-1]["content"] for b in srv.bodies("/v1/chat/completions")]
    assert shown[0] == shown[1] and shown[0] != _labelled_user("ABCDEFGH")
    assert first == second
    leading = shown[0].split("\nA. ", 1)[1].split(":", 1)[0]
    assert first["choice"] == leading  # the server prefers what is shown first, whatever it is
    assert first["readout"]["position"] == 0 and first["readout"]["shuffled"] is True


def test_a_readout_belongs_to_decision_models_only() -> None:
    """A read-out on an LLM is refused when the config is read."""
    with pytest.raises(ValueError, match="only decision models"):
        ModelSpec(id="m", model="openai/x", kind="llm", readout={"method": "token"})  # type: ignore[arg-type]


def test_a_models_extra_body_is_sent_beside_the_constraint_and_left_as_configured() -> None:
    """The model's own ``extra_body`` param goes out merged with the label constraint on every request,
    and the model's params are the same after the calls as before."""
    with scripted_server() as srv:
        model = ModelSpec(
            id="m",
            model="openai/first",
            kind="decision",
            api_base=srv.base_url,
            params={"extra_body": {"top_k": 5}, "temperature": 0.5},
            readout={"method": "token", "server": "llama.cpp", "top_logprobs": 4},  # type: ignore[arg-type]
        )
        _ask(model)
        bodies = srv.bodies("/v1/chat/completions")
    assert len(bodies) == 3
    assert all(b["top_k"] == 5 and b["temperature"] == 0.5 and "grammar" in b for b in bodies)
    assert model.params == {"extra_body": {"top_k": 5}, "temperature": 0.5}


@pytest.mark.parametrize("method", ["token", "likelihood"])
def test_a_read_out_answered_by_another_model_is_no_answer(method: str) -> None:
    """A read-out's replies that name another model than the one asked raise ``OtherModel`` in the client,
    as every other call's do: never recorded, never cached; the same server naming the model asked answers."""

    async def call(model: ModelSpec) -> dict[str, Any]:
        client = ModelClient(Limiters([model]), Secrets([model]), max_tries=1)
        return (await client.call(model, "decision", decision_body(ITEM))).response

    with scripted_server() as srv:
        assert anyio.run(call, _model(srv, "first", method=method))["choice"] is not None
        with pytest.raises(OtherModel, match="someone-else"):
            anyio.run(call, _model(srv, "impostor", method=method))
