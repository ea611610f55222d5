"""The SVG chart the plots are drawn with: round ticks, marks where the data says, text escaped."""

from __future__ import annotations

from xml.etree import ElementTree

from knowwhen_runner.results.figures.svg import Chart, nice_ticks

_NS = "{http://www.w3.org/2000/svg}"


def test_ticks_are_round_and_span_the_axis() -> None:
    """Ticks step by 1, 2, 2.5 or 5 times a power of ten and cover the range."""
    assert nice_ticks(0, 100) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(0, 1) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(-0.42, 23.1) == [0, 5, 10, 15, 20]
    assert nice_ticks(3, 3) == [3]


def test_marks_land_where_the_data_says_and_text_is_escaped() -> None:
    """A point at the middle of both ranges is drawn at the middle of the axes; labels are escaped."""
    chart = Chart("a <b> & c", (0, 10), (0, 1), "x", "y")
    chart.line([0, 5, 10], [0, 0.5, 1], "#000", label="m & n")
    root = ElementTree.fromstring(chart.svg())
    line = next(e for e in root.iter(f"{_NS}polyline"))
    middle = line.get("points", "").split()[1]
    assert middle == f"{chart.x(5):g},{chart.y(0.5):g}"
    texts = [e.text for e in root.iter(f"{_NS}text")]
    assert "a <b> & c" in texts and "m & n" in texts
