"""The time series of one source: one :class:`MetricsSample` per scrape, with the rates over
the interval since the scrape before, and the evidence a finding can cite.

Gauges (KV cache usage, requests running / waiting / swapped) are the values at the scrape;
rates come only from two scrapes: the counter's increase over the interval, divided by its
seconds. Counters are differenced series by series (each engine, each ``finished_reason``)
and then added. A counter that drops, a ``_created`` time that changes or a
``process_start_time_seconds`` that changes is a restart: the interval counts what the new
process counted (its value), and ``restart`` is set. A single scrape has no rates, whatever its
cumulative counters say: a count since an unknown start is no rate and never a finding.

Bounded: a source keeps at most :data:`MAX_SAMPLES` samples; past that, neighbouring samples
are merged two by two (their intervals join: increases add, rates are recomputed over the
joined interval; gauges are those of the later scrape). The summary
(:class:`~vllm_doctor.metrics.summary.MetricsSummary`) is computed on every scrape before any
merging, so its maxima and episodes are exact.
"""

from __future__ import annotations

import time as _time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from . import names
from .scrape import Snapshot, SourceKey

#: Samples kept per source (4096 scrapes: 11 hours at one scrape every 10 s).
MAX_SAMPLES = 4096
#: Warnings kept per source.
MAX_WARNINGS = 16
#: Restart times kept per source.
MAX_RESTARTS = 32

#: The fields a sample carries, with the metric field they come from and their unit.
FIELDS: Dict[str, Tuple[str, str]] = {
    "kv_usage_pct": ("kv_usage", "%"),
    "running": ("running", "requests"),
    "waiting": ("waiting", "requests"),
    "swapped": ("swapped", "requests"),
    "waiting_capacity": ("waiting_by_reason", "requests"),
    "preemptions": ("preemptions", "preemptions"),
    "preemptions_per_s": ("preemptions", "preemptions/s"),
    "generation_tokens": ("generation_tokens", "tokens"),
    "generation_tps": ("generation_tokens", "tokens/s"),
    "prompt_tokens": ("prompt_tokens", "tokens"),
    "prompt_tps": ("prompt_tokens", "tokens/s"),
    "requests_finished": ("request_success", "requests"),
    "prefix_hit_pct": ("prefix_cache_hits", "%"),
}
_GAUGE_FIELDS = {"kv_usage_pct", "running", "waiting", "swapped", "waiting_capacity"}


@dataclass
class MetricsSample:
    """One scrape of one source.

    At the scrape (time ``t``, seconds since the epoch): ``kv_usage_pct`` (0-100, the fullest
    engine: ``kv_engine``), ``running``, ``waiting``, ``swapped`` (V0 only) and
    ``waiting_by_reason`` (``{"capacity": n, "deferred": n}``, V1 from 0.20) summed over
    engines; ``engines`` (V1 engine series seen); the cumulative counters
    ``*_total`` (summed over engines; information only).

    Over the interval ``(t0, t]`` since the previous scrape (all None on a source's first
    scrape, or when the times do not increase): ``seconds``, ``preemptions`` and
    ``preemptions_per_s``, ``generation_tokens`` and ``generation_tps``, ``prompt_tokens`` and
    ``prompt_tps``, ``requests_finished`` (and ``finished_by_reason``), ``prefix_hit_pct``
    (hits / queries in the interval; V0: its hit-rate gauge), ``restart`` (the server
    restarted in the interval: the increases are counted from the restart).

    The field names match the log stats samples' (``kv_usage_pct``, ``running``, ``waiting``,
    ``swapped``, ``preemptions``, ``generation_tps``, ``prompt_tps``, ``prefix_hit_pct``), so a
    rule can read either. ``origin`` names the scrape (file, URL and scrape number, query time).
    """

    t: float
    origin: str = ""
    t0: Optional[float] = None
    kv_usage_pct: Optional[float] = None
    kv_engine: Optional[str] = None
    running: Optional[int] = None
    waiting: Optional[int] = None
    swapped: Optional[int] = None
    waiting_by_reason: Dict[str, int] = field(default_factory=dict)
    engines: int = 0
    preemptions_total: Optional[float] = None
    generation_tokens_total: Optional[float] = None
    prompt_tokens_total: Optional[float] = None
    requests_finished_total: Optional[float] = None
    seconds: Optional[float] = None
    restart: bool = False
    preemptions: Optional[float] = None
    preemptions_per_s: Optional[float] = None
    generation_tokens: Optional[float] = None
    generation_tps: Optional[float] = None
    prompt_tokens: Optional[float] = None
    prompt_tps: Optional[float] = None
    requests_finished: Optional[float] = None
    finished_by_reason: Dict[str, float] = field(default_factory=dict)
    prefix_hit_pct: Optional[float] = None
    scrapes: int = 1  # scrapes this sample stands for (more than 1 once merged)
    _prefix: Optional[Tuple[float, float]] = field(default=None, repr=False)  # (hits, queries) deltas

    @property
    def waiting_capacity(self) -> Optional[int]:
        """Requests waiting for capacity (``reason="capacity"``), where the release says."""
        return self.waiting_by_reason.get("capacity")


@dataclass
class MetricEvidence:
    """What a finding from metrics cites (``evidence.kind: "metric"``): the ``series`` (metric
    name as exposed) with its ``labels``, the window ``t0``-``t1`` (seconds since the epoch;
    equal for a gauge read at one scrape), the ``value`` in ``unit``, the ``source`` (series
    name) and ``origin`` (the scrape), and ``text``: the same as one line for a person."""

    source: str
    series: str
    labels: Dict[str, str]
    t0: float
    t1: float
    value: float
    unit: str
    text: str
    origin: str = ""
    note: Optional[str] = None
    kind: str = "metric"

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def utc(t: float) -> str:
    """``2026-03-01T12:00:05Z`` (whole seconds, UTC)."""
    return _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime(t))


def _fmt(v: float) -> str:
    return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.0f}"


@dataclass
class MetricsSeries:
    """Everything the metrics of one source (model x pod/instance) said, bounded.

    ``name`` is the source as shown in evidence (``INPUT [model @ location]``); ``input`` the
    file, directory or URL it came from; ``model`` / ``location`` / ``labels`` identify it;
    ``format`` is ``prometheus``, ``openmetrics`` or ``query_range``; ``engine`` is ``v0``
    (``num_requests_swapped`` is exposed), ``v1`` (an ``engine`` label, or a V1-only name) or
    None; ``config`` holds ``vllm:cache_config_info``'s labels typed (``num_gpu_blocks`` int,
    ``gpu_memory_utilization`` float, ``enable_prefix_caching`` bool, ``"None"`` -> None ...);
    ``metric_names`` maps each field to the metric name it was read from (old or new names);
    ``samples`` one per scrape (see :data:`MAX_SAMPLES`); ``scrapes`` how many were read;
    ``restarts`` / ``restart_times`` the restarts seen; ``malformed`` lines skipped;
    ``warnings`` one-line notes (skipped files, out-of-order times, failed scrapes);
    ``summary`` the :class:`~vllm_doctor.metrics.summary.MetricsSummary` of every scrape.
    """

    name: str
    input: str
    model: Optional[str] = None
    location: Optional[str] = None
    labels: Dict[str, str] = field(default_factory=dict)
    format: str = ""
    engine: Optional[str] = None
    config: Dict[str, Any] = field(default_factory=dict)
    metric_names: Dict[str, str] = field(default_factory=dict)
    samples: List[MetricsSample] = field(default_factory=list)
    scrapes: int = 0
    restarts: int = 0
    restart_times: List[float] = field(default_factory=list)
    malformed: int = 0
    warnings: List[str] = field(default_factory=list)
    summary: Any = None

    # -- what the rules read ----------------------------------------------------------------
    @property
    def t_first(self) -> Optional[float]:
        return self.samples[0].t if self.samples else None

    @property
    def t_last(self) -> Optional[float]:
        return self.samples[-1].t if self.samples else None

    def facts(self) -> Dict[str, Any]:
        """The cache configuration in the facts vocabulary of ``shared/corpus/README.md``:
        ``gpu_blocks``, ``kv_tokens`` (``kv_cache_size_tokens``, else blocks x block size),
        ``max_concurrency``, ``gpu_memory_utilization``, ``kv_cache_dtype``, ``block_size``,
        ``enable_prefix_caching``; only those the scrape gave."""
        c = self.config
        out: Dict[str, Any] = {}
        if isinstance(c.get("num_gpu_blocks"), int):
            out["gpu_blocks"] = c["num_gpu_blocks"]
        if isinstance(c.get("kv_cache_size_tokens"), int):
            out["kv_tokens"] = c["kv_cache_size_tokens"]
        elif isinstance(c.get("num_gpu_blocks"), int) and isinstance(c.get("block_size"), int):
            out["kv_tokens"] = c["num_gpu_blocks"] * c["block_size"]
        if isinstance(c.get("kv_cache_max_concurrency"), (int, float)):
            out["max_concurrency"] = float(c["kv_cache_max_concurrency"])
        if isinstance(c.get("gpu_memory_utilization"), (int, float)):
            out["gpu_memory_utilization"] = float(c["gpu_memory_utilization"])
        if isinstance(c.get("cache_dtype"), str):
            out["kv_cache_dtype"] = c["cache_dtype"]
        for k in ("block_size", "enable_prefix_caching"):
            if c.get(k) is not None:
                out[k] = c[k]
        return out

    def evidence(
        self,
        index: int,
        fld: str,
        note: Optional[str] = None,
        t0: Optional[float] = None,
        value: Optional[float] = None,
    ) -> MetricEvidence:
        """Evidence for ``fld`` (a key of :data:`FIELDS`) of ``samples[index]``.

        A gauge cites its scrape (``t0 == t1``); a rate or an increase cites its interval.
        ``t0`` and ``value`` widen it to a window (an episode: its start and its peak or sum).
        Raises ``KeyError`` for an unknown field and ``ValueError`` when the sample has no
        value for it."""
        mfield, unit = FIELDS[fld]
        s = self.samples[index]
        v = getattr(s, fld) if value is None else value
        if v is None:
            raise ValueError(f"{self.name}: sample {index} has no {fld}")
        labels = dict(self.labels)
        if fld == "waiting_capacity":
            series, labels["reason"] = names.WAITING_BY_REASON, "capacity"
        else:
            series = self.metric_names.get(mfield, (names.GAUGES.get(mfield) or names.COUNTERS.get(mfield) or ("",))[0])
        if fld == "kv_usage_pct" and s.kv_engine:
            labels[names.ENGINE_LABEL] = s.kv_engine
        if fld in _GAUGE_FIELDS and t0 is None:
            start = s.t
        else:
            start = t0 if t0 is not None else (s.t0 if s.t0 is not None else s.t)
        sel = ",".join(f'{k}="{v_}"' for k, v_ in sorted(labels.items()))
        head = f"{series}{{{sel}}}" if sel else series
        if start == s.t:
            text = f"{head} = {_fmt(v)} {unit} at {utc(s.t)}"
        else:
            text = f"{head}: {_fmt(v)} {unit} over {_fmt(s.t - start)} s, {utc(start)} to {utc(s.t)}"
        return MetricEvidence(
            source=self.name,
            series=series,
            labels=labels,
            t0=start,
            t1=s.t,
            value=float(v),
            unit=unit,
            text=text,
            origin=s.origin,
            note=note,
        )

    def to_dict(self) -> Dict[str, Any]:
        """Plain data (JSON-ready): every field, samples included."""
        d = asdict(self)
        for s in d["samples"]:
            s.pop("_prefix", None)
        d["summary"] = self.summary.to_dict() if self.summary is not None else None
        return d


# -- building ---------------------------------------------------------------------------------
def typed(value: str) -> Any:
    """A ``cache_config_info`` label value as the type it prints: ``"None"`` -> None,
    ``"True"`` -> True, ``"16"`` -> 16, ``"0.9"`` -> 0.9, anything else unchanged."""
    if value in ("None", ""):
        return None
    if value in ("True", "False"):
        return value == "True"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _sum(series: Optional[Dict[str, float]]) -> Optional[float]:
    return None if not series else sum(series.values())


def _engine_of(skey: str) -> Optional[str]:
    for part in skey.split(","):
        if part.startswith(names.ENGINE_LABEL + "="):
            return part.split("=", 1)[1]
    return None


def _label_of(skey: str, label: str) -> str:
    for part in skey.split(","):
        if part.startswith(label + "="):
            return part.split("=", 1)[1]
    return ""


class SourceBuilder:
    """Turns one source's snapshots, in scrape order, into its :class:`MetricsSeries`."""

    def __init__(self, series: MetricsSeries, summary) -> None:
        self.series = series
        self.summary = summary
        self.prev: Optional[Snapshot] = None
        self.prev_t: Optional[float] = None
        self.stride = 1

    def warn(self, text: str) -> None:
        if len(self.series.warnings) < MAX_WARNINGS and text not in self.series.warnings:
            self.series.warnings.append(text)

    def add(self, snap: Snapshot, t: float, origin: str) -> MetricsSample:
        ser = self.series
        ser.scrapes += 1
        ser.metric_names.update(snap.metric_names)
        if snap.config:
            ser.config = {k: typed(v) for k, v in sorted(snap.config.items())}
        if "swapped" in snap.gauges:
            ser.engine = "v0"
        elif ser.engine is None and (
            snap.engines
            or "waiting_by_reason" in snap.gauges
            or "vllm:kv_cache_usage_perc" in snap.metric_names.values()
        ):
            ser.engine = "v1"
        s = MetricsSample(t=t, origin=origin)
        g = snap.gauges
        kv = g.get("kv_usage")
        if kv:
            skey, frac = max(kv.items(), key=lambda kv_: kv_[1])
            s.kv_usage_pct = round(frac * 100.0, 9)
            s.kv_engine = _engine_of(skey) if len(kv) > 1 or _engine_of(skey) else None
        for fld in ("running", "waiting", "swapped"):
            total = _sum(g.get(fld))
            if total is not None:
                setattr(s, fld, int(round(total)))
        for skey, v in (g.get("waiting_by_reason") or {}).items():
            reason = _label_of(skey, "reason") or "?"
            s.waiting_by_reason[reason] = s.waiting_by_reason.get(reason, 0) + int(round(v))
        s.engines = len(snap.engines)
        c = snap.counters
        s.preemptions_total = _sum(c.get("preemptions"))
        s.generation_tokens_total = _sum(c.get("generation_tokens"))
        s.prompt_tokens_total = _sum(c.get("prompt_tokens"))
        s.requests_finished_total = _sum(c.get("request_success"))
        prev, prev_t = self.prev, self.prev_t
        if prev is not None and prev_t is not None:
            if t <= prev_t:
                self.warn(f"scrape {origin} is not later than the one before ({utc(t)}): no rates for it")
            else:
                self._rates(s, prev, snap, t - prev_t)
                s.t0 = prev_t
        rate = g.get("prefix_hit_rate")
        if s.prefix_hit_pct is None and rate:
            v = max(rate.values())
            if v >= 0:  # V0 prints -1 while nothing was asked
                s.prefix_hit_pct = round(v * 100.0, 9)
        self.prev, self.prev_t = snap, t
        if s.restart:
            ser.restarts += 1
            if len(ser.restart_times) < MAX_RESTARTS:
                ser.restart_times.append(t)
        self.summary.add(s)
        ser.samples.append(s)
        if len(ser.samples) > MAX_SAMPLES:
            ser.samples = _halve(ser.samples)
        return s

    def _rates(self, s: MetricsSample, prev: Snapshot, cur: Snapshot, seconds: float) -> None:
        # A new process start time restarts every series; a counter that drops, or whose
        # _created time changes, restarted (it counted its value since).
        new_process = (
            prev.process_start is not None and cur.process_start is not None and cur.process_start != prev.process_start
        )
        s.restart = new_process
        s.seconds = seconds
        deltas: Dict[str, Optional[float]] = {}
        for fld in names.COUNTERS:
            series = cur.counters.get(fld)
            before = prev.counters.get(fld)
            if not series or (before is None and not new_process):
                deltas[fld] = None
                continue
            before = before or {}
            c0s, c1s = prev.created.get(fld) or {}, cur.created.get(fld) or {}
            total = 0.0
            for skey, v in series.items():
                if skey not in before:
                    d = v  # a series born since the last scrape counted from 0
                else:
                    c0, c1 = c0s.get(skey), c1s.get(skey)
                    reset = new_process or v < before[skey] or (c0 is not None and c1 is not None and c0 != c1)
                    s.restart = s.restart or reset
                    d = v if reset else v - before[skey]
                total += d
                if fld == "request_success":
                    reason = _label_of(skey, "finished_reason") or "?"
                    s.finished_by_reason[reason] = s.finished_by_reason.get(reason, 0.0) + d
            deltas[fld] = total
        s.preemptions = deltas["preemptions"]
        s.generation_tokens = deltas["generation_tokens"]
        s.prompt_tokens = deltas["prompt_tokens"]
        s.requests_finished = deltas["request_success"]
        if s.preemptions is not None:
            s.preemptions_per_s = s.preemptions / seconds
        if s.generation_tokens is not None:
            s.generation_tps = s.generation_tokens / seconds
        if s.prompt_tokens is not None:
            s.prompt_tps = s.prompt_tokens / seconds
        hits, queries = deltas["prefix_cache_hits"], deltas["prefix_cache_queries"]
        if hits is not None and queries is not None:
            s._prefix = (hits, queries)
            if queries > 0:
                s.prefix_hit_pct = round(100.0 * hits / queries, 9)


def _merge(a: MetricsSample, b: MetricsSample) -> MetricsSample:
    """``a`` then ``b`` as one sample: ``b``'s gauges and totals, the joined interval."""
    m = MetricsSample(**{k: v for k, v in vars(b).items()})
    m.waiting_by_reason = dict(b.waiting_by_reason)
    m.finished_by_reason = dict(b.finished_by_reason)
    m.scrapes = a.scrapes + b.scrapes
    if a.t0 is None or b.t0 is None or a.seconds is None or b.seconds is None:
        return m  # an interval without rates stays without: nothing is made up
    m.t0 = a.t0
    m.seconds = a.seconds + b.seconds
    m.restart = a.restart or b.restart
    for fld, rate in (
        ("preemptions", "preemptions_per_s"),
        ("generation_tokens", "generation_tps"),
        ("prompt_tokens", "prompt_tps"),
    ):
        x, y = getattr(a, fld), getattr(b, fld)
        total = None if x is None or y is None else x + y
        setattr(m, fld, total)
        setattr(m, rate, None if total is None else total / m.seconds)
    x, y = a.requests_finished, b.requests_finished
    m.requests_finished = None if x is None or y is None else x + y
    for k, v in a.finished_by_reason.items():
        m.finished_by_reason[k] = m.finished_by_reason.get(k, 0.0) + v
    if a._prefix and b._prefix:
        hits, queries = a._prefix[0] + b._prefix[0], a._prefix[1] + b._prefix[1]
        m._prefix = (hits, queries)
        m.prefix_hit_pct = round(100.0 * hits / queries, 9) if queries > 0 else None
    return m


def _halve(samples: List[MetricsSample]) -> List[MetricsSample]:
    """Merge neighbours two by two (the first sample, which has no interval, stays alone)."""
    out = [samples[0]]
    rest = samples[1:]
    for i in range(0, len(rest) - 1, 2):
        out.append(_merge(rest[i], rest[i + 1]))
    if len(rest) % 2:
        out.append(rest[-1])
    return out


def new_series(input_name: str, key: SourceKey, labels: Dict[str, str], fmt: str) -> MetricsSeries:
    """An empty series for source ``key`` of ``input_name``, named ``INPUT [model @ location]``."""
    model, ns, loc = key
    where = f"{ns}/{loc}" if ns and loc else loc
    tag = " @ ".join(x for x in (model, where) if x)
    return MetricsSeries(
        name=f"{input_name} [{tag}]" if tag else input_name,
        input=input_name,
        model=model or None,
        location=where or None,
        labels=dict(labels),
        format=fmt,
    )
