"""The verdict: plain data that every renderer and the library return.

Shapes (also in ``vllm_doctor/verdict.schema.json``, the published contract):

* :class:`Evidence` - a log line that supports a finding: ``source``, 1-based ``line``,
  ``text`` (the line as printed, wrappers removed), optional ``note``, the log's own ``time``
  (``MM-DD HH:MM:SS`` as vLLM prints it, no year) where the line carries one; ``kind``
  ``log``, or ``metric`` for a Prometheus scrape (``line`` is then the scrape's number,
  ``time`` its ISO time, and ``metric`` names the series, labels and interval);
* :class:`Remedy` - one change, in the tuning order of ``shared/domain.md``: ``order``,
  ``action`` (what to do, one sentence), ``flag`` (the concrete ``vllm serve`` flag with
  the number filled in, when the log gives the number), ``why`` (the arithmetic, naming
  the evidence it used), ``side`` (``server``, ``client`` or ``host``), and for a flag the
  ``setting`` it changes, the ``value`` and the ``direction`` (``lower`` / ``raise`` /
  ``set``) against the value in force;
* :class:`Finding` - one diagnosed problem: ``class_id`` and ``code`` (see ``vllm-doctor
  rules``), ``severity`` (``critical`` the server failed, ``warning`` degraded or requests
  rejected, ``info`` a note), ``confidence`` (``high`` the error line itself says it,
  ``medium`` traceback frames or the phase decide, ``low`` a judgement from stats lines),
  ``phase`` (``startup`` / ``runtime``), ``title``, ``facts``
  (vocabulary of ``shared/corpus/README.md``; memory in GiB), ``evidence``, ``remedies``,
  ``does_not_help``; ``superseded`` (since 1.5) when a newer run of its source serves with a
  setting changed that can fix it (it then never heads the verdict: see
  :mod:`vllm_doctor.superseded`);
* :class:`RunSummary` - one server start in one source, with its ``config`` and ``facts``,
  and ``series``: its stats lines as at most 256 points in line order, each
  ``{line, time, intervals, kv_usage_pct, running, waiting, generation_tps}`` (the maxima
  over the ``intervals`` stats lines it stands for, from ``line`` on; see
  :class:`vllm_doctor.run.SeriesPoint`), for sparklines and charts;
* :class:`SourceSummary` - one source: what was read of it, and ``notes``: one line for each
  thing left unread (files of a scrape directory that are no scrapes, samples ignored,
  lines whose numbers cannot be read), so a partial read never passes for a whole one;
* :class:`Verdict` - the whole answer: ``primary_class`` (the most severe finding of the
  newest failing run, superseded findings aside; ``healthy`` when nothing is wrong, or when
  the newest run serves after a change that superseded the earlier failure; ``unknown`` when nothing is
  recognisable or the root cause is not in the log), ``primary`` (that finding itself, so
  its facts and remedies are the headline's own), ``selected_rules`` (the class ids
  ``--select`` ran, null when all ran) and everything above.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

SCHEMA_VERSION = "1.5"
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1, "ok": 0}


@dataclass
class Evidence:
    source: str
    line: int
    text: str
    note: Optional[str] = None
    time: Optional[str] = None
    kind: str = "log"  # "metric": a Prometheus scrape, not a log line (then `line` is the scrape's number)
    metric: Optional[Dict[str, Any]] = None  # for a metric: series, labels, t0, t1 (ISO 8601), origin


@dataclass
class Remedy:
    order: int
    action: str
    flag: Optional[str] = None
    why: Optional[str] = None
    side: str = "server"
    setting: Optional[str] = None  # the vLLM setting the flag changes (gpu_memory_utilization ...)
    value: Any = None  # the value it sets (a number, or a word such as fp8)
    direction: Optional[str] = None  # lower / raise / set, against the value in force


@dataclass
class Finding:
    class_id: str
    code: str
    severity: str
    phase: str
    title: str
    source: str = ""
    run: int = 0
    confidence: str = "high"
    facts: Dict[str, Any] = field(default_factory=dict)
    evidence: List[Evidence] = field(default_factory=list)
    remedies: List[Remedy] = field(default_factory=list)
    does_not_help: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    #: Since schema 1.5: set when a newer run of the source serves with a setting changed that
    #: can fix this: ``{"run": N, "changes": [{"setting", "was", "now"}]}`` (see
    #: :mod:`vllm_doctor.superseded`); such a finding never heads the verdict. None otherwise.
    superseded: Optional[Dict[str, Any]] = None
    #: (setting, direction, why) the finding rules out, for the run's plan; not in the JSON.
    forbids: List[Tuple[str, str, str]] = field(default_factory=list, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d.pop("forbids")
        return {"class": d.pop("class_id"), **d}


@dataclass
class RunSummary:
    source: str
    index: int
    start_line: int
    end_line: int
    phase_reached: str
    engine: Optional[str]
    config: Dict[str, Any] = field(default_factory=dict)
    facts: Dict[str, Any] = field(default_factory=dict)
    classes: List[str] = field(default_factory=list)
    series: List[Dict[str, Any]] = field(default_factory=list)


@dataclass
class SourceSummary:
    name: str
    input: str = ""  # the file (or <stdin>) this source was read from
    format: str = ""  # detected (or forced) input format
    lines: int = 0  # physical lines of the input (shared by the sub-sources of one input)
    records: int = 0  # records examined (the pre-filter skips most of a busy log)
    recognised: int = 0
    joined: int = 0
    runs: int = 0
    dropped_runs: int = 0
    vllm_output: bool = False
    wrappers: List[str] = field(default_factory=list)
    error: Optional[str] = None
    timeouts: int = 0
    internal_errors: int = 0  # records (or rules) a stage raised on: counted, skipped, reported
    first_internal_error: Optional[str] = None
    truncated: bool = False  # a compressed input ended early
    primary_class: Optional[str] = None
    metrics: Optional[List[str]] = None  # metrics series that filled this log source's stats
    evicted_sources: int = 0  # sub-sources of this input dropped past the cap (least recently active)
    #: what of this input was left unread, one line each: files of a scrape directory that are
    #: not scrapes, samples ignored (duplicates, bad values), lines whose numbers cannot be read
    notes: List[str] = field(default_factory=list)


@dataclass
class Verdict:
    primary_class: str
    primary_code: str
    severity: str
    title: str
    findings: List[Finding] = field(default_factory=list)
    runs: List[RunSummary] = field(default_factory=list)
    sources: List[SourceSummary] = field(default_factory=list)
    tool_version: str = ""
    schema_version: str = SCHEMA_VERSION
    primary_finding: Optional[Finding] = None
    omitted_findings: Dict[str, int] = field(default_factory=dict)  # class -> findings folded away
    #: the class ids of the rules ``--select`` ran (sorted), None when every rule ran: a clean
    #: verdict then means only that these found nothing (the views say "not checked")
    selected_rules: Optional[List[str]] = None

    @property
    def exit_code(self) -> int:
        """0 nothing wrong, 1 a problem diagnosed, 3 nothing recognisable as vLLM output."""
        if self.primary_class == "healthy":
            return 0
        if self.primary_class == "unknown" and not any(s.vllm_output for s in self.sources):
            return 3
        return 1

    @property
    def primary(self) -> Optional[Finding]:
        """The finding the headline is about (None for healthy / nothing recognised)."""
        return self.primary_finding

    @property
    def primary_index(self) -> Optional[int]:
        """Index of :attr:`primary` in ``findings`` (None when there is none)."""
        if self.primary_finding is None:
            return None
        for i, f in enumerate(self.findings):
            if f is self.primary_finding:
                return i
        # A copy made field by field (the renderers' cleaning) keeps equal findings, not the same.
        for i, f in enumerate(self.findings):
            if f == self.primary_finding:
                return i
        return None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "tool": {"name": "vllm-doctor", "version": self.tool_version},
            "primary_class": self.primary_class,
            "primary_code": self.primary_code,
            "severity": self.severity,
            "title": self.title,
            "exit_code": self.exit_code,
            "primary_finding": self.primary_index,
            "primary_source": self.primary_finding.source if self.primary_finding else None,
            "findings": [f.to_dict() for f in self.findings],
            "omitted_findings": dict(self.omitted_findings),
            "runs": [asdict(r) for r in self.runs],
            "sources": [asdict(s) for s in self.sources],
            "selected_rules": None if self.selected_rules is None else list(self.selected_rules),
        }
