"""The same lines again and again: count the cycles instead of reading every line (issue 15).

Logs where every line is a candidate of the pre-filter are mostly one short cycle of lines
repeated: an HTTP 500 storm (one access line, period 1), an endless traceback (a frame and
its source line, period 2), a restart loop (a startup's dozen lines, each time a new run).
Read line by line they cost about 50 microseconds a line; :class:`Fold` reads them at the
speed of a regular expression over the read window.

How (``pipeline._read_candidates`` drives it; the scanners call :meth:`Fold.take`):

1. **Detect.** Every line the read loop handles is offered to :meth:`Fold.observe` after
   it was read in full. While lines follow one another with no line skipped between them,
   each gets a cheap key (the line without its digits); a line whose key came back ``P``
   lines after its last occurrence, line after line, is a cycle of period ``P``
   (at most :data:`PERIOD_MAX`).
2. **Settle and check.** Once the cycle has been read in full :data:`SETTLE` times, the
   state of the reader and its tracker is compared at the ends of the last cycles
   (:meth:`vllm_doctor.tracker.SourceTracker.fold_state`): everything but counters must be
   the same at both ends (so the bounded lists are full and the traceback frames repeat),
   the counters must grow by the same amount each cycle, and either no run opened (the
   cycle stays in one run and carries only :data:`~vllm_doctor.tracker.FOLDABLE_KINDS`) or
   each cycle opened exactly one with the run list full (a restart loop). The last two
   cycles' lines must have the same :func:`shape` and give the same events (their masked
   digits differ). Inputs the command line reads line by line (a terminal's hard wrap,
   Markdown escapes, the AWS CLI's JSON: :func:`vllm_doctor.formats.reads_every_line`) are
   never folded.
3. **Fold.** The scanners then offer each window to :meth:`Fold.take` before reading its
   next line: one regular expression per cycle position (the shape: every character as it
   is, the digits of time stamps and of an access line's client address as digit classes)
   consumes the lines of whole cycles in C. Nothing is decoded, unwrapped or recognised.
4. **Replay.** When a line breaks the cycle (or the input ends), the last :data:`REPLAY`
   cycles (and the cycle begun) are read in full, in order, as if they came now; the
   cycles before them are accounted by adding their counters' growth
   (:meth:`~vllm_doctor.tracker.SourceTracker.fold_advance`). A scanner about to hand out
   lines the fold was not offered (a chunk a worker scanned, :mod:`vllm_doctor.chunks`)
   ends it first, so the replay sets what the next line needs (``want_follow``).

Follow mode (``-F``, :mod:`vllm_doctor.follow`) never folds: it feeds every line to the
reader, with no scanner. ``diagnose_input(..., fold=False)`` turns the fold off (the tests
diff the two).

Why the verdict is the one of reading every line (``tests/test_repeats.py`` diffs them on
the corpus and on generated storms, tracebacks and restart loops):

* Lines of one shape give the same records and events but for their line number, time and
  text: the masked digits are time stamps in the line's envelope (before the record's text,
  which must be a verbatim suffix of the line; :mod:`vllm_doctor.envelopes` reads digits
  there as classes and keeps them only as ``Record.time``) and the client address of a
  uvicorn access line (whose events may not depend on it: checked on the cycle's lines with
  other addresses, and on the whole catalog by the tests). No pre-filter literal or catalog
  anchor can overlap a masked digit (:func:`masks_safe`), so candidates and patterns tried
  are the same. Records that carry a process or record prefix are never continuations, so
  reassembly is the same.
* Masked runs may change length (a fraction docker trimmed, a client's octets): only the
  line's length changes, which reassembly reads for the next line alone, and no line of a
  cycle can continue another; the replayed lines are the real ones.
* What the tracker decides from a counter is settled with the state: caps of the bounded
  lists and sets are reached while settling (the ``steady`` sizes), a repeated failure's
  ``last_seq`` moves on with each cycle, and a memory message that did not merge into an
  earlier failure (``MERGE_WINDOW``) never will, the distance only growing.
* The tracker forgets all but counters within :data:`REPLAY` cycles: the runs past
  ``MAX_RUNS`` (64), the last lines kept as evidence, the frames of a traceback (64);
  first lines and sets were settled during :data:`SETTLE` cycles, which the equal
  ``steady`` state proves. So the cycles between are seen only through their counters.

Memory: the last ``2 x PERIOD_MAX`` lines read in full and the lines of ``REPLAY + 1``
cycles (at most :data:`CYCLE_CHARS` characters a cycle).
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from .catalog import Catalog
from .envelopes import _unwrap
from .prefilter import LITERALS
from .tracker import FOLDABLE_KINDS, RUN_FOLDABLE_KINDS, SourceTracker

#: Lines in one cycle at most.
PERIOD_MAX = 64
#: Cycles read in full before folding starts: more than any first-N list the tracker keeps
#: (64 runs, 64 traceback frames, 16 consequences, 8 lines a failure).
SETTLE = SourceTracker.MAX_RUNS + 1
#: Cycles read in full when a fold ends: the tracker's last-N state is theirs (64 runs).
REPLAY = SourceTracker.MAX_RUNS + 1
#: Lines following one another, none skipped, before keys are computed (a busy log's few
#: candidates never pay for detection).
STREAK = 8
#: Characters of one cycle's lines at most (the replay buffer holds REPLAY + 1 cycles).
CYCLE_CHARS = 16384
#: Characters of one line of a cycle at most.
LINE_CHARS = 4096
#: Cycles one regular expression call consumes at most (``re`` keeps a mark per repeat).
CYCLE_RUN = 4096

_DIGITS = b"0123456789"
_RUN = re.compile(r"[0-9]+")
# A time stamp in a line's envelope: vLLM's "MM-DD HH:MM:SS", RFC 3339 (docker, kubectl),
# "YYYY-MM-DD HH:MM:SS,mmm", journald's "Aug 19 18:34:30"; fractions and zones included.
_TIME = re.compile(
    r"(?<![0-9])(?:[0-9]{4}-[0-9]{2}-[0-9]{2}[T ]|[0-9]{2}-[0-9]{2} |[A-Z][a-z]{2} [ 0-9][0-9] )?"
    r"[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})?(?![0-9])"
)
# The client of a uvicorn access line: "10.0.3.4:40003 - \"".
_CLIENT = re.compile(r'([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3}):([0-9]{1,5}) - "')
_PROBE_CLIENTS = ("127.0.0.1:1", "255.255.255.255:65535")


def _skeleton(s: str) -> str:
    return _RUN.sub("#", s)


#: Skeletons (digit runs as ``#``) of the pre-filter literals that hold a digit: the only
#: literals a changed digit could make or unmake (they include every catalog anchor).
_DIGIT_LITERALS = tuple(sorted({_skeleton(lit) for lit in LITERALS if any(c.isdigit() for c in lit)}))


class Shape:
    """One line as a class of lines with the same effect: ``text`` with ``masks``, the
    ``(start, end, variable)`` spans of digit runs any digits may take (``variable``: any
    length up to the span's kind), and ``client`` the access line's client address (or None).
    Equal shapes have equal :attr:`key` (a variable run's length is no part of it)."""

    __slots__ = ("text", "masks", "client", "client_at", "key", "record")

    def __init__(
        self,
        text: str,
        masks: List[Tuple[int, int, int]],
        client: Optional[str] = None,
        client_at: int = 0,
        record=None,
    ) -> None:
        self.record = record  # the line's record (as unwrapping gave it)
        self.text = text
        self.masks = masks
        self.client = client
        self.client_at = client_at
        parts = []
        pos = 0
        for start, end, width in masks:
            parts.append(text[pos:start])
            parts.append((0 if width else end - start, width))  # a variable run: any length up to width
            pos = end
        parts.append(text[pos:])
        self.key = tuple(parts)

    def pattern(self) -> bytes:
        """The regular expression (bytes) of the lines of this shape, newline included."""
        out = []
        for part in self.key:
            if isinstance(part, tuple):
                n, width = part
                out.append(b"[0-9]{1,%d}" % width if width else b"[0-9]{%d}" % n)
            else:
                out.append(re.escape(part.encode("utf-8")))
        return b"".join(out) + b"\n"


def masks_safe(text: str, masks: List[Tuple[int, int, int]]) -> bool:
    """True when no pre-filter literal (catalog anchors included) can occur overlapping a
    masked digit run, whatever digits it holds: a literal in a line of the class shows as its
    skeleton in the line's skeleton (digit runs as ``#``, which masked runs keep), so it is
    enough that no digit-holding literal's skeleton covers a masked ``#``."""
    masked = {start for start, _, _ in masks}
    skel = []
    hashes = set()
    pos = 0
    for m in _RUN.finditer(text):
        skel.append(text[pos : m.start()])
        if m.start() in masked:
            hashes.add(sum(len(p) for p in skel))
        skel.append("#")
        pos = m.end()
    skel.append(text[pos:])
    s = "".join(skel)
    for lit in _DIGIT_LITERALS:
        at = s.find(lit)
        while at >= 0:
            if any(at <= h < at + len(lit) for h in hashes):
                return False
            at = s.find(lit, at + 1)
    return True


def shape(env, text: str) -> Optional[Shape]:
    """The :class:`Shape` of one physical line as ``env`` (the input's
    :class:`~vllm_doctor.envelopes.Envelopes`) reads it, or None when the line cannot be
    folded: longer than :data:`LINE_CHARS`, with colour codes or carriage returns, more or
    less than one record, a record that could continue another (no process or record
    prefix), a text that is not a verbatim suffix of the line, a masked digit a literal could
    overlap."""
    if len(text) > LINE_CHARS or "\x1b" in text or "^" in text or "\r" in text or text[:1] == "\ufeff":
        return None
    recs = _unwrap("", 0, text, env, True, 0)  # what Envelopes.unwrap reads, with no state changed
    if len(recs) != 1:
        return None
    rec = recs[0]
    if rec.inner_bare or rec.wrapper in ("loki-text", "cloudwatch-json"):
        return None
    body = rec.text  # may be empty (a record with nothing after its prefix: breakit4 item 11)
    line = text.rstrip()
    if not line.endswith(body):
        return None
    cut = len(line) - len(body)
    masks: List[Tuple[int, int, int]] = []
    for m in _TIME.finditer(text, 0, cut):
        for r in _RUN.finditer(text, m.start(), m.end()):
            masks.append((r.start(), r.end(), 9 if text[r.start() - 1 : r.start()] in ".," else 0))
    client, client_at = None, 0
    c = _CLIENT.match(text, cut) if rec.file == "uvicorn" else None
    if c is not None:
        client, client_at = text[c.start(1) : c.end(5)], c.start(1)
        masks.extend((c.start(g), c.end(g), 5 if g == 5 else 3) for g in range(1, 6))
    if not masks_safe(text, masks):
        return None
    return Shape(text, masks, client, client_at, rec)


def _events_of(env, catalog: Catalog, text: str) -> Optional[List[Tuple[str, str, str]]]:
    """``(kind, pattern, data)`` of the events of a one-record line (None for another line).
    A record whose recognition raises feeds nothing (the reader counts an internal error)."""
    recs = _unwrap("", 0, text, env, True, 0)
    if len(recs) != 1:
        return None
    try:
        events = catalog.recognise(recs[0])
    except Exception:  # noqa: BLE001 - what the reader does with it: nothing fed, counted there
        return []
    return [(e.kind, e.pattern, repr(sorted(e.data.items()))) for e in events]


class Fold:
    """Folds cycles of repeated lines for one :class:`~vllm_doctor.pipeline._SourceReader`
    (see the module docstring). ``offer(lineno, text, candidate)`` reads one line in full as
    the read loop does; ``scanner`` is the scanner whose ``want_follow`` the read loop sets.
    ``folded`` counts the lines read as counts, ``folds`` the folds made (for tests)."""

    def __init__(self, reader, offer: Callable[[int, str, bool], None], scanner) -> None:
        self.reader = reader
        self.offer = offer
        self.scanner = scanner
        self.armed = False
        self.folding = False
        self.folded = 0
        self.folds = 0
        self.last_lineno = 0
        self._scratch = Catalog()
        self.seen: Dict[bytes, int] = {}
        self.history: Deque[Tuple[int, str, bool]] = deque(maxlen=2 * PERIOD_MAX)
        self.snaps: Deque[Any] = deque(maxlen=3)
        self._reset()

    # -- detection -------------------------------------------------------------------------
    def _reset(self) -> None:
        # Emptied, not made anew: a busy log resets at almost every candidate (a stats line
        # after skipped lines), and nothing else holds these (_arm copies the history).
        self.streak = 0
        self.seen.clear()
        self.index = 0
        self.period = 0
        self.run = 0
        self.history.clear()
        self.snaps.clear()
        self.attempt = SETTLE
        self.backoff = 1
        self.armed = False

    def observe(self, lineno: int, text: str, candidate: bool) -> None:
        """One line the read loop has just read in full (in file order)."""
        if self.armed:
            # Read in full while armed (a line the scanner handed out without offering the
            # window first, e.g. the line after a candidate): still the cycle, or the end of it.
            ph = self.phase
            if (
                lineno == self.last_lineno + 1
                and candidate == self.candidates[ph]
                and self.lines_rx[ph].fullmatch(text.encode("utf-8", "surrogatepass") + b"\n")
            ):
                self.last_lineno = lineno
                self.phase = (ph + 1) % self.period
                return
            self._reset()
        if lineno != self.last_lineno + 1:
            self._reset()
        self.last_lineno = lineno
        self.streak += 1
        self.history.append((lineno, text, candidate))
        if self.streak < STREAK:
            return
        key = text.encode("utf-8", "surrogatepass").translate(None, _DIGITS)
        i = self.index
        self.index += 1
        prev = self.seen.get(key)
        self.seen[key] = i
        if len(self.seen) > 4 * PERIOD_MAX:
            self.seen = {key: i}
        p = i - prev if prev is not None else 0
        if p and p == self.period:
            self.run += 1
        else:
            self.armed = False
            self.snaps.clear()
            self.period, self.run = (p, 1) if 0 < p <= PERIOD_MAX else (0, 0)
            self.attempt, self.backoff = SETTLE, 1
            return
        P = self.period
        if self.run % P:
            return
        cycles = self.run // P
        if cycles >= self.attempt - 2:
            self.snaps.append(self._snapshot())
        if self.armed or cycles < self.attempt:
            return
        try:
            self.armed = self._arm()
        except Exception as exc:  # noqa: BLE001 - a fault here must not stop the reading: reported, fold off
            self._fault(exc)
        if not self.armed:
            self.attempt = cycles + SETTLE * self.backoff
            self.backoff = min(self.backoff * 2, 64)

    def _fault(self, exc: BaseException) -> None:
        """An error in the fold's own checks: counted as an internal error of the source (never
        silent) and no more folding for this input; reading goes on line by line."""
        self.reader._error("repeats", exc)
        self.armed = False
        self.attempt = 2**62

    def _snapshot(self):
        r = self.reader
        tracker = r.current
        if tracker is None:
            # No record has reached a tracker yet (none had an event, a traceback tag or an
            # unexplained error): the reader counts nothing until one does, so a cycle may fold
            # only while everything it keeps stays as it is (no counter may grow: _arm).
            steady = (
                len(r.trackers),
                r.catalog.timeouts,
                tuple(sorted((k, v[0], tuple(v[1]), frozenset(v[2])) for k, v in r.catalog.unread.items())),
                r.orphan_errors.internal_errors,
                r.evicted_sources,
                len(r.budget.lru),
            )
            return None, {"index": 0}, {}, {"reader": steady}
        summary = r.summaries[tracker.source]
        counts, run_counts, steady = tracker.fold_state()
        counts = dict(counts)
        counts["reader_records"] = summary.records
        counts["reader_joined"] = summary.joined
        counts["internal_errors"] = summary.internal_errors
        steady = dict(steady)
        steady["reader"] = (
            id(tracker),
            len(r.trackers),
            frozenset(summary.wrappers_seen),
            summary.first_internal_error is None,
            r.catalog.timeouts,
            # messages whose number cannot be read (Catalog.unread, noted in the verdict): any
            # growth stops the fold, counts included (their first line numbers are kept)
            tuple(sorted((k, v[0], tuple(v[1]), frozenset(v[2])) for k, v in r.catalog.unread.items())),
            r.orphan_errors.internal_errors,
            r.evicted_sources,
            len(r.budget.lru),  # the input's run budget: no run of another sub-source evicted
            tuple((id(t), len(t.runs), t.dropped_runs) for t in r.trackers.values() if t is not tracker),
        )
        return tracker, counts, run_counts, steady

    # -- arming ----------------------------------------------------------------------------
    def _arm(self) -> bool:
        """True when the cycle just read may be folded (step 2 of the module docstring)."""
        P = self.period
        r = self.reader
        env = r.env
        if env.pretty is not None or env.wrap_width is not None or env.markdown:
            return False  # read line by line by the command line (formats.reads_every_line): not folded
        if len(self.snaps) < 3:
            return False
        lines = list(self.history)[-2 * P :]
        if len(lines) < 2 * P or sum(len(t) for _, t, _ in lines[P:]) > CYCLE_CHARS:
            return False
        shapes = [shape(env, t) for _, t, _ in lines]
        if any(s is None for s in shapes):
            return False
        for a, b, la, lb in zip(shapes[:P], shapes[P:], lines[:P], lines[P:]):
            if a.key != b.key or la[2] != lb[2]:
                return False
            # Lines of one shape must give the same events (their masked digits, time stamps
            # and client, differ between the two cycles: nothing recognised may read them).
            if _events_of(env, self._scratch, a.text) != _events_of(env, self._scratch, b.text):
                return False
        if len({r._key(s.record) for s in shapes}) != 1:
            return False  # records of several sub-sources (pods): each has its own tracker
        (t1, c1, r1, s1), (t2, c2, r2, s2), (t3, c3, r3, s3) = self.snaps
        if not (t1 is t2 is t3 and s1 == s2 == s3):
            return False
        d1, d2 = _delta(c1, c2), _delta(c2, c3)
        if d1 != d2 or d1.get("index") not in (0, 1):
            return False
        if t3 is None and (any(d1.values()) or any(r1.values()) or any(r3.values())):
            return False  # nothing to add the growth to: no tracker yet
        opens_runs = d1["index"] == 1
        if opens_runs:
            if not (r1 == r2 == r3) or d1.get("dropped_runs") != 1:
                return False
            run_delta: Dict[str, int] = {}
        else:
            run_delta = _delta(r1, r2)
            if set(r1) != set(r2) or set(r2) != set(r3) or run_delta != _delta(r2, r3):
                return False
        allowed = RUN_FOLDABLE_KINDS if opens_runs else FOLDABLE_KINDS
        for s in shapes[P:]:
            events = _events_of(env, self._scratch, s.text)
            if events is None or any(kind not in allowed for kind, _, _ in events):
                return False
            if s.client is not None:
                if any(kind != "access" for kind, _, _ in events):
                    return False
                at, end = s.client_at, s.client_at + len(s.client)
                for probe in _PROBE_CLIENTS:
                    if _events_of(env, self._scratch, s.text[:at] + probe + s.text[end:]) != events:
                        return False
                    if any(s.client in v for _, _, v in events):
                        return False
        self.delta, self.run_delta, self.opens_runs = d1, run_delta, opens_runs
        self.lines_rx = [re.compile(s.pattern()) for s in shapes[P:]]
        self.cycle_rx: Dict[int, Any] = {}
        self.candidates = [c for _, _, c in lines[P:]]
        self.phase = 0  # the position in the cycle of the next line (the history ends a cycle)
        self.tracker = t3
        return True

    def _cycle_rx(self, phase: int):
        rx = self.cycle_rx.get(phase)
        if rx is None:
            P = self.period
            body = b"".join(self.lines_rx[(phase + k) % P].pattern for k in range(P))
            rx = self.cycle_rx[phase] = re.compile(b"(?:" + body + b"){1,%d}" % CYCLE_RUN)
        return rx

    # -- folding ---------------------------------------------------------------------------
    def take(self, block: bytes, pos: int, end: int, lineno: int) -> Tuple[int, int]:
        """Consume the lines of ``block[pos:end]`` (whole lines) that continue the cycle, the
        first being line ``lineno``: ``(offset after them, how many)``. A scanner calls it
        before reading the line at ``pos`` while :attr:`armed`; when the cycle is broken the
        lines kept for the replay are read (through ``offer``) before it returns."""
        if not self.armed or lineno != self.last_lineno + 1:
            return pos, 0
        if not self.folding:
            self._start()
        P = self.period
        phase = self.phase
        np = pos
        cycle = self._cycle_rx(phase)
        full = CYCLE_RUN * P
        k = 0
        while True:  # whole cycles, CYCLE_RUN at a time (a bounded repeat: bounded memory in re)
            m = cycle.match(block, np, end)
            if m is None:
                break
            got = block.count(b"\n", np, m.end())
            np = m.end()
            k += got
            if got < full:
                break
        ph = (phase + k) % P
        lines_rx = self.lines_rx
        while np < end:  # then line by line: the cycle begun, up to the window's end
            m = lines_rx[ph].match(block, np, end)
            if m is None:
                break
            np = m.end()
            ph = (ph + 1) % P
            k += 1
        if k:
            self._keep(block, pos, np, k, lineno)
            self.phase = ph
            self.last_lineno += k
            self.consumed += k
        if np < end:
            self._end()
        return np, k

    def _start(self) -> None:
        r = self.reader
        r.consume(r.reasm.flush())  # the next line is no continuation: the held record is complete
        self.folding = True
        self.consumed = 0
        self.start_phase = self.phase
        self.kept: Deque[Tuple[int, str, bool]] = deque(maxlen=(REPLAY + 1) * self.period)

    def _keep(self, block: bytes, pos: int, np: int, n: int, lineno: int) -> None:
        """Keep the last lines of ``block[pos:np]`` (``n`` lines from ``lineno``) for the replay."""
        keep = min(n, self.kept.maxlen)
        at = np - 1
        for _ in range(keep):
            at = block.rfind(b"\n", pos, at) if at > pos else -1
        first = at + 1 if at >= pos else pos
        P = self.period
        k = n - keep
        cands = self.candidates
        for raw in block[first : np - 1].split(b"\n"):
            self.kept.append((lineno + k, raw.decode("utf-8", "replace"), cands[(self.phase + k) % P]))
            k += 1

    def close(self) -> None:
        """The input ended: end a fold in progress (its replay is read)."""
        if self.folding:
            self._end()

    def _end(self) -> None:
        """End the fold: account the cycles not kept, read the kept ones in full."""
        P = self.period
        total = self.consumed
        cycles = max(0, total - REPLAY * P) // P
        replay = list(self.kept)[-(total - cycles * P) :] if total - cycles * P else []
        self.folding = self.armed = False
        self.folds += 1
        if cycles:
            self.folded += cycles * P
        if cycles and self.tracker is not None:  # with no tracker yet the cycles changed nothing
            self.tracker.fold_advance(self.delta, self.run_delta, cycles)
            summary = self.reader.summaries[self.tracker.source]
            summary.records += self.delta.get("reader_records", 0) * cycles
            summary.joined += self.delta.get("reader_joined", 0) * cycles
            summary.internal_errors += self.delta.get("internal_errors", 0) * cycles
        scanner = self.scanner
        last = self.last_lineno
        for lineno, text, candidate in replay:
            scanner.want_follow = False  # as the scanner sets it before handing out a line
            self.offer(lineno, text, candidate)
        self._reset()
        self.last_lineno = last


def _delta(a: Dict[str, int], b: Dict[str, int]) -> Dict[str, int]:
    return {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
