"""``--plot FILE.svg`` (or ``.png``): the stats of a run as a chart to attach to a ticket.

Three panels over the log's own time (or over line numbers when the stats lines carry no
time): GPU KV cache usage (percent, 0-100), requests running and waiting, and generation
throughput (tokens/s), with a dashed marker at each line of the incident (an OOM, the start
and end of a saturation) labelled with the finding's code. The title is the ticket's symptom
title, the footer names the source (as the ticket does) and the tool.

The run plotted is the primary finding's, or, when it has no stats lines, the first run that
has (a healthy server: its load). Matplotlib (the optional extra ``pip install
'.[plot]'`` in the checkout) draws it through its object API (no global pyplot state, no
display needed); SVG keeps its text as text (``svg.fonttype: none``), so the labels can be
searched and read by a screen reader, and carries no date, so one verdict gives one file.
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any, List, Optional, Tuple

from .evidence import is_context
from .facts import run_of
from .names import display_source
from .series import point_unit
from .titles import symptom_title

#: Output formats by file suffix.
FORMATS = {".svg": "svg", ".png": "png"}
#: Figure size in inches, and the PNG resolution (a ticket attachment: about 1200 x 780 px).
FIGSIZE = (10.0, 6.5)
DPI = 120
INSTALL_HINT = "pip install '.[plot]' in the vllm-doctor checkout (the package is not on the index yet)"


class PlotError(Exception):
    """The chart cannot be made: the message is one line for the operator."""


class NothingToPlot(PlotError):
    """No run of the verdict has stats lines."""


def plot_format(path: str) -> str:
    """``svg`` or ``png`` by the suffix of ``path``; PlotError for another suffix."""
    for suffix, fmt in FORMATS.items():
        if path.lower().endswith(suffix):
            return fmt
    raise PlotError(f"--plot {path}: give a file name ending in .svg or .png")


def _run_to_plot(verdict):
    p = verdict.primary
    run = run_of(verdict, p) if p is not None else None
    if run is not None and len(run.series) >= 2:
        return run, p
    for r in verdict.runs:
        if len(r.series) >= 2:
            return r, None
    return None, None


def _when(t: Optional[str]) -> Optional[datetime]:
    """A log time ``MM-DD HH:MM:SS[.fff]`` (no year: 2000, a leap year, stands in), or a
    scrape's ISO 8601 time (``2026-09-11T00:45:10Z``, kept as UTC without its zone)."""
    if not t:
        return None
    if "T" in t:
        try:
            return datetime.fromisoformat(t.replace("Z", "+00:00")).replace(tzinfo=None)
        except ValueError:
            return None
    for fmt in ("%m-%d %H:%M:%S.%f", "%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(f"2000-{t}", f"%Y-{fmt}")
        except ValueError:
            continue
    return None


def _axis(series: List[dict]) -> Tuple[List[Any], bool]:
    """The x values: the points' log times when every point has one, else their lines."""
    times = [_when(p.get("time")) for p in series]
    if all(times) and len(set(times)) > 1:
        return times, True
    return [p["line"] for p in series], False


def _markers(finding, by_time: bool) -> List[Tuple[Any, str]]:
    """Where the incident's own lines fall on the x axis, with a label."""
    if finding is None:
        return []
    out = []
    seen = set()
    for e in finding.evidence:
        if is_context(e.note):
            continue
        x = _when(e.time) if by_time else e.line
        if x is None or x in seen:
            continue
        seen.add(x)
        out.append((x, f"{finding.code} {e.note or ''}".strip()))
    return out[:6]


def render_plot(verdict, fmt: str = "svg") -> bytes:
    """The chart of :func:`_run_to_plot`'s run as ``svg`` or ``png`` bytes. Raises
    :class:`PlotError` when matplotlib is missing, :class:`NothingToPlot` when no run has
    at least two stats lines."""
    run, finding = _run_to_plot(verdict)
    if run is None:
        raise NothingToPlot("no run has two or more stats lines: nothing to plot")
    try:
        import matplotlib
        from matplotlib.dates import AutoDateLocator, DateFormatter
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError(f"--plot needs matplotlib: {INSTALL_HINT}") from None
    series = run.series
    xs, by_time = _axis(series)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "vllm-doctor", "font.size": 9}):
        fig = Figure(figsize=FIGSIZE, dpi=DPI)
        kv_ax, req_ax, tps_ax = fig.subplots(3, 1, sharex=True, gridspec_kw={"height_ratios": [1.2, 1, 1]})
        kv = [p.get("kv_usage_pct") for p in series]
        kv_ax.plot(xs, [float("nan") if v is None else v for v in kv], color="#c0392b", label="GPU KV cache usage")
        kv_ax.set_ylim(0, 105)
        kv_ax.set_ylabel("KV cache %")
        req_ax.plot(xs, [p.get("running") for p in series], color="#2471a3", label="running")
        req_ax.plot(xs, [p.get("waiting") for p in series], color="#d68910", label="waiting")
        req_ax.set_ylabel("requests")
        req_ax.set_ylim(bottom=0)
        gen = [p.get("generation_tps") for p in series]
        tps_ax.plot(xs, [float("nan") if v is None else v for v in gen], color="#1e8449", label="generation")
        tps_ax.set_ylabel("tokens/s")
        tps_ax.set_ylim(bottom=0)
        scrapes = point_unit(finding) == "scrapes" or any("T" in (p.get("time") or "") for p in series)
        if by_time:
            tps_ax.set_xlabel("scrape time (UTC)" if scrapes else "log time (MM-DD HH:MM:SS)")
        else:
            tps_ax.set_xlabel("scrape" if scrapes else "log line")
        if by_time:
            tps_ax.xaxis.set_major_locator(AutoDateLocator(maxticks=8))
            tps_ax.xaxis.set_major_formatter(DateFormatter("%m-%d %H:%M:%S"))
            fig.autofmt_xdate()
        lo, hi = xs[0], xs[-1]
        for x, label in _markers(finding, by_time):
            for ax in (kv_ax, req_ax, tps_ax):
                ax.axvline(x, color="#7f8c8d", linestyle="--", linewidth=0.9)
            late = hi != lo and (x - lo) / (hi - lo) > 0.7  # near the right edge: label to the left
            kv_ax.annotate(
                f" {label} " if late else f" {label}",
                (x, 102),
                fontsize=7,
                color="#566573",
                ha="right" if late else "left",
                va="top",
            )
        for ax in (kv_ax, req_ax, tps_ax):
            ax.grid(True, alpha=0.3)
            ax.legend(loc="upper left", fontsize=7, frameon=False)
        fig.suptitle(symptom_title(verdict), fontsize=11)
        n = sum(p.get("intervals") or 1 for p in series)
        fig.text(
            0.01,
            0.005,
            f"{display_source(run.source)} run {run.index}: {n} stats intervals "
            f"({'scrapes' if scrapes else 'lines'} {series[0]['line']}-{series[-1]['line']}) · "
            f"vllm-log-doctor {verdict.tool_version}",
            fontsize=7,
            color="#566573",
        )
        buf = io.BytesIO()
        metadata = {"Date": None} if fmt == "svg" else {}
        fig.savefig(buf, format=fmt, metadata=metadata, bbox_inches="tight")
    return buf.getvalue()
