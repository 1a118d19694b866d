"""The one path data takes: read -> unwrap -> recognise -> track runs -> diagnose -> verdict.

:func:`diagnose_source` runs one source through the first four steps and returns its
:class:`SourceResult` (its tracker and accounting); :func:`build_verdict` turns the results
of all sources into the :class:`~vllm_doctor.verdict.Verdict` every renderer prints.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Tuple

from . import __version__
from .catalog import Catalog
from .diagnoses import BY_CLASS, diagnose_run
from .envelopes import unwrap
from .reassemble import Reassembler
from .tracker import SourceTracker
from .verdict import SEVERITY_RANK, Finding, RunSummary, SourceSummary, Verdict


@dataclass
class SourceResult:
    tracker: SourceTracker
    summary: SourceSummary
    findings: List[Finding] = field(default_factory=list)


def diagnose_source(name: str, lines: Iterable[Tuple[int, str]]) -> SourceResult:
    """Read one source's numbered lines in one pass and diagnose each of its runs."""
    tracker = SourceTracker(name)
    catalog = Catalog()
    summary = SourceSummary(name=name)
    reasm = Reassembler()
    wrappers = set()

    def consume(records):
        for rec in records:
            summary.records += 1
            summary.joined += rec.continued
            if rec.wrapper:
                wrappers.add(rec.wrapper)
            try:
                tracker.feed(rec, catalog.recognise(rec))
            except Exception:  # noqa: BLE001 - the last guard: one bad record never stops the rest
                summary.malformed += 1

    for lineno, text in lines:
        summary.lines += 1
        if not text.strip():
            summary.blank += 1
        consume(reasm.feed(unwrap(name, lineno, text)))
    consume(reasm.flush())
    tracker.finish()
    summary.recognised = tracker.recognised
    summary.vllm_output = tracker.vllm_seen
    summary.runs = len(tracker.runs) + tracker.dropped_runs
    summary.dropped_runs = tracker.dropped_runs
    summary.wrappers = sorted(wrappers)
    summary.timeouts = catalog.timeouts
    result = SourceResult(tracker, summary)
    for run in tracker.runs:
        result.findings.extend(diagnose_run(run))
    return result


def _run_summary(run, findings: List[Finding]) -> RunSummary:
    facts = dict(run.facts)
    s = run.stats
    if s.count:
        facts.update(stats_lines=s.count, peak_kv_usage_pct=s.peak_kv_usage_pct, max_running=s.max_running,
                     max_waiting=s.max_waiting)
        if s.max_swapped is not None:
            facts["max_swapped"] = s.max_swapped
    if run.preemption.warnings:
        facts["max_preemptions"] = run.preemption.max_cumulative
        facts["preemption_mode"] = "SWAP" if "SWAP" in run.preemption.modes else "RECOMPUTE"
    if run.engine:
        facts["engine"] = run.engine
    if run.access_status:
        facts["http_status"] = dict(sorted(run.access_status.items()))
    return RunSummary(source=run.source, index=run.index, start_line=run.start_line, end_line=run.end_line,
                      phase_reached=run.phase.label, engine=run.engine, config=dict(run.config), facts=facts,
                      classes=[f.class_id for f in findings])


def _primary(findings: List[Finding]) -> Optional[Finding]:
    """Most severe finding of the newest failing run (ties: diagnosis order)."""
    failing = [f for f in findings if SEVERITY_RANK.get(f.severity, 0) >= 2]
    if not failing:
        return None
    newest = max(f.run for f in failing)
    in_run = [f for f in failing if f.run == newest]
    return min(in_run, key=lambda f: (-SEVERITY_RANK[f.severity], findings.index(f)))


def build_verdict(results: List[SourceResult]) -> Verdict:
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
    if primaries:
        best = min(primaries, key=lambda f: (-SEVERITY_RANK[f.severity], primaries.index(f)))
        verdict = Verdict(best.class_id, best.code, best.severity, best.title)
    elif any(s.vllm_output for s in sources):
        h = BY_CLASS["healthy"]
        verdict = Verdict("healthy", h.CODE, "ok", h.SUMMARY)
    else:
        u = BY_CLASS["unknown"]
        verdict = Verdict("unknown", u.CODE, "unknown", "Nothing recognisable as vLLM output in the input")
    verdict.findings = findings
    verdict.runs = runs
    verdict.sources = sources
    verdict.tool_version = __version__
    return verdict
