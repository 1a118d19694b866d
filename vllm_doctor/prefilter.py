"""The block pre-filter: find the few lines worth reading in a large log, at SIMD speed.

A busy server's log is mostly request logging and access lines; what a diagnosis needs is
a few hundred lines a day (startup, stats every 10 s, errors). :class:`BlockScanner`
takes the windows of :func:`vllm_doctor.sources.windows` (8 MiB of whole lines each) and
finds the lines holding one of :data:`LITERALS`: every catalog anchor
(:data:`vllm_doctor.catalog.ANCHORS`) and every function name that tags a traceback source
line (:data:`vllm_doctor.frames.TAG_FUNCS`). Only those lines are decoded and passed on,
with their true line numbers (newlines are counted in C, ``bytes.count``).

Two steps, both in Rust (the ``ahocorasick_rs`` package, a wrapper of the ``aho-corasick``
crate):

1. **The gate**: short literals (:data:`GATE`), chosen so that every literal contains one
   of them, searched in groups of at most :data:`MAX_GATE`. With that few patterns and
   leftmost-first semantics the crate searches with its SIMD "Teddy" algorithm, several
   times faster than an automaton over all 300-odd literals. A line no gate literal occurs in holds no
   literal, so it is passed over without being looked at again.
2. **The exact check**: the lines the gate hit through a literal that is not itself in
   :data:`LITERALS` are joined and searched once for the full literals; only lines
   holding one go further (a prompt that says "initial" hits the gate's ``init``, not
   ``init_device``).

Why the verdict is the same as reading every line (``tests/test_prefilter.py`` diffs the
two on the corpus): the catalog only tries a pattern when one of its anchors is in the
record, and the tracker ignores records without events except to count them
(:meth:`vllm_doctor.tracker.SourceTracker.feed`). Hard-wrapped continuations have no anchor
of their own: after every line passed on, the scanner offers the next line too
(``want_follow``), and the caller keeps it when the reassembler would join it.
Known limit: a record whose only anchor sits in a continuation of a first line without
one is seen in two parts; the plain path reads it in two parts too
(:meth:`vllm_doctor.pipeline._SourceReader.line`), so the verdict never depends on the path.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from .catalog import ANCHORS
from .frames import KV_ALLOC_FUNCS, TAG_FUNCS
from .sources import WINDOW, Source, cap, spans, text
from .tracker import ERROR_LEVELS

#: What must reach the tracker: every catalog anchor, every traceback tag function, and the
#: error levels (an ERROR record no rule explains is counted: tracker.unexplained_error).
LITERALS: Tuple[str, ...] = tuple(
    sorted(set(ANCHORS) | {f for funcs in TAG_FUNCS.values() for f in funcs} | KV_ALLOC_FUNCS | set(ERROR_LEVELS))
)
#: The first lines are offered to ``on_head`` before any line is scanned (what is learned from
#: them, the format and repeating prefixes, applies to every line); at most HEAD_BYTES of
#: blocks are held for that.
HEAD_LINES = 200
HEAD_BYTES = 8 * 2**20
#: Kept for callers that set the window size of a scanner (tests use tiny ones).
BLOCK_SIZE = WINDOW
#: Teddy, the crate's SIMD searcher, takes at most 64 patterns; past that it falls back to
#: the automaton (measured: 3 GB/s at 64 patterns, 0.3 GB/s at 65). A larger gate is
#: searched as several groups of at most 64, one pass each.
MAX_GATE = 64
#: At most this many passes of the long gate literals over each block (the cover test pins
#: it): several passes of small groups cost less than one pass with literals common in
#: prompts (measured on bench/generate.py's busy log: 0.29 s for 200 MiB with 86 literals in
#: two groups, 0.55 s for one group of 64 that held ``memory``).
MAX_GATE_GROUPS = 4
#: Literals that start with a lower-case letter or a space (:func:`_prose_start`) go in
#: groups of at most this many: in English prompts Teddy's fingerprints of such starts hit at
#: almost every word, and each hit is verified, so the more of them share a pass the slower
#: it is; the literals with a rare first byte share one fast pass (measured on the 1 GiB busy
#: log's first 32 MiB: 66 ms in two passes of 64 and 33 in gate order, 34 ms in one pass of
#: the 36 rare starts and three of at most 24 prose starts; groups of 31: 50 ms).
PROSE_GROUP = 24

#: Gate literals in order of preference. Each starts, where it can, with a byte that is rare
#: in the bulk of a busy log (capitals, ``_``, ``"``): Teddy fingerprints the first bytes of
#: each pattern, and lower-case English starts make it verify a candidate at every other
#: word of a prompt. None of them is in an access line or in the ``SamplingParams(...)``
#: repr that request logging prints. Those that cover no literal are dropped, and a literal
#: none of them covers is added by :func:`gate_literals`, so the gate covers the catalog
#: whatever patterns it gains (``tests/test_prefilter.py`` proves the cover). Nor is any in
#: the file names of vLLM's record prefixes on busy lines (``engine`` would hit V0's
#: ``[async_llm_engine.py:211] Added request`` on every request: ``engine_`` does not).
PREFERRED_GATE: Tuple[str, ...] = (
    # traceback and exception lines, error levels
    "rror", "ERROR", "CRITICAL", "xception", "Exit", "Interrupt", "File ", "Traceback (",
    # HTTP error statuses in access lines (4xx, 5xx: never the 200s of the bulk)
    '" 4', '" 5',
    # stats lines and startup reports
    "Avg prompt", "ing: ", "Prefix cache hit", "KV ", "vLLM", "oading", "Chunked prefill", "Using max model len",
    "aximum", "To serve at least", "args:", "PreemptionMode", "MQLLMEngine", "oute", "Engine loop", "encountered",
    "LLM engine", "Processed prompts", "Actual usage", "█  version", "V2 Model", "V1 model", "Barrier", "iteration t",
    "No available", "divisible by",
    # TPU: tpu-inference's HBM lines, XLA's compile-time early abort
    "total_hbm", "hbm=[(", "Aborting compilation",
    # lower-case phrases
    "died", "world size", "fail", "supported", "is too l", "num_seqs", "startup", "with config:", "graph", "blocks",
    "ested memory", "cache memory", "GPU memory", "Memory profiling", "ut of memory", "_memory", "killed due",
    "usage threshold", "lloc", "ALLOC", "OOM", "oom-", "on device", "not possible", "input shapes", "stats logging",
    "root cause", "the stack", "upper bound", "MODULE:PT_", "process",
    # traceback source-line function names, by a distinctive part
    "_model", "load", "aptur", "kv_cache", "init", "_run", "_loop", "dummy", "valid", "verify", "_check", "_async",
    "engine_", "core_engines", "multimodal", "marlin", "create_", "get_", "sample_tokens", "_queue", "execute",
    "output_", "warm", "tune", "wake_up",
    # no usable accelerator (catalog/platform.py)
    "UnspecifiedPlatform", "infer device", "Device string", "vllm._C", "NVIDIA driver", "NVML", "GPUs are",
    "CUDA", "insufficient for CUDA", "Torch not compiled", "detected platform",
    # the startup logo's tails, sampler frames, runners' SIGKILL wordings, vllm-ascend's sizes
    "█ version", "█ model", "  version ", "  model   ", "apply_top_k", "_sample", "code 137", "status 137", "xitcode: -",
    "Mamba cache", "_kill event", "=9/KILL", "Available memory", "Out Of Memory", "of device memory",
    # environment variables a log shows set (catalog/environment.py; CUDA_ and ALLOC_CONF above)
    "NCCL", "VLLM_", "AMD_SERIALIZE", "HIP_LAUNCH",
)  # fmt: skip


def gate_literals(literals: Iterable[str], preferred: Sequence[str] = PREFERRED_GATE) -> Tuple[str, ...]:
    """Gate literals for ``literals``: the preferred ones that cover at least one of them,
    then, while some literal is uncovered, the substring (4 characters or more, or the
    whole literal when shorter) shared by the most uncovered literals (ties: the longest).
    Every literal contains at least one gate literal (by construction)."""
    lits = sorted(set(literals))
    chosen = [g for g in dict.fromkeys(preferred) if any(g in lit for lit in lits)]
    uncovered = [lit for lit in lits if not any(g in lit for g in chosen)]
    while uncovered:
        counts = {}
        for lit in uncovered:
            subs = {lit} if len(lit) < 4 else {lit[i:j] for i in range(len(lit)) for j in range(i + 4, len(lit) + 1)}
            for s in subs:
                counts[s] = counts.get(s, 0) + 1
        best = max(sorted(counts), key=lambda s: (counts[s], len(s)))
        chosen.append(best)
        uncovered = [lit for lit in uncovered if best not in lit]
    return tuple(chosen)


GATE: Tuple[str, ...] = gate_literals(LITERALS)

try:  # a wheel on all major platforms; without it the pipeline reads every line
    import ahocorasick_rs as _ac
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    _ac = None


def available() -> bool:
    """True when the pre-filter can run (the ``ahocorasick_rs`` package imports)."""
    return _ac is not None


_AUTOMATA = None
#: Teddy fingerprints the first bytes of each pattern, as many as the shortest pattern has
#: (up to 4): one 3-byte literal among the gate makes the whole gate 3x slower (measured),
#: so the gate literals shorter than 4 bytes are searched by a second, tiny automaton.
SHORT = 4


def _prose_start(literal: str) -> bool:
    """True when ``literal`` starts as words of English prose do: a lower-case ASCII letter
    or a space."""
    return literal[:1] == " " or "a" <= literal[:1] <= "z"


def _automata():
    """[(automaton, gate indexes of its patterns)], the exact automaton, and the gate
    indexes whose literal is itself one of :data:`LITERALS`."""
    global _AUTOMATA
    if _AUTOMATA is None:
        gates = []
        rare = [i for i, g in enumerate(GATE) if len(g) >= SHORT and not _prose_start(g)]
        prose = [i for i, g in enumerate(GATE) if len(g) >= SHORT and _prose_start(g)]
        groups = [rare[k : k + MAX_GATE] for k in range(0, len(rare), MAX_GATE)]
        groups += [prose[k : k + PROSE_GROUP] for k in range(0, len(prose), PROSE_GROUP)]
        for part in groups + [[i for i, g in enumerate(GATE) if len(g) < SHORT]]:
            if part:
                ac = _ac.BytesAhoCorasick([GATE[i].encode() for i in part], matchkind=_ac.MatchKind.LeftmostFirst)
                gates.append((ac, part))
        exact = _ac.BytesAhoCorasick([lit.encode() for lit in LITERALS], implementation=_ac.Implementation.DFA)
        literal_set = set(LITERALS)
        sure = frozenset(i for i, g in enumerate(GATE) if g in literal_set)
        _AUTOMATA = gates, exact, sure
    return _AUTOMATA


def _gate_hits(block: bytes, gates) -> List[Tuple[int, int]]:
    """(start offset, gate index) of the gate's matches in ``block``, ascending."""
    if len(gates) == 1:
        ac, part = gates[0]
        return [(s, part[i]) for i, s, _ in ac.find_matches_as_indexes(block)]
    hits: List[Tuple[int, int]] = []
    for ac, part in gates:
        hits.extend((s, part[i]) for i, s, _ in ac.find_matches_as_indexes(block))
    hits.sort()
    return hits


#: Bytes per piece when counting newlines (:func:`newlines`): small enough that each copy
#: comes from the allocator's free lists (no fresh pages), large enough that slicing costs
#: little beside the search.
PIECE = 64 * 1024


def newlines(block: bytes, start: int = 0, end: Optional[int] = None) -> int:
    """The number of newlines in ``block[start:end]``: ``block.count(b"\n", start, end)``,
    about 3x faster on large spans. CPython's count of one byte is a plain loop (about 2 GB/s
    here); deleting the byte from a copy (``bytes.replace``) goes through ``memchr``
    (6.5 GB/s, counting the copy, on bench/generate.py's busy log). Counting the lines of
    every window costs about a third of the gate's time without this."""
    if end is None:
        end = len(block)
    if end - start < 4096:
        return block.count(b"\n", start, end)
    n = 0
    for s in range(start, end, PIECE):
        part = block[s : min(s + PIECE, end)]
        n += len(part) - len(part.replace(b"\n", b""))
    return n


def candidate_starts(block: bytes, end: Optional[int] = None) -> List[int]:
    """Start offsets, ascending, of the lines of ``block[:end]`` (whole lines, ending in a
    newline; bytes past ``end`` are ignored) that hold one of :data:`LITERALS`."""
    gates, exact, sure = _automata()
    if end is None:
        end = len(block)
    starts: List[int] = []
    unsure: List[Tuple[int, int]] = []  # (start, end) of lines hit only through a partial literal
    line_end = -1
    rfind, find = block.rfind, block.find
    for s, idx in _gate_hits(block, gates):
        if s >= end:
            break
        if s < line_end:
            if idx in sure and unsure and unsure[-1][0] == starts[-1]:
                unsure.pop()  # the same line: a full literal after all
            continue
        ls = rfind(b"\n", 0, s) + 1
        line_end = find(b"\n", s)
        starts.append(ls)
        if idx not in sure:
            unsure.append((ls, line_end))
    if not unsure:
        return starts
    # The exact check: one search of the unsure lines, joined by newlines.
    offsets = []
    pos = 0
    for ls, le in unsure:
        offsets.append(pos)
        pos += le - ls + 1
    joined = b"\n".join([block[ls:le] for ls, le in unsure])
    confirmed = set()
    for _, s, _ in exact.find_matches_as_indexes(joined):
        confirmed.add(bisect_right(offsets, s) - 1)
    rejected = {unsure[i][0] for i in range(len(unsure)) if i not in confirmed}
    return [ls for ls in starts if ls not in rejected] if rejected else starts


def _starts_after(block: bytes, first: int, end: int) -> List[int]:
    """:func:`candidate_starts` of ``block[first:end]`` (``first`` a line start), as offsets
    in ``block``."""
    return [first + s for s in candidate_starts(block[first:end])]


def plan_block(block: bytes, end: Optional[int] = None) -> Tuple[int, List[int], List[int]]:
    """``(lines, starts, indexes)`` of ``block[:end]``: its line count, the start offsets of
    its candidate lines (:func:`candidate_starts`) and each one's line index (from 0)."""
    if end is None:
        end = len(block)
    starts = candidate_starts(block, end)
    index: List[int] = []
    line = pos = 0
    for ls in starts:
        line += newlines(block, pos, ls)
        pos = ls
        index.append(line)
    return line + newlines(block, pos, end), starts, index


class BlockScanner:
    """Iterate over the lines of an input that may matter, with their line numbers.

    Yields ``(lineno, text, candidate)``: ``candidate`` True for a line holding a literal,
    False for the line after one that the caller asked to see by setting ``want_follow``
    before resuming. ``lines`` counts every line read; ``skipped`` counts lines passed over
    since the caller last reset it (the caller ends a held record when it is non-zero).
    ``blocks`` may replace the windows of ``src`` (an iterable of ``(block, end, offset)``
    as :func:`vllm_doctor.sources.spans` gives, optionally with a fourth item: the block's
    plan from :func:`plan_block`, computed elsewhere, e.g. in a worker process).
    """

    def __init__(self, src: "Source", block_size: int = BLOCK_SIZE, on_block=None, blocks=None) -> None:
        self.src = src
        self.on_block = on_block  # called with the number of bytes of each read
        self.on_head = None  # called with each of the first lines (format detection)
        self.block_size = block_size
        self.blocks = blocks
        self.want_follow = False
        self.lines = 0
        self.skipped = 0
        self.fold = None  # a vllm_doctor.repeats.Fold: offered each window before its next line

    def _follow(self, block: bytes, end: int, pos: int, cand):
        """Yield the lines from ``pos`` on (up to ``end``) for as long as the caller sets
        ``want_follow``; return the position after the last one yielded (or taken by the fold)."""
        while self.want_follow and pos < end:
            fold = self.fold
            if fold is not None and fold.armed:
                at, n = fold.take(block, pos, end, self.lines + 1)
                if n:
                    self.lines += n
                    pos = at
                    continue  # want_follow is as reading the fold's last line left it
            self.want_follow = False
            le = block.find(b"\n", pos)
            self.lines += 1
            yield self.lines, text(cap(block[pos:le])), pos in cand
            pos = le + 1
        return pos

    def _with_head(self, blocks):
        """``blocks``, after offering their first :data:`HEAD_LINES` lines to ``on_head``
        (they may span blocks: tiny windows, a last line without its newline)."""
        held = []
        lines = size = 0
        for item in blocks:
            held.append(item)
            lines += item[0].count(b"\n", 0, item[1])
            size += item[1]
            if lines >= HEAD_LINES or size >= HEAD_BYTES:
                break
        left = HEAD_LINES
        for item in held:
            if left <= 0:
                break
            block, end = item[0], item[1]
            for raw in block[:end].split(b"\n", left)[:left]:
                self.on_head(text(cap(raw)))
            left -= block.count(b"\n", 0, end)
        item = None  # the loop variable must not keep the last held block alive
        while held:  # drop each held block once handed on (memory stays at one block)
            yield held.pop(0)
        yield from blocks

    def __iter__(self) -> Iterator[Tuple[int, str, bool]]:
        blocks = self.blocks if self.blocks is not None else spans(self.src, self.block_size, self.on_block)
        if self.on_head is not None:
            blocks = self._with_head(iter(blocks))
        for item in blocks:
            block, end = item[0], item[1]
            plan = item[3] if len(item) > 3 else None  # (lines, starts, their line indexes) from a worker
            base = self.lines
            fold = self.fold
            first = 0
            if fold is not None and fold.armed:  # a cycle of repeated lines may go on here
                first, n = fold.take(block, 0, end, self.lines + 1)
                self.lines += n
            if plan is None:
                starts = candidate_starts(block, end) if not first else _starts_after(block, first, end)
                index = None
            else:
                nlines, starts, index = plan
            cand = set(starts)
            # The caller may still want the line after the last one of the previous block.
            pos = yield from self._follow(block, end, first, cand)
            for i, ls in enumerate(starts):
                if ls < pos:
                    continue
                gap = newlines(block, pos, ls) if index is None else index[i] - (self.lines - base)
                self.lines += gap
                self.skipped += gap
                if fold is not None and fold.armed:
                    at, n = fold.take(block, ls, end, self.lines + 1)
                    if n:
                        self.lines += n
                        pos = yield from self._follow(block, end, at, cand)
                        continue
                le = block.find(b"\n", ls)
                self.lines += 1
                self.want_follow = False
                yield self.lines, text(cap(block[ls:le])), True
                pos = yield from self._follow(block, end, le + 1, cand)
            gap = newlines(block, pos, end) if plan is None else nlines - (self.lines - base)
            self.lines += gap
            self.skipped += gap
            if gap:
                self.want_follow = False


def scanner_for(src: "Source", on_block=None) -> Optional[BlockScanner]:
    """A scanner over an opened input, or None when the pre-filter is not available."""
    return BlockScanner(src, on_block=on_block) if available() else None
