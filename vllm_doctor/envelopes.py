"""Peel the wrappers off each physical line, keeping what they said as structure.

A line from ``journalctl``, ``kubectl logs --timestamps``, ``docker compose logs``
or Ray reaches us inside several envelopes, outermost first::

    Aug 19 18:34:30 host vllm[8707]: (APIServer pid=8707) INFO 08-19 18:34:30 [api_server.py:1] msg
    '-- journald short prefix -----'  '-- process prefix -' '-- vLLM record prefix ---------'

:func:`unwrap` removes, in that order:

1. paste damage: a byte-order mark, ANSI colour codes (real ``ESC [`` or pasted as caret
   text ``^[[0;36m``), a trailing ``^M`` (CRLF shown by an editor), ``\\r``, and a TUI pane's
   box border (``│ ... │`` right-padded to the pane width, k9s);
2. a Markdown quote (``> ``);
3. one outer wrapper: journald short / short-iso, an RFC 3339 time stamp from ``docker logs
   -t`` / ``kubectl logs --timestamps`` (nanoseconds included; a CRI ``stdout F`` after it;
   Loki ``logcli``'s default ``{labels}`` after it), ``aws logs tail``'s stream name after
   its time stamp (when the input is CloudWatch's), a ``YYYY-MM-DD HH:MM:SS`` time stamp
   (Docker Desktop, application loggers), ``docker compose``'s ``service-1  | ``,
   ``kubectl logs --prefix``'s ``[pod/NAME/CONTAINER]``, bracketed supervisor time stamps,
   FastChat-style ``time | LEVEL | stream |``;
4. beneath it, known wrappers and prefixes learned for this input
   (:mod:`vllm_doctor.signatures`: ``stern``'s ``<pod> <container>``, any wrapper that
   repeats before vLLM's records), in any order, at most :data:`MAX_LAYERS` in all: ``aws
   logs tail`` around a launcher's own prefix around its time stamp, ``stern`` around
   ``docker logs -t``. Learning is per layer (:meth:`Envelopes.sniff`): a known wrapper
   ends an unknown prefix as an anchor does, so each layer is learned on its own and peeled
   from every line that carries it, anchored or not. The wrapper nearest the line that
   names a source (pod, stream, journald process) names the record's;
5. process prefixes (vLLM's ``(EngineCore_DP0 pid=N)``, ``(VllmWorker rank=N pid=N)``,
   Ray's ``(RayWorkerWrapper pid=N, ip=...)`` nested any number of times, PyTorch's
   ``[rank0]:``, vllm-omni's ``[Stage-0]``);
6. vLLM's record prefix in both forms (``INFO 08-20 10:18:39 [file.py:123] `` and the
   older ``INFO 08-20 10:18:39 file.py:123] ``) or uvicorn's ``INFO:     ``; after an
   outer time stamp, an application's own record prefix (``ERROR 56542 [file.py:64] ``,
   ``- name - INFO - ``, ``INFO     [file.py:1] ``, Ray's ``ERR cli.py:71 -- ``, loguru's
   ``INFO | mod:func:1 - ``, a launcher's ``[Error] (Process) ``), with a ``file.py:N``
   moved to the end of the line (Python ``rich`` handlers) taken off too. Its level is the
   application's (records under it stay bare), except right inside one of vLLM's own process
   prefixes, where it is that process's logger in another layout: the record's level.

JSON envelopes (journald ``-o json``, Loki ``-o jsonl``, CloudWatch events, vLLM's JSON
logging, Docker ``json-file``) are read by :mod:`vllm_doctor.fleet`.

Sources of the formats: vLLM ``vllm/logger.py`` and ``vllm/logging_utils/formatter.py``
(record prefix, ``NewLineFormatter``), ``vllm/utils`` ``_add_prefix``/``decorate_logs``
(process prefix); Ray log deduplication (``[repeated Nx across cluster]``);
``systemd`` ``journalctl -o short``; Docker and Kubernetes log options; the CRI logging
format (``kubelet`` ``/var/log/pods``: ``time stream P|F message``); Loki
``pkg/logcli/output/default.go``; AWS CLI ``awscli/customizations/logs/tail.py``; see
``shared/vllm-messages.md`` section 0.

A physical line may hold several records glued together (a tqdm bar with no
newline before a record, stats lines pasted without newlines, a terminal copy that
padded each line to the pane's width and lost the newlines): each embedded vLLM record
prefix, and after :data:`PADDING_MIN` spaces any anchor, traceback line, frame or
exception line, starts a new :class:`Record` with the same line number.

Envelope numbers (PIDs, ranks, Ray repeat counts) are read as ASCII digits, at most
:data:`vllm_doctor.fleet.MAX_DIGITS` of them; a longer or foreign value is ignored and the
line is still read.
"""

from __future__ import annotations

import json
from typing import Dict, FrozenSet, List, Optional, Tuple

import regex

from . import fleet
from .escapes import has_html_tags, has_markdown_escape, html_lines, unescape
from .fleet import MAX_DIGITS
from .numbered import Gutter, NumberedLearner
from .numbered import strip as strip_numbers
from .processes import is_vllm_process
from .record import Record
from .signatures import (
    ANCHOR,
    MAX_ANCHOR,
    MAX_PREFIX,
    MAX_TOKENS,
    Learner,
    Signature,
    anchored,
    find_prefix,
    starts_with_anchor,
)

#: Longest part of a line that recognition looks at (a 10 MB line is read on this prefix).
MAX_RECORD_CHARS = 65536
#: Wrappers and learned prefixes peeled off one line at most, outermost first (``aws logs
#: tail`` around ``stern`` around a launcher's time stamp around a learned ``[Error] ``: 4).
MAX_LAYERS = 4

# CSI sequences, and OSC sequences (hyperlinks, titles) up to BEL, ESC \ or the next ESC:
# a sequence never runs past the next escape, so an unterminated one cannot go quadratic.
# APC sequences too (ESC _ ... BEL): Buildkite's raw log stamps each line with one,
# ``ESC _bk;t=1778177757176 BEL`` (its terminal renderer reads them as time stamps).
_ANSI = regex.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[\]_][^\x07\x1b]*(?:\x07|\x1b\\)?")
# The same pasted in caret notation (``cat -v``, editors, web pages): ESC shown as "^[".
_CARET_ANSI = regex.compile(r"\^\[\[[0-9;?]*[A-Za-z]|\^\[[\]_][^\x07^]*(?:\x07|\^G|\^\[\\)?")
# Vertical borders of a TUI pane (k9s, lazydocker, tmux copy of a boxed pane).
#: C0 control characters a copy can leave inside a line (NUL padding from a truncated or
#: pre-allocated file, a terminal's bell or backspace, a stray ESC once ANSI codes are gone):
#: no message holds them, so they are removed before anything reads the line. Tab, line feed
#: and carriage return are kept (white space; CR separates progress-bar updates).
_CONTROLS = regex.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]+")
# Characters a chat, a wiki or a web page puts inside copied text that a reader does not see:
# zero-width and bidi marks, the soft hyphen, a BOM mid-line (removed), and the no-break and
# other Unicode spaces, NEL and the line/paragraph separators (a space): vLLM's wordings are
# matched on the text as it reads (breakit4 item 1: "CUDA out of\u00a0memory" read healthy).
# The views drop the same marks (render/inert.py).
_INVISIBLE = regex.compile("[\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]+")
_UNICODE_SPACES = regex.compile("[\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")

_FRAME_CHARS = frozenset("│┃║")
#: What a quoted paste starts each line with: Markdown's ``>``, or the bar a rendered quote
#: is copied with (U+258E, U+258F, U+258D, U+258C left blocks).
_QUOTE_MARKS = frozenset(">▎▏▍▌")
_PASTE_FIRST = _FRAME_CHARS | _QUOTE_MARKS

# Outer wrappers: at most one applies; each is tried only if its first-character test holds.
# The month is the locale's abbreviation (strftime %b): "Aug", "авг" (w16), "Okt", "Mär",
# "févr.", "avril", "ago": three to five lower-case letters (and a dot), or a capital and two;
# "Error 18 14:14:59" is no month.
_JOURNALD_SHORT = regex.compile(
    r"(?P<ts>(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec|\p{Ll}{3,5}\.?|\p{Lu}\p{Ll}{2}) [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?) "
    r"(?P<host>\S+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<jpid>[0-9]+)\])?: "
)
_JOURNALD_ISO = regex.compile(
    r"(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})) "
    # A host name holds no slash (RFC 1123); a CloudWatch stream name often does ("vllm/vllm/<id>").
    r"(?P<host>[^\s(\[/]+) (?P<ident>[^\s\[\]:()]+)(?:\[(?P<jpid>[0-9]+)\])?: "
)
# An exception line ("ValueError: ...") after a time stamp and a word is not a journald
# identifier; journald identifiers are program names.
_EXCEPTION_NAME = ("Error", "Exception", "Warning", "Exit", "Interrupt")


def _pidless_journald(m) -> bool:
    """A ``short-iso`` match with no ``[PID]`` is journald's only when its time is one
    journald prints (a local offset, at most microseconds: ``-o short-iso-precise``) and its
    identifier is no exception name: ``docker logs -t`` / ``kubectl --timestamps`` print
    nanoseconds and ``Z``, and the message after them may read ``Processed prompts: ...``."""
    ts = m["ts"]
    if ts.endswith("Z") or m["ident"].endswith(_EXCEPTION_NAME):
        return False
    frac = _FRACTION.search(ts, 19)
    return frac is None or len(frac[1]) <= 6


_FRACTION = regex.compile(r"[.,]([0-9]+)")


_RFC3339 = regex.compile(
    r"(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?) "
)
# aws logs tail (detailed): isoformat time stamp with its offset, the log stream name
# (CloudWatch forbids ':' and '*' in it), the message.
_CLOUDWATCH_TAIL = regex.compile(
    r"(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[+-][0-9]{2}:[0-9]{2}|Z)?) "
    r"(?P<stream>[^\s:*]{1,512}) "
)
# logcli's default output: time, the label set as Prometheus prints it, padding, the line.
_LOKI_LABELS = regex.compile(r'\{(?P<labels>(?:[A-Za-z_]\w*="(?:[^"\\]|\\.)*"(?:, )?)*)\} +')
_LOKI_PAIR = regex.compile(r'([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"')
_TB_LINE = regex.compile(
    r'File "|Traceback \(|During handling|The above exception|(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)\b'
)
_BRACKET_TS = regex.compile(
    r"\[(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?"
    r"|[0-9]{2}/[0-9]{2}/[0-9]{2}(?:[0-9]{2})? [0-9]{2}:[0-9]{2}:[0-9]{2})\] "
)
# "2025-05-30 09:53:45.386 | " (docker log viewers) and FastChat's
# "2023-12-27 11:25:36 | ERROR | stderr | ".
_PIPE_TS = regex.compile(
    r"(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?) \| "
    r"(?:(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) +\| (?P<stream>stdout|stderr) +\| )?"
)
# Docker Desktop's log view, and application loggers' asctime ("2024-12-19 21:40:35,123",
# lm-eval's "2024-11-26:14:42:58,395").
_SPACE_TS = regex.compile(r"(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2}[ :][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?) ")
_COMPOSE = regex.compile(r"(?P<service>[A-Za-z0-9][\w.-]*?)(?:[-_](?P<replica>[0-9]+))?\s+\| ")
# Buildkite's raw job log with its escapes lost (a copy of the raw log, an API download
# shown as text): ``bk;t=<milliseconds since the epoch> `` before each line.
_BUILDKITE = regex.compile(r"_?bk;t=[0-9]{1,16}(?: |$)")
#: What is left of Buildkite's stamp on a line cut inside it (``bk``, ``bk;t=17781``): a
#: paste's last line, which is no text of the line before (m23's ``worker_mainbk``).
BUILDKITE_STUB = regex.compile(r"_?bk(?:;(?:t(?:=[0-9]{0,16})?)?)?")
#: CloudWatch Logs' CSV export (the console's "Download as CSV", SageMaker endpoint logs,
#: hunt8 u18): ``<epoch milliseconds>,<message>``, the message in double quotes with its own
#: quotes doubled (RFC 4180) when it holds a quote or a comma.
_CSV_EPOCH = regex.compile(r'(?P<ms>[0-9]{13}),(?P<q>")?')
#: rsyslog's escapes of control characters (``$EscapeControlCharactersOnReceive``: ``#`` and
#: three octal digits), which a syslog relay and the stores behind it keep as text: ESC
#: before a colour code (``#033[1;36m``), CR (``#015``), tab (``#011``).
_SYSLOG_ESCAPE = regex.compile(r"#0(?:33(?=\[)|15|11)")
_SYSLOG_CHAR = {"#033": "\x1b", "#015": "\r", "#011": "\t"}
_KUBECTL_PREFIX = regex.compile(r"\[pod/(?P<pod>[^/\]\s]+)/(?P<container>[^\]\s]+)\] ")

#: Outer wrappers that say only when a line was written (no source): a continuation line
#: may carry one when the line it continues does not (Docker Desktop, t023). ``app-log``
#: is a time stamp followed by an application's own record prefix.
TIME_WRAPPERS = frozenset(
    {"timestamp", "space-timestamp", "bracket-timestamp", "pipe-timestamp", "app-log", "buildkite", "cloudwatch-csv"}
)
_TIME_FIRST = frozenset("0123456789[")

# Process prefixes, any number, nested (Ray task around vLLM process). Ray's driver-side
# relay, which SkyPilot runs every task under, puts a comma after the name: "(task, pid=N) "
# (hunt7 q09), "(sky-cmd, pid=N) ", and its kin "(name, pid=N, ip=...)".
_PROC = regex.compile(
    # Ray Serve names a replica's actor "ServeReplica:<app>:<deployment>" (Ray 2.x; the app left
    # out before 2.7): the colon-joined parts are the name (v22's two replicas are two processes).
    r"\((?P<name>[A-Za-z_][\w.\-]*(?::[\w.\-]+){0,3}(?:\((?:[^()]|\([^()]*\))*\))?),?"
    r"(?: rank=(?P<rank>[0-9]+),?)? pid=(?P<pid>[0-9]+)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?\) ?"
)
_PROC_NOPID = regex.compile(r"\((?P<name>raylet|gcs_server|dashboard|APIServer|EngineCore(?:_DP[0-9]+)?)\) ")
# PyTorch's glog-style header: [W MMDD ...] with the month not zero-padded ("W409", "W1224").
_TORCH_RANK = regex.compile(r"\[rank(?P<rank>[0-9]+)\]:(?:\[[WEI][0-9]{3,4} [^\]]*\] ?| ?)")
_STAGE = regex.compile(r"\[(?P<stage>Stage-[0-9]+)\] ")

# vLLM's own record prefix, both generations; and the prefix cut to "[file:line] ".
_VLLM_HEADER = regex.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<date>\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d)(?:\.\d+)? "
    r"\[?(?P<file>[\w./-]+(?:\.\.\./[\w./-]+)?):(?P<line>\d+)\] ?"
)
_VLLM_HEADER_CUT = regex.compile(r"\[(?P<file>[\w./-]+\.py):(?P<line>\d+)\] ")
# Ray Serve's own record prefix (its LoggingConfig text encoding: ray/serve/_private/logging_utils.py
# ServeFormatter, "%(levelname)s %(asctime)s {component_name} {component_id} [{request_id} {route}]
# %(filename)s:%(lineno)d - %(message)s"; the replica's file logger and, under its actor prefix,
# its stderr): "INFO 2024-11-18 01:46:34,210 default_VLLMDeployment ujj4diu5 replica.py:893 - ".
# The component is a deployment (app_deployment, or the bare deployment before Ray 2.7), the
# controller or the proxy; its id a replica id ("ujj4diu5", "SayHello#kKGBoa" before 2.7), a PID
# or an IP. A request's id and route come between them and the file inside a request; Ray before
# 1.13 printed no file ("INFO ... SayHello SayHello#kKGBoa - msg").
_RAY_SERVE = regex.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}) "
    r"(?P<component>[A-Za-z_][\w.:-]{0,254}) (?P<cid>[\w.:#-]{1,255}) "
    r"(?:(?P<request>[\w-]{1,128}) (?:/[^\s]{0,255} )?)??"
    r"(?:(?P<file>[\w.-]{1,255}\.py):[0-9]{1,7} )?- "
)
_UVICORN = regex.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")

# An application's own record prefix after its time stamp (Python logging layouts):
# "- name - LEVEL - ", "LEVEL pid [file.py:N] ", "LEVEL     [file.py:N] ", "ERR file.py:N -- ",
# "LEVEL | mod:func:N - ", "[    INFO]: ", "name pid LEVEL    " (Xinference's "%(name)s
# %(process)d %(levelname)-8s", p26), and a launcher's "[Level] (Component) " (Lemonade's
# "2026-05-08 11:50:14.752 [Error] (Process) ", h002: the level word capitalised, in brackets,
# then the part of the launcher that logged; a vLLM process name there is vLLM's prefix).
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|ERR|CRITICAL|FATAL|TRACE|NOTICE)"
_WORD_LEVEL = r"(?:Debug|Info|Information|Warning|Warn|Error|Critical|Fatal|Trace|Notice|Verbose)"
_FOREIGN = regex.compile(
    # Space runs are bounded (padding is short): a hostile line of spaces cannot backtrack long.
    r"(?:[-|] {1,16})?(?:[A-Za-z_][\w.]{0,127} {1,16}(?:[-|]|(?P<lpid>[0-9]{1,10})) {1,16})?"
    rf"(?:\[? {{0,8}}(?P<level>{_LEVEL}) {{0,8}}?\]?:?|\[(?P<word_level>{_WORD_LEVEL})\]"
    r"(?: \((?!(?:raylet|gcs_server|dashboard|APIServer|EngineCore(?:_DP[0-9]+)?)\))[A-Za-z][\w.-]{0,63}\))?)"
    r"(?: {1,16}(?:[-|] {1,16})?(?P<pid>[0-9]+)(?= ))?"
    r"(?: {1,16}(?:[-|] {1,16})?(?:\[(?P<file>[\w./-]{1,255}\.py):[0-9]{1,7}\]|(?P<file2>[\w./-]{1,255}\.py):[0-9]{1,7}"
    r"|(?P<mod>[A-Za-z_][\w.]{0,127}):[\w<>.]{1,127}:[0-9]{1,7}))?"
    r"(?: {1,16}(?P<sep>--|-|\|))?(?: |$)"  # one space: the message's own indentation stays (traceback lines)
)
# rich's handler: the level column, the message, the source at the right edge.
_INDENTED_LEVEL = regex.compile(rf" {{8,32}}(?P<level>{_LEVEL}) {{2,8}}")
_TRAILING_LOC = regex.compile(r"(?: {2,}|\s*\()(?P<file>[\w.-]+\.py):[0-9]{1,7}\)?\s*$")

# An embedded record prefix (glued records). A process prefix right before it belongs to it.
_EMBEDDED = regex.compile(
    r"(?:\((?:[^()]|\([^()]*\))*? pid=\d+[^()]*\) )*"
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+:\d+\] "
    # Ray Serve's prefix (_RAY_SERVE), glued after a code fence or another record
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3} "
    r"[A-Za-z_][\w.:-]{0,254} [\w.:#-]{1,255} (?:[\w-]{1,128} (?:/[^\s]{0,255} )?)??(?:[\w.-]{1,255}\.py:[0-9]{1,7} )?- )"
)

_RAY_REPEATED = regex.compile(
    r" ?\[repeated (?P<n>[0-9]+)x across cluster\](?: \(Ray deduplicates logs by default\..*)?$"
)


#: Wrappers whose host/unit fields name where a line came from (a pod, a stream, a journald
#: process): the sub-source key of :func:`source_key`.
_POD_WRAPPERS = frozenset({"kubectl-prefix", "loki", "loki-text"})
_JOURNALD_WRAPPERS = frozenset({"journald", "journald-iso", "journald-json"})


def source_key(rec: Record) -> str:
    """The sub-source a record belongs to, "" when its wrappers name none: ``pod/NAME[/CONTAINER]``
    (kubectl ``--prefix``, Loki labels), ``stream/NAME`` (CloudWatch), a learned prefix's names
    (``stern``'s ``pod/container``), ``UNIT[PID]@HOST`` (journald). The pipeline keeps each key's
    records apart (:class:`vllm_doctor.pipeline._SourceReader`), and the wrap join never joins a
    line of one key onto a record of another (:mod:`vllm_doctor.reassemble`)."""
    w = rec.wrapper
    if w is None:
        return ""
    if w in _POD_WRAPPERS and rec.host:
        return f"pod/{rec.host}/{rec.unit}" if rec.unit else f"pod/{rec.host}"
    if w in ("loki", "loki-text", "learned") and (rec.unit or rec.host):
        return rec.unit or rec.host or ""
    if w in ("cloudwatch", "cloudwatch-json") and rec.unit:
        return f"stream/{rec.unit}"
    if w in _JOURNALD_WRAPPERS and (rec.host or rec.pids):
        pid = f"[{rec.pids[0]}]" if rec.pids else ""
        return f"{rec.unit or ''}{pid}@{rec.host or '?'}"
    return ""


def _num(digits: Optional[str]) -> Optional[int]:
    """A PID, rank or count matched as ``[0-9]+``: its value, or None past
    :data:`~vllm_doctor.fleet.MAX_DIGITS` digits (ignored: the line is still read)."""
    return int(digits) if digits is not None and len(digits) <= MAX_DIGITS else None


_FRAME_COMPLETE = regex.compile(r'", line \d+, in \S+\s*$')


class Envelopes:
    """How one input's lines are unwrapped: the wrappers a forced format ``allowed`` (None:
    all), and what was learned from the input's first lines (:meth:`sniff`): prefixes that
    repeat before vLLM's records (:class:`~vllm_doctor.signatures.Learner`), whether it is
    ``aws logs tail`` output, whether it is the AWS CLI's pretty-printed JSON.

    Call :meth:`sniff` on the first lines before :meth:`unwrap` reads them, so every line
    of the input is read the same way (the pipeline sniffs 200 lines ahead)."""

    #: Lines of ``aws logs tail`` shape with a vLLM record after the stream name needed to
    #: read an input as CloudWatch's.
    CLOUDWATCH_VOTES = 2
    #: Lines, every one of ``aws logs tail`` shape under one stream name with a slash, that
    #: make an input CloudWatch's without a vLLM record after the stream name (prose).
    CLOUDWATCH_STREAM_LINES = 3

    def __init__(self, allowed: Optional[FrozenSet[str]] = None, learn: bool = True) -> None:
        self.allowed = allowed
        self.learning = learn and allowed is None
        # One learner per layer: layer 0 sees a line after its known wrappers, layer N after
        # the prefix layer N-1 found and the known wrappers beneath it (module docstring, 4).
        self.learners: List[Learner] = [Learner(self._wrapper_at)] if self.learning else []
        self.cloudwatch = allowed is not None and "cloudwatch" in allowed
        self.pretty: Optional[fleet.CloudWatchPretty] = (
            fleet.CloudWatchPretty() if allowed is not None and "cloudwatch-json" in allowed else None
        )
        self._votes = self._shaped = self._lines = self._streamed = 0
        self._stream: Optional[str] = None  # the stream name of the first aws-logs-tail-shaped line
        self.sigs: List[Signature] = []  # what the learner has learned so far
        self._after_frame = False  # logcli's text output: the last line was a traceback frame
        self.markdown = False  # a first line held a Markdown escape (vllm_doctor.escapes)
        self.html = False  # a first line held an HTML rendering's tags (vllm_doctor.escapes.html_lines)
        #: The column the input was hard-wrapped at (a terminal's copy), when its first lines
        #: show one (:meth:`_learn_width`); None otherwise.
        self.wrap_width: Optional[int] = None
        #: Spaces every first line starts with (a Markdown code block by indentation, a quoted
        #: mail): taken off each line before anything reads it; 0 when they do not share one.
        self.indent = 0
        self._lead: Optional[int] = None
        #: A grep / cat -n prefix the first lines carry (vllm_doctor.numbered).
        self.numbered = NumberedLearner()
        self._max_len = 0
        self._prev_len: Optional[int] = None
        self._bare_after: Dict[int, int] = {}
        self._prev_text = ""
        self._width_bytes = 0
        self._gutter = Gutter()
        #: Lines a web log viewer's gutter took (``Actions for L12`` / ``12``): no line of the
        #: log's own, so not counted where the log's share of vLLM lines is judged.
        self.gutter_lines = 0
        self._last: Optional[Record] = None  # the first record of the line read last

    def signatures(self) -> List[Signature]:
        """The prefixes learned so far (see :mod:`vllm_doctor.signatures`)."""
        return self.sigs

    def sniff(self, text: str) -> Optional[str]:
        """Learn from one of the input's first lines; return the wrapper it carries (for
        format detection, :func:`vllm_doctor.formats.detect`)."""
        if not self.markdown and has_markdown_escape(text):
            self.markdown = True  # a Markdown editor's paste: every line is unescaped
        if not self.html and has_html_tags(text):
            self.html = True  # a rendered page (GitHub's body_html, a mail): every line is cut at its tags
        s = _clean(text.rstrip("\r\n"), self.markdown)
        stripped = s.strip()
        if not stripped:
            self._prev_len = None
            return None
        self.numbered.observe(s)
        s = strip_numbers(self.numbered, s)
        lead = len(s) - len(s.lstrip(" "))
        self._lead = lead if self._lead is None else min(self._lead, lead)
        self.indent = self._lead if self._lead >= INDENT_MIN else 0
        if self.allowed is None and self.pretty is None and stripped.startswith(('"events": [', '"logStreamName": "')):
            self.pretty = fleet.CloudWatchPretty()
        if self.pretty is not None and stripped[:1] in '"{}[]':
            return "cloudwatch-json"
        if self.allowed is None and not self.cloudwatch:
            self._lines += 1
            m = _CLOUDWATCH_TAIL.match(s + " ") if s[:1].isdigit() else None  # a blank message trimmed
            if m and m["ts"][-6:-5] in "+-":
                self._shaped += 1
                rest = s[m.end() :]
                self._votes += anchored(rest[2:] if rest[:2] == "> " else rest)  # a quoted paste too
                if "/" in m["stream"] and self._stream in (None, m["stream"]):
                    self._stream = m["stream"]
                    self._streamed += 1
            # Two lines with a record after the stream name; or, in an excerpt too short for
            # that, one such line and the shape on every line; or, in a paste of prose with no
            # record at the start of a message (q16), the shape on every line with one stream
            # name that holds a slash, as CloudWatch's do and a journald host never does.
            self.cloudwatch = (
                self._votes >= self.CLOUDWATCH_VOTES
                or (self._votes >= 1 and self._shaped == self._lines >= 2)
                or self._streamed == self._lines >= self.CLOUDWATCH_STREAM_LINES
            )
        if self.learning and s[:2] != '{"':
            self._observe(s)
        recs = _unwrap("", 0, text, self, True, 0)  # not self.unwrap: sniffing keeps no reading state
        if recs:
            self._learn_width(recs[0], recs[-1].line_len)
        return recs[0].wrapper if recs else None

    def _learn_width(self, rec: Record, line_len: int) -> None:
        """Learn the width a terminal's copy was hard-wrapped at: the longest of the first
        lines (between :data:`WRAP_COLUMNS`), when at least :data:`WRAP_PAIRS_MIN` lines that
        long (or one shorter: the space at the cut trimmed) are followed by a line that starts
        no record (no process or record prefix) and may be the rest of the line the terminal
        cut (:func:`vllm_doctor.envelopes.could_be_rest`), and does not start as the line before
        it did (a line repeated is no rest of it). Learned from the first :data:`WRAP_HEAD_BYTES`
        only: the head that decides whether the input is read line by line
        (:func:`vllm_doctor.formats.hard_wrapped`) holds at least that much of a file."""
        self._width_bytes += line_len + 1
        if self._width_bytes > WRAP_HEAD_BYTES:
            return
        if rec.cell:
            self._prev_len = None  # a table row is padded to its column widths, never cut
            return
        if (
            self._prev_len is not None
            and rec.inner_bare
            and could_be_rest(rec.text)
            and rec.text[:WRAP_SAME_START] != self._prev_text[:WRAP_SAME_START]
        ):
            self._bare_after[self._prev_len] = self._bare_after.get(self._prev_len, 0) + 1
        self._prev_len, self._prev_text = line_len, rec.text
        self._max_len = max(self._max_len, line_len)
        w = self._max_len
        pairs = self._bare_after.get(w, 0) + self._bare_after.get(w - 1, 0)
        self.wrap_width = w if WRAP_COLUMNS[0] <= w <= WRAP_COLUMNS[1] and pairs >= WRAP_PAIRS_MIN else None

    def _observe(self, s: str) -> None:
        """Offer one cleaned line to the learners, layer by layer: layer 0 gets it after its
        known wrappers; when the prefix found there ends at a known wrapper (not at an
        anchor), the next layer gets what is left after that wrapper. So ``stern`` around a
        launcher's own prefix learns both, and each is peeled wherever it stands."""
        rec = Record(source="", lineno=0, text="")
        t = _outer_stage(rec, s, self)
        if rec.wrapper is not None:
            t = _known_layers(rec, t, self)[0]
        if t[:1] == "|" and table_cells(t.rstrip()) is not None:
            return  # a table row's first cells are no prefix: each cell is read (table_cells)
        for depth in range(MAX_LAYERS):
            if depth == len(self.learners):
                self.learners.append(Learner(self._wrapper_at))
            prefix = self.learners[depth].observe(t)
            if prefix is None:
                # No anchor on this line (a traceback's source line, a cut message): it still
                # counts at the layers beneath, for their coverage, when a known wrapper shows
                # where this layer ends.
                cut = self._wrapper_cut(t)
                if cut is None:
                    break
                self.learners[depth].cut_common(cut, t)
                prefix = t[:cut]
            rest = t[len(prefix) :]
            t = _known_layers(rec, rest, self)[0]
            if len(t) == len(rest):
                break  # the prefix ended at an anchor: nothing beneath it
        self.sigs = [sig for learner in self.learners for sig in learner.signatures()]

    def _wrapper_cut(self, text: str) -> Optional[int]:
        """Where a known wrapper starts at a token boundary of ``text`` within
        :data:`~vllm_doctor.signatures.MAX_PREFIX` (and MAX_TOKENS), whatever follows it; None
        when none does, or when ``text`` starts with an anchor or white space."""
        if not text or text[0].isspace() or anchored(text):
            return None
        pos = 0
        for _ in range(MAX_TOKENS):
            sp = text.find(" ", pos, MAX_PREFIX)
            if sp < 0:
                return None
            pos = sp + 1
            c = text[pos : pos + 1]
            if c in _BENEATH_FIRST or c.isalpha():
                rec = Record(source="", lineno=0, text="")
                _known_layers(rec, text[pos:], self)
                if rec.wrapper is not None:
                    return pos
        return None

    def _wrapper_at(self, text: str, pos: int, depth: int = 0) -> Optional[bool]:
        """For :func:`~vllm_doctor.signatures.find_prefix`: None unless a known wrapper starts
        at ``text[pos]``; else whether the anchor behind it (and behind any unknown prefix
        beneath it, up to :data:`MAX_LAYERS`) is strong. A known wrapper with no anchor
        behind it is message text."""
        if text[pos : pos + 1] not in _BENEATH_FIRST and not text[pos : pos + 1].isalpha():
            return None
        rec = Record(source="", lineno=0, text="")
        rest, _ = _known_layers(rec, text[pos:], self)
        if rec.wrapper is None:
            return None
        if starts_with_anchor(rest):
            return True
        if anchored(rest):
            return False
        if depth + 1 < MAX_LAYERS:
            found = find_prefix(rest, lambda t, p: self._wrapper_at(t, p, depth + 1))
            if found is not None:
                return found[1]
        return None

    def unwrap(self, source: str, lineno: int, line: str) -> List[Record]:
        """:func:`unwrap` with what this input taught (learned prefixes, its format). A line
        of the AWS CLI's JSON that holds no message gives no record; a ``"message"`` line's
        records come when its event object closes (with its stream name)."""
        if self.pretty is not None:
            done = self.pretty.feed(lineno, line)
            if done is not None:
                out: List[Record] = []
                for n, message, stream in done:
                    out.extend(fleet.cloudwatch_event(message, stream, _peeler(source, n), 0))
                return out  # nothing for a line of JSON structure: records around it stay joinable
        if self._gutter.take(line):
            self.gutter_lines += 1
            return []  # a web viewer's line-number gutter: records around it stay joinable
        recs = _unwrap(source, lineno, line, self, True, 0)
        first = recs[0]
        if first.wrapper == "loki-text":
            self._reindent(recs)
        elif 2 <= len(first.text) <= STUB_MAX and first.inner_bare and self._stub(first.text, first.wrapper is None):
            first.text = ""  # read as the blank line it was before the cut
        self._last = first
        return recs

    def _stub(self, text: str, bare: bool = True) -> bool:
        """True when ``text`` (a short bare line) is what is left of a wrapper cut inside it:
        Buildkite's stamp (:data:`BUILDKITE_STUB`), or the start of the wrapper the line
        before carried (``vllm-1  |`` cut to ``vllm-1``, a ``stern`` pod name cut short), so
        no text of that line (a lower-case stub would be joined onto it as the rest of a word).
        The second only for a line that no wrapper was peeled from (``bare``)."""
        if BUILDKITE_STUB.fullmatch(text):
            return True
        last = self._last
        if not bare or last is None or not last.raw:
            return False
        at = last.raw.find(last.text) if last.text else len(last.raw)
        return at > len(text) and last.raw.startswith(text)

    def _reindent(self, recs: List[Record]) -> None:
        """logcli's text output trims every line: a traceback's source line, which Python
        prints indented under its ``File "..."`` line, gets its indentation back (the
        tracker reads indented lines as source lines). A ``File`` line cut by a hard wrap (no
        ``, line N, in NAME`` yet) is followed by its own rest, which keeps no indentation."""
        for rec in recs:
            text = rec.text
            if self._after_frame and text and not text[0].isspace() and not _TB_LINE.match(text):
                rec.text = "    " + text
            stripped = text.lstrip()
            self._after_frame = stripped.startswith('File "') and _FRAME_COMPLETE.search(stripped) is not None


_STATELESS: Dict[Optional[FrozenSet[str]], Envelopes] = {}


def _stateless(allowed: Optional[FrozenSet[str]]) -> Envelopes:
    env = _STATELESS.get(allowed)
    if env is None:
        env = _STATELESS[allowed] = Envelopes(allowed, learn=False)
        env.pretty = None
    return env


_FREE = _stateless(None)


def _clean(s: str, markdown: bool = False) -> str:
    """Paste damage that hides a line's first characters: BOM, ANSI (real and caret), ``^M``;
    and a Markdown editor's or an HTML page's escapes (:func:`vllm_doctor.escapes.unescape`;
    ``markdown``: the input is known to be Markdown-escaped)."""
    if s[:1] == "\ufeff":
        s = s[1:]
    if "\\" in s or "&" in s:
        # First: an editor escapes the colour codes too (a caret code saved as ^\\[\\[0;36m, m09).
        s = unescape(s, markdown)
    if "#0" in s:
        s = _SYSLOG_ESCAPE.sub(_syslog_char, s)
    if "\x1b" in s:
        s = _ANSI.sub("", s)
    if "^" in s:
        if "^[" in s:
            s = _CARET_ANSI.sub("", s)
        while s.endswith("^M"):
            s = s[:-2]
    return s


def _syslog_char(m) -> str:
    """The character an rsyslog escape stands for; nothing for a CR that only ended the line
    (CRLF; a closing quote or a table cell's border may follow it): a line ending splits no
    line."""
    if m[0] == "#015" and not m.string[m.end() :].strip(' "|'):
        return ""
    return _SYSLOG_CHAR[m[0]]


def _csv_message(s: str, m) -> str:
    """The message of a CloudWatch CSV line whose ``<epoch ms>,`` (and opening quote) ``m``
    matched: a quoted one loses its closing quote (if the line was not cut before it) and
    gets its doubled quotes back as one."""
    msg = s[m.end() :]
    if not m["q"]:
        return msg
    body = msg.rstrip()
    tail = msg[len(body) :]  # the separator :func:`_peel` puts back stays
    if body.endswith('"') and not body.endswith('""') or body.endswith('"""'):
        body = body[:-1]
    return body.replace('""', '"') + tail


def _unframe(s: str) -> str:
    """``│ text   │`` -> ``text`` (the closing border is optional: a cut pane)."""
    border = s[0]
    s = s[2:] if s[1:2] == " " else s[1:]
    r = s.rstrip()
    return r[:-1].rstrip() if r.endswith(border) else r


def _outer(rec: Record, s: str, env: Envelopes, beneath: bool = False) -> str:
    """Strip at most one outer wrapper; record what it said. ``beneath``: under another
    wrapper, where ``aws logs tail``'s shape is not looked for (CloudWatch is a log store:
    outermost, and a time stamp and a word under it are a time stamp and a message)."""
    c = s[:1]
    m = None
    if c.isdigit():
        if s[13:14] == ",":
            m = _CSV_EPOCH.match(s)
            if m:
                rec.wrapper = "cloudwatch-csv"
                return _csv_message(s, m)
        if len(s) > 10 and s[10] == "T":
            if env.cloudwatch and not beneath:
                m = _CLOUDWATCH_TAIL.match(s)
                if m:
                    rec.wrapper, rec.unit = "cloudwatch", m["stream"]
                    return s[m.end() :]
            m = _JOURNALD_ISO.match(s)
            if m and (m["jpid"] or _pidless_journald(m)):
                rec.wrapper, rec.host, rec.unit = "journald-iso", m["host"], m["ident"]
                pid = _num(m["jpid"])
                if pid is not None:
                    rec.pids.append(pid)
                return s[m.end() :]
            m = _RFC3339.match(s)
            if m:
                rest = s[m.end() :]
                r0 = rest[:1]
                if r0 == "{":
                    lm = _LOKI_LABELS.match(rest)
                    if lm:
                        labels = {
                            k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LOKI_PAIR.findall(lm["labels"])
                        }
                        rec.wrapper = "loki-text"
                        rec.host, rec.unit = fleet.loki_source(labels)
                        return rest[lm.end() :]
                elif r0 == "s" and rest[:7] in ("stdout ", "stderr ") and rest[7:9] in ("F ", "P "):
                    rest = rest[9:]  # CRI log file line (kubelet /var/log/pods)
                rec.wrapper = "timestamp"
                return rest
        m = _PIPE_TS.match(s)
        if m:
            rec.wrapper = "fastchat" if m["stream"] else "pipe-timestamp"
            if m["level"]:
                rec.level = m["level"]
            return s[m.end() :]
        m = _SPACE_TS.match(s)
        if m:
            rec.wrapper = "space-timestamp"
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
    elif c.isalpha() or c == "_":
        if c in "b_" and s[:5] in ("bk;t=", "_bk;t"):
            m = _BUILDKITE.match(s)
            if m:
                rec.wrapper = "buildkite"
                return s[m.end() :]
        m = _JOURNALD_SHORT.match(s)
        if m and (m["jpid"] or not m["ident"].endswith(_EXCEPTION_NAME)):
            rec.wrapper, rec.host, rec.unit = "journald", m["host"], m["ident"]
            pid = _num(m["jpid"])
            if pid is not None:
                rec.pids.append(pid)
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
                digits = m["pid"]
                if len(digits) <= MAX_DIGITS:  # a longer one is ignored (_num)
                    rec.pid = pid = int(digits)
                    rec.pids.append(pid)
                if m["rank"] is not None:
                    rank = _num(m["rank"])
                    if rank is not None:
                        rec.rank = rank
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
                rank = _num(m["rank"])
                if rank is not None:
                    rec.rank = rank
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
            if s[4:5] == " " or s[5:6] == " " or s[7:8] == " " or s[8:9] == " ":
                m = _RAY_SERVE.match(s)
                if m:
                    # Serve's logger, not vLLM's: its level is the application's (a print a
                    # replica captured is logged at INFO), as under an app-log prefix.
                    # The component and its id name the source only where no outer wrapper does.
                    if rec.wrapper is None:
                        rec.wrapper, rec.unit, rec.host = "ray-serve", m["component"], m["cid"]
                    rec.time = rec.time or _mmdd(m["ts"])
                    rec.file = m["file"] or rec.file
                    s = s[m.end() :]
                    continue  # a captured stderr line keeps vLLM's own prefix beneath Serve's
        break
    return s


def mend_header(rec: Record) -> None:
    """Peel vLLM's record prefix off ``rec`` when its text starts with one only now: a hard
    wrap cut the line inside the prefix (``... multiproc_worker_utils.py:226`` / ``]   File
    ...``, h009 at 80 columns) and :mod:`vllm_doctor.reassemble` joined the rest back on.
    Its level, time and file become the record's, as if the line had never been cut."""
    if rec.vllm_header or rec.text[:1] not in "DIWEC":
        return
    m = _VLLM_HEADER.match(rec.text)
    if m is not None:
        rec.level, rec.time = m["level"], f"{m['date']} {m['time']}"
        rec.file, rec.vllm_header = m["file"], True
        rec.text = rec.text[m.end() :]


def _app_header(rec: Record, s: str) -> Optional[Tuple[str, str]]:
    """``(what follows, its level)`` for an application's own record prefix at the start of
    ``s`` (the part of its line after the time stamp; see the module docstring), or None
    when there is none. The level is named as vLLM names it (``WARN`` -> ``WARNING``,
    ``[Error]`` -> ``ERROR``).

    The prefix is read as part of the outer wrapper (``app-log``): its level is the
    application's, not vLLM's (a launcher logs every captured line at INFO), so records
    under it stay "bare" for reassembly; the level is the record's only inside a vLLM
    process prefix (:func:`_time_inside`). Its PID and ``file.py`` are kept."""
    m = _FOREIGN.match(s)
    if m is None:
        return None
    level = m["level"] or m["word_level"]
    pid = _num(m["pid"] or m["lpid"])
    if pid is not None and rec.pid is None:  # vLLM's process prefix, when there is one, says it first
        rec.pid = pid
        rec.pids.append(pid)
    rec.file = m["file"] or m["file2"] or m["mod"] or rec.file
    rest = s[m.end() :]
    if m["level"] and m["pid"] is None and not (m["file"] or m["file2"] or m["mod"] or m["sep"]) and rest[:1] == " ":
        # "%(levelname)-8s %(message)s": the level is padded to 8 columns, then the message
        # (with its own indentation, for a traceback's source lines).
        pad = min(max(0, 8 - len(m["level"])), len(rest) - len(rest.lstrip(" ")))
        rest = rest[pad:]
    return rest, _LEVEL_NAMES.get(level.upper(), level.upper())


#: Level words applications print, as vLLM (Python logging) names them.
_LEVEL_NAMES = {"WARN": "WARNING", "ERR": "ERROR", "FATAL": "CRITICAL", "INFORMATION": "INFO", "VERBOSE": "DEBUG"}


def _time_inside(rec: Record, s: str) -> Tuple[str, bool, bool]:
    """After a process prefix: an application's time stamp and record prefix (a custom
    ``VLLM_LOGGING_CONFIG_PATH`` format, or a handler that vLLM's stdout prefix wraps):
    ``(what is left, whether one was read, whether its level became the record's)``.

    Inside one of vLLM's own process prefixes (:func:`vllm_doctor.processes.is_vllm_process`),
    that record prefix is the process's logger in another layout, so its level is the
    record's, as vLLM's own prefix's would be: a cut ``ERROR`` record (``Error executing
    metho``, h008) stays an error whatever formatter printed it. The caller marks the record
    ``vllm_header`` once the formatter's trailing ``file.py:N`` is off."""
    m = (_SPACE_TS.match(s) or _RFC3339.match(s)) if s[:1].isdigit() else _BRACKET_TS.match(s)
    if m is None:
        return s, False, False
    header = _app_header(rec, s[m.end() :])
    if header is None:
        return s, False, False
    rest, level = header
    if rec.wrapper is None:
        rec.wrapper = "app-log"
    rec.time = _mmdd(m["ts"])
    rest = _inner(rec, rest)
    if not rec.vllm_header and is_vllm_process(rec.proc):
        rec.level = level
        return rest, True, True
    return rest, True, False


def _mmdd(stamp: str) -> Optional[str]:
    """An application's time stamp as vLLM's ``MM-DD HH:MM:SS`` (``2024-12-19 21:40:35,123``,
    ``2024-11-26:14:42:58``, RFC 3339, rich's ``[05/01/24 10:00:05]``); None otherwise."""
    t = stamp.strip(" []")
    if len(t) >= 19 and t[4] == "-" and t[10] in " T:":
        return f"{t[5:10]} {t[11:19]}"
    if len(t) >= 17 and t[2] == "/" and t[5] == "/":
        return f"{t[:2]}-{t[3:5]} {t[-8:]}"
    return None


def _strip_trailing_location(rec: Record, s: str) -> str:
    if s[-1:].isdigit() or s[-1:] in ") ":
        t = _TRAILING_LOC.search(s, max(0, len(s) - 160))
        if t:
            rec.file = t["file"]
            return s[: t.start()]
    return s


def _paste_marks(rec: Record, s: str) -> str:
    """A TUI pane's border and Markdown quote marks (step 1 of the module docstring) off
    ``s``: paste damage, peeled wherever the pasted text ends up, inside journald's JSON
    ``MESSAGE`` too (n17: a quoted paste a service logged)."""
    if s[:1] in _FRAME_CHARS:
        inner = _unframe(s)
        if len(s) - len(inner) > 4 and rec.line_len:
            # Padded to the pane's width: the line ended before the edge, so it was not cut
            # by a wrap there; its length is its own (the wrap join reads it).
            rec.line_len = len(inner)
        s = inner
        rec.wrapper = "frame"
    if s[:1] in _QUOTE_MARKS:
        # Markdown's quote, or the bar a rendered quote is copied with (Slack, GitHub, chat
        # clients: hunt4 h17)
        while s[:1] in _QUOTE_MARKS and s:
            s = s[2:] if s[1:2] == " " else s[1:]
            rec.wrapper = "quote"
    return s


def _outer_stage(rec: Record, s: str, env: Envelopes) -> str:
    """Paste borders, Markdown quotes and one outer wrapper (steps 1-3 of the module
    docstring, after :func:`_clean`); what is left for the inner prefixes."""
    if s[:1] in _PASTE_FIRST:
        s = _paste_marks(rec, s)
    allowed = env.allowed
    before, kept = s, rec.wrapper
    s = _outer(rec, s, env)
    if allowed is not None and rec.wrapper != kept and rec.wrapper not in allowed:
        # --input-format forces the wrapper: anything else is part of the message.
        s, rec.wrapper, rec.host, rec.unit, rec.level = before, kept, None, None, None
        rec.pids.clear()
    elif rec.wrapper in TIME_WRAPPERS and s and not starts_with_anchor(s):
        header = _app_header(rec, s)
        if header is not None:
            rec.wrapper, rec.time, s = "app-log", _mmdd(before[: len(before) - len(s)]), header[0]
    return s


_BENEATH_FIRST = frozenset("0123456789[")


def _known_one(rec: Record, s: str, env: Envelopes) -> Tuple[str, bool]:
    """One known wrapper beneath another wrapper or a learned prefix (a launcher's or
    ``docker logs -t``'s time stamp under ``stern``, an application's record prefix under
    journald): ``(what is left, whether it was an application's record prefix)``.

    The wrapper nearest the line that names a source (pod, stream, journald process) names
    the record's: it is the process that wrote the line. A wrapper naming none replaces
    one that names none too (``app-log`` under ``learned`` says more)."""
    c = s[:1]
    if not (c in _BENEATH_FIRST or c.isalpha()):
        return s, False
    tmp = Record(source="", lineno=0, text="")
    rest = _outer(tmp, s, env, beneath=True)
    if tmp.wrapper is None:
        return s, False
    app = False
    if tmp.wrapper in TIME_WRAPPERS and rest and not starts_with_anchor(rest):
        header = _app_header(tmp, rest)
        if header is not None:
            tmp.wrapper, tmp.time, app = "app-log", _mmdd(s[: len(s) - len(rest)]), True
            rest = header[0]
    if tmp.host is not None or tmp.unit is not None:
        rec.wrapper, rec.host, rec.unit, rec.pids = tmp.wrapper, tmp.host, tmp.unit, tmp.pids
    else:
        if rec.host is None and rec.unit is None:
            rec.wrapper = tmp.wrapper
        rec.pids.extend(tmp.pids)
    if tmp.pid is not None and rec.pid is None:
        rec.pid = tmp.pid
    rec.level, rec.time, rec.file = tmp.level or rec.level, tmp.time or rec.time, tmp.file or rec.file
    return rest, app


def _learned(rec: Record, s: str, env: Envelopes) -> str:
    """One prefix learned for this input (:mod:`vllm_doctor.signatures`), if ``s`` starts
    with one; what is left."""
    if not s or starts_with_anchor(s):
        return s
    for sig in env.sigs:
        got = sig.match(s)
        if got is not None:
            end, key, level = got
            if key:
                rec.wrapper, rec.host, rec.unit = "learned", key, None
            elif rec.wrapper is None:
                rec.wrapper = "learned"
            if level:
                rec.level = level
            return s[end:]
    return s


def _known_layers(rec: Record, s: str, env: Envelopes, learned: bool = False) -> Tuple[str, bool]:
    """Known wrappers (and, with ``learned``, learned prefixes) beneath the outer wrapper,
    in any order, until an anchor or nothing more peels, at most :data:`MAX_LAYERS`:
    ``(what is left, whether one was an application's record prefix)``."""
    app = False
    for _ in range(MAX_LAYERS):
        if not s or s[0].isspace() or starts_with_anchor(s):
            break
        n = len(s)
        s, found = _known_one(rec, s, env)
        app = app or found
        if learned and env.sigs:
            s = _learned(rec, s, env)
        if len(s) == n:
            break
    return s, app


def _peel(source: str, lineno: int, s: str, env: Envelopes, outer: bool = True, paste: bool = False) -> Record:
    """One record's worth of ``s``: every wrapper and prefix peeled (module docstring, steps
    1-6); ``line_len`` is the length of ``s``. Without ``outer``, ``paste`` still peels a
    paste's marks (:func:`_paste_marks`: a line inside a JSON envelope, not a glued piece)."""
    rec = Record(source=source, lineno=lineno, text="", raw=s, line_len=len(s))
    app = False
    # A blank record under a wrapper leaves only the wrapper, and trailing white space is
    # trimmed (by us, a log store, a paste): the separator each wrapper and prefix ends with
    # is put back until they are peeled, so the record is read as the blank line it is.
    s += " "
    if outer:
        s = _outer_stage(rec, s, env)
        app = rec.wrapper == "app-log"
        # A forced format peels its own wrapper only; else what lies beneath is peeled too.
        if env.allowed is None and (env.sigs or rec.wrapper not in (None, "quote", "frame")):
            s, beneath = _known_layers(rec, s, env, learned=True)
            app = app or beneath
    elif paste and s[:1] in _PASTE_FIRST:
        s = _paste_marks(rec, s)
    s = _inner(rec, s).rstrip()
    own = False
    if rec.proc is not None and not rec.vllm_header and s[:1] in _TIME_FIRST and s:
        s, inside, own = _time_inside(rec, s)
        app = app or inside
    if app and not rec.vllm_header:
        s = _strip_trailing_location(rec, s)
    elif s[:8] == "        " and rec.inner_bare:
        m = _INDENTED_LEVEL.match(s)
        if m and _TRAILING_LOC.search(s, max(0, len(s) - 160)):
            rec.level = m["level"]
            s = _strip_trailing_location(rec, s[m.end() :])
    if own:
        rec.vllm_header = True  # the process's own record prefix, in its logger's layout
    if "[repeated " in s:
        m = _RAY_REPEATED.search(s)
        if m:
            n = _num(m["n"])
            if n is not None:
                rec.repeated = n
            s = s[: m.start()]
    rec.text = s
    return rec


def _peeler(source: str, lineno: int):
    """The ``peel`` callback :mod:`vllm_doctor.fleet` uses for the lines inside a JSON
    envelope: any wrapper may sit inside (a Loki line is a raw container line); JSON may
    nest up to :data:`vllm_doctor.fleet.MAX_NESTING` deep."""

    def peel(text: str, depth: int) -> List[Record]:
        return _unwrap(source, lineno, text, _FREE, depth < fleet.MAX_NESTING, depth)

    return peel


def _json_line(source: str, lineno: int, s: str, env: Envelopes, depth: int) -> Optional[List[Record]]:
    """The records of a JSON envelope line, or None when ``s`` is not one (read as text)."""
    try:
        obj = json.loads(s[: 4 * MAX_RECORD_CHARS])
    except (ValueError, RecursionError):  # RecursionError: absurdly nested JSON
        return None
    kind = fleet.kind_of(obj)
    if kind is None or (env.allowed is not None and kind not in env.allowed):
        return None
    recs = fleet.records(obj, kind, source, lineno, _peeler(source, lineno), depth)
    return recs or [Record(source=source, lineno=lineno, text="", raw=s, wrapper=kind)]


def unwrap(source: str, lineno: int, line: str, _outer_ok: bool = True, allowed=None) -> List[Record]:
    """Turn one physical line into one or more :class:`Record` objects.

    ``line`` may still carry its newline, ANSI colour and ``\\r`` characters. Glued
    records (several vLLM record prefixes on one physical line) come back as
    several records sharing ``lineno``; the text before the first embedded prefix
    stays a record of its own (a progress bar, or a record cut short). Lines longer
    than :data:`MAX_RECORD_CHARS` are recognised on that prefix. ``allowed`` restricts
    the outer wrappers (a forced ``--input-format``). Nothing is learned here: see
    :class:`Envelopes` for per-input prefixes. Never raises.
    """
    return _unwrap(source, lineno, line, _FREE if allowed is None else _stateless(allowed), _outer_ok, 0)


def _unwrap(source: str, lineno: int, line: str, env: Envelopes, outer: bool, depth: int) -> List[Record]:
    s = line.rstrip("\r\n")
    if s[:1] == "\ufeff":
        s = s[1:]
    if outer and s[:2] == '{"' and depth < fleet.MAX_NESTING:
        recs = _json_line(source, lineno, s, env, depth)
        if recs is not None:
            return recs
    if outer and s[13:14] == "," and s[:1].isdigit():
        m = _CSV_EPOCH.match(s)
        if m and (env.allowed is None or "cloudwatch-csv" in env.allowed):
            # Before the escapes are undone: a CR escaped inside the quotes splits the message,
            # never the quoting.
            recs = _unwrap(source, lineno, _csv_message(s, m), env, outer, depth)
            for rec in recs:
                if rec.wrapper is None:
                    rec.wrapper = "cloudwatch-csv"
            return recs
    if len(s) > MAX_RECORD_CHARS:
        s = s[:MAX_RECORD_CHARS]
    if env.html and "<" in s:  # an HTML rendering (Envelopes.sniff): before its entities are undone
        pieces = html_lines(s)
        if len(pieces) > 1:
            return [rec for piece in pieces for rec in _unwrap(source, lineno, piece, env, outer, depth)]
        s = pieces[0]
    if "\x1b" in s or "^" in s or "\\" in s or "&" in s or "#0" in s:
        s = _clean(s, env.markdown)
    if not s.isprintable():  # one C-level scan; false for tabs and controls (and NBSP, ZWSP)
        s = _CONTROLS.sub("", s)
        if not s.isascii():
            s = _UNICODE_SPACES.sub(" ", _INVISIBLE.sub("", s))
    if "\r" in s:
        # Carriage returns separate progress-bar updates, a record written after a bar, or
        # whole lines (old CR-only line endings): each piece is read as a line of its own.
        s = "\n".join(p for p in s.split("\r") if p.strip())
        if "\n" in s:
            out: List[Record] = []
            for piece in s.split("\n"):
                out.extend(_unwrap(source, lineno, piece, env, outer, depth))
            return out
    if env.numbered.kind is not None:
        s = strip_numbers(env.numbered, s)
    if env.indent and s.startswith(" " * env.indent):
        s = s[env.indent :]
    stripped = s.rstrip()
    trailing = len(stripped) != len(s)
    s = stripped
    first = _peel(source, lineno, s, env, outer=outer, paste=not outer)
    first.trailing_space = trailing
    if env.wrap_width is not None and first.line_len >= env.wrap_width - 1:
        first.at_width = True  # read by vllm_doctor.reassemble: the rest follows on the next line
        if first.line_len < env.wrap_width:
            first.trailing_space = True  # one short: the cut fell after a space, trimmed since
    text = first.text
    if text[:1] == "|" and text[-1:] == "|":
        cells = table_cells(text)
        if cells is not None:
            return _cell_records(source, lineno, cells, first, env, depth)
    if first.proc is not None and text[:2] == '{"' and depth < fleet.MAX_NESTING:
        # vLLM's JSON logging still gets the process prefix ((EngineCore pid=N) {...}).
        recs = _json_line(source, lineno, text, _FREE, depth + 1)
        if recs is not None:
            for rec in recs:  # the process prefix (and Ray's count after the object) are the line's
                rec.proc, rec.rank, rec.repeated = first.proc, first.rank, first.repeated
                if first.pid is not None:
                    rec.pid = first.pid
                    rec.pids = [p for p in first.pids if p != first.pid] + [first.pid]
                rec.wrapper = rec.wrapper or first.wrapper
                if first.wrapper not in (None, "vllm-json"):
                    rec.wrapper, rec.host, rec.unit = first.wrapper, first.host, first.unit
            return recs
    embedded = "INFO " in text or "ERROR " in text or "WARNING " in text or "DEBUG " in text or "CRITICAL " in text
    padded = _PAD in text
    # A whole traceback on one line (collapsed_starts): one C-level scan or two per line.
    collapsed = " pid=" in text or text.count('File "') >= COLLAPSED_FRAMES_MIN
    if not (embedded or padded or collapsed):
        return [first]
    starts = {m.start() for m in _EMBEDDED.finditer(text) if m.start() > 0} if embedded else set()
    if padded:
        starts.update(_padded_starts(text))
    indents: Dict[int, str] = {}
    if collapsed:
        indents = collapsed_starts(text, first.proc, first.pid)
        starts.update(indents)
    if not starts:
        return [first]
    pieces = sorted(starts)
    out = []
    head = text[: pieces[0]]
    if head.strip():
        first.text = head.rstrip()
        first.trailing_space = len(first.text) != len(head)  # a separator, not the message's
        out.append(first)
    for i, start in enumerate(pieces):
        last = i + 1 == len(pieces)
        piece = text[start : len(text) if last else pieces[i + 1]]
        body = piece if last else piece.rstrip()
        if start in indents:
            body = indents[start] + body  # the indentation Python printed, lost with the newline
        rec = _peel(source, lineno, body, env, outer=False)
        # Glued records share the outer wrapper of their physical line.
        rec.wrapper, rec.host, rec.unit = first.wrapper, first.host, first.unit
        rec.line_len, rec.at_width = first.line_len, first.at_width and last
        rec.trailing_space = trailing if last else len(body) != len(piece)
        rec.pids = [p for p in first.pids if p != first.pid] + rec.pids
        out.append(rec)
    return out


#: A Markdown table's cell border: a pipe that no backslash escapes (GFM, "Tables").
_CELL_BORDER = regex.compile(r"(?<!\\)\|")
#: A delimiter row's cell (``---``, ``:--``, ``:-:``).
_DELIMITER_CELL = regex.compile(r":?-+:?")


def table_cells(text: str) -> Optional[List[str]]:
    """The cells of a Markdown (GitHub-flavoured) table row, ``| model | 19% | Avg prompt
    throughput: ... |`` -> ``["model", "19%", "Avg prompt throughput: ..."]``, each stripped,
    ``\\|`` read as a pipe; ``[]`` for the delimiter row (``|---|:--:|``); None when ``text``
    is no row: it must start and end with an unescaped pipe and hold two cells or more (a line
    that only starts with ``| `` is a log viewer's gutter, not a table). Source: GitHub
    Flavored Markdown spec, section 4.10 "Tables (extension)"."""
    if len(text) < 5 or text[0] != "|" or text[-1] != "|" or text[-2] == "\\":
        return None
    parts = _CELL_BORDER.split(text[1:-1])
    if len(parts) < 2:
        return None
    cells = [p.strip().replace("\\|", "|") for p in parts]
    if all(_DELIMITER_CELL.fullmatch(c) for c in cells):
        return []
    return cells


#: A first cell that is a time, a date or a number (a table of one server's stats over time):
#: no label of another series.
_TIME_LIKE = regex.compile(r"[\d\s:.,/+\-TZ]*")
# A position along one series rather than a series of its own: a step, an epoch, an elapsed
# time or a clock time with its unit ("step 3", "t+10s", "#4", "10:01 AM": breakit4 item 7).
_AXIS_LIKE = regex.compile(
    r"(?i)(?:step|iter(?:ation)?|epoch|round|interval|sample|minute|min|t|#|no\.?)?\s*[+#]?\s*"
    r"\d+(?:[.:]\d+)*\s*(?:s|sec|secs|seconds?|ms|m|min|mins|minutes?|h|am|pm|a\.m\.|p\.m\.)?"
)
#: Longest first cell taken as a row's label (a model name, a setting).
ROW_LABEL_MAX = 100


def row_label(cell: str) -> Optional[str]:
    """The label a table row's first cell gives the records of its later cells (``| DeepSeek-
    R1-Distill-Qwen-1.5B | 19% | Avg prompt throughput ...``: the model compared), or None for
    a cell that labels no other series: empty, a time, a date or a number, longer than
    :data:`ROW_LABEL_MAX`."""
    if not cell or len(cell) > ROW_LABEL_MAX or _TIME_LIKE.fullmatch(cell) or _AXIS_LIKE.fullmatch(cell):
        return None
    return cell


def _cell_records(source: str, lineno: int, cells: List[str], row: Record, env: Envelopes, depth: int) -> List[Record]:
    """A table row's records: each non-empty cell read as a line of its own (its wrappers and
    glued records peeled), in order, all with the row's line number and the row's outer
    wrapper where the cell has none. A cell is never the rest of a cut line and nothing is
    joined onto it (``Record.cell``): a cell cannot hold a line break. A delimiter row, or
    a row of empty cells, is one blank record (it ends the record held before it)."""
    out: List[Record] = []
    label = row_label(cells[0]) if len(cells) > 1 else None  # given to the records of the later cells
    for i, cell in enumerate(cells):
        if not cell:
            continue
        for rec in _unwrap(source, lineno, cell, env, True, depth):
            if not i and (rec.vllm_header or rec.level or rec.time):
                label = None  # the first cell is a log record itself: no label
            if i and rec.row is None:  # a table inside a cell keeps its own rows' labels
                rec.row = label
            if rec.wrapper is None:
                rec.wrapper, rec.host, rec.unit = row.wrapper, row.host, row.unit
            rec.pids = [p for p in row.pids if p not in rec.pids] + rec.pids
            rec.cell, rec.at_width, rec.trailing_space = True, False, False
            rec.line_len = len(cell)
            out.append(rec)
    if not out:
        row.text, row.cell = "", True
        out.append(row)
    return out


#: What starts a new thing on a bare line (never the rest of a cut line): a traceback, a
#: frame, a chained header, an exception line (read by vllm_doctor.reassemble too).
NEW_THING = regex.compile(
    r"(?:Traceback \(|File \"|During handling|The above exception|Process [A-Za-z][\w-]*:$"
    r"|(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Interrupt|Exit)(?::|$)"
    # argparse's usage line and its refusal (catalog/arguments.py): after a long command line
    # they start with a lower-case word, and are never the rest of a cut line (breakit5 item 8)
    # ("usage: 95.9%" is the rest of "GPU KV cache usage: 95.9%" cut at a width: not argparse's)
    r"|usage: (?:vllm\b|api_server\.py)|(?:vllm serve|vllm|api_server\.py): error: )"
)


def could_be_rest(text: str) -> bool:
    """True when ``text`` (a bare line) may be the rest of a line a terminal cut at its width:
    it starts with a character, or one space and a character (a cut before a space); never a
    new thing (a traceback, a frame, an exception line) or deeper indentation (a frame's
    source line)."""
    if not text or (text[0] == " " and not text[1:2].strip()):
        return False
    return NEW_THING.match(text.lstrip()) is None


#: Longest line read as the stub of a cut wrapper (:meth:`Envelopes._stub`): a Buildkite
#: stamp is 19 characters, a journald prefix about 40, a long pod name 64.
STUB_MAX = 64

#: Shortest indent shared by every first line that is taken off (a Markdown code block by
#: indentation uses 4): a traceback's frames alone share 2, which is theirs.
INDENT_MIN = 4

#: Terminal widths a hard wrap is looked for at (columns): narrower is no terminal, wider is a
#: log store's line cap, whose next line is a record of its own.
WRAP_COLUMNS = (60, 400)
#: Lines at that width followed by a line that starts no record, in the first lines, that
#: make a hard-wrapped input (one could be a coincidence of lengths).
WRAP_PAIRS_MIN = 2
#: Bytes of the first lines a wrap width is learned from: one read buffer (BufferedReader's
#: 8 KiB), which the head the pipeline peeks at before choosing the pre-filter always holds
#: for a file.
WRAP_HEAD_BYTES = 8192
#: Characters a line and the next must share at their start for the next to be the same
#: kind of line, not the rest of the one before (a repeated line).
WRAP_SAME_START = 12

#: Spaces that pad a record to a terminal's width where its newline was lost (a terminal
#: copy, h003): after a run this long, the start of another record starts a record.
PADDING_MIN = 8
_PAD = " " * PADDING_MIN
_PADDING = regex.compile(r"(?<=\S) {%d,}(?=\S)" % PADDING_MIN)
# What starts a record after padding, besides vLLM's anchors: a traceback, its chained
# header, an exception line ("torch.OutOfMemoryError: ..."); a frame ("File ...") keeps the
# two spaces Python indents it by.
_PADDED_START = regex.compile(
    r"Traceback \(most recent call last\):|During handling of the above exception|The above exception was"
    r"|(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): "
)


_FRAME_END = regex.compile(r'", line [0-9]{1,7}, in [^\s"]{1,255}$')


#: A whole frame line (``File "PATH", line N, in NAME``); two of them in one physical line
#: are a traceback whose newlines were collapsed into spaces (a log viewer's export, an
#: issue form that joined the lines: hunt7 q20, q25). One is not: an error message may quote
#: a frame.
_FRAME_HEAD = regex.compile(r'File "[^"]{1,1024}", line [0-9]{1,7}, in [^\s"]{1,255}')
#: Frame heads in one physical line that make it a collapsed traceback.
COLLAPSED_FRAMES_MIN = 2
#: Python 3.11+'s position markers under a source line (``^^^^``, ``~~~^^^~~``), alone
#: between two spaces.
_CARETS = regex.compile(r"(?<= )[~^]*\^[~^]*(?= |$)")
#: What starts a record inside a collapsed traceback besides frames: its header, a chained
#: traceback's header, an exception line.
_COLLAPSED_START = regex.compile(
    r"(?<= )(?:Traceback \(most recent call last\):|During handling of the above exception"
    r"|The above exception was|(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): )"
)


def collapsed_starts(text: str, proc: Optional[str] = None, pid: Optional[int] = None) -> Dict[int, str]:
    """Where the records of a physical line whose newlines were collapsed into single spaces
    start in ``text``, each with the indentation to give it back (``""``, ``"  "`` for a
    frame, ``"    "`` for its source line or carets). Empty unless the evidence is strong:

    - a process prefix that repeats within the line (``(APIServer pid=N) `` after the one
      peeled off its start, ``proc``/``pid``, or twice in ``text``): each repeat starts a
      record, which keeps the indentation after its prefix;
    - at least :data:`COLLAPSED_FRAMES_MIN` whole frame lines (:data:`_FRAME_HEAD`): each
      frame, the source line after it, a caret line, a traceback header and an exception
      line after a frame start one.

    A long message that names one frame, a stats line, a launch command with backslash
    continuations (``" \\ "``) hold neither. Positions are never 0."""
    out: Dict[int, str] = {}
    if " pid=" in text:
        seen: Dict[str, List[int]] = {}
        for m in _PROC.finditer(text):
            if m.start() > 0 and text[m.start() - 1] == " ":
                seen.setdefault(m[0].rstrip(), []).append(m.start())
        for key, at in seen.items():
            if len(at) >= 2 or (proc is not None and key == f"({proc} pid={pid})"):
                for pos in at:
                    out[pos] = ""
        if out:
            return out
    if text.count('File "') < COLLAPSED_FRAMES_MIN:
        return out
    # A collapsed newline is one space: frames after padding or indentation are
    # :func:`_padded_starts`' (a terminal copy), or no traceback's.
    heads = [m for m in _FRAME_HEAD.finditer(text) if _one_space_before(text, m.start())]
    if len(heads) < COLLAPSED_FRAMES_MIN:
        return out
    first_head = heads[0].start()
    for i, m in enumerate(heads):
        if m.start() > 0:
            out[m.start()] = "  "
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        code = m.end() + 1
        if code < end and _one_space_before(text, code):
            out[code] = "    "
        for c in _CARETS.finditer(text, code, end):
            out[c.start()] = "    "
        for x in _COLLAPSED_START.finditer(text, code, end):
            out[x.start()] = ""
    for c in _CARETS.finditer(text, 0, first_head):
        out[c.start()] = "    "  # the carets under a source line cut before the first frame
    for x in _COLLAPSED_START.finditer(text, 0, first_head):
        out[x.start()] = ""
    out.pop(0, None)
    return out


def _one_space_before(text: str, pos: int) -> bool:
    """True when ``text[pos]`` starts the line or follows exactly one space."""
    return pos == 0 or (text[pos - 1] == " " and (pos == 1 or text[pos - 2] != " "))


def _padded_starts(text: str) -> List[int]:
    """Where records glued after padding start in ``text`` (see :data:`PADDING_MIN`): at one
    of vLLM's anchors (:data:`vllm_doctor.signatures.ANCHOR`: a record or process prefix),
    a traceback's first line, chained header or exception line, a frame's ``File "`` (two
    characters earlier: its indentation), or the source line after a whole frame line (four
    characters earlier). Never at 0."""
    out = []
    for m in _PADDING.finditer(text):
        pos = m.end()
        if text.startswith('File "', pos):
            out.append(pos - 2)
        elif _FRAME_END.search(text, max(0, m.start() - 300), m.start()) is not None:
            out.append(pos - 4)  # Python prints a frame's source line under it, indented by 4
        elif ANCHOR.match(text, pos, pos + MAX_ANCHOR) is not None or _PADDED_START.match(text, pos) is not None:
            out.append(pos)
    return out
