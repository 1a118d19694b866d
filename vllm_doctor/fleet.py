"""JSON envelopes: what log stores and structured logging put around vLLM's lines.

Each kind is one JSON object a line, recognised by its keys (never by position):

* ``journalctl -o json`` (systemd ``journalctl(1)``, "JSON" output): ``MESSAGE`` is a
  string, or an array of byte values when the message was not valid UTF-8; ``_PID``,
  ``_HOSTNAME``, ``SYSLOG_IDENTIFIER``.
* Grafana Loki ``logcli query ... -o jsonl`` (``pkg/logcli/output/jsonl.go``):
  ``{"labels": {...}, "line": "...", "timestamp": "RFC 3339 nano"}``; the ``pod`` label
  (else a container, service, host or job label) names the source.
* CloudWatch Logs ``FilteredLogEvent`` (``aws logs filter-log-events``, one event per line
  after ``jq -c '.events[]'``, or ``aws logs tail --format none``): ``logStreamName``,
  ``message``, ``timestamp``, ``ingestionTime``, ``eventId``; and a whole response on one
  line (``{"events": [...]}``). ``logStreamName`` names the source. The CLI's default
  pretty-printed response is read by :class:`CloudWatchPretty`.
* vLLM's JSON logging (``--logging-config.formatter json``, or ``VLLM_LOGGING_CONFIG_PATH``
  with ``pythonjsonlogger.jsonlogger.JsonFormatter``; vLLM ``vllm/logger.py``,
  ``vllm/logging_utils/formatter.py`` ``JSON_FORMAT``): ``message``, ``levelname``,
  ``asctime``, ``name``, ``process``, ``processName``, ``vllm_process_name`` and, with a
  custom format, ``filename`` / ``lineno``; a logged exception adds ``exc_info``.
* Docker's ``json-file`` driver (``/var/lib/docker/containers/*/*-json.log``):
  ``{"log": "...\\n", "stream": "stdout", "time": "..."}``.

Numbers from these envelopes (PIDs) are taken only as ASCII digits of bounded length
(:func:`envelope_int`); anything else is ignored and the line is still read.
"""

from __future__ import annotations

import json
from typing import Any, Callable, List, Optional

from .record import Record

#: Longest run of digits taken as a PID, rank or repeat count (Linux PIDs have at most 7).
MAX_DIGITS = 10


def envelope_int(value: Any) -> Optional[int]:
    """An envelope number (PID, rank, repeat count) from a JSON value or matched text:
    an int, or a string of 1 to :data:`MAX_DIGITS` ASCII digits; None for anything else
    (``"²"``, 5000 digits, ``True``, floats), so a hostile value is ignored, never raised."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 10**MAX_DIGITS else None
    if isinstance(value, str) and 0 < len(value) <= MAX_DIGITS and value.isascii() and value.isdigit():
        return int(value)
    return None


#: ``peel(text, depth)`` turns one message line into records (the caller's unwrapping).
Peel = Callable[[str, int], list]

#: Keys that make an object with a string ``message`` a Python logging record (vLLM JSON):
#: one of the first, or two of the second (a request or error body has ``message`` too).
LOGGING_KEYS = ("levelname", "asctime", "levelno")
LOGGING_EXTRA_KEYS = ("process", "processName", "vllm_process_name", "filename", "lineno", "name", "funcName")
_CLOUDWATCH_KEYS = ("logStreamName", "eventId", "ingestionTime")
#: Loki labels that name a source, in order of preference when there is no ``pod`` label.
LOKI_SOURCE_LABELS = (
    "container_name",
    "compose_service",
    "service_name",
    "container",
    "host",
    "hostname",
    "instance",
    "job",
    "filename",
)
MAX_NESTING = 3  # a Loki line holding a Docker json-file line holding vLLM JSON


def _str(v: Any) -> Optional[str]:
    return v if isinstance(v, str) else None


def _pieces(text: str) -> List[str]:
    return text.split("\n") if "\n" in text else [text]


def kind_of(obj: Any) -> Optional[str]:
    """The envelope kind of one parsed JSON object (a :data:`formats.FORMATS` wrapper
    name), or None when it is none of the kinds above."""
    if not isinstance(obj, dict):
        return None
    if "MESSAGE" in obj:
        return "journald-json"
    if isinstance(obj.get("line"), str) and ("labels" in obj or "timestamp" in obj):
        return "loki"
    if isinstance(obj.get("events"), list):
        return "cloudwatch-json"
    if isinstance(obj.get("message"), str):
        if any(k in obj for k in _CLOUDWATCH_KEYS):
            return "cloudwatch-json"
        if any(k in obj for k in LOGGING_KEYS) or sum(k in obj for k in LOGGING_EXTRA_KEYS) >= 2:
            return "vllm-json"
    if isinstance(obj.get("log"), str) and ("stream" in obj or "time" in obj):
        return "docker-json"
    return None


def records(obj: Any, kind: str, source: str, lineno: int, peel: Peel, depth: int = 0) -> list:
    """The records one JSON object of ``kind`` holds (see the module docstring)."""
    if kind == "journald-json":
        return _journald(obj, peel, depth)
    if kind == "loki":
        return _loki(obj, peel, depth)
    if kind == "cloudwatch-json":
        events = obj.get("events") if isinstance(obj.get("events"), list) else [obj]
        out: list = []
        for ev in events:
            if isinstance(ev, dict) and isinstance(ev.get("message"), str):
                out.extend(cloudwatch_event(ev["message"], _str(ev.get("logStreamName")), peel, depth))
        return out
    if kind == "vllm-json":
        return vllm_json(obj, source, lineno)
    if kind == "docker-json":
        out = []
        for piece in _pieces(obj["log"].rstrip("\n")):
            for rec in peel(piece, depth + 1):
                rec.wrapper = "docker-json"
                out.append(rec)
        return out
    return []


def _journald(obj: dict, peel: Peel, depth: int) -> list:
    msg = obj.get("MESSAGE")
    if isinstance(msg, list):
        try:
            msg = bytes(int(b) & 0xFF for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError, OverflowError):
            msg = ""
    elif not isinstance(msg, str):
        msg = "" if msg is None else str(msg)
    pid = envelope_int(obj.get("_PID"))
    host, unit = _str(obj.get("_HOSTNAME")), _str(obj.get("SYSLOG_IDENTIFIER"))
    out = []
    for piece in _pieces(msg):
        for rec in peel(piece, MAX_NESTING):  # journald's message is the raw line: no outer wrappers
            rec.wrapper, rec.host, rec.unit = "journald-json", host, unit
            if pid is not None:
                rec.pids.insert(0, pid)
            out.append(rec)
    return out


def loki_source(labels: Any):
    """``(host, unit)`` for a Loki label set: the pod and its container, or (None, the
    first of :data:`LOKI_SOURCE_LABELS` present)."""
    if not isinstance(labels, dict):
        return None, None
    pod = _str(labels.get("pod")) or _str(labels.get("pod_name"))
    if pod:
        return pod, _str(labels.get("container")) or _str(labels.get("container_name"))
    for name in LOKI_SOURCE_LABELS:
        value = _str(labels.get(name))
        if value:
            return None, value
    return None, None


def _loki(obj: dict, peel: Peel, depth: int) -> list:
    host, unit = loki_source(obj.get("labels"))
    out = []
    for piece in _pieces(obj["line"].rstrip("\n")):
        for rec in peel(piece, depth + 1):
            rec.wrapper, rec.host, rec.unit = "loki", host, unit
            out.append(rec)
    return out


def cloudwatch_event(message: str, stream: Optional[str], peel: Peel, depth: int) -> list:
    """Records of one CloudWatch event's message, its stream name kept as ``unit``."""
    out = []
    for piece in _pieces(message.rstrip("\n")):
        for rec in peel(piece, depth + 1):
            rec.wrapper, rec.host, rec.unit = "cloudwatch-json", None, stream
            out.append(rec)
    return out


def _mmdd_time(asctime: Optional[str]) -> Optional[str]:
    """``2025-01-15 10:00:00,123`` (logging's default asctime) -> ``01-15 10:00:00``."""
    if not asctime or len(asctime) < 19 or asctime[4] != "-" or asctime[10] not in " T":
        return None
    return f"{asctime[5:10]} {asctime[11:19]}"


def vllm_json(obj: dict, source: str, lineno: int) -> list:
    """Records of one python-json-logger object: the message (each of its lines) and the
    lines of ``exc_info``, all carrying the record's level, file, process and time."""

    level = _str(obj.get("levelname"))
    name = _str(obj.get("name"))
    file = _str(obj.get("filename")) or ("uvicorn" if name and name.startswith("uvicorn") else None)
    pid = envelope_int(obj.get("process"))
    proc = _str(obj.get("vllm_process_name")) or _str(obj.get("processName"))
    if proc in ("MainProcess", "MainThread"):
        proc = None
    time = _mmdd_time(_str(obj.get("asctime")))
    vllm_header = name is None or name.startswith("vllm")
    text = obj["message"]
    exc = _str(obj.get("exc_info"))
    lines = _pieces(text) + (_pieces(exc.rstrip("\n")) if exc else [])
    out = []
    for piece in lines:
        rec = Record(source=source, lineno=lineno, text=piece.rstrip("\r"), raw=piece)
        rec.wrapper, rec.level, rec.file, rec.time, rec.vllm_header = "vllm-json", level, file, time, vllm_header
        rec.proc = proc
        if pid is not None:
            rec.pid = pid
            rec.pids.append(pid)
        rec.line_len = len(rec.text)
        out.append(rec)
    return out


class CloudWatchPretty:
    """Reads the AWS CLI's default output of ``aws logs filter-log-events`` (the response
    pretty-printed with four-space indents, one key a line) in one pass.

    ``feed(lineno, line)`` returns None for a line that is not part of such a response (the
    caller reads it as text), else the ``(lineno, message, stream)`` triples completed by
    this line (``lineno`` is the message's own line): an
    event's message is held until its object closes, so its ``logStreamName`` is known
    whatever the key order."""

    def __init__(self) -> None:
        self._msg: Optional[str] = None
        self._stream: Optional[str] = None
        self._lineno = 0

    def feed(self, lineno: int, line: str):
        s = line.strip()
        if not s:
            return None
        c = s[0]
        if c == '"':
            key_end = s.find('":')
            key = s[1:key_end] if key_end > 0 else ""
            if key == "message" or key == "logStreamName":
                try:
                    value = json.loads("{" + s.rstrip(",") + "}").get(key)
                except (ValueError, RecursionError):
                    return None
                if isinstance(value, str):
                    if key == "message":
                        self._msg, self._lineno = value, lineno
                    else:
                        self._stream = value
            return []
        if c in "}]{[" and s.rstrip(",") in ("{", "}", "[", "]", "[]", "{}"):
            if c == "}" and self._msg is not None:
                done = [(self._lineno, self._msg, self._stream)]
                self._msg = self._stream = None
                return done
            if c == "{":
                self._msg = self._stream = None
            return []
        return None  # a JSON object on one line, or text: the caller reads it
