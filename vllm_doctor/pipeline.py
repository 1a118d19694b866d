"""The one path data takes: read -> unwrap -> recognise -> track runs -> diagnose -> verdict.

:func:`diagnose_input` reads an opened input (through the block pre-filter of
:mod:`vllm_doctor.prefilter` when it can), :func:`diagnose_source` reads numbered lines one
by one; both run them through unwrapping, reassembly, the catalog and the trackers, and
return one :class:`SourceResult` per source (an input may hold several: pods, journald
processes). :func:`build_verdict` turns the results into the
:class:`~vllm_doctor.verdict.Verdict` every renderer prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, List, Optional, Tuple

from ._version import __version__
from .catalog import Catalog
from .envelopes import unwrap
from .frames import code_tags
from .reassemble import Reassembler
from .rules import BY_NAME, diagnose_run, new_observers
from .sources import ARCHIVE_ERRORS
from .tracker import SourceTracker, unexplained_error
from .verdict import SEVERITY_RANK, Finding, RunSummary, SourceSummary, Verdict

if TYPE_CHECKING:
    from .sources import Source


@dataclass
class SourceResult:
    """One source's tracker (its runs), its summary for the verdict, and its findings."""

    tracker: SourceTracker
    summary: SourceSummary
    findings: List[Finding] = field(default_factory=list)


#: Characters of an internal error's text kept in the verdict.
MAX_ERROR_CHARS = 200


def note_internal_error(summary: SourceSummary, where: str, exc: BaseException) -> None:
    """Count an exception a stage raised on one record (or a rule on one run) and keep the
    first one's text: reported in the verdict (``sources[].internal_errors``), never silent."""
    summary.internal_errors += 1
    if summary.first_internal_error is None:
        summary.first_internal_error = f"{where}: {type(exc).__name__}: {str(exc)[:MAX_ERROR_CHARS]}"


SNIFF_LINES = 200
MAX_SUBSOURCES = 256


class _SourceReader:
    """Feeds one input's lines through unwrap -> reassemble -> recognise -> track.

    Lines from different pods (``kubectl logs --prefix``) or journald hosts/processes are
    kept apart: each gets a tracker of its own (a sub-source named ``INPUT [key]``), so runs
    and findings never mix. Lines without such a key stay with the last sub-source seen.
    """

    def __init__(self, name: str, input_format: str = "auto", select: Optional[frozenset] = None) -> None:
        from .formats import allowed

        self.name = name
        self.select = select
        self.orphan_errors = SourceSummary(name=name)  # errors before any sub-source exists
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
            tracker = self.trackers[key] = SourceTracker(
                f"{self.name} [{key}]" if key else self.name, observers=new_observers
            )
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
                if not events and not tags and not unexplained_error(rec):
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
            except Exception as exc:  # noqa: BLE001 - one bad record never stops the rest; counted, reported
                self._error(f"line {rec.lineno}", exc)

    def _error(self, where: str, exc: BaseException) -> None:
        summary = self.summaries[self.current.source] if self.current is not None else self.orphan_errors
        note_internal_error(summary, where, exc)

    def line(self, lineno: int, text: str) -> None:
        try:
            records = unwrap(self.name, lineno, text, allowed=self.allowed)
        except Exception as exc:  # noqa: BLE001 - one bad line never stops the rest; counted, reported
            self._error(f"line {lineno}", exc)
            return
        self.consume(self.reasm.feed(records))

    def finish(self, lines: int) -> List[SourceResult]:
        from .formats import detect

        self.consume(self.reasm.flush())
        if not self.trackers:
            self._tracker(unwrap(self.name, 0, "")[0])
        first = self.summaries[next(iter(self.trackers.values())).source]
        first.internal_errors += self.orphan_errors.internal_errors
        first.first_internal_error = first.first_internal_error or self.orphan_errors.first_internal_error
        fmt = self.forced or detect(self.sniffed)
        results = []
        for tracker in self.trackers.values():
            summary = self.summaries[tracker.source]
            tracker.finish(lines if len(self.trackers) == 1 else None)
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
                result.findings.extend(self.judge(run, summary))
            results.append(result)
        return results

    def judge(self, run, summary: SourceSummary) -> List[Finding]:
        """The run's findings; a rule that raises is reported as an internal error."""
        errors: List[Tuple[str, BaseException]] = []
        findings = diagnose_run(run, self.select, errors)
        for code, exc in errors:
            note_internal_error(summary, f"rule {code} on run {run.index}", exc)
        return findings


def diagnose_source(
    name: str, lines: Iterable[Tuple[int, str]], input_format: str = "auto", select: Optional[frozenset] = None
) -> List[SourceResult]:
    """Read every line of one input in one pass and diagnose each of its runs.

    ``lines`` yields ``(line number, text)``. This is the plain path: every line is
    unwrapped and offered to the catalog. :func:`diagnose_input` gives the same verdict
    faster on large inputs. Returns one result per sub-source (see :class:`_SourceReader`)."""
    reader = _SourceReader(name, input_format, select)
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
    src: "Source",
    prefilter: bool = True,
    on_block=None,
    input_format: str = "auto",
    select: Optional[frozenset] = None,
) -> List[SourceResult]:
    """Diagnose one opened input; with ``prefilter`` (and ``ahocorasick_rs`` installed)
    only lines holding a catalog literal are read (:mod:`vllm_doctor.prefilter`). A
    compressed input that ends early sets ``src.truncated``; what was read is diagnosed.
    ``journalctl -o json`` input is read line by line (its messages are JSON-escaped)."""
    from .formats import looks_like_journald_json
    from .prefilter import scanner_for
    from .sources import read_lines

    name = src.name
    if prefilter and input_format in ("auto", "journald-json"):
        head = _peek(src.stream)
        if input_format == "journald-json" or looks_like_journald_json(head):
            prefilter = False
    scanner = scanner_for(src, on_block) if prefilter else None
    if scanner is None:
        return diagnose_source(name, read_lines(src), input_format, select)
    reader = _SourceReader(name, input_format, select)
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
    if run.http.by_bucket:
        facts["http_status"] = dict(sorted(run.http.by_bucket.items()))
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
        series=[
            {
                "line": p.first_lineno,
                "time": p.time,
                "intervals": p.intervals,
                "kv_usage_pct": p.kv_usage_pct,
                "running": p.running,
                "waiting": p.waiting,
                "generation_tps": p.generation_tps,
            }
            for p in s.series
        ],
    )


def _primary(findings: List[Finding]) -> Optional[Finding]:
    """Most severe finding of the newest failing run of one source (ties: diagnosis order)."""
    failing = [f for f in findings if SEVERITY_RANK.get(f.severity, 0) >= 2]
    if not failing:
        return None
    newest = max(f.run for f in failing)
    in_run = [f for f in failing if f.run == newest]
    return min(in_run, key=lambda f: (-SEVERITY_RANK[f.severity], findings.index(f)))


def _headline(results: List[SourceResult], primaries: List[Finding]) -> Finding:
    """The finding of all sources the verdict is about: most severe first; among sub-sources
    of one input (journald restarts get a new PID, so a new source) the newest failure wins;
    between inputs, the order given."""
    inputs = list(dict.fromkeys(r.summary.input for r in results))
    input_index = {r.summary.name: inputs.index(r.summary.input) for r in results}

    def rank(f: Finding):
        last = max((e.line for e in f.evidence), default=0)
        return -SEVERITY_RANK[f.severity], input_index.get(f.source, 0), -last

    return min(primaries, key=rank)


def _healthy_title(summary: str, notes: List[Finding], select: Optional[frozenset]) -> str:
    """A clean verdict's headline: what the notes under it say, so "healthy" never hides a
    slowdown the rules did see, nor claims more than the selected rules looked at."""
    slow = next((f for f in notes if f.class_id == "slow_not_memory"), None)
    if slow is not None:
        return f"No memory failure, but slow for another reason: {slow.title} ({slow.code})"
    if select is not None:
        return f"No problem found by the selected rules ({', '.join(sorted(select))})."
    if notes:
        return f"No memory or slowdown failure; {len(notes)} note{'s' if len(notes) > 1 else ''} worth a look below."
    return summary


def build_verdict(
    results: List[SourceResult], unreadable: Iterable[Tuple[str, str]] = (), select: Optional[frozenset] = None
) -> Verdict:
    """The verdict over all sources; ``unreadable`` lists ``(input, one-line error)`` for
    inputs that could not be read, so they are accounted for in ``sources`` too; ``select``
    (the rules that ran, None for all) words a clean verdict so it does not claim more than
    the selected rules looked at.

    Findings are listed primary first, then the rest of its source's findings, then the
    other sources' in the order given; ``Verdict.primary`` is the headline's own finding."""
    runs: List[RunSummary] = []
    primaries: List[Finding] = []
    for res in results:
        for run in reversed(res.tracker.runs):  # newest first
            runs.append(_run_summary(run, [f for f in res.findings if f.run == run.index]))
        p = _primary(res.findings)
        res.summary.primary_class = p.class_id if p else ("healthy" if res.summary.vllm_output else "unknown")
        if p:
            primaries.append(p)
    sources = [r.summary for r in results]
    sources += [
        SourceSummary(name=name, input=name, error=error, primary_class="unknown") for name, error in unreadable
    ]
    best = _headline(results, primaries) if primaries else None
    if best is not None:
        verdict = Verdict(best.class_id, best.code, best.severity, best.title, primary_finding=best)
    elif any(s.vllm_output for s in sources):
        h = BY_NAME["healthy"]
        notes = [f for r in results for f in r.findings]
        verdict = Verdict("healthy", h.code, "ok", _healthy_title(h.summary, notes, select))
    else:
        from .formats import TRIED

        u = BY_NAME["unknown"]
        verdict = Verdict(
            "unknown", u.code, "unknown", f"Nothing recognisable as vLLM output in the input (formats tried: {TRIED})"
        )
    ordered = sorted(results, key=lambda r: best is None or r.summary.name != best.source)
    findings = [f for r in ordered for f in r.findings]
    if best is not None:
        findings.remove(best)
        findings.insert(0, best)
    verdict.findings = findings
    verdict.runs = runs
    verdict.sources = sources
    verdict.tool_version = __version__
    return verdict
