"""A small SVG chart: axes with ticks and a grid, lines, bands, markers, error bars and text in data
coordinates, and a legend beside the axes. Enough for the run's plots, drawn in milliseconds.

The bytes depend only on what is drawn (coordinates rounded to 0.1 px, no ids of the moment, no date),
so drawing the same chart twice writes the same file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

__all__ = ["Chart", "nice_ticks"]

WIDTH, HEIGHT = 800, 484
_LEFT, _RIGHT, _TOP, _BOTTOM = 62, 548, 34, 430  # the axes' box in pixels; the legend sits right of it
_FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
_DASHES = {"-": None, "--": "6,4", ":": "1.5,3"}


def nice_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) from low to high."""
    if not high > low:
        return [low]
    raw = (high - low) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9)
    ticks = []
    i = first
    while i * step <= high + step * 1e-9:
        ticks.append(round(i * step, 10))
        i += 1
    return ticks


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return "0"
    return f"{v:.1f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def _tick_label(v: float) -> str:
    return f"{v:.10g}"


def _marker_path(shape: str, x: float, y: float, r: float) -> str:
    """An SVG path of a marker centred on (x, y) with radius ``r``; shapes are one letter: o s ^ v < > D P X."""
    if shape == "o":
        return f"M{_fmt(x - r)} {_fmt(y)}a{_fmt(r)} {_fmt(r)} 0 1 0 {_fmt(2 * r)} 0a{_fmt(r)} {_fmt(r)} 0 1 0 {_fmt(-2 * r)} 0Z"
    points: list[tuple[float, float]] = _SHAPES.get(shape, _SHAPES["s"])
    return "M" + "L".join(f"{_fmt(x + r * px)} {_fmt(y + r * py)}" for px, py in points) + "Z"


_SHAPES: dict[str, list[tuple[float, float]]] = {
    "s": [(-1, -1), (1, -1), (1, 1), (-1, 1)],
    "^": [(0, -1.2), (1.1, 0.9), (-1.1, 0.9)],
    "v": [(0, 1.2), (1.1, -0.9), (-1.1, -0.9)],
    "<": [(-1.2, 0), (0.9, -1.1), (0.9, 1.1)],
    ">": [(1.2, 0), (-0.9, -1.1), (-0.9, 1.1)],
    "D": [(0, -1.3), (1.3, 0), (0, 1.3), (-1.3, 0)],
    "P": [(-0.4, -1.2), (0.4, -1.2), (0.4, -0.4), (1.2, -0.4), (1.2, 0.4), (0.4, 0.4), (0.4, 1.2),
        (-0.4, 1.2), (-0.4, 0.4), (-1.2, 0.4), (-1.2, -0.4), (-0.4, -0.4)],
    "X": [(-1, -1.3), (0, -0.3), (1, -1.3), (1.3, -1), (0.3, 0), (1.3, 1), (1, 1.3), (0, 0.3),
        (-1, 1.3), (-1.3, 1), (-0.3, 0), (-1.3, -1)],
}  # fmt: skip


@dataclass(frozen=True)
class _Key:
    """One legend entry: a line (dashed or not), a filled swatch (a band) or a marker."""

    label: str
    color: str
    dash: str | None = None
    marker: str | None = None
    swatch: float | None = None  # a band's opacity
    hollow: bool = False  # the marker is drawn hollow (marks placed one by one)


class Chart:
    """One chart; add marks in data coordinates, then ``svg()``."""

    def __init__(
        self, title: str, xlim: tuple[float, float], ylim: tuple[float, float], xlabel: str, ylabel: str
    ) -> None:
        self.xlim, self.ylim = xlim, ylim
        self._title, self._xlabel, self._ylabel = title, xlabel, ylabel
        self._marks: list[str] = []
        self._overlay: list[str] = []  # drawn unclipped, above the marks (annotations, notes)
        self._keys: list[_Key] = []

    def x(self, v: float) -> float:
        lo, hi = self.xlim
        return _LEFT + (v - lo) / ((hi - lo) or 1.0) * (_RIGHT - _LEFT)

    def y(self, v: float) -> float:
        lo, hi = self.ylim
        return _BOTTOM - (v - lo) / ((hi - lo) or 1.0) * (_BOTTOM - _TOP)

    def line(
        self,
        xs: Sequence[float],
        ys: Sequence[float],
        color: str,
        *,
        width: float = 1.5,
        style: str = "-",
        marker: str | None = None,
        label: str | None = None,
    ) -> None:
        """A polyline through the points (with a marker on each when ``marker`` is given)."""
        dash = _DASHES.get(style)
        if len(xs) >= 2:
            points = " ".join(f"{_fmt(self.x(a))},{_fmt(self.y(b))}" for a, b in zip(xs, ys, strict=True))
            extra = f' stroke-dasharray="{dash}"' if dash else ""
            self._marks.append(
                f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="{width}"{extra}/>'
            )
        if marker is not None or len(xs) == 1:
            for a, b in zip(xs, ys, strict=True):
                self.marker(a, b, marker or "o", color)
        if label:
            shown = marker or ("o" if len(xs) == 1 else None)  # a single point is drawn as a dot
            self._keys.append(_Key(label, color, dash=style if len(xs) >= 2 else None, marker=shown))

    def hline(
        self, v: float, color: str, *, style: str = "--", width: float = 1.2, label: str | None = None
    ) -> None:
        """A horizontal line across the axes at ``v``."""
        self.line(list(self.xlim), [v, v], color, width=width, style=style, label=label)

    def band(
        self,
        xs: Sequence[float],
        lows: Sequence[float],
        highs: Sequence[float],
        color: str,
        *,
        opacity: float = 0.15,
        label: str | None = None,
    ) -> None:
        """A filled band between ``lows`` and ``highs``."""
        upper = [f"{_fmt(self.x(a))},{_fmt(self.y(b))}" for a, b in zip(xs, highs, strict=True)]
        lower = [f"{_fmt(self.x(a))},{_fmt(self.y(b))}" for a, b in zip(xs, lows, strict=True)]
        points = " ".join(upper + lower[::-1])
        self._marks.append(
            f'<polygon points="{points}" fill="{color}" fill-opacity="{opacity}" stroke="none"/>'
        )
        if label:
            self._keys.append(_Key(label, color, swatch=opacity))

    def marker(
        self, x: float, y: float, shape: str, color: str, *, size: float = 4.0, hollow: bool = False
    ) -> None:
        fill = (
            f'fill="none" stroke="{color}" stroke-width="1.4"' if hollow else f'fill="{color}" stroke="none"'
        )
        self._marks.append(f'<path d="{_marker_path(shape, self.x(x), self.y(y), size)}" {fill}/>')

    def key(self, label: str, color: str, *, marker: str | None = None, style: str | None = None) -> None:
        """A legend entry of its own: a hollow marker (marks drawn one by one) and/or a line of ``style``."""
        self._keys.append(_Key(label, color, dash=style, marker=marker, hollow=True))

    def errorbar(
        self,
        x: float,
        y: float,
        color: str,
        *,
        xerr: tuple[float, float] | None = None,
        yerr: tuple[float, float] | None = None,
        width: float = 1.0,
    ) -> None:
        """Error bars with caps: ``xerr``/``yerr`` are the (low, high) ends in data coordinates."""
        parts = []
        px, py = self.x(x), self.y(y)
        if xerr is not None:
            a, b = self.x(xerr[0]), self.x(xerr[1])
            parts.append(
                f"M{_fmt(a)} {_fmt(py)}H{_fmt(b)}M{_fmt(a)} {_fmt(py - 3)}v6M{_fmt(b)} {_fmt(py - 3)}v6"
            )
        if yerr is not None:
            a, b = self.y(yerr[0]), self.y(yerr[1])
            parts.append(
                f"M{_fmt(px)} {_fmt(a)}V{_fmt(b)}M{_fmt(px - 3)} {_fmt(a)}h6M{_fmt(px - 3)} {_fmt(b)}h6"
            )
        if parts:
            self._marks.append(
                f'<path d="{"".join(parts)}" fill="none" stroke="{color}" stroke-width="{width}"/>'
            )

    def annotate(self, text: str, x: float, y: float, color: str, *, dx: float = 6, dy: float = -4) -> None:
        """Text next to a data point, offset by (dx, dy) pixels (dy positive: further up)."""
        self._overlay.append(
            f'<text x="{_fmt(self.x(x) + dx)}" y="{_fmt(self.y(y) - dy)}" font-size="10" fill="{color}">'
            f"{escape(text)}</text>"
        )

    def note(self, text: str) -> None:
        """A sentence in the middle of the axes (an empty chart says why)."""
        cx, cy = (_LEFT + _RIGHT) / 2, (_TOP + _BOTTOM) / 2
        self._overlay.append(
            f'<text x="{_fmt(cx)}" y="{_fmt(cy)}" font-size="11" text-anchor="middle">{escape(text)}</text>'
        )

    def _axes(self) -> list[str]:
        out = [
            f'<rect x="{_LEFT}" y="{_TOP}" width="{_RIGHT - _LEFT}" height="{_BOTTOM - _TOP}" fill="white"/>'
        ]
        grid, labels = [], []
        for v in nice_ticks(*self.xlim):
            px = _fmt(self.x(v))
            grid.append(f"M{px} {_TOP}V{_BOTTOM}")
            labels.append(f'<text x="{px}" y="{_BOTTOM + 15}" text-anchor="middle">{_tick_label(v)}</text>')
        for v in nice_ticks(*self.ylim):
            py = _fmt(self.y(v))
            grid.append(f"M{_LEFT} {py}H{_RIGHT}")
            labels.append(
                f'<text x="{_LEFT - 5}" y="{py}" dy="3.5" text-anchor="end">{_tick_label(v)}</text>'
            )
        out.append(f'<path d="{"".join(grid)}" stroke="#b0b0b0" stroke-opacity="0.5" stroke-width="0.8"/>')
        out.append(f'<g font-size="10">{"".join(labels)}</g>')
        mid_x, mid_y = (_LEFT + _RIGHT) / 2, (_TOP + _BOTTOM) / 2
        out.append(
            f'<text x="{_fmt(mid_x)}" y="{_BOTTOM + 34}" font-size="11" text-anchor="middle">'
            f"{escape(self._xlabel)}</text>"
        )
        out.append(
            f'<text transform="translate(16 {_fmt(mid_y)}) rotate(-90)" font-size="11" text-anchor="middle">'
            f"{escape(self._ylabel)}</text>"
        )
        out.append(
            f'<text x="{_fmt(mid_x)}" y="{_TOP - 12}" font-size="12" text-anchor="middle">'
            f"{escape(self._title)}</text>"
        )
        return out

    def _legend(self) -> list[str]:
        """Every entry, closer together when there are many: no entry is ever dropped."""
        out = []
        step = min(16.0, (_BOTTOM + 40 - _TOP) / max(1, len(self._keys)))
        for i, k in enumerate(self._keys):
            y = _TOP + 8 + step * i
            x = _RIGHT + 14
            if k.swatch is not None:
                out.append(
                    f'<rect x="{x}" y="{_fmt(y - 5)}" width="22" height="10" fill="{k.color}" '
                    f'fill-opacity="{k.swatch}"/>'
                )
            elif k.dash is not None:
                dash = _DASHES.get(k.dash)
                extra = f' stroke-dasharray="{dash}"' if dash else ""
                out.append(f'<path d="M{x} {_fmt(y)}h22" stroke="{k.color}" stroke-width="1.5"{extra}/>')
            if k.marker is not None:
                fill = (
                    f'fill="none" stroke="{k.color}" stroke-width="1.4"' if k.hollow else f'fill="{k.color}"'
                )
                out.append(f'<path d="{_marker_path(k.marker, x + 11, y, 4)}" {fill}/>')
            label = k.label if len(k.label) <= 36 else k.label[:35] + "…"
            out.append(f'<text x="{x + 28}" y="{_fmt(y)}" dy="3.5" font-size="10">{escape(label)}</text>')
        return out

    def svg(self) -> bytes:
        """The chart as a standalone SVG document."""
        clip = f'<clipPath id="axes"><rect x="{_LEFT}" y="{_TOP}" width="{_RIGHT - _LEFT}" height="{_BOTTOM - _TOP}"/></clipPath>'
        doc = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family={quoteattr(_FONT)}>',
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
            f"<defs>{clip}</defs>",
            *self._axes(),
            f'<g clip-path="url(#axes)">{"".join(self._marks)}</g>',
            f'<rect x="{_LEFT}" y="{_TOP}" width="{_RIGHT - _LEFT}" height="{_BOTTOM - _TOP}" fill="none" stroke="black" stroke-width="0.8"/>',
            *self._overlay,
            *self._legend(),
            "</svg>\n",
        ]
        return "\n".join(doc).encode()
