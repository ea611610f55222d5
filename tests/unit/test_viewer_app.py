"""The viewer's app in-process on a finished memory run: token, endpoints and a page with no network reference."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.results.episode_rows import EPISODE_ROW_SCHEMA_VERSION
from knowwhen_runner.view import RunData, viewer_app
from knowwhen_runner.view.app import TOKEN_HEADER, is_loopback
from knowwhen_runner.view.page import PAGE
from tests.golden.builders import finished_queue, small_config

LOCAL = "http://127.0.0.1:8780"


@pytest.fixture
def data(tmp_path: Path) -> RunData:
    config: SweepConfig = small_config(tmp_path)
    queue = anyio.run(finished_queue, config)
    return RunData(queue, given_config=config)


def test_beyond_loopback_every_request_needs_the_token(data: RunData) -> None:
    """With a token, requests without it or with a wrong one get 403; as a query param or header they pass."""
    client = TestClient(viewer_app(data, token="t0ken"))
    assert client.get("/").status_code == 403
    assert client.get("/api/live?token=wrong").status_code == 403
    assert client.get("/api/live?token=t0ken").status_code == 200
    assert client.get("/api/questions", headers={TOKEN_HEADER: "t0ken"}).status_code == 200
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")


def test_questions_are_judged_against_the_answer_key(data: RunData) -> None:
    """Each answer row is right exactly when its answer is an acceptable tool; the LLM's answer rides along."""
    client = TestClient(viewer_app(data), base_url=LOCAL)
    rows = client.get("/api/questions").json()["rows"]
    dm = [r for r in rows if r["model"] == "dm"]
    assert dm and {r["right"] for r in dm} == {True, False}
    unmatched = [r for r in dm if r["answer"] is not None and r["llm_answer"] is None]
    assert len(unmatched) == 1  # the one question whose LLM job failed for good
    one = next(r for r in dm if r["right"] is False and r["answer"] is not None)
    q: dict[str, Any] = client.get(
        "/api/question", params={"scenario": "qs", "model": "dm", "qhash": one["qhash"]}
    ).json()
    assert one["answer"] not in q["key"][0]["acceptable"] and q["llm_model"] == "llm"
    assert (
        client.get("/api/question", params={"scenario": "qs", "model": "dm", "qhash": "x"}).status_code == 404
    )


def test_live_counts_and_episodes(data: RunData) -> None:
    """Live reports every job by model and scenario; every recorded episode is listed with its steps."""
    client = TestClient(viewer_app(data), base_url=LOCAL)
    live = client.get("/api/live").json()
    assert live["done"] == sum(c["done"] + c["failed"] for c in live["cells"]) > 0
    episodes = client.get("/api/episodes").json()["rows"]
    assert len(episodes) == 11
    first = client.get("/api/episode", params={"id": episodes[0]["id"]}).json()
    assert (
        len(first["steps"]) == episodes[0]["steps"]
        and first["schema_version"] == EPISODE_ROW_SCHEMA_VERSION == 4
    )


def test_the_page_makes_no_network_reference() -> None:
    """The page loads nothing from elsewhere: no absolute URL, no protocol-relative src or href."""
    assert not re.search(r"https?://|(src|href)=\"//", PAGE)


def test_flipped_pairs_only_outcomes_that_changed() -> None:
    """A question flips when right in one run and wrong in the other; unjudged ones and unmatched ones do not."""
    from knowwhen_runner.view.compare import flipped

    def q(qhash: str, right: bool | None) -> dict[str, Any]:
        return {
            "scenario": "s",
            "model": "m",
            "qhash": qhash,
            "answer": "x",
            "confidence": 0.5,
            "right": right,
        }

    def e(task: str, success: bool) -> dict[str, Any]:
        return {"id": task, "scenario": "s", "model": "m", "mode": "gated", "task_id": task, "success": success,
                "by": ["model"]}  # fmt: skip

    out = flipped(
        (
            [q("a", True), q("b", True), q("c", None)],
            [q("a", False), q("b", True), q("c", False), q("d", False)],
        ),
        ([e("t1", True), e("t2", False)], [e("t1", True), e("t2", True), e("t3", False)]),
    )
    assert [r["qhash"] for r in out["questions"]] == ["a"]
    assert [(r["task_id"], r["a_success"], r["b_success"]) for r in out["episodes"]] == [("t2", False, True)]


def test_two_runs_need_a_second_run(data: RunData) -> None:
    """Without --compare the flips endpoint says how to get one; with the run twice nothing flipped."""
    assert TestClient(viewer_app(data), base_url=LOCAL).get("/api/flips").status_code == 404
    same = TestClient(viewer_app(data, other=data), base_url=LOCAL).get("/api/flips").json()
    assert same["questions"] == [] and same["episodes"] == [] and same["compared"][0] > 0


def _all_rows(client: TestClient, **params: str) -> list[dict[str, Any]]:
    """Every page of the questions list under ``params``, read page by page."""
    rows: list[dict[str, Any]] = []
    while True:
        page = client.get("/api/questions", params={**params, "limit": "7", "offset": str(len(rows))}).json()
        rows += page["rows"]
        if not page["rows"] or len(rows) >= page["total"]:
            assert len(rows) == page["total"]
            return rows


def test_question_filters_and_pages_give_true_answers(data: RunData) -> None:
    """Each filter lists exactly the rows of the unfiltered list it names, and pages add up to its total."""
    client = TestClient(viewer_app(data), base_url=LOCAL)
    every = _all_rows(client)
    first = client.get("/api/questions").json()
    assert first["total"] == first["answers"] == len(every) == len(first["rows"])
    assert first["options"]["model"] == ["dm", "llm"] and first["options"]["scenario"] == ["qs"]
    cases: list[tuple[dict[str, str], Any]] = [
        ({"model": "dm"}, lambda r: r["model"] == "dm"),
        ({"model": "dm", "right": "wrong"}, lambda r: r["model"] == "dm" and r["right"] is False),
        ({"right": "right"}, lambda r: r["right"] is True),
        (
            {"cmin": "0.5", "cmax": "0.8"},
            lambda r: r["confidence"] is not None and 0.5 <= r["confidence"] <= 0.8,
        ),
    ]
    strata = first["options"]["stratum"]
    assert strata == ["on_plan"]  # the small question set's one stratum
    cases += [
        ({"stratum": "on_plan"}, lambda r: r["stratum"] == "on_plan"),
        ({"stratum": "other"}, lambda r: False),
    ]
    for params, keep in cases:
        got = _all_rows(client, **params)
        assert got == [r for r in every if keep(r)], params
        assert client.get("/api/questions", params=params).json()["answers"] == len(every)
    worst = _all_rows(client, right="wrong", cmin="0.4", sort="confidence")
    wrong = [r for r in every if r["right"] is False and (r["confidence"] or 0) >= 0.4]
    assert worst and worst == sorted(wrong, key=lambda r: -r["confidence"])  # ties stay in question order


def test_live_flags_held_models_and_spend_comes_apart(data: RunData) -> None:
    """Live marks paused, quarantined and set-aside models from the run's controls; spend sums what every done job
    spent (a cache hit nothing)."""

    async def hold() -> float:
        await data.queue.holding.set_control("dm", "paused", "paused by hand")
        await data.queue.holding.set_control("llm", "quarantined", "HTTP 401: check LLM_KEY")
        await data.queue.holding.set_control("dm", "set_aside", "its requests surely fail (14 of 14 failed)")
        total = 0.0
        for _job, status, result, _error in await data.queue.results():
            if status != "done" or (result or {}).get("cache_hit"):
                continue
            cost = (result or {}).get("spent_usd", (result or {}).get("cost_usd")) or 0.0
            total += sum(cost.values()) if isinstance(cost, dict) else cost
        return total

    expected = anyio.run(hold)
    client = TestClient(viewer_app(data), base_url=LOCAL)
    live = client.get("/api/live").json()
    models = {m["model"]: m for m in live["models"]}
    assert models["dm"]["paused"] and not models["dm"]["quarantined"] and not models["llm"]["set_aside"]
    assert models["dm"]["set_aside_reason"] == "its requests surely fail (14 of 14 failed)"
    assert models["llm"]["quarantined"] and models["llm"]["quarantined_reason"] == "HTTP 401: check LLM_KEY"
    assert live["spend_usd"] is None  # not read yet: the page asks for it after painting
    spend = client.get("/api/spend").json()
    assert expected > 0 and spend["spend_usd"] == pytest.approx(expected)
    assert client.get("/api/live").json()["spend_usd"] == pytest.approx(expected)


def test_filtered_lists_kept_do_not_push_out_the_spend(data: RunData) -> None:
    """Lists read for many filters are kept a few at a time, apart from the spend the live view shows."""
    client = TestClient(viewer_app(data), base_url=LOCAL)
    spent = client.get("/api/spend").json()["spend_usd"]
    for cmin in ("0.1", "0.2", "0.3", "0.4", "0.5"):
        assert client.get("/api/questions", params={"right": "wrong", "cmin": cmin}).status_code == 200
    assert client.get("/api/live").json()["spend_usd"] == spent
    assert sum(1 for key in data._kept if key[0] == "answers") == 2


def test_the_llms_answers_can_follow_the_list(data: RunData) -> None:
    """Asked with llm=later before the LLM's answers were read, a page comes without them and says so;
    asked again, it has them, and a later page asked that way has them at once."""
    client = TestClient(viewer_app(data), base_url=LOCAL)
    first = client.get("/api/questions", params={"model": "dm", "llm": "later"}).json()
    assert first["llm_pending"] and all(r["llm_answer"] is None for r in first["rows"])
    full = client.get("/api/questions", params={"model": "dm"}).json()
    assert not full["llm_pending"] and [r["qhash"] for r in full["rows"]] == [
        r["qhash"] for r in first["rows"]
    ]
    unmatched = [r for r in full["rows"] if r["answer"] is not None and r["llm_answer"] is None]
    assert len(unmatched) == 1  # the one question whose LLM job failed for good
    again = client.get("/api/questions", params={"model": "dm", "llm": "later"}).json()
    assert again["rows"] == full["rows"] and not again["llm_pending"]


@pytest.mark.parametrize("host", ["127.0.0.1:8780", "localhost:8780", "[::1]:8780", "localhost"])
def test_on_loopback_a_loopback_host_is_served(data: RunData, host: str) -> None:
    """Without a token, requests that name a loopback host (any port) are answered."""
    client = TestClient(viewer_app(data), base_url=LOCAL)
    assert client.get("/api/live", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example:8780", "evil.example", "127.0.0.1.evil.example", ""])
def test_on_loopback_another_host_is_refused(data: RunData, host: str) -> None:
    """A page that rebinds its own name to 127.0.0.1 sends that name as Host: refused with 403 (DNS rebinding)."""
    client = TestClient(viewer_app(data), base_url=LOCAL)
    refused = client.get("/api/questions", headers={"Host": host})
    assert refused.status_code == 403
    assert "loopback" in refused.text
