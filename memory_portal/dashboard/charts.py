"""The overview's charts as geometry for server-drawn SVG (templates/dashboard/overview.html):
no chart library, nothing fetched, no inline style (the CSP allows neither). Each rectangle
carries the link to the notes table filtered to what it counts, and each chart the table of
its numbers for people who do not read pictures."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from urllib.parse import urlencode

from memory_portal.memory.models import Trust
from memory_portal.memory.selectors import Bar, Overview

WIDTH = 720
HEIGHT = 220
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 16, 26


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    css: str
    title: str
    href: str | None


@dataclass(frozen=True)
class Tick:
    at: float  # y for the value axis, x for the label axis
    label: str


@dataclass
class Chart:
    id: str
    title: str
    description: str
    width: int = WIDTH
    height: int = HEIGHT
    rects: list[Rect] = field(default_factory=list)
    value_ticks: list[Tick] = field(default_factory=list)
    label_ticks: list[Tick] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css class, label)
    head: list[str] = field(default_factory=list)  # the numbers' table
    rows: list[list] = field(default_factory=list)
    empty: bool = False

    @property
    def linked(self) -> bool:
        """Its bars are links: the SVG is a group of them, not one image."""
        return any(r.href for r in self.rects)

    @property
    def plot_bottom(self) -> float:
        return self.height - BOTTOM

    @property
    def plot_left(self) -> int:
        return LEFT

    @property
    def plot_right(self) -> int:
        return self.width - RIGHT


def nice_ceiling(value: int) -> tuple[int, int]:
    """(top of the axis, step between ticks): 1, 2 or 5 times a power of ten, 2 to 5 ticks."""
    if value <= 0:
        return 1, 1
    magnitude = 10 ** max(0, math.floor(math.log10(value)) - 1)
    for step in (1, 2, 5, 10, 20, 50, 100):
        step *= magnitude
        if value / step <= 4:
            return int(math.ceil(value / step) * step), int(step)
    return value, value  # pragma: no cover (a value past 400 powers of ten)


def notes_link(base: str, filters: dict[str, str] | None) -> str | None:
    return f"{base}?{urlencode(filters)}" if filters is not None else None


def columns(
    chart_id: str,
    title: str,
    description: str,
    bars: list[Bar],
    *,
    series: list[tuple[str, str, str]],  # (key, label, css class), bottom to top
    notes_url: str,
    label_every: int = 1,
    short_label=lambda label: label,
) -> Chart:
    """Stacked columns, one a bar, its parts in `series` order."""
    chart = Chart(chart_id, title, description)
    chart.legend = [(css, label) for _key, label, css in series]
    chart.head = ["", *(label for _key, label, _css in series), "Total"]
    top, step = nice_ceiling(max((b.total for b in bars), default=0))
    plot_h = chart.plot_bottom - TOP
    slot = (chart.plot_right - LEFT) / max(len(bars), 1)
    width = max(slot * 0.72, 2)
    chart.value_ticks = [
        Tick(chart.plot_bottom - plot_h * v / top, str(v)) for v in range(0, top + 1, step)
    ]
    order = {key: i for i, (key, _label, _css) in enumerate(series)}
    css_of = {key: css for key, _label, css in series}
    for i, bar in enumerate(bars):
        x = LEFT + slot * i + (slot - width) / 2
        if i % label_every == 0:
            chart.label_ticks.append(Tick(x + width / 2, short_label(bar.label)))
        y = chart.plot_bottom
        counts = {p.key: p.count for p in bar.parts}
        for part in sorted(bar.parts, key=lambda p: order.get(p.key, len(order))):
            height = plot_h * part.count / top
            y -= height
            chart.rects.append(
                Rect(
                    round(x, 1),
                    round(y, 1),
                    round(width, 1),
                    round(height, 1),
                    css_of.get(part.key, "s0"),
                    f"{bar.label}: {part.label} {part.count}",
                    notes_link(notes_url, part.filters),
                )
            )
        chart.rows.append([bar.label, *(counts.get(k, 0) for k, _l, _c in series), bar.total])
    chart.empty = not any(b.total for b in bars)
    return chart


def rows_chart(
    chart_id: str,
    title: str,
    description: str,
    bars: list[Bar],
    *,
    series: list[tuple[str, str, str]],
    notes_url: str,
    label_width: int = 170,
) -> Chart:
    """One row a bar (an agent), its parts side by side from the left."""
    row_h = 26
    chart = Chart(chart_id, title, description, height=TOP + row_h * max(len(bars), 1) + 20)
    chart.legend = [(css, label) for _key, label, css in series]
    chart.head = ["", *(label for _key, label, _css in series)]
    top, step = nice_ceiling(max((b.total for b in bars), default=0))
    span = chart.plot_right - label_width
    chart.value_ticks = [
        Tick(label_width + span * v / top, str(v)) for v in range(0, top + 1, step)
    ]
    css_of = {key: css for key, _label, css in series}
    for i, bar in enumerate(bars):
        y = TOP + row_h * i
        chart.label_ticks.append(Tick(y + row_h / 2 + 4, bar.label[:26]))
        x = label_width
        for part in bar.parts:
            width = span * part.count / top
            chart.rects.append(
                Rect(
                    round(x, 1),
                    y + 4,
                    round(width, 1),
                    row_h - 8,
                    css_of.get(part.key, "s0"),
                    f"{bar.label}: {part.label} {part.count}",
                    notes_link(notes_url, part.filters),
                )
            )
            x += width
        chart.rows.append([bar.label, *(p.count for p in bar.parts)])
    chart.empty = not bars
    return chart


PALETTE = 8  # writer colours s0…s7 (portal.css), then round again


def _day(label: str) -> str:
    return label[5:]  # MM-DD


def overview_charts(overview: Overview, notes_url: str) -> list[Chart]:
    """The overview's charts, in the order the page shows them."""
    writers = [(s.key, s.label, f"s{i % PALETTE}") for i, s in enumerate(overview.writers)]
    trust = [(t.value, t.label, f"t-{t.value}") for t in Trust]
    first, last = overview.days[0].isoformat(), overview.days[-1].isoformat()
    window = f"{first} to {last}"
    return [
        columns(
            "written",
            "Notes written per day, by who wrote them",
            f"Notes written each day from {window}, stacked by the agent (or people) that "
            "wrote them. Each segment opens those notes.",
            overview.written,
            series=writers,
            notes_url=notes_url,
            label_every=7,
            short_label=_day,
        ),
        columns(
            "trust",
            "Trust of the notes written each day",
            f"The notes written each day from {window} by their trust now: learned (awaiting "
            "review), reviewed or rejected.",
            overview.trust,
            series=trust,
            notes_url=notes_url,
            label_every=7,
            short_label=_day,
        ),
        columns(
            "backlog",
            "Review backlog by age",
            "Live learned notes awaiting review (the review queue's first section), by how "
            "long ago they were written.",
            overview.backlog,
            series=[("awaiting", "Awaiting review", "t-learned")],
            notes_url=notes_url,
        ),
        columns(
            "recalls",
            "Recalls per day",
            f"Recalls that served notes to an agent each day from {window}.",
            overview.recalls,
            series=[("recalls", "Recalls", "s1")],
            notes_url=notes_url,
            label_every=7,
            short_label=_day,
        ),
        rows_chart(
            "judged",
            "Vetoes and rejects per agent",
            "Notes each agent wrote that a person vetoed or a manager rejected.",
            overview.judged,
            series=[("vetoed", "Vetoed", "j-vetoed"), ("rejected", "Rejected", "j-rejected")],
            notes_url=notes_url,
        ),
    ]
