"""A metrics source as a run: its scrapes become stats samples the rules judge like stats lines.

vLLM's log stats line and its ``/metrics`` say the same things (requests running and waiting,
KV cache usage, throughput, preemptions), and the rules' stats observers read
:class:`~vllm_doctor.run.StatsSample` objects whatever they come from. So a
:class:`~vllm_doctor.metrics.series.MetricsSeries` becomes one :class:`~vllm_doctor.run.Run`
whose samples are its scrapes: gauges at the scrape, rates over the interval since the one
before (the first scrape carries no rates, so it never counts as an idle or blocked interval),
``waiting`` read as *waiting for capacity* where vLLM splits the queue by reason (0.20+), the
preemptions of the interval. Each sample's :class:`~vllm_doctor.run.Line` names the scrape
(``lineno`` = its number), its ISO time and the series read, so evidence says
``kind: "metric"``. Judges nothing.

:func:`fill` puts a series' samples into a log's run that has no stats lines of its own
(stats logging disabled, or lines at DEBUG): logs give the phase, config and tracebacks,
metrics the stats.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional

from ..events import Phase
from ..run import Line, Run, StatsSample
from .series import MetricsSample, MetricsSeries, utc

_READ = {
    "kv_usage_pct": "kv_usage",
    "running": "running",
    "waiting": "waiting",
    "generation_tps": "generation_tokens",
    "prompt_tps": "prompt_tokens",
    "preemptions": "preemptions",
}


def _n(v, unit="") -> str:
    if v is None:
        return "-"
    return f"{v:.1f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def _text(series: MetricsSeries, s: MetricsSample) -> str:
    waiting = s.waiting if s.waiting_capacity is None else f"{s.waiting_capacity} for capacity"
    parts = [f"running {_n(s.running)}", f"waiting {_n(waiting)}", f"KV cache {_n(s.kv_usage_pct, '%')}"]
    if s.seconds:
        parts.append(f"generation {_n(s.generation_tps, ' tokens/s')}, prompt {_n(s.prompt_tps, ' tokens/s')}")
        parts.append(f"{_n(s.preemptions)} preemptions over {s.seconds:.0f} s")
    where = s.origin or series.input
    return f"/metrics scrape at {utc(s.t)} ({where}): " + ", ".join(parts)


def _line(series: MetricsSeries, i: int, s: MetricsSample) -> Line:
    metric: Dict[str, Any] = {
        "series": {k: series.metric_names.get(v, v) for k, v in _READ.items()},
        "labels": dict(series.labels),
        "t0": utc(s.t0) if s.t0 is not None else None,
        "t1": utc(s.t),
        "origin": s.origin,
    }
    return Line(source=series.name, lineno=i + 1, text=_text(series, s), time=utc(s.t), metric=metric)


def samples(series: MetricsSeries) -> Iterator[StatsSample]:
    """The series' scrapes as stats samples, in order."""
    for i, s in enumerate(series.samples):
        rated = s.seconds is not None
        waiting = s.waiting_capacity if s.waiting_capacity is not None else s.waiting
        yield StatsSample(
            line=_line(series, i, s),
            running=s.running or 0,
            waiting=waiting or 0,
            swapped=s.swapped,
            preemptions=int(s.preemptions or 0) if rated else 0,
            kv_usage_pct=s.kv_usage_pct,
            generation_tps=s.generation_tps if rated else None,
            prompt_tps=s.prompt_tps if rated else None,
            prefix_hit_pct=s.prefix_hit_pct,
        )


def fill(run: Run, series: MetricsSeries) -> None:
    """Feed ``series`` into ``run``: every scrape as a stats sample, the cache configuration
    as config and facts (values the log printed stay)."""
    for sample in samples(series):
        run.stats.add(sample, series.engine)
    first = next(iter(samples(series)), None)
    if first is not None:
        run.reached(Phase.SERVING, first.line)
    if series.engine:
        run.engine_hints.add(series.engine)
    for key, value in series.facts().items():
        target, lines = (
            (run.config, run.config_lines) if key == "gpu_memory_utilization" else (run.facts, run.fact_lines)
        )
        if key not in target:
            target[key] = value
            if first is not None:
                lines[key] = first.line
    run.markers.setdefault("metrics", first.line if first is not None else Line(series.name, 1, series.name))


def run_of(series: MetricsSeries, observers) -> Run:
    """A run standing for the whole series (observers: the rules' factory, as the tracker's)."""
    run = Run(source=series.name, index=1, start_line=1, end_line=max(1, len(series.samples)))
    run.stats.observers = observers()
    fill(run, series)
    return run


def same_model(series: MetricsSeries, model: Optional[str]) -> bool:
    """Does the series serve the model a log's run names (by its last path part)?"""
    if not series.model or not model:
        return False
    return series.model.rsplit("/", 1)[-1].lower() == str(model).rsplit("/", 1)[-1].lower()
