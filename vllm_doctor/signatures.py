"""Wrappers nobody wrote code for: a prefix that repeats before vLLM's records, learned per input.

Tools keep inventing line prefixes (``stern``'s ``<pod> <container> ``, a TUI pane's
border, a launcher's ``worker-3 | ``, ``aws logs tail``'s stream name, an application's own
``time LEVEL pid``). Rather than a rule for each, :class:`Learner` looks at an input's first
lines, after the known outer wrappers are peeled, for text that stands before one of vLLM's
own *anchors* (its record prefix ``INFO 08-20 10:18:39 [file.py:1] ``, a process prefix
``(EngineCore_DP0 pid=1) ``, PyTorch's ``[rank0]:``, the cut ``[file.py:1] ``). When such a
prefix repeats (:data:`MIN_REPEATS` lines with the same coarse shape), it becomes a
:class:`Signature`: one regular expression per token position, generalised only as far as
the samples require (one literal value; several values -> their common character-class
shape; all level words -> a level). The signature is then stripped from every line of the
input that carries it, including traceback and continuation lines that have no anchor of
their own.

Pasted excerpts often hold no vLLM record prefix at all (bare exception lines, a
traceback, messages copied without their prefix). For them the learner also accepts *weak*
anchors at a token boundary: a Python traceback's ``Traceback (most recent call last):``,
``File "...", line N`` and ``SomeError: `` lines, and a catalog literal that starts a
message (``Loading model weights took``, ``# GPU blocks:``; :data:`vllm_doctor.catalog.ANCHORS`
that begin with a capital or ``#``). A signature learned only from weak anchors must also
cover at least :data:`MIN_COVERAGE` of the input's non-blank first lines: a wrapper wraps
every line, a sentence that happens to precede a literal does not.

Safety (a plain log's message text is never eaten): a prefix is learned only when it ends
in white space right before the anchor (glued progress bars end in ``]``), is at most
:data:`MAX_PREFIX` characters and :data:`MAX_TOKENS` tokens long, holds no anchor itself,
and repeats (or, in an excerpt too short to repeat it, is on every line).
``tests/test_signatures.py`` checks that no corpus log learns anything.

A paste that holds no anchor at all (prose around an indented, word-wrapped message
fragment, m07) still shows a wrapper by repeating it: when every one of at least
:data:`UNANCHORED_MIN_LINES` first lines starts with the same tokens (digit runs aside),
none of those lines starts with an anchor, strong or weak, the lines do not all end there,
and the tokens look like a wrapper (one holds a digit or punctuation: ``pod-7d9f
container``, ``job-42/step 3 |``, a stream name; never a word that happens to begin every
line), they are learned too, as the only signature of that layer. The message after them
keeps its own indentation (exactly one separator is taken).

A signature of one or two name-like tokens and no level or time (``<pod> <container>``,
``<stream>``) names where the line came from: its values become the record's source key.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Dict, List, Optional, Tuple

import regex

#: Where a vLLM record starts: its record prefix (both generations), a process prefix, the
#: cut ``[file.py:N] `` form, PyTorch's rank prefix, vllm-omni's stage, uvicorn's level
#: (vllm-messages.md section 0): the prefixes :mod:`vllm_doctor.envelopes` knows.
ANCHOR = regex.compile(
    r"\((?:[^()]|\([^()]*\))*? pid=[0-9]+[^()]*\) "
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)? "
    r"\[?[\w./-]+:[0-9]+\] "
    r"|\[rank[0-9]+\]:"
    r"|\[[\w./-]+\.py:[0-9]+\] "
    r"|\[Stage-[0-9]+\] |\((?:raylet|gcs_server|dashboard|APIServer|EngineCore(?:_DP[0-9]+)?)\) "
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s"
)
#: Characters an anchor can start with (a cheap test before the regex).
ANCHOR_FIRST = frozenset("(DIWEC[")
# Weak anchors (see the module docstring), tried at token boundaries only.
_WEAK = regex.compile(
    r"Traceback \(most recent call last\):|File \"[^\"]+\", line [0-9]+"
    r"|(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): "
)

MAX_PREFIX = 64  # characters of a learnable prefix
#: Characters an anchor after a prefix may take (a record prefix with a long file path, a Ray
#: process prefix with its IPv6 address): the anchor is looked for this far past MAX_PREFIX.
MAX_ANCHOR = 256
MAX_TOKENS = 10  # white-space separated tokens in it
MIN_REPEATS = 2  # lines that must carry the same shape
MIN_COVERAGE = 0.5  # share of non-blank first lines a weakly anchored signature must match
MAX_SIGNATURES = 8
#: Lines that must all start with the same prefix for it to be learned with no anchor
#: behind it (:meth:`Learner.signatures`: a paste of prose around a fragment, m07): fewer is
#: too few to tell a wrapper from a coincidence (three lines beginning "job-42/step").
UNANCHORED_MIN_LINES = 4
#: A numbered or bulleted list's marker: the only common token of a post's list items.
_LIST_MARKER = regex.compile(r"\(?[0-9]{1,3}[.)]|[-*+•]")
MAX_SAMPLES = 400  # head lines looked at (the pipeline sniffs 200)

LEVELS = ("DEBUG", "INFO", "WARN", "WARNING", "ERR", "ERROR", "CRITICAL", "FATAL", "TRACE", "NOTICE")
_LEVEL_SET = frozenset(LEVELS)
_LEVEL_RE = "(?:" + "|".join(sorted(LEVELS, key=len, reverse=True)) + ")"
_WORD_RUN = regex.compile(r"[A-Za-z0-9_]+")
_NAME_LIKE = regex.compile(r"[A-Za-z][\w./-]*")
_DIGITS = regex.compile(r"([0-9]+)")


def starts_with_anchor(text: str) -> bool:
    """True when ``text`` begins with one of vLLM's anchors."""
    return text[:1] in ANCHOR_FIRST and ANCHOR.match(text) is not None


_literals: Optional[Tuple[str, ...]] = None


def _message_literals() -> Tuple[str, ...]:
    """Catalog literals that begin a message (capital or ``#`` first): weak anchors."""
    global _literals
    if _literals is None:
        from .catalog import ANCHORS  # late: the catalog is large and not needed to import this

        _literals = tuple(a for a in ANCHORS if a[:1].isupper() or a[:1] == "#")
    return _literals


def _weak_at(text: str, pos: int) -> bool:
    return _WEAK.match(text, pos) is not None or text.startswith(_message_literals(), pos)


def anchored(text: str) -> bool:
    """True when ``text`` begins with an anchor, strong or weak."""
    return bool(text) and (starts_with_anchor(text) or _weak_at(text, 0))


#: ``wrapper_at(text, pos)``: whether a known wrapper starts at ``text[pos]`` with an anchor
#: behind it: None when no known wrapper starts there, else whether that anchor is strong.
WrapperAt = Callable[[str, int], Optional[bool]]


def find_prefix(text: str, wrapper_at: Optional[WrapperAt] = None) -> Optional[Tuple[str, bool]]:
    """``(prefix, strong)``: the text before the first anchor of ``text`` when it can be a
    wrapper, and whether that anchor is one of vLLM's own (else a weak one); or None.

    ``text`` is a line with its known outer wrappers already peeled. The prefix must be
    non-empty, end in white space, fit :data:`MAX_PREFIX` and :data:`MAX_TOKENS`, and the
    line must not start with an anchor (then nothing is unknown). With ``wrapper_at``, a
    known wrapper at a token boundary (with an anchor behind it) also ends the prefix: an
    unknown prefix outside a known one (``stern``'s ``<pod> <container>`` before ``docker
    logs -t``'s time stamp) is learned as a layer of its own, so it is peeled from every
    line, whatever follows it (see :class:`vllm_doctor.envelopes.Envelopes`)."""
    if not text or text[0].isspace() or starts_with_anchor(text) or _weak_at(text, 0):
        return None
    # The anchor must start within MAX_PREFIX characters, not end there: a 30-character pod
    # name before a 45-character record prefix is still a prefix.
    m = ANCHOR.search(text, 1, MAX_PREFIX + 1 + MAX_ANCHOR)
    end = m.start() if m is not None and m.start() <= MAX_PREFIX else None
    strong = end is not None
    # A weak anchor at an earlier token boundary (or the only one) ends the prefix there.
    pos, tokens = 0, 0
    limit = end if end is not None else min(len(text), MAX_PREFIX + 1)
    while tokens < MAX_TOKENS:
        sp = text.find(" ", pos, limit)
        if sp < 0:
            break
        pos = sp + 1
        tokens += 1
        if pos < len(text) and not text[pos].isspace():
            if _weak_at(text, pos):
                end, strong = pos, False
                break
            behind = wrapper_at(text, pos) if wrapper_at is not None else None
            if behind is not None:
                end, strong = pos, behind
                break
        if text.startswith("  ", sp):  # an indented frame: the prefix is the text before the run
            run = sp
            while run < len(text) and text[run] == " ":
                run += 1
            if text.startswith('File "', run):
                end, strong = sp + 1, False
                break
    if end is None:
        return None
    prefix = text[:end]
    if not prefix.strip() or not prefix[-1].isspace() or len(prefix.split()) > MAX_TOKENS:
        return None
    if not strong and prefix.rstrip()[-1:] in ":,(=":
        return None  # "Engine 000: Avg prompt ...": a label and its value, not a wrapper
    return prefix, strong


def _coarse(token: str) -> str:
    """A token's shape for grouping: level words -> ``L``, letter/digit runs -> ``w``."""
    if token in _LEVEL_SET:
        return "L"
    return _WORD_RUN.sub("w", token)


def _literal_re(value: str) -> str:
    """One value, its digit runs generalised (times, PIDs, ordinals vary from line to line)."""
    return "".join("[0-9]+" if part.isdigit() else regex.escape(part) for part in _DIGITS.split(value) if part)


def _shape_re(shape: str) -> str:
    return "".join(r"[A-Za-z0-9_]+" if ch == "w" else regex.escape(ch) for ch in shape)


class Signature:
    """One learned prefix: ``regex`` matches it at the start of a line's text (after the
    outer wrapper). ``key_groups`` name the groups whose values identify the source
    (empty: the prefix names no source). ``count`` is how many sample lines carried it;
    ``text`` is one of them (for messages and tests)."""

    __slots__ = ("regex", "key_groups", "count", "text")

    def __init__(self, pattern: "regex.Pattern", key_groups: Tuple[str, ...], count: int, text: str) -> None:
        self.regex, self.key_groups, self.count, self.text = pattern, key_groups, count, text

    def match(self, text: str) -> Optional[Tuple[int, Optional[str], Optional[str]]]:
        """``(end, key, level)`` when ``text`` starts with this prefix, else None."""
        m = self.regex.match(text)
        if m is None:
            return None
        key = "/".join(m[g] for g in self.key_groups) if self.key_groups else None
        return m.end(), key, m.groupdict().get("level")


class _Group:
    """The samples of one coarse shape: how many, how many strongly anchored, the values
    seen at each token position, the white space after the prefix."""

    __slots__ = ("count", "strong", "values", "trailing", "sample")

    def __init__(self, ntokens: int, sample: str) -> None:
        self.count = self.strong = 0
        self.values: List[Counter] = [Counter() for _ in range(ntokens)]
        self.trailing: Counter = Counter()
        self.sample = sample


class Learner:
    """Collects the prefixes of an input's first lines and turns the repeated ones into
    :class:`Signature` objects. ``observe(text)`` takes one line (outer wrappers peeled) and
    returns the prefix it found there (or None); ``signatures()`` returns the current list
    (recomputed only after new observations). ``wrapper_at`` is passed to
    :func:`find_prefix`: known wrappers end a prefix too."""

    def __init__(self, wrapper_at: Optional[WrapperAt] = None) -> None:
        self._wrapper_at = wrapper_at
        self._groups: Dict[Tuple[str, ...], _Group] = {}
        self._seen = 0
        self._dirty = False
        self._sigs: List[Signature] = []
        self._lines: List[str] = []  # the non-blank lines seen, cut short (coverage checks)
        # The tokens every line seen starts with (digit runs generalised), for a prefix with
        # no anchor behind it; None once a line starts with an anchor or shares none.
        self._common: Optional[List[str]] = None
        self._common_raw: List[str] = []  # those tokens as the first line wrote them
        self._plain_ok = True
        self._ntokens: List[int] = []  # tokens of each line seen (at most MAX_TOKENS + 1)

    def observe(self, text: str) -> Optional[str]:
        if self._seen >= MAX_SAMPLES or not text.strip():
            return None
        self._seen += 1
        self._lines.append(text[: 2 * MAX_PREFIX])
        self._dirty = bool(self._groups)  # coverage of what was learned changes with each line
        if self._plain_ok:
            self._common_tokens(text)
        found = find_prefix(text, self._wrapper_at)
        if found is None:
            return None
        prefix, strong = found
        tokens = prefix.split()
        shape = tuple(_coarse(t) for t in tokens)
        g = self._groups.get(shape)
        if g is None:
            if len(self._groups) >= 4 * MAX_SIGNATURES:
                return None
            g = self._groups[shape] = _Group(len(tokens), prefix)
        g.count += 1
        g.strong += strong
        for counter, tok in zip(g.values, tokens):
            if len(counter) < 64:
                counter[tok] += 1
        g.trailing[len(prefix) - len(prefix.rstrip())] += 1
        self._dirty = True
        return prefix

    def _common_tokens(self, text: str) -> None:
        """Narrow the tokens every line starts with to those ``text`` starts with too."""
        if anchored(text):
            self._plain_ok, self._common = False, None
            return
        raw = text[: MAX_PREFIX + 1].split(" ")[:MAX_TOKENS]
        self._ntokens.append(len(text.split(" ", MAX_TOKENS)))
        gen = [_literal_re(t) for t in raw]
        if self._common is None:
            n = len(gen)
            self._common, self._common_raw = gen, raw
        else:
            common = self._common
            n = 0
            while n < len(common) and n < len(gen) and common[n] == gen[n] and gen[n]:
                n += 1
            if n < len(common):
                del common[n:], self._common_raw[n:]
        while self._common and not self._common[-1]:
            self._common.pop(), self._common_raw.pop()  # an empty token: a run of spaces
        if not self._common:
            self._plain_ok = False
            return
        self._dirty = True

    def cut_common(self, cut: int, text: str) -> None:
        """A known wrapper starts at ``text[cut]`` (a token boundary) of the line observed
        last: the tokens every line starts with end before it (it is a layer of its own)."""
        if self._common:
            n = text[:cut].count(" ")
            if n < len(self._common):
                del self._common[n:], self._common_raw[n:]
                self._plain_ok = bool(self._common)

    def _unanchored(self) -> Optional[Signature]:
        """The signature of the tokens every line starts with, when they can be a wrapper
        (module docstring), else None."""
        n = len(self._lines)
        if not self._plain_ok or not self._common or n < UNANCHORED_MIN_LINES:
            return None
        k = len(self._common)
        if k >= MAX_TOKENS:
            return None  # the lines agree past all the tokens compared: repeated text, no wrapper ends there
        if k == 1 and _LIST_MARKER.fullmatch(self._common_raw[0]):
            return None  # "1. ", "2) ", "- ": a list in a post, whose items are sentences, not a wrapper
        if sum(1 for t in self._ntokens if t > k) < n // 2 + 1:
            return None  # most lines must go on after the common tokens
        raw = self._common_raw
        prefix = " ".join(raw) + " "
        if len(prefix) > MAX_PREFIX or raw[-1][-1:] in ":,(=" or prefix.replace(" ", "").isalpha():
            return None
        if ANCHOR.search(prefix) is not None or any(_weak_at(prefix, i + 1) for i, c in enumerate(prefix) if c == " "):
            return None
        g = _Group(len(raw), prefix)
        g.count = n
        for counter, tok in zip(g.values, raw):
            counter[tok] += 1
        g.trailing[1] = n
        sig = _compile(tuple(_coarse(t) for t in raw), g)
        return sig if all(sig.regex.match(line + " ") for line in self._lines) else None

    def signatures(self) -> List[Signature]:
        if self._dirty:
            self._dirty = False
            groups = sorted(self._groups.items(), key=lambda kv: -kv[1].count)
            sigs = []
            for shape, g in groups[:MAX_SIGNATURES]:
                sig = _compile(shape, g)
                covered = -1
                if g.count < MIN_REPEATS or g.strong == 0:
                    covered = sum(1 for line in self._lines if sig.regex.match(line))
                if g.count < MIN_REPEATS:
                    # A short excerpt: one anchored line is enough if the prefix is on every line.
                    if len(self._lines) < 2 or covered < len(self._lines):
                        continue
                elif g.strong == 0 and covered < MIN_COVERAGE * len(self._lines):
                    continue
                sigs.append(sig)
            if not sigs:
                plain = self._unanchored()
                if plain is not None:
                    sigs.append(plain)
            self._sigs = sigs
        return self._sigs


def _compile(shape: Tuple[str, ...], g: _Group) -> Signature:
    parts: List[str] = []
    name_like: List[int] = []
    has_level = False
    for i, (coarse, counter) in enumerate(zip(shape, g.values)):
        values = list(counter)
        if coarse == "L":
            parts.append(f"(?P<level>{_LEVEL_RE})" if not has_level else _LEVEL_RE)
            has_level = True
            continue
        if len(values) == 1:
            body = _literal_re(values[0])
        else:
            body = _shape_re(coarse)
        parts.append(f"(?P<t{i}>{body})")
        if all(_NAME_LIKE.fullmatch(v) for v in values) and not any(":" in v for v in values):
            name_like.append(i)
    trailing = g.trailing
    tail = f"[ \\t]{{{next(iter(trailing))}}}" if len(trailing) == 1 else r"[ \t]+"
    pattern = r"[ \t]+".join(parts) + tail
    # Only a short prefix of names (no level, no time) says where the line came from.
    keys = (
        tuple(f"t{i}" for i in name_like) if not has_level and len(shape) <= 2 and len(name_like) == len(shape) else ()
    )
    return Signature(regex.compile(pattern), keys, g.count, g.sample)
