"""A small plain-Python SVG writer for operating-curve panels (no plotting dependency).

The threshold-sweep figure is a handful of polylines on a 0-100 % square per
panel; an SVG written by hand is small, deterministic and diffs cleanly in the
docs, which a matplotlib SVG (random ids, embedded glyph paths) does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

PANEL = 300
"""Side of one panel's plotting square, in SVG units."""
MARGIN_LEFT, MARGIN_TOP, MARGIN_BOTTOM, GAP = 48, 46, 40, 34
TICKS = (0, 20, 40, 60, 80, 100)


@dataclass(frozen=True)
class Curve:
    """One line of (x %, y %) points, each optionally labelled (e.g. its threshold)."""

    label: str
    colour: str
    points: Sequence[tuple[float, float]]
    point_labels: Sequence[str | None] = ()
    marked: int | None = None
    """Index of a point drawn larger (the shipped setting)."""
    labels_below: bool = False
    """Write point labels below-right of the points, not above (keeps two curves' apart)."""


@dataclass(frozen=True)
class Panel:
    title: str
    curves: Sequence[Curve]
    target: tuple[float, float] | None = None
    """(max x %, min y %): the target region x <= max, y >= min, drawn as a green box
    (say what it is in the subtitle)."""
    subtitle: str = ""


@dataclass
class _Doc:
    parts: list[str] = field(default_factory=list)

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(self, x: float, y: float, s: str, size: float = 10, **attrs: str) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}"{extra}>{escape(s)}</text>')


def _panel(d: _Doc, p: Panel, ox: float, oy: float) -> None:
    def px(x: float) -> float:
        return ox + PANEL * x / 100

    def py(y: float) -> float:
        return oy + PANEL * (1 - y / 100)

    d.text(ox + PANEL / 2, oy - 24, p.title, 12, text_anchor="middle", font_weight="bold")
    if p.subtitle:
        d.text(ox + PANEL / 2, oy - 10, p.subtitle, 9, text_anchor="middle", fill="#555")
    d.add(f'<rect x="{ox}" y="{oy}" width="{PANEL}" height="{PANEL}" fill="white" stroke="#333"/>')
    for t in TICKS:
        d.add(
            f'<line x1="{px(t):.1f}" y1="{oy}" x2="{px(t):.1f}" y2="{oy + PANEL}" stroke="#eee"/>'
        )
        d.add(
            f'<line x1="{ox}" y1="{py(t):.1f}" x2="{ox + PANEL}" y2="{py(t):.1f}" stroke="#eee"/>'
        )
        d.text(px(t), oy + PANEL + 13, f"{t}", 9, text_anchor="middle")
        d.text(ox - 5, py(t) + 3, f"{t}", 9, text_anchor="end")
    d.add(
        f'<line x1="{ox}" y1="{oy + PANEL}" x2="{ox + PANEL}" y2="{oy}" '
        'stroke="#bbb" stroke-dasharray="3,3"/>'
    )
    if p.target is not None:
        xmax, ymin = p.target
        d.add(
            f'<rect x="{ox}" y="{oy}" width="{px(xmax) - ox:.1f}" height="{py(ymin) - oy:.1f}" '
            'fill="#2ca02c" fill-opacity="0.15" stroke="#2ca02c" stroke-width="1.5"/>'
        )
    for c in p.curves:
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in c.points)
        d.add(f'<polyline points="{pts}" fill="none" stroke="{c.colour}" stroke-width="1.6"/>')
        for i, (x, y) in enumerate(c.points):
            r = 4.5 if i == c.marked else 2.5
            ring = ' stroke="black" stroke-width="1.2"' if i == c.marked else ""
            d.add(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="{r}" fill="{c.colour}"{ring}/>')
            label = c.point_labels[i] if i < len(c.point_labels) else None
            if label and c.labels_below:
                d.text(px(x) + 5, py(y) + 11, label, 8, fill=c.colour)
            elif label:
                d.text(px(x) + 5, py(y) - 4, label, 8, fill=c.colour)
    d.text(ox + PANEL / 2, oy + PANEL + 28, "easy sessions escalated (%)", 10, text_anchor="middle")
    cy = oy + PANEL / 2
    d.text(
        ox - 32,
        cy,
        "hard sessions escalated (%)",
        10,
        text_anchor="middle",
        transform=f"rotate(-90 {ox - 32:.1f} {cy:.1f})",
    )


def operating_curves(
    panels: Sequence[Panel],
    path: Path,
    title: str,
    columns: int = 3,
    note: str = "",
    marked_label: str = "shipped setting",
) -> None:
    """Write `panels` in a grid of `columns` as one SVG file, with a shared legend."""
    rows = (len(panels) + columns - 1) // columns
    cell_w = MARGIN_LEFT + PANEL + GAP
    cell_h = MARGIN_TOP + PANEL + MARGIN_BOTTOM
    legend = sorted({(c.label, c.colour) for p in panels for c in p.curves})
    width = columns * cell_w + 10
    height = 40 + rows * cell_h + 22 * (1 + (1 if note else 0))
    d = _Doc()
    d.add(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">'
    )
    d.add(f'<rect width="{width}" height="{height}" fill="white"/>')
    d.text(width / 2, 22, title, 14, text_anchor="middle", font_weight="bold")
    for i, p in enumerate(panels):
        r, c = divmod(i, columns)
        _panel(d, p, c * cell_w + MARGIN_LEFT, 40 + r * cell_h + MARGIN_TOP)
    y = 40 + rows * cell_h + 8
    x = 20.0
    for label, colour in legend:
        d.add(
            f'<line x1="{x}" y1="{y}" x2="{x + 18}" y2="{y}" stroke="{colour}" stroke-width="2"/>'
        )
        d.text(x + 22, y + 3, label, 10)
        x += 30 + 6.5 * len(label)
    d.add(f'<circle cx="{x + 6}" cy="{y}" r="4.5" fill="#888" stroke="black" stroke-width="1.2"/>')
    d.text(x + 14, y + 3, marked_label, 10)
    if note:
        d.text(20, y + 20, note, 9, fill="#555")
    d.add("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(d.parts) + "\n", encoding="utf-8")
