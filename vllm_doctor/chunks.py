"""Both cores on one large input: gate in worker processes, read the results in order.

A plain (uncompressed, UTF-8) file of at least :data:`MIN_BYTES` is cut at line starts into
chunks of about :data:`CHUNK` bytes (:func:`plan`). Each worker runs the pre-filter's gate
and exact check over its chunk (:func:`scan`) through the one line reader
(:func:`vllm_doctor.sources.spans`, same cap) and returns its line count and the
candidate lines, each with the line after it (what the reassembler may want to join).
A compressed input of at least :data:`COMPRESSED_MIN` is decompressed here while workers
gate its windows (:func:`planned_windows`).
:class:`ChunkScanner` hands them out in file order with their true line numbers, with the
same protocol as :class:`vllm_doctor.prefilter.BlockScanner`, so unwrapping, recognition
and the trackers stay serial and in order: the verdict is the serial one (a test diffs
them on the whole corpus with tiny chunks). A line the caller wants beyond those returned
(a chain of hard-wrapped continuations) is read from the file where it starts.
"""

from __future__ import annotations

import os
from typing import Iterator, List, Optional, Tuple

from .prefilter import HEAD_BYTES, HEAD_LINES, _starts_after, candidate_starts, newlines
from .sources import LINE_LIMIT, WINDOW, Source, cap, spans, text

#: Bytes per chunk: large enough that a worker's start-up and result are small beside its
#: scan, small enough that both cores stay busy to the end.
CHUNK = 64 * 2**20
#: Files smaller than this are scanned in this process (a pool costs about 0.1 s to start).
MIN_BYTES = 192 * 2**20
#: Chunks at the start of the file read by this process, not by a worker: a worker's first
#: result comes about 0.6-0.8 s after the pool is asked for (the fork server imports the
#: package, then the chunk is scanned), time this process spent idle (measured on the 1 GiB
#: busy log, quiet machine; bench/results-2026-12-01-speed4.txt).
HERE = 1

#: One scanned line: (line index within the chunk from 0, capped bytes, offset of the next
#: line in the file, True when it holds a literal).
Hit = Tuple[int, bytes, int, bool]


def line_at(fd: int, offset: int) -> Tuple[Optional[bytes], int]:
    """The line starting at ``offset`` (capped, without its newline) and the offset of the
    next line; ``(None, offset)`` at the end of the file."""
    first = os.pread(fd, LINE_LIMIT + 1, offset)
    if not first:
        return None, offset
    nl = first.find(b"\n")
    if nl >= 0:
        return cap(first[:nl]), offset + nl + 1
    pos = offset + len(first)
    while True:  # a line longer than the cap: find where it ends
        more = os.pread(fd, WINDOW, pos)
        if not more:
            return cap(first), pos
        nl = more.find(b"\n")
        if nl >= 0:
            return cap(first), pos + nl + 1
        pos += len(more)


def plan(path: str, size: int, chunk: int = CHUNK) -> List[Tuple[int, int]]:
    """Byte ranges [start, end) covering the file, each starting at a line start."""
    bounds = [0]
    with open(path, "rb", buffering=0) as fh:
        fd = fh.fileno()
        pos = chunk
        while pos < size:
            _, nxt = line_at(fd, pos - 1)  # the line holding byte pos - 1 ends before nxt
            if nxt >= size or nxt <= bounds[-1]:
                break
            bounds.append(nxt)
            pos = nxt + chunk
    bounds.append(size)
    return list(zip(bounds, bounds[1:]))


#: Bytes of candidate lines a worker returns at most for one chunk; past that the chunk is
#: dense (a 5xx storm, a restart loop) and the parent reads it itself, so a result never
#: holds more than this (memory stays bounded whatever the shape of the log).
BUDGET = 4 * 2**20


def _hits(path: str, start: int, end: int, out: dict, fold=None, base: int = 0) -> Iterator[Hit]:
    """Every candidate line of the chunk [start, end) and the line after each (the next
    chunk's first line for the last one), in line order. Sets ``out["lines"]`` (lines in
    the chunk) at the end. A next-line offset is -1 where it is not known (after a line longer than a window).
    ``fold`` (a :class:`vllm_doctor.repeats.Fold`, here in the parent only; ``base``: lines
    before the chunk) is offered each window before its next line; the lines it takes come
    as one hit with no text (the index of the last of them)."""
    lines = 0
    want_next = False  # the last line of the previous block was a candidate
    with open(path, "rb", buffering=0) as fh:
        fd = fh.fileno()
        if start == 0 and os.pread(fd, 3, 0) == b"\xef\xbb\xbf":
            start = 3  # chunk 0 drops the UTF-8 BOM, as the serial reader does
        for block, stop, offset in spans(Source(path, fh), region=(fd, start, end)):
            at = offset if offset >= 0 else None
            first = 0
            if fold is not None and fold.armed:
                first, n = fold.take(block, 0, stop, base + lines + 1)
                if n:
                    want_next = False
                    yield lines + n - 1, None, -1 if at is None else at + first, True
            starts = candidate_starts(block, stop) if not first else _starts_after(block, first, stop)
            cand = set(starts)
            find = block.find
            if want_next:
                le = find(b"\n")
                if 0 not in cand:
                    yield lines, cap(block[:le]), -1 if at is None else at + le + 1, False
                want_next = False
            pos, line = first, lines + newlines(block, 0, first)
            for ls in starts:
                if ls < pos:
                    continue  # taken by the fold
                line += newlines(block, pos, ls)
                pos = ls
                if fold is not None and fold.armed:
                    nxt, n = fold.take(block, ls, stop, base + line + 1)
                    if n:
                        yield line + n - 1, None, -1 if at is None else at + nxt, True
                        line += n
                        pos = nxt
                        continue
                le = find(b"\n", ls)
                yield line, cap(block[ls:le]), -1 if at is None else at + le + 1, True
                nxt = le + 1
                if nxt >= stop:
                    want_next = True
                elif nxt not in cand:
                    ne = find(b"\n", nxt)
                    yield line + 1, cap(block[nxt:ne]), -1 if at is None else at + ne + 1, False
            # ``line`` is ``lines`` plus the newlines before ``pos``: only the rest is counted (a
            # second count of the whole block cost as much as the gate). With a fold the whole
            # block is counted again, whatever the fold took.
            lines = line + newlines(block, pos, stop) if fold is None else lines + newlines(block, 0, stop)
        out["lines"] = lines
        if want_next and end < os.fstat(fd).st_size:
            nxt, after = line_at(fd, end)
            if nxt is not None:
                yield lines, nxt, after, bool(candidate_starts(nxt + b"\n"))


def scan(path: str, start: int, end: int, budget: int = BUDGET):
    """Scan one chunk in a worker: ``(lines, hits)`` (see :func:`_hits`), or None when its
    candidate lines pass ``budget`` bytes (the parent then reads it itself)."""
    out: dict = {}
    hits: List[Hit] = []
    size = 0
    for h in _hits(path, start, end, out):
        hits.append(h)
        size += len(h[1]) + 64
        if size > budget:
            return None
    return out["lines"], hits


def head_lines(fd: int) -> List[str]:
    """The file's first :data:`~vllm_doctor.prefilter.HEAD_LINES` lines (at most
    :data:`~vllm_doctor.prefilter.HEAD_BYTES`), capped and decoded, read here whatever the
    chunks: what is learned from them (format, repeating prefixes) must be known before the
    first candidate line is read, as on the serial path."""
    lines: List[str] = []
    offset = 3 if os.pread(fd, 3, 0) == b"\xef\xbb\xbf" else 0
    size = 0
    while len(lines) < HEAD_LINES and size < HEAD_BYTES:
        line, offset = line_at(fd, offset)
        if line is None:
            break
        lines.append(text(line))
        size += len(line) + 1
    return lines


def _line_by_number(fd: int, start: int, k: int) -> bytes:
    """Line ``k`` (from 0) of the chunk starting at ``start``, capped, counted the slow way
    (only where a line longer than a window made offsets unknown)."""
    seen = 0
    if start == 0 and os.pread(fd, 3, 0) == b"\xef\xbb\xbf":
        start = 3
    for block, stop, _ in spans(Source("", None), region=(fd, start, None)):
        n = block.count(b"\n", 0, stop)
        if seen + n > k:
            return cap(block[:stop].split(b"\n", k - seen + 1)[k - seen])
        seen += n
    return b""


class ChunkScanner:
    """The protocol of :class:`vllm_doctor.prefilter.BlockScanner` over chunks scanned in
    worker processes. ``results`` yields ``(result, (start, end))`` in file order, where
    ``result`` is what :func:`scan` returned (None for a dense chunk, which is then read
    here, hit by hit); ``on_chunk(nbytes)`` is called as each chunk is done."""

    def __init__(self, path: str, results, on_chunk=None) -> None:
        self.path = path
        self.results = results
        self.on_chunk = on_chunk
        self.on_head = None
        self.want_follow = False
        self.lines = 0
        self.skipped = 0
        self.fold = None  # a vllm_doctor.repeats.Fold, offered the windows of dense chunks

    def __iter__(self) -> Iterator[Tuple[int, str, bool]]:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            yield from self._iter(fd)
        finally:
            os.close(fd)

    def _iter(self, fd: int) -> Iterator[Tuple[int, str, bool]]:
        self.last = 0  # number of the last line handed out
        self.after = 0  # file offset of the line after it (-1: unknown)
        self.chunks: List[Tuple[int, int]] = []  # (start offset, lines before) of each chunk seen
        done = 0
        if self.on_head is not None:
            for h in head_lines(fd):
                self.on_head(h)
        fold = self.fold
        for result, (start, end) in self.results:
            if result is not None and fold is not None and fold.folding:
                # A fold that reached the end of a dense chunk ends here: a worker's chunk is
                # never offered to it, and its replay sets what the next line needs (want_follow).
                fold.close()
            self.chunks.append((start, done))
            out: dict = {}
            hits = _hits(self.path, start, end, out, self.fold, done) if result is None else result[1]
            for idx, raw, after, cand in hits:
                n = done + idx + 1
                if raw is None:  # lines the fold took, up to line n
                    self.last, self.after = n, after
                    continue
                if n <= self.last:
                    continue
                # Lines the caller wants that the workers did not return (a chain of
                # hard-wrapped continuations): read them where they are.
                yield from self._wanted(fd, n - 1)
                if n == self.last + 1 and self.want_follow:
                    self.want_follow = False
                elif not cand:
                    continue
                else:
                    gap = n - self.last - 1
                    self.skipped += gap
                    self.want_follow = False
                self.last, self.after = n, after
                yield n, text(raw), cand
            done += out["lines"] if result is None else result[0]
            if self.on_chunk is not None:
                self.on_chunk(end - start)
        if fold is not None and fold.folding:
            fold.close()
        yield from self._wanted(fd, done)
        self.skipped += done - self.last
        self.lines = done

    def _wanted(self, fd: int, upto: int):
        """Hand out the lines after the last one, up to line ``upto``, while wanted."""
        while self.want_follow and self.last < upto:
            self.want_follow = False
            n = self.last + 1
            if self.after >= 0:
                line, self.after = line_at(fd, self.after)
            else:
                start, before = max(c for c in self.chunks if c[1] < n)
                line, self.after = _line_by_number(fd, start, n - 1 - before), -1
            self.last = n
            yield n, text(line or b""), False


def _ordered(ex, args, ahead: int, here: int = 0):
    """Results of ``scan(*a)`` for each ``a`` in ``args``, in order, with at most ``ahead``
    chunks submitted and not yet handed out (bounded memory). The first ``here`` chunks are
    not submitted: their result is None (read here, as a dense chunk), while the workers
    start on the next ones. Should the pool break (a worker killed, a platform where
    workers cannot start), the chunks left are read here too."""
    from collections import deque
    from concurrent.futures import BrokenExecutor

    pending = deque()
    it = iter(args)
    broken = False
    local = [a for _, a in zip(range(here), it)]

    def submit(a):
        nonlocal broken
        if not broken:
            try:
                return ex.submit(scan, *a)
            except (BrokenExecutor, RuntimeError, OSError):
                broken = True
        return None

    for a in it:
        pending.append((submit(a), a))
        if len(pending) >= ahead:
            break
    for a in local:  # the workers start meanwhile (a pool takes about half a second to start)
        yield None, (a[1], a[2])
    while pending:
        fut, a = pending.popleft()
        result = None
        if fut is not None and not broken:
            try:
                result = fut.result()
            except (BrokenExecutor, OSError):
                broken = True
        nxt = next(it, None)
        if nxt is not None:
            pending.append((submit(nxt), nxt))
        yield result, (a[1], a[2])


def chunkable(src: Source) -> Optional[int]:
    """The size of ``src`` when it is worth scanning in chunks: a plain regular file of at
    least :data:`MIN_BYTES`, UTF-8 (no UTF-16/32 byte-order mark). Else None."""
    if not hasattr(os, "pread") or src.compression is not None or not os.path.isfile(src.name):
        return None
    size = src.size()
    if size is None or size < MIN_BYTES or (os.cpu_count() or 1) < 2:
        return None
    with open(src.name, "rb") as fh:
        if fh.read(4).startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
            return None
    return size


class PooledScan:
    """A :class:`ChunkScanner` over ``path`` with its own worker pool (closed at the end)."""

    def __init__(self, path: str, size: int, on_block=None, chunk: Optional[int] = None, workers: Optional[int] = None):
        from . import workers as _workers

        chunk = chunk or CHUNK
        self.ex = _workers.pool(workers)
        n = self.ex._max_workers
        ranges = plan(path, size, chunk)
        args = [(path, s, e) for s, e in ranges]
        self.scanner = ChunkScanner(path, _ordered(self.ex, args, 2 * n, HERE), on_block)

    def close(self) -> None:
        from . import workers as _workers

        _workers.shutdown(self.ex)


#: Compressed files at least this large (compressed size) have their windows gated by
#: workers while this process decompresses (a second thread with ISA-L) and reads on.
COMPRESSED_MIN = 16 * 2**20


def planned_windows(src: Source, ex, ahead: int, on_read=None, size: int = WINDOW):
    """The windows of ``src`` (any input: decompressed, transcoded) with their plans
    (:func:`vllm_doctor.prefilter.plan_block`) made by the workers of ``ex``, in order,
    at most ``ahead`` windows in flight (bounded memory). A broken pool: plans made here."""
    from collections import deque
    from concurrent.futures import BrokenExecutor

    from .prefilter import plan_block
    from .sources import windows

    pending = deque()
    broken = False

    def ready(block, fut):
        nonlocal broken
        if fut is not None and not broken:
            try:
                return fut.result()
            except (BrokenExecutor, OSError):
                broken = True
        return plan_block(block)

    for block in windows(src, size, on_read=on_read):
        fut = None
        if not broken:
            try:
                fut = ex.submit(plan_block, block)
            except (BrokenExecutor, RuntimeError, OSError):
                broken = True
        pending.append((block, fut))
        if len(pending) >= ahead:
            b, f = pending.popleft()
            yield b, len(b), -1, ready(b, f)
    while pending:
        b, f = pending.popleft()
        yield b, len(b), -1, ready(b, f)


class PooledBlocks:
    """A :class:`vllm_doctor.prefilter.BlockScanner` over a compressed input whose windows
    are gated by a worker pool (closed at the end)."""

    def __init__(self, src: Source, on_block=None, workers: Optional[int] = None, size: int = WINDOW):
        from . import workers as _workers
        from .prefilter import BlockScanner

        self.ex = _workers.pool(workers)
        blocks = planned_windows(src, self.ex, 2 * self.ex._max_workers + 1, on_block, size)
        self.scanner = BlockScanner(src, blocks=blocks)

    def close(self) -> None:
        from . import workers as _workers

        _workers.shutdown(self.ex)
