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

What does not help:
    Lowering ``max_model_len`` when the KV budget is negative or zero (nothing fits at any
    length); lowering ``gpu_memory_utilization`` (shrinks the cache further);
    ``max_num_seqs`` (concurrency does not change what one request needs).

Sources:
    vllm/worker/worker.py raise_if_cache_size_invalid (V0);
    vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory (V1);
    vllm/v1/worker/gpu_worker.py determine_available_memory; docs.vllm.ai
    configuration/conserving_memory; shared/domain.md "KV cache too small".
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Sequence

from ..memory import floor_tidy
from ..tracker import Failure, Run
from ..units import tidy
from .base import (
    R,
    config_evidence,
    consequence_evidence,
    ev,
    failure_evidence,
    make_finding,
    merged_data,
    oom_facts,
    remedies,
)

CLASS = "kv_cache_capacity"
CODE = "VD101"
SEVERITY = "critical"
SUMMARY = "Startup failed: the KV cache cannot hold one request of max_model_len tokens."

DEFAULT_BLOCK_SIZE = 16  # CacheConfig block_size on CUDA (shared/vllm-messages.md section 14)
MAX_SAFE_UTILIZATION = 0.95


def capacity(run: Run, data: Dict[str, Any]) -> Dict[str, Any]:
    """Work out what fits, from whatever the log printed. All values traceable to ``facts``.

    Returns facts: ``max_model_len``, ``kv_tokens`` (tokens the cache holds), ``kv_needed_gib``
    and ``kv_available_gib``, ``kv_gib_per_token``, ``fitting_max_model_len`` (tidy value
    <= vLLM's estimate or the token capacity), ``gpu_memory_utilization_needed`` (None when
    the GPU total is not in the log; ``utilization_possible`` False above 1.0), and what fp8
    KV cache and TP 2 would give.
    """
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
    G = run.value("gpu_total_gib")
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
    per_token = None
    if N and L:
        per_token = N / L
    elif A and T and A > 0:
        per_token = A / T
    if per_token:
        f["kv_gib_per_token"] = tidy(per_token, 9)
    budget_negative = (A is not None and A <= 0) or blocks == 0 or data.get("variant") in ("no_blocks", "profile_oom")
    f["kv_budget_exhausted"] = bool(budget_negative)
    if budget_negative:
        if G and U is not None and A is not None and A <= 0:
            need = U + (-A + 1.0) / G  # cover the deficit plus about 1 GiB of KV cache
            f["gpu_memory_utilization_needed"] = tidy(math.ceil(need * 100) / 100, 2)
            f["utilization_possible"] = need <= MAX_SAFE_UTILIZATION
        return f
    fits = None
    if E:
        fits = E
    elif T:
        fits = T
    elif per_token and A:
        fits = A / per_token
    if fits:
        f["fitting_max_model_len"] = floor_tidy(fits)
    # The utilization that would fit the current max_model_len on this GPU.
    if L and per_token:
        needed = N if N else L * per_token
        have = A if A is not None else (T * per_token if T else None)
        if have is not None and G and U is not None:
            extra = max(0.0, needed - have)
            u_needed = U + extra / G
            f["kv_extra_needed_gib"] = tidy(extra, 4)
            f["gpu_memory_utilization_needed"] = tidy(math.ceil(u_needed * 100 - 1e-9) / 100, 2)
            f["utilization_possible"] = u_needed <= MAX_SAFE_UTILIZATION
        elif have is not None:
            f["kv_extra_needed_gib"] = tidy(max(0.0, needed - have), 4)
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


def build(failures: Sequence[Failure], run: Run, phase: str) -> Any:
    import sys

    mod = sys.modules[__name__]
    data = merged_data(failures)
    if any(f.kinds & {"oom", "sampler_oom"} for f in failures):
        # An OOM in the profiling run: weights plus activation peak do not fit the GPU.
        data.update({k: v for k, v in oom_facts(failures, run).items() if k not in data})
        data["variant"] = "profile_oom"
    for f in failures:
        if f.records and "No available memory for the cache blocks" in f.records[0].text:
            data["variant"] = "no_blocks"
    c = capacity(run, data)
    facts = {k: v for k, v in c.items() if v is not None}
    facts.update({k: v for k, v in data.items() if k in ("tried_to_allocate_gib", "gpu_free_gib", "co_tenant_pids")})
    L, fit = c.get("max_model_len"), c.get("fitting_max_model_len")
    ev_fail = failure_evidence(failures, "the error")
    evidence = (
        ev_fail
        + config_evidence(run, ("max_model_len", "gpu_memory_utilization", "kv_cache_dtype"))
        + [
            ev(run.record_for(k), k)
            for k in ("kv_available_gib", "kv_tokens", "gpu_blocks", "weights_gib", "gpu_total_gib")
        ]
        + consequence_evidence(run, 1)
    )
    dont: List[str] = []
    if c.get("kv_budget_exhausted"):
        title = "KV cache budget exhausted: weights and activations already fill gpu_memory_utilization"
        u_need = c.get("gpu_memory_utilization_needed")
        rem = remedies(
            R(
                "Raise gpu_memory_utilization so weights, activations and some KV cache fit in the budget",
                f"--gpu-memory-utilization {u_need:.2f}" if u_need and c.get("utilization_possible") else None,
                (
                    f"available KV memory {c['kv_available_gib']:.2f} GiB on a {c['gpu_total_gib']:.2f} GiB GPU at "
                    f"{c['gpu_memory_utilization']}: {u_need:.2f} covers the deficit plus ~1 GiB of KV cache"
                )
                if u_need
                else "the budget left for the KV cache is zero or negative",
            ),
            R(
                "If the GPU cannot give more: spread the model over more GPUs",
                f"--tensor-parallel-size {2 * (run.value('tensor_parallel_size') or 1)}",
                "halves the weights held by each GPU, freeing room for the KV cache",
            ),
            R("Or serve a quantized or smaller model (fewer bytes of weights leave room for KV cache)"),
            R(
                "Shrink the profiling activation peak: lower --max-num-batched-tokens (and --max-num-seqs)",
                None,
                "the profiling run's activation peak is subtracted from the budget",
            ),
        )
        dont.append("Lowering max_model_len: the budget is negative or zero, no length fits")
        dont.append("Lowering gpu_memory_utilization: it shrinks the budget further")
    else:
        title = f"KV cache too small for max_model_len {L}" if L else "KV cache too small for one max-length request"
        if fit is not None and L:
            title += f": about {fit} tokens fit"
        u_need = c.get("gpu_memory_utilization_needed")
        if c.get("estimated_max_model_len"):
            basis = f"vLLM's own estimate is {c['estimated_max_model_len']} tokens"
        elif c.get("kv_tokens"):
            basis = f"the KV cache capacity is {c['kv_tokens']} tokens"
        elif c.get("kv_available_gib") is not None and c.get("kv_needed_gib"):
            basis = (
                f"{c['kv_available_gib']} GiB available / {c['kv_needed_gib']} GiB needed x {L} tokens = "
                f"{int(L * c['kv_available_gib'] / c['kv_needed_gib'])} tokens"
            )
        else:
            basis = "the KV cache capacity"
        rem = remedies(
            R(
                "Lower max_model_len to what the workload needs and the KV cache holds",
                f"--max-model-len {fit}" if fit else None,
                f"{basis}; {fit} is that rounded down" if fit else "the log does not print the KV capacity",
            ),
            R(
                "Or raise gpu_memory_utilization so the current max_model_len fits",
                f"--gpu-memory-utilization {u_need:.2f}" if u_need and c.get("utilization_possible") else None,
                (
                    f"needs {c.get('kv_extra_needed_gib', 0):.2f} GiB more KV cache on a {c.get('gpu_total_gib')} GiB GPU: "
                    f"{c.get('gpu_memory_utilization')} -> {u_need:.2f}"
                    + ("" if c.get("utilization_possible") else " (not possible: above what the GPU can safely give)")
                )
                if u_need
                else (
                    f"about {c['kv_extra_needed_gib']:.2f} GiB more KV cache is needed; the GPU total is not in the log"
                    if c.get("kv_extra_needed_gib") is not None
                    else None
                ),
            ),
            None
            if c.get("kv_cache_dtype_already_fp8")
            else R(
                "Or halve KV cache per token with an fp8 KV cache (a precision trade-off to evaluate)",
                "--kv-cache-dtype fp8",
                (
                    f"about {c['fp8_kv_tokens']} tokens instead of {c.get('kv_tokens') or int(c['fp8_kv_tokens'] / 2)}"
                    + (" - enough for the current max_model_len" if c.get("fp8_fits_max_model_len") else "")
                )
                if c.get("fp8_kv_tokens")
                else None,
            ),
            R(
                "Or spread the KV cache over two GPUs",
                "--tensor-parallel-size 2",
                f"about {c['tp2_kv_tokens_estimate']} tokens of KV cache per engine, an estimate"
                if c.get("tp2_kv_tokens_estimate")
                else None,
            ),
        )
        dont.append("Lowering gpu_memory_utilization: it shrinks the KV cache further")
        dont.append("Changing max_num_seqs: one max-length request alone does not fit")
    return make_finding(mod, run, phase, title, facts, evidence, rem, dont)
