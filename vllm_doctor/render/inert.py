"""Make log-derived text inert before anything prints it.

A log is written by software we do not control and by whoever can put text into a
prompt, a header or a file name; the verdict goes to a terminal and into a ticket. Every
string of a verdict therefore passes :func:`clean` (and :func:`one_line`) before it is
redacted or rendered, and every rendered output passes :func:`clean_output`:

* terminal escape sequences are removed whole (ECMA-48: CSI ``ESC [``, the string
  commands OSC/DCS/SOS/PM/APC up to their terminator, ``ESC`` + intermediates + final such
  as ``ESC ( 0`` or ``ESC # 8``, and the two-byte ``ESC 7``, ``ESC E``, ``ESC M``, ``ESC c``),
  as are their 8-bit C1 forms (``U+009B`` CSI, ``U+009D`` OSC, ...);
* every remaining C0 control but TAB and newline is dropped, and so are DEL, the C1
  controls U+0080-U+009F, the bidirectional overrides and isolates (U+202A-U+202E,
  U+2066-U+2069) and marks (U+200E, U+200F, U+061C), zero-width characters (U+200B-U+200D,
  U+2060, U+FEFF), interlinear annotation controls and Unicode tag characters (invisible
  text), and lone surrogates become U+FFFD (they cannot be encoded to any output);
* :func:`one_line` also turns line breaks (``\\n``, ``\\r\\n``, U+2028, U+2029) into a
  visible ``⏎``, so no field (a title, a source name, an evidence line) can start a line
  of its own and forge the verdict line above or below it.

Dropping (not replacing) the controls is deliberate: a control character planted inside a
token must not split it, or redaction, which runs on the cleaned text, would miss it.

:func:`inert_verdict` applies this to a whole verdict (every string, dict keys included)
and makes its numbers JSON-safe: a non-finite float, or an integer JSON readers cannot
hold exactly (beyond 2**63), becomes ``None``.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable, Dict, Optional

import regex

NEWLINE_MARK = "\u23ce"  # ⏎

# Escape sequences, 7-bit and 8-bit. String commands (OSC, DCS, SOS, PM, APC) run to their
# terminator (BEL, ESC \, ST); an unterminated one loses only its introducer (the rest is
# shown as plain text, which is harmless once the ESC is gone).
_SEQUENCE = regex.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC DCS SOS PM APC
    r"|\x1b[\x20-\x2f]+[\x30-\x7e]"  # nF: ESC ( 0, ESC # 8, ESC % G
    r"|\x1b[\x30-\x7e]"  # Fp, Fe, Fs: ESC 7, ESC 8, ESC E, ESC M, ESC c, ESC =
)
# What rich itself emits for styles (Select Graphic Rendition): kept by clean_output(sgr=True).
_SGR = regex.compile(r"\x1b\[[0-9;]*m")

_DROP = dict.fromkeys(
    [c for c in range(0x20) if c not in (0x09, 0x0A)]
    + list(range(0x7F, 0xA0))
    + [0x061C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF]
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
    + [0xFFF9, 0xFFFA, 0xFFFB]
    + list(range(0xE0000, 0xE0080))
)
for _c in range(0xD800, 0xE000):
    _DROP[_c] = 0xFFFD
_ONE_LINE = {0x0A: NEWLINE_MARK, 0x2028: NEWLINE_MARK, 0x2029: NEWLINE_MARK}
_ONE_LINE_DROP = {**_DROP, **_ONE_LINE}
# Fast test: does a string hold anything clean() changes?
_UNSAFE = regex.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f\ud800-\udfff]"
)

#: Largest integer written as a number (JSON readers hold integers to 2**53 exactly, most
#: typed ones to 2**63; a count past that is damage, and Python refuses to print one past
#: 4300 digits at all).
MAX_JSON_INT = 2**63


def clean(text: str) -> str:
    """``text`` without escape sequences and invisible or control characters (module doc);
    TAB and newline stay. Idempotent."""
    if not _UNSAFE.search(text):
        return text
    if "\x1b" in text or _has_c1_introducer(text):
        text = _SEQUENCE.sub("", text)
    return text.translate(_DROP)


def one_line(text: str) -> str:
    """:func:`clean`, and every line break shown as ``⏎``: a field that stays on its line."""
    text = text.replace("\r\n", "\n")
    if _UNSAFE.search(text) and ("\x1b" in text or _has_c1_introducer(text)):
        text = _SEQUENCE.sub("", text)
    return text.translate(_ONE_LINE_DROP)


def _has_c1_introducer(text: str) -> bool:
    return any(c in text for c in "\x90\x98\x9b\x9d\x9e\x9f")


def clean_output(text: str, sgr: bool = False) -> str:
    """The last guard on a rendered output: :func:`clean`, keeping rich's own colour codes
    when ``sgr`` (the coloured text view). Newlines and TABs stay."""
    if not sgr:
        return clean(text)
    kept = []
    pos = 0
    for m in _SGR.finditer(text):
        kept.append(clean(text[pos : m.start()]))
        kept.append(m.group())
        pos = m.end()
    kept.append(clean(text[pos:]))
    return "".join(kept)


def json_number(value: Any) -> Any:
    """``value`` if JSON can carry it as a number, else None (NaN, infinities, huge ints)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, int):
        return value if abs(value) <= MAX_JSON_INT else None
    return value


def map_strings(obj: Any, fn: Callable[[str], str], _memo: Optional[Dict[int, Any]] = None) -> Any:
    """A copy of ``obj`` (dataclasses, dicts, lists, tuples, sets) with ``fn`` applied to
    every string, dict keys included; numbers pass :func:`json_number`; any other object
    becomes ``fn(str(obj))`` so nothing unexamined reaches a renderer. A dataclass reached
    twice (the verdict's primary finding is also in its findings) is copied once, so the
    copy keeps the reference."""
    memo = {} if _memo is None else _memo
    if isinstance(obj, str):
        return fn(obj)
    if obj is None or isinstance(obj, (bool, int, float)):
        return json_number(obj)
    if isinstance(obj, dict):
        return {(fn(k) if isinstance(k, str) else json_number(k)): map_strings(v, fn, memo) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [map_strings(x, fn, memo) for x in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((map_strings(x, fn, memo) for x in obj), key=repr)
    if hasattr(obj, "__dataclass_fields__"):
        if id(obj) in memo:
            return memo[id(obj)]
        new = memo[id(obj)] = copy.copy(obj)
        for name in obj.__dataclass_fields__:
            setattr(new, name, map_strings(getattr(obj, name), fn, memo))
        return new
    return fn(str(obj))


def inert_verdict(verdict):
    """A copy of ``verdict`` (or of one finding) with every string through :func:`one_line`
    and every number JSON-safe. Renderers call it; so does redaction, before its rules."""
    return map_strings(verdict, one_line)
