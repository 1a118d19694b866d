"""``--follow``: diagnose a log while it is being written, like ``tail -F``.

The input is read line by line (a growing file survives rotation and truncation: when the
path names a new file, or the file shrank, reading starts again from the new file's top;
standard input is read as it comes). Whenever the input goes quiet for :data:`IDLE`
seconds, the runs are diagnosed as they stand and every finding not reported yet is
printed at once: a startup failure as soon as its error line is in, a preemption storm
once it is sustained. Findings are printed once (per source, run and class). Ctrl-C (or
the end of standard input) prints the summary verdict.
"""

from __future__ import annotations

import os
import select
import sys
import time
from typing import Callable, List, Optional, Set, Tuple

from .pipeline import _SourceReader, build_verdict
from .rules import diagnose_run
from .verdict import Finding

IDLE = 0.3  # seconds without new input before findings are evaluated
POLL = 0.2
#: Yielded by the file reader when the path names a new file (rotation) or the file shrank
#: (truncation): line numbers start again at 1, the new file's own.
ROTATED = object()


def _lines_of_file(path: str, stop: Callable[[], bool]):
    """Yield complete lines of a growing file, None whenever it is idle, and :data:`ROTATED`
    before the first line of a file that replaced (or truncated) the one read so far."""
    fh = None
    ino = None
    pos = 0
    buf = b""
    waiting_said = False
    rotated = False
    while not stop():
        if fh is None:
            try:
                fh = open(path, "rb")
                ino = os.fstat(fh.fileno()).st_ino
                pos = 0
                if rotated:
                    yield ROTATED
                    rotated = False
            except OSError:
                if not waiting_said:
                    print(f"vllm-doctor: waiting for {path} to appear", file=sys.stderr, flush=True)
                    waiting_said = True
                yield None
                time.sleep(POLL)
                continue
        chunk = fh.read(65536)
        if chunk:
            pos += len(chunk)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                yield line.decode("utf-8", "replace")
            continue
        yield None
        time.sleep(POLL)
        try:
            st = os.stat(path)
        except OSError:
            continue  # rotated away; the new file is not there yet
        if st.st_ino != ino or st.st_size < pos:  # rotated or truncated: start again
            if buf:
                yield buf.decode("utf-8", "replace")
                buf = b""
            fh.close()
            fh = None
            rotated = True


def _lines_of_stdin(stop: Callable[[], bool]):
    """Yield lines from standard input as they arrive, and None when it is idle; ends at EOF."""
    fd = sys.stdin.fileno()
    buf = b""
    while not stop():
        ready, _, _ = select.select([fd], [], [], IDLE)
        if not ready:
            yield None
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            if buf:
                yield buf.decode("utf-8", "replace")
            return
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace")


class Follower:
    """Feeds lines into a reader and reports findings as soon as they are certain."""

    def __init__(
        self, name: str, input_format: str, emit: Callable[[Finding], None], select: Optional[frozenset] = None
    ) -> None:
        self.reader = _SourceReader(name, input_format, select)
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
        """The path names a new file: what was held ends, its lines count from 1 again."""
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
    standard input; return the summary :class:`~vllm_doctor.verdict.Verdict`."""
    stop = stop or (lambda: False)
    name = "<stdin>" if spec == "-" else spec
    f = Follower(name, input_format, emit, select)
    lines = _lines_of_stdin(stop) if spec == "-" else _lines_of_file(spec, stop)
    dirty = False
    try:
        for text in lines:
            if text is ROTATED:
                f.rotated()
                continue
            if text is None:
                if dirty:
                    f.evaluate()
                    dirty = False
                continue
            f.line(text)
            dirty = True
    except KeyboardInterrupt:
        pass
    f.evaluate()
    return f.finish()
