"""Helpers every diagnosis module shares: evidence, OOM facts, finding assembly."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Dict, Iterable, List, Optional, Sequence

from ..envelopes import Record
from ..memory import foreign_gib, split_processes
from ..tracker import Failure, Run
from ..units import tidy
from ..verdict import Evidence, Finding, Remedy

MAX_FINDING_EVIDENCE = 10


def ev(rec: Optional[Record], note: Optional[str] = None) -> Optional[Evidence]:
    if rec is None:
        return None
    text = rec.text.strip()
    if len(text) > 600:
        text = text[:597] + "..."
    return Evidence(source=rec.source, line=rec.lineno, text=text, note=note)


def evidence_list(items: Iterable[Optional[Evidence]]) -> List[Evidence]:
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
    out: List[Optional[Evidence]] = []
    for f in failures:
        for i, rec in enumerate(f.records[:4]):
            out.append(ev(rec, note if i == 0 else None))
    return out


def config_evidence(run: Run, keys: Iterable[str]) -> List[Optional[Evidence]]:
    return [ev(run.record_for(k), f"{k} = {run.value(k)}") for k in keys if run.record_for(k) is not None]


def consequence_evidence(run: Run, limit: int = 2) -> List[Optional[Evidence]]:
    return [ev(c.record, "consequence, not the cause") for c in run.consequences[:limit]]


def merged_data(failures: Sequence[Failure]) -> Dict[str, Any]:
    data: Dict[str, Any] = {}
    for f in failures:
        for k, v in f.data.items():
            data.setdefault(k, v)
    return data


OOM_FACT_KEYS = (
    "tried_to_allocate_gib",
    "gpu_total_gib",
    "gpu_free_gib",
    "gpu_index",
    "pytorch_allocated_gib",
    "reserved_unallocated_gib",
    "private_pools_gib",
)


def oom_facts(failures: Sequence[Failure], run: Run) -> Dict[str, Any]:
    """Numbers of the first OOM message with numbers, and who holds the GPU.

    ``co_tenant_pids``: PIDs of other processes on that GPU (see
    :func:`vllm_doctor.memory.split_processes`); ``[]`` when the message lists only vLLM's
    own process; absent when the message lists no processes at all.
    """
    facts: Dict[str, Any] = {}
    source = next((f for f in failures if f.data.get("gpu_total_gib")), failures[0] if failures else None)
    if source is None:
        return facts
    d = source.data
    for key in OOM_FACT_KEYS:
        if key in d:
            facts[key] = tidy(d[key]) if isinstance(d[key], float) else d[key]
    if d.get("form"):
        facts["oom_form"] = d["form"]
    if "processes" in d:
        reserved = None
        if "pytorch_allocated_gib" in d:
            reserved = d["pytorch_allocated_gib"] + d.get("reserved_unallocated_gib", 0.0)
        own, others = split_processes(d["processes"], run.vllm_pids, reserved)
        facts["co_tenant_pids"] = [pid for pid, _ in others]
        if others:
            facts["co_tenant_gib"] = {str(pid): tidy(g, 4) for pid, g in others}
            facts["co_tenant_total_gib"] = tidy(foreign_gib(others), 4)
        if own is not None:
            facts["vllm_process_gib"] = tidy(own[1], 4)
            if own[0] is not None:
                facts["vllm_pid"] = own[0]
    ranks = sorted({r.rank for f in failures for r in f.records if r.rank is not None})
    if ranks:
        facts["ranks"] = ranks
    repeats = sum(f.repeats for f in failures)
    if repeats > 1:
        facts["times_printed"] = repeats
    return facts


def significant_co_tenants(facts: Dict[str, Any]) -> bool:
    from ..memory import SIGNIFICANT_FOREIGN_SHARE

    total = facts.get("gpu_total_gib")
    foreign = facts.get("co_tenant_total_gib", 0.0)
    return bool(total) and foreign >= SIGNIFICANT_FOREIGN_SHARE * total


def make_finding(
    mod: ModuleType,
    run: Run,
    phase: str,
    title: str,
    facts: Dict[str, Any],
    evidence: Iterable[Optional[Evidence]],
    remedies: Sequence[Remedy],
    does_not_help: Sequence[str] = (),
    notes: Sequence[str] = (),
    severity: Optional[str] = None,
) -> Finding:
    return Finding(
        class_id=mod.CLASS,
        code=mod.CODE,
        severity=severity or mod.SEVERITY,
        phase=phase,
        title=title,
        source=run.source,
        run=run.index,
        facts={k: v for k, v in facts.items() if v is not None},
        evidence=evidence_list(evidence),
        remedies=list(remedies),
        does_not_help=list(does_not_help),
        notes=list(notes),
    )


def remedies(*items: Optional[Remedy]) -> List[Remedy]:
    """Number the remedies in the order given (the tuning order), skipping None."""
    out = [r for r in items if r is not None]
    for i, r in enumerate(out, 1):
        r.order = i
    return out


def R(action: str, flag: Optional[str] = None, why: Optional[str] = None, side: str = "server") -> Remedy:
    return Remedy(order=0, action=action, flag=flag, why=why, side=side)
