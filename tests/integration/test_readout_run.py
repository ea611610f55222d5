"""A sweep of read-out models end to end: answers, manifest diagnostics, position bias, cache on rerun."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import knowwhen, make_question_set, read_answers, write_config
from tests.readout_server import scripted_server

pytestmark = pytest.mark.slow


def test_a_shuffled_read_out_measures_a_first_option_preference_and_reruns_from_the_cache(
    tmp_path: Path,
) -> None:
    """On a server that always prefers the option shown first, a shuffled token read-out answers every
    question validly, its manifest shows it picked the first shown option every time against 1/8
    expected, the likelihood read-out of the same served model is compared with it question by question,
    and a rerun answers everything from the cache."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)  # 18 questions of 8 options
    with scripted_server() as srv:
        models = [
            {
                "id": "tok",
                "model": "openai/first",
                "kind": "decision",
                "api_base": srv.base_url,
                "readout": {"method": "token", "server": "llama.cpp", "top_logprobs": 20, "shuffle_seed": 11},
            },
            {
                "id": "lik",
                "model": "openai/first",
                "kind": "decision",
                "api_base": srv.base_url,
                "readout": {"method": "likelihood", "score": "mean"},
            },
        ]
        config = write_config(tmp_path / "c.yaml", srv.base_url, scenario, models=models, modes=["model"])
        first = knowwhen("run", str(config), "-q")
        assert first.returncode == 0, first.stderr
        sent = len(srv.received)
        second = knowwhen("run", str(config), "-q")
        assert second.returncode == 0, second.stderr
        assert len(srv.received) == sent == 18 * 2  # one request a question each, none on the rerun
    out = tmp_path / "out"
    rows = read_answers(out / "qs" / "answers_tok.jsonl.gz")
    assert len(rows) == 18 and all(r["valid"] for r in rows)
    tok = json.loads((out / "manifests" / "tok.cxs.json").read_text())
    readout = tok["readout"]
    assert tok["schema_version"] == 8
    assert readout["answers"] == 18 and readout["invalid"] == 0
    assert readout["position_bias"]["first_shown_rate"] == 1.0
    assert readout["position_bias"]["first_shown_expected"] == pytest.approx(1 / 8)
    assert readout["settings"]["shuffle_seed"] == 11
    (versus,) = readout["agreement"]
    assert versus["model"] == "lik" and versus["method"] == "likelihood" and versus["questions"] == 18
    # The likelihood read-out is not shuffled: it always picks the first listed option, the shuffled
    # token read-out whatever the shuffle put first, so they disagree wherever that is another option.
    assert 0 < versus["disagree"] < 18
    lik = json.loads((out / "manifests" / "lik.cxs.json").read_text())["readout"]
    assert lik["position_bias"] is None and lik["sum_mean_disagree"] == 0
    assert (
        json.loads((out / "manifests" / "lik.cxs.json").read_text())["readout"]["agreement"][0]["disagree"]
        == versus["disagree"]
    )
