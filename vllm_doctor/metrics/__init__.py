"""vLLM's Prometheus metrics as input: per source (model x pod/instance), a bounded time series
the rules can judge.

The path: an input (:mod:`.inputs`: a scrape file, a directory of scrapes, a live URL, a
``query_range`` export) -> samples (:mod:`.parse`, with ``prometheus_client``'s parsers) ->
one snapshot per source and scrape (:mod:`.scrape`, names per release in :mod:`.names`) ->
a :class:`MetricsSeries` of :class:`MetricsSample` (gauges at each scrape, rates over each
interval, restarts handled: :mod:`.series`) with its :class:`MetricsSummary` (:mod:`.summary`).
Nothing here judges: no threshold lives in this package; the rules do that.

Library use::

    from vllm_doctor.metrics import read_metrics
    for series in read_metrics("scrapes/"):            # or "scrape.prom", "http://host:8000"
        s = series.summary
        print(series.name, s.peak_kv_usage_pct, s.max_preemptions_per_s)
        ep = s.episodes["preempting"]                   # longest run of preempting intervals
"""

from .inputs import (
    ScrapingInterrupted,
    is_url,
    metrics_url,
    read_directory,
    read_file,
    read_metrics,
    read_url,
    sniff_path,
    url_problem,
)
from .parse import MetricsError, sniff
from .series import FIELDS, MetricEvidence, MetricsSample, MetricsSeries
from .summary import SHAPES, Episode, MetricsSummary, describe, episodes, summarise

__all__ = [
    "FIELDS",
    "SHAPES",
    "Episode",
    "MetricEvidence",
    "MetricsError",
    "MetricsSample",
    "MetricsSeries",
    "MetricsSummary",
    "ScrapingInterrupted",
    "describe",
    "episodes",
    "is_url",
    "metrics_url",
    "read_directory",
    "read_file",
    "read_metrics",
    "read_url",
    "sniff",
    "sniff_path",
    "summarise",
    "url_problem",
]
