"""The benchmark command runs end to end on tiny sizes (figures are meaningless at this size; see issue notes).

Every case ``python -m benchmarks --quick`` runs is run here, in three groups of about equal time, each
a class of its own so that the test processes run the groups side by side; a case added to the
benchmarks and to no group fails ``test_every_quick_case_is_run_here``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.__main__ import NAMED_ONLY, QUICK_NAMED_ONLY, TARGETS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GROUPS = {
    "overhead": ("overhead",),
    "server": ("cached_replay", "plan_resume", "finalise_153k", "rate_limit", "big_body"),
    "scripts": ("inspect_ai", "processes", "scoring", "screen", "readout"),
}


def _quick(tmp_path: Path, group: str) -> dict[str, Any]:
    """``python -m benchmarks --quick`` of one group's cases: the cases it wrote."""
    out = tmp_path / "results.json"
    cases = [arg for name in GROUPS[group] for arg in ("--case", name)]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", *cases, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    written: dict[str, Any] = json.loads(out.read_text())["cases"]
    assert set(written) == set(GROUPS[group])
    return written


def test_every_quick_case_is_run_here() -> None:
    """The groups hold each case ``--quick`` runs, once."""
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(set(TARGETS) - NAMED_ONLY - QUICK_NAMED_ONLY)


class TestOverhead:
    def test_the_runner_and_the_bare_loop_make_the_same_calls(self, tmp_path: Path) -> None:
        cases = _quick(tmp_path, "overhead")
        assert cases["overhead"]["calls"] == 200
        for kind in ("decision", "llm"):
            (one_round,) = cases["overhead"][kind]["rounds"]
            assert one_round["runner_requests"] == 200 and one_round["ratio"] > 0


class TestServerCases:
    def test_replay_plan_resume_finalise_rate_and_big_body(self, tmp_path: Path) -> None:
        cases = _quick(tmp_path, "server")
        replay = cases["cached_replay"]
        assert replay["model_requests"] == 0 and replay["litellm_imported"] is False and replay["jobs"] == 150
        resume = cases["plan_resume"]
        assert resume["jobs"] == 150 and resume["already_done"] == 130
        assert resume["start_to_first_call_s"] is not None and resume["plan_peak_rss_mb"] > 0
        assert cases["rate_limit"]["http_429"] == 0 and cases["rate_limit"]["requests"] > 0
        finalised = cases["finalise_153k"]
        assert finalised["jobs"] == 150 and finalised["finalize_peak_rss_mb"] > 0
        assert cases["big_body"]["body_mb"] == 64


class TestScripts:
    def test_inspect_processes_scoring_screen_and_readout(self, tmp_path: Path) -> None:
        cases = _quick(tmp_path, "scripts")
        inspect = cases["inspect_ai"]  # --quick never installs inspect_ai: skipped unless a full run left it
        assert "skipped" in inspect or (inspect["ratio_median"] > 0 and inspect["bodies_within_30pct"])
        processes = cases["processes"]
        assert processes["exit"] == 0, processes["stderr"]
        for n in ("1", "2"):
            assert processes["figures"]["sqlite"][n]["jobs"] == 200
            assert processes["figures"]["sqlite"][n]["jobs_per_s"] > 0  # steady needs more jobs than this
        assert cases["scoring"]["exit"] == 0, cases["scoring"]["stderr"]
        assert cases["screen"]["exit"] == 0, cases["screen"]["stderr"]
        assert any("top: 5" in line and "calls" in line for line in cases["screen"]["output"])
        assert cases["readout"]["exit"] == 0, cases["readout"]["stderr"]
        readout = cases["readout"]["figures"]  # --quick: the local server only, never llama.cpp's
        assert (
            readout["local_server"]["prior-token"]["requests_per_question"] == 5
        )  # 69 options, 20 a request
        assert readout["local_server"]["prior-likelihood"]["requests_per_question"] == 1
        assert "skipped" in readout["llama_cpp"]
