"""One scrape, grouped by server: the samples of one exposition (or one query time step)
become one :class:`Snapshot` per source (model x location).

A source is keyed by the ``model_name`` label and where the server runs (``namespace`` and
``pod``, else ``instance``: labels a Prometheus server adds). Series of one source that differ
in other labels (V1's ``engine``, ``finished_reason``, ``reason``) are kept apart by their
*series key* so that counters can be differenced series by series (a restart of one engine
is seen even while another keeps counting) before they are added up.

Sample names escaped to underscores (``vllm_num_requests_running``, what ``prometheus_client``
writes for an OpenMetrics client) are read as the ``vllm:`` names they stand for.

Metrics without a ``model_name`` label (``vllm:cache_config_info`` in V0,
``process_start_time_seconds``) belong to every source at the same location.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from . import names
from .parse import Sample

#: Sources one input may hold; more are counted, not kept (a federation of a whole cluster).
MAX_SOURCES = 256
#: Series (engines x label sets) kept per field of one source.
MAX_SERIES_PER_FIELD = 256
#: Seconds the time stamps of one source's samples in one scrape may spread and still give the
#: scrape's time: a federation stamps each series with its own last scrape, all within one
#: scrape interval (Prometheus' default is 60 s; 5 min is its staleness limit).
MAX_STAMP_SPREAD_S = 300.0

SourceKey = Tuple[str, str, str]  # (model_name, namespace, pod or instance)


@dataclass
class Snapshot:
    """One source's values at one scrape.

    ``gauges`` / ``counters`` map a field (see :mod:`.names`) to ``{series key: value}``;
    ``created`` holds the counters' ``_created`` times (seconds); ``metric_names`` the metric
    name each field was read from (the newest of the names present); ``config`` the labels
    of ``vllm:cache_config_info`` (strings, as exposed); ``process_start`` the API server's
    start time; ``t`` the latest sample timestamp, when the exposition carries them.
    """

    key: SourceKey
    labels: Dict[str, str] = field(default_factory=dict)
    t: Optional[float] = None
    gauges: Dict[str, Dict[str, float]] = field(default_factory=dict)
    counters: Dict[str, Dict[str, float]] = field(default_factory=dict)
    created: Dict[str, Dict[str, float]] = field(default_factory=dict)
    metric_names: Dict[str, str] = field(default_factory=dict)
    config: Dict[str, str] = field(default_factory=dict)
    process_start: Optional[float] = None
    _rank: Dict[str, int] = field(default_factory=dict, repr=False)

    def put(self, kind: str, fld: str, name: str, skey: str, value: float) -> None:
        """Store one sample in ``kind`` (``gauges``, ``counters`` or ``created``), unless a newer
        name of the same field was already read in this scrape (0.9.2-0.10.x print both the
        old and the new name, with the same value: the new one wins, nothing is counted twice)."""
        table: Dict[str, Dict[str, float]] = getattr(self, kind)
        rank = names.preference(fld, name)
        slot = kind + ":" + fld
        old = self._rank.get(slot)
        if old is not None and rank > old:
            return
        if old is not None and rank < old:
            table[fld] = {}
        self._rank[slot] = rank
        series = table.setdefault(fld, {})
        if skey in series or len(series) < MAX_SERIES_PER_FIELD:
            series[skey] = value
        if kind != "created":
            self.metric_names[fld] = name

    @property
    def engines(self) -> List[str]:
        """The V1 engine indexes seen (``[]`` for V0 / unlabelled series)."""
        seen = set()
        for table in (self.gauges, self.counters):
            for series in table.values():
                for skey in series:
                    for part in skey.split(","):
                        if part.startswith(names.ENGINE_LABEL + "="):
                            seen.add(part.split("=", 1)[1])
        return sorted(seen, key=lambda e: (len(e), e))


def series_key(labels: Dict[str, str]) -> str:
    """The labels that tell series of one source apart, as ``k=v,k=v`` (sorted)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in names.SOURCE_LABELS)


def source_key(labels: Dict[str, str]) -> SourceKey:
    loc = next((labels[k] for k in names.LOCATION_LABELS if labels.get(k)), "")
    return labels.get(names.MODEL_LABEL, ""), labels.get("namespace", ""), loc


@dataclass
class Skipped:
    """What :func:`group` left out of one scrape, counted: ``duplicates`` (a second sample
    of a series already read: the first is kept, so a line appended to a scrape cannot
    change its values) and ``timestamps`` (samples whose exposition time stamp was ignored
    because other samples of their source carry none or another: vLLM writes no time stamps,
    a federation writes one on every sample, so a stray one is damage, never the scrape's
    time)."""

    duplicates: int = 0
    timestamps: int = 0


def group(samples: Iterable[Sample], skipped: Optional[Skipped] = None) -> Tuple[List[Snapshot], int]:
    """Group one scrape's samples into snapshots, one per source (in order of appearance),
    and count the sources left out past :data:`MAX_SOURCES`. Duplicate series and stray time
    stamps are ignored and counted in ``skipped`` (see :class:`Skipped`)."""
    snaps: Dict[SourceKey, Snapshot] = {}
    at_location: Dict[Tuple[str, str], Dict[str, Any]] = {}
    dropped = set()
    seen = set()
    stamps: Dict[SourceKey, List[Optional[float]]] = {}
    skipped = skipped if skipped is not None else Skipped()
    for s in samples:
        name = s.name
        if name.startswith("vllm_"):
            # prometheus_client's OpenMetrics (and text >= 1.0.0) exposition escapes ':' to
            # '_' by default (exposition.choose_encoder): vllm_num_requests_running.
            name = "vllm:" + name[5:]
        elif not name.startswith("vllm:") and name != names.PROCESS_START:
            continue
        labels = s.labels
        if name == names.CACHE_CONFIG_INFO or name == names.PROCESS_START:
            _, ns, loc = source_key(labels)
            slot = at_location.setdefault((ns, loc), {})
            if name == names.PROCESS_START:
                slot["process_start"] = s.value
            else:
                cfg = {k: v for k, v in labels.items() if k not in names.SOURCE_LABELS and k != names.ENGINE_LABEL}
                slot.setdefault("config", {}).update(cfg)
            continue
        gfield = names.gauge_field(name)
        cfield, is_created = ("", False) if gfield else names.counter_field(name)
        by_reason = name == names.WAITING_BY_REASON
        if not (gfield or cfield or by_reason):
            continue
        if math.isnan(s.value):
            continue
        identity = (name, tuple(sorted(labels.items())))
        if identity in seen:
            skipped.duplicates += 1
            continue
        seen.add(identity)
        key = source_key(labels)
        snap = snaps.get(key)
        if snap is None:
            if len(snaps) >= MAX_SOURCES:
                dropped.add(key)
                continue
            snap = snaps[key] = Snapshot(key, {k: labels[k] for k in names.SOURCE_LABELS if labels.get(k)})
        stamps.setdefault(key, []).append(s.timestamp)
        skey = series_key(labels)
        if by_reason:
            snap.put("gauges", "waiting_by_reason", name, skey, s.value)
        elif gfield:
            snap.put("gauges", gfield, name, skey, s.value)
        elif is_created:
            snap.put("created", cfield, name, skey, s.value)
        else:
            snap.put("counters", cfield, name, skey, s.value)
    for key, snap in snaps.items():
        times = stamps.get(key, [])
        if times and all(t is not None for t in times) and max(times) - min(times) <= MAX_STAMP_SPREAD_S:
            snap.t = max(times)
        else:
            skipped.timestamps += sum(1 for t in times if t is not None)
        _, ns, loc = snap.key
        slot = at_location.get((ns, loc)) or (at_location.get(("", "")) if len(at_location) == 1 else None) or {}
        if "config" in slot:
            snap.config = dict(slot["config"])
        snap.process_start = slot.get("process_start")
    return list(snaps.values()), len(dropped)
