"""Every next step the runner prints works when followed literally: after a pause, the resume it names
and then the rerun finish the run; `resume` of a model the run does not have names the ones it has; a
worker that stops on a held-back model says why; gated episodes said to wait for a τ fit are planned
once it is done, and `plan` of the finished run counts them; a screened-out model with nothing left is
not told to finish its jobs. More journeys: tests/integration/test_journeys.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = 18  # make_question_set(n_tasks=4)


def _said(done: Any) -> str:
    return " ".join(done.stdout.split())


def _two_models(folder: Path, base_url: str, second: str = "hosted_vllm/prior") -> Path:
    scenario = make_question_set(folder / "qs", n_tasks=4)
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base_url},
        {"id": "prior", "model": second, "kind": "decision", "api_base": base_url},
    ]
    return write_config(folder / "c.yaml", base_url, scenario, models=models)


@pytest.mark.journey("held.paused.run", "held.paused.status", "pause.unknown_model")
def test_after_a_pause_the_printed_steps_finish_the_run(server: ServerProcess, tmp_path: Path) -> None:
    """A run that ends with a model paused names `knowwhen resume` for it (status does too), and not a
    rerun alone, which would not ask its jobs; running the printed command and then the same command again
    answers every job. `resume` of an id the run does not have exits 2 naming the ids it has."""
    config = _two_models(tmp_path, server.base_url)
    out = tmp_path / "out"
    assert knowwhen("run", str(config), "-q", "--plan-only").returncode == 0
    assert "paused lexical" in knowwhen("pause", str(out), "lexical").stdout

    unknown = knowwhen("resume", str(out), "lexicl")
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert "the run has no model 'lexicl'; its models are lexical, prior" in unknown.stderr

    stopped = knowwhen("run", str(config), "-q", "--no-probe")
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    said = _said(stopped)
    assert f"paused lexical: its {QUESTIONS} jobs wait until it is resumed: knowwhen resume" in said
    assert "run the same command again to continue" not in said  # a rerun alone would not ask them
    status = " ".join(knowwhen("status", str(out)).stdout.split())
    assert f"knowwhen resume {out} lexical" in status, status

    step = re.search(r"knowwhen (resume \S+ \S+), then run the same command again", said)
    assert step is not None, said
    resumed = knowwhen(*shlex.split(step.group(1)))
    assert resumed.returncode == 0 and "resumed lexical" in resumed.stdout, resumed.stdout + resumed.stderr
    again = knowwhen("run", str(config), "-q", "--no-probe")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "queue: done 36" in _said(again)


def test_a_worker_that_stops_on_a_quarantined_model_says_so(server: ServerProcess, tmp_path: Path) -> None:
    """`knowwhen worker` over a run whose second model is a typo works the first and ends naming the
    quarantined model, what to fix and how many of its jobs stay pending (not only "not finalised")."""
    config = _two_models(tmp_path, server.base_url, second="hosted_vllm/priorr")
    assert knowwhen("run", str(config), "-q", "--plan-only").returncode == 0
    worker = knowwhen("worker", "--db", f"sqlite:///{tmp_path / 'out' / 'knowwhen.db'}", "-q")
    assert worker.returncode == 0, worker.stdout + worker.stderr
    said = _said(worker)
    assert f"queue: done {QUESTIONS}, pending {QUESTIONS}" in said
    assert "quarantined prior: the provider does not know the model 'hosted_vllm/priorr'" in said
    assert f"fix `model:` (or `api_base:`) of prior in the config; its {QUESTIONS} jobs stay pending" in said


@pytest.fixture(scope="module")
def fitted(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A finished run of a decision model and the simulated agent over 2 fit tasks (shadow) and 2 bench
    tasks in every mode, the gated ones at the τ their fit gives; and what `run --plan-only` and `plan`
    said of them before it."""
    folder = tmp_path_factory.mktemp("fitted")
    base = serve.base_url
    config = {
        "name": "fitted",
        "output": str(folder / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base},
            {"id": "agent-sim", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base}/v1"},
        ],
        "modes": ["llm", "model", "gated", "shadow"],
        "scenarios": [
            {"id": "fit", "kind": "episodes", "suite": "common", "split": "fit", "n": 2, "modes": []},
            {
                "id": "bench",
                "kind": "episodes",
                "suite": "common",
                "split": "bench",
                "n": 2,
                "tau": {"fit": "fit", "target": "llm"},
            },
        ],
    }
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    planned = knowwhen("run", str(path), "-q", "--plan-only")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    before = knowwhen("plan", str(path))
    assert before.returncode == 0, before.stdout + before.stderr
    done = knowwhen("run", str(path), "-q", "--no-probe")
    assert done.returncode == 0, done.stdout + done.stderr
    return path, _said(planned), _said(before)


@pytest.mark.journey("plan.waits_for_fit", "stage.fit_pending", "run.waiting_stage")
def test_plan_of_a_finished_run_counts_the_gated_episodes_its_fit_released(
    fitted: tuple[Path, str, str],
) -> None:
    """Before the fit, `run --plan-only` says the gated episodes wait for it and that a run plans them once
    the shadow episodes are done, and `plan` leaves them out of the forecast until then; once the run that
    follows is done, `plan` lists them as done and says nothing waits for the fit."""
    path, planned, before = fitted
    waits = "prior x gated x bench: waits for the τ fit on fit"
    assert (
        f"waiting: {waits} (its shadow episodes are not all done yet; any run or worker plans it once they are)"
    ) in planned, planned
    assert f"{waits}: these episodes are planned once the fit is done, and are not in the forecast" in before
    shown = knowwhen("plan", str(path))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    said = _said(shown)
    assert "waits for the τ fit" not in said and "planned once the fit is done" not in said, said
    assert re.search(r"│ prior\s+│ gated\s+│ bench\s+│\s+2 │\s+2 │", shown.stdout), shown.stdout
    assert "0 still to do" in said


def test_a_screened_out_model_with_nothing_left_is_not_told_to_finish_its_jobs(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A screen added to a finished run drops lexical with every job of it answered: the run names the
    screen's decision without "run again without screen:", which would ask nothing."""
    base = server.base_url
    config: dict[str, Any] = {
        "name": "screened",
        "output": str(tmp_path / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base},
            {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base},
        ],
        "modes": ["model"],
        "scenarios": [
            {"id": "common", "path": str(ROOT / "scenarios/decisiongym/common"), "limit": 60},
        ],
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert knowwhen("run", str(path), "-q", "--no-probe", "--no-finalize").returncode == 0
    config["screen"] = {"scenario": "common", "alpha": 0.05, "keep": {"top": 1}}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    screened = knowwhen("run", str(path), "-q", "--no-probe")
    assert screened.returncode == 0, screened.stdout + screened.stderr
    said = _said(screened)
    assert "lexical: screened out after 60 questions" in said, said
    assert "without screen" not in said
