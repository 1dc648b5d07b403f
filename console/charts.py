"""Server-rendered SVG charts: pictures with no JavaScript and no CDN.

Each function takes plain values and returns safe SVG markup for a template
(``{{ chart }}``). Every text that reaches the markup — titles, labels,
series names, tooltips — is escaped here, because labels are often
agent-supplied (agent names, workflow kinds). Each chart is an ``<svg
role="img">`` with a ``<title>`` and a ``<desc>`` that reads its data, so a
screen reader gets the figures, not a picture; each mark carries a
``<title>`` tooltip. Colours come from CSS classes (``chart-s1`` …) with a
fill attribute as the fallback, so the charts also read without the stylesheet.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

PALETTE = ("#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2")
_ids = itertools.count(1)


@dataclass(frozen=True)
class Line:
    """One series over the x labels; None is a gap (no data in that bucket)."""

    name: str
    values: Sequence[float | None]


@dataclass(frozen=True)
class Bar:
    label: str
    value: float | None  # None: nothing to measure (a share of zero workflows), drawn as "no data", not 0
    href: str = ""  # a drill-down link; escaped like the rest
    note: str = ""  # extra tooltip text, e.g. "12 of 40"


NO_DATA = "no data"


def percent(value: float) -> str:
    return f"{100 * value:.0f} %"


def count(value: float) -> str:
    return f"{value:,.0f}"


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    for step in itertools.chain.from_iterable((m * 10**e for m in (1, 2, 2.5, 5)) for e in range(0, 12)):
        if step >= value:
            return float(step)
    return float(value)


def _axis_max(value: float, fmt: Callable[[float], str]) -> float:
    """The top of a y axis with five gridlines. Counts step by a whole 1, 2 or 5 × 10^k, so no gridline reads
    a rounded fraction (a top of 1 would label 0.25 and 0.5 as "0", and 0.75 as "1")."""
    if fmt is not count:
        return _nice_max(value)
    for step in itertools.chain.from_iterable((m * 10**e for m in (1, 2, 5)) for e in range(0, 12)):
        if 4 * step >= value:
            return float(4 * step)
    return _nice_max(value)


def _open(kind: str, title: str, desc: str, width: int, height: int) -> tuple[str, str]:
    uid = f"chart{next(_ids)}"
    head = (
        f'<svg class="chart chart-{kind}" role="img" viewBox="0 0 {width} {height}" '
        f'width="100%" preserveAspectRatio="xMinYMin meet" aria-labelledby="{uid}-t {uid}-d" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{uid}-t">{escape(title)}</title><desc id="{uid}-d">{escape(desc)}</desc>'
    )
    return uid, head


LEGEND_ROW = 16


def _legend_width(name: str) -> float:
    return 24 + 7 * len(name)  # the swatch, a gap, and 7 units a character (11 px text is narrower)


def _legend_rows(names: Sequence[str], x: float, width: float) -> list[list[int]]:
    """The series' indexes laid out in rows that each fit between ``x`` and ``width``: a legend wraps
    instead of running past the picture (where its last series vanished)."""
    rows: list[list[int]] = [[]]
    used = 0.0
    for i, name in enumerate(names):
        if rows[-1] and x + used + _legend_width(name) > width:
            rows.append([])
            used = 0.0
        rows[-1].append(i)
        used += _legend_width(name)
    return rows


def _legend(
    names: Sequence[str], x: float, y: float, colours: Sequence[str] = PALETTE, width: float = float("inf")
) -> str:
    parts = []
    for r, row in enumerate(_legend_rows(names, x, width)):
        offset = 0.0
        for i in row:
            colour, top = colours[i % len(colours)], y + r * LEGEND_ROW
            parts.append(
                f'<rect class="chart-s{i + 1}" x="{x + offset:.1f}" y="{top - 9}" width="10" height="10" '
                f'fill="{colour}"/><text class="chart-legend" x="{x + offset + 14:.1f}" y="{top}">'
                f"{escape(names[i])}</text>"
            )
            offset += _legend_width(names[i])
    return "".join(parts)


def _note(text: str, left: float, top: float, plot_w: float, plot_h: float) -> str:
    """A sentence across the middle of the plot, for a chart with too little to draw."""
    return (
        (
            f'<text class="chart-empty" x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" '
            f'text-anchor="middle">{escape(text)}</text>'
        )
        if text
        else ""
    )


def line_chart(
    title: str,
    x_labels: Sequence[str],
    lines: Sequence[Line],
    *,
    fmt: Callable[[float], str] = count,
    y_max: float | None = None,
    area: bool = False,
    width: int = 640,
    height: int = 220,
    note: str = "",
) -> SafeString:
    """Lines (or areas) over time. ``y_max`` fixes the scale, e.g. 1.0 for shares; ``note`` is said across
    the plot (and first to a screen reader), e.g. that one day of data draws no trend."""
    desc = (f"{note}. " if note else "") + "; ".join(
        f"{line.name}: "
        + ", ".join(
            f"{x} {fmt(v) if v is not None else 'no data'}" for x, v in zip(x_labels, line.values, strict=False)
        )
        for line in lines
    )
    left, right, top, bottom = 48, 12, 26, 28
    extra = LEGEND_ROW * (len(_legend_rows([line.name for line in lines], left, width - right)) - 1)
    top, height = top + extra, height + extra
    _uid, svg = _open("line", title, desc, width, height)
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for line in lines for v in line.values if v is not None]
    top_value = y_max if y_max is not None else _axis_max(max(values, default=0), fmt)
    n = max(len(x_labels), 1)

    def x_at(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y_at(v: float) -> float:
        return top + plot_h - plot_h * (v / top_value if top_value else 0)

    parts = [
        svg,
        _legend([line.name for line in lines], left, 14, width=width - right),
        *_y_grid(top_value, y_at, left, width - right, fmt),
        _note(note, left, top, plot_w, plot_h),
    ]
    parts += [
        _x_label(label, x_at(i), height, anchor="end" if i == n - 1 and n > 1 else "middle")
        for i, label in enumerate(x_labels)
        if _labelled(i, n)
    ]
    for s, line in enumerate(lines):
        colour = PALETTE[s % len(PALETTE)]
        for run in _runs(line.values):
            points = " ".join(f"{x_at(i):.1f},{y_at(v):.1f}" for i, v in run)
            if area and len(run) > 1:
                base = f"{x_at(run[-1][0]):.1f},{y_at(0):.1f} {x_at(run[0][0]):.1f},{y_at(0):.1f}"
                parts.append(
                    f'<polygon class="chart-area chart-s{s + 1}" points="{points} {base}" '
                    f'fill="{colour}" fill-opacity="0.15"/>'
                )
            parts.append(
                f'<polyline class="chart-line chart-s{s + 1}" points="{points}" fill="none" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
        for i, value in enumerate(line.values):
            if value is not None:
                parts.append(
                    f'<circle class="chart-dot chart-s{s + 1}" cx="{x_at(i):.1f}" cy="{y_at(value):.1f}" '
                    f'r="3" fill="{colour}"><title>{escape(line.name)}, {escape(x_labels[i])}: '
                    f"{escape(fmt(value))}</title></circle>"
                )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 -- every text above went through escape()


def _y_grid(
    top_value: float, y_at: Callable[[float], float], left: float, right_x: float, fmt: Callable[[float], str]
) -> list[str]:
    """Five gridlines from zero to ``top_value``, each labelled on the y axis."""
    grid = []
    for k in range(5):
        v = top_value * k / 4
        y = y_at(v)
        grid.append(
            f'<line class="chart-grid" x1="{left}" x2="{right_x}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#e5e7eb"/><text class="chart-axis" x="{left - 6}" y="{y + 4:.1f}" '
            f'text-anchor="end">{escape(fmt(v))}</text>'
        )
    return grid


def _labelled(i: int, n: int) -> bool:
    """About eight labels under an x axis of ``n`` buckets, the last one always (and no label crowding it)."""
    step = max(1, n // 8)
    return i == n - 1 or (i % step == 0 and n - 1 - i >= step)


def _x_label(label: str, x: float, height: int, *, anchor: str = "middle") -> str:
    """A label under the x axis; the last point of a line sits on the chart's right edge, so its label ends
    there ("end") instead of being cut in half."""
    return f'<text class="chart-axis" x="{x:.1f}" y="{height - 8}" text-anchor="{anchor}">{escape(label)}</text>'


def _runs(values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """Consecutive non-empty points: a bucket without data breaks the line instead of faking a zero."""
    runs: list[list[tuple[int, float]]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((i, v))
    return [r for r in runs if r]


def column_chart(
    title: str,
    x_labels: Sequence[str],
    lines: Sequence[Line],
    *,
    fmt: Callable[[float], str] = count,
    width: int = 640,
    height: int = 220,
    colours: Sequence[str] = PALETTE,
    note: str = "",
) -> SafeString:
    """Grouped columns per bucket, e.g. launches next to resumes; ``colours`` per series, in order."""
    desc = (f"{note}. " if note else "") + "; ".join(
        f"{line.name}: " + ", ".join(f"{x} {fmt(v or 0)}" for x, v in zip(x_labels, line.values, strict=False))
        for line in lines
    )
    left, right, top, bottom = 48, 12, 26, 28
    extra = LEGEND_ROW * (len(_legend_rows([line.name for line in lines], left, width - right)) - 1)
    top, height = top + extra, height + extra
    _uid, svg = _open("columns", title, desc, width, height)
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = _axis_max(max((v or 0 for line in lines for v in line.values), default=0), fmt)
    n, k = max(len(x_labels), 1), max(len(lines), 1)
    slot = plot_w / n
    bar_w = max(1.0, (slot * 0.8) / k)
    parts = [
        svg,
        _legend([line.name for line in lines], left, 14, colours, width - right),
        *_y_grid(top_value, lambda v: top + plot_h - plot_h * v / top_value, left, width - right, fmt),
        _note(note, left, top, plot_w, plot_h),
    ]
    for i, label in enumerate(x_labels):
        if _labelled(i, n):
            parts.append(_x_label(label, left + slot * (i + 0.5), height))
        for s, line in enumerate(lines):
            v = (line.values[i] if i < len(line.values) else 0) or 0
            h = plot_h * v / top_value
            x = left + slot * i + slot * 0.1 + bar_w * s
            parts.append(
                f'<rect class="chart-bar chart-s{s + 1}" x="{x:.1f}" y="{top + plot_h - h:.1f}" '
                f'width="{bar_w:.1f}" height="{h:.1f}" fill="{colours[s % len(colours)]}">'
                f"<title>{escape(line.name)}, {escape(label)}: {escape(fmt(v))}</title></rect>"
            )
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 -- every text above went through escape()


def bar_chart(
    title: str,
    bars: Sequence[Bar],
    *,
    fmt: Callable[[float], str] = count,
    max_value: float | None = None,
    width: int = 420,
    row: int = 24,
) -> SafeString:
    """Horizontal bars, one per label, optionally linking to a drill-down."""

    def said(b: Bar) -> str:
        return NO_DATA if b.value is None else fmt(b.value)

    desc = "; ".join(f"{b.label}: {said(b)}" + (f" ({b.note})" if b.note else "") for b in bars) or "no data"
    label_w, value_w = 150, 64
    height = max(row * len(bars), row) + 8
    _uid, svg = _open("bars", title, desc, width, height)
    top_value = max_value if max_value is not None else _nice_max(max((b.value or 0 for b in bars), default=0))
    plot_w = width - label_w - value_w
    parts = [svg]
    if not bars:
        parts.append(f'<text class="chart-empty" x="4" y="{row - 6}">No data in this period</text>')
    for i, b in enumerate(bars):
        y = 4 + i * row
        w = plot_w * ((b.value or 0) / top_value if top_value else 0)
        label = b.label if len(b.label) <= 20 else b.label[:19] + "…"  # what fits left of the bars
        tip = f"{b.label}: {said(b)}" + (f" ({b.note})" if b.note else "")
        bar = (
            ""
            if b.value is None
            else (
                f'<rect class="chart-bar chart-s1" x="{label_w}" y="{y + 3}" '
                f'width="{max(w, 1):.1f}" height="{row - 8}" fill="{PALETTE[0]}"/>'
            )
        )
        value_class = "chart-value chart-no-data" if b.value is None else "chart-value"
        mark = (
            f'<text class="chart-label" x="{label_w - 6}" y="{y + row * 0.65:.1f}" text-anchor="end">'
            f"{escape(label)}</text>{bar}"
            f'<text class="{value_class}" x="{label_w + w + 4:.1f}" y="{y + row * 0.65:.1f}">'
            f"{escape(said(b))}</text><title>{escape(tip)}</title>"
        )
        # Only links inside the console: a label may be agent text, a link target never is.
        local = b.href.startswith(("/", "?")) and not b.href.startswith("//")
        parts.append(f'<a href="{escape(b.href)}">{mark}</a>' if local else f"<g>{mark}</g>")
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 -- every text above went through escape()


def heatmap(
    title: str,
    row_labels: Sequence[str],
    column_labels: Sequence[str],
    values: Sequence[Sequence[float | None]],
    *,
    fmt: Callable[[float], str] = count,
    flagged: set[tuple[int, int]] | None = None,
    notes: Sequence[Sequence[str]] | None = None,
    cell: int = 22,
    legend: str = "",
    unit: str = "",
) -> SafeString:
    """A grid (e.g. the hour-of-week: 7 rows of 24 hours); flagged cells get a red outline.

    Under it, the colour scale: up to five swatches from the lightest (0) to the darkest (the peak), each with
    its value, and a sentence saying what the shades mean in ``unit`` (also in the description, for a
    screen reader)."""
    flagged = flagged or set()
    label_w, top = 44, 20
    width = label_w + cell * len(column_labels) + 4
    grid_bottom = top + cell * len(row_labels)
    scale_h = 46
    height = grid_bottom + scale_h + (18 if legend else 4)
    peak = max((v or 0 for row in values for v in row), default=0) or 1
    meaning = f"Colour: darker is more {unit or 'in that cell'}, from {fmt(0)} to {fmt(peak)}"
    cells = [
        f"{r} {c}: {fmt(v)}" + (" (flagged)" if (i, j) in flagged else "")
        for i, (r, row) in enumerate(zip(row_labels, values, strict=False))
        for j, (c, v) in enumerate(zip(column_labels, row, strict=False))
        if v
    ]
    desc = (f"{len(flagged)} flagged cells. " if flagged else "") + f"{meaning}. " + ("; ".join(cells) or "no data")
    _uid, svg = _open("heatmap", title, desc, width, height)

    def shade(v: float) -> float:
        return 0.06 + 0.94 * (v / peak)

    parts = [svg]
    for j, label in enumerate(column_labels):
        if j % 3 == 0:
            parts.append(
                f'<text class="chart-axis" x="{label_w + cell * j + cell / 2:.1f}" y="{top - 6}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
    for i, label in enumerate(row_labels):
        y = top + cell * i
        parts.append(
            f'<text class="chart-axis" x="{label_w - 6}" y="{y + cell * 0.65:.1f}" text-anchor="end">'
            f"{escape(label)}</text>"
        )
        for j, v in enumerate(values[i]):
            x = label_w + cell * j
            note = notes[i][j] if notes else ""
            tip = f"{label} {column_labels[j]}: {fmt(v or 0)}" + (f" — {note}" if note else "")
            outline = ' stroke="#dc2626" stroke-width="2"' if (i, j) in flagged else ' stroke="#fff"'
            css = "chart-cell chart-flagged" if (i, j) in flagged else "chart-cell"
            parts.append(
                f'<rect class="{css}" x="{x + 1}" y="{y + 1}" width="{cell - 2}" height="{cell - 2}" '
                f'fill="{PALETTE[0]}" fill-opacity="{shade(v or 0):.2f}"{outline}><title>{escape(tip)}</title>'
                f"</rect>"
            )
    y = grid_bottom + 8
    steps: dict[str, float] = {}
    for k in range(5):  # a value the format would repeat (0.25 of a count reads "0") is one swatch
        steps.setdefault(fmt(peak * k / 4), peak * k / 4)
    for k, v in enumerate(steps.values()):
        x = label_w + k * (cell * 2)
        parts.append(
            f'<g class="chart-scale"><rect x="{x}" y="{y}" width="{cell * 2 - 2}" height="10" '
            f'fill="{PALETTE[0]}" fill-opacity="{shade(v):.2f}" stroke="#d1d5db"/>'
            f'<text class="chart-axis" x="{x + cell - 1}" y="{y + 22}" text-anchor="middle">'
            f"{escape(fmt(v))}</text></g>"
        )
    parts.append(f'<text class="chart-legend" x="{label_w}" y="{y + 36}">{escape(meaning)}</text>')
    if legend:
        parts.append(f'<text class="chart-legend" x="{label_w}" y="{height - 4}">{escape(legend)}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 -- every text above went through escape()
