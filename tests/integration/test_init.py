"""``knowwhen init`` as a newcomer meets it: in a fresh folder it writes a config the schema in ``schemas/``
accepts, that ``plan`` and ``run`` take as written (offline, on the suite's local server) and that
finishes with the models asked for; on a terminal with no flags it asks; it never overwrites a file.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from knowwhen_runner.config import load_config
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen

pytestmark = pytest.mark.slow

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.json"
MODELS = ["lexical", "agent-sim"]


def _ok(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = knowwhen(*args, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def fresh(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A fresh folder where init wrote sweep.yaml (two served models, an L2 set and L3 tasks, 3 each), then
    plan and run ran it."""
    folder = tmp_path_factory.mktemp("fresh")
    flags = [f"--model={m}" for m in MODELS] + ["--scenario=common", "--scenario=l3-common", "--limit=3"]
    wrote = _ok("init", *flags, f"--base-url={serve.base_url}", cwd=folder)
    planned = _ok("plan", "sweep.yaml", "--json", cwd=folder)
    ran = _ok("run", "sweep.yaml", "-q", "--no-probe", cwd=folder)
    return {"folder": folder, "wrote": wrote.stdout, "plan": json.loads(planned.stdout), "run": ran.stdout}


def test_the_written_config_is_valid_against_the_config_schema(fresh: dict[str, Any]) -> None:
    """sweep.yaml holds what was asked and passes schemas/config.schema.json."""
    document = yaml.safe_load((fresh["folder"] / "sweep.yaml").read_text())
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))
    assert [m["id"] for m in document["models"]] == MODELS
    assert [s["id"] for s in document["scenarios"]] == ["common", "l3-common"]
    assert document["modes"] == ["llm", "model"] and document["output"] == "results/sweep"
    assert "next: knowwhen plan sweep.yaml, then knowwhen run sweep.yaml" in " ".join(fresh["wrote"].split())


@pytest.mark.journey("init.next")
def test_plan_and_run_take_it_as_written_and_finish_with_the_models_asked(fresh: dict[str, Any]) -> None:
    """plan's cells and run's manifests are those of the two models; the run answered every job."""
    assert {cell["model"] for cell in fresh["plan"]["cells"]} == set(MODELS)
    assert {cell["scenario"] for cell in fresh["plan"]["cells"]} == {"common", "l3-common"}
    out = fresh["folder"] / "results" / "sweep"
    assert {p.name.removesuffix(".cxs.json") for p in (out / "manifests").glob("*.cxs.json")} == set(MODELS)
    assert "failed 0" in fresh["run"] and f"queue: done {fresh['plan']['jobs']}\n" in fresh["run"]


def test_init_refuses_to_overwrite_a_file(tmp_path: Path) -> None:
    """An existing file is left as it is: exit 2 and one sentence naming it."""
    (tmp_path / "sweep.yaml").write_text("mine\n")
    done = knowwhen("init", "--model=lexical", cwd=tmp_path)
    assert done.returncode == 2 and (tmp_path / "sweep.yaml").read_text() == "mine\n"
    said = done.stderr.strip().splitlines()
    assert len(said) == 1 and "sweep.yaml exists already" in said[0], done.stderr


def test_gated_adds_the_gate_and_a_fit_set_and_plans(tmp_path: Path) -> None:
    """Mode gated: the open loop is gated against the LLM, and the L3 scenario gets a fit set whose shadow
    episodes fit τ; plan takes it (the gated episodes wait for the fit)."""
    flags = ["--model=prior", "--model=agent-sim", "--scenario=shift-nosurf", "--scenario=l3-hard"]
    _ok("init", "g.yaml", *flags, "--mode=model", "--mode=llm", "--mode=gated", "--limit=2", cwd=tmp_path)
    config = load_config(tmp_path / "g.yaml")
    assert config.gate is not None and config.gate.llm == "agent-sim"
    assert [s.id for s in config.scenarios] == ["shift-nosurf", "l3-hard-fit", "l3-hard"]
    assert config.scenarios[0].variant == "nosurf" and config.serve is not None
    cells = json.loads(_ok("plan", "g.yaml", "--json", cwd=tmp_path).stdout)["cells"]
    assert {(c["model"], c["mode"], c["scenario"]) for c in cells} >= {("prior", "shadow", "l3-hard-fit")}


def test_on_a_terminal_with_no_flags_it_asks(tmp_path: Path) -> None:
    """Run on a terminal with no flags, init asks for models, scenarios, modes and the run folder."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "80"}
    command = [sys.executable, "-m", "knowwhen_runner", "init", "asked.yaml"]
    child = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, cwd=tmp_path, env=env)
    os.close(follower)
    os.write(leader, b"lexical, lexical-llm\nshift\nmodel llm\nruns/first\n")
    said = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closes with the child
            break
        if not chunk:
            break
        said += chunk
    os.close(leader)
    assert child.wait(timeout=120) == 0, said.decode(errors="replace")
    for question in ("Models", "Scenarios", "Modes", "Run folder"):
        assert question.encode() in said
    config = load_config(tmp_path / "asked.yaml")
    assert [m.id for m in config.models] == ["lexical", "lexical-llm"]
    assert [s.id for s in config.scenarios] == ["shift"] and config.modes == ["model", "llm"]
    assert config.output == (tmp_path / "runs" / "first").resolve()
