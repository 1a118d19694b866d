"""One recognisable message (:class:`Pattern`) and how its captures become values.

A pattern names the vLLM source file that prints its message, one or more *anchor* literals
that must occur in the message before its regular expression is tried, and how a match
becomes an event's data (:func:`default_build`: named groups converted by :func:`convert`,
by the group's name). The family modules of :mod:`vllm_doctor.catalog` hold the tables of
patterns; this module is what they share, so the package imports them without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import regex

from ..events import Phase
from ..record import Record
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
    "num_attention_heads",
    "prompt_limit",
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
        if len(value) <= 18 and value.isdigit() and value.isascii():
            return int(value)  # the common case, as to_int reads it: ASCII digits, below MAX_COUNT
        number = to_int(value)
        if number < 0:
            raise ValueError(f"{name} cannot be negative: {value[:40]!r}")
        return number
    if name in FLOAT_FIELDS:
        if len(value) <= 48 and value.isascii() and value.replace(".", "", 1).isdigit():
            number = float(value)  # the common case ("2148.9"), as to_float reads it
        else:
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


#: ``Pattern.cut_from`` for a message that says nothing certain until it is whole.
NO_CUT = r"(?!)"


@dataclass(frozen=True)
class Pattern:
    """One recognisable message.

    ``name``: unique id; ``kind``: the event kind it produces; ``anchors``: literals,
    any of which must be in the message; ``rx``: the expression searched for (a
    ``regex`` pattern string, compiled once); ``source``: the vLLM/PyTorch file (and
    function) that prints it; ``phase``: the phase the message proves; ``build``:
    ``(match, record) -> data dict`` or None to reject the match (default: named
    groups converted by :func:`convert`; a group the match did not reach is None).

    ``cut_from``: a message cut short by the end of its record (a hard wrap that was not
    joined back, a log store's line cap, a paste cut) still counts once the text from where
    the match starts holds this expression, the message's distinctive part; it then gives
    the values printed before the cut (:meth:`cut_match`). None: one of ``anchors``;
    :data:`NO_CUT`: never (words shared with another message up to the end).
    """

    name: str
    kind: str
    anchors: Tuple[str, ...]
    rx: str
    source: str
    phase: Optional[Phase] = None
    build: Callable[[Any, Record], Optional[Dict[str, Any]]] = default_build
    cut_from: Optional[str] = None

    def compiled(self) -> "regex.Pattern":
        return _compiled(self.rx)

    def cut_match(self, text: str, timeout: float = TIMEOUT) -> "Optional[regex.Match]":
        """The match of the message cut short at the end of ``text``: a partial match of
        :attr:`rx` (the ``regex`` module's ``partial=True``: the text ended before the
        expression did) whose text holds the distinctive part (:attr:`cut_from`), or None.

        Its groups are the values printed whole: a value the end of the text may have cut
        into (a group that reaches it) is left out, the match searched again up to where that
        value began, so a number cut mid-digits is never read as a smaller one. The match's
        ``string`` is the whole text. Raises the ``regex`` module's TimeoutError past
        ``timeout`` seconds."""
        if self.cut_from == NO_CUT:
            return None
        if self.cut_from is not None and not _occurs(self.cut_from, text, timeout):
            # A necessary condition, checked first because it is cheap: the distinctive part
            # must occur in the text at all. Looked for from the text's start it is found
            # wherever the check below finds it (lookbehinds and \b see before a search's
            # start; ^ never matches there; no cut_from uses \G: tests/test_catalog_speed.py).
            return None
        rx = self.compiled()
        end = len(text)
        while True:
            m = rx.search(text, 0, end, partial=True, timeout=timeout)
            if m is None or not m.partial:
                return None
            reaching = [m.start(g) for g in rx.groupindex if m.start(g) >= 0 and m.start(g) < end == m.end(g)]
            if not reaching:
                break
            end = min(reaching)
        if self.cut_from is None:  # an anchor the match reached into (it may open with the anchor's end)
            return m if any(text.find(a, max(0, m.start() - len(a) + 1)) >= 0 for a in self.anchors) else None
        # the distinctive part must reach past where the match starts, not lie wholly before it
        # (an empty partial match at the very end of any text that holds it is no message)
        for c in _compiled(self.cut_from).finditer(text, max(0, m.start() - 200), timeout=timeout):
            if c.end() > m.start():
                return m
        return None


_CACHE: Dict[str, "regex.Pattern"] = {}
#: Characters with a meaning in a ``regex`` expression outside a set: an expression without
#: any of them matches itself, literally.
_META = frozenset(".^$*+?{}[]\\|()")
_PLAIN: Dict[str, bool] = {}


def _occurs(rx: str, text: str, timeout: float) -> bool:
    """True when ``rx`` matches somewhere in ``text``: a substring test when ``rx`` is plain
    text (``reqs, Swapped: ``), else a search. Raises the ``regex`` module's TimeoutError."""
    plain = _PLAIN.get(rx)
    if plain is None:
        plain = _PLAIN[rx] = not _META.intersection(rx)
    if plain:
        return rx in text
    return _compiled(rx).search(text, timeout=timeout) is not None


def _compiled(rx: str) -> "regex.Pattern":
    pat = _CACHE.get(rx)
    if pat is None:
        pat = _CACHE[rx] = regex.compile(rx)
    return pat
