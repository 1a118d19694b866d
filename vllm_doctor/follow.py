"""``--follow``: diagnose a log while it is being written, like ``tail -F``.

The input goes through the same line reader as every other path (windows of up to 8 MiB,
the same line cap and decoding: :mod:`vllm_doctor.sources`), so memory stays bounded on a
file with no newline (``-F /dev/zero``). A growing file survives rotation (when the path
names a new file, the old one is read to its end first, then the new one from its top)
and truncation (copytruncate: the file shrank, or the bytes just before the read position
changed although it is as large as before); standard input is read as it comes. Whenever the input goes quiet for :data:`IDLE`
seconds, the runs are diagnosed as they stand and every finding not reported yet is
printed at once: a startup failure as soon as its error line is in, a preemption storm
once it is sustained. Findings are printed once (per source, run and class). Ctrl-C (or
the end of standard input) prints the summary verdict.
"""

from __future__ import annotations

import os
import select
import stat
import sys
import time
from typing import Callable, Iterator, List, Optional, Set, Tuple

from .pipeline import _SourceReader, build_verdict
from .rules import diagnose_run
from .sources import WINDOW, Decoder, LineCutter, cap, text
from .verdict import Finding

IDLE = 0.3  # seconds without new input before findings are evaluated
POLL = 0.2
#: Yielded by the file reader when the path names a new file (rotation) or the file shrank
#: (truncation): line numbers start again at 1, the new file's own.
ROTATED = object()


def _split(block: bytes) -> List[str]:
    """The lines of a block of whole lines, capped and decoded as every path does."""
    lines = block.split(b"\n")
    lines.pop()
    return [text(cap(line)) for line in lines]


#: Bytes compared at the read position to tell a file rewritten in place (copytruncate,
#: then regrown past where we were between two polls) from one that only grew.
TAIL = 64


class _FileFollower:
    """Reads a growing file in windows through the one line reader (BOM decoding, line
    cap), surviving rotation (a new file at the path: the old one is read to its end
    first) and truncation (copytruncate: the file shrank, or the bytes before the read
    position changed, whatever its size now)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fh = None
        self.ino = None
        self.pos = 0
        self.tail = b""  # the last TAIL bytes read, ending at pos
        self.regular = True
        self.dec = Decoder()
        self.cutter = LineCutter()

    def open(self) -> bool:
        try:
            fh = open(self.path, "rb", buffering=0)
        except OSError:
            return False
        st = os.fstat(fh.fileno())
        self.fh, self.ino, self.pos, self.tail = fh, st.st_ino, 0, b""
        self.regular = stat.S_ISREG(st.st_mode)
        self.dec, self.cutter = Decoder(), LineCutter()
        return True

    def read(self) -> Optional[List[str]]:
        """The lines completed by one window read (maybe none, inside a long line), or
        None at the end of what is there now."""
        chunk = self.fh.read(WINDOW)
        if not chunk:
            return None
        self.pos += len(chunk)
        self.tail = (self.tail + chunk[-TAIL:])[-TAIL:]
        return _split(self.cutter.feed(self.dec.feed(chunk)))

    def drain(self) -> Iterator[str]:
        """The rest of the current file, to its end, and then its partial last line."""
        while True:
            lines = self.read()
            if lines is None:
                break
            yield from lines
        yield from _split(self.cutter.feed(self.dec.feed(b"", final=True)) + self.cutter.end())

    def replaced(self) -> Optional[str]:
        """'rotated' when the path names another file, 'truncated' when this one was cut
        (it shrank, or the bytes before our position are not the ones we read), else None."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None  # rotated away; the new file is not there yet
        if st.st_ino != self.ino:
            return "rotated"
        if not self.regular:
            return None
        if st.st_size < self.pos:
            return "truncated"
        if self.tail:
            try:
                if hasattr(os, "pread"):
                    seen = os.pread(self.fh.fileno(), len(self.tail), self.pos - len(self.tail))
                else:  # Windows: seek, read, seek back
                    self.fh.seek(self.pos - len(self.tail))
                    seen = self.fh.read(len(self.tail))
                    self.fh.seek(self.pos)
            except OSError:
                return None
            if seen != self.tail:
                return "truncated"
        return None

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _lines_of_file(f: _FileFollower, stop: Callable[[], bool]):
    """Yield the lines of a growing file as they are completed, None whenever it is idle, and
    :data:`ROTATED` after the last line of a file that was replaced or truncated (the lines
    after it are the new file's, numbered from 1)."""
    path = f.path
    waiting_said = False
    try:
        while not stop():
            if f.fh is None:
                if not f.open():
                    if not waiting_said:
                        print(f"vllm-doctor: waiting for {path} to appear", file=sys.stderr, flush=True)
                        waiting_said = True
                    yield None
                    time.sleep(POLL)
                    continue
            lines = f.read()
            if lines is not None:
                yield from lines
                continue
            yield None
            time.sleep(POLL)
            change = f.replaced()
            if change == "rotated":
                yield from f.drain()  # what was written before the rotation, to the last line
                f.close()
                yield ROTATED
            elif change == "truncated":
                yield from _split(f.cutter.end())  # a partial line before the cut ends there
                f.close()
                yield ROTATED
    finally:
        f.close()


def _held(reader) -> List[str]:
    """The partial last line a reader holds (no newline yet), as a line, when following ends."""
    return _split(reader.cutter.feed(reader.dec.feed(b"", final=True)) + reader.cutter.end())


class _StdinReader:
    def __init__(self) -> None:
        self.dec, self.cutter = Decoder(), LineCutter()


def _lines_of_stdin(r: _StdinReader, stop: Callable[[], bool]):
    """Yield lines from standard input as they arrive, and None when it is idle; ends at EOF."""
    fd = sys.stdin.fileno()
    dec, cutter = r.dec, r.cutter
    while not stop():
        ready, _, _ = select.select([fd], [], [], IDLE)
        if not ready:
            yield None
            continue
        chunk = os.read(fd, WINDOW)
        if not chunk:
            yield from _held(r)
            return
        yield from _split(cutter.feed(dec.feed(chunk)))


class Follower:
    """Feeds lines into a reader and reports findings as soon as they are certain."""

    def __init__(
        self, name: str, input_format: str, emit: Callable[[Finding], None], select: Optional[frozenset] = None
    ) -> None:
        self.reader = _SourceReader(name, input_format, select)
        self.reader.live = True
        self.emit = emit
        self.printed: Set[Tuple[str, int, str]] = set()
        self.lines = 0  # lines read, over every file followed
        self.base = 0  # lines read before the current file (rotation numbers lines anew)

    def line(self, text: str) -> None:
        self.lines += 1
        if self.lines <= 200:
            self.reader.sniff(text)
        self.reader.line(self.lines - self.base, text)

    def rotated(self) -> None:
        """The path names a new file (or this one was cut): what was held ends, and its
        lines count from 1 again, so evidence cites lines of the file on disk."""
        self.reader.consume(self.reader.reasm.flush())
        self.base = self.lines

    def evaluate(self) -> List[Finding]:
        """Diagnose the runs as they stand; emit the findings not emitted yet."""
        reader = self.reader
        reader.consume(reader.reasm.flush())
        new = []
        for tracker in reader.trackers.values():
            for run in tracker.runs:
                # A rule that raises here raises again in finish(), which reports it.
                for f in diagnose_run(run, reader.select, errors=[]):
                    key = (f.source, f.run, f.class_id)
                    if f.severity in ("critical", "warning") and key not in self.printed:
                        self.printed.add(key)
                        new.append(f)
                        self.emit(f)
        return new

    def finish(self):
        return build_verdict(self.reader.finish(self.lines - self.base), select=self.reader.select)


def follow(
    spec: str,
    input_format: str,
    emit: Callable[[Finding], None],
    stop: Optional[Callable[[], bool]] = None,
    select: Optional[frozenset] = None,
):
    """Follow ``spec`` (a path or ``-``) until ``stop()`` is true, Ctrl-C or the end of
    standard input; return the summary :class:`~vllm_doctor.verdict.Verdict`. Raises
    :class:`~vllm_doctor.sources.InputError` for a compressed file (gzip, bzip2, xz, zstd)."""
    stop = stop or (lambda: False)
    if spec != "-":
        from .sources import InputError, compression_of

        kind = compression_of(spec)
        if kind is not None:
            # A compressed file is finished (nothing appends to it) and its bytes are no lines.
            raise InputError(f"{spec}: cannot follow a compressed file ({kind}); diagnose it without -F")
    name = "<stdin>" if spec == "-" else spec
    f = Follower(name, input_format, emit, select)
    src = _StdinReader() if spec == "-" else _FileFollower(spec)
    lines = _lines_of_stdin(src, stop) if spec == "-" else _lines_of_file(src, stop)
    dirty = False
    try:
        for text in lines:
            if text is None:
                if dirty:
                    f.evaluate()
                    dirty = False
                continue
            if text is ROTATED:
                f.rotated()
                continue
            f.line(text)
            dirty = True
    except KeyboardInterrupt:
        pass
    try:
        for text in _held(src):  # a last line without its newline still counts, as in batch
            f.line(text)
    except KeyboardInterrupt:
        pass
    f.evaluate()
    return f.finish()
