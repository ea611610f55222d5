"""The report's leaderboard fits a laptop's page: a wide run (four question sets, L1 and L3, so the comparison
has 21 columns) opened in a real headless Chromium at 1280 × 800 scrolls neither the page nor a leaderboard
table sideways, and every column of ``tables/comparison.csv`` is still shown in one of its tables.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.chromium import dump_dom, find_chromium
from tests.exportdata import make_run
from tests.judges import needs_judge

CHROMIUM = find_chromium()
pytestmark = needs_judge(CHROMIUM is None, "no chromium binary on PATH (Debian: apt-get install chromium)")

_PROBE = """
<script>
(() => {
  const page = document.documentElement, board = document.getElementById("leaderboard");
  const out = {
    inner: window.innerWidth,
    page: [page.scrollWidth, page.clientWidth],
    wraps: Array.from(board.querySelectorAll(".wrap")).map(w => [w.scrollWidth, w.clientWidth]),
    headers: Array.from(board.querySelectorAll("th")).map(th => th.textContent.trim()),
  };
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, run = make_run(tmp_path_factory.mktemp("wide-report"))
    return run


@pytest.fixture(scope="module")
def seen(wide_run: Path) -> dict[str, Any]:
    """What the page's own script measures of the report, opened from disk at 1280 × 800."""
    probe = wide_run / "probe.html"
    probe.write_text((wide_run / "report.html").read_text().replace("</body>", _PROBE + "</body>"))
    assert CHROMIUM is not None
    dom = dump_dom(CHROMIUM, probe.as_uri(), offline=True, size="1280,800")
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run"
    return dict(json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")))


def test_the_leaderboard_fits_a_1280_by_800_page_without_scrolling_sideways(seen: dict[str, Any]) -> None:
    """At 1280 px the page and each leaderboard table are no wider than what shows of them."""
    assert seen["inner"] == 1280
    assert seen["page"][0] <= seen["page"][1], seen
    assert seen["wraps"] and all(scroll <= shown for scroll, shown in seen["wraps"]), seen


def test_the_leaderboard_still_shows_every_column_of_the_comparison(
    wide_run: Path, seen: dict[str, Any]
) -> None:
    """Split to fit, the leaderboard's tables together hold each column the comparison file has."""
    with (wide_run / "tables" / "comparison.csv").open() as fh:
        header = next(csv.reader(fh))
    columns = [h for h in header if not h.endswith((" low", " high"))]
    assert len(columns) >= 20  # the run is as wide as the test says
    assert set(columns) <= set(seen["headers"]), sorted(set(columns) - set(seen["headers"]))
