"""KV cache too small: the server cannot hold one request of ``max_model_len`` tokens.

What it means:
    vLLM reserves its KV cache once, at startup, from what is left of
    ``gpu_memory_utilization x total`` after the weights and the activation peak. When
    that cannot hold even one sequence of ``max_model_len`` tokens, startup fails (V0:
    "The model's max seq len (L) is larger than the maximum number of tokens that can be
    stored in KV cache (T)"; V1: "To serve at least one request with the model's max seq
    len (L), (N GiB KV cache is needed, which is larger than the available KV cache memory
    (A GiB)"; both: "No available memory for the cache blocks"). A negative or zero budget
    ("Available KV cache memory: -2.14 GiB", "# GPU blocks: 0") means the weights and
    activations alone already exceed the budget.

Why it happens:
    ``max_model_len`` left at the model's default (often 128k or 1M tokens) while the GPU
    has room for far fewer; ``gpu_memory_utilization`` set low (or shared between several
    engines); a model whose weights nearly fill the GPU.

Remedies, in order:
    1. Lower ``--max-model-len`` to what the workload needs and the cache holds (vLLM's
       own estimate when printed, else the KV token capacity, rounded down).
    2. Raise ``--gpu-memory-utilization`` to the value that fits the current length (only
       where the GPU has that memory to give).
    3. Shrink KV per token: ``--kv-cache-dtype fp8`` (halves it for a 16-bit model; a
       precision trade-off to evaluate), or spread it: ``--tensor-parallel-size 2``.
    Negative/zero budget: raise ``--gpu-memory-utilization`` if the GPU has headroom,
    else more tensor parallelism, a quantized or a smaller model.
    Out of device memory in the profiling run (a PyTorch/HIP OOM, not vLLM's budget check):
    the activation peak of the profiling batch does not fit beside the weights. Lower
    ``--max-num-batched-tokens``, then ``--max-num-seqs`` (and ``--max-model-len`` where
    chunked prefill is off, V0's default), then more tensor parallelism or a smaller model.
    Out of device memory allocating the KV cache tensors: the budget promised more than the
    device could give (a co-tenant, fragmentation, a unified-memory device): free the GPU,
    or lower ``--gpu-memory-utilization`` by at least the allocation that failed.

What does not help:
    Lowering ``max_model_len`` when the KV budget is negative or zero (nothing fits at any
    length); lowering ``gpu_memory_utilization`` (shrinks the cache further);
    ``max_num_seqs`` (concurrency does not change what one request needs). After an out-of-
    memory error: raising ``gpu_memory_utilization`` (the device, not the budget, ran out).

    A co-tenant of the same kind: no KV memory at all in a second vLLM instance while an
    earlier instance in the same paste is up (two ``vllm serve`` on one device), or in one
    stage of a vllm-omni server (``StageEngineCoreProc``, ``DiffusionWorker``: stages start
    together, often on one GPU). That is ``startup_memory_contention``: the other's memory
    was counted against this engine's budget (vllm-ascend and V0 subtract everything in use on
    the device; vllm-omni's profiling fallback counts what appeared while it profiled and
    clamps the result at 0, so the deficit is not in the log). Remedies: size the instances
    together (this instance's ``gpu_memory_utilization`` must cover the other's share too,
    or ``--kv-cache-memory-bytes`` sizes the KV cache directly), or separate devices; for
    stages, start them one after another or give each its own budget or device. Lowering
    this engine's ``gpu_memory_utilization`` only shrinks its budget further.

Sources:
    vllm/worker/worker.py raise_if_cache_size_invalid (V0);
    vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory (V1);
    vllm/v1/worker/gpu_worker.py determine_available_memory; docs.vllm.ai "Conserving
    Memory" (configuration/conserving_memory).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import thresholds
from ..events import Phase
from ..memory import floor_tidy
from ..run import Failure, Neighbour, Run
from ..units import tidy
from ..verdict import Finding
from . import contention
from .oom import device_memory, named_pids, oom_facts
from .plan import Constraints, constraints
from .rule import (
    Rule,
    config_evidence,
    consequence_evidence,
    ev,
    failure_evidence,
    finding,
    merged_data,
    remedy,
)

DEFAULT_BLOCK_SIZE = 16  # CacheConfig block_size on CUDA (shared/vllm-messages.md section 14)
NO_BUDGET_PATTERNS = ("kv_no_cache_blocks", "kv_cannot_auto_fit")


def _round_up(u: float) -> float:
    return tidy(math.ceil(u * 100 - 1e-9) / 100, 2)


#: Variants where the device itself ran out (a PyTorch/HIP out-of-memory error), not vLLM's
#: budget arithmetic: raising gpu_memory_utilization cannot give memory the device lacks.
PHYSICAL_OOM = ("profile_oom", "kv_alloc_oom")


def _exhausted(A: Optional[float], blocks: Optional[int], data: Dict[str, Any]) -> bool:
    return (A is not None and A <= 0) or blocks == 0 or data.get("variant") == "no_blocks"


def _no_budget(f: Dict[str, Any], G, U, A, ceiling: float) -> Dict[str, Any]:
    """A zero or negative budget: the utilization that covers the deficit plus a KV floor."""
    if G and U is not None and A is not None and A <= 0:
        need = U + (-A + thresholds.KV_FLOOR_GIB) / G
        f["gpu_memory_utilization_needed"] = _round_up(need)
        f["utilization_possible"] = need <= ceiling
    return f


def _utilization_fit(f: Dict[str, Any], L, T, N, A, G, U, per_token, ceiling: float) -> None:
    """The utilization that would fit the current max_model_len on this GPU."""
    needed = N if N else L * per_token
    have = A if A is not None else (T * per_token if T else None)
    if have is None:
        return
    extra = max(0.0, needed - have)
    f["kv_extra_needed_gib"] = tidy(extra, 4)
    if G and U is not None:
        u_needed = U + extra / G
        f["gpu_memory_utilization_needed"] = _round_up(u_needed)
        f["utilization_possible"] = u_needed <= ceiling


def capacity(run: Run, data: Dict[str, Any], plan: Optional[Constraints] = None) -> Dict[str, Any]:
    """Work out what fits, from whatever the log printed. All values traceable to ``facts``.

    Returns facts: ``max_model_len``, ``kv_tokens`` (tokens the cache holds), ``kv_needed_gib``
    and ``kv_available_gib``, ``kv_gib_per_token``, ``fitting_max_model_len`` (tidy value
    <= vLLM's estimate or the token capacity), ``gpu_memory_utilization_needed`` (None when
    the GPU total is not in the log; ``utilization_possible`` False above what the GPU can give,
    :meth:`~vllm_doctor.rules.plan.Constraints.utilization_ceiling`), and what fp8 KV cache and
    TP 2 would give.
    """
    plan = plan or constraints(run)
    ceiling = plan.utilization_ceiling()[0]
    f: Dict[str, Any] = {}
    L = data.get("max_model_len") or run.value("max_model_len")
    T = data.get("kv_tokens") or run.value("kv_tokens")
    blocks = run.value("gpu_blocks")
    if T is None and blocks:
        T = blocks * (run.value("block_size") or DEFAULT_BLOCK_SIZE)
        f["kv_tokens_from_blocks"] = True
    N = data.get("kv_needed_gib")
    A = data.get("kv_available_gib", run.value("kv_available_gib"))
    E = data.get("estimated_max_model_len")
    G = run.value("gpu_total_gib") or plan.gpu_total_gib
    U = run.value("gpu_memory_utilization")
    W = run.value("weights_gib")
    f.update(
        max_model_len=L,
        kv_tokens=T,
        kv_needed_gib=N,
        kv_available_gib=A,
        estimated_max_model_len=E,
        gpu_total_gib=G,
        gpu_memory_utilization=U,
        weights_gib=W,
        gpu_blocks=blocks,
    )
    per_token = N / L if N and L else (A / T if A and T and A > 0 else None)
    if per_token:
        f["kv_gib_per_token"] = tidy(per_token, 9)
    f["kv_budget_exhausted"] = _exhausted(A, blocks, data)
    if f["kv_budget_exhausted"]:
        return _no_budget(f, G, U, A, ceiling)
    fits = E or T or (A / per_token if per_token and A else None)
    if fits:
        f["fitting_max_model_len"] = floor_tidy(fits)
    if L and per_token:
        _utilization_fit(f, L, T, N, A, G, U, per_token, ceiling)
    dtype = run.value("kv_cache_dtype") or "auto"
    if str(dtype).startswith("fp8"):
        f["kv_cache_dtype_already_fp8"] = True
    elif T or (A and per_token):
        cap = T if T else A / per_token
        f["fp8_kv_tokens"] = int(cap * 2)
        f["fp8_fits_max_model_len"] = bool(L) and cap * 2 >= L
    tp = run.value("tensor_parallel_size") or 1
    if W and per_token and A is not None and tp == 1:
        # TP 2 halves weights and KV per token on each GPU: A + W/2 of KV, at half the cost per token.
        f["tp2_kv_tokens_estimate"] = int((A + W / 2) / (per_token / 2))
    return f


def _batch_remedy(c: Constraints) -> Any:
    return c.halve(
        "max_num_batched_tokens",
        "Shrink the profiling activation peak: fewer tokens per step",
        "the profiling run's activation peak is subtracted from the budget",
    )


def _tp_remedy(c: Constraints, W: Optional[float], per_gpu_gain: str) -> Any:
    tp = int(c.in_force("tensor_parallel_size").high or 1)
    why = per_gpu_gain
    if W:  # "Model loading took W GiB" is what one GPU holds at the current split
        why = f"each GPU then holds about {W / 2:.2f} GiB of weights instead of {W:.2f}, freeing {W / 2:.2f} GiB"
    return c.raise_tp(2 * tp, "Spread the model over more GPUs with tensor parallelism", why)


def _exhausted_remedies(run: Run, c: Constraints, cap: Dict[str, Any]) -> List[Any]:
    u_need = cap.get("gpu_memory_utilization_needed")
    A = cap.get("kv_available_gib")
    if u_need:
        why = (
            f"available KV memory {A:.2f} GiB on a {cap['gpu_total_gib']:.2f} GiB GPU at "
            f"{cap['gpu_memory_utilization']}: {u_need:.2f} covers the deficit plus {thresholds.KV_FLOOR_GIB:.2f} GiB of "
            "KV cache"
        )
    elif A is not None and A <= 0:
        missing = "the GPU's total memory" if not cap.get("gpu_total_gib") else "the utilization in force"
        why = (
            f"it must grow by {-A + thresholds.KV_FLOOR_GIB:.2f} GiB ({-A:.2f} GiB of deficit plus "
            f"{thresholds.KV_FLOOR_GIB:.2f} GiB of KV cache); {missing} is not in the log, so the value cannot be worked out"
        )
    else:
        why = "the budget left for the KV cache is zero or negative; the log does not say by how much"
    return [
        c.raise_to(
            "gpu_memory_utilization",
            u_need,
            "Raise gpu_memory_utilization so weights, activations and some KV cache fit in the budget",
            why,
        ),
        _tp_remedy(c, cap.get("weights_gib"), "halves the weights held by each GPU, freeing room for the KV cache"),
        remedy("Or serve a quantized or smaller model (fewer bytes of weights leave room for KV cache)"),
        _batch_remedy(c),
        _seqs_remedy(c),
    ]


def _seqs_remedy(c: Constraints) -> Any:
    """The profiling and sampler dummy runs use max_num_seqs sequences (V1's gpu_model_runner
    ``_dummy_sampler_run``; a hybrid or multimodal model's state per sequence): fewer of them
    lower the peak subtracted from the KV budget (hunt9 v18: the reporter's fix was
    max_num_seqs 4-8, never mentioned). remedies3."""
    return c.halve(
        "max_num_seqs",
        "Or profile fewer sequences at once",
        "the profiling and sampler warm-up runs use max_num_seqs dummy sequences, whose peak is subtracted "
        "from the budget",
        floor=8,
    )


def _free_gate(run: Run) -> Optional[Failure]:
    """The run's failed free-memory check ("Free memory on device (F/T GiB) on startup is less
    than desired GPU memory utilization (U, R GiB)": v1/worker/gpu_worker.py init_device,
    v1/worker/utils.py request_memory from 0.14) when it printed the free and total memory, else
    None."""
    for f in run.failures:
        if f.kind == "free_memory" and f.data.get("gpu_free_gib") is not None and f.data.get("gpu_total_gib"):
            return f
    return None


def _squeezed(run: Run, plan: Constraints, c: Dict[str, Any], gate: Failure):
    """Title, remedies, what does not help and forbidden directions when the same run shows the
    free-memory check failing and the KV budget exhausted (hunt10 w18: 0.25 fails the gate on
    34.51 of 139.8 GiB free, 0.22 passes it and leaves no KV cache): the budget is squeezed
    between what another process holds and the weights, so no utilization works and raising it
    is the one thing the log shows failing. remedies3."""
    F, T = gate.data["gpu_free_gib"], gate.data["gpu_total_gib"]
    U = gate.data.get("gpu_memory_utilization")
    at = f" at {U:g}" if isinstance(U, (int, float)) else ""
    held = T - F
    title = (
        f"KV cache budget squeezed: {held:.2f} of {T:g} GiB is held outside vLLM, and what is left does not hold "
        "the weights and a KV cache"
    )
    gate_why = f"the free-memory check failed{at} with {F:g} of {T:g} GiB free (line {gate.lines[0].lineno})"
    # a trainer's offload only where the log shows one (a12: a desktop 3060 with no trainer in sight)
    holders = (
        "its trainer (offload or sleep the actor/reference models before the rollout initialises), a second "
        "instance, or give vLLM its own GPUs"
        if run.trainer
        else "another process (nvidia-smi names it: a second instance, a notebook, a trainer), or give vLLM its own GPU"
    )
    rem = [
        remedy(
            f"Free what holds {held:.2f} GiB of this GPU before vLLM starts: {holders}",
            None,
            gate_why,
            "host",
        ),
        plan.raise_to(
            "gpu_memory_utilization",
            None,
            "Raise gpu_memory_utilization only once that memory is freed",
            f"{gate_why}: a higher utilization cannot start (the log does not show the memory for it), a lower one "
            "leaves no KV cache",
        ),
        remedy("Or serve a quantized or smaller model (fewer bytes of weights leave room for KV cache)"),
    ]
    dont = [
        f"Raising gpu_memory_utilization while the other process holds its memory: {gate_why}",
        "Lowering gpu_memory_utilization: it shrinks the KV cache budget further",
        "Lowering max_model_len: the budget is negative or zero, no length fits",
    ]
    forbids = [
        ("gpu_memory_utilization", "lower", "it shrinks the KV cache budget further"),
    ]
    c["held_by_others_gib"] = round(held, 2)
    return title, rem, dont, forbids


def _basis(c: Dict[str, Any], L) -> str:
    if c.get("estimated_max_model_len"):
        return f"vLLM's own estimate is {c['estimated_max_model_len']} tokens"
    if c.get("kv_tokens"):
        return f"the KV cache capacity is {c['kv_tokens']} tokens"
    if c.get("kv_available_gib") is not None and c.get("kv_needed_gib"):
        return (
            f"{c['kv_available_gib']} GiB available / {c['kv_needed_gib']} GiB needed x {L} tokens = "
            f"{int(L * c['kv_available_gib'] / c['kv_needed_gib'])} tokens"
        )
    return "the KV cache capacity"


def _utilization_why(c: Dict[str, Any]) -> Optional[str]:
    u_need = c.get("gpu_memory_utilization_needed")
    if u_need:
        return (
            f"needs {c.get('kv_extra_needed_gib', 0):.2f} GiB more KV cache on a {c.get('gpu_total_gib')} GiB GPU: "
            f"{c.get('gpu_memory_utilization')} -> {u_need:.2f}"
            + ("" if c.get("utilization_possible") else " (not possible: above what the GPU can safely give)")
        )
    if c.get("kv_extra_needed_gib") is not None:
        return f"about {c['kv_extra_needed_gib']:.2f} GiB more KV cache is needed; the GPU total is not in the log"
    return "the KV cache figures (GiB needed and available) or the GPU total are not in the log"


def _fp8_why(c: Dict[str, Any]) -> Optional[str]:
    if not c.get("fp8_kv_tokens"):
        return None
    before = c.get("kv_tokens") or int(c["fp8_kv_tokens"] / 2)
    enough = " - enough for the current max_model_len" if c.get("fp8_fits_max_model_len") else ""
    return f"about {c['fp8_kv_tokens']} tokens instead of {before}{enough}"


def _too_small_remedies(c: Constraints, cap: Dict[str, Any], L) -> List[Any]:
    fit = cap.get("fitting_max_model_len")
    u_need = cap.get("gpu_memory_utilization_needed")
    tp2 = cap.get("tp2_kv_tokens_estimate")
    return [
        c.lower(
            "max_model_len",
            fit,
            "Lower max_model_len to what the workload needs and the KV cache holds",
            f"{_basis(cap, L)}; {fit} is that rounded down" if fit else "the log does not print the KV capacity",
        ),
        c.raise_to(
            "gpu_memory_utilization",
            u_need,
            "Or raise gpu_memory_utilization so the current max_model_len fits",
            _utilization_why(cap),
        ),
        None
        if cap.get("kv_cache_dtype_already_fp8")
        else c.set_to(
            "kv_cache_dtype",
            "fp8",
            "Or halve KV cache per token with an fp8 KV cache (a precision trade-off to evaluate)",
            _fp8_why(cap),
        ),
        _tp_remedy(c, None, f"about {tp2} tokens of KV cache per engine, an estimate" if tp2 else None),
    ]


def _co_tenant_remedy(facts: Dict[str, Any]) -> Any:
    co = facts.get("co_tenant_pids") or []
    if not co:
        return None
    return remedy(
        f"Free the GPU of process(es) {named_pids(facts)}",
        None,
        f"they hold {facts.get('co_tenant_total_gib', 0):.2f} GiB of the device vLLM sized its memory on",
        "host",
    )


def _profiled_length(c: Constraints) -> Any:
    """V0 without chunked prefill profiles a batch of at least max_model_len tokens."""
    return c.halve(
        "max_model_len",
        "Where chunked prefill is off (V0's default), a shorter max_model_len shrinks the profiling batch",
        "the profiling batch then holds at least max_model_len tokens",
    )


def _physical_oom(run: Run, c: Constraints, facts: Dict[str, Any], variant: str):
    """Title, remedies, what does not help and the forbidden directions of an out-of-memory
    error at the KV step: allocating the KV cache tensors, or the profiling run."""
    device = device_memory(facts)
    forbids = [("gpu_memory_utilization", "raise", "the device ran out, not vLLM's budget")]
    if variant == "kv_alloc_oom":
        util = c.in_force("gpu_memory_utilization")
        G, tried = facts.get("gpu_total_gib"), facts.get("tried_to_allocate_gib")
        target = math.floor((util.low - tried / G) * 100) / 100 if util.low and G and tried else None
        why = (
            f"the KV cache tensor of {tried:.2f} GiB that failed comes out of the budget: {util.low:g} - "
            f"{tried:.2f}/{G:.2f}, from {util.why}"
            if target is not None
            else "the failed allocation, the GPU total or the utilization in force is not in the log"
        )
        rem = [
            _co_tenant_remedy(facts),
            c.lower(
                "gpu_memory_utilization", target, "Lower gpu_memory_utilization so the KV cache fits the device", why
            ),
        ]
        dont = [
            "Raising gpu_memory_utilization: the KV cache would ask for even more",
            "Lowering max_model_len: the KV cache takes the whole budget whatever the length",
        ]
        return (
            f"Out of {device} allocating the KV cache: the budget asks for more than the device gives",
            rem,
            dont,
            forbids,
        )
    rem = [
        _co_tenant_remedy(facts),
        c.halve(
            "max_num_batched_tokens",
            "Shrink the profiling batch: fewer tokens per step",
            "the profiling run's activations for one full step must fit beside the weights",
        ),
        c.halve(
            "max_num_seqs",
            "Profile fewer sequences at once",
            "the profiling and sampler runs use max_num_seqs dummy sequences (a hybrid model's state per sequence "
            "is allocated up front)",
            floor=8,
        ),
        None if run.engine == "v1" else _profiled_length(c),
        _tp_remedy(c, run.value("weights_gib"), "halves the weights held by each GPU, leaving room for activations"),
        remedy("Or serve a quantized or smaller model"),
    ]
    dont = ["Raising gpu_memory_utilization: the allocation failed on the device's memory, not on vLLM's budget"]
    if run.engine == "v1":
        dont.append("Lowering max_model_len alone: V1's profiling batch is max_num_batched_tokens tokens")
    return (
        f"Out of {device} in the profiling run: the activation peak does not fit beside the weights",
        rem,
        dont,
        forbids,
    )


def _budget_failure_from_facts(run: Run) -> bool:
    """A KV budget of zero or less printed as a fact ("Available KV cache memory: -2.14 GiB",
    "# GPU blocks: 0") is the failure itself, whether or not the error after it was logged;
    so is a V0 cache too small for one max-length sequence (:func:`v0_blocks_short`)."""
    A, blocks = run.facts.get("kv_available_gib"), run.facts.get("gpu_blocks")
    return (A is not None and A <= 0) or blocks == 0 or v0_blocks_short(run)


def v0_blocks_short(run: Run) -> bool:
    """V0 printed ``# GPU blocks: N`` and N x block_size (printed, else the CUDA default
    :data:`DEFAULT_BLOCK_SIZE`) tokens are fewer than max_model_len: V0 then raises "The
    model's max seq len (L) is larger than the maximum number of tokens that can be stored in
    KV cache (N x block_size)" right after (vllm/worker/worker.py raise_if_cache_size_invalid,
    0.2.x to 0.10), so the numbers are the failure even when the paste cut it (m10: 229 x 16 =
    3664 < 4096). V0 only (the engine known, or the line's ``# CPU blocks``: V1 has no CPU swap
    blocks): V1's check is on memory, judged from its own error."""
    blocks, L = run.facts.get("gpu_blocks"), run.value("max_model_len")
    v0 = run.engine == "v0" or run.facts.get("cpu_blocks") is not None
    if not v0 or not blocks or not L or blocks < 0:
        return False
    return blocks * (run.value("block_size") or DEFAULT_BLOCK_SIZE) < L


#: Process names of vllm-omni's stages (vllm_omni/engine/stage_engine_core_proc.py,
#: diffusion workers): several engines of one server that start together.
OMNI_STAGE_PROCESSES = ("StageEngineCoreProc", "DiffusionWorker")


def _omni_stages(run: Run) -> bool:
    return any(name.startswith(OMNI_STAGE_PROCESSES) for name in run.process_names)


def _other_instance(run: Run) -> Optional[Neighbour]:
    """The earlier vLLM instance of the paste that was up when this run started and had got
    past loading its weights (so it held memory), the furthest along first."""
    up = [n for n in run.neighbours if n.phase >= Phase.WEIGHTS_LOADED]
    return max(up, key=lambda n: (n.phase, n.index)) if up else None


def together(c: Constraints, other: Neighbour) -> Tuple[Optional[float], str]:
    """The gpu_memory_utilization that sizes this instance together with ``other`` (an earlier
    instance on the same device that left it no KV memory), and how it was worked out.

    Where all memory in use on the device counts against this instance's ``utilization x
    total`` budget (vLLM V0's and vllm-ascend's profiling), the other instance holds its own
    budget: this instance's utilization in force plus the other's (both printed, or set by a
    launch command, even one pasted in prose). Without the other's utilization, its KV cache
    as a share of the device (rounded up to a hundredth) is a floor of what it holds: its
    weights and activations come on top, and the reason says so. None (and what is missing)
    when this instance's utilization or the other's KV memory and the device's size are not
    in the log. The plan (:meth:`Constraints.raise_to`) keeps the value above the value in
    force and within what the device can give."""
    now = c.in_force("gpu_memory_utilization")
    U, U_other = now.value, other.gpu_memory_utilization
    T = other.gpu_total_gib or c.gpu_total_gib
    assumed = "assumed: the other instance keeps its share, and this one needs as much for itself as before"
    if U is not None and U_other is not None:
        return (
            round(U + U_other, 2),
            f"this instance's {now.why} plus the other's {U_other:g}, which it fills; {assumed}",
        )
    if U is not None and other.kv_available_gib and T:
        floor = math.ceil(other.kv_available_gib / T * 100 - 1e-9) / 100
        return (
            round(U + floor, 2),
            f"at least this instance's {now.why} plus {floor:.2f} for the other's {other.kv_available_gib:.2f} GiB "
            f"KV cache of the {T:.2f} GiB device; the other's utilization is not in the log, and its weights and "
            f"activations come on top of that floor; {assumed}",
        )
    missing = "this instance's utilization" if U is None else "the other's utilization or KV memory"
    return None, f"its own share plus the other instance's ({missing} is not in the log)"


def _co_tenant_instance(run: Run, c: Constraints, cap: Dict[str, Any], other: Neighbour, facts: Dict[str, Any]):
    """Title, remedies, what does not help and forbidden directions when a second instance
    finds no KV memory beside an earlier one that is up."""
    who = f"run {other.index}" + (f", {other.process}" if other.process else "")
    held = []
    if other.kv_tokens:
        held.append(f"a KV cache of {other.kv_tokens} tokens")
    if other.kv_available_gib:
        held.append(f"{other.kv_available_gib:.2f} GiB of KV memory")
    facts.update(
        co_tenant_instance_run=other.index,
        co_tenant_instance=other.process,
        co_tenant_instance_kv_tokens=other.kv_tokens,
        co_tenant_instance_kv_available_gib=other.kv_available_gib,
        co_tenant_instance_gpu_memory_utilization=other.gpu_memory_utilization,
    )
    target, share = together(c, other)
    rem = [
        c.raise_to(
            "gpu_memory_utilization",
            target,
            "Size the two instances together: this instance's gpu_memory_utilization must cover the other's share too",
            f"the other instance ({who}) holds {' and '.join(held) if held else 'memory'}; what is in use on the "
            f"device counts against this instance's utilization x total budget: {share}",
        ),
        remedy(
            "Or size this instance's KV cache directly with --kv-cache-memory-bytes, so the utilization budget no "
            "longer decides it",
            None,
            "vLLM 0.10.2 and later: the KV cache gets that many bytes whatever the device's other use; "
            "pick what fits beside the other instance",
        ),
        remedy(
            "Or give each instance its own device (CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES)",
            None,
            "two servers sharing one device each size their memory as if alone",
            "host",
        ),
    ]
    dont = [
        "Lowering this instance's gpu_memory_utilization: its budget shrinks while the other instance's memory stays",
        "Lowering max_model_len: no KV memory at all is left, whatever the length",
    ]
    forbids = [("gpu_memory_utilization", "lower", "the other instance's memory stays; the budget only shrinks")]
    title = f"No KV cache memory left: another vLLM instance in this log ({who}) holds the device"
    return title, rem, dont, forbids


def _co_tenant_stages(run: Run, facts: Dict[str, Any]):
    """Title, remedies, what does not help and forbidden directions when one stage of a
    vllm-omni server finds no KV memory (its stages start together on shared devices)."""
    names = sorted(n for n in run.process_names if n.startswith(OMNI_STAGE_PROCESSES))
    facts["stage_processes"] = names
    rem = [
        remedy(
            "Start the stages one after another, or give each stage its own GPU (the stage config's devices)",
            None,
            "a stage profiling its memory while another stage loads onto the same GPU counts that stage's "
            "allocations as its own",
            "host",
        ),
        remedy(
            "Or give each stage an explicit budget: per-stage gpu_memory_utilization summing below 1 on a shared GPU, "
            "or kv_cache_memory_bytes for the LLM stage (vllm-omni then skips the profiling estimate)",
            None,
            "each stage then sizes its memory from its own share; the stages' shares are not in the log",
        ),
    ]
    dont = [
        "Raising this stage's gpu_memory_utilization by an amount worked out from 0 GiB: vllm-omni clamps the budget "
        "at 0, the real deficit is not in the log, and a larger share collides harder with the other stage",
        "Lowering max_model_len: no KV memory at all is left, whatever the length",
    ]
    forbids = [("gpu_memory_utilization", "lower", "the other stage's memory stays; the budget only shrinks")]
    title = (
        "No KV cache memory for this vllm-omni stage: the stages start together, and another stage on its GPU "
        "is the likely holder"
    )
    return title, rem, dont, forbids


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    """The KV capacity finding of ``run`` for the failures routed here (none when a budget of
    zero or less is printed as a fact). A co-tenant of the same kind (another instance, another
    vllm-omni stage) is left to ``startup_memory_contention`` (:func:`co_tenant_findings`)."""
    return _check(run, failures, co_tenant=None)


def co_tenant_findings(run: Run, rule: Rule) -> List[Finding]:
    """The ``startup_memory_contention`` finding of a run whose KV budget is zero or less
    beside a co-tenant of the same kind: an earlier vLLM instance of the paste that is up
    (``Run.neighbours``) or other stages of a vllm-omni server; [] otherwise. Called by the
    contention rule (``rule``, whose finding it is) when no failure was routed to it."""
    failures = [f for f in run.failures if f.kind == "kv_error" or (f.kind == "traceback" and "kv_check" in f.tags)]
    return _check(run, failures, co_tenant=rule)


#: The OOM facts a KV finding keeps (with the caveats :func:`vllm_doctor.rules.rule.finding` notes).
_OOM_KEPT = (
    "tried_to_allocate_gib",
    "gpu_free_gib",
    "co_tenant_pids",
    "inconsistent_numbers",
    "processes_cut",
    "process_memory_unseen",
)


def _check(run: Run, failures: Sequence[Failure], co_tenant: Optional[Rule]) -> List[Finding]:
    from_facts = _budget_failure_from_facts(run)
    if not failures and not from_facts:
        return []
    data = merged_data(failures)
    if any(f.kinds & {"oom", "sampler_oom"} for f in failures):
        # The device ran out: allocating the KV cache tensors (frames.KV_ALLOC_FUNCS), or in
        # the profiling run (weights plus the activation peak do not fit).
        data.update({k: v for k, v in oom_facts(failures, run).items() if k not in data})
        data["variant"] = "kv_alloc_oom" if any("kv_alloc" in f.all_tags for f in failures) else "profile_oom"
    if any(f.patterns & set(NO_BUDGET_PATTERNS) for f in failures):
        data["variant"] = "no_blocks"
    plan = constraints(run)
    c = capacity(run, data, plan)
    facts = {k: v for k, v in c.items() if v is not None}
    facts.update({k: v for k, v in data.items() if k in _OOM_KEPT})
    L, fit = c.get("max_model_len"), c.get("fitting_max_model_len")
    budget = (
        run.line_for("kv_available_gib") if run.facts.get("kv_available_gib", 1) <= 0 else run.line_for("gpu_blocks")
    )
    short = from_facts and not failures and v0_blocks_short(run)
    bs = run.value("block_size")
    note = (
        f"{run.facts['gpu_blocks']} blocks x {bs or DEFAULT_BLOCK_SIZE} tokens"
        + ("" if bs else " (V0's default block size on CUDA)")
        + f" < max_model_len {L}: V0 raises its KV cache error right after"
        if short
        else "the error"
    )
    evidence = (
        ([ev(budget, note)] if short or (from_facts and not v0_blocks_short(run)) else [])
        + failure_evidence(
            failures,
            "a traceback cut inside vLLM's KV capacity check, whose only raise is this error"
            if failures and all(f.kind == "traceback" for f in failures)
            else "the error",
        )
        + config_evidence(run, ("max_model_len", "gpu_memory_utilization", "kv_cache_dtype"))
        + [
            ev(run.line_for(k), k)
            for k in ("kv_available_gib", "kv_tokens", "gpu_blocks", "weights_gib", "gpu_total_gib")
        ]
        + consequence_evidence(run, 1)
    )
    other = _other_instance(run) if c.get("kv_budget_exhausted") else None
    shared = data.get("variant") not in PHYSICAL_OOM and bool(
        other is not None or (c.get("kv_budget_exhausted") and _omni_stages(run))
    )
    if shared != (co_tenant is not None):
        return []
    if data.get("variant") in PHYSICAL_OOM:
        facts["variant"] = data["variant"]
        title, rem, dont, forbids = _physical_oom(run, plan, facts, data["variant"])
    elif shared:
        # A co-tenant of the same kind took the memory: startup_memory_contention's finding.
        for k in ("gpu_memory_utilization_needed", "utilization_possible"):
            facts.pop(k, None)
        if other is not None:
            title, rem, dont, forbids = _co_tenant_instance(run, plan, c, other, facts)
            evidence.append(ev(other.line, f"the other instance (run {other.index}) got this far"))
        else:
            title, rem, dont, forbids = _co_tenant_stages(run, facts)
        return [
            finding(co_tenant, run, "startup", title, facts, evidence, rem, dont, confidence="medium", forbids=forbids)
        ]
    elif c.get("kv_budget_exhausted") and _free_gate(run) is not None:
        title, rem, dont, forbids = _squeezed(run, plan, c, _free_gate(run))
    elif c.get("kv_budget_exhausted"):
        title = "KV cache budget exhausted: weights and activations already fill gpu_memory_utilization"
        rem = contention.ask_first(run, _exhausted_remedies(run, plan, c))  # remedies2: q06
        dont = [
            "Lowering max_model_len: the budget is negative or zero, no length fits",
            "Lowering gpu_memory_utilization: it shrinks the budget further",
        ]
        forbids = [("gpu_memory_utilization", "lower", "it shrinks the KV cache budget further")]
    else:
        title = f"KV cache too small for max_model_len {L}" if L else "KV cache too small for one max-length request"
        if fit is not None and L:
            title += f": about {fit} tokens fit"
        rem = _too_small_remedies(plan, c, L)
        dont = [
            "Lowering gpu_memory_utilization: it shrinks the KV cache further",
            "Changing max_num_seqs: one max-length request alone does not fit",
        ]
        forbids = [("gpu_memory_utilization", "lower", "it shrinks the KV cache further")]
    confidence = "medium" if short and not bs else "high"  # (the block size assumed, not printed)
    return [finding(RULE, run, "startup", title, facts, evidence, rem, dont, confidence=confidence, forbids=forbids)]


RULE = Rule(
    code="VD101",
    name="kv_cache_capacity",
    severity="critical",
    summary="Startup failed: the KV cache cannot hold one request of max_model_len tokens.",
    doc=__doc__,
    check=check,
)
