"""The periodic stats line, read by one anchored expression (issue 15).

A busy server prints its stats line every few seconds, and request logging aside it is most
of what the pre-filter passes on: on bench/generate.py's busy V1 log, 37,000 of the 37,200
candidate lines of a GiB. The catalog reads it by searching both stats patterns of
:mod:`vllm_doctor.catalog.scheduler` (``v0_stats``, ``v1_stats``), each with its optional
unknown fields and under a timeout, then converting every group by name: about 14 us a
line. :func:`read` reads the usual wordings in one anchored match with ASCII digits and
converts the values itself: about 4 us.

Wordings read (any other goes the catalog's general way, which reads it as before):

* V1 ``vllm/v1/metrics/loggers.py LoggingStatLogger.log`` (v0.10 to v0.33):
  ``[Engine %03d: |N Engines Aggregated: ]Avg prompt throughput: %.1f tokens/s, Avg
  generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs[, Deferred: %d
  reqs][, Preemptions: %d], GPU KV cache usage: %.1f%%[, Prefix cache hit rate: %.1f%%]``
  (from v0.30 ``%s KV cache usage``, the device named), and whatever follows it;
* V0 ``vllm/engine/metrics.py LoggingStatLogger.log``: ``Avg prompt throughput: %.1f
  tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Swapped: %d reqs,
  Pending: %d reqs, GPU KV cache usage: %.1f%%[, CPU KV cache usage: %.1f%%]``.

Why the events are those of the general way (``tests/test_catalog_speed.py`` compares the
two on the corpus, on every wording of the table and on generated lines):

* It is used only when the anchors found in the record select exactly ``v0_stats`` and
  ``v1_stats`` (no other pattern could match), and when the text lacks the literal the other
  stats pattern needs (``Swapped: `` for V0, ``Waiting: `` for V1): that pattern can then
  neither match nor be read cut short (its expression and its ``cut_from`` hold it).
* A match at position 0 is the leftmost one, and the expression is the general one with
  fewer choices, each tried in the same order (optional groups first, greedy digits): the
  general search makes the same choices and captures the same text. A trailing optional
  field is taken, or its label must be absent, so a value the fast expression cannot read
  (a non-ASCII digit, ``1.2.3``) never makes it skip what the general one would read.
* Values: ``[0-9]{1,18}`` counts and ``[0-9]{1,20}(.[0-9]{1,20})?`` rates are what
  :func:`~vllm_doctor.catalog.pattern.convert` reads by its own fast path, to the same
  ``int``/``float``; a rate out of :data:`~vllm_doctor.catalog.pattern.FLOAT_RANGES` goes the
  general way (which counts it as unread).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import regex

from ..events import Event
from ..record import Record
from .pattern import FLOAT_RANGES, Pattern

_INT = r"([0-9]{1,18})"
_RATE = r"([0-9]{1,20}(?:\.[0-9]{1,20})?)"
_THROUGHPUT = rf"Avg prompt throughput: {_RATE} tokens/s, Avg generation throughput: {_RATE} tokens/s, "

#: V1: groups engine_index, prompt_tps, generation_tps, running, waiting, deferred,
#: preemptions, kv_usage_pct, prefix_hit_pct.
V1 = regex.compile(
    rf"(?:Engine {_INT}: |[0-9]+ Engines Aggregated: )?{_THROUGHPUT}Running: {_INT} reqs, Waiting: {_INT} reqs"
    rf"(?:, Deferred: {_INT} reqs)?(?:, Preemptions: {_INT})?, (?:GPU|[A-Z]{{2,5}}) KV cache usage: {_RATE}%"
    rf"(?:, Prefix cache hit rate: {_RATE}%|(?!, Prefix cache hit rate: ))"
)
V1_FIELDS = (
    ("engine_index", None),
    ("prompt_tps", float),
    ("generation_tps", float),
    ("running", None),
    ("waiting", None),
    ("deferred", None),
    ("preemptions", None),
    ("kv_usage_pct", float),
    ("prefix_hit_pct", float),
)
#: V0: groups prompt_tps, generation_tps, running, swapped, waiting (printed "Pending"),
#: kv_usage_pct, cpu_kv_usage_pct.
V0 = regex.compile(
    rf"{_THROUGHPUT}Running: {_INT} reqs, Swapped: {_INT} reqs, Pending: {_INT} reqs, GPU KV cache usage: {_RATE}%"
    rf"(?:, CPU KV cache usage: {_RATE}%|(?!, CPU KV cache usage: ))"
)
V0_FIELDS = (
    ("prompt_tps", float),
    ("generation_tps", float),
    ("running", None),
    ("swapped", None),
    ("waiting", None),
    ("kv_usage_pct", float),
    ("cpu_kv_usage_pct", float),
)


def _data(values: Tuple[Optional[str], ...], fields) -> Optional[dict]:
    """The event data of one match (the names and order a general build gives), or None when
    a rate is out of its range (read the general way then)."""
    data = {}
    for (name, kind), v in zip(fields, values):
        if v is None:
            continue
        if kind is None:
            data[name] = int(v)
        else:
            number = float(v)
            low, high = FLOAT_RANGES[name]
            if not low <= number <= high:
                return None
            data[name] = number
    return data


def read(text: str, rec: Record, selected: Sequence[Tuple[int, Pattern]]) -> Optional[Event]:
    """The stats event of ``rec`` (whose text, as the catalog reads it, is ``text``) when
    ``selected`` (the patterns its anchors chose) is exactly the two stats patterns and the
    line is one of the wordings above; None otherwise (then read it the general way)."""
    if len(selected) != 2:
        return None
    p0, p1 = selected[0][1], selected[1][1]
    if p0.name != "v0_stats" or p1.name != "v1_stats":
        return None
    if text[:1] == "A" and "Swapped: " in text:
        if "Waiting: " in text:
            return None
        m, fields, p, engine = V0.match(text), V0_FIELDS, p0, "v0"
    elif "Swapped: " not in text:
        m, fields, p, engine = V1.match(text), V1_FIELDS, p1, "v1"
    else:
        return None
    if m is None:
        return None
    data = _data(m.groups(), fields)
    if data is None:
        return None
    data["engine"] = engine
    return Event(kind=p.kind, record=rec, data=data, phase=p.phase, pattern=p.name)
