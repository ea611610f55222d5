"""The report of a 40-model run in a real headless Chromium, opened from disk with no network: clicking a
column header sorts the leaderboard, typing in the filter box narrows every table to matching models.

The run is finalised in-process (``tests.crowd``); a copy of its report gets a few lines that click and type
as a user would, once the page's own script has run, and write what the rows then say into the page.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest

from knowwhen_runner.results.finalize import finalize_run
from tests.browser.chromium import dump_dom, find_chromium
from tests.crowd import LLM, STRONG, WEAK, crowd_config, crowd_queue
from tests.judges import needs_judge

CHROMIUM = find_chromium()
pytestmark = needs_judge(CHROMIUM is None, "no chromium binary on PATH (Debian: apt-get install chromium)")

_PROBE = """
<script>
(() => {
  const board = document.querySelector("table.sortable");
  const models = () => Array.from(board.tBodies[0].rows).filter(r => !r.hidden).map(r => r.dataset.model);
  const header = name => Array.from(board.tHead.rows[0].cells).find(th => th.textContent.trim() === name);
  const out = {ranked: models()};
  header("L2 all states").click();
  out.ascending = models();
  header("L2 all states").click();
  out.descending = models();
  header("model").click();
  out.by_name = models();
  const box = document.getElementById("model-filter");
  box.value = "weak-1";
  box.dispatchEvent(new Event("input", {bubbles: true}));
  out.filtered = models();
  out.filtered_tables = Array.from(document.querySelectorAll("table.sortable")).map(t => [...new Set(
    Array.from(t.tBodies[0].rows).filter(r => !r.hidden).map(r => r.dataset.model))]);
  box.value = "";
  box.dispatchEvent(new Event("input", {bubbles: true}));
  out.cleared = models().length;
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    config = crowd_config(tmp_path_factory.mktemp("crowd-report"))

    async def go() -> None:
        await finalize_run(config, await crowd_queue(config))

    anyio.run(go)
    html = (config.output / "report.html").read_text()
    assert not re.search(r'(src|href)="(https?:)?//', html)
    probe = config.output / "probe.html"
    probe.write_text(html.replace("</body>", _PROBE + "</body>"))
    assert CHROMIUM is not None
    dom = dump_dom(CHROMIUM, probe.as_uri(), offline=True)
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run"
    return dict(json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")))


def test_the_leaderboard_opens_ranked_and_sorts_on_click(probed: dict[str, Any]) -> None:
    """Ranked first (strong models and the LLM above the weak); a click on a figure's header sorts by the
    number (not the text with its interval), a second click reverses it, a click on "model" sorts by name."""
    assert set(probed["ranked"][:21]) == {*STRONG, LLM} and set(probed["ranked"][21:]) == set(WEAK)
    assert set(probed["ascending"][:20]) == set(WEAK) and set(probed["descending"][:21]) == {*STRONG, LLM}
    assert probed["descending"][0] == probed["ascending"][-1] == probed["ranked"][0]
    assert probed["by_name"] == sorted(probed["by_name"]) and len(probed["by_name"]) == 41


def test_the_filter_box_narrows_every_table_to_matching_model_ids(probed: dict[str, Any]) -> None:
    """Typing "weak-1" leaves weak-10 … weak-19 in the leaderboard and in each other table; clearing it
    brings every row back."""
    expected = {f"weak-1{k}" for k in range(10)}
    assert set(probed["filtered"]) == expected and len(probed["filtered"]) == 10
    tables = probed["filtered_tables"]  # leaderboard, gated summary, the whole gated curve, details
    assert len(tables) >= 4 and all(set(models) == expected for models in tables)
    assert probed["cleared"] == 41
