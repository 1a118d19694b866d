"""Evidence as shown: in line order, one row per line, clipped to the clauses that matter.

A long log line (a torch OOM message runs to 600 characters) is cut at clause boundaries to
its opening clause, the clauses holding the numbers the finding reads (the failed allocation,
free and total memory, ``max_model_len``, KV sizes) and the co-tenant processes, then as
much of the rest as fits; :data:`~.names.CLIP` marks each gap. The full line stays in JSON
and in the ticket's collapsed block. The lines of the incident itself (not the settings it
quotes) give its first and last time in the log's own clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import regex

from .facts import size
from .names import CLIP

# Where a clause ends: after . ; , : followed by a space, or before an opening parenthesis.
_CLAUSE_END = regex.compile(r"(?<=[.;,:!?])\s+|\s+(?=\()")
# A piece of a word too long to keep whole: up to and including its next delimiter.
_PIECE = regex.compile(r"[^,;{}\[\]]+[,;{}\[\]]*|[,;{}\[\]]+")
# A note that names a configuration value or fact ("max_model_len = 29000", "weights_gib"):
# context for the incident, not the incident itself.
_CONTEXT_NOTE = regex.compile(r"^(?:[a-z][a-z0-9_]*(?: = .*)?|phase: .*)$")


def is_context(note: Optional[str]) -> bool:
    """True for evidence that shows a setting or a startup fact (its note names the key),
    False for the lines of the incident itself (the error, a consequence, a stats line)."""
    return bool(note) and bool(_CONTEXT_NOTE.match(note))


#: The facts whose numbers mark the clauses of an incident's line worth keeping, most
#: important first (the failed allocation and what was free before the totals).
ANCHOR_FACTS = (
    "tried_to_allocate_gib",
    "gpu_free_gib",
    "gpu_total_gib",
    "max_model_len",
    "kv_available_gib",
    "kv_needed_gib",
    "estimated_max_model_len",
    "kv_tokens",
    "requested_gib",
    "initial_free_gib",
    "current_free_gib",
    "dummy_requests",
    "requested_tokens",
    "prompt_tokens",
    "max_tokens",
    "derived_max_model_len",
    "max_preemptions",
)


#: At most this many of the catalog's message anchors are kept in a clipped incident line.
MESSAGE_ANCHORS = 2


def anchors_for(note: Optional[str], facts: Optional[Dict[str, Any]] = None, text: str = "") -> List[str]:
    """Text a clipped line must keep: for a setting's line, the key its note names
    (``gpu_memory_utilization = 0.9`` keeps ``gpu_memory_utilization``) and the value; for an
    incident's line, the numbers the finding reads from the log (``9.97``, ``434176``: the
    clauses that carry them are the ones that matter), co-tenant processes (``Process 4242``)
    and, given the line's ``text``, the words by which the catalog recognised its message
    (:data:`vllm_doctor.catalog.ANCHORS`, the longest :data:`MESSAGE_ANCHORS` present: a
    ``CUDA Error: out of memory`` deep in a JSON body a controller logged)."""
    out: List[str] = []
    if note and is_context(note):
        key, _, value = note.partition(" = ")
        out += [key, key.replace("_gib", "").replace("_", " ")]
        if len(value) >= 3:
            out.append(value)
        return [a for a in out if a]
    # Co-tenant processes first: on a crowded GPU the process list is what matters most.
    from .facts import listed_processes

    out += [f"Process {pid} " for pid in listed_processes(facts or {})[0]]
    for key in ANCHOR_FACTS:
        value = (facts or {}).get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if key.endswith("_gib"):  # as PyTorch and vLLM print a size: MiB below 1 GiB
            out.append(size(value))
        elif isinstance(value, int) and abs(value) >= 100:
            out += [str(value), f"{value:,}"]
        elif isinstance(value, float) and abs(value) >= 1:
            out += [f"{value:.2f}", f"{value:g}"]
    if text:
        from ..catalog import ANCHORS

        present = sorted((a for a in ANCHORS if len(a) >= 6 and a in text), key=len, reverse=True)
        out += present[:MESSAGE_ANCHORS]
    return [a for a in dict.fromkeys(out) if a]


def clip(text: str, budget: int, anchors: Sequence[str] = ()) -> Tuple[str, bool]:
    """``text`` cut to at most ``budget`` characters at clause boundaries: the opening clause
    (it says which message this is), the clauses holding one of ``anchors`` (most important
    first, as many as fit), then as much of the rest in order as fits, preferring to stop at
    the end of a sentence. Each gap is marked with :data:`CLIP`. Returns ``(text, clipped)``."""
    text = text.strip()
    budget = max(budget, 20)
    if len(text) <= budget:
        return text, False
    spans, pos = [], 0
    for m in _CLAUSE_END.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    # A clause longer than half the budget (key=value lists, one long sentence) is split
    # into words, so a window around what matters can still be kept.
    fine = []
    for a, b in spans:
        if b - a <= budget // 2:
            fine.append((a, b))
            continue
        for w in regex.finditer(r"\S+", text[a:b]):
            if w.end() - w.start() <= budget // 2:
                fine.append((a + w.start(), a + w.end()))
                continue
            # a word longer still (a JSON body without spaces): split after its punctuation
            for p in _PIECE.finditer(w.group()):
                fine.append((a + w.start() + p.start(), a + w.start() + p.end()))
    spans = fine
    low = text.lower()
    n = len(spans)

    def cost(i: int) -> int:  # the clause and the separator before it
        return spans[i][1] - (spans[i - 1][1] if i else spans[i][0])

    # Clauses holding an anchor, in the anchors' order of importance: each place an anchor
    # occurs keeps the clauses (or words) it overlaps, together or not at all (an anchor of
    # several words split into words is kept whole).
    must: List[int] = []
    chosen = {0}
    used = cost(0)
    for x in anchors:
        x = x.lower().strip()
        if not x:
            continue
        at = low.find(x)
        while at >= 0:
            group = [i for i, (a, b) in enumerate(spans) if i and a < at + len(x) and b > at and i not in chosen]
            extra = sum(cost(i) for i in group) + 3
            if group and used + extra <= budget:
                chosen.update(group)
                must += group
                used += extra
            at = low.find(x, at + len(x))
    # Then the opening run, in order, as far as it fits (a sentence end preferred).
    end = 0
    for i in range(1, n):
        if i in chosen:
            end = i
            continue
        if used + cost(i) > budget:
            break
        chosen.add(i)
        used += cost(i)
        end = i
    if end < n - 1 and text[spans[end][1] - 1] not in ".;!?":
        for j in range(end - 1, 0, -1):
            if j not in must and text[spans[j][1] - 1] in ".;!?" and spans[j][1] - spans[0][0] >= budget // 2:
                chosen = {c for c in chosen if c <= j or c in must}
                break
    out: List[str] = []
    prev = None
    for i in sorted(chosen):
        if prev is not None and i == prev + 1:
            out.append(text[spans[prev][1] : spans[i][1]])
        else:
            if prev is not None:
                out.append(f" {CLIP} ")
            out.append(text[spans[i][0] : spans[i][1]])
        prev = i
    result = "".join(out)
    if len(result) > budget:  # the opening clause alone is longer than the budget
        cut = result.rfind(" ", 0, budget - 2)
        result = result[: cut if cut > budget // 2 else budget - 2].rstrip()
        prev = -1
    if prev != n - 1:
        result += f" {CLIP}"
    return result, True


@dataclass
class EvidenceRow:
    """One evidence line as shown: ``line`` and ``time`` of its first appearance, the full
    ``text``, the ``notes`` of every entry for that line, and ``also`` the later lines that
    printed the same text (TP ranks, re-raises)."""

    source: str
    line: int
    time: Optional[str]
    text: str
    notes: List[str] = field(default_factory=list)
    also: List[int] = field(default_factory=list)
    kind: str = "log"  # "metric": ``line`` is a scrape's number, ``time`` its ISO 8601 time

    @property
    def where(self) -> str:
        """``:12`` for a log line, ``scrape 3`` for a metrics scrape."""
        return f"scrape {self.line}" if self.kind == "metric" else str(self.line)

    @property
    def note(self) -> str:
        """The notes of the row, joined with ``; ``."""
        return "; ".join(self.notes)


def evidence_rows(finding) -> List[EvidenceRow]:
    """``finding``'s evidence in line order, one row per line (the notes of one line merged)
    and a text printed again on later lines shown once, with those lines in ``also``."""
    rows: Dict[Tuple[str, int], EvidenceRow] = {}
    for e in finding.evidence:
        row = rows.get((e.source, e.line))
        if row is None:
            row = rows[(e.source, e.line)] = EvidenceRow(
                e.source, e.line, e.time, e.text, kind=getattr(e, "kind", "log")
            )
        if e.note and e.note not in row.notes:
            row.notes.append(e.note)
    by_text: Dict[Tuple[str, str], EvidenceRow] = {}
    out = []
    for row in sorted(rows.values(), key=lambda r: (r.source != finding.source, r.source, r.line)):
        first = by_text.get((row.source, row.text))
        if first is not None:
            first.also.append(row.line)
            first.notes += [n for n in row.notes if n not in first.notes]
            continue
        by_text[(row.source, row.text)] = row
        out.append(row)
    return out


# -- time -------------------------------------------------------------------------------


def incident_times(finding, verdict=None) -> Tuple[Optional[str], Optional[str]]:
    """First and last log time (``MM-DD HH:MM:SS``) of the lines that show the incident itself
    (not the settings it quotes); ``(None, None)`` when none of them carries a time. Given
    the ``verdict``, only the lines of the finding's own run count (its source, within the
    run's lines): a line quoted from another run (the healthy instance beside the one that
    failed, the run before a restart) says when that one did something, not when this
    failed. Without such a line (or a verdict), every incident line counts."""
    lines = [e for e in finding.evidence if e.time and not is_context(e.note)]
    run = None
    for r in getattr(verdict, "runs", None) or []:
        if r.source == finding.source and r.index == finding.run:
            run = r
    if run is not None:
        own = [e for e in lines if e.source == run.source and run.start_line <= e.line <= (run.end_line or e.line)]
        lines = own or lines
    times = sorted(e.time for e in lines)
    if not times:
        return None, None
    return times[0], times[-1]


def finding_time(finding, verdict=None) -> Optional[str]:
    """When ``finding`` happened in the log's own time: the first incident line's time (of
    its own run, given the ``verdict``: :func:`incident_times`)."""
    return incident_times(finding, verdict)[0]


def verdict_times(verdict) -> Tuple[Optional[str], Optional[str]]:
    """First and last incident time of the headline's own finding (see
    :func:`incident_times`); ``(None, None)`` without one."""
    return incident_times(verdict.primary, verdict) if verdict.primary is not None else (None, None)
