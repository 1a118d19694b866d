"""Logs that went through ``grep -n``, ``grep`` over several files, or ``cat -n`` first.

Operators paste what they grepped: ``grep -n -C5 Traceback vllm.log`` prints
``123:matched line`` and ``124-context line`` (``--`` between groups), ``grep -H`` or a
grep over several files ``vllm.log:123:`` / ``vllm.log-124-`` (or ``vllm.log:`` without
``-n``), ``cat -n`` ``   123\tline``. The prefix sits before any wrapper, and a
traceback's frames lose their indentation to it, so it is taken off first.

:class:`NumberedLearner` learns which of these an input carries from its first lines
(:meth:`NumberedLearner.observe`): the same shape on nearly every line, with line numbers
that count up by one from line to line of the paste (a run of gaps where grep skipped lines,
but mostly consecutive) or the same file name on every line. Then :func:`strip` takes it off
each line. A log whose lines start with dates or counts of its own never shows consecutive
numbers with the same separator on every line, so it is left alone.

Source: GNU grep's manual, "Output Line Prefix Control" (``-n``, ``-H``; ``:`` after a
matching line's prefix, ``-`` after a context line's, ``--`` between context groups);
coreutils ``cat -n`` (the number right-aligned in 6 columns, then a tab).
"""

from __future__ import annotations

from typing import Optional

import regex

#: A log file's name as grep prints it before a line (``/var/log/vllm.log``, ``out.txt.1``).
_FILE = r"(?P<file>[\w./~+@-]{1,255}?\.(?:log|txt|out|err|json|jsonl)(?:\.\d+)?)[:-]"
#: ``123:`` / ``123-`` (grep -n), optionally after ``FILE:`` / ``FILE-`` (grep -H -n).
_GREP_N = regex.compile(r"(?:" + _FILE + r")?(?P<n>\d{1,9})[:-]")
#: ``FILE:`` without a line number (grep over several files, ``grep -H``).
_GREP_FILE = regex.compile(_FILE)
#: ``   123\t`` (cat -n, nl).
_CAT_N = regex.compile(r" {0,8}(?P<n>\d{1,9})\t")

#: First lines looked at, and the share that must carry the prefix.
HEAD_LINES = 64
MIN_SHARE = 0.8
#: Lines with a number one above the line before, of those with a number, that make the
#: numbers a paste's line numbers (grep's skipped lines break some pairs).
MIN_CONSECUTIVE = 0.5
#: Lines needed before anything is decided.
MIN_LINES = 3


class NumberedLearner:
    """Learns from an input's first non-blank lines whether they carry a grep or ``cat -n``
    prefix (see the module docstring). ``kind`` is ``grep-n``, ``grep-file`` or ``cat-n``
    once learned, else None; ``file`` the file name grep printed (None without one)."""

    def __init__(self) -> None:
        self.kind: Optional[str] = None
        self.file: Optional[str] = None
        self._seen = 0
        self._counts = {"grep-n": 0, "grep-file": 0, "cat-n": 0}
        self._files: dict = {}
        self._last = {"grep-n": None, "cat-n": None}
        self._consecutive = {"grep-n": 0, "cat-n": 0}

    def observe(self, text: str) -> None:
        """One of the first lines (cleaned, no newline; blank lines are not offered)."""
        if self._seen >= HEAD_LINES:
            return
        self._seen += 1
        if text == "--":  # grep's group separator counts for grep
            self._counts["grep-n"] += 1
            self._last["grep-n"] = None
        else:
            m = _GREP_N.match(text)
            if m:
                self._count("grep-n", int(m["n"]))
            # Counted even when grep -n's shape matches too: a line of grep -H that starts with a
            # date reads as "FILE:2025-" (v06's RFC 3339 stamps); grep -n wins when its numbers count up.
            m = _GREP_FILE.match(text)
            if m:
                self._counts["grep-file"] += 1
                self._files[m["file"]] = self._files.get(m["file"], 0) + 1
            m = _CAT_N.match(text)
            if m:
                self._count("cat-n", int(m["n"]))
        self._decide()

    def _count(self, kind: str, n: int) -> None:
        self._counts[kind] += 1
        last = self._last[kind]
        if last is not None and n == last + 1:
            self._consecutive[kind] += 1
        self._last[kind] = n

    def _decide(self) -> None:
        self.kind = self.file = None
        if self._seen < MIN_LINES:
            return
        need = MIN_SHARE * self._seen
        for kind in ("cat-n", "grep-n"):
            if self._counts[kind] >= need and self._consecutive[kind] >= MIN_CONSECUTIVE * (self._counts[kind] - 1):
                self.kind = kind
                break
        if self.kind is None and self._counts["grep-file"] >= need:
            self.kind = "grep-file"
        if self.kind is not None and self._files:
            self.file = max(self._files, key=self._files.get)


def strip(learner: NumberedLearner, text: str) -> str:
    """``text`` without the prefix ``learner`` learned (``--`` becomes a blank line: grep's
    separator between groups ends a record); unchanged when it does not carry it."""
    kind = learner.kind
    if kind is None:
        return text
    if kind == "cat-n":
        m = _CAT_N.match(text)
        return text[m.end() :] if m else text
    if text == "--":
        return ""
    m = (_GREP_N if kind == "grep-n" else _GREP_FILE).match(text)
    if m is None or (learner.file is not None and m["file"] not in (None, learner.file)):
        return text
    return text[m.end() :]


#: The line-number gutter of Buildkite's web log viewer, as a copy of its page gives it: a
#: button's label ``Actions for L1512`` on a line of its own, then the number ``1512`` on the
#: next (m22). Neither is text of the log.
_GUTTER = regex.compile(r"Actions for L(?P<n>[0-9]{1,9})")


class Gutter:
    """Takes a web log viewer's line-number gutter out of a copied page (:data:`_GUTTER`).
    Stateful per input: the number line is taken only right after its ``Actions for L<n>``
    line, so a log's own bare numbers stay."""

    def __init__(self) -> None:
        self._number: Optional[str] = None

    def take(self, line: str) -> bool:
        """True when ``line`` (one physical line, newline included or not) is the gutter's."""
        number, self._number = self._number, None
        if line[:12] == "Actions for ":
            m = _GUTTER.fullmatch(line.rstrip("\r\n\t "))
            if m is not None:
                self._number = m["n"]
                return True
        return number is not None and line.strip() == number


def has_gutter(head: bytes) -> bool:
    """True when an input's first bytes hold a gutter line (``Actions for L<n>`` alone on a
    line): such a copy is read line by line, so that the lines the gutter interrupts stay
    one record on every read path."""
    return regex.search(rb"(?m)^Actions for L[0-9]{1,9}\r?$", head) is not None
