"""Peel the wrappers off each physical line, keeping what they said as structure.

A line from ``journalctl``, ``kubectl logs --timestamps``, ``docker compose logs``
or Ray reaches us inside several envelopes, outermost first::

    Aug 19 18:34:30 host vllm[8707]: (APIServer pid=8707) INFO 08-19 18:34:30 [api_server.py:1] msg
    '-- journald short prefix -----'  '-- process prefix -' '-- vLLM record prefix ---------'

:func:`unwrap` removes, in that order: ANSI colour codes and ``\\r``; a Markdown
quote (``> ``); one outer wrapper (journald short / short-iso, an RFC 3339 time
stamp from ``docker logs -t`` / ``kubectl logs --timestamps``, ``docker compose``'s
``service-1  | ``, ``kubectl logs --prefix``'s ``[pod/NAME/CONTAINER]``, bracketed
supervisor time stamps, FastChat-style ``time | LEVEL | stream |``); process
prefixes (vLLM's ``(EngineCore_DP0 pid=N)``, ``(VllmWorker rank=N pid=N)``, Ray's
``(RayWorkerWrapper pid=N, ip=...)`` nested any number of times, PyTorch's
``[rank0]:``, vllm-omni's ``[Stage-0]``); and vLLM's record prefix in both forms
(``INFO 08-20 10:18:39 [file.py:123] `` and the older ``INFO 08-20 10:18:39
file.py:123] ``) or uvicorn's ``INFO:     ``.

Sources of the formats: vLLM ``vllm/logger.py`` and ``vllm/logging_utils/formatter.py``
(record prefix, ``NewLineFormatter``), ``vllm/utils`` ``_add_prefix``/``decorate_logs``
(process prefix); Ray log deduplication (``[repeated Nx across cluster]``);
``systemd`` ``journalctl -o short``; Docker and Kubernetes log options; see
``shared/vllm-messages.md`` section 0.

A physical line may hold several records glued together (a tqdm bar with no
newline before a record, stats lines pasted without newlines): each embedded
vLLM record prefix starts a new :class:`Record` with the same line number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import List, Optional

import regex

#: Longest part of a line that recognition looks at (a 10 MB line is read on this prefix).
MAX_RECORD_CHARS = 65536

# CSI sequences, and OSC sequences (hyperlinks, titles) up to BEL, ESC \ or the next ESC:
# a sequence never runs past the next escape, so an unterminated one cannot go quadratic.
_ANSI = regex.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")

# Outer wrappers: at most one applies; each is tried only if its first-character test holds.
_JOURNALD_SHORT = regex.compile(
    r"(?P<ts>(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?) "
    r"(?P<host>\S+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<jpid>\d+)\])?: "
)
_JOURNALD_ISO = regex.compile(
    r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)) "
    r"(?P<host>[^\s(\[]+) (?P<ident>[^\s\[\]:()]+)(?:\[(?P<jpid>\d+)\])?: "
)
_RFC3339 = regex.compile(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) ")
_BRACKET_TS = regex.compile(r"\[(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\] ")
# "2025-05-30 09:53:45.386 | " (docker log viewers) and FastChat's
# "2023-12-27 11:25:36 | ERROR | stderr | ".
_PIPE_TS = regex.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?) \| "
    r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) +\| (?P<stream>stdout|stderr) +\| )?"
)
_COMPOSE = regex.compile(r"(?P<service>[A-Za-z0-9][\w.-]*?)(?:[-_](?P<replica>\d+))?\s+\| ")
_KUBECTL_PREFIX = regex.compile(r"\[pod/(?P<pod>[^/\]\s]+)/(?P<container>[^\]\s]+)\] ")

# Process prefixes, any number, nested (Ray task around vLLM process).
_PROC = regex.compile(
    r"\((?P<name>[A-Za-z_][\w.\-]*(?:\((?:[^()]|\([^()]*\))*\))?)"
    r"(?: rank=(?P<rank>\d+))? pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?\) ?"
)
_PROC_NOPID = regex.compile(r"\((?P<name>raylet|gcs_server|dashboard|APIServer|EngineCore(?:_DP\d+)?)\) ")
# PyTorch's glog-style header: [W MMDD ...] with the month not zero-padded ("W409", "W1224").
_TORCH_RANK = regex.compile(r"\[rank(?P<rank>\d+)\]:(?:\[[WEI]\d{3,4} [^\]]*\] ?| ?)")
_STAGE = regex.compile(r"\[(?P<stage>Stage-\d+)\] ")

# vLLM's own record prefix, both generations; and the prefix cut to "[file:line] ".
_VLLM_HEADER = regex.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<date>\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d)(?:\.\d+)? "
    r"\[?(?P<file>[\w./-]+(?:\.\.\./[\w./-]+)?):(?P<line>\d+)\] ?"
)
_VLLM_HEADER_CUT = regex.compile(r"\[(?P<file>[\w./-]+\.py):(?P<line>\d+)\] ")
_UVICORN = regex.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")

# An embedded record prefix (glued records). A process prefix right before it belongs to it.
_EMBEDDED = regex.compile(
    r"(?:\((?:[^()]|\([^()]*\))*? pid=\d+[^()]*\) )*"
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+:\d+\] "
)
_LEVEL_WORDS = ("INFO ", "WARNING ", "ERROR ", "DEBUG ", "CRITICAL ")

_RAY_REPEATED = regex.compile(r" ?\[repeated (?P<n>\d+)x across cluster\](?: \(Ray deduplicates logs by default\..*)?$")

#: Process names vLLM gives its own processes (``_add_prefix`` callers, Ray worker wrappers).
VLLM_PROCESS_NAMES = (
    "APIServer",
    "ApiServer",
    "EngineCore",
    "VllmWorker",
    "Worker",
    "RayWorkerWrapper",
    "RayWorkerVllm",
    "RayWorkerProc",
    "WorkerProc",
    "EngineCore_DP",
)


@dataclass
class Record:
    """One log record, freed of its wrappers.

    ``text`` is the message (what vLLM passed to its logger, or a raw stderr line);
    ``lineno`` the 1-based physical line it started on in ``source``. The remaining
    fields keep what the envelopes said: ``level`` and ``time`` (``MM-DD HH:MM:SS``,
    vLLM prints no year), the vLLM ``file`` that logged it, the innermost process
    ``proc``/``pid``/``rank``, ``pids`` of every process prefix, the journald or
    compose ``host``/``unit``, the wrapper ``wrapper`` that was peeled, ``vllm_header``
    when vLLM's own record prefix was present, and Ray's ``repeated`` count.
    """

    source: str
    lineno: int
    text: str
    raw: str = ""
    level: Optional[str] = None
    time: Optional[str] = None
    file: Optional[str] = None
    proc: Optional[str] = None
    pid: Optional[int] = None
    rank: Optional[int] = None
    pids: List[int] = field(default_factory=list)
    host: Optional[str] = None
    unit: Optional[str] = None
    wrapper: Optional[str] = None
    vllm_header: bool = False
    repeated: int = 1
    continued: int = 0  # physical lines joined onto this record (hard-wrapped pastes)
    line_len: int = 0  # length of the (last) physical line, for spotting hard wraps
    trailing_space: bool = False  # that physical line ended in white space

    @property
    def inner_bare(self) -> bool:
        """True when nothing inside the outer wrapper (journald, docker ...) was found: no
        process prefix, no record prefix. A hard-wrapped continuation looks like this."""
        return self.proc is None and not self.vllm_header and self.level is None and self.rank is None

    @property
    def stream(self) -> str:
        """The key of the process this record came from, for keeping tracebacks apart."""
        if self.pid is not None:
            return f"pid:{self.pid}"
        if self.proc:
            return f"proc:{self.proc}"
        if self.rank is not None:
            return f"rank:{self.rank}"
        return "-"


def _outer(rec: Record, s: str) -> str:
    """Strip at most one outer wrapper; record what it said."""
    c = s[:1]
    m = None
    if c.isdigit():
        if len(s) > 10 and s[10] == "T":
            m = _JOURNALD_ISO.match(s)
            if m:
                rec.wrapper, rec.host, rec.unit = "journald-iso", m["host"], m["ident"]
                if m["jpid"]:
                    rec.pids.append(int(m["jpid"]))
                return s[m.end() :]
            m = _RFC3339.match(s)
            if m:
                rec.wrapper = "timestamp"
                return s[m.end() :]
        m = _PIPE_TS.match(s)
        if m:
            rec.wrapper = "fastchat" if m["stream"] else "pipe-timestamp"
            if m["level"]:
                rec.level = m["level"]
            return s[m.end() :]
    elif c == "[":
        m = _BRACKET_TS.match(s)
        if m:
            rec.wrapper = "bracket-timestamp"
            return s[m.end() :]
        m = _KUBECTL_PREFIX.match(s)
        if m:
            rec.wrapper, rec.host, rec.unit = "kubectl-prefix", m["pod"], m["container"]
            s = s[m.end() :]
            t = _RFC3339.match(s)  # kubectl logs --prefix --timestamps
            return s[t.end() :] if t else s
    elif c.isalpha():
        m = _JOURNALD_SHORT.match(s)
        if m:
            rec.wrapper, rec.host, rec.unit = "journald", m["host"], m["ident"]
            if m["jpid"]:
                rec.pids.append(int(m["jpid"]))
            return s[m.end() :]
        if "| " in s[:64]:
            m = _COMPOSE.match(s)
            if m and not s.startswith(("INFO", "WARNING", "ERROR", "DEBUG", "CRITICAL")):
                rec.wrapper, rec.unit = "compose", m["service"]
                return s[m.end() :]
    return s


def _inner(rec: Record, s: str) -> str:
    """Strip process prefixes (any depth), torch rank, omni stage and vLLM's record prefix."""
    while s:
        c = s[0]
        if c == "(":
            m = _PROC.match(s)
            if m:
                rec.proc = m["name"]
                pid = int(m["pid"])
                rec.pid = pid
                rec.pids.append(pid)
                if m["rank"] is not None:
                    rec.rank = int(m["rank"])
                s = s[m.end() :]
                continue
            m = _PROC_NOPID.match(s)
            if m:
                rec.proc = m["name"]
                s = s[m.end() :]
                continue
        elif c == "[":
            m = _TORCH_RANK.match(s)
            if m:
                rec.rank = int(m["rank"])
                s = s[m.end() :]
                continue
            m = _STAGE.match(s)
            if m:
                s = s[m.end() :]
                continue
            m = _VLLM_HEADER_CUT.match(s)
            if m:
                rec.file, rec.vllm_header = m["file"], True
                return s[m.end() :]
        elif c in "DIWEC":
            m = _VLLM_HEADER.match(s)
            if m:
                rec.level, rec.time = m["level"], f"{m['date']} {m['time']}"
                rec.file, rec.vllm_header = m["file"], True
                return s[m.end() :]
            m = _UVICORN.match(s)
            if m:
                rec.level = m["level"]
                rec.file = "uvicorn"
                return s[m.end() :]
        break
    return s


def _peel(source: str, lineno: int, s: str, outer: bool = True, allowed=None) -> Record:
    rec = Record(source=source, lineno=lineno, text="", raw=s)
    if outer:
        # Markdown quotes from tickets, then one outer wrapper (which may itself be quoted).
        while s.startswith(">"):
            s = s[2:] if s.startswith("> ") else s[1:]
            rec.wrapper = "quote"
        before, kept = s, rec.wrapper
        s = _outer(rec, s)
        if allowed is not None and rec.wrapper != kept and rec.wrapper not in allowed:
            # --input-format forces the wrapper: anything else is part of the message.
            s, rec.wrapper, rec.host, rec.unit, rec.level = before, kept, None, None, None
            rec.pids.clear()
    s = _inner(rec, s)
    if "[repeated " in s:
        m = _RAY_REPEATED.search(s)
        if m:
            rec.repeated = int(m["n"])
            s = s[: m.start()]
    rec.text = s
    return rec


def _journald_json(source: str, lineno: int, s: str) -> Optional[List[Record]]:
    """``journalctl -o json``: one object a line; ``MESSAGE`` is a string, or an array of
    byte values when the message was not valid UTF-8. Returns None when ``s`` is not one."""
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):  # RecursionError: absurdly nested JSON
        return None
    if not isinstance(obj, dict) or "MESSAGE" not in obj:
        return None
    msg = obj.get("MESSAGE")
    if isinstance(msg, list):
        try:
            msg = bytes(int(b) & 0xFF for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError):
            msg = ""
    elif not isinstance(msg, str):
        msg = "" if msg is None else str(msg)
    out: List[Record] = []
    for piece in msg.split("\n") or [""]:
        for rec in unwrap(source, lineno, piece, _outer_ok=False):
            rec.wrapper = "journald-json"
            rec.host = obj.get("_HOSTNAME") if isinstance(obj.get("_HOSTNAME"), str) else None
            rec.unit = obj.get("SYSLOG_IDENTIFIER") if isinstance(obj.get("SYSLOG_IDENTIFIER"), str) else None
            pid = obj.get("_PID")
            if isinstance(pid, (str, int)) and str(pid).isdigit():
                rec.pids.insert(0, int(pid))
            out.append(rec)
    return out


def unwrap(source: str, lineno: int, line: str, _outer_ok: bool = True, allowed=None) -> List[Record]:
    """Turn one physical line into one or more :class:`Record` objects.

    ``line`` may still carry its newline, ANSI colour and ``\\r`` characters. Glued
    records (several vLLM record prefixes on one physical line) come back as
    several records sharing ``lineno``; the text before the first embedded prefix
    stays a record of its own (a progress bar, or a record cut short). Lines longer
    than :data:`MAX_RECORD_CHARS` are recognised on that prefix. Never raises.
    """
    s = line.rstrip("\r\n")
    if _outer_ok and s[:2] == '{"' and '"MESSAGE"' in s and (allowed is None or "journald-json" in allowed):
        recs = _journald_json(source, lineno, s[: 4 * MAX_RECORD_CHARS])
        if recs is not None:
            return recs
    if len(s) > MAX_RECORD_CHARS:
        s = s[:MAX_RECORD_CHARS]
    if "\x1b" in s:
        s = _ANSI.sub("", s)
    if "\r" in s:
        # Carriage returns separate progress-bar updates, a record written after a bar, or
        # whole lines (old CR-only line endings): each piece is read as a line of its own.
        s = "\n".join(p for p in s.split("\r") if p.strip())
        if "\n" in s:
            out: List[Record] = []
            for piece in s.split("\n"):
                out.extend(unwrap(source, lineno, piece, _outer_ok, allowed))
            return out
    stripped = s.rstrip()
    trailing = len(stripped) != len(s)
    s = stripped
    first = _peel(source, lineno, s, outer=_outer_ok, allowed=allowed)
    first.line_len, first.trailing_space = len(s), trailing
    text = first.text
    if not any(w in text for w in _LEVEL_WORDS):
        return [first]
    pieces = [m.start() for m in _EMBEDDED.finditer(text) if m.start() > 0]
    if not pieces:
        return [first]
    out = []
    head = text[: pieces[0]]
    if head.strip():
        first.text = head
        out.append(first)
    for i, start in enumerate(pieces):
        end = pieces[i + 1] if i + 1 < len(pieces) else len(text)
        rec = _peel(source, lineno, text[start:end], outer=False)
        # Glued records share the outer wrapper of their physical line.
        rec.wrapper, rec.host, rec.unit = first.wrapper, first.host, first.unit
        rec.line_len, rec.trailing_space = first.line_len, first.trailing_space
        rec.pids = [p for p in first.pids if p != first.pid] + rec.pids
        out.append(rec)
    return out
