"""Journeys through the sentences of ``knowwhen_runner/messages.py`` that no other test follows: each test
drives the CLI into the situation, takes the step the printed sentence names (the command it prints, run
as printed) and checks what the sentence promised. Small runs on the suite's local server."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow

QUESTIONS = 9  # make_question_set(n_tasks=2)


def _said(done: Any) -> str:
    return " ".join((done.stdout + done.stderr).split())


def _edit(path: Path, **changes: Any) -> None:
    doc = yaml.safe_load(path.read_text())
    doc.update(changes)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.journey(
    "db.no_run",
    "worker.no_run",
    "finalize.no_run",
    "held.paused.worker",
    "worker.not_finalised_here",
    "compare.not_finalised",
    "export.not_finalised",
)
def test_a_worker_follows_its_steps_from_an_empty_database_to_a_finalised_run(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A worker on an empty database is told to run the config first, and with ``--run`` how to plan it;
    planned as told, it works the run, names a paused model's resume and the missing question set; the
    printed resume and a worker started again answer every job; compare and export name `knowwhen finalize`,
    which, where the files are, writes the results that both then read."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=2)
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    out = tmp_path / "out"
    out.mkdir()
    url = f"sqlite:///{out / 'knowwhen.db'}"
    worker = ("worker", "--db", url, "-q")

    empty = knowwhen(*worker)
    assert empty.returncode == 2 and f"{url}: the database has no run; run it first" in _said(empty), _said(
        empty
    )
    unplanned = knowwhen("finalize", str(config))
    assert unplanned.returncode == 2, _said(unplanned)
    assert f"{out}: the database has no run 't'; run it first" in _said(unplanned)
    named = knowwhen(*worker, "--run", "t")
    assert named.returncode == 2, _said(named)
    step = re.search(r"plan it with (knowwhen run CONFIG --db URL --plan-only)", _said(named))
    assert step is not None, _said(named)
    planned = knowwhen(*shlex.split(step[1].replace("CONFIG", str(config)).replace("URL", url))[1:])
    assert planned.returncode == 0 and "pending 18" in _said(planned), _said(planned)

    assert knowwhen("pause", str(out), "lexical").returncode == 0
    shutil.move(scenario, tmp_path / "elsewhere")  # a machine without the question set
    first = knowwhen(*worker)
    assert first.returncode == 0, _said(first)
    said = _said(first)
    assert f"queue: done {QUESTIONS}, pending {QUESTIONS}" in said, said
    assert f"not finalised here: {scenario} is not on this machine; run knowwhen finalize where it is" in said
    resume = re.search(
        r"its 9 jobs wait until it is resumed: (knowwhen resume .+?), then start a worker again", said
    )
    assert resume is not None, said
    assert "resumed lexical" in knowwhen(*shlex.split(resume[1])[1:]).stdout
    second = knowwhen(*worker)
    assert second.returncode == 0 and "queue: done 18" in _said(second), _said(second)
    assert "not finalised here" in _said(second) and not (out / "table.md").exists()

    shutil.move(tmp_path / "elsewhere", scenario)  # where the files are
    compared = knowwhen("compare", str(out), str(out))
    assert compared.returncode == 2, _said(compared)
    assert f"{out}: no CXS manifests (manifests/*.cxs.json); run `knowwhen finalize` on it" in _said(compared)
    exported = knowwhen("export", str(out), "--out", str(tmp_path / "exported"))
    assert exported.returncode == 2, _said(exported)
    assert f"{out}: no manifests; finalise the run first (knowwhen finalize)" in _said(exported)
    finalised = knowwhen("finalize", str(out))
    assert finalised.returncode == 0, _said(finalised)
    assert {"| lexical |", "| lexical-llm |"} <= set(
        re.findall(r"\| [\w-]+ \|", (out / "table.md").read_text())
    )
    assert knowwhen("compare", str(out), str(out)).returncode == 0
    assert knowwhen("export", str(out), "--out", str(tmp_path / "exported")).returncode == 0
    assert (tmp_path / "exported" / "README.md").is_file()
    assert knowwhen("finalize", str(config)).returncode == 0  # the config's finalize, told to run it first


@pytest.mark.journey("run.failed", "stage.fit_failed", "run.waiting_stage")
def test_failed_shadow_episodes_leave_the_gated_ones_waiting_until_a_retry_of_the_failed_jobs(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The agent answering 500 to everything, every shadow episode of the τ fit fails (exit 1): the run
    says the gated episodes wait for the fit because shadow episodes failed, and to rerun with
    --retry-failed once the cause is fixed; with the server fixed, that rerun answers them, fits τ and
    plays the gated episode (exit 0)."""
    base = server.base_url
    server.set_faults([{"fault": "500", "model": "agent-sim"}])
    config = {
        "name": "fit",
        "output": str(tmp_path / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base},
            {"id": "agent-sim", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base}/v1"},
        ],
        "modes": ["gated", "shadow"],
        "scenarios": [
            {"id": "fit", "kind": "episodes", "suite": "common", "split": "fit", "n": 2, "modes": []},
            {"id": "bench", "kind": "episodes", "suite": "common", "split": "bench", "n": 1,
             "tau": {"fit": "fit", "target": "llm"}},
        ],
        "workers": {"max_attempts": 1, "set_aside_error_rate": None},
    }  # fmt: skip
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    failed = knowwhen("run", str(path), "-q", "--no-probe")
    assert failed.returncode == 1, _said(failed)
    said = _said(failed)
    assert (
        "waiting: prior x gated x bench: waits for the τ fit on fit (some shadow episodes failed: "
        "rerun with --retry-failed)"
    ) in said, said
    assert re.search(r"3 jobs failed \(most common, 3 of them: HTTP 500 .+\); fix the cause and rerun with "
                     r"--retry-failed", said), said  # fmt: skip
    server.clear_faults()  # the cause fixed
    again = knowwhen("run", str(path), "-q", "--no-probe", "--retry-failed")
    assert again.returncode == 0, _said(again)
    assert "queue: done 4" in _said(again) and "waiting" not in _said(again)
    planned = _said(knowwhen("plan", str(path)))
    assert "0 still to do" in planned and "waits for the τ fit" not in planned, planned


@pytest.mark.journey("quarantine.other_model", "run.other_model_replies")
def test_a_model_answered_under_another_name_is_fixed_by_the_served_as_it_names(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The server answers its alias under the name of the model behind it: no reply is kept, the run says
    how many came from another model and quarantines the model naming the `served_as:` to add; added as
    printed, the same command answers every job."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=2)
    models = [
        {"id": "jev", "model": "hosted_vllm/jev-latest", "kind": "decision", "api_base": server.base_url}
    ]
    workers = {"max_attempts": 1, "concurrency": 2, "lease_seconds": 10}
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models, workers=workers)
    first = knowwhen("run", str(config), "-q", "--no-probe")
    assert first.returncode == 3, _said(first)
    said = _said(first)
    assert re.search(r"\d+ replies to jev came from another model \(not recorded, not cached;", said), said
    assert "quarantined jev: every try of a call got another model's reply" in said
    assert f"its {QUESTIONS} jobs stay pending" in said
    fix = re.search(r"add `served_as: (\S+)` to (\S+) in the config", said)
    assert fix is not None and fix[2] == "jev", said
    models[0]["served_as"] = fix[1]
    _edit(config, models=models)
    again = knowwhen("run", str(config), "-q", "--no-probe")
    assert again.returncode == 0, _said(again)
    assert f"queue: done {QUESTIONS}" in _said(again) and "another model" not in _said(again)


@pytest.mark.journey("progress.stated_limit")
def test_a_configured_rate_above_the_providers_stated_limit_is_named_until_lowered_to_it(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A provider stating 600 requests/min under a configured 6,000: the run says so and sends at 600;
    with rate_limit lowered to the stated figure, a run of the same sweep (into a fresh folder, so it
    calls) says nothing of it."""
    server.set_rpm_limits({"lexical": 600})
    scenario = make_question_set(tmp_path / "qs", n_tasks=2)
    models = [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": server.base_url,
            "rate_limit": {"requests_per_minute": 6000},
        }
    ]
    config = write_config(
        tmp_path / "c.yaml", server.base_url, scenario, models=models, cache={"policy": "off"}
    )
    first = knowwhen("run", str(config), "-q", "--no-probe")
    assert first.returncode == 0, _said(first)
    stated = re.search(
        r"lexical: its provider states a limit of ([\d,]+) requests/min, below the configured 6,000; sending "
        r"at \1 \(lower rate_limit in the config to match\)",
        _said(first),
    )
    assert stated is not None, _said(first)
    models[0]["rate_limit"] = {"requests_per_minute": int(stated[1].replace(",", ""))}
    _edit(config, models=models, output=str(tmp_path / "again"))
    again = knowwhen("run", str(config), "-q", "--no-probe")
    assert again.returncode == 0 and f"queue: done {QUESTIONS}" in _said(again), _said(again)
    assert "states a limit" not in _said(again)
    assert server.count(model="lexical", status=200) == 2 * QUESTIONS  # the second run called


@pytest.mark.journey("preflight.unknown_price", "plan.no_price")
def test_an_unpriced_model_under_a_budget_goes_once_it_has_the_pricing_line_printed(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Under a budget, a model reached by a name that is not loopback's and with no price: `plan` names the
    `pricing:` line to add and leaves it out of the sum; `plan --probe` is a no-go naming the entry.
    With the printed line's prices filled in, the model is a go and the forecast prices it."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=2)
    port = server.base_url.rsplit(":", 1)[1]
    models = [
        {"id": "far", "model": "openai/lexical-llm", "kind": "llm", "api_base": f"http://0.0.0.0:{port}/v1"}
    ]
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models, budget={"usd": 1.0})
    probed = knowwhen("plan", str(config), "--probe")
    assert probed.returncode == 2, _said(probed)
    said = _said(probed)
    assert (
        "far cannot go: its price is unknown (the run's budget cannot count what it spends): give far a "
        "`pricing:` entry in the config; fix it, or leave it out of this run with --skip-model far"
    ) in said, said
    line = re.search(
        r"no price for far: add to it in the config models: - id: far … (pricing: \{.+?\})", said
    )
    assert line is not None, said
    pricing = yaml.safe_load(line[1].replace("<USD>", "0.5"))["pricing"]
    assert pricing == {"input_per_million": 0.5, "output_per_million": 0.5}
    models[0]["pricing"] = pricing
    _edit(config, models=models)
    priced = knowwhen("plan", str(config), "--probe")
    assert priced.returncode == 0, _said(priced)
    assert "no price for" not in _said(priced) and "cannot go" not in _said(priced)
    assert "for the priced models" not in _said(priced)  # every model is in the sum
