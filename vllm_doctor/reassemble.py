r"""Mend the damage logs suffer on their way into a ticket: hard-wrapped lines.

Terminal captures and pastes cut long records at a fixed width (``Running: 32 r`` /
``eqs, Swapped: ...``), and people re-type error messages one sentence a line.
:class:`Reassembler` joins such continuation lines back onto the record they
belong to, so the patterns see the whole message. Glued records (the opposite
damage) are split earlier, in :mod:`vllm_doctor.envelopes`.

A line is joined onto the previous record only when it carries no envelope of
its own (no process or record prefix, no application record prefix naming its call
site: ``[file.py:N]``, a rich handler's right column), its outer wrappers say nothing of where it came
from or say the same as the previous record's (:func:`_same_source`: a time stamp or an
application's record prefix on a continuation line, Docker Desktop's; the same pod,
stream, journald process or compose service, :func:`vllm_doctor.envelopes.source_key`:
lines of two pods interleave), does not start with the first word of the record it would
continue (:func:`_same_lead`: an unknown per-line prefix too rare to learn), and either

* the previous physical line looks cut by a hard wrap: it is long
  (:data:`WRAP_MIN_WIDTH` or more characters), and this line starts in the middle
  of a word (a lower-case letter or closing punctuation), so it is joined with no
  space, or in the middle of a clause (a number after a line that ended in a comma:
  ``max seq len (1048576),`` / ``22.5 GiB KV cache is needed``), joined with a space; or
* the previous record is a PyTorch out-of-memory message that has not reached its
  last sentence yet (``... is reserved by PyTorch but unallocated.``), and this line
  does not start a new traceback, frame or exception; or
* the previous record is a shell command continued on the next line (it ends in `` \``
  and holds a flag, ``--max-model-len 1024 \``), the way an operator's ``vllm serve``
  command is pasted over several lines; or
* this line starts with a later sentence of one of vLLM's multi-sentence messages
  (:data:`SENTENCE_CHAINS`: ``Based on the available memory``, ``Try increasing
  `gpu_memory_utilization```, ...) that someone re-typed one sentence a line.

A line indented as the record it would continue (:data:`~vllm_doctor.envelopes.INDENT_MIN`
spaces or more: a Markdown code block by indentation inside prose, a quoted mail) is its
wrapped rest when the record's line is long and the line starts with a letter or a digit
inside a sentence (lower case or a digit, or after a line that ended inside one or inside
an open OOM message): joined with a space, the block's indentation taken off (m07: ``...
22.36 GiB of`` / ``    which 120.88 MiB is free``). A terminal never indents the rest of a line it
cut, and Python prints one source line per frame, so this is text someone wrapped at words.

At most :data:`MAX_JOINED` lines are joined onto one record; blank lines end a
record, but for one blank line between the pieces of a message that a paste doubled the
newlines of (p16: ``... However, you requested`` / blank / ``131134 tokens ...``): it is
crossed when the record before it is a long bare line that ends inside a sentence (a letter,
a digit or a comma) and the line after it starts inside one (lower case, a digit) or is the
rest of a line cut at the input's width (:func:`_across_blank`). Every joined physical line is counted in ``Record.continued`` so that no
input line disappears from the accounting.
"""

from __future__ import annotations

from pathlib import Path
from typing import FrozenSet, Iterable, Iterator, List, Optional

import regex

from .envelopes import INDENT_MIN, MAX_RECORD_CHARS, NEW_THING, could_be_rest, mend_header, source_key
from .record import Record

WRAP_MIN_WIDTH = 60
MAX_JOINED = 16

_MID_WORD_START = set("abcdefghijklmnopqrstuvwxyz)]},.;:%/'\"-_")
_OOM_TERMINATORS = ("unallocated", "reserved in total by PyTorch", "PYTORCH_", "max_split_size_mb")

#: vLLM's multi-sentence error and check messages, each printed on one line by vLLM:
#: ``(how a later sentence begins, the sentence vLLM prints before it)``. A line starting
#: with a later sentence continues the record before it (someone re-typed the message one
#: sentence a line). Invariant (``tests/test_envelopes.py``): the earlier sentence holds a
#: pre-filter literal, so the fast path reads the first line and offers the next.
#: Sources: ``vllm/v1/core/kv_cache_utils.py`` (0.10; ``kv_cache_planning.py`` in 0.33),
#: ``vllm/worker/worker.py`` (V0 ``raise_if_cache_size_invalid``), ``vllm/v1/worker/gpu_worker.py``
#: (0.10; ``vllm/v1/worker/utils.py`` in 0.33: the startup memory check). Not yet listed: ``Desired GPU
#: memory utilization is`` after ``Free memory on device (...) on startup.`` (t008), whose
#: catalog anchor spans both sentences (``on startup. Desired GPU memory utilization is``).
SENTENCE_CHAINS = (
    (
        "Based on the available memory, ",
        "To serve at least one request with the model's max seq len (1048576), 22.5 GiB KV cache is needed, "
        "which is larger than the available KV cache memory (17.39 GiB).",
    ),
    ("Try increasing `gpu_memory_utilization`", "No available memory for the cache blocks."),
    (
        "Decrease GPU memory utilization ",
        "Free memory on device (19.77/22.05 GiB) on startup is less than desired GPU memory utilization "
        "(0.9, 19.85 GiB).",
    ),
)
LATER_SENTENCES = tuple(later for later, _ in SENTENCE_CHAINS)


def _open_oom(text: str) -> bool:
    """True while a PyTorch OOM message has started but not reached its last sentence."""
    return "out of memory." in text and not any(t in text for t in _OOM_TERMINATORS)


#: A line that only says something was left out (``...``, ``…``, ``[...]``, ``(…)``).
_ELISION = regex.compile(r"\s*[\[(]?\s*(?:\.\s?\.\s?\.+|…)\s*[\])]?\s*")
_SHELL_FLAG = regex.compile(r"(?:^|\s)--?[A-Za-z]|\bvllm serve\b")


def shell_continued(text: str) -> bool:
    """True when ``text`` is a shell command line continued on the next one: it ends in a
    backslash and holds a command-line flag (``-tp 2\\``, ``vllm serve M \\``)."""
    return text.endswith("\\") and _SHELL_FLAG.search(text) is not None


def _same_source(prev: Record, cur: Record) -> bool:
    """True when ``cur``'s wrappers say nothing of where it came from (a time stamp, an
    application's record prefix, a learned prefix that names nothing: Docker Desktop stamps
    continuation lines only), or say the same as ``prev``'s (the same pod, stream, journald
    process or compose service: every line of it carries its wrapper)."""
    if cur.host is None and cur.unit is None and not source_key(cur):
        return True
    return source_key(cur) == source_key(prev) and (cur.host, cur.unit) == (prev.host, prev.unit)


#: Shortest first token two lines must share to be read as carrying the same unknown prefix.
SAME_LEAD_MIN = 8


def _same_lead(prev: str, text: str) -> bool:
    """True when ``text`` starts with the token (and the space after it) that ``prev``, the
    record it would continue, starts with: a per-line prefix nothing peeled (a pod or stream
    name in an excerpt too short to learn it), so a line of its own. The rest of a cut line
    does not begin with the word its record began with."""
    sp = text.find(" ", 0, 256)
    return sp >= SAME_LEAD_MIN and prev.startswith(text[: sp + 1])


def _word_and_number(prev: str, text: str) -> bool:
    """True when ``prev`` ends in a letter and ``text`` starts with a digit, or the other way
    round: a word and a number are separate tokens ("you requested" / "131134 tokens", p16;
    "with 1024" / "dummy requests", t006), so a wrap between them lost a space."""
    last, first = prev[-1:], text[:1]
    if not ((last.isalpha() and first.isdigit()) or (last.isdigit() and first.isalpha())):
        return False
    # A token that mixes letters and digits (a hash, a UUID, a path: "...-b5f1-975" /
    # "f27b82372", h009 at 80 columns) was cut inside itself: it gets no space.
    return not (_mixed(prev[prev.rfind(" ", max(0, len(prev) - 256)) + 1 :]) or _mixed(text[:256].split(" ", 1)[0]))


#: Words of vLLM's messages (lower-cased): the words of vLLM's logger and exception messages
#: in its source, releases 0.5.5-0.33, and of the catalog's wordings (what vLLM relays: PyTorch's
#: OOM, XLA's, Ray's), a name in camel case split into its words (``message_words.txt``, written
#: by ``tools/message_words.py``), and :data:`_SHORT_WORDS`; read on first use
#: (:func:`_wording_words`).
_WORDS: Optional[FrozenSet[str]] = None
#: English words a pattern's ``\\w+`` or ``.*`` stands for, too common to be missed.
_SHORT_WORDS = frozenset(
    "a an the of to is in on at by for with or and as be it its this that not no than from has have was are".split()
)
#: The last word of a line (the last word of a name in camel case: "VllmWorkerProcess"), or a
#: size or a duration with its unit ("512 MiB", "18.40 s", "27.86M": a token that ends there).
_LAST_WORD = regex.compile(r"(?:(?P<unit>\d(?: ?[KMGT]i?B| ?B| s|[KMGT]))|[A-Z]+|[A-Z]?[a-z]+)\Z")
_FIRST_WORD = regex.compile(r"[A-Za-z]+")


def _wording_words() -> FrozenSet[str]:
    """The words vLLM's messages are made of (:data:`_WORDS`; read once, late: only a join at a
    word's edge needs them). Raises OSError when the package's word list is missing (a broken
    install)."""
    global _WORDS
    if _WORDS is None:
        listed = Path(__file__).with_name("message_words.txt").read_text(encoding="utf-8").split()
        _WORDS = frozenset(listed) | _SHORT_WORDS
    return _WORDS


def _two_words(prev: str, text: str) -> bool:
    """True when ``prev`` ends in a word of vLLM's messages (or a size or duration with its
    unit) and ``text`` starts with one, and the two glued are none: a line word-wrapped at a
    space (an editor's or a person's wrap, the space dropped with the line break: "... on
    startup" / "is less than ...", w19; "with 256 dummy" / "requests`", w30), not a word a
    terminal cut in two ("throughpu" / "t:", "GPU KV cach" / "e usage"). Two words that glue
    into a third ("through" / "put", "kv" / "cache") are glued: vLLM prints the glued form
    too, and a terminal's cut inside it reads the same. An acronym ("GPU", "MLA") takes no
    lower case glued on (vLLM writes "CUDAGraph")."""
    a, b = _LAST_WORD.search(prev[-64:]), _FIRST_WORD.match(text)
    if a is None or b is None:
        return False
    words = _wording_words()
    first, last = a[0].lower(), b[0].lower()
    if last not in words or not b[0].islower():
        return False
    if a["unit"] or (len(first) >= 2 and a[0].isupper()):
        return True
    return first in words and first + last not in words


def _mixed(token: str) -> bool:
    """True when ``token`` holds both a letter and a digit."""
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def _cut_separator(prev: Record, text: str) -> str:
    """How the rest ``text`` of a line cut at the input's width joins ``prev``: with nothing
    (the cut fell inside a word), or with the space the cut lost: one short of the width
    (the space trimmed: envelopes marks it trailing), or between a word and a number. A line
    one short that ends in no word, whose end and the rest glue into one (``throughpu`` /
    ``t:``: a line already cut before, v06 wrapped again at 80), lost no space."""
    if prev.trailing_space and text[0] != " " and not cut_word(prev.text, text):
        return " "
    return " " if _word_and_number(prev.text, text) else ""


def cut_word(prev: str, text: str) -> bool:
    """True when ``prev`` ends in letters that are no word of vLLM's messages and, with the
    letters ``text`` starts with, make one (``throughpu`` + ``t``, ``ca`` + ``n``)."""
    a, b = _LAST_WORD.search(prev[-64:]), _FIRST_WORD.match(text)
    if a is None or b is None or a["unit"]:
        return False
    words = _wording_words()
    first = a[0].lower()
    # two letters are a word only when a common one ("in", "to"); "ca" of "can" is a cut
    word = first in words and (len(first) > 2 or first in _SHORT_WORDS)
    return not word and first + b[0].lower() in words


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _indented_rest(prev: Record, text: str, block: int = 0) -> bool:
    """True when ``text`` (indented) is the word-wrapped rest of ``prev``, a long line of an
    indented block of the same indentation (module docstring); ``block``: the indentation
    ``prev`` had before lines were joined onto it (taken off then), else 0."""
    n = _indent(text)
    if n < INDENT_MIN or n != (block or _indent(prev.text)) or prev.line_len < WRAP_MIN_WIDTH:
        return False
    rest = text[n:]
    if not rest[:1].isalnum() or NEW_THING.match(rest):
        return False
    return rest[0].islower() or rest[0].isdigit() or _open_sentence(prev.text) or _open_oom(prev.text)


#: What a line that ends inside a sentence ends with (a word, a number, a comma).
def _open_sentence(text: str) -> bool:
    last = text[-1:]
    return last.isalnum() or last == ","


def _may_cross_blank(prev: Record) -> bool:
    """True when a blank line after ``prev`` may be a doubled newline inside its message."""
    if prev.cell or prev.continued >= MAX_JOINED:
        return False
    return prev.at_width or (prev.inner_bare and prev.line_len >= WRAP_MIN_WIDTH and _open_sentence(prev.text))


#: A shell command's start (the launch command, an export, a prompt): after a blank line it is
#: the next command of a pasted script, never the rest of a sentence.
_COMMAND_START = regex.compile(r"(?:\$ |# |export |vllm serve\b|python3? -m |docker run\b|CUDA_VISIBLE_DEVICES=)")


#: Lines that are surely a shell command of their own: never a continuation of the record before.
_SHELL_LINE = regex.compile(r"(?:\$ |export [A-Za-z_]\w*=|unset [A-Za-z_])")


def _across_blank(prev: Record, cur: Record, block: int = 0) -> Optional[str]:
    """The separator to join ``cur`` onto ``prev`` across one blank line, or None: only a
    bare line that starts inside a sentence (or the rest of a line cut at the input's
    width), never a new thing or a shell command (:data:`_COMMAND_START`), from the same source."""
    text = cur.text
    if cur.cell or not cur.inner_bare or cur.file is not None or not _same_source(prev, cur):
        return None
    if len(prev.text) >= MAX_RECORD_CHARS or not text or NEW_THING.match(text) or _same_lead(prev.text, text):
        return None
    if _COMMAND_START.match(text):
        return None  # a script's next command after a blank line (an export, then vllm serve: h004 under compose)
    if prev.at_width and could_be_rest(text):
        return _cut_separator(prev, text)
    if text[0].islower() or text[0].isdigit() or (text[0] == " " and _indented_rest(prev, text, block)):
        return " "
    return None


#: A message that is only a dotted module path (``torch.``, ``vllm.engine.``: lower case, as
#: Python's modules are named): the start of an exception line cut after a dot.
_CUT_MODULE = regex.compile(r"(?:[a-z_][a-z0-9_]{0,63}\.){1,8}")


def _cut_before_rest(prev: Record, text: str) -> bool:
    """True when ``prev`` (a long line) was cut where its message cannot stand alone, so
    ``text`` is its rest though it looks like a new exception line: the message is only a
    dotted module path and ``text`` goes on with a name (t016 at 80 columns: ``torch.`` /
    ``OutOfMemoryError: CUDA out of memory. ...``), an exception's name (capitalised). Python
    never prints a module path alone; a message ("Done.") is no module path."""
    return text[0].isupper() and _CUT_MODULE.fullmatch(prev.text) is not None


def _cut_at_space(prev: str, text: str) -> bool:
    """True when ``text`` is the rest of ``prev`` cut just before a space, in a sentence:
    ``text`` is one space and a word (h036 at 120 columns: ``... is not`` / `` supported for
    ...``; h017 at 200 then 120: ``... GiB).`` / `` Decrease GPU ...``). Nothing indents by one space: Python's
    frames take two and their source lines four, Markdown's lists and quotes a mark."""
    return text[1:2].isalnum() and prev[-1:].strip() != ""


def _continues(prev: Record, cur: Record, block: int = 0) -> Optional[str]:
    """Return the separator to join ``cur`` onto ``prev`` with, or None if it is no continuation
    (``block``: see :func:`_indented_rest`)."""
    # A continuation carries no envelope of its own, or only the same outer wrapper as the
    # record it continues (journald / docker prefix every physical line).
    if not cur.inner_bare or prev.continued >= MAX_JOINED or len(prev.text) >= MAX_RECORD_CHARS:
        return None
    if cur.cell or prev.cell:
        return None  # a table cell holds no line break: it continues nothing, nothing continues it
    if cur.file is not None:
        return None  # an application's record prefix named its call site: a record of its own
    if not _same_source(prev, cur):
        return None  # another pod, stream or process: interleaved lines are never one record
    text = cur.text
    if _ELISION.fullmatch(text):
        return None  # a paste's '...' says lines were left out: it continues nothing
    if shell_continued(prev.text) and text.strip():
        return " "
    if _SHELL_LINE.match(text):
        return None  # an export / unset / prompt line is the operator's next command (breakit6 item 3)
    if prev.at_width and not prev.text and prev.vllm_header and text:
        return ""  # the line held vLLM's record prefix only and filled the width: its message follows
    if prev.at_width and could_be_rest(text) and not _same_lead(prev.text, text):
        # The line filled the width the input was wrapped at: this is its rest, cut at that
        # column exactly. A cut before a space keeps the space ("cuda:0" + " (111.99/..."); a
        # line one short lost the space it ended with to a trim (envelopes marks it trailing).
        return _cut_separator(prev, text)
    if prev.line_len >= WRAP_MIN_WIDTH and text and prev.text[-1:] == "." and _cut_before_rest(prev, text):
        return ""
    if text[:1] == " " and _indented_rest(prev, text, block):
        return " "
    if text[:1] == " " and prev.line_len >= WRAP_MIN_WIDTH and _cut_at_space(prev.text, text):
        return ""  # the space is the rest's own
    if not text or text[0].isspace() or NEW_THING.match(text) or _same_lead(prev.text, text):
        return None
    mid_word = text[0] in _MID_WORD_START
    last = prev.text[-1:]
    # After a comma or a full stop the next line starts a new clause, not the rest of a word.
    sep = " " if prev.trailing_space or last in ",.;:" else ""
    # A number after a label whose space the cut kept ("Current capability: " / "70.')", h036):
    # a line of its own never ends in ": ".
    clause = text[0].isdigit() and (last == "," or (last == ":" and prev.trailing_space))
    if prev.line_len >= WRAP_MIN_WIDTH and last == "." and text[0].isdigit() and prev.text[-2:-1].isdigit():
        return ""  # a decimal number cut after its point ("(0.41/79." / "18 GiB) on startup", h017)
    if prev.line_len >= WRAP_MIN_WIDTH and (mid_word or clause):
        # A number and a word are separate tokens: "... with 1024" / "dummy requests". (A rest
        # longer than its line says nothing: r047's one cut at 183 columns has a rest of 274.)
        return " " if _word_and_number(prev.text, text) or (not sep and _two_words(prev.text, text)) else sep
    if _open_oom(prev.text):
        return sep if mid_word and not (not sep and _two_words(prev.text, text)) else " "
    if text.startswith(LATER_SENTENCES) and prev.text.strip():
        return " "
    return None


class Reassembler:
    """Holds back one record so that the next physical lines can be joined onto it.

    ``feed(records)`` takes the records of one physical line (from
    :func:`vllm_doctor.envelopes.unwrap`) and returns the records that are complete;
    ``flush()`` returns the one still held (call it at the end of the input, or when
    a followed stream goes idle). Blank lines end the held record and are dropped
    (the reader counts them).
    """

    def __init__(self) -> None:
        self._held: Optional[Record] = None
        self._blank = False  # one blank line seen after the held record (module docstring)
        self._block = 0  # the indentation taken off the held record (an indented block's)

    def feed(self, records: Iterable[Record]) -> List[Record]:
        out: List[Record] = []
        for rec in records:
            held = self._held
            if not rec.text.strip() and rec.inner_bare:
                if held is not None:
                    if not self._blank and not rec.cell and _may_cross_blank(held):
                        self._blank = True
                        continue
                    out.append(held)
                    self._held, self._block = None, 0
                self._blank = False
                continue
            if held is not None:
                sep = _across_blank(held, rec, self._block) if self._blank else _continues(held, rec, self._block)
                self._blank = False
                if sep is not None:
                    text = rec.text
                    if not held.text and held.vllm_header and text[:1] == " ":
                        text = text[1:]  # the record prefix's separator, cut off with the message
                    if sep == " " and text[:1] == " " and (self._block or held.text[:1] == " "):
                        # an indented block's wrapped line: text, not a source line
                        self._block = self._block or _indent(held.text)
                        held.text, text = held.text.lstrip(" "), text.lstrip(" ")
                    held.text = (held.text + sep + text)[:MAX_RECORD_CHARS]
                    held.continued += 1
                    # The rest of a cut line (at the input's width, or glued on inside a word):
                    # the line it was cut from is as long as both pieces (a copy wrapped twice or
                    # more, t016: a terminal's 136 columns, then 120, then 72; the old cut's rest
                    # follows the new one's).
                    held.line_len = held.line_len + rec.line_len if held.at_width or not sep else rec.line_len
                    held.trailing_space, held.at_width = rec.trailing_space, rec.at_width
                    if not held.vllm_header:
                        mend_header(held)  # the wrap cut the line inside vLLM's record prefix
                    continue
                out.append(held)
            self._held, self._block = rec, 0
        return out

    def would_join(self, records: List[Record]) -> bool:
        """True when ``records`` (one physical line) would be joined onto the held record."""
        held = self._held
        if held is None or not records:
            return False
        rec = records[0]
        if not rec.text.strip() and rec.inner_bare:
            return not self._blank and not rec.cell and _may_cross_blank(held)
        return (
            _across_blank(held, rec, self._block) if self._blank else _continues(held, rec, self._block)
        ) is not None

    def flush(self) -> List[Record]:
        held, self._held = self._held, None
        self._blank, self._block = False, 0
        return [held] if held is not None else []


def reassemble(records_per_line: Iterable[Iterable[Record]]) -> Iterator[Record]:
    """Generator form: physical lines' records in, complete records out."""
    r = Reassembler()
    for recs in records_per_line:
        yield from r.feed(recs)
    yield from r.flush()
