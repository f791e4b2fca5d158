"""The status page's activity chart: accepts and completions per minute as an inline SVG
(no script, no external asset)."""

from __future__ import annotations

from collections.abc import Sequence

from app.db.overview import Activity

WIDTH = 600
HEIGHT = 120
_PAD = 4


def _points(values: Sequence[int], top: int) -> str:
    step = (WIDTH - 2 * _PAD) / max(len(values) - 1, 1)
    span = HEIGHT - 2 * _PAD
    return " ".join(
        f"{_PAD + i * step:.1f},{HEIGHT - _PAD - span * v / top:.1f}" for i, v in enumerate(values)
    )


def activity_svg(activity: Activity) -> str:
    top = max([1, *activity.accepted, *activity.finished])
    minutes = len(activity.accepted)
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="accepts and completions per minute, last {minutes} minutes">'
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" class="bg"/>'
        f'<polyline class="accepted" points="{_points(activity.accepted, top)}"/>'
        f'<polyline class="finished" points="{_points(activity.finished, top)}"/>'
        f'<text x="{WIDTH - _PAD}" y="14" text-anchor="end">max {top}/min</text>'
        "</svg>"
    )
