"""The report's drill-down is handed to the finaliser from above: results/ writes what it is given, and
every finalise of the sweep (sweep/outputs) gives it the viewer's offline page, as before the layers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio

from knowwhen_runner.results import CxsManifest, finalize_run
from knowwhen_runner.sweep.outputs import finalize_with_drilldown
from knowwhen_runner.view.data import RunData
from knowwhen_runner.view.offline import drilldown_html
from tests.golden.builders import finished_queue, small_config


def test_results_write_the_section_they_are_handed_and_none_without_one(tmp_path: Path) -> None:
    """finalize_run puts the given drill-down into report.html, after the manifests are built; none without."""
    config = small_config(tmp_path)
    seen: list[list[str]] = []

    async def section(manifests: Sequence[CxsManifest]) -> str:
        seen.append(sorted(m.model.id for m in manifests))
        return '<h2>Drill-down</h2><p id="handed-over">here</p>'

    async def go() -> tuple[str, str]:
        queue = await finished_queue(config)
        await finalize_run(config, queue)
        plain = (config.output / "report.html").read_text()
        await finalize_run(config, queue, section)
        return plain, (config.output / "report.html").read_text()

    plain, handed = anyio.run(go)
    assert seen == [["dm", "llm"]]
    assert 'id="handed-over"' in handed and 'id="handed-over"' not in plain
    assert "Drill-down" not in plain


def test_the_sweep_finalises_with_the_viewers_offline_drilldown(tmp_path: Path) -> None:
    """sweep/outputs' finalise writes the same report as results/ handed the viewer's drilldown_html."""
    config = small_config(tmp_path)

    async def go() -> tuple[str, str]:
        queue = await finished_queue(config)
        await finalize_with_drilldown(config, queue)
        through_run = (config.output / "report.html").read_text()

        async def viewer(manifests: Sequence[CxsManifest]) -> str:
            return await drilldown_html(RunData(queue, given_config=config), manifests)

        await finalize_run(config, queue, viewer)
        return through_run, (config.output / "report.html").read_text()

    through_run, direct = anyio.run(go)
    assert 'id="kw-data"' in through_run

    def untimed(html: str) -> str:
        return "\n".join(line for line in html.splitlines() if 'data-time="finalized"' not in line)

    assert untimed(through_run) == untimed(direct)
