"""Out of memory while serving: something took the headroom vLLM counted on.

What it means:
    The server had started (its KV cache was reserved at startup) and then a request's
    activations, or a sampler/logits buffer, could not be allocated. Since the KV cache does
    not grow at runtime, the cause usually lies outside vLLM's own accounting.

Why it happens:
    * a co-tenant: another process on the same GPU (a second vLLM, a notebook, a training
      job) - the PyTorch message lists it as ``Process N has X GiB memory in use``;
    * ``gpu_memory_utilization`` set above what was really free, leaving no headroom for
      activations and fragmentation;
    * an input of unusual size: prompt logprobs over a long prompt (``echo``), a huge image
      or video, a long LoRA request.

Remedies, in order:
    1. Move the co-tenant processes off this GPU (``nvidia-smi``; the PIDs are in the OOM
       message).
    2. Lower ``--gpu-memory-utilization`` to leave headroom (or to what is really free).
    3. Bound request size: ``--max-num-batched-tokens`` (the per-step activation budget),
       cap prompt logprobs / multimodal input sizes (``--limit-mm-per-prompt``).
    4. Against fragmentation (large "reserved but unallocated"): set
       ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.

What does not help:
    Lowering ``max_model_len`` or raising ``gpu_memory_utilization`` (more KV cache leaves
    less headroom for activations); killing a "Process N" that is vLLM itself (inside a
    container the message names vLLM's own process by its host PID).

Sources:
    pytorch c10/cuda/CUDACachingAllocator.cpp (message, process list); shared/domain.md
    "Runtime failures"; shared/vllm-messages.md 13a (co-tenant caveats).
"""

from __future__ import annotations

import math
import sys
from typing import Any, Dict, Sequence

from ..tracker import Failure, Run
from .base import R, config_evidence, consequence_evidence, failure_evidence, make_finding, oom_facts, remedies

CLASS = "runtime_oom"
CODE = "VD200"
SEVERITY = "critical"
SUMMARY = "Out of GPU memory while serving: a co-tenant, too little headroom, or an oversized input."


def build(failures: Sequence[Failure], run: Run, phase: str) -> Any:
    mod = sys.modules[__name__]
    facts: Dict[str, Any] = oom_facts(failures, run)
    U = run.value("gpu_memory_utilization")
    if U is not None:
        facts["gpu_memory_utilization"] = U
    co = facts.get("co_tenant_pids") or []
    G, free, tried = facts.get("gpu_total_gib"), facts.get("gpu_free_gib"), facts.get("tried_to_allocate_gib")
    frag = facts.get("reserved_unallocated_gib")
    oversized = any(f.data.get("in_model_execution") for f in failures) and tried and free and tried > 1.0
    input_kind = None
    tags = set().union(*(f.tags | f.context_tags for f in failures))
    if "oversized_input" in tags:
        oversized = True
        input_kind = (
            "multimodal input"
            if any(
                "mm" in r.text or "image" in r.text or "video" in r.text or "multimodal" in r.text
                for f in failures
                for r in f.records
            )
            else "prompt logprobs / input"
        )
    if tried and G and tried >= 0.04 * G:
        oversized = True
    facts["oversized_allocation"] = bool(oversized)
    if input_kind:
        facts["oversized_input"] = input_kind
    if co:
        title = (
            f"Out of GPU memory while serving: co-tenant process(es) {', '.join(map(str, co))} hold "
            f"{facts.get('co_tenant_total_gib', 0):.2f} GiB of the GPU"
        )
    elif oversized:
        title = f"Out of GPU memory while serving: one allocation of {tried:.2f} GiB (an oversized request)"
    elif "co_tenant_pids" in facts:
        title = "Out of GPU memory while serving: vLLM itself used the headroom (no co-tenant listed)"
    else:
        title = "Out of GPU memory while serving (the message names no processes: check nvidia-smi for co-tenants)"
    target_u = None
    why_u = None
    if U is not None and G and tried:
        # Leave the failed allocation (or at least 1 GiB) of headroom below the current budget.
        target_u = math.floor((U - max(tried, 1.0) / G) * 100) / 100
        why_u = f"{U} x {G:.2f} GiB, less {max(tried, 1.0):.2f} GiB of headroom for the failed allocation"
    elif G and facts.get("vllm_process_gib") and tried:
        own = facts["vllm_process_gib"]
        target_u = math.floor((own - max(tried, 1.0)) / G * 100) / 100
        why_u = (
            f"vLLM held {own:.2f} of {G:.2f} GiB ({own / G:.2f} of the GPU; gpu_memory_utilization is not "
            f"in the log); {max(tried, 1.0):.2f} GiB less leaves room for the failed allocation"
        )
    if target_u is not None and target_u > 0.92:
        # Never suggest a value the pitfall note VD303 would flag: 0.92 is vLLM's newest default.
        target_u = 0.92
        why_u = (why_u or "") + "; capped at 0.92, vLLM's newest default, to keep a margin"
    if target_u is not None and target_u > 0.3:
        facts["gpu_memory_utilization_suggested"] = target_u
    rem = remedies(
        R(
            f"Move the co-tenant process(es) {', '.join(map(str, co))} off this GPU (check with nvidia-smi)",
            None,
            f"they hold {facts.get('co_tenant_total_gib', 0):.2f} GiB vLLM did not account for",
            "host",
        )
        if co
        else None,
        R(
            "Lower gpu_memory_utilization to leave headroom for activations",
            f"--gpu-memory-utilization {target_u:.2f}" if target_u and target_u > 0.3 else None,
            why_u
            or (
                f"the failed allocation was {tried:.2f} GiB with {free:.3f} GiB free of {G:.2f} GiB"
                if tried is not None and free is not None and G
                else None
            ),
        ),
        R(
            "Bound the work per step and the size of single requests",
            "--max-num-batched-tokens 2048" if oversized else None,
            "prompt logprobs / long prompts / large images need activation memory proportional to their size",
        ),
        R(
            "Reduce fragmentation",
            None,
            f"{frag:.2f} GiB is reserved by PyTorch but unallocated" if frag else None,
            "host",
        )
        if frag and frag >= 0.5
        else None,
    )
    if frag and frag >= 0.5:
        rem[-1].action = "Reduce fragmentation: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
    evidence = (
        failure_evidence(failures, "out of memory")
        + config_evidence(run, ("gpu_memory_utilization", "max_num_batched_tokens"))
        + consequence_evidence(run, 2)
    )
    dont = [
        "Raising gpu_memory_utilization: a larger KV cache leaves less headroom",
        "Lowering max_model_len: the KV cache was already reserved at startup",
    ]
    notes = []
    if facts.get("co_tenant_pids") == [] and facts.get("vllm_pid"):
        notes.append(
            f"Process {facts['vllm_pid']} in the message is vLLM itself (seen across a container PID namespace), not a co-tenant."
        )
    return make_finding(mod, run, "runtime", title, facts, evidence, rem, dont, notes)
