"""The fleet finishes the whole run: ``run --plan-only`` plus a worker plans the gated episodes once the
shadow fit is done, as ``knowwhen run`` does, and the tables come out the same."""

from __future__ import annotations

from pathlib import Path

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen
from tests.integration.test_episodes import _models, _results, _tasks, _write


def _config(folder: Path, server: ServerProcess) -> Path:
    scenarios = [
        _tasks("fit", "fit", 6, modes=[]),
        _tasks("ev", "bench", 8, tau={"fit": "fit", "target": "llm"}),
    ]
    return _write(folder, _models(server.base_url, "oracle-test-double"), scenarios, ["llm", "gated"])


def test_plan_only_and_a_worker_give_the_tables_of_a_single_run(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A plan-only run says the gated episodes wait for their shadow episodes (not that any failed); a
    worker then works the shadows, plans the gated stage, works it and finalises: the same episodes and
    the same table as one ``knowwhen run``."""
    single = _config(tmp_path / "single", server)
    assert knowwhen("run", str(single), "-q", "--no-probe").returncode == 0

    fleet = _config(tmp_path / "fleet", server)
    planned = knowwhen("run", str(fleet), "-q", "--plan-only")
    assert planned.returncode == 0, planned.stderr
    said = " ".join(planned.stdout.split())  # the console wraps long lines
    assert "waits for the τ fit on fit (its shadow episodes are not all done yet" in said
    assert "shadow episodes failed" not in said
    db = f"sqlite:///{tmp_path / 'fleet' / 'out' / 'knowwhen.db'}"
    worked = knowwhen("worker", "--db", db, "-q")
    assert worked.returncode == 0, worked.stderr
    assert "finalised the run" in worked.stdout

    one, many = _results(tmp_path / "single"), _results(tmp_path / "fleet")
    assert len(many[("ev", "oracle-test-double", "gated")]) == 8
    assert {k: sorted(v) for k, v in one.items()} == {k: sorted(v) for k, v in many.items()}
    for key in one:
        assert {t: r["success"] for t, r in one[key].items()} == {
            t: r["success"] for t, r in many[key].items()
        }
    table = (tmp_path / "single" / "out" / "table.md").read_text()
    assert table == (tmp_path / "fleet" / "out" / "table.md").read_text()
