"""The one path data takes: read -> unwrap -> recognise -> track runs -> diagnose -> verdict.

:func:`diagnose_input` reads an opened input (through the block pre-filter of
:mod:`vllm_doctor.prefilter` when it can), :func:`diagnose_source` reads numbered lines one
by one; both run them through unwrapping, reassembly, the catalog and the trackers, and
return one :class:`SourceResult` per source (an input may hold several: pods, journald
processes). :func:`build_verdict` turns the results into the
:class:`~vllm_doctor.verdict.Verdict` every renderer prints.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, List, Optional, Tuple

from . import __version__
from .catalog import Catalog
from .diagnoses import BY_CLASS, diagnose_run
from .envelopes import _PROC, MAX_RECORD_CHARS, unwrap
from .frames import code_tags
from .reassemble import MAX_JOINED, WRAP_MIN_WIDTH, Reassembler, _open_oom
from .sources import ARCHIVE_ERRORS
from .tracker import SourceTracker
from .verdict import SEVERITY_RANK, Finding, RunSummary, SourceSummary, Verdict

if TYPE_CHECKING:
    from .sources import Source


@dataclass
class SourceResult:
    tracker: SourceTracker
    summary: SourceSummary
    findings: List[Finding] = field(default_factory=list)


SNIFF_LINES = 200
MAX_SUBSOURCES = 256


class _SourceReader:
    """Feeds one input's lines through unwrap -> reassemble -> recognise -> track.

    Lines from different pods (``kubectl logs --prefix``) or journald hosts/processes are
    kept apart: each gets a tracker of its own (a sub-source named ``INPUT [key]``), so runs
    and findings never mix. Lines without such a key stay with the last sub-source seen.
    """

    def __init__(self, name: str, input_format: str = "auto") -> None:
        from .formats import allowed

        self.name = name
        self.allowed = allowed(input_format)
        self.forced = input_format if input_format != "auto" else None
        self.catalog = Catalog()
        self.reasm = Reassembler()
        self.trackers = {}
        self.summaries = {}
        self.current = None
        self.sniffed = []

    def sniff(self, text: str) -> None:
        """Note the wrapper of one of the input's first lines (format detection)."""
        if len(self.sniffed) < SNIFF_LINES and text.strip():
            recs = unwrap(self.name, 0, text, allowed=self.allowed)
            self.sniffed.append(recs[0].wrapper if recs else None)

    def _key(self, rec) -> str:
        if rec.wrapper == "kubectl-prefix":
            return f"pod/{rec.host}/{rec.unit}"
        if rec.wrapper in ("journald", "journald-iso", "journald-json") and (rec.host or rec.pids):
            pid = f"[{rec.pids[0]}]" if rec.pids else ""
            return f"{rec.unit or ''}{pid}@{rec.host or '?'}"
        return ""

    def _tracker(self, rec):
        key = self._key(rec)
        if not key and self.current is not None:
            return self.current
        if key not in self.trackers and len(self.trackers) >= MAX_SUBSOURCES:
            key = "(more)"
        tracker = self.trackers.get(key)
        if tracker is None:
            tracker = self.trackers[key] = SourceTracker(f"{self.name} [{key}]" if key else self.name)
            summary = self.summaries[tracker.source] = SourceSummary(name=tracker.source, input=self.name)
            summary.wrappers_seen = set()
        self.current = tracker
        return tracker

    def consume(self, records) -> None:
        for rec in records:
            try:
                events = self.catalog.recognise(rec)
                # Only records that can change a tracker choose (or open) a sub-source, so the
                # pre-filtered path opens the same sub-sources as the plain one.
                tags = code_tags(rec.text) if not events and rec.text[:1].isspace() else None
                if not events and not tags:
                    if self.current is not None:
                        summary = self.summaries[self.current.source]
                        summary.records += 1
                        summary.joined += rec.continued
                    continue
                tracker = self._tracker(rec)
                rec.source = tracker.source
                summary = self.summaries[tracker.source]
                summary.records += 1
                summary.joined += rec.continued
                if events and rec.wrapper:  # wrappers of recognised records only: path-independent
                    summary.wrappers_seen.add(rec.wrapper)
                tracker.feed(rec, events, tags)
            except Exception:  # noqa: BLE001 - the last guard: one bad record never stops the rest
                if self.current is not None:
                    self.summaries[self.current.source].malformed += 1

    def line(self, lineno: int, text: str) -> None:
        try:
            records = unwrap(self.name, lineno, text, allowed=self.allowed)
        except Exception:  # noqa: BLE001 - the last guard: one bad line never stops the rest
            if self.current is not None:
                self.summaries[self.current.source].malformed += 1
            return
        self.consume(self.reasm.feed(records))

    def finish(self, lines: int) -> List[SourceResult]:
        from .formats import detect

        self.consume(self.reasm.flush())
        if not self.trackers:
            self._tracker(unwrap(self.name, 0, "")[0])
        fmt = self.forced or detect(self.sniffed)
        results = []
        for tracker in self.trackers.values():
            summary = self.summaries[tracker.source]
            tracker.finish()
            summary.lines = lines  # physical lines of the whole input (shared by its sub-sources)
            summary.format = fmt
            summary.recognised = tracker.recognised
            summary.vllm_output = tracker.vllm_seen
            summary.runs = len(tracker.runs) + tracker.dropped_runs
            summary.dropped_runs = tracker.dropped_runs
            summary.wrappers = sorted(summary.wrappers_seen)
            del summary.wrappers_seen
            summary.timeouts = self.catalog.timeouts
            result = SourceResult(tracker, summary)
            for run in tracker.runs:
                result.findings.extend(diagnose_run(run))
            results.append(result)
        return results


def diagnose_source(name: str, lines: Iterable[Tuple[int, str]], input_format: str = "auto") -> List[SourceResult]:
    """Read every line of one input in one pass and diagnose each of its runs.

    ``lines`` yields ``(line number, text)``. This is the plain path: every line is
    unwrapped and offered to the catalog. :func:`diagnose_input` gives the same verdict
    faster on large inputs. Returns one result per sub-source (see :class:`_SourceReader`)."""
    reader = _SourceReader(name, input_format)
    n = 0
    for n, text in lines:
        if n <= SNIFF_LINES:
            reader.sniff(text)
        reader.line(n, text)
    return reader.finish(n)


def _peek(stream, size: int = 65536) -> bytes:
    """The first bytes of a stream without consuming them (b"" when that is not possible)."""
    try:
        if hasattr(stream, "peek"):
            return stream.peek(size)[:size]
        if stream.seekable():
            pos = stream.tell()
            head = stream.read(size)
            stream.seek(pos)
            return head
    except ARCHIVE_ERRORS:  # a damaged archive: the reader reports it
        pass
    except AttributeError:
        pass
    return b""


def diagnose_input(
    src: "Source", prefilter: bool = True, on_block=None, input_format: str = "auto", chunks: bool = False
) -> List[SourceResult]:
    """Diagnose one opened input; with ``prefilter`` (and ``ahocorasick_rs`` installed)
    only lines holding a catalog literal are read (:mod:`vllm_doctor.prefilter`). A
    compressed input that ends early sets ``src.truncated``; what was read is diagnosed.
    ``journalctl -o json`` input is read line by line (its messages are JSON-escaped).
    With ``chunks`` a large plain file is scanned by worker processes, chunk by chunk
    (:mod:`vllm_doctor.chunks`), for the same verdict (the command line asks for it; a
    library caller gets no processes it did not ask for)."""
    from .formats import looks_like_journald_json
    from .prefilter import available, scanner_for
    from .sources import read_lines

    name = src.name
    if prefilter and input_format in ("auto", "journald-json"):
        head = _peek(src.stream)
        if input_format == "journald-json" or looks_like_journald_json(head):
            prefilter = False
    pooled = None
    if prefilter and chunks and available():
        from . import chunks as _chunks

        size = _chunks.chunkable(src)
        if size is not None:
            pooled = _chunks.PooledScan(src.name, size, on_block)
        elif src.compression is not None and (src.size() or 0) >= _chunks.COMPRESSED_MIN and (os.cpu_count() or 1) > 1:
            pooled = _chunks.PooledBlocks(src, on_block)
    try:
        scanner = pooled.scanner if pooled is not None else scanner_for(src, on_block) if prefilter else None
        if scanner is None:
            return diagnose_source(name, read_lines(src, on_read=on_block), input_format)
        return _read_candidates(name, input_format, scanner)
    finally:
        if pooled is not None:
            pooled.close()


def _cannot_continue(reasm: Reassembler, line: str) -> bool:
    """True when ``line`` (offered after a candidate) surely is no continuation of the
    record the reassembler holds, decided without unwrapping it: the held record takes
    none (short and no open OOM message, or full), or the line starts with a vLLM process
    prefix (``(APIServer pid=1) ``: :func:`~vllm_doctor.envelopes.unwrap` finds no outer
    wrapper before a ``(`` and then the prefix, and a record with a process is never a
    continuation, :mod:`vllm_doctor.reassemble`). ``tests/test_prefilter.py`` checks it
    against :meth:`Reassembler.would_join` on every line of the corpus. False: unwrap it."""
    held = reasm._held
    if held is None or held.continued >= MAX_JOINED or len(held.text) >= MAX_RECORD_CHARS:
        return True
    if held.line_len < WRAP_MIN_WIDTH and not _open_oom(held.text):
        return True
    return line[:1] == "(" and "\x1b" not in line and "\r" not in line and _PROC.match(line) is not None


def _read_candidates(name: str, input_format: str, scanner) -> List[SourceResult]:
    """The pre-filtered path: candidate lines (and the continuations the reassembler takes)
    from a :class:`~vllm_doctor.prefilter.BlockScanner` or a chunk scanner."""
    reader = _SourceReader(name, input_format)
    scanner.on_head = reader.sniff
    reasm = reader.reasm
    allowed = reader.allowed
    for lineno, text, candidate in scanner:
        if scanner.skipped:
            scanner.skipped = 0
            reader.consume(reasm.flush())  # a skipped line ends whatever record was held
        if candidate:
            reader.line(lineno, text)
            scanner.want_follow = True
            continue
        if _cannot_continue(reasm, text):
            reader.consume(reasm.flush())
            continue
        recs = unwrap(name, lineno, text, allowed=allowed)
        if reasm.would_join(recs):
            reader.consume(reasm.feed(recs))
            scanner.want_follow = True
        else:
            reader.consume(reasm.flush())
    return reader.finish(scanner.lines)


def _run_summary(run, findings: List[Finding]) -> RunSummary:
    facts = dict(run.facts)
    s = run.stats
    if s.count:
        facts.update(
            stats_lines=s.count,
            peak_kv_usage_pct=s.peak_kv_usage_pct,
            max_running=s.max_running,
            max_waiting=s.max_waiting,
        )
        if s.max_swapped is not None:
            facts["max_swapped"] = s.max_swapped
    if run.preemption.warnings:
        facts["max_preemptions"] = run.preemption.max_cumulative
        facts["preemption_mode"] = "SWAP" if "SWAP" in run.preemption.modes else "RECOMPUTE"
    if run.engine:
        facts["engine"] = run.engine
    if run.access_status:
        facts["http_status"] = dict(sorted(run.access_status.items()))
    return RunSummary(
        source=run.source,
        index=run.index,
        start_line=run.start_line,
        end_line=run.end_line,
        phase_reached=run.phase.label,
        engine=run.engine,
        config=dict(run.config),
        facts=facts,
        classes=[f.class_id for f in findings],
    )


def _primary(findings: List[Finding]) -> Optional[Finding]:
    """Most severe finding of the newest failing run (ties: diagnosis order)."""
    failing = [f for f in findings if SEVERITY_RANK.get(f.severity, 0) >= 2]
    if not failing:
        return None
    newest = max(f.run for f in failing)
    in_run = [f for f in failing if f.run == newest]
    return min(in_run, key=lambda f: (-SEVERITY_RANK[f.severity], findings.index(f)))


def build_verdict(results: List[SourceResult], unreadable: Iterable[Tuple[str, str]] = ()) -> Verdict:
    """The verdict over all sources; ``unreadable`` lists ``(input, one-line error)`` for
    inputs that could not be read, so they are accounted for in ``sources`` too."""
    findings: List[Finding] = []
    runs: List[RunSummary] = []
    primaries: List[Finding] = []
    for res in results:
        src_findings = res.findings
        findings.extend(src_findings)
        for run in reversed(res.tracker.runs):  # newest first
            runs.append(_run_summary(run, [f for f in src_findings if f.run == run.index]))
        p = _primary(src_findings)
        res.summary.primary_class = p.class_id if p else ("healthy" if res.summary.vllm_output else "unknown")
        if p:
            primaries.append(p)
    sources = [r.summary for r in results]
    sources += [
        SourceSummary(name=name, input=name, error=error, primary_class="unknown") for name, error in unreadable
    ]
    if primaries:
        # Most severe first; among sub-sources of one input (journald restarts get a new PID,
        # so a new source) the newest failure wins; between inputs, the order given.
        inputs = list(dict.fromkeys(r.summary.input for r in results))
        input_index = {r.summary.name: inputs.index(r.summary.input) for r in results}

        def rank(f: Finding):
            last = max((e.line for e in f.evidence), default=0)
            return -SEVERITY_RANK[f.severity], input_index.get(f.source, 0), -last

        best = min(primaries, key=rank)
        verdict = Verdict(best.class_id, best.code, best.severity, best.title)
    elif any(s.vllm_output for s in sources):
        h = BY_CLASS["healthy"]
        verdict = Verdict("healthy", h.CODE, "ok", h.SUMMARY)
    else:
        from .formats import TRIED

        u = BY_CLASS["unknown"]
        verdict = Verdict(
            "unknown", u.CODE, "unknown", f"Nothing recognisable as vLLM output in the input (formats tried: {TRIED})"
        )
    verdict.findings = findings
    verdict.runs = runs
    verdict.sources = sources
    verdict.tool_version = __version__
    return verdict
