"""The benchmark command runs end to end on tiny sizes (figures are meaningless at this size; see issue notes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_python_m_benchmarks_quick_writes_every_case(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cases = json.loads(out.read_text())["cases"]
    assert set(cases) == {
        "overhead",
        "inspect_ai",
        "cached_replay",
        "plan_resume",
        "rate_limit",
        "processes",
        "scoring",
        "screen",
        "finalise_153k",
        "big_body",
        "readout",
    }
    assert cases["overhead"]["calls"] == 200
    for kind in ("decision", "llm"):
        (one_round,) = cases["overhead"][kind]["rounds"]
        assert one_round["runner_requests"] == 200 and one_round["ratio"] > 0
    inspect = cases["inspect_ai"]  # --quick never installs inspect_ai: skipped unless a full run left it
    assert "skipped" in inspect or (inspect["ratio_median"] > 0 and inspect["bodies_within_30pct"])
    replay = cases["cached_replay"]
    assert replay["model_requests"] == 0 and replay["litellm_imported"] is False and replay["jobs"] == 150
    resume = cases["plan_resume"]
    assert resume["jobs"] == 150 and resume["already_done"] == 130
    assert resume["start_to_first_call_s"] is not None and resume["plan_peak_rss_mb"] > 0
    assert cases["rate_limit"]["http_429"] == 0 and cases["rate_limit"]["requests"] > 0
    finalised = cases["finalise_153k"]
    assert finalised["jobs"] == 150 and finalised["finalize_peak_rss_mb"] > 0
    processes = cases["processes"]
    assert processes["exit"] == 0, processes["stderr"]
    for n in ("1", "2"):
        assert processes["figures"]["sqlite"][n]["jobs"] == 200
        assert processes["figures"]["sqlite"][n]["jobs_per_s"] > 0  # steady needs more jobs than this
    assert cases["scoring"]["exit"] == 0, cases["scoring"]["stderr"]
    assert cases["screen"]["exit"] == 0, cases["screen"]["stderr"]
    assert cases["readout"]["exit"] == 0, cases["readout"]["stderr"]
    readout = cases["readout"]["figures"]  # --quick: the local server only, never llama.cpp's
    assert readout["local_server"]["prior-token"]["requests_per_question"] == 5  # 69 options at 20 a request
    assert readout["local_server"]["prior-likelihood"]["requests_per_question"] == 1
    assert "skipped" in readout["llama_cpp"]
    assert cases["big_body"]["body_mb"] == 64
    assert any("top: 5" in line and "calls" in line for line in cases["screen"]["output"])
