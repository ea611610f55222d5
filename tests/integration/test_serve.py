"""The local model server over real loopback HTTP: raw httpx, and litellm as the runner uses it.

How litellm 1.110.2 surfaces each injected fault (the runner's error classifier relies on this):

    fault            asystemone (hosted_vllm/...)            acompletion (openai/..., max_retries=0)
    429              RateLimitError (Retry-After in headers)  RateLimitError
    529              APIError, status_code 529                APIError, status_code 529
    500              InternalServerError                      InternalServerError
    503              ServiceUnavailableError                  ServiceUnavailableError
    malformed        InternalServerError                      InternalServerError
    reset            APIConnectionError                       InternalServerError ("Connection error.")
    slow > timeout   Timeout                                  Timeout
    unknown model    NotFoundError                            NotFoundError
    no_confidence    InternalServerError                      (no confidence in chat: answered normally)
    bad_choice       no error: the choice is passed through    no error: the tool name is passed through
    bad_probs        no error: probabilities passed through    (no probabilities in chat)
    missing_answer   no error: the name is absent in answers   no error: the message has no tool_calls

``acompletion`` with the openai provider retries 429/5xx/connection errors twice by itself unless given
``max_retries=0`` (three requests reach the server); ``asystemone`` never retries.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from typing import Any

import anyio
import httpx
import litellm  # after knowwhen_runner, which tests/conftest.py imports first: no network for its prices
import orjson
import pytest

from knowwhen_runner.exceptions import ServeError
from knowwhen_runner.serve import (
    FaultRule,
    ServerProcess,
    parse_fault_spec,
    parse_rpm_spec,
    start_server_process,
)
from tests.helpers import knowwhen

litellm.suppress_debug_info = True

pytestmark = pytest.mark.anyio

STATE = (
    "TASK: Please cancel my order 4411, I no longer need it.\n"
    "HISTORY:\nfind_customer(email='ann@example.com') -> customer 17\n"
    "CURRENT OBSERVATION:\nOrder 4411 is pending and can still be cancelled."
)
CRITERIA: dict[str, str | None] = {
    "find_customer": "Look up a customer by e-mail.",
    "cancel_order": "Cancel a pending order.",
    "ship_order": "Ship an order to the customer's address.",
    "ask_user": None,
}
QUESTIONS = {
    "next_tool": {
        "type": "choice",
        "instructions": "Which tool should the agent call next?",
        "criteria": CRITERIA,
    }
}
BODY = {"model": "lexical", "state": STATE, "questions": QUESTIONS}
TOOLS = [
    {
        "type": "function",
        "function": {"name": n, "description": d or "", "parameters": {"type": "object", "properties": {}}},
    }
    for n, d in CRITERIA.items()
]
MESSAGES = [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "Cancel my order 4411."},
]


@pytest.fixture
def anyio_backend() -> str:
    """Run async tests on asyncio only (litellm is asyncio-based)."""
    return "asyncio"


def _post(server: ServerProcess, body: Any = BODY, path: str = "/v1/systemone") -> httpx.Response:
    return httpx.post(server.base_url + path, json=body, timeout=10)


async def _systemone(server: ServerProcess, **kwargs: Any) -> Any:
    return await litellm.asystemone(
        model="hosted_vllm/lexical",
        state=STATE,
        questions=QUESTIONS,
        api_base=server.base_url,
        timeout=10,
        **kwargs,
    )


async def _chat(server: ServerProcess, **kwargs: Any) -> Any:
    args: dict[str, Any] = {"tool_choice": "required", "timeout": 10, "max_retries": 0, **kwargs}
    return await litellm.acompletion(
        model="openai/lexical-llm",
        api_base=server.base_url + "/v1",
        api_key="x",
        messages=MESSAGES,
        tools=TOOLS,
        **args,
    )


# -- answers -------------------------------------------------------------------------------------


async def test_systemone_round_trip_through_litellm(server: ServerProcess) -> None:
    """litellm.asystemone gets a choice among the options, probabilities summing to 1, the matching tool first."""
    response = await _systemone(server)
    answer = response.answers["next_tool"]
    assert set(answer.probabilities) == set(CRITERIA)
    assert sum(answer.probabilities.values()) == pytest.approx(1.0)
    assert answer.choice == "cancel_order"
    k, top = len(CRITERIA), answer.probabilities["cancel_order"]
    assert answer.confidence == pytest.approx((top - 1 / k) / (1 - 1 / k))  # the vendor's documented formula
    assert response.usage.input_tokens > 0


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/"])
async def test_litellm_reaches_systemone_with_or_without_v1(server: ServerProcess, suffix: str) -> None:
    """litellm strips a trailing /v1 from api_base and posts to {base}/v1/systemone, so both spellings work."""
    response = await litellm.asystemone(
        model="hosted_vllm/lexical", state=STATE, questions=QUESTIONS, api_base=server.base_url + suffix
    )
    assert response.answers["next_tool"].choice == "cancel_order"
    assert server.count(model="lexical", endpoint="systemone", status=200) == 1


def test_systemone_answers_are_deterministic_and_path_aliases_agree(server: ServerProcess) -> None:
    """The same request gives the same bytes, on /v1/systemone and on /systemone."""
    first, second, alias = _post(server), _post(server), _post(server, path="/systemone")
    assert first.status_code == second.status_code == alias.status_code == 200
    assert first.json()["answers"] == second.json()["answers"] == alias.json()["answers"]


def test_noul_question_gets_a_minimal_answer(server: ServerProcess) -> None:
    """A noul question is answered with a probability in [0, 1]."""
    body = {**BODY, "questions": {"done": {"type": "noul", "instructions": "Is the order cancelled?"}}}
    answer = _post(server, body).json()["answers"]["done"]
    assert answer["type"] == "noul" and 0.0 <= answer["noul"] <= 1.0


def test_state_as_json_object_is_accepted(server: ServerProcess) -> None:
    """A state given as a JSON object (not a string) is scored as its JSON text."""
    body = {**BODY, "state": {"task": "cancel my order", "observation": "order pending"}}
    answer = _post(server, body).json()["answers"]["next_tool"]
    assert answer["choice"] == "cancel_order"


async def test_chat_completion_through_litellm_returns_one_tool_call(server: ServerProcess) -> None:
    """litellm.acompletion parses the reply: one tool call naming the best-matching tool, finish_reason tool_calls."""
    response = await _chat(server)
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "cancel_order" and call.function.arguments == "{}"
    assert response.usage.prompt_tokens > 0


async def test_chat_named_tool_choice_is_obeyed(server: ServerProcess) -> None:
    """A tool_choice naming a function makes the model call that function."""
    forced = {"type": "function", "function": {"name": "ask_user"}}
    response = await _chat(server, tool_choice=forced)
    assert response.choices[0].message.tool_calls[0].function.name == "ask_user"


def test_models_and_health(server: ServerProcess) -> None:
    """/v1/models lists the reference models in OpenAI's and the vendor's shape, and /health answers."""
    listed = httpx.get(server.base_url + "/v1/models").json()
    ids = {m["id"] for m in listed["data"]}
    assert {"lexical", "lexical-llm", "jev-latest"} <= ids == {m["name"] for m in listed["models"]}
    assert all(m["description"] and m["release_date"] for m in listed["models"])
    assert httpx.get(server.base_url + "/health").json() == {"status": "ok", "instance": None}


async def test_unknown_model_is_404_with_vendor_error_body(server: ServerProcess) -> None:
    """An unknown model name is a 404 with the System One vendor's error body; litellm raises NotFoundError."""
    response = _post(server, {**BODY, "model": "no-such-model"})
    assert response.status_code == 404
    assert response.json()["detail"]["error_type"] == "not_found_error"
    with pytest.raises(litellm.NotFoundError):
        await litellm.asystemone(
            model="hosted_vllm/no-such-model", state=STATE, questions=QUESTIONS, api_base=server.base_url
        )


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        orjson.dumps({"model": "lexical", "state": "x"}),
        orjson.dumps({**BODY, "questions": {"q": {"type": "choice", "criteria": {}}}}),
    ],
)
def test_invalid_body_is_422(server: ServerProcess, body: bytes) -> None:
    """Bodies that are not JSON, lack questions or have empty criteria get 422 with the vendor's detail list."""
    response = httpx.post(server.base_url + "/v1/systemone", content=body)
    assert response.status_code == 422
    (detail,) = response.json()["detail"]
    assert detail["loc"][0] == "body" and detail["msg"] and detail["type"]


async def test_litellm_maps_a_systemone_422_to_bad_request(server: ServerProcess) -> None:
    """A System One validation error (422, vendor body) reaches asystemone as BadRequestError."""
    with pytest.raises(litellm.BadRequestError):
        await litellm.asystemone(
            model="hosted_vllm/lexical",
            state=STATE,
            questions={"q": {"type": "score", "criteria": ["only one level"]}},
            api_base=server.base_url,
        )


def test_chat_errors_stay_openai_shaped(server: ServerProcess) -> None:
    """Chat completions keep OpenAI's error body (litellm's openai provider reads it), unknown model included."""
    chat = {"model": "no-such-model", "messages": MESSAGES}
    response = _post(server, chat, "/v1/chat/completions")
    assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"


def test_an_unknown_route_and_the_404_echo_fault_say_the_url_as_sent(server: ServerProcess) -> None:
    """A 404 for an unknown route, and the ``404_echo`` fault on a known one, echo the URL with its path
    still percent-encoded and its query, as gateways do (the runner's redaction is tested against it)."""
    unknown = httpx.post(server.base_url + "/Se%20cret%7Cpath/v1/chat/completions?sig=a%2Bb", json={})
    assert unknown.status_code == 404
    url = f"{server.base_url}/Se%20cret%7Cpath/v1/chat/completions?sig=a%2Bb"
    assert unknown.json()["error"]["message"] == f"No route POST {url}."
    server.set_faults([{"fault": "404_echo", "count": 1}])
    echoed = httpx.post(server.base_url + "/v1/systemone?deployment=Qu%C3%A9t", json=BODY, timeout=10)
    assert echoed.status_code == 404 and f"{server.base_url}/v1/systemone?deployment=Qu%C3%A9t" in echoed.text
    assert _post(server).status_code == 200


# -- faults: raw HTTP ----------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["429", "529", "500", "503"])
@pytest.mark.parametrize("retry_after", [None, 2])
def test_http_fault_status_and_retry_after(
    server: ServerProcess, fault: str, retry_after: int | None
) -> None:
    """Status faults answer with their status, and Retry-After only when the rule gives one."""
    server.set_faults([{"fault": fault, "count": 1, "retry_after": retry_after}])
    response = _post(server)
    assert response.status_code == int(fault)
    assert response.headers.get("retry-after") == (None if retry_after is None else str(retry_after))
    assert _post(server).status_code == 200


def test_count_rule_fires_that_many_times_then_stops(server: ServerProcess) -> None:
    """A count=2 rule hits the next two matching requests only, and reports what is left."""
    server.set_faults([{"fault": "500", "count": 2}])
    assert [_post(server).status_code for _ in range(3)] == [500, 500, 200]
    assert httpx.get(server.base_url + "/admin/faults").json()[0]["remaining"] == 0


@pytest.mark.slow
def test_probability_rule_is_seeded(server: ServerProcess) -> None:
    """A probability rule with the same seed hits the same requests each time it is installed."""
    runs = []
    for _ in range(2):
        server.set_faults([{"fault": "503", "probability": 0.5, "seed": 7}])
        runs.append([_post(server).status_code for _ in range(20)])
    assert runs[0] == runs[1] and 0 < runs[0].count(503) < 20


def test_rules_filter_by_model_and_endpoint(server: ServerProcess) -> None:
    """A rule for the chat endpoint leaves System One alone; one for another model leaves lexical alone."""
    server.set_faults([{"fault": "500", "endpoint": "chat"}, {"fault": "500", "model": "other"}])
    assert _post(server).status_code == 200
    chat = {"model": "lexical-llm", "messages": MESSAGES, "tools": TOOLS}
    assert _post(server, chat, "/v1/chat/completions").status_code == 500


def test_slow_delays_then_answers(server: ServerProcess) -> None:
    """slow waits delay_s and then answers normally."""
    server.set_faults([{"fault": "slow", "count": 1, "delay_s": 0.3}])
    started = time.perf_counter()
    response = _post(server)
    assert time.perf_counter() - started >= 0.3 and response.status_code == 200


def test_malformed_is_200_with_invalid_json(server: ServerProcess) -> None:
    """malformed answers 200 with a body that is not JSON."""
    server.set_faults([{"fault": "malformed", "count": 1}])
    response = _post(server)
    assert response.status_code == 200
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(response.content)


def test_reset_drops_the_connection_without_a_response(server: ServerProcess) -> None:
    """reset closes the connection before any response byte; the server keeps serving afterwards."""
    server.set_faults([{"fault": "reset", "count": 1}])
    with pytest.raises(httpx.RemoteProtocolError):
        _post(server)
    assert _post(server).status_code == 200
    assert server.count(status=0) == 1


def test_answer_faults_raw(server: ServerProcess) -> None:
    """bad_choice, bad_probs, missing_answer and no_confidence corrupt the answer in their named way."""
    answers = {}
    for fault in ("bad_choice", "bad_probs", "missing_answer", "no_confidence"):
        server.set_faults([{"fault": fault, "count": 1}])
        answers[fault] = _post(server).json()["answers"]
    assert answers["bad_choice"]["next_tool"]["choice"] not in CRITERIA
    assert sum(answers["bad_probs"]["next_tool"]["probabilities"].values()) == pytest.approx(0.5)
    assert "next_tool" not in answers["missing_answer"]
    assert "confidence" not in answers["no_confidence"]["next_tool"]


def test_fault_rules_are_validated(server: ServerProcess) -> None:
    """An unknown fault kind, or count together with probability, is refused with 422."""
    for rules in ([{"fault": "418"}], [{"fault": "500", "count": 1, "probability": 0.5}]):
        assert httpx.post(server.base_url + "/admin/faults", json=rules).status_code == 422


# -- faults: as litellm surfaces them ------------------------------------------------------------

SYSTEMONE_ERRORS = {
    "429": "RateLimitError",
    "529": "APIError",
    "500": "InternalServerError",
    "503": "ServiceUnavailableError",
    "malformed": "InternalServerError",
    "reset": "APIConnectionError",
    "no_confidence": "InternalServerError",
}
CHAT_ERRORS = {**SYSTEMONE_ERRORS, "reset": "InternalServerError"}
del CHAT_ERRORS["no_confidence"]


@pytest.mark.parametrize(("fault", "error"), sorted(SYSTEMONE_ERRORS.items()))
async def test_litellm_systemone_exception_per_fault(server: ServerProcess, fault: str, error: str) -> None:
    """Each fault reaches asystemone as the litellm exception listed in the module docstring."""
    server.set_faults([{"fault": fault, "count": 1, "retry_after": 3}])
    with pytest.raises(getattr(litellm, error)) as caught:
        await _systemone(server)
    assert type(caught.value).__name__ == error
    if fault in ("429", "529"):
        assert caught.value.status_code == int(fault)
        assert caught.value.litellm_response_headers.get("retry-after") == "3"
    assert server.count() == 1


@pytest.mark.parametrize(("fault", "error"), sorted(CHAT_ERRORS.items()))
async def test_litellm_chat_exception_per_fault(server: ServerProcess, fault: str, error: str) -> None:
    """Each fault reaches acompletion (max_retries=0) as the litellm exception listed in the module docstring."""
    server.set_faults([{"fault": fault, "count": 1, "endpoint": "chat"}])
    with pytest.raises(getattr(litellm, error)) as caught:
        await _chat(server)
    assert type(caught.value).__name__ == error
    assert server.count() == 1


async def test_litellm_passes_bad_answers_through(server: ServerProcess) -> None:
    """litellm does not check choices or probabilities, and leaves a missing answer out: the runner must."""
    server.set_faults([{"fault": "bad_choice", "count": 1}])
    assert (await _systemone(server)).answers["next_tool"].choice not in CRITERIA
    server.set_faults([{"fault": "bad_probs", "count": 1}])
    assert sum((await _systemone(server)).answers["next_tool"].probabilities.values()) == pytest.approx(0.5)
    server.set_faults([{"fault": "missing_answer", "count": 1}])
    assert "next_tool" not in (await _systemone(server)).answers
    server.set_faults([{"fault": "bad_choice", "count": 1}])
    assert (await _chat(server)).choices[0].message.tool_calls[0].function.name not in CRITERIA


async def test_litellm_timeout_on_slow_reply(server: ServerProcess) -> None:
    """A reply slower than the caller's timeout surfaces as litellm.Timeout."""
    server.set_faults([{"fault": "slow", "count": 1, "delay_s": 1.0}])
    with pytest.raises(litellm.Timeout):
        await litellm.asystemone(
            model="hosted_vllm/lexical",
            state=STATE,
            questions=QUESTIONS,
            api_base=server.base_url,
            timeout=0.2,
        )
    # The server still answers the abandoned request 1 s in; wait for it, so the next test's counts hold
    # only its own requests (on a loaded machine they could otherwise take longer than that second).
    for _ in range(600):  # 30 s at most
        if server.count() >= 1:
            break
        await anyio.sleep(0.05)
    assert server.count() == 1


# -- stats and rate limits -----------------------------------------------------------------------


def test_stats_count_requests_and_reset(server: ServerProcess) -> None:
    """Stats count requests per model, endpoint and status, keep timestamped records, and reset to zero."""
    started = time.time()
    server.set_faults([{"fault": "429", "count": 1}])
    statuses = [_post(server).status_code for _ in range(3)]
    _post(server, {**BODY, "model": "nope"})
    assert statuses == [429, 200, 200]
    stats = server.stats()
    assert stats["total"] == 4
    assert {(r["model"], r["status"], r["count"]) for r in stats["counts"]} == {
        ("lexical", 429, 1),
        ("lexical", 200, 2),
        ("nope", 404, 1),
    }
    assert all(
        started <= ts <= time.time() and endpoint == "systemone" for ts, _, endpoint, _ in stats["records"]
    )
    assert len(server.stats(since=time.time() + 1)["records"]) == 0
    server.reset_stats()
    assert server.stats() == {"total": 0, "counts": [], "encodings": {}, "body_bytes": {}, "records": []}


def test_stats_count_request_body_bytes_per_path(server: ServerProcess) -> None:
    """Stats add up the bytes of every POSTed model request body per path, so two clients' requests can be
    compared in size; admin calls are not counted."""
    server.reset_stats()
    sizes = [len(_post(server).request.content) for _ in range(3)]
    assert server.stats(records=False)["body_bytes"] == {"/v1/systemone": {"bodies": 3, "bytes": sum(sizes)}}


async def test_enforced_rpm_returns_429_past_the_limit(server: ServerProcess) -> None:
    """With 3 requests/min enforced for lexical, the 4th is a 429 with Retry-After; other models are free."""
    server.set_rpm_limits({"lexical": 3})
    assert [_post(server).status_code for _ in range(3)] == [200, 200, 200]
    refused = _post(server)
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 60
    with pytest.raises(litellm.RateLimitError):
        await _systemone(server)
    assert (await _chat(server)).choices[0].message.tool_calls
    server.set_rpm_limits({})
    assert _post(server).status_code == 200


# -- process and command line --------------------------------------------------------------------


def test_command_line_faults_and_rpm() -> None:
    """--fault and --enforce-rpm apply from the first request; a faulted request still uses a rate-limit slot."""
    args = ["--fault", "503:count=1:retry_after=1", "--enforce-rpm", "lexical=2"]
    with start_server_process(extra_args=args) as process:
        statuses = [_post(process).status_code for _ in range(4)]
    assert statuses == [503, 200, 429, 429]
    assert not process.alive()


@pytest.mark.slow
def test_start_failure_raises_serve_error() -> None:
    """A server that cannot start raises ServeError with the reason, instead of hanging."""
    with pytest.raises(ServeError, match="exited at start"):
        start_server_process(extra_args=["--fault", "teapot"], timeout=10)


def test_module_entry_point_help() -> None:
    """python -m knowwhen_runner.serve --help documents the flags."""
    result = subprocess.run(
        [sys.executable, "-m", "knowwhen_runner.serve", "--help"], capture_output=True, text=True, check=True
    )
    assert "--fault" in result.stdout and "--enforce-rpm" in result.stdout


def test_fault_and_rpm_specs_parse() -> None:
    """The --fault and --enforce-rpm flag syntax maps onto rule fields and a (model, rpm) pair."""
    rule = parse_fault_spec("429:count=20:retry_after=1:model=lexical")
    assert (
        rule.model_dump() == FaultRule(fault="429", count=20, retry_after=1.0, model="lexical").model_dump()
    )
    assert parse_fault_spec("slow:delay_s=0.5:probability=0.1").probability == 0.1
    assert parse_rpm_spec("hosted_vllm/lexical=600") == ("hosted_vllm/lexical", 600)
    with pytest.raises(ValueError):
        parse_fault_spec("429:count")


def test_serve_on_a_taken_port_says_so_and_does_not_claim_to_serve() -> None:
    """`knowwhen serve --port P` while another process listens on P exits 2 saying the port is taken,
    without first printing the URL it would serve on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = knowwhen("serve", "--port", str(port), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"port {port} on 127.0.0.1 is taken" in " ".join(done.stderr.split()), done.stderr
    assert "knowwhen serve on" not in done.stdout and "Traceback" not in done.stderr
