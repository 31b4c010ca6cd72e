"""Availability over time as a self-contained SVG (no plotting library): acknowledged writes per second for
each partition, unavailability windows shaded grey, faults as red bands labelled with the nemesis."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from html import escape

from tests.chaos.checker import Window
from tests.chaos.history import Fault, Op, Outcome

W, ROW_H, LEFT, TOP, BUCKET_S = 1200, 90, 70, 40, 0.5


def availability_svg(
    ops: Sequence[Op], faults: Sequence[Fault], windows: Sequence[Window], partitions: int
) -> str:
    acks = [o for o in ops if o.kind == "send" and o.outcome is Outcome.OK]
    t_end = max([o.end for o in ops] + [f.end for f in faults] + [1.0])
    xs = (W - LEFT - 20) / t_end
    height = TOP + ROW_H * partitions + 40

    def x(t: float) -> float:
        return LEFT + t * xs

    buckets: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for o in acks:
        buckets[o.partition][int(o.end / BUCKET_S)] += 1
    peak = max([n for b in buckets.values() for n in b.values()] + [1])
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<text x="{LEFT}" y="15">acknowledged writes per {BUCKET_S}s per partition; red = fault held, grey = '
        f"unavailable (&gt; threshold without an ack)</text>",
    ]
    for f in faults:
        w = max(1.0, (f.end - f.start) * xs)
        out.append(
            f'<rect x="{x(f.start):.1f}" y="{TOP - 12}" width="{w:.1f}" height="{ROW_H * partitions + 12}" '
            f'fill="red" fill-opacity="0.15"><title>{escape(f.name)} {escape(f.target)}</title></rect>'
        )
        out.append(
            f'<text x="{x(f.start):.1f}" y="{TOP - 2}" font-size="9" fill="darkred">{escape(f.name)}</text>'
        )
    for p in range(partitions):
        y0 = TOP + p * ROW_H
        base = y0 + ROW_H - 10
        out.append(f'<text x="5" y="{y0 + ROW_H / 2:.0f}">p{p}</text>')
        out.append(f'<line x1="{LEFT}" y1="{base}" x2="{W - 20}" y2="{base}" stroke="#888"/>')
        for win in windows:
            if win.partition == p:
                out.append(
                    f'<rect x="{x(win.start):.1f}" y="{y0 + 5}" width="{max(1.0, win.duration * xs):.1f}" '
                    f'height="{ROW_H - 15}" fill="#444" fill-opacity="0.3"><title>unavailable '
                    f"{win.duration:.2f}s</title></rect>"
                )
        n_buckets = int(t_end / BUCKET_S) + 1
        pts = [
            f"{x(i * BUCKET_S):.1f},{base - (ROW_H - 20) * buckets[p].get(i, 0) / peak:.1f}"
            for i in range(n_buckets)
        ]
        out.append(f'<polyline fill="none" stroke="steelblue" points="{" ".join(pts)}"/>')
    for s in range(0, int(t_end) + 1, max(1, int(t_end / 20) or 1)):
        out.append(f'<text x="{x(s):.1f}" y="{height - 15}" font-size="9">{s}s</text>')
    out.append("</svg>")
    return "\n".join(out)
