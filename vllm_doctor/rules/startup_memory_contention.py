"""Another process holds GPU memory at startup (co-tenant), so vLLM's budget does not fit.

What it means:
    ``gpu_memory_utilization`` is a share of the whole GPU. When other processes already
    hold memory, vLLM's request (``utilization x total``) exceeds what is free: "Free memory
    on device (F/T GiB) on startup is less than desired GPU memory utilization (U, R GiB)";
    or free memory changed under vLLM while it profiled ("Error in memory profiling"); or a
    startup OOM message lists other processes holding the GPU (or shows memory held outside
    this process that it does not list: a container cannot see other PIDs).

    A second case runs the other way: another vLLM instance (or another stage of vllm-omni)
    in the same log already holds its share, and this one found no memory left for its KV
    cache ("Available KV cache memory: 0.0 GiB", "No available memory for the cache
    blocks"). vLLM sizes the KV cache as utilization x total minus everything in use, the
    other instance included, so this instance's utilization must cover both shares.

    Memory already in use shows it too, without a process list (rules/contention.py): V0
    0.6.4's profiling line printing more in use than ``(1 - U) x total`` beside "No available
    memory for the cache blocks"; an OOM inside the KV cache's own allocation, which profiling
    had just sized to what was free.

Why it happens:
    A second vLLM or another stage of the same pipeline, a notebook, a training job, the
    desktop, a leftover process; several engines whose utilizations add up to more than 1.

Remedies, in order:
    When a process holds the memory:
    1. Free the GPU: stop or move the co-tenant processes (``nvidia-smi``); when they share it
       on purpose (a second instance, kvcached), size this one to what is free instead.
    2. Or lower ``--gpu-memory-utilization`` to what is free now (the largest value that
       fits is computed from the log: free / total, rounded down).
    3. For several engines on one GPU: split the utilizations so they sum below 1, or
       give each its own GPU.
    When another instance in the log left this one no KV cache memory:
    1. Size the instances together: this instance's ``--gpu-memory-utilization`` covers the
       other's share too: the sum of both when the log gives them (printed, or in a launch
       command, even one pasted in prose); without the other's, this one's plus the other's
       KV memory as a share of the device, a floor (its weights come on top). Never above
       what the device can give.
    2. Or size this instance's KV cache directly (``--kv-cache-memory-bytes``, vLLM 0.10.2+).
    3. Or give each instance (each stage) its own GPU, or start them one after another.

What does not help:
    Raising ``gpu_memory_utilization`` when a process holds the memory (asks for more of
    what is not free); lowering it when another instance left this one no KV cache memory
    (less of the sum is left); lowering ``max_model_len`` (the failure is before any KV
    sizing).

Sources:
    vllm/v1/worker/gpu_worker.py init_device; vllm/v1/worker/utils.py request_memory;
    gpu_worker.determine_available_memory ("Error in memory profiling"); docs.vllm.ai
    "Conserving Memory" (configuration/conserving_memory).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from .. import thresholds
from ..defaults import gpu_memory_utilization
from ..events import Phase
from ..frames import phase_of
from ..memory import gib_text, model_weights_estimate, utilization_floor
from ..run import Failure, Run
from ..units import tidy
from ..verdict import Finding
from . import contention
from .kv_cache_capacity import co_tenant_findings
from .oom import device_memory, monitor, named_pids, oom_facts
from .plan import constraints
from .rule import Rule, consequence_evidence, ev, failure_evidence, finding, merged_data, remedy

_FREE_CHECK_KEYS = ("device", "gpu_free_gib", "gpu_total_gib", "gpu_memory_utilization", "requested_gib")
_PROFILING_KEYS = ("initial_free_gib", "current_free_gib", "initial_used_gib", "current_used_gib")


def _free_check(data: Dict[str, Any], facts: Dict[str, Any]) -> str:
    for k in _FREE_CHECK_KEYS:
        if k in data:
            facts[k] = data[k]
    F, T = data.get("gpu_free_gib"), data.get("gpu_total_gib")
    if F is not None and T and 0 <= F <= T:
        facts["held_by_others_gib"] = tidy(T - F, 2)
        fit = math.floor(F / T * 100 - 1e-9) / 100
        if fit >= thresholds.SIGNIFICANT_FOREIGN_SHARE:
            facts["gpu_memory_utilization_that_fits"] = fit
    return (
        f"GPU memory held by other processes at startup: {facts.get('gpu_free_gib')} of "
        f"{facts.get('gpu_total_gib')} GiB free, {facts.get('requested_gib')} GiB requested"
    )


def _too_little_free(facts: Dict[str, Any]) -> Optional[str]:
    """Why no utilization is printed although the message gives the free memory: what is free is
    below SIGNIFICANT_FOREIGN_SHARE of the GPU, too little to serve from (hunt10 w19: 12.38 of
    287.69 GiB, where the tool said the free memory "is not in the log"). None when the message
    gives no free memory. remedies3."""
    F, T = facts.get("gpu_free_gib"), facts.get("gpu_total_gib")
    if F is None or not T:
        return None
    return (
        f"{F} GiB free of {T} GiB is {F / T:.0%} of the GPU, below {thresholds.SIGNIFICANT_FOREIGN_SHARE:.0%} "
        "of it, too little to serve from at any utilization: free the GPU first"
    )


def _profiling(data: Dict[str, Any], facts: Dict[str, Any], notes: List[str]) -> str:
    for k in _PROFILING_KEYS:
        if k in data:
            facts[k] = tidy(data[k], 4)
    i, c = data.get("initial_free_gib"), data.get("current_free_gib")
    if i is not None and c is not None and abs(i - c) < thresholds.UNCHANGED_FREE_GIB:
        facts["free_memory_unchanged"] = True
        notes.append(
            f"Initial and current free memory are equal ({i} GiB): no other process released memory; "
            "this is the strict '>' check of some vLLM versions (seen on Intel XPU), not contention."
        )
        return "'Error in memory profiling' with free memory unchanged: a false positive of the check"
    return "Free GPU memory changed while vLLM profiled it (another process released memory)"


def _crowded_oom(failures, run: Run, facts: Dict[str, Any]) -> str:
    facts.update(oom_facts(failures, run))
    T, held = facts.get("gpu_total_gib"), facts.get("co_tenant_total_gib")
    unlisted = facts.get("held_unlisted_gib")
    if held is None and unlisted is not None:
        held = unlisted
    if T and held is not None and held < T and not facts.get("processes_cut"):
        # (a list cut before its end gives a floor of what others hold, never what is free)
        facts["held_by_others_gib"] = tidy(held, 2)
        fit = math.floor((T - held) / T * 100 * thresholds.FREE_SHARE_TAKEN) / 100
        if fit >= thresholds.SIGNIFICANT_FOREIGN_SHARE:
            facts["gpu_memory_utilization_that_fits"] = fit
    if not facts.get("co_tenant_pids") and unlisted is not None:
        return (
            f"Startup OOM: {unlisted:.2f} of {T:.2f} GiB of the {device_memory(facts).split(' (')[0]} is held "
            "outside this process (the message lists no other process)"
        )
    return (
        f"Startup OOM with co-tenant process(es) {named_pids(facts)} "
        f"holding {facts.get('co_tenant_total_gib', 0):.2f} GiB of the GPU"
    )


def _before_kv(failures: Sequence[Failure]) -> bool:
    """The frames place the OOM before the KV cache exists (weights, profiling): what the process
    held then does not shrink with a lower utilization."""
    return any((p := phase_of(f.all_tags)) is not None and p <= Phase.WEIGHTS_LOADED for f in failures)


def _below_floor(run: Run, failures: Sequence[Failure], facts: Dict[str, Any]) -> Optional[str]:
    """Drop ``gpu_memory_utilization_that_fits`` when it cannot hold what the engine needs
    (:func:`vllm_doctor.memory.utilization_floor`: the request that failed, plus what the process
    held when the frames place the OOM before the KV cache (afterwards part of it is the KV
    cache, which a lower utilization shrinks), and the weights estimated from the model's name);
    returns the sentence that says so."""
    fit, T = facts.get("gpu_memory_utilization_that_fits"), facts.get("gpu_total_gib")
    if fit is None or not T:
        return None
    held = facts.get("vllm_process_gib")
    if held is None:
        held = facts.get("pytorch_allocated_gib", facts.get("pytorch_reserved_gib"))
    if not _before_kv(failures):
        held = None
    est = model_weights_estimate(run.value("model"), run.value("quantization"), run.value("dtype"))
    per_gpu = None
    if est:
        per_gpu = est["weights_gib_estimate"] / max(1, int(run.value("tensor_parallel_size") or 1))
    floor = utilization_floor(T, held, facts.get("tried_to_allocate_gib"), per_gpu, thresholds.WEIGHTS_OVERHEAD)
    if floor is None or fit >= floor[0]:
        return None
    del facts["gpu_memory_utilization_that_fits"]
    facts["utilization_floor"] = tidy(floor[0], 3)
    return (
        f"what is free ({fit:.2f} x {T:.2f} GiB = {fit * T:.2f} GiB) cannot hold {floor[1]}: no lower value "
        "serves; free the GPU or shrink the other process first"
    )


def _other_engine(run: Run, facts: Dict[str, Any]):
    """The lever when the co-tenant is a second vLLM engine (a second model on the GPU): its
    own gpu_memory_utilization, 0.9 of the whole GPU by default (hunt6 p19)."""
    gib, T = facts.get("co_tenant_gib") or {}, facts.get("gpu_total_gib")
    if not gib or not T:
        return None
    pid, held = max(gib.items(), key=lambda kv: kv[1])
    default = gpu_memory_utilization(run.value("vllm_version"), run.engine).low
    return remedy(
        f"If process {pid} is another vLLM engine (a second model on this GPU), restart it with a lower "
        "gpu_memory_utilization so both fit: lower the first engine's, not this one's",
        None,
        f"it holds {gib_text(held)}, {held / T:.2f} of the GPU; a vLLM engine claims {default:g} of the whole GPU by "
        "default, whatever else runs there",
        "host",
    )


def _held_at_startup(run: Run, failures: Sequence[Failure], held) -> Finding:
    """No cache blocks while the card already held more than this budget leaves for others when
    profiling began (rules/contention.py held_at_startup; V0 0.6.4's profiling line, q05)."""
    others, why = held
    T, used = run.value("gpu_total_gib"), run.facts.get("initial_usage_gib")
    facts: Dict[str, Any] = {"gpu_total_gib": T, "initial_usage_gib": used}
    if contention.own_weights(run) is not None:  # else what is in use includes this instance's weights
        facts["held_by_others_gib"] = tidy(others, 2)
    U = run.value("gpu_memory_utilization")
    if U is not None:
        facts["gpu_memory_utilization"] = U
    title = f"No KV cache memory: {used:.2f} of {T:.2f} GiB of the GPU was already in use when this instance began profiling"
    rem = [
        remedy(
            "Find what else holds this GPU (nvidia-smi): another vLLM instance, a notebook, a leftover process; "
            "stop or move it",
            None,
            why,
            "host",
        ),
        remedy(
            "Or size the instances together: on V0 up to 0.6.4 gpu_memory_utilization is a share of the whole card "
            "with every other process's memory counted against it, so this instance's value must cover the others' "
            "memory as well as its own; or upgrade (from 0.6.6 the budget counts only this instance's memory)",
            None,
            "how much the others hold at this instance's start is not in the log beyond the total in use",
        ),
        remedy("Or give each instance its own GPU, or start them one after another"),
        remedy(
            "If nothing else runs on it, this instance's own weights fill the card: more tensor parallelism or a "
            "quantized model (vllm-doctor explain kv_cache_capacity)"
        ),
    ]
    dont = [
        "Tensor parallelism or quantization before checking for another process: the memory in use may not be "
        "this instance's weights",
        "Lowering max_model_len: no cache block is left for any length",
    ]
    forbids = [("gpu_memory_utilization", "lower", "the budget must cover the others' memory too on this release")]
    evidence = (
        failure_evidence(failures, "the error")
        + [ev(run.line_for("initial_usage_gib"), "memory in use when profiling began")]
        + consequence_evidence(run, 1)
    )
    return finding(RULE, run, "startup", title, facts, evidence, rem, dont, forbids=forbids)


def _kv_alloc(run: Run, failures: Sequence[Failure]) -> Finding:
    """Out of memory inside the KV cache's own allocation, no process listed (u02): profiling sized
    the cache to what was free, so memory was taken between the two."""
    facts: Dict[str, Any] = oom_facts(failures, run)
    facts["kv_alloc_after_profiling"] = True
    tried = facts.get("tried_to_allocate_gib")
    asked = f" ({tried:.2f} GiB asked for)" if tried else ""
    title = (
        f"Out of {device_memory(facts)} allocating the KV cache that profiling had just sized{asked}: memory "
        "was taken in between"
    )
    c = constraints(run)
    rem = [
        remedy(
            f"Find what took the memory after profiling ({monitor(facts)}): another process starting on this GPU, or "
            "in a notebook an earlier LLM() still alive in the same kernel (restart the kernel, or del it and "
            "free the cache before creating a new one)",
            None,
            "the profiling run sized the KV cache to the memory free just before this allocation",
            "host",
        ),
        c.lower(
            "gpu_memory_utilization",
            None,
            "Or lower gpu_memory_utilization to leave room for what else runs on the GPU",
            "what the other process holds is not in the log",
        ),
        remedy("Several engines on one GPU: split their utilizations so they sum below 1, or give each its own GPU"),
    ]
    dont = [
        "Raising gpu_memory_utilization: the KV cache would ask for even more",
        "Lowering max_model_len: the cache takes the whole budget whatever the length",
    ]
    forbids = [("gpu_memory_utilization", "raise", "the KV cache would ask for even more")]
    evidence = failure_evidence(failures, "out of memory allocating the KV cache") + consequence_evidence(run, 1)
    return finding(RULE, run, "startup", title, facts, evidence, rem, dont, confidence="medium", forbids=forbids)


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        # No KV memory beside another instance or vllm-omni stage (judged in kv_cache_capacity).
        return co_tenant_findings(run, RULE)
    data = merged_data(failures)
    facts: Dict[str, Any] = {}
    notes: List[str] = []
    kinds = set().union(*(f.kinds for f in failures))
    held = contention.held_at_startup(run, failures)
    if held is not None:
        return [_held_at_startup(run, failures, held)]
    if failures and all(contention.kv_alloc_after_profiling(f) for f in failures):
        return [_kv_alloc(run, failures)]
    if "free_memory" in kinds:
        title = _free_check(data, facts)
    elif "profiling_error" in kinds:
        title = _profiling(data, facts, notes)
    else:
        title = _crowded_oom(failures, run, facts)
    U = run.value("gpu_memory_utilization")
    if U is not None:
        facts.setdefault("gpu_memory_utilization", U)
    floor_why = _below_floor(run, failures, facts)
    fit = facts.get("gpu_memory_utilization_that_fits")
    pids = facts.get("co_tenant_pids")
    if pids:
        held_why = f"PIDs {named_pids(facts)}"
    elif facts.get("held_unlisted_gib") is not None:
        held_why = (
            f"{facts['held_by_others_gib']:.2f} GiB is held by processes the message does not list: "
            f"run {monitor(facts)} on the host, a container cannot see them"
        )
    elif facts.get("held_by_others_gib"):
        held_why = f"{facts['held_by_others_gib']:.2f} GiB is held by others"
    else:
        held_why = None
    c = constraints(run)
    rem = [
        remedy(
            f"Free the GPU: stop or move the other processes using it ({monitor(facts)} shows them); if they "
            "share it on purpose (a second instance, kvcached), size this one to what is free instead (next step)",
            None,
            held_why,
            "host",
        ),
        _other_engine(run, facts),
        None
        if floor_why
        else c.lower(
            "gpu_memory_utilization",
            fit,
            "Or lower gpu_memory_utilization to what is free now",
            f"{facts['gpu_total_gib']:.2f} GiB less the {facts['held_by_others_gib']:.2f} GiB held by others"
            if fit and facts.get("held_by_others_gib") and facts.get("gpu_total_gib")
            else f"{facts.get('gpu_free_gib')} GiB free of {facts.get('gpu_total_gib')} GiB"
            if "gpu_free_gib" in facts and fit
            else f"the message's process list is cut: what the others hold is not in the log; check {monitor(facts)}"
            if facts.get("processes_cut")
            else _too_little_free(facts) or "the free memory at startup is not in the log: check nvidia-smi",
        ),
        remedy("Several engines on one GPU: split their utilizations so they sum below 1, or give each its own GPU"),
    ]
    if facts.get("free_memory_unchanged"):
        rem = [remedy("Upgrade vLLM (the check's strict comparison was fixed) or retry; nothing else holds memory")]
    evidence = failure_evidence(failures, "the startup check") + consequence_evidence(run, 1)
    dont = [
        "Raising gpu_memory_utilization: it asks for more of what is not free",
        "Lowering max_model_len: the failure happens before KV cache sizing",
    ]
    if floor_why:
        dont.append(f"Lowering this engine's gpu_memory_utilization: {floor_why}")
    forbids = [("gpu_memory_utilization", "raise", "it asks for more of what is not free")]
    return [finding(RULE, run, "startup", title, facts, evidence, rem, dont, notes, forbids=forbids)]


RULE = Rule(
    code="VD102",
    name="startup_memory_contention",
    severity="critical",
    summary="Startup failed: other processes hold GPU memory vLLM's gpu_memory_utilization counted on.",
    doc=__doc__,
    check=check,
)
