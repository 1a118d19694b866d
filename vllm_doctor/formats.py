"""Input formats: what wraps each line, detected per input (or forced with --input-format).

Detection works like pgBadger's: sniff the first lines of an input and count which outer
wrapper :func:`vllm_doctor.envelopes.unwrap` peels off; the commonest is the input's
format. Peeling itself is per line, so a mixed input (kubectl time stamps on some lines,
hard-wrapped continuations without them) still reads right; forcing a format restricts
peeling to that wrapper, for inputs where detection guesses wrong.

Fleet formats (what ``logcli``, ``aws logs`` and vLLM's JSON logging print) are named here
too; their shapes are in :mod:`vllm_doctor.fleet` and :mod:`vllm_doctor.envelopes`.
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, FrozenSet, Iterable, Optional

import regex

from .escapes import looks_escaped
from .numbered import has_gutter
from .sources import sniff_wide

#: Format name -> the outer wrappers it allows (None: all). Markdown quotes and TUI pane
#: borders (paste damage) are always peeled.
FORMATS: Dict[str, Optional[FrozenSet[str]]] = {
    "auto": None,
    "plain": frozenset({"quote"}),
    "journald": frozenset({"journald", "journald-iso", "quote"}),
    "journald-json": frozenset({"journald-json"}),
    "docker": frozenset({"timestamp", "space-timestamp", "quote"}),
    "docker-json": frozenset({"docker-json"}),
    "compose": frozenset({"compose", "quote"}),
    "kubectl": frozenset({"timestamp", "quote"}),
    "kubectl-prefix": frozenset({"kubectl-prefix", "quote"}),
    # logcli query -o jsonl (one object a line) and logcli's default "time {labels} line".
    "loki": frozenset({"loki", "loki-text", "quote"}),
    # aws logs tail (detailed: "time stream message"; short: "time message").
    "cloudwatch": frozenset({"cloudwatch", "timestamp", "quote"}),
    # aws logs filter-log-events (the CLI's pretty JSON, or one event a line).
    "cloudwatch-json": frozenset({"cloudwatch-json"}),
    # CloudWatch Logs' CSV export ("<epoch ms>,<message>", quoted as RFC 4180 when needed).
    "cloudwatch-csv": frozenset({"cloudwatch-csv", "quote"}),
    # vLLM's JSON logging (--logging-config.formatter json, VLLM_LOGGING_CONFIG_PATH).
    "vllm-json": frozenset({"vllm-json"}),
}

#: Formats whose messages are JSON-escaped: read line by line (the block pre-filter looks
#: for the catalog's literals in raw bytes).
JSON_FORMATS = frozenset({"journald-json", "docker-json", "loki", "cloudwatch-json", "vllm-json"})

#: What auto-detection tries, for the message when nothing is recognised.
TRIED = (
    "plain vLLM output, journald (short, short-iso, short-precise, cat, json), docker logs -t, "
    "docker compose, kubectl logs --timestamps / --prefix, Loki logcli, CloudWatch (aws logs tail, "
    "filter-log-events, CSV export), vLLM JSON logging, Docker json-file, Ray and vLLM process prefixes, Ray Serve's log format, "
    "prefixes that repeat before vLLM's records"
)

_WRAPPER_FORMAT = {
    None: "plain",
    "quote": "plain",
    "frame": "plain (TUI pane)",
    "journald": "journald",
    "journald-iso": "journald",
    "journald-json": "journald-json",
    "timestamp": "docker/kubectl (--timestamps)",
    "space-timestamp": "time-stamped (YYYY-MM-DD HH:MM:SS)",
    "compose": "compose",
    "kubectl-prefix": "kubectl-prefix",
    "pipe-timestamp": "log viewer (time |)",
    "fastchat": "fastchat",
    "bracket-timestamp": "supervisor ([time])",
    "loki": "loki",
    "loki-text": "loki",
    "cloudwatch": "cloudwatch",
    "cloudwatch-json": "cloudwatch-json",
    "cloudwatch-csv": "cloudwatch-csv",
    "vllm-json": "vllm-json",
    "docker-json": "docker-json",
    "learned": "learned prefix",
    "buildkite": "buildkite",
    "ray-serve": "Ray Serve (LoggingConfig text)",
}


def detect(wrappers: Iterable[Optional[str]]) -> str:
    """The format name for the wrappers seen on an input's first lines."""
    counts = Counter(_WRAPPER_FORMAT.get(w, w) for w in wrappers)
    if not counts:
        return "empty"
    return counts.most_common(1)[0][0]


def allowed(name: str) -> Optional[FrozenSet[str]]:
    """The wrappers a forced format allows. Raises KeyError for an unknown name."""
    return FORMATS[name]


#: Keys whose presence makes a JSON line an envelope (see :func:`vllm_doctor.fleet.kind_of`).
_ENVELOPE_KEYS = (b'"MESSAGE"', b'"line"', b'"message"', b'"log"', b'"events"')
HEAD_LINES = 64


def reads_every_line(head: bytes) -> bool:
    """True when an input's first bytes hold JSON envelopes (journald ``-o json``, Loki
    ``-o jsonl``, CloudWatch, vLLM JSON logging, Docker ``json-file``): their messages are
    JSON-escaped, so the input is read line by line instead of through the pre-filter.
    So is a log pasted through a Markdown editor or an HTML page
    (:func:`vllm_doctor.escapes.looks_escaped`): the pre-filter's literals are not in its
    escaped bytes. So is a terminal's copy hard-wrapped at its width (:func:`hard_wrapped`):
    a literal cut in two by the wrap is on neither line. So is a web log viewer's copy with
    its line-number gutter (:func:`vllm_doctor.numbered.has_gutter`): the lines the gutter
    interrupts must stay joinable.

    Looked for per line among the first :data:`HEAD_LINES` lines, so a byte-order mark or
    a header line (a shell prompt, ``-- Logs begin at ...``) in front does not hide them.
    So is a copy with control characters inside its lines (:func:`has_controls`): a NUL in
    ``out\\0 of memory`` splits the literal the pre-filter looks for."""
    if looks_escaped(head[:65536]) or has_gutter(head[:65536]) or has_controls(head[:65536]):
        return True
    for line in head[:65536].split(b"\n")[:HEAD_LINES]:
        s = line.lstrip(b"\xef\xbb\xbf \t\r")
        if s.startswith((b'"events": [', b'"logStreamName": "')):
            return True
        if s[:2] != b'{"':
            cut = s.find(b') {"', 0, 200)  # vLLM JSON behind vLLM's process prefix
            if cut < 0 or s[:1] != b"(":
                continue
        if any(k in s for k in _ENVELOPE_KEYS):
            return True
    return hard_wrapped(head)


#: C0 control bytes no log line holds (tab, LF, CR and ESC are not among them: ESC starts
#: ANSI colour codes, which the pre-filter's literals never span).
_CONTROL_BYTES = regex.compile(
    rb"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]"
    # UTF-8 of the invisible marks and Unicode spaces the reader also mends (envelopes._INVISIBLE,
    # _UNICODE_SPACES): NBSP, soft hyphen, NEL; U+2000-200F, U+2028-202F; U+205F-2069; a BOM
    # past the first bytes; the ideographic space
    rb"|\xc2[\x85\xa0\xad]|\xe2\x80[\x80-\x8f\xa8-\xaf]|\xe2\x81[\x9f-\xa9]|(?<=.)\xef\xbb\xbf|\xe3\x80\x80",
    regex.S,
)
_WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")


def has_controls(head: bytes) -> bool:
    """True when an input's first bytes hold a C0 control character inside its text (a NUL
    from a truncated or pre-allocated file, a bell, a backspace): the reader removes them
    from each line (:data:`vllm_doctor.envelopes._CONTROLS`), the pre-filter, which looks
    for literals in raw bytes, cannot. UTF-16 and UTF-32 text (every other byte NUL, with a
    BOM or without: :func:`vllm_doctor.sources.sniff_wide`) is no such copy."""
    if _CONTROL_BYTES.search(head) is None:
        return False
    return not (head.startswith(_WIDE_BOMS) or (b"\0" in head and sniff_wide(head) is not None))


def hard_wrapped(head: bytes, lines: int = 200) -> bool:
    """True when the first ``lines`` lines of ``head`` show a hard wrap at a terminal's width,
    as :class:`vllm_doctor.envelopes.Envelopes` learns it (``wrap_width``) from the same lines
    when it reads them, or a long line cut inside a word of vLLM's messages
    (:func:`vllm_doctor.reassemble.cut_word`)."""
    from .envelopes import Envelopes
    from .reassemble import WRAP_MIN_WIDTH, cut_word

    env = Envelopes()
    texts = [line.decode("utf-8", "replace").rstrip("\r") for line in head.split(b"\n")[:lines]]
    for text in texts:
        if text.strip():  # the reader sniffs no blank line either (pipeline._SourceReader.sniff)
            env.sniff(text)
    if env.wrap_width is not None:
        return True
    # Too few cut lines to learn a width from (one message cut once, w25 at 80 columns): a long
    # line that ends inside a word the next line's letters finish ("... tokens that ca" / "n be
    # stored"): a literal the cut split is on neither line.
    return any(len(a) >= WRAP_MIN_WIDTH and b[:1].islower() and cut_word(a, b) for a, b in zip(texts, texts[1:]))
