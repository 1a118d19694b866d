"""Read one exposition into samples: Prometheus text 0.0.4, OpenMetrics 1.0, or a Prometheus
HTTP API ``query_range`` (or instant ``query``) JSON answer.

The text formats are parsed with ``prometheus_client``'s parsers
(``prometheus_client.parser`` for 0.0.4, ``prometheus_client.openmetrics.parser`` for
OpenMetrics). Those parsers stop at the first line they cannot read; a scrape cut short by
``curl`` or glued to a shell prompt must not lose every line after it, so on an error the
exposition is parsed again one family at a time, then one line at a time, and the lines that
still fail are counted (``malformed``), never fatal.

The format is told from the content, never from the file name (:func:`sniff`): JSON with a
``resultType`` is a query answer; text whose lines are all ``# ...`` comments or
``name{labels} value [timestamp]`` samples is an exposition, OpenMetrics when it ends with
``# EOF`` or declares ``# UNIT``. Timestamps come out in seconds since the epoch (0.0.4
writes milliseconds, OpenMetrics seconds).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

PROMETHEUS = "prometheus"
OPENMETRICS = "openmetrics"
QUERY_RANGE = "query_range"

#: Lines of the head looked at by :func:`sniff`.
SNIFF_LINES = 64

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABELS = r'\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\}'
_VALUE = r"[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+\.|Inf|inf|NaN|nan)"
_SAMPLE_LINE = re.compile(rf"^{_NAME}(?:{_LABELS})?[ \t]+{_VALUE}(?:[ \t]+[-+]?[0-9.eE+]+)?[ \t]*(?:#.*)?$")
_COMMENT = re.compile(rf"^#[ \t]*(?:(HELP|TYPE|UNIT)[ \t]+{_NAME}|EOF\s*$)")


class MetricsError(Exception):
    """A metrics input cannot be read at all; the message is one line for the operator."""


@dataclass(frozen=True)
class Sample:
    """One sample: metric ``name`` as exposed (``vllm:num_preemptions_total``), ``labels``,
    ``value``, and ``timestamp`` in seconds since the epoch when the exposition carries one."""

    name: str
    labels: Dict[str, str]
    value: float
    timestamp: Optional[float] = None


def sniff(head: str) -> Optional[str]:
    """The format of an input from its first characters: :data:`PROMETHEUS`,
    :data:`OPENMETRICS`, :data:`QUERY_RANGE`, or None (not metrics: a log, a web page)."""
    text = head.lstrip("\ufeff \t\r\n")
    if not text:
        return None
    if text[0] in "{[":
        h = text[:4096]
        api = '"status"' in h and ('"errorType"' in h or '"data"' in h)  # a Prometheus API answer
        return QUERY_RANGE if '"resultType"' in h or '"result"' in h or api else None
    lines = [ln.strip() for ln in text.splitlines()[:SNIFF_LINES]]
    lines = [ln for ln in lines if ln]
    if not lines:
        return None
    good = samples = 0
    om = False
    for ln in lines:
        if ln.startswith("#"):
            m = _COMMENT.match(ln)
            if m:
                good += 1
                om = om or m.group(1) == "UNIT" or ln.startswith("# EOF")
            # other comments are neither for nor against
            elif ln.startswith("# "):
                good += 1
        elif _SAMPLE_LINE.match(ln):
            good += 1
            samples += 1
    first = lines[0]
    first_ok = first.startswith("#") and bool(_COMMENT.match(first)) or bool(_SAMPLE_LINE.match(first))
    if not first_ok or (samples == 0 and not any(ln.startswith(("# TYPE", "# HELP")) for ln in lines)):
        return None
    if good < 0.9 * len(lines):
        return None
    if om or text.rstrip().endswith("# EOF"):
        return OPENMETRICS
    return PROMETHEUS


#: Exposition timestamps (seconds since the epoch) read as such: 0 to the year 5138. A sample
#: outside keeps its value and loses its time stamp (the scrape's time is used instead).
MAX_TIMESTAMP_S = 1e11


def usable(value: float) -> bool:
    """True for a sample value the series can use: finite (``NaN`` says "no value", and a
    counter or gauge at ``+Inf`` is no reading; both are skipped and counted)."""
    return math.isfinite(value)


def _time(ts: Optional[float]) -> Optional[float]:
    return ts if ts is not None and math.isfinite(ts) and 0 <= ts <= MAX_TIMESTAMP_S else None


def _from_families(families, scale: float = 1.0) -> Iterator[Sample]:
    for fam in families:
        for s in fam.samples:
            ts = s.timestamp
            if ts is not None:
                # OpenMetrics timestamps are seconds; prometheus_client may give a Timestamp.
                ts = float(ts) * scale if not hasattr(ts, "sec") else ts.sec + ts.nsec / 1e9
            yield Sample(s.name, dict(s.labels), float(s.value), _time(ts))


def _chunks(lines: List[str]) -> Iterator[List[str]]:
    """Split an exposition into families: a ``# HELP``/``# TYPE`` header opens one."""
    chunk: List[str] = []
    seen_sample = False
    for ln in lines:
        if ln.startswith(("# HELP", "# TYPE")) and seen_sample:
            yield chunk
            chunk, seen_sample = [], False
        chunk.append(ln)
        if ln and not ln.startswith("#"):
            seen_sample = True
    if chunk:
        yield chunk


def parse_text(text: str, fmt: str = PROMETHEUS) -> Tuple[List[Sample], int]:
    """All samples of one exposition and the number of lines that could not be read.

    ``fmt`` is :data:`PROMETHEUS` or :data:`OPENMETRICS` (see :func:`sniff`). Raises nothing
    for bad lines: they are skipped and counted."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
    from prometheus_client.parser import text_string_to_metric_families as prom_parse

    text = text.lstrip("\ufeff")
    try:
        if fmt == OPENMETRICS:
            return _finite(list(_from_families(om_parse(text if text.endswith("\n") else text + "\n"))), 0)
        return _finite(list(_from_families(prom_parse(text))), 0)
    except (ValueError, TypeError, IndexError, KeyError, OverflowError):
        pass
    # Fallback: the lenient 0.0.4 parser, one family, then one line, at a time. Its
    # timestamps are read as milliseconds: an OpenMetrics input's seconds are scaled back.
    scale = 1000.0 if fmt == OPENMETRICS else 1.0
    out: List[Sample] = []
    bad = 0
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("# EOF")]
    for chunk in _chunks(lines):
        try:
            out.extend(_from_families(prom_parse("\n".join(chunk) + "\n"), scale))
            continue
        except (ValueError, TypeError, IndexError, KeyError, OverflowError):
            pass
        header = [ln for ln in chunk if ln.startswith("# TYPE")][:1]
        for ln in chunk:
            if ln.startswith("#"):
                continue
            try:
                out.extend(_from_families(prom_parse("\n".join(header + [ln]) + "\n"), scale))
            except (ValueError, TypeError, IndexError, KeyError, OverflowError):
                bad += 1
    return _finite(out, bad)


def _finite(samples: List[Sample], bad: int) -> Tuple[List[Sample], int]:
    """``samples`` without the unusable ones (:func:`usable`), which are counted as bad."""
    kept = [s for s in samples if usable(s.value)]
    return kept, bad + len(samples) - len(kept)


def _value(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def parse_query(text: str, name: str, skipped: Optional[List[str]] = None) -> Iterator[Tuple[float, Sample]]:
    """The points of a Prometheus HTTP API answer (``/api/v1/query_range``: ``resultType``
    ``matrix``; ``/api/v1/query``: ``vector``), as ``(time in seconds, Sample)`` in the answer's
    order. Accepts one answer object or a JSON array of them (one per query). A point that is
    not ``[time, "value"]`` with a time in range and a finite value is skipped and, when
    ``skipped`` is given, named in it. Raises :class:`MetricsError` for an answer with
    ``status: error`` or of another shape (a series whose ``metric`` is not an object, JSON
    nested too deeply to read)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise MetricsError(f"{name}: not valid JSON ({exc})") from None
    except RecursionError:
        raise MetricsError(f"{name}: not a Prometheus query answer (JSON nested too deeply)") from None
    answers = doc if isinstance(doc, list) else [doc]
    for ans in answers:
        if not isinstance(ans, dict):
            raise MetricsError(f"{name}: not a Prometheus query answer (a JSON object with data.result)")
        if ans.get("status") == "error":
            raise MetricsError(f"{name}: the query failed: {ans.get('errorType', '')} {ans.get('error', '')}".strip())
        data = ans.get("data", ans)
        result = data.get("result") if isinstance(data, dict) else None
        kind = data.get("resultType", "matrix") if isinstance(data, dict) else None
        if not isinstance(result, list) or kind not in ("matrix", "vector"):
            raise MetricsError(f"{name}: not a Prometheus query answer (resultType matrix or vector, data.result)")
        for series in result:
            if not isinstance(series, dict):
                continue
            metric_labels = series.get("metric") or {}
            if not isinstance(metric_labels, dict):
                raise MetricsError(f'{name}: not a Prometheus query answer (a series\' "metric" is not an object)')
            labels = {str(k): str(v) for k, v in metric_labels.items()}
            metric = labels.pop("__name__", "")
            points = series.get("values") if kind == "matrix" else [series.get("value")]
            for point in points if isinstance(points, list) else ():
                if not isinstance(point, (list, tuple)) or len(point) != 2:
                    if skipped is not None:
                        skipped.append(metric)
                    continue
                t, v = _time(_value(point[0])), _value(point[1])
                if t is None or not usable(v):
                    if skipped is not None:
                        skipped.append(metric)
                    continue
                yield t, Sample(metric, labels, v, t)
