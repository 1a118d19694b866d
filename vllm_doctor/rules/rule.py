"""What every rule is, and the pieces rules build findings from.

A rule (the way ruff keeps one rule per file) is a module holding its documentation as the
module docstring (What it means / Why it happens / Remedies, in order / What does not help /
Sources: ``vllm-doctor explain CODE`` prints it) and one :class:`Rule`: its code, class id,
severity, one-line summary and ``check(run, failures, phase) -> findings``. ``failures`` are
the run's failures the decision tree (:mod:`vllm_doctor.rules.tree`) routed to the rule, in
``phase`` (``startup`` / ``runtime``); empty for rules that judge the whole run. The tree's
confidence becomes the finding's, for findings made from routed failures. A rule may also name a stats ``observer`` factory: the
tracker then feeds it every stats sample of each run (see :mod:`vllm_doctor.run`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..limits import MAX_EVIDENCE_CHARS
from ..run import Failure, Line, Run
from ..verdict import Evidence, Finding, Remedy

#: Evidence lines one finding quotes at most.
MAX_FINDING_EVIDENCE = 10
#: Of those, characters kept around a message that sits past the head of a longer line (a
#: controller's JSON body quoting vLLM's error), before and after where it starts.
MESSAGE_WINDOW = (120, 280)
#: Catalog anchors shorter than this are too common to say where the message is ("Error:").
MIN_MESSAGE_ANCHOR = 8


def evidence_text(text: str) -> str:
    """``text`` (stripped) in at most :data:`MAX_EVIDENCE_CHARS` characters: whole when it
    fits, else its head; when the head holds no message the catalog recognises and a later
    part does (a catalog anchor of :data:`MIN_MESSAGE_ANCHOR` characters or more, the first
    one past the head), the head is shortened and a :data:`MESSAGE_WINDOW` around that
    message follows it. Each cut is marked ``...``."""
    text = text.strip()
    if len(text) <= MAX_EVIDENCE_CHARS:
        return text
    from ..catalog import ANCHORS

    head = MAX_EVIDENCE_CHARS - 3
    found = [text.find(a) for a in ANCHORS if len(a) >= MIN_MESSAGE_ANCHOR and a in text]
    if not found or min(found) < head - MESSAGE_WINDOW[1]:
        return text[:head] + "..."
    at = min(p for p in found)
    before, after = MESSAGE_WINDOW
    start, end = max(at - before, 0), min(at + after, len(text))
    # Cuts fall between words: a token cut in two would escape the redaction of its pattern
    # (an hf_ token's tail without its prefix).
    space = text.find(" ", start, at)
    start = space + 1 if space >= 0 else at
    space = text.rfind(" ", at, end)
    end = space if end < len(text) and space > at else end
    window = text[start:end] + ("..." if end < len(text) else "")
    keep = MAX_EVIDENCE_CHARS - len(window) - 5
    space = text.rfind(" ", 0, keep)
    return text[: space if space > 0 else keep] + " ... " + window


CONFIDENCE = ("high", "medium", "low")


@dataclass(frozen=True)
class Rule:
    """One diagnosis: ``code`` (``VD101``), ``name`` (the class id, ``kv_cache_capacity``),
    ``severity`` (``critical`` the server failed, ``warning`` degraded or requests rejected,
    ``info`` a note, ``ok``), ``summary`` (one line for ``rules``), ``doc`` (the module
    docstring), ``check``; ``observer`` builds a stats observer for each run, or None."""

    code: str
    name: str
    severity: str
    summary: str
    doc: str
    check: Callable[[Run, Sequence[Failure], str], List[Finding]]
    observer: Optional[Callable[[], Any]] = None

    @property
    def explanation(self) -> str:
        """The documentation page ``explain`` prints."""
        return inspect.cleandoc(self.doc or "").replace("``", "`")


def read_from(run: Run) -> str:
    """Where ``run`` was read, as wordings name it: ``"the metrics"`` for a run that stands for
    a metrics series alone (:func:`vllm_doctor.metrics.view.run_of`: its ``metrics`` marker is
    on the run's own source), else ``"the log"`` (a log, with or without metrics beside it:
    the log gives its config and phase)."""
    m = run.markers.get("metrics")
    return "the metrics" if m is not None and m.source == run.source else "the log"


def stats_from(run: Run) -> str:
    """Where ``run``'s stats samples came from, as wordings name it: ``"the metrics"`` when a
    metrics series filled them (alone, or beside a log that printed none:
    :func:`vllm_doctor.metrics.view.fill`), else ``"the stats lines"``."""
    return "the metrics" if "metrics" in run.markers else "the stats lines"


def not_printed(run: Run) -> str:
    """``"not printed in the log"``, or ``"not in the metrics"`` for a run read from metrics
    alone (see :func:`read_from`)."""
    where = read_from(run)
    return "not printed in the log" if where == "the log" else f"not in {where}"


def ev(line: Optional[Line], note: Optional[str] = None) -> Optional[Evidence]:
    """Evidence from a kept :class:`~vllm_doctor.run.Line` (None passes through)."""
    if line is None:
        return None
    text = evidence_text(line.text)
    kind = "metric" if line.metric is not None else "log"
    return Evidence(
        source=line.source, line=line.lineno, text=text, note=note, time=line.time, kind=kind, metric=line.metric
    )


def evidence_list(items: Iterable[Optional[Evidence]]) -> List[Evidence]:
    """Drop Nones and repeats (same line and text), keep order, at most MAX_FINDING_EVIDENCE."""
    out: List[Evidence] = []
    seen = set()
    for item in items:
        if item is None:
            continue
        key = (item.source, item.line, item.text)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) >= MAX_FINDING_EVIDENCE:
            break
    return out


def failure_evidence(failures: Sequence[Failure], note: Optional[str] = None) -> List[Optional[Evidence]]:
    """The first lines of each failure; ``note`` on the first line of each."""
    out: List[Optional[Evidence]] = []
    for f in failures:
        for i, line in enumerate(f.lines[:4]):
            out.append(ev(line, note if i == 0 else None))
    return out


def config_evidence(run: Run, keys: Iterable[str]) -> List[Optional[Evidence]]:
    """The lines that printed each configuration value or fact, noted ``key = value``."""
    return [ev(run.line_for(k), f"{k} = {run.value(k)}") for k in keys if run.line_for(k) is not None]


def consequence_evidence(run: Run, limit: int = 2) -> List[Optional[Evidence]]:
    return [ev(c.line, "consequence, not the cause") for c in run.consequences[:limit]]


def merged_data(failures: Sequence[Failure]) -> Dict[str, Any]:
    """The failures' data merged, first value of each key wins."""
    data: Dict[str, Any] = {}
    for f in failures:
        for k, v in f.data.items():
            data.setdefault(k, v)
    return data


def finding(
    rule: Rule,
    run: Run,
    phase: str,
    title: str,
    facts: Dict[str, Any],
    evidence: Iterable[Optional[Evidence]],
    remedies: Sequence[Optional[Remedy]] = (),
    does_not_help: Sequence[str] = (),
    notes: Sequence[str] = (),
    confidence: str = "high",
    severity: Optional[str] = None,
    forbids: Sequence[Tuple[str, str, str]] = (),
) -> Finding:
    """Assemble a :class:`~vllm_doctor.verdict.Finding` of ``rule`` for ``run``: facts without
    None values, evidence de-duplicated, remedies numbered in the order given (None skipped).
    ``forbids`` lists ``(setting, direction, why)`` the finding rules out for the whole run
    (what its "does not help" says), so the run's plan keeps other findings from advising it."""
    assert confidence in CONFIDENCE, confidence
    kept = [r for r in remedies if r is not None]
    for i, r in enumerate(kept, 1):
        r.order = i
    notes = list(notes) + _oom_caveats(facts)
    return Finding(
        class_id=rule.name,
        code=rule.code,
        severity=severity or rule.severity,
        confidence=confidence,
        phase=phase,
        title=title,
        source=run.source,
        run=run.index,
        facts={k: v for k, v in facts.items() if v is not None},
        evidence=evidence_list(evidence),
        remedies=kept,
        does_not_help=list(does_not_help),
        notes=notes,
        forbids=list(forbids),
    )


def _oom_caveats(facts: Dict[str, Any]) -> List[str]:
    """Notes for OOM figures the facts leave out on purpose (:func:`vllm_doctor.rules.oom.oom_facts`):
    a free figure above the total, a "this process has 0 bytes" NVML did not see, a process
    list cut before its end."""
    out = []
    if facts.get("inconsistent_numbers"):
        out.append(f"The OOM message's numbers contradict each other ({facts['inconsistent_numbers']}).")
    if facts.get("process_memory_unseen"):
        alloc = facts.get("pytorch_allocated_gib")
        out.append(
            "The OOM message's 'this process has ... memory in use' is below what PyTorch allocated"
            + (f" ({alloc:.2f} GiB)" if isinstance(alloc, (int, float)) else "")
            + ": NVML did not see this process's memory (a PID namespace, or memory mapped outside PyTorch's view "
            "such as vLLM's sleep-mode CuMemAllocator), so it is not shown as what the process held."
        )
    if facts.get("processes_cut"):
        out.append(
            "The OOM message is cut inside its list of processes: which process is vLLM's own, and what the others "
            "hold, is not in the log."
        )
    return out


def remedy(action: str, flag: Optional[str] = None, why: Optional[str] = None, side: str = "server") -> Remedy:
    """One remedy: ``action`` (one sentence), the concrete ``flag`` with its value where the log
    gives the number, ``why`` (the arithmetic, naming the evidence), ``side`` (server, client,
    host). Numbered later, in the order the rule lists them."""
    return Remedy(order=0, action=action, flag=flag, why=why, side=side)
