"""`knowwhen serve` answers read-out requests for its reference models, and a sweep reads them out."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, with_named_probabilities

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
COMMON = ROOT / "scenarios" / "decisiongym" / "common"


def test_read_outs_of_a_reference_model_record_its_own_probabilities(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The likelihood read-out of ``prior`` records the probabilities ``prior`` gives through System One
    within 1e-6, and so does the token read-out where one request holds every option (8 options, 95 % of
    the first token's mass on the labels); over 69 options it asks four groups of at most 20 and their
    leaders (``prior`` smooths over the options it is shown, so the joined groups only approximate it)."""
    models = [
        {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": server.base_url},
        {
            "id": "prior-token",
            "model": "hosted_vllm/prior",
            "kind": "decision",
            "api_base": f"{server.base_url}/v1",
            "readout": {"method": "token", "server": "vllm", "top_logprobs": 20},
        },
        {
            "id": "prior-likelihood",
            "model": "hosted_vllm/prior",
            "kind": "decision",
            "api_base": f"{server.base_url}/v1",
            "readout": {"method": "likelihood", "server": "vllm"},
        },
    ]
    config = {
        "name": "serve-readout",
        "output": str(tmp_path / "out"),
        "models": models,
        "modes": ["model"],
        "scenarios": [
            {"id": "common", "path": str(COMMON), "limit": 12},
            {"id": "small", "path": str(make_question_set(tmp_path / "small", n_tasks=2))},
        ],
    }
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(config))
    done = knowwhen("run", str(path), "-q")
    assert done.returncode == 0, done.stderr
    rows = {
        (sc, m): {r["qhash"]: r for r in with_named_probabilities(p, read_answers(p))}
        for sc in ("common", "small")
        for m in ("prior", "prior-token", "prior-likelihood")
        for p in [tmp_path / "out" / sc / f"answers_{m}.jsonl.gz"]
    }
    asked = len(rows[("common", "prior")])  # limit: 12 draws whole tasks while their questions fit
    assert 1 <= asked <= 12 and len(rows[("small", "prior")]) == 9
    exact = [("common", "prior-likelihood"), ("small", "prior-likelihood"), ("small", "prior-token")]
    for sc, read_out in exact:
        for qhash, truth in rows[(sc, "prior")].items():
            row = rows[(sc, read_out)][qhash]
            assert row["valid"], row["error"]
            assert row["probabilities"] == pytest.approx(truth["probabilities"], abs=1e-6)
            assert row["answer"] == truth["answer"]
    assert all(r["valid"] for r in rows[("common", "prior-token")].values())
    token = json.loads((tmp_path / "out" / "manifests" / "prior-token.cxs.json").read_text())["readout"]
    assert token["label_mass_mean"] == pytest.approx(0.95)
    assert token["requests_per_answer"] == pytest.approx(
        (asked * 5 + 9 * 1) / (asked + 9)
    )  # 69 options: 4 groups + leaders
    (versus,) = token["agreement"]
    assert versus["model"] == "prior-likelihood" and versus["questions"] == asked + 9


def test_more_top_logprobs_than_the_server_returns_is_refused_as_vllm_does(server: ServerProcess) -> None:
    """A request for more top_logprobs than the server's cap is a 400 naming the cap; within it, the top
    list holds exactly as many entries as asked, best first."""
    user = "TASK: t\n\nWhich tool?\n\nOptions:\nA. find_order: Find an order.\nB. refund: Refund it.\n\nAnswer with the letter of one option only."
    body = {
        "model": "lexical",
        "messages": [{"role": "user", "content": user}],
        "logprobs": True,
        "max_tokens": 1,
    }
    refused = httpx.post(f"{server.base_url}/v1/chat/completions", json={**body, "top_logprobs": 21})
    assert refused.status_code == 400 and "(20)" in refused.json()["error"]["message"]
    reply = httpx.post(f"{server.base_url}/v1/chat/completions", json={**body, "top_logprobs": 2}).json()
    top = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    assert len(top) == 2 and top[0]["logprob"] >= top[1]["logprob"]
    assert {t["token"] for t in top} <= {"A", "B", "The"}
