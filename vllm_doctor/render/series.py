"""The stats of a runtime episode as a picture: sparklines of KV cache usage, requests running
and waiting, and generation throughput, from the run's bounded series (``runs[].series``,
:class:`vllm_doctor.run.SeriesPoint`)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from .evidence import is_context
from .facts import _join, run_of

BARS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"  # ▁▂▃▄▅▆▇█

#: The series a sparkline shows: (point key, label, unit, fixed top of the scale or None).
SERIES = (
    ("kv_usage_pct", "KV cache", "%", 100.0),
    ("running", "running", "", None),
    ("waiting", "waiting", "", None),
    ("generation_tps", "tokens/s", "", None),
)


def _bucket(values: Sequence[Optional[float]], width: int) -> List[Optional[float]]:
    """``values`` reduced to at most ``width`` buckets, each the maximum of what it covers."""
    if len(values) <= width:
        return list(values)
    out = []
    for i in range(width):
        chunk = [v for v in values[i * len(values) // width : (i + 1) * len(values) // width] if v is not None]
        out.append(max(chunk) if chunk else None)
    return out


def sparkline(values: Sequence[Optional[float]], width: int = 40, top: Optional[float] = None) -> str:
    """Values as block characters, lowest ``▁`` to ``█`` at ``top`` (the maximum when None);
    a missing value is a space, a zero the lowest block. At most ``width`` characters."""
    vals = _bucket(values, max(width, 1))
    known = [v for v in vals if v is not None]
    hi = top if top is not None else (max(known) if known else 0)
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        elif hi <= 0:
            out.append(BARS[0])
        else:
            out.append(BARS[min(len(BARS) - 1, max(0, round(v / hi * (len(BARS) - 1))))])
    return "".join(out)


def _point(p, key):
    return p.get(key) if isinstance(p, dict) else getattr(p, key, None)


def episode(verdict, finding, context: int = 4, lookback: int = 48) -> List[Any]:
    """The stats points of ``finding``'s run around its incident (``runs[].series``): when
    the incident lines are stats lines (a saturation), from ``context`` points before the
    first to ``context`` after the last; when they are not (an OOM, a stall), the last
    ``lookback`` points up to it. Empty for a startup finding or fewer than two points."""
    run = run_of(verdict, finding)
    series = list(getattr(run, "series", None) or [])
    if finding is None or finding.phase != "runtime" or len(series) < 2:
        return []
    lines = [e.line for e in finding.evidence if not is_context(e.note)]
    if not lines:
        return series[-lookback:]
    lo, hi = min(lines), max(lines)
    idx = [i for i, p in enumerate(series) if lo <= (_point(p, "line") or 0) <= hi]
    if idx:
        a, b = max(0, idx[0] - context), min(len(series) - 1, idx[-1] + context)
    else:
        before = [i for i, p in enumerate(series) if (_point(p, "line") or 0) <= hi]
        b = before[-1] if before else len(series) - 1
        a = max(0, b - lookback + 1)
    picked = series[a : b + 1]
    return picked if len(picked) >= 2 else []


def point_unit(finding) -> str:
    """What the series points of ``finding``'s run are numbered by: ``scrapes`` for metrics,
    ``lines`` for a log."""
    metric = finding is not None and any(getattr(e, "kind", "log") == "metric" for e in finding.evidence)
    return "scrapes" if metric else "lines"


def series_rows(points: Sequence[Any], width: int = 40) -> List[Tuple[str, str, str]]:
    """``(label, sparkline, range)`` for each series the points carry (KV cache usage,
    running, waiting, generation tokens/s), e.g. ``("KV cache", "▂▅██", "max 98.4%")``."""
    rows = []
    for key, label, unit, top in SERIES:
        vals = [_point(p, key) for p in points]
        known = [v for v in vals if v is not None]
        if not known:
            continue
        hi = max(known)
        text = f"{hi:.1f}{unit}" if unit == "%" else f"{hi:g}"
        rows.append((label, sparkline(vals, width, top), f"max {text}"))
    return rows


def episode_span(points: Sequence[Any], unit: str = "lines") -> str:
    """``12 intervals, 18:01:10 to 18:06:20, lines 40-220`` for the points of an episode
    (``unit`` ``scrapes`` when the points are metrics scrapes)."""
    n = sum(_point(p, "intervals") or 1 for p in points)
    t0, t1 = _point(points[0], "time"), _point(points[-1], "time")
    if t0 and t1 and t0.split(" ")[0] == t1.split(" ")[0] and " " in t1:
        t1 = t1.split(" ", 1)[1]
    l0, l1 = _point(points[0], "line"), _point(points[-1], "line")
    return _join(
        f"{n} interval{'s' if n != 1 else ''}",
        f"{t0} to {t1}" if t0 and t1 else None,
        f"{unit} {l0}-{l1}" if l0 and l1 else None,
    )
