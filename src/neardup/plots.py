"""Small self-contained SVG charts (no dependency, no script, no external resource).

Used by :mod:`neardup.tune` (the precision/recall curve) and :mod:`neardup.report` (the
store report). Every function returns one ``<svg>`` element as a string, with a ``<title>``
and a ``data-plot`` attribute naming the chart; text is escaped.

>>> svg = bar_chart("demo", [("a", 3), ("b", 1)], title="Two bars")
>>> svg.startswith("<svg") and 'data-plot="demo"' in svg and "<title>Two bars</title>" in svg
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

WIDTH = 640
HEIGHT = 300
MARGIN_LEFT = 56
MARGIN_RIGHT = 16
MARGIN_TOP = 30
MARGIN_BOTTOM = 52
#: line colours (colour-blind safe palette)
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:.3g}"


def nice_max(value: float, ticks: int = 4) -> float:
    """The smallest ``ticks x step`` at or above ``value`` with a round step (1, 2, 2.5 or 5 x
    10^n; a whole number for values from 1).

    >>> nice_max(3), nice_max(49), nice_max(0.9)
    (4.0, 80.0, 1.0)
    """
    if value <= 0:
        return 1.0
    raw = value / ticks
    exp = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= raw - 1e-12:
            step = m * exp
            break
    if value >= 1:
        step = float(math.ceil(step))
    return float(round(step * ticks, 10))


def _open(name: str, title: str, width: int, height: int) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{escape(name)}" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'font-family="sans-serif" font-size="11">',
            f"<title>{escape(title)}</title>",
            f'<text x="{width / 2:.1f}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
            f"{escape(title)}</text>"]


def _axes(out: list[str], x_label: str, y_label: str, width: int, height: int, y_max: float,
          y_ticks: int = 4, y_fmt: str = "", bottom: int = MARGIN_BOTTOM) -> None:
    x0, y0 = MARGIN_LEFT, height - bottom
    x1, y1 = width - MARGIN_RIGHT, MARGIN_TOP
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/>')
    for i in range(y_ticks + 1):
        value = y_max * i / y_ticks
        y = y0 - (y0 - y1) * i / y_ticks
        text = f"{value:.0%}" if y_fmt == "%" else (f"{value:.2f}" if y_fmt == "f" else _fmt(round(value, 2)))
        out.append(f'<line x1="{x0 - 3}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 5}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{height - 8}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text x="12" y="{(y0 + y1) / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 12 {(y0 + y1) / 2:.1f})">{escape(y_label)}</text>')


def empty_chart(name: str, title: str, message: str = "no data", width: int = WIDTH, height: int = 80) -> str:
    """A placeholder chart that says why there is nothing to draw."""
    out = _open(name, title, width, height)
    out.append(f'<text x="{width / 2:.1f}" y="48" text-anchor="middle" fill="#666">{escape(message)}</text>')
    return "\n".join(out + ["</svg>"])


def bar_chart(name: str, bars: Sequence[tuple[str, float]], *, title: str, x_label: str = "",
              y_label: str = "", y_fmt: str = "", width: int = WIDTH, height: int = HEIGHT,
              y_max: float | None = None, rotate_labels: bool = False) -> str:
    """Vertical bars, one per ``(label, value)``; each bar's ``<title>`` tells its value."""
    if not bars:
        return empty_chart(name, title)
    top = y_max if y_max is not None else nice_max(max(v for _, v in bars))
    bottom = MARGIN_BOTTOM + (40 if rotate_labels else 0)
    out = _open(name, title, width, height + (40 if rotate_labels else 0))
    h = height + (40 if rotate_labels else 0)
    _axes(out, x_label, y_label, width, h, top, y_fmt=y_fmt, bottom=bottom)
    x0, y0, plot_h = MARGIN_LEFT, h - bottom, h - bottom - MARGIN_TOP
    slot = (width - MARGIN_LEFT - MARGIN_RIGHT) / len(bars)
    every = max(1, len(bars) // 24)  # label at most ~24 bars
    for i, (label, value) in enumerate(bars):
        bh = plot_h * min(value, top) / top if top > 0 else 0
        x = x0 + i * slot + slot * 0.1
        shown = f"{value:.1%}" if y_fmt == "%" else _fmt(value)
        out.append(f'<rect class="bar" x="{x:.1f}" y="{y0 - bh:.1f}" width="{max(slot * 0.8, 1):.1f}" '
                   f'height="{bh:.1f}" fill="{PALETTE[0]}"><title>{escape(label)}: {shown}</title></rect>')
        if i % every == 0:
            cx = x0 + (i + 0.5) * slot
            if rotate_labels:
                short = label if len(label) <= 28 else label[:27] + "…"
                out.append(f'<text x="{cx:.1f}" y="{y0 + 10}" text-anchor="end" '
                           f'transform="rotate(-40 {cx:.1f} {y0 + 10})">{escape(short)}</text>')
            else:
                out.append(f'<text x="{cx:.1f}" y="{y0 + 14}" text-anchor="middle">{escape(label)}</text>')
    return "\n".join(out + ["</svg>"])


def line_chart(name: str, series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, title: str,
               x_label: str = "", y_label: str = "", x_ticks: Sequence[tuple[float, str]] = (),
               y_fmt: str = "", width: int = WIDTH, height: int = HEIGHT,
               x_range: tuple[float, float] | None = None, y_range: tuple[float, float] | None = None,
               marks: Sequence[tuple[float, float, str]] = (), point_labels: bool = False) -> str:
    """Lines with dots: ``series`` is ``(name, [(x, y), ...])``; ``marks`` are highlighted
    points ``(x, y, label)``; a legend names the series."""
    points = [p for _, pts in series for p in pts]
    if not points:
        return empty_chart(name, title)
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    lo_x, hi_x = x_range if x_range is not None else (min(xs), max(xs))
    lo_y, hi_y = y_range if y_range is not None else (0.0, nice_max(max(ys)))
    if hi_x == lo_x:
        hi_x = lo_x + 1
    if hi_y == lo_y:
        hi_y = lo_y + 1
    out = _open(name, title, width, height)
    _axes(out, x_label, y_label, width, height, hi_y, y_fmt=y_fmt)
    x0, y0 = MARGIN_LEFT, height - MARGIN_BOTTOM
    pw, ph = width - MARGIN_LEFT - MARGIN_RIGHT, height - MARGIN_BOTTOM - MARGIN_TOP

    def sx(x: float) -> float:
        return x0 + pw * (x - lo_x) / (hi_x - lo_x)

    def sy(y: float) -> float:
        return y0 - ph * (y - lo_y) / (hi_y - lo_y)

    for x, label in x_ticks:
        out.append(f'<text x="{sx(x):.1f}" y="{y0 + 14}" text-anchor="middle">{escape(label)}</text>')
    for i, (sname, pts) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        if not pts:
            continue
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="1.5" points="{path}">'
                   f"<title>{escape(sname)}</title></polyline>")
        for x, y in pts:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.2" fill="{colour}">'
                       f"<title>{escape(sname)}: ({_fmt(round(x, 4))}, {_fmt(round(y, 4))})</title></circle>")
        ly = MARGIN_TOP + 4 + 14 * i
        out.append(f'<rect x="{width - MARGIN_RIGHT - 150}" y="{ly}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{width - MARGIN_RIGHT - 136}" y="{ly + 9}">{escape(sname[:24])}</text>')
    for x, y, label in marks:
        out.append(f'<circle class="mark" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="6" fill="none" stroke="#d00" '
                   f'stroke-width="2"><title>{escape(label)}</title></circle>')
        out.append(f'<text x="{sx(x) + 8:.1f}" y="{sy(y) - 8:.1f}" fill="#d00">{escape(label)}</text>')
    return "\n".join(out + ["</svg>"])


def document(svg: str) -> str:
    """A standalone ``.svg`` file's text (XML declaration + the element)."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + svg + "\n"
