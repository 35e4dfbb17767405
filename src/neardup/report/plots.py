"""Small self-contained SVG charts (no dependency, no script, no external resource).

Used by :mod:`neardup.tune` (the precision/recall curve) and :mod:`neardup.report` (the
store report). Every function returns one ``<svg>`` element as a string, with a ``<title>``
and a ``data-plot`` attribute naming the chart; text is escaped.

Layout rules every chart keeps (``tests/test_report_layout.py`` checks them in headless
Chromium): no text leaves the chart or overlaps other text (text widths are estimated
generously with :func:`text_width`, labels that would collide are left out or moved);
the legend sits under the plot, never over it, one entry per series *with its value*
(``<g class="legend-entry" data-value=...>``); nothing is truncated without its full text
in a ``<title>``.

>>> svg = bar_chart("demo", [("a", 3), ("b", 1)], title="Two bars")
>>> svg.startswith("<svg") and 'data-plot="demo"' in svg and "<title>Two bars</title>" in svg
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

WIDTH = 640
HEIGHT = 300
FONT = 11
TITLE_FONT = 13
MARGIN_RIGHT = 16
#: line colours (colour-blind safe palette)
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#000000", "#f0e442")
#: line dash patterns, one per series in turn: lines that coincide still show each colour
DASHES = ("", "7 4", "3 3", "10 3 3 3", "5 5", "2 4")
#: the colour of a highlighted point (``marks``)
MARK = "#d00000"

#: a legend entry: (name, value as shown, colour)
LegendEntry = tuple[str, str, str]


def text_width(text: str, size: float = FONT, bold: bool = False) -> float:
    """A generous estimate of the rendered width of ``text`` (DejaVu Sans, the widest common
    sans-serif: 0.64 em per character, 0.72 bold; narrow characters counted as such).

    >>> text_width("abc") > 18
    True
    """
    narrow = sum(1 for c in text if c in "il.,:;|!'()[] ")
    wide = sum(1 for c in text if ord(c) >= 0x1100)  # CJK and other full-width characters: 1 em
    return (len(text) - narrow * 0.5 - wide) * size * (0.72 if bold else 0.64) + wide * size


def fmt(value: float) -> str:
    """A number as a chart shows it: whole numbers with thousands separators, else 3 digits."""
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
    step = 10 * exp
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= raw - 1e-12:
            step = m * exp
            break
    if value >= 1:
        step = float(math.ceil(step))
    return float(round(step * ticks, 10))


def _y_text(value: float, y_fmt: str) -> str:
    if y_fmt == "%":
        return f"{value:.0%}"
    return f"{value:.2f}" if y_fmt == "f" else fmt(round(value, 2))


@dataclass
class _Frame:
    """One chart's canvas: the plot rectangle, the text boxes placed so far (for collision
    checks), and the SVG parts."""

    name: str
    title: str
    width: int
    x0: float
    y0: float  # plot bottom
    x1: float
    y1: float  # plot top
    legend: Sequence[LegendEntry] = ()
    out: list[str] = field(default_factory=list)
    boxes: list[tuple[float, float, float, float]] = field(default_factory=list)

    def free(self, box: tuple[float, float, float, float], pad: float = 1.0) -> bool:
        a0, b0, a1, b1 = box
        if a0 < 1 or a1 > self.width - 1 or b0 < 1:
            return False
        return all(a1 + pad <= c0 or c1 + pad <= a0 or b1 + pad <= d0 or d1 + pad <= b0
                   for c0, d0, c1, d1 in self.boxes)

    def text(self, x: float, y: float, text: str, anchor: str = "start", size: float = FONT, cls: str = "",
             extra: str = "", check: bool = False, bold: bool = False) -> bool:
        """Write ``text`` with its baseline at ``y``; with ``check``, only where it collides with
        nothing written before (returns whether it was written)."""
        w = text_width(text, size, bold)
        left = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
        box = (left, y - size * 0.93, left + w, y + size * 0.24)  # Chromium's text box: ascent + descent
        if check and not self.free(box):
            return False
        self.boxes.append(box)
        c = f' class="{cls}"' if cls else ""
        a = "" if anchor == "start" else f' text-anchor="{anchor}"'
        s = "" if size == FONT else f' font-size="{size:g}"'
        self.out.append(f'<text x="{x:.1f}" y="{y:.1f}"{a}{s}{c}{extra}>{escape(text)}</text>')
        return True


def _legend_rows(entries: Sequence[LegendEntry], width: int, left: float) -> list[list[tuple[int, float]]]:
    """Entries laid out in rows under the plot: [[(index, x offset), ...], ...]."""
    rows: list[list[tuple[int, float]]] = [[]]
    x = 0.0
    for i, (name, value, _) in enumerate(entries):
        w = 16 + text_width(f"{name}: {value}") + 18
        if rows[-1] and left + x + w > width - MARGIN_RIGHT:
            rows.append([])
            x = 0.0
        rows[-1].append((i, x))
        x += w
    return rows if rows[0] else []


def _frame(name: str, title: str, *, width: int, plot_height: int, y_max: float, y_fmt: str = "",
           x_label: str = "", y_label: str = "", legend: Sequence[LegendEntry] = (), x_ticks_room: int = 18,
           y_ticks: int = 4, left: float | None = None, note: str = "", y_min: float = 0.0) -> _Frame:
    """The frame of a chart with a vertical value axis: title (and a red ``note`` under it),
    y ticks and grid, axis labels, legend; returns it with the plot rectangle to draw in."""
    labels = [_y_text(y_min + (y_max - y_min) * i / y_ticks, y_fmt) for i in range(y_ticks + 1)]
    x0 = left if left is not None else max(text_width(t) for t in labels) + (30 if y_label else 10)
    y1 = 58.0 if note else 40.0
    y0 = y1 + plot_height
    rows = _legend_rows(legend, width, x0)
    x_axis_label_y = y0 + x_ticks_room + 16
    height = int(x_axis_label_y + (8 if x_label else -8) + 18 * len(rows) + 10)
    f = _Frame(name, title, width, x0, y0, width - MARGIN_RIGHT, y1, legend)
    f.out += [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{escape(name)}" '
              f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
              f'font-family="sans-serif" font-size="{FONT}">', f"<title>{escape(title)}</title>"]
    f.text(width / 2, 20, title, "middle", TITLE_FONT, "chart-title", ' font-weight="bold"', bold=True)
    if note:
        f.text(width / 2, 38, note, "middle", cls="note", extra=f' fill="{MARK}"')
    f.out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{f.x1:.1f}" y2="{y0:.1f}" stroke="#333"/>')
    f.out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x0:.1f}" y2="{y1:.1f}" stroke="#333"/>')
    for i, text in enumerate(labels):
        y = y0 - (y0 - y1) * i / y_ticks
        f.out.append(f'<line x1="{x0 - 3:.1f}" y1="{y:.1f}" x2="{f.x1:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        f.text(x0 - 5, y + 4, text, "end", cls="tick")
    if x_label:
        f.text((x0 + f.x1) / 2, x_axis_label_y, x_label, "middle", cls="axis-label")
    if y_label:
        ym = (y0 + y1) / 2
        f.out.append(f'<text x="14" y="{ym:.1f}" text-anchor="middle" class="axis-label" '
                     f'transform="rotate(-90 14 {ym:.1f})">{escape(y_label)}</text>')
    ly = x_axis_label_y + (8 if x_label else -8) + 4
    for r, row in enumerate(rows):
        for i, dx in row:
            entry_name, value, colour = legend[i]
            x, y = x0 + dx, ly + 18 * r
            f.out.append(f'<g class="legend-entry" data-value="{escape(value)}">'
                         f'<rect x="{x:.1f}" y="{y:.1f}" width="11" height="11" fill="{colour}"/>')
            f.text(x + 16, y + 10, f"{entry_name}: {value}", cls="legend")
            f.out.append("</g>")
    return f


def _close(f: _Frame) -> str:
    return "\n".join(f.out + ["</svg>"])


def empty_chart(name: str, title: str, message: str = "no data", width: int = WIDTH, height: int = 80) -> str:
    """A placeholder chart that says why there is nothing to draw."""
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{escape(name)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="{FONT}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" font-size="{TITLE_FONT}" font-weight="bold" '
        f'class="chart-title">{escape(title)}</text>',
        f'<text x="{width / 2:.1f}" y="52" text-anchor="middle" fill="#666">{escape(message)}</text>', "</svg>"])


def _every(labels: Sequence[str], slot: float) -> int:
    """Label every n-th slot so that the widest label fits with a gap."""
    widest = max((text_width(t) for t in labels), default=0.0) + 10
    return max(1, math.ceil(widest / slot)) if slot > 0 else 1


def bar_chart(name: str, bars: Sequence[tuple[str, float]], *, title: str, x_label: str = "",
              y_label: str = "", y_fmt: str = "", width: int = WIDTH, height: int = 210,
              y_max: float | None = None, values: bool = True) -> str:
    """Vertical bars, one per ``(label, value)``: each bar's ``<title>`` tells its value, and
    its value is written over it where there is room (``values``)."""
    return stacked_bars(name, [label for label, _ in bars], [("", [v for _, v in bars])], title=title,
                        x_label=x_label, y_label=y_label, y_fmt=y_fmt, width=width, height=height, y_max=y_max,
                        values=values)


def stacked_bars(name: str, slots: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], *, title: str,
                 x_label: str = "", y_label: str = "", y_fmt: str = "", width: int = WIDTH, height: int = 210,
                 y_max: float | None = None, values: bool = True, legend: bool = True,
                 ticks: Sequence[tuple[int, str]] | None = None) -> str:
    """Bars stacked by series over ``slots`` (one label per slot, e.g. a time bucket);
    ``ticks``: which slots to label (index, text), default every slot that fits. With more
    than one named series, a legend gives each series' total."""
    if not slots or not any(any(v for v in vals) for _, vals in series):
        return empty_chart(name, title)
    totals = [sum(vals[i] for _, vals in series) for i in range(len(slots))]
    top = y_max if y_max is not None else nice_max(max(totals))
    named = [(s, vals) for s, vals in series if s]
    entries = [(s, f"{sum(vals):,.0f}" if y_fmt != "%" else f"{sum(vals):.0%}", PALETTE[j % len(PALETTE)])
               for j, (s, vals) in enumerate(series) if s] if legend and named else []
    f = _frame(name, title, width=width, plot_height=height - 70, y_max=top, y_fmt=y_fmt, x_label=x_label,
               y_label=y_label, legend=entries)
    slot = (f.x1 - f.x0) / len(slots)
    if ticks is None:
        every = _every(slots, slot)
        ticks = [(i, s) for i, s in enumerate(slots) if i % every == 0]
    for i, label in ticks:
        f.text(f.x0 + (i + 0.5) * slot, f.y0 + 18, label, "middle", cls="tick", check=True)
    ph = f.y0 - f.y1
    for i, label in enumerate(slots):
        base = 0.0
        for j, (sname, vals) in enumerate(series):
            v = vals[i]
            if not v:
                continue
            h0, h1 = ph * min(base, top) / top, ph * min(base + v, top) / top
            shown = f"{v:.1%}" if y_fmt == "%" else fmt(v)
            f.out.append(f'<rect class="bar" x="{f.x0 + i * slot + slot * 0.1:.1f}" y="{f.y0 - h1:.1f}" '
                         f'width="{max(slot * 0.8, 1):.1f}" height="{max(h1 - h0, 0.5):.1f}" '
                         f'fill="{PALETTE[j % len(PALETTE)]}"><title>{escape(label)}'
                         f'{": " + escape(sname) if sname else ""}: {shown}</title></rect>')
            base += v
        if values and totals[i]:
            shown = f"{totals[i]:.0%}" if y_fmt == "%" else fmt(totals[i])
            if text_width(shown) + 2 <= slot:
                y = max(f.y0 - ph * min(totals[i], top) / top - 3, f.y1 - 1)
                f.text(f.x0 + (i + 0.5) * slot, y, shown, "middle", cls="value", check=True)
    return _close(f)


def hbar_chart(name: str, rows: Sequence[tuple[str, float, str]], *, title: str, x_label: str = "",
               x_max: float | None = None, width: int = WIDTH, label_chars: int = 36, empty: str = "no data") -> str:
    """Horizontal bars, ranked as given: ``(label, value, shown)``, the label on the left
    (shortened past ``label_chars`` with its full text in the bar's ``<title>``), ``shown``
    (the value as text) at the bar's end; ``empty``: what a chart without rows says."""
    if not rows:
        return empty_chart(name, title, empty)
    labels = [r[0] if len(r[0]) <= label_chars else r[0][:label_chars - 1] + "…" for r in rows]
    left = max(text_width(t) for t in labels) + 12
    longest = max(text_width(r[2]) for r in rows) + 8
    top = x_max if x_max is not None else max(r[1] for r in rows) or 1.0
    row_h = 18
    height = 40 + row_h * len(rows) + (30 if x_label else 10)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{escape(name)}" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" '
           f'font-size="{FONT}">', f"<title>{escape(title)}</title>",
           f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" font-size="{TITLE_FONT}" font-weight="bold" '
           f'class="chart-title">{escape(title)}</text>']
    x0, x1 = left, width - MARGIN_RIGHT - longest
    for i, ((full, value, shown), label) in enumerate(zip(rows, labels)):
        y = 36 + i * row_h
        w = (x1 - x0) * min(value, top) / top if top > 0 else 0.0
        out.append(f'<text x="{x0 - 6:.1f}" y="{y + 12:.1f}" text-anchor="end" class="tick">{escape(label)}</text>')
        out.append(f'<rect class="bar" x="{x0:.1f}" y="{y + 2:.1f}" width="{max(w, 0.5):.1f}" height="{row_h - 5}" '
                   f'fill="{PALETTE[0]}"><title>{escape(full)}: {escape(shown)}</title></rect>')
        out.append(f'<text x="{x0 + w + 4:.1f}" y="{y + 12:.1f}" class="value">{escape(shown)}</text>')
    out.append(f'<line x1="{x0:.1f}" y1="32" x2="{x0:.1f}" y2="{36 + row_h * len(rows):.1f}" stroke="#333"/>')
    if x_label:
        out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{height - 10}" text-anchor="middle" class="axis-label">'
                   f"{escape(x_label)}</text>")
    return "\n".join(out + ["</svg>"])


_OFFSETS = ((8, -7, "start"), (8, 15, "start"), (-8, -7, "end"), (-8, 15, "end"), (0, -10, "middle"),
            (0, 20, "middle"), (14, 4, "start"), (-14, 4, "end"))


def line_chart(name: str, series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, title: str,
               x_label: str = "", y_label: str = "", x_ticks: Sequence[tuple[float, str]] = (),
               y_fmt: str = "", width: int = WIDTH, height: int = HEIGHT,
               x_range: tuple[float, float] | None = None, y_range: tuple[float, float] | None = None,
               marks: Sequence[tuple[float, float, str]] = (), legend: Sequence[str] | None = None,
               point_labels: Sequence[tuple[int, float, float, str]] = (), mark_values: Sequence[str] = (),
               mark_errors: Sequence[tuple[float, float, float, float]] = (), note: str = "", y_ticks: int = 4) -> str:
    """Lines with dots: ``series`` is ``(name, [(x, y), ...])``; ``legend`` the value each
    series' legend entry shows (default: its last y); ``marks`` highlighted points
    ``(x, y, label)``, each in the legend with its ``mark_values`` text (default: its
    coordinates) and its ``mark_errors`` bars ``(x low, x high, y low, y high)``;
    ``point_labels`` small labels ``(series index, x, y, text)`` placed next to their point
    where they collide with nothing (e.g. the k of a threshold curve); ``note`` a warning
    under the title; ``y_ticks`` the intervals of the value axis."""
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
    values = list(legend) if legend is not None else [fmt(round(pts[-1][1], 3)) if pts else "-" for _, pts in series]
    entries = [(s, v, PALETTE[i % len(PALETTE)]) for i, ((s, _), v) in enumerate(zip(series, values))]
    entries += [(label.split(" ")[0], mark_values[i] if i < len(mark_values) else f"({fmt(x)}, {fmt(y)})", MARK)
                for i, (x, y, label) in enumerate(marks)]
    f = _frame(name, title, width=width, plot_height=height - 90 - (18 if note else 0), y_max=hi_y, y_fmt=y_fmt,
               x_label=x_label, y_label=y_label, legend=entries, note=note, y_min=lo_y, y_ticks=y_ticks)

    def sx(x: float) -> float:
        return f.x0 + (f.x1 - f.x0) * (x - lo_x) / (hi_x - lo_x)

    def sy(y: float) -> float:
        return f.y0 - (f.y0 - f.y1) * (y - lo_y) / (hi_y - lo_y)

    for x, label in x_ticks:
        f.text(sx(x), f.y0 + 18, label, "middle", cls="tick", check=True)
    dots: list[tuple[float, float, float, float]] = []
    for i, (sname, pts) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        if not pts:
            continue
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        dash = f' stroke-dasharray="{DASHES[i % len(DASHES)]}"' if i % len(DASHES) else ""  # lines that coincide
        f.out.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{path}">'
                     f"<title>{escape(sname)}</title></polyline>")
        for x, y in pts:
            f.out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.2" fill="{colour}">'
                         f"<title>{escape(sname)}: ({fmt(round(x, 4))}, {fmt(round(y, 4))})</title></circle>")
            dots.append((sx(x) - 3, sy(y) - 3, sx(x) + 3, sy(y) + 3))
    inside = (f.x0, f.y1, f.x1, f.y0)
    f.boxes += dots  # labels keep off the dots too

    def place(x: float, y: float, text: str, cls: str, colour: str) -> None:
        for dx, dy, anchor in _OFFSETS:
            w = text_width(text)
            left = x + dx - (w if anchor == "end" else w / 2 if anchor == "middle" else 0)
            box = (left, y + dy - FONT * 0.93, left + w, y + dy + FONT * 0.24)
            if box[0] >= inside[0] + 2 and box[2] <= inside[2] and box[1] >= inside[1] - 4 and box[3] <= inside[3] \
                    and f.free(box):
                f.text(x + dx, y + dy, text, anchor, cls=cls, extra=f' fill="{colour}"')
                return

    for (mx, my, _), (xl, xh, yl, yh) in zip(marks, mark_errors):
        for a, b in (((xl, my), (xh, my)), ((mx, yl), (mx, yh))):
            f.out.append(f'<line class="error-bar" x1="{sx(a[0]):.1f}" y1="{sy(a[1]):.1f}" x2="{sx(b[0]):.1f}" '
                         f'y2="{sy(b[1]):.1f}" stroke="{MARK}" stroke-width="1" stroke-dasharray="3 2"/>')
    for x, y, label in marks:
        f.out.append(f'<circle class="mark" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="6" fill="none" stroke="{MARK}" '
                     f'stroke-width="2"><title>{escape(label)}</title></circle>')
        place(sx(x), sy(y), label, "mark-label", MARK)
    for i, x, y, text in point_labels:
        place(sx(x), sy(y), text, "point-label", PALETTE[i % len(PALETTE)])
    return _close(f)


def document(svg: str) -> str:
    """A standalone ``.svg`` file's text (XML declaration + the element)."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + svg + "\n"
