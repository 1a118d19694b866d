"""What a source's metrics add up to, the way the stats summary adds up stats lines, and
without judging: maxima (with when), totals over the intervals, and the longest *episodes*
(consecutive intervals) of three shapes defined without any threshold:

* ``preempting`` - intervals in which the preemption counter rose;
* ``flat_generation`` - requests running at both ends of the interval and not one token
  generated in it (a wedged engine, or one very long prefill: the rules decide);
* ``blocked`` - nothing running, requests waiting at both ends, and no token in or out (the
  head-of-line block of vllm issue 39734).

Episodes of any other shape (KV cache usage above a threshold with requests waiting) are the
rules' to define: :func:`episodes` finds them in a series for any predicate. Cumulative
counters appear only as ``last_totals``: a count since an unknown start is information, never
a finding.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional

from .series import MetricsSample, MetricsSeries


@dataclass
class Episode:
    """Consecutive intervals with a shape: ``first``/``last`` sample indexes (into the series
    ``samples`` when found by :func:`episodes`; scrape numbers, 0-based, in the summary),
    ``t0`` (start of the first interval) and ``t1`` (end of the last), ``intervals``, and over
    them: ``peak_kv_usage_pct``, ``max_running``, ``max_waiting``, ``max_waiting_capacity``,
    ``preemptions`` (sum), ``max_preemptions_per_s``, ``generation_tokens`` and
    ``prompt_tokens`` (sums)."""

    first: int
    last: int
    t0: float
    t1: float
    intervals: int = 0
    peak_kv_usage_pct: Optional[float] = None
    max_running: Optional[int] = None
    max_waiting: Optional[int] = None
    max_waiting_capacity: Optional[int] = None
    preemptions: float = 0.0
    max_preemptions_per_s: Optional[float] = None
    generation_tokens: float = 0.0
    prompt_tokens: float = 0.0

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0

    def add(self, index: int, s: MetricsSample) -> None:
        self.last = index
        self.t1 = s.t
        self.intervals += 1
        self.peak_kv_usage_pct = _max(self.peak_kv_usage_pct, s.kv_usage_pct)
        self.max_running = _max(self.max_running, s.running)
        self.max_waiting = _max(self.max_waiting, s.waiting)
        self.max_waiting_capacity = _max(self.max_waiting_capacity, s.waiting_capacity)
        self.preemptions += s.preemptions or 0.0
        self.max_preemptions_per_s = _max(self.max_preemptions_per_s, s.preemptions_per_s)
        self.generation_tokens += s.generation_tokens or 0.0
        self.prompt_tokens += s.prompt_tokens or 0.0

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _max(a, b):
    if b is None:
        return a
    return b if a is None or b > a else a


class _Tracker:
    """The current and the longest episode of one shape, fed interval by interval."""

    def __init__(self) -> None:
        self.current: Optional[Episode] = None
        self.longest: Optional[Episode] = None

    def feed(self, index: int, s: MetricsSample, prev_t: float, on: bool) -> None:
        if not on:
            self.current = None
            return
        if self.current is None:
            self.current = Episode(first=index, last=index, t0=prev_t, t1=s.t)
        self.current.add(index, s)
        if self.longest is None or self.current.intervals > self.longest.intervals or self.longest is self.current:
            self.longest = self.current


#: The threshold-free shapes of the summary: (name, test on an interval with rates, given the
#: sample before it).
def _preempting(s: MetricsSample, p: MetricsSample) -> bool:
    return bool(s.preemptions and s.preemptions > 0)


def _flat_generation(s: MetricsSample, p: MetricsSample) -> bool:
    return (
        not s.restart
        and s.generation_tokens is not None
        and s.generation_tokens == 0
        and bool(s.running)
        and bool(p.running)
    )


def _blocked(s: MetricsSample, p: MetricsSample) -> bool:
    return (
        not s.restart
        and s.running == 0
        and p.running == 0
        and bool(s.waiting)
        and bool(p.waiting)
        and s.generation_tokens == 0
        and not s.prompt_tokens
    )


SHAPES: Dict[str, Callable[[MetricsSample, MetricsSample], bool]] = {
    "preempting": _preempting,
    "flat_generation": _flat_generation,
    "blocked": _blocked,
}


@dataclass
class MetricsSummary:
    """Online summary of one source's scrapes (every scrape, before any merging).

    ``scrapes``; ``intervals`` (with rates: two scrapes make one); ``t_first`` / ``t_last``;
    the peaks with the time they were read (``peak_kv_usage_pct``/``peak_kv_t``,
    ``max_running``, ``max_waiting``/``max_waiting_t``, ``max_swapped``,
    ``max_waiting_capacity``); over the intervals: ``preemptions`` (sum),
    ``intervals_with_preemptions``, ``max_preemptions_per_s`` with its window
    (``max_preemptions_t0``/``_t1``), ``generation_tokens`` and ``generation_seconds`` (their
    mean rate is ``generation_tps``), ``max_generation_tps``, ``restarts``; the prefix-cache hit
    rate of the first, last and best interval; the longest episode of each of :data:`SHAPES`
    (scrape numbers, 0-based); ``last_totals``: the cumulative counters of the last scrape.
    """

    scrapes: int = 0
    intervals: int = 0
    t_first: Optional[float] = None
    t_last: Optional[float] = None
    peak_kv_usage_pct: Optional[float] = None
    peak_kv_t: Optional[float] = None
    max_running: Optional[int] = None
    max_running_t: Optional[float] = None
    max_waiting: Optional[int] = None
    max_waiting_t: Optional[float] = None
    max_swapped: Optional[int] = None
    max_waiting_capacity: Optional[int] = None
    preemptions: float = 0.0
    intervals_with_preemptions: int = 0
    max_preemptions_per_s: Optional[float] = None
    max_preemptions_t0: Optional[float] = None
    max_preemptions_t1: Optional[float] = None
    generation_tokens: float = 0.0
    generation_seconds: float = 0.0
    max_generation_tps: Optional[float] = None
    restarts: int = 0
    prefix_hit_first: Optional[float] = None
    prefix_hit_last: Optional[float] = None
    prefix_hit_max: Optional[float] = None
    episodes: Dict[str, Optional[Episode]] = field(default_factory=dict)
    last_totals: Dict[str, Optional[float]] = field(default_factory=dict)
    _trackers: Dict[str, _Tracker] = field(default_factory=lambda: {k: _Tracker() for k in SHAPES}, repr=False)
    _prev: Optional[MetricsSample] = field(default=None, repr=False)

    @property
    def generation_tps(self) -> Optional[float]:
        """Mean generation throughput over the intervals with rates (tokens/s)."""
        return self.generation_tokens / self.generation_seconds if self.generation_seconds > 0 else None

    @property
    def seconds(self) -> float:
        return (self.t_last - self.t_first) if self.t_first is not None and self.t_last is not None else 0.0

    def add(self, s: MetricsSample) -> None:
        index = self.scrapes
        self.scrapes += 1
        if self.t_first is None:
            self.t_first = s.t
        self.t_last = s.t
        if s.kv_usage_pct is not None and (self.peak_kv_usage_pct is None or s.kv_usage_pct > self.peak_kv_usage_pct):
            self.peak_kv_usage_pct, self.peak_kv_t = s.kv_usage_pct, s.t
        if s.running is not None and (self.max_running is None or s.running > self.max_running):
            self.max_running, self.max_running_t = s.running, s.t
        if s.waiting is not None and (self.max_waiting is None or s.waiting > self.max_waiting):
            self.max_waiting, self.max_waiting_t = s.waiting, s.t
        self.max_swapped = _max(self.max_swapped, s.swapped)
        self.max_waiting_capacity = _max(self.max_waiting_capacity, s.waiting_capacity)
        self.last_totals = {
            "preemptions": s.preemptions_total,
            "generation_tokens": s.generation_tokens_total,
            "prompt_tokens": s.prompt_tokens_total,
            "requests_finished": s.requests_finished_total,
        }
        prev = self._prev
        self._prev = s
        if s.seconds is None or s.t0 is None or prev is None:
            for tr in self._trackers.values():
                tr.current = None  # an interval without rates breaks every episode
            return
        self.intervals += 1
        self.restarts += int(s.restart)
        if s.preemptions:
            self.preemptions += s.preemptions
            self.intervals_with_preemptions += 1
        if s.preemptions_per_s is not None and (
            self.max_preemptions_per_s is None or s.preemptions_per_s > self.max_preemptions_per_s
        ):
            self.max_preemptions_per_s = s.preemptions_per_s
            self.max_preemptions_t0, self.max_preemptions_t1 = s.t0, s.t
        if s.generation_tokens is not None:
            self.generation_tokens += s.generation_tokens
            self.generation_seconds += s.seconds
        self.max_generation_tps = _max(self.max_generation_tps, s.generation_tps)
        if s.prefix_hit_pct is not None:
            if self.prefix_hit_first is None:
                self.prefix_hit_first = s.prefix_hit_pct
            self.prefix_hit_last = s.prefix_hit_pct
            self.prefix_hit_max = _max(self.prefix_hit_max, s.prefix_hit_pct)
        for shape, test in SHAPES.items():
            self._trackers[shape].feed(index, s, s.t0, test(s, prev))
        self.episodes = {k: tr.longest for k, tr in self._trackers.items()}

    def to_dict(self) -> Dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        d["generation_tps"] = self.generation_tps
        return d


def summarise(series: MetricsSeries) -> MetricsSummary:
    """The summary of ``series`` (computed as it was read; see :class:`MetricsSummary`)."""
    return series.summary


def episodes(series: MetricsSeries, predicate: Callable[[MetricsSample], bool]) -> List[Episode]:
    """Every run of consecutive intervals of ``series.samples`` whose sample satisfies
    ``predicate``, oldest first (sample indexes). Samples without an interval (the first
    scrape, out-of-order times) end a run. E.g. KV saturation with requests waiting::

        episodes(series, lambda s: (s.kv_usage_pct or 0) >= 85 and bool(s.waiting))
    """
    out: List[Episode] = []
    cur: Optional[Episode] = None
    for i, s in enumerate(series.samples):
        if s.seconds is None or s.t0 is None or not predicate(s):
            cur = None
            continue
        if cur is None:
            cur = Episode(first=i, last=i, t0=s.t0, t1=s.t)
            out.append(cur)
        cur.add(i, s)
    return out


def _n(v: Optional[float], unit: str = "", digits: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{digits}g}{unit}"


def describe(series: MetricsSeries) -> str:
    """One line for a person: the source, its scrapes and what they add up to. E.g.
    ``scrapes/ [Qwen3-0.6B]: 7 scrapes over 60 s (v1, prometheus); KV cache peak 99%; running
    max 7, waiting max 15; preemptions 101 in 6 intervals (max 2.1/s); generation 51.4
    tokens/s``."""
    s = series.summary
    parts = [f"{series.name}: {s.scrapes} scrape{'s' if s.scrapes != 1 else ''}"]
    if s.scrapes > 1:
        parts[0] += f" over {s.seconds:.0f} s"
    parts[0] += f" ({series.engine or 'engine unknown'}, {series.format})"
    parts.append(f"KV cache peak {_n(s.peak_kv_usage_pct, '%')}")
    parts.append(f"running max {_n(s.max_running)}, waiting max {_n(s.max_waiting)}")
    if s.intervals:
        parts.append(
            f"preemptions {s.preemptions:.0f} in {s.intervals_with_preemptions} of {s.intervals} intervals"
            f" (max {_n(s.max_preemptions_per_s, '/s')})"
        )
        parts.append(f"generation {_n(s.generation_tps, ' tokens/s')}")
    else:
        parts.append("one scrape: no rates")
    if s.restarts:
        parts.append(f"{s.restarts} restart(s)")
    for w in series.warnings[:2]:
        parts.append(w)
    return "; ".join(parts)
