"""The block pre-filter: find the few lines worth reading in a large log, at C speed.

A busy server's log is mostly request logging and access lines; what a diagnosis needs is
a few hundred lines a day (startup, stats every 10 s, errors). :class:`BlockScanner`
reads the input in large blocks and runs one Aho-Corasick automaton (the ``ahocorasick_rs``
package, a DFA in Rust) over each block for :data:`LITERALS`: every catalog anchor
(:data:`vllm_doctor.catalog.ANCHORS`) and every function name that tags a traceback source
line (:data:`vllm_doctor.frames.TAG_FUNCS`). Only lines holding one of them are decoded and
passed on, with their true line numbers (newlines are counted in C, ``bytes.count``).

Why the verdict is the same as reading every line (``tests/test_prefilter.py`` diffs the
two on the corpus): the catalog only tries a pattern when one of its anchors is in the
record, and the tracker ignores records without events except to count them
(:meth:`vllm_doctor.tracker.SourceTracker.feed`). Hard-wrapped continuations have no anchor
of their own: after every line passed on, the scanner offers the next line too
(``want_follow``), and the caller keeps it when the reassembler would join it.
Known limit: a record whose only anchor sits in a continuation of a first line without
one is seen in two parts by the fast path.
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

from .catalog import ANCHORS
from .frames import TAG_FUNCS
from .sources import ARCHIVE_ERRORS, LINE_LIMIT, Source, archive_error
from .tracker import ERROR_LEVELS

LITERALS: Tuple[str, ...] = tuple(
    sorted(set(ANCHORS) | {f for funcs in TAG_FUNCS.values() for f in funcs} | set(ERROR_LEVELS))
)
BLOCK_SIZE = 8 * 2**20
#: The first lines are offered to ``on_head`` before any line is scanned (what is learned from
#: them, the format and repeating prefixes, applies to every line); at most HEAD_BYTES of
#: blocks are held for that.
HEAD_LINES = 200
HEAD_BYTES = 8 * 2**20

try:  # a wheel on all major platforms; without it the pipeline reads every line
    import ahocorasick_rs as _ac
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    _ac = None


def available() -> bool:
    """True when the pre-filter can run (the ``ahocorasick_rs`` package imports)."""
    return _ac is not None


_AUTOMATON = None


def _automaton():
    global _AUTOMATON
    if _AUTOMATON is None:
        _AUTOMATON = _ac.BytesAhoCorasick([lit.encode() for lit in LITERALS], implementation=_ac.Implementation.DFA)
    return _AUTOMATON


class BlockScanner:
    """Iterate over the lines of a binary stream that may matter, with their line numbers.

    Yields ``(lineno, text, candidate)``: ``candidate`` True for a line holding a literal,
    False for the line after one that the caller asked to see by setting ``want_follow``
    before resuming. ``lines`` counts every line read; ``skipped`` counts lines passed over
    since the caller last reset it (the caller ends a held record when it is non-zero).
    """

    def __init__(self, src: "Source", block_size: int = BLOCK_SIZE, on_block=None) -> None:
        self.src = src
        self.on_block = on_block  # called with the number of bytes of each block read
        self.on_head = None  # called with each of the first lines (format detection)
        self.block_size = block_size
        self.want_follow = False
        self.lines = 0
        self.skipped = 0

    def _blocks(self) -> Iterator[bytes]:
        carry = b""
        skipping = False  # reading past the rest of a line longer than LINE_LIMIT
        stream = self.src.stream
        read = getattr(stream, "read1", stream.read)
        while True:
            parts: List[bytes] = []
            size = 0
            try:
                # read1 returns what one underlying read gives, so a cut archive still
                # hands over everything before the cut.
                while size < self.block_size:
                    part = read(self.block_size - size)
                    if not part:
                        break
                    parts.append(part)
                    size += len(part)
            except ARCHIVE_ERRORS as exc:
                archive_error(self.src, exc, "")  # a damaged archive: diagnose what was read
            chunk = b"".join(parts)
            if self.on_block is not None and chunk:
                self.on_block(len(chunk))
            if not chunk:
                if carry:
                    yield carry if carry.endswith(b"\n") else carry + b"\n"
                return
            if skipping:
                nl = chunk.find(b"\n")
                if nl < 0:
                    continue
                chunk, skipping = chunk[nl + 1 :], False
            block = carry + chunk
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            block = block[:cut]
            if len(carry) >= LINE_LIMIT:
                # As read_lines does: keep the first LINE_LIMIT bytes of an over-long line.
                block += carry[:LINE_LIMIT] + b"\n"
                carry, skipping = b"", True
            if block:
                yield block

    def _follow(self, block: bytes, pos: int, cand):
        """Yield the lines from ``pos`` on for as long as the caller sets ``want_follow``;
        return the position after the last one yielded."""
        while self.want_follow and pos < len(block):
            self.want_follow = False
            le = block.find(b"\n", pos)
            self.lines += 1
            yield self.lines, block[pos:le].decode("utf-8", "replace"), pos in cand
            pos = le + 1
        return pos

    def _with_head(self, blocks: Iterator[bytes]) -> Iterator[bytes]:
        """``blocks``, after offering their first :data:`HEAD_LINES` lines to ``on_head``
        (they may span blocks: tiny blocks, a last line without its newline)."""
        held: List[bytes] = []
        lines = size = 0
        for block in blocks:
            held.append(block)
            lines += block.count(b"\n")
            size += len(block)
            if lines >= HEAD_LINES or size >= HEAD_BYTES:
                break
        left = HEAD_LINES
        for block in held:
            if left <= 0:
                break
            for raw in block.split(b"\n", left)[:left]:
                self.on_head(raw.decode("utf-8", "replace"))
            left -= block.count(b"\n")
        block = b""  # the loop variable must not keep the last held block alive
        while held:  # drop each held block once handed on (memory stays at one block)
            yield held.pop(0)
        yield from blocks

    def __iter__(self) -> Iterator[Tuple[int, str, bool]]:
        find = _automaton().find_matches_as_indexes
        blocks = self._blocks()
        if self.on_head is not None:
            blocks = self._with_head(blocks)
        for block in blocks:
            starts: List[int] = sorted({block.rfind(b"\n", 0, s) + 1 for _, s, _ in find(block, overlapping=False)})
            cand = set(starts)
            # The caller may still want the line after the last one of the previous block.
            pos = yield from self._follow(block, 0, cand)
            for ls in starts:
                if ls < pos:
                    continue
                gap = block.count(b"\n", pos, ls)
                self.lines += gap
                self.skipped += gap
                le = block.find(b"\n", ls)
                self.lines += 1
                self.want_follow = False
                yield self.lines, block[ls:le].decode("utf-8", "replace"), True
                pos = yield from self._follow(block, le + 1, cand)
            gap = block.count(b"\n", pos)
            self.lines += gap
            self.skipped += gap
            if gap:
                self.want_follow = False


def scanner_for(src: "Source", on_block=None) -> Optional[BlockScanner]:
    """A scanner over an opened input, or None when the pre-filter is not available."""
    return BlockScanner(src, on_block=on_block) if available() else None
