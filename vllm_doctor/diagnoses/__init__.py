"""The diagnoses: one module per class, and the decision tree that picks between them.

Each module holds its class id (``CLASS``), short code (``CODE``), ``SEVERITY``, a
one-line ``SUMMARY``, its documentation as the module docstring (What it means / Why it
happens / Remedies, in order / What does not help / Sources: ``vllm-doctor explain``
prints it), and either ``build(failures, run, phase)`` for failure classes or
``check(run)`` for run-level classes.

:func:`classify` is the decision tree of ``shared/domain.md``: startup or runtime first,
then the class. :func:`diagnose_run` applies it to every failure of a run, merges the
failures of one class into one finding (a traceback printed by every TP rank counts once),
adds the run-level checks, and drops "root cause not in the log" when another finding of
the run names a root cause.
"""

from __future__ import annotations

from types import ModuleType
from typing import Dict, List, Optional, Tuple

from ..events import Phase
from ..frames import phase_of
from ..tracker import MEMORY_KINDS, Failure, Run
from . import (
    config_limit_error,
    cuda_graph_capture_oom,
    healthy,
    kv_cache_capacity,
    notes,
    other,
    preemption_storm,
    quantization_unsupported,
    request_too_long,
    runtime_oom,
    sampler_warmup_oom,
    startup_memory_contention,
    unknown,
    weight_load_oom,
)
from .base import oom_facts, significant_co_tenants

#: Every class, in the diagnosis order (startup classes first). ``rules`` lists them so.
MODULES: Tuple[ModuleType, ...] = (
    weight_load_oom,
    kv_cache_capacity,
    startup_memory_contention,
    cuda_graph_capture_oom,
    sampler_warmup_oom,
    quantization_unsupported,
    config_limit_error,
    runtime_oom,
    preemption_storm,
    request_too_long,
    notes,
    other,
    unknown,
    healthy,
)
BY_CLASS: Dict[str, ModuleType] = {m.CLASS: m for m in MODULES}
BY_CODE: Dict[str, ModuleType] = {m.CODE: m for m in MODULES}
ORDER = {m.CLASS: i for i, m in enumerate(MODULES)}
FATAL_PROCS = ("EngineCore", "Worker", "VllmWorker", "RayWorker", "WorkerDict")


def failure_phase(f: Failure, run: Run) -> Optional[Phase]:
    """Where a failure happened: its frames, its kind, the run's progress, the markers around it."""
    p = phase_of(f.tags) or phase_of(f.context_tags)
    if p is not None:
        return p
    if "sampler_oom" in f.kinds:
        return Phase.WARMUP
    if "load_oom" in f.kinds:
        return Phase.LOADING_WEIGHTS
    if f.kind == "kv_error":
        return Phase.KV_SIZING
    if f.kind in ("free_memory", "quant_error", "config_error"):
        return Phase.CONFIG
    if f.kind == "profiling_error":
        return Phase.WEIGHTS_LOADED
    if f.kind == "too_long" or f.data.get("in_model_execution"):
        return Phase.SERVING
    if f.phase_at >= Phase.READY:
        return Phase.SERVING
    hints = {c.data.get("phase_hint") for c in run.consequences}
    if "runtime" in hints and "startup" not in hints:
        return Phase.SERVING
    # A startup failure: the run died where it got to (stderr may print the last progress
    # bar after the traceback, so take the furthest phase the run reached).
    if run.phase >= Phase.CONFIG and run.phase < Phase.READY:
        return run.phase
    if "startup" in hints:
        return Phase.CONFIG
    return None


def _fatal(f: Failure, run: Run, phase: Optional[Phase]) -> bool:
    if f.kind == "cuda_error":
        return True
    if phase is not None and phase < Phase.READY:
        return True
    rec = f.records[0]
    if rec.proc and rec.proc.startswith(FATAL_PROCS) or rec.rank is not None:
        return True
    return bool(run.consequences)


def classify(f: Failure, run: Run) -> Tuple[Optional[str], str]:
    """Return (class id or None for a non-fatal request error, 'startup' | 'runtime')."""
    phase = failure_phase(f, run)
    startup = phase is not None and phase < Phase.READY
    label = "startup" if startup else "runtime"
    tags = f.tags | f.context_tags
    if f.kind == "kv_error":
        return "kv_cache_capacity", "startup"
    if f.kind in ("free_memory", "profiling_error"):
        return "startup_memory_contention", "startup"
    if f.kind == "quant_error" or "quant_check" in tags:
        return "quantization_unsupported", "startup"
    if f.kind == "config_error":
        return "config_limit_error", "startup"
    if f.kind == "too_long" or "too_long" in f.tags:
        return "request_too_long", "runtime"
    if f.kinds & MEMORY_KINDS:
        crowded = significant_co_tenants(oom_facts([f], run))
        if phase is None:
            return ("startup_memory_contention", "startup") if crowded else ("runtime_oom", "runtime")
        if startup:
            if crowded:
                return "startup_memory_contention", "startup"
            if "sampler_oom" in f.kinds or phase == Phase.WARMUP:
                return "sampler_warmup_oom", "startup"
            if phase == Phase.GRAPH_CAPTURE:
                return "cuda_graph_capture_oom", "startup"
            if phase in (Phase.WEIGHTS_LOADED, Phase.KV_SIZING):
                return "kv_cache_capacity", "startup"
            return "weight_load_oom", "startup"
        return "runtime_oom", "runtime"
    if f.kind in ("cuda_error", "exception"):
        return ("other", label) if _fatal(f, run, phase) else (None, label)
    if f.kind == "traceback":
        return "unknown", label
    return None, label


def diagnose_run(run: Run) -> List:
    """All findings of one run: failures classified and merged per class, then run checks."""
    groups: Dict[Tuple[str, str], List[Failure]] = {}
    for f in run.failures:
        cls, phase = classify(f, run)
        if cls is not None:
            groups.setdefault((cls, phase), []).append(f)
    findings = []
    for (cls, phase), failures in groups.items():
        findings.append(BY_CLASS[cls].build(failures, run, phase))
    storm = preemption_storm.check(run)
    findings.extend(storm)
    findings.extend(notes.check(run, bool(storm)))
    if run.consequences and not run.failures:
        hints = {c.data.get("phase_hint") for c in run.consequences}
        phase = "startup" if "startup" in hints or (run.phase < Phase.READY and "runtime" not in hints) else "runtime"
        if any(c.data.get("marker") != "ray_worker_died" for c in run.consequences):
            findings.append(unknown.build([], run, phase))
    rooted = [f for f in findings if f.class_id not in ("unknown",) and f.severity in ("critical", "warning")]
    if rooted:
        findings = [f for f in findings if f.class_id != "unknown"]
    findings.sort(
        key=lambda f: ({"critical": 0, "warning": 1, "info": 2}.get(f.severity, 3), ORDER.get(f.class_id, 99))
    )
    return findings
