"""What a run does when it starts and ends beside other processes: reservations and notices."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.queue import open_queue
from knowwhen_runner.sweep.notify import flush_notices, notify
from knowwhen_runner.sweep.sweep import _others_working


def test_a_run_keeps_reservations_while_another_process_works(tmp_path: Path) -> None:
    """Budget reservations are forgotten at start only when no other worker of the run is alive."""

    async def go() -> list[bool]:
        async with open_queue(f"sqlite:///{tmp_path / 'q.db'}", "r") as queue:
            await queue.init_run("name: r\n", {})
            seen = [await _others_working(queue)]
            await queue.register_worker("other:1")
            seen.append(await _others_working(queue))
            await queue.stop_worker("other:1")
            seen.append(await _others_working(queue))
            return seen

    assert anyio.run(go) == [False, True, False]


def _with_hook(tmp_path: Path, script: Path) -> SweepConfig:
    """A config whose notify command runs ``script`` with this Python."""
    return SweepConfig.model_validate(
        {
            "name": "r",
            "output": str(tmp_path / "out"),
            "models": [{"id": "m", "model": "hosted_vllm/m", "kind": "decision"}],
            "scenarios": [{"id": "s", "path": str(tmp_path)}],
            "notify": {"command": f"{sys.executable} {script}"},
        }
    )


def test_a_notice_sent_without_waiting_arrives_before_the_run_ends(tmp_path: Path) -> None:
    """A quarantine's notice runs on a thread; the end of the run waits for it (flush_notices)."""
    out = tmp_path / "heard"
    script = tmp_path / "hook.py"
    script.write_text(
        "import os, time, pathlib\ntime.sleep(1.0)\n"
        f"pathlib.Path({str(out)!r}).write_text(os.environ['KNOWWHEN_EVENT'])\n"
    )
    config = _with_hook(tmp_path, script)
    notify(config, "quarantine", "m is quarantined", wait=False)
    assert not out.exists()
    flush_notices()
    assert out.read_text() == "quarantine"


def test_a_waited_notice_comes_after_the_ones_still_on_their_way(tmp_path: Path) -> None:
    """The run's final notice never overtakes a quarantine's that is slow to arrive."""
    log = tmp_path / "heard"
    script = tmp_path / "hook.py"
    script.write_text(
        "import os, time, pathlib\n"
        "event = os.environ['KNOWWHEN_EVENT']\n"
        "time.sleep(1.0 if event == 'quarantine' else 0.0)\n"
        f"with open({str(log)!r}, 'a') as fh:\n"
        "    fh.write(event + '\\n')\n"
    )
    config = _with_hook(tmp_path, script)
    notify(config, "quarantine", "m is quarantined", wait=False)
    notify(config, "failure", "jobs left")
    assert log.read_text().split() == ["quarantine", "failure"]
