"""The status page's numbers in words and its charts, drawn as inline SVG (pure): the time axis (`Frame`),
value scales, line, stacked and health charts; nodedns.observe.page lays them out."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

e = html.escape

RCODE_COLORS = {"NOERROR": "#16a34a", "NXDOMAIN": "#2563eb", "SERVFAIL": "#dc2626", "REFUSED": "#f59e0b",
                "FORMERR": "#9333ea", "NOTIMP": "#92400e"}
OTHER_COLOR = "#6b7280"
UP, DOWN = "#16a34a", "#dc2626"


def _m(value: Any, default: Any = None) -> Any:
    """A mapping's value as a mapping (a missing or broken part reads as empty)."""
    return value if isinstance(value, Mapping) else ({} if default is None else default)


# ----------------------------------------------------------------------------------------------
# Numbers in words


def fmt_count(n: float) -> str:
    if n >= 10_000_000:
        return f"{n / 1e6:.0f}M"
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 10_000:
        return f"{n / 1e3:.0f}k"
    return f"{n:,.0f}" if n >= 100 or float(n).is_integer() else f"{n:.1f}"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    if ms <= 0.25:
        return "≤ 0.25 ms"
    if ms < 10:
        return f"{ms:.2g} ms" if ms < 1 else f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s"


def fmt_pct(ratio: float | None) -> str:
    if ratio is None:
        return "–"
    pct = ratio * 100
    return f"{pct:.0f}%" if pct >= 99.5 or pct < 0.05 or pct == round(pct) else f"{pct:.1f}%"


def fmt_age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    s = int(seconds)
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} days"


# ----------------------------------------------------------------------------------------------
# Charts (inline SVG)

TICK_STEPS = (15.0, 20.0, 30.0, 60.0, 120.0, 300.0)  # seconds between time labels
W, H = 480, 150
LEFT, RIGHT, TOP, BOTTOM = 46, 8, 8, 20
X0, X1, Y0, Y1 = LEFT, W - RIGHT, TOP, H - BOTTOM


@dataclass(frozen=True, slots=True)
class Frame:
    """The time axis: the window that ends at `now` (seconds since the epoch)."""

    now: float
    window: float
    interval: float

    def x(self, t: float) -> float:
        left = self.now - self.window
        return X0 + (min(max(t, left), self.now) - left) / self.window * (X1 - X0)

    def gap(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
        """No point for more than two intervals between them: the line breaks."""
        return float(after["t"]) - float(before["t"]) > 2.5 * self.interval


@dataclass(frozen=True, slots=True)
class Scale:
    """The value axis: linear from 0, or logarithmic (answer times)."""

    lo: float
    hi: float
    log: bool
    ticks: tuple[float, ...]
    label: Callable[[float], str]

    def y(self, v: float) -> float:
        if self.log:
            v = min(max(v, self.lo), self.hi)
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (min(max(v, self.lo), self.hi) - self.lo) / ((self.hi - self.lo) or 1)
        return Y1 - f * (Y1 - Y0)


def nice_max(v: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^k at or above v (at least 1)."""
    if v <= 1:
        return 1.0
    k = 10.0 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * k:
            return m * k
    return 10 * k  # not reached


def linear(top: float, label: Callable[[float], str]) -> Scale:
    hi = nice_max(top)
    return Scale(0.0, hi, False, (0.0, hi / 2, hi), label)


def latency_scale(top: float) -> Scale:
    hi = 10.0
    while hi < top and hi < 10_000:
        hi *= 10
    ticks = tuple(t for t in (0.25, 1, 10, 100, 1000, 10_000) if t <= hi)
    return Scale(0.1, hi, True, ticks, lambda v: f"{v:g} ms" if v < 1000 else f"{v / 1000:g} s")


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _axes(frame: Frame, scale: Scale | None, height: float = H) -> str:
    out = []
    if scale is not None:
        for t in scale.ticks:
            y = _f(scale.y(t))
            out.append(f'<line class=grid x1={X0} x2={X1} y1={y} y2={y} />'
                       f'<text class=yl x={X0 - 4} y={y} dy=3.5>{e(scale.label(t))}</text>')
    bottom = height - BOTTOM
    step = next((s for s in TICK_STEPS if frame.window / s <= 4), TICK_STEPS[-1])
    ago = 0.0
    while ago <= frame.window + 0.5:
        x = frame.x(frame.now - ago)
        anchor = "end" if ago == 0 else "start" if x - X0 < 20 else "middle"
        text = "now" if ago == 0 else f"−{ago / 60:g} min" if ago >= 60 else f"−{ago:g} s"
        out.append(f'<text class=xl x={_f(x)} y={_f(bottom + 14)} text-anchor={anchor}>{text}</text>')
        ago += step
    out.append(f'<line class=axis x1={X0} x2={X1} y1={_f(bottom)} y2={_f(bottom)} />')
    return "".join(out)


class Series(NamedTuple):
    name: str
    color: str
    value: Callable[[Mapping[str, Any]], float | None]
    fill: bool = False


def _segments(frame: Frame, points: Sequence[Mapping[str, Any]], series: Series) -> list[list[tuple[float, float]]]:
    """Runs of (t, value) without a missing value or a gap: one line each."""
    runs: list[list[tuple[float, float]]] = []
    prev: Mapping[str, Any] | None = None
    for p in points:
        v = series.value(p)
        if v is None:
            prev = None
            continue
        if prev is None or frame.gap(prev, p):
            runs.append([])
        runs[-1].append((float(p["t"]), float(v)))
        prev = p
    return runs


def _hover(frame: Frame, points: Sequence[Mapping[str, Any]], text: Callable[[Mapping[str, Any]], str]) -> str:
    """A column per point that shows its figures when the pointer is over it."""
    out = []
    for p in points:
        t, span = float(p["t"]), float(p.get("seconds") or frame.interval)
        x0, x1 = frame.x(t - span), frame.x(t)
        out.append(f'<rect class=hov x={_f(x0)} y={Y0} width={_f(max(x1 - x0, 1))} height={Y1 - Y0}>'
                   f'<title>{_clock(p)} UTC · {e(text(p))}</title></rect>')
    return "".join(out)


def line_chart(frame: Frame, points: Sequence[Mapping[str, Any]], series: Sequence[Series], scale: Scale,
               hover: Callable[[Mapping[str, Any]], str], label: str) -> str:
    body = [_axes(frame, scale)]
    drawn = 0
    for s in series:
        for run in _segments(frame, points, s):
            xy = [(frame.x(t), scale.y(v)) for t, v in run]
            drawn += len(xy)
            if len(xy) == 1:
                x, y = xy[0]
                body.append(f'<circle cx={_f(x)} cy={_f(y)} r=2.5 fill="{s.color}" />')
                continue
            d = "M" + " L".join(f"{_f(x)},{_f(y)}" for x, y in xy)
            if s.fill:
                body.append(f'<path d="{d} L{_f(xy[-1][0])},{Y1} L{_f(xy[0][0])},{Y1} Z" fill="{s.color}" '
                            f'fill-opacity=.15 stroke=none />')
            body.append(f'<path class=line d="{d}" stroke="{s.color}" data-points={len(xy)} />')
    if not points:
        body.append(_waiting(frame))
    body.append(_hover(frame, points, hover))
    return _svg(label, "".join(body), drawn)


def _waiting(frame: Frame) -> str:
    return (f'<text class=wait x={_f((X0 + X1) / 2)} y={_f((Y0 + Y1) / 2)} text-anchor=middle>'
            f'the first point comes {frame.interval:g} s after the agent starts</text>')


def _svg(label: str, body: str, drawn: int, height: float = H) -> str:
    return (f'<svg viewBox="0 0 {W} {_f(height)}" role=img aria-label="{e(label)}" data-drawn={drawn} '
            f'preserveAspectRatio="xMidYMid meet">{body}</svg>')


def _clock(p: Mapping[str, Any]) -> str:
    return str(p.get("time", ""))[11:19]


def stacked_chart(frame: Frame, points: Sequence[Mapping[str, Any]], order: Sequence[str], label: str, *,
                  key: str = "rcodes", colors: Mapping[str, str] = RCODE_COLORS) -> str:
    """Each point a bar split by rcode (or by `key`), each part its share of that interval's answers."""
    body = [_axes(frame, linear(1.0, lambda v: f"{v * 100:.0f}%"))]
    drawn = 0
    for p in points:
        rcodes = _m(p.get(key))
        total = sum(n for n in rcodes.values() if isinstance(n, int | float))
        if total <= 0:
            continue
        t, span = float(p["t"]), float(p.get("seconds") or frame.interval)
        x0, x1 = frame.x(t - span), frame.x(t)
        y = float(Y1)
        tip = ", ".join(f"{k} {fmt_pct(rcodes[k] / total)}" for k in order if rcodes.get(k))
        bar = [f"<g><title>{_clock(p)} UTC · {e(tip)}</title>"]
        for rcode in order:
            n = rcodes.get(rcode, 0)
            if not n:
                continue
            h = n / total * (Y1 - Y0)
            y -= h
            drawn += 1
            bar.append(f'<rect x={_f(x0)} y={_f(y)} width={_f(max(x1 - x0, 1))} height={_f(h)} '
                       f'fill="{colors.get(rcode, OTHER_COLOR)}" />')
        body.append("".join(bar) + "</g>")
    if not points:
        body.append(_waiting(frame))
    return _svg(label, "".join(body), drawn)


ROW = 26


def health_runs(frame: Frame, points: Sequence[Mapping[str, Any]], name: str) -> list[tuple[float, float, bool,
                                                                                         str, str]]:
    """(start, end, healthy, first time, last time): the points of one upstream, runs of one state merged."""
    runs: list[tuple[float, float, bool, str, str]] = []
    prev: Mapping[str, Any] | None = None
    for p in points:
        healthy = _m(p.get("upstreams")).get(name)
        if not isinstance(healthy, bool):
            prev = None
            continue
        t, span = float(p["t"]), float(p.get("seconds") or frame.interval)
        if runs and prev is not None and runs[-1][2] == healthy and not frame.gap(prev, p):
            start, _, _, first, _ = runs[-1]
            runs[-1] = (start, t, healthy, first, _clock(p))
        else:
            runs.append((t - span, t, healthy, _clock(p), _clock(p)))
        prev = p
    return runs


def health_chart(frame: Frame, points: Sequence[Mapping[str, Any]], names: Sequence[str], label: str) -> str:
    """A row per upstream, green while it answered its health checks, red while it did not."""
    height = TOP + ROW * max(len(names), 1) + BOTTOM
    body = [_axes(frame, None, height)]
    drawn = 0
    for row, name in enumerate(names):
        top = TOP + row * ROW
        body.append(f'<text class=rl x={X0} y={top + 9}>{e(name)}</text>'
                    f'<rect class=track x={X0} y={top + 12} width={X1 - X0} height=10 />')
        for start, end, healthy, first, last in health_runs(frame, points, name):
            x0, x1 = frame.x(start), frame.x(end)
            drawn += 1
            word = "answering" if healthy else "failing its health checks"
            body.append(f'<rect x={_f(x0)} y={top + 12} width={_f(max(x1 - x0, 1))} height=10 '
                        f'fill="{UP if healthy else DOWN}"><title>{first}–{last} UTC · {e(name)} {word}</title>'
                        '</rect>')
    if not points:
        body.append(f'<text class=wait x={_f((X0 + X1) / 2)} y={TOP + 40} text-anchor=middle>'
                    f'the first point comes {frame.interval:g} s after the agent starts</text>')
    return _svg(label, "".join(body), drawn, height)
