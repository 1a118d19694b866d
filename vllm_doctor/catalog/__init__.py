"""The message catalog: every vLLM (and PyTorch) message vllm-doctor recognises.

Each family module (``config``, ``startup``, ``checks``, ``kv_cache``, ``oom``,
``host_memory``, ``scheduler``, ``requests``, ``errors``) holds a table of :class:`Pattern` objects. A pattern
names the vLLM source file that prints its message (see ``shared/vllm-messages.md``
for the wording by version), one or more *anchor* literals that must occur in the
message before its regular expression is tried, and how to turn a match into an
:class:`~vllm_doctor.events.Event`.

:func:`recognise` finds the anchors present in a record with one scan, then runs
only those patterns, each under a timeout (the ``regex`` module's), so no line can
make matching hang. :data:`ANCHORS` is the full literal set: anything the tool can
recognise contains one of them, which is what a block pre-filter may rely on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import regex

from ..envelopes import Record
from ..events import Event, Phase
from ..units import size_to_gib, to_float, to_gib, to_int

#: Seconds one pattern may spend on one record before it is abandoned.
TIMEOUT = 0.25


def regex_timed_out(exc: BaseException) -> bool:
    """True when ``exc`` is the ``regex`` module's own timeout (``TimeoutError('regex timed
    out')``, raised by a search given ``timeout=``), not a ``TimeoutError`` from elsewhere
    (a caller's ``signal.alarm`` handler, a socket) that merely passed through a search."""
    return isinstance(exc, TimeoutError) and exc.args == ("regex timed out",)


INT_FIELDS = {
    "max_model_len",
    "kv_tokens",
    "gpu_blocks",
    "cpu_blocks",
    "estimated_max_model_len",
    "derived_max_model_len",
    "cumulative",
    "running",
    "waiting",
    "swapped",
    "deferred",
    "preemptions",
    "requested_tokens",
    "prompt_tokens",
    "max_tokens",
    "dummy_requests",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "min_capability",
    "current_capability",
    "engine_index",
    "world_size",
    "gpu_index",
    "status",
    "block_size",
    "concurrency_tokens",
    "shards_loaded",
    "shards_total",
}
FLOAT_FIELDS = {
    "gpu_memory_utilization",
    "max_concurrency",
    "kv_usage_pct",
    "prefix_hit_pct",
    "prompt_tps",
    "generation_tps",
    "cpu_kv_usage_pct",
}


#: Bounds (inclusive unless noted) a value must keep, or the match is dropped at parse time:
#: ``gpu_memory_utilization`` is a fraction in (0, 1] (vllm/config/cache.py CacheConfig
#: validates the same range), percentages stay within 0-100, rates and counts are not negative.
FLOAT_RANGES = {
    "gpu_memory_utilization": (0.0, 1.0),
    "kv_usage_pct": (0.0, 100.0),
    "cpu_kv_usage_pct": (0.0, 100.0),
    "prefix_hit_pct": (0.0, 100.0),
    "prompt_tps": (0.0, 1e9),
    "generation_tps": (0.0, 1e9),
    "max_concurrency": (0.0, 1e9),
}


def convert(name: str, value: str) -> Any:
    """Turn one captured group into a value by its name.

    Counts (:data:`INT_FIELDS`) become ``int`` (not negative), :data:`FLOAT_FIELDS`
    ``float`` within :data:`FLOAT_RANGES` (``gpu_memory_utilization`` must be in (0, 1]),
    ``*_gib`` fields a size in GiB (``"2.00 GiB"``, ``"512 MiB"``, ``"14.9888GB"``); other
    names stay text. Raises ValueError for a value that is not such a number (see
    :mod:`vllm_doctor.units`: ASCII digits, length cap, finite), so a damaged line is
    dropped where it is read instead of carrying ``inf`` or ``"4k"`` into the arithmetic.
    """
    if name in INT_FIELDS:
        number = to_int(value)
        if number < 0:
            raise ValueError(f"{name} cannot be negative: {value[:40]!r}")
        return number
    if name in FLOAT_FIELDS:
        number = to_float(value)
        low, high = FLOAT_RANGES.get(name, (0.0, 1e18))
        if not low <= number <= high or (name == "gpu_memory_utilization" and number == 0):
            raise ValueError(f"{name} out of range: {value[:40]!r}")
        return number
    if name.endswith("_gib"):
        value = value.strip()
        return size_to_gib(value) if " " in value else to_gib(value.rstrip("GiB").rstrip("GB"))
    return value


def default_build(m: "regex.Match", rec: Record) -> Dict[str, Any]:
    return {k: convert(k, v) for k, v in m.groupdict().items() if v is not None}


@dataclass(frozen=True)
class Pattern:
    """One recognisable message.

    ``name``: unique id; ``kind``: the event kind it produces; ``anchors``: literals,
    any of which must be in the message; ``rx``: the expression searched for (a
    ``regex`` pattern string, compiled once); ``source``: the vLLM/PyTorch file (and
    function) that prints it; ``phase``: the phase the message proves; ``build``:
    ``(match, record) -> data dict`` or None to reject the match (default: named
    groups converted by :func:`convert`).
    """

    name: str
    kind: str
    anchors: Tuple[str, ...]
    rx: str
    source: str
    phase: Optional[Phase] = None
    build: Callable[[Any, Record], Optional[Dict[str, Any]]] = default_build

    def compiled(self) -> "regex.Pattern":
        return _compiled(self.rx)


_CACHE: Dict[str, "regex.Pattern"] = {}


def _compiled(rx: str) -> "regex.Pattern":
    pat = _CACHE.get(rx)
    if pat is None:
        pat = _CACHE[rx] = regex.compile(rx)
    return pat


def _collect() -> List[Pattern]:
    from . import checks, config, errors, host_memory, kv_cache, oom, requests, scheduler, startup

    pats: List[Pattern] = []
    for mod in (config, startup, checks, kv_cache, oom, host_memory, scheduler, requests, errors):
        pats.extend(mod.PATTERNS)
    names = [p.name for p in pats]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise RuntimeError(f"duplicate pattern names: {sorted(dupes)}")
    return pats


PATTERNS: Sequence[Pattern] = _collect()
ANCHORS: Tuple[str, ...] = tuple(sorted({a for p in PATTERNS for a in p.anchors}))
_BY_ANCHOR: Dict[str, List[Tuple[int, Pattern]]] = {}
for _i, _p in enumerate(PATTERNS):
    for _a in _p.anchors:
        _BY_ANCHOR.setdefault(_a, []).append((_i, _p))
_ANCHOR_LIST: Tuple[str, ...] = tuple(sorted(ANCHORS))


def _anchors_in(text: str) -> List[Tuple[int, Pattern]]:
    """The patterns whose anchors occur in ``text``, in catalog order.

    A plain substring test per anchor (CPython's fast search, in C) beats one regular
    expression alternation of all anchors by a wide margin (measured: bench/run.py).
    """
    found: Dict[int, Pattern] = {}
    for a in _ANCHOR_LIST:
        if a in text:
            for i, p in _BY_ANCHOR[a]:
                found[i] = p
    return sorted(found.items(), key=lambda item: item[0])


class Catalog:
    """Recognises records; counts patterns abandoned on timeout in ``timeouts``."""

    def __init__(self) -> None:
        self.timeouts = 0

    def recognise(self, rec: Record) -> List[Event]:
        """All events in one record, in catalog order. Never raises."""
        text = rec.text
        events: List[Event] = []
        if not text:
            return events
        if "Received request " in text[:200]:
            # Request logging prints whole prompts: nothing inside them is a server message.
            return events
        for _, p in _anchors_in(text):
            try:
                m = p.compiled().search(text, timeout=TIMEOUT)
                if m is None:
                    continue
                data = p.build(m, rec)
            except TimeoutError as exc:
                if not regex_timed_out(exc):
                    raise  # a caller's timeout (a signal handler, a socket) is not ours to swallow
                self.timeouts += 1
                continue
            except (ValueError, TypeError, KeyError, IndexError, OverflowError):
                continue
            if data is None:
                continue
            events.append(Event(kind=p.kind, record=rec, data=data, phase=p.phase, pattern=p.name))
        if len(events) > 1 and any(e.kind == "engine_dead" for e in events):
            # "RuntimeError: Engine core initialization failed. See root cause above." is an
            # exception line that reports a failure elsewhere: it is no root cause itself.
            for e in events:
                if e.kind == "exception":
                    e.data["consequence"] = True
        return events
