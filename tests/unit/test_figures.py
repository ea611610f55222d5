"""Figures for papers through matplotlib: the same marks and legend as the SVG plots, PDF files a PDF
reader renders (poppler's ``pdftoppm``), and one sentence naming the extra when matplotlib is missing."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import anyio
import pytest
import yaml

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.results.figures.paper import MplChart
from knowwhen_runner.results.figures.plots import plot_specs
from knowwhen_runner.results.figures.svg import Chart
from knowwhen_runner.results.manifest import CxsManifest, load_manifest, manifest_path
from knowwhen_runner.results.ranking import plot_focus, rank_models
from tests.crowd import crowd_config, crowd_queue
from tests.helpers import knowwhen
from tests.judges import judge_missing, needs_judge

pytestmark = needs_judge(  # the dev extras install it: a CI run without it fails here
    importlib.util.find_spec("matplotlib") is None, "the figures extra (matplotlib) is not installed"
)
PDFTOPPM = shutil.which("pdftoppm")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A three-model run kept in a real SQLite file beside its config file (not finalised yet)."""
    folder = tmp_path_factory.mktemp("figures")
    config = crowd_config(folder, pairs=1, report={"highlight": ["weak-00"]})
    doc = config.model_dump(mode="json", exclude_defaults=True)
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))

    async def go() -> None:
        await crowd_queue(config, config.db_url)

    anyio.run(go)
    return path


def test_finalize_figures_pdf_writes_pdfs_a_reader_renders(small_run: Path, tmp_path: Path) -> None:
    """`knowwhen finalize CONFIG --figures pdf` writes one PDF beside each SVG, and pdftoppm renders each."""
    done = knowwhen("finalize", str(small_run), "--figures", "pdf")
    assert done.returncode == 0, done.stderr
    plots = small_run.parent / "out" / "plots"
    svgs, pdfs = sorted(p.stem for p in plots.glob("*.svg")), sorted(p.stem for p in plots.glob("*.pdf"))
    assert svgs == pdfs == ["cost-success", "coverage-common", "deferral-common", "reliability-common"]
    assert "figures: 4 pdf files" in done.stdout
    if PDFTOPPM is None:
        judge_missing("pdftoppm not installed (Debian: apt-get install poppler-utils)")
    for name in pdfs:
        rendered = subprocess.run(
            [PDFTOPPM, "-png", "-r", "40", "-singlefile", str(plots / f"{name}.pdf"), str(tmp_path / name)],
            capture_output=True,
            timeout=60,
        )
        png = tmp_path / f"{name}.png"
        assert rendered.returncode == 0, rendered.stderr
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000


def test_a_figure_has_the_svg_plots_legend_entry_for_entry(tmp_path: Path) -> None:
    """On a 40-model run the matplotlib coverage figure names the same models, in the same order, with
    the same "N others" entry, as the SVG plot: the same data and the same highlighting."""
    config = crowd_config(tmp_path, report={"highlight": ["weak-05"]})
    from knowwhen_runner.results.finalize import finalize_run

    async def go() -> None:
        await finalize_run(config, await crowd_queue(config))

    anyio.run(go)
    manifests: list[CxsManifest] = [load_manifest(manifest_path(config.output, m.id)) for m in config.models]
    ranking = rank_models(manifests)
    focus = plot_focus(manifests, ranking, config.report.highlight)
    draw = dict(plot_specs(manifests, ranking, focus))["coverage-common"]
    svg, mpl = draw(Chart), draw(MplChart)
    assert isinstance(svg, Chart) and isinstance(mpl, MplChart)
    root = ElementTree.fromstring(svg.svg())
    svg_labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    mpl.save("png")  # the legend is built when the figure is written
    legend = mpl.ax.get_legend()
    mpl_labels = [t.get_text() for t in legend.get_texts()]
    assert "weak-05" in mpl_labels and "31 others (grey)" in mpl_labels
    assert [label for label in svg_labels if label in mpl_labels] == mpl_labels


def test_without_matplotlib_finalize_figures_says_what_to_install(tmp_path: Path) -> None:
    """With matplotlib not importable, `finalize --figures pdf` exits 2 with one sentence naming the
    extra, before touching the run; an unknown format is named too."""
    hidden = tmp_path / "hide"
    (hidden / "matplotlib").mkdir(parents=True)
    (hidden / "matplotlib" / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    done = knowwhen(
        "finalize", str(tmp_path / "nowhere"), "--figures", "pdf", env={"PYTHONPATH": str(hidden)}
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "pip install 'knowwhen-runner[figures]'" in done.stderr
    wrong = knowwhen("finalize", str(tmp_path / "nowhere"), "--figures", "jpeg")
    assert wrong.returncode == 2 and "--figures: expected pdf, pgf or png, got 'jpeg'" in wrong.stderr


def test_crowd_config_round_trips_through_yaml(small_run: Path) -> None:
    """The run's config file loads back to a config with the report block it was written with."""
    from knowwhen_runner.config import load_config

    config: SweepConfig = load_config(small_run)
    assert config.report.highlight == ["weak-00"] and len(config.models) == 3
