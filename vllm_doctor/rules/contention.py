"""Contention shown by memory already in use: the signs, before any process list, that another
process holds the GPU a starting instance sized its budget on.

Three signs, each a fact of vLLM's own accounting:

* **Memory in use when profiling started** (V0 0.6.4's ``Memory profiling results:
  total_gpu_memory=T initial_memory_usage=I``, vllm/worker/worker.py
  determine_num_available_blocks: ``I = total - free`` before the profiling run). vLLM's budget
  is ``gpu_memory_utilization x total`` *of the whole card*, and every byte on the device counts
  against it (non-torch memory includes other processes'), so a budget is short by what other
  processes hold. When I exceeds ``(1 - U) x T`` the card holds more than this instance's budget
  leaves for anyone else (:func:`held_at_startup`); what of it is this process's own weights is
  subtracted where the log prints or names them.
* **An OOM inside the KV cache's own allocation** (V0 ``CacheEngine._allocate_kv_cache``, V1
  ``_allocate_kv_cache_tensors`` / ``initialize_kv_cache_tensors``: frames.KV_ALLOC_FUNCS). The
  profiling run sized the cache to what was free just before; the allocation failing right
  after means memory was taken in between: another process, an earlier ``LLM()`` still alive
  in the same notebook kernel (:func:`kv_alloc_after_profiling`).
* **No cache blocks at all with nothing in the log showing this process's weights**: V1 counts
  what other processes take while it profiles as its own peak (0.7.x gpu_worker
  determine_available_memory), so two instances starting side by side leave each other no
  blocks; asking "is another process on this GPU?" costs one ``nvidia-smi`` and comes before
  "serve a smaller model" (:func:`ask_first`).

Sources: vllm/worker/worker.py (0.6.4.post1:186-233), vllm/worker/cache_engine.py
``_allocate_kv_cache``, vllm/v1/worker/gpu_worker.py determine_available_memory (0.7.3:174-180);
fixtures/logs q05, u02, q06.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from .. import thresholds
from ..defaults import gpu_memory_utilization
from ..memory import model_weights_estimate
from ..run import Failure, Run
from ..tracker import MEMORY_KINDS
from .rule import remedy


def own_weights(run: Run) -> Optional[float]:
    """GiB of weights this process holds per GPU: printed (the weights line, else V0 0.6.4's
    ``peak_torch_memory``, which is at least the weights), else estimated from the model's name."""
    w = run.value("weights_gib") or run.value("peak_torch_gib")
    if w:
        return float(w)
    est = model_weights_estimate(run.value("model"), run.value("quantization"), run.value("dtype"))
    if est is None:
        return None
    return est["weights_gib_estimate"] / max(1, int(run.value("tensor_parallel_size") or 1))


#: The KV errors that say no cache block fits at all (catalog/kv_cache.py pattern names).
NO_BLOCKS = frozenset({"kv_no_cache_blocks"})


def held_at_startup(run: Run, failures: Sequence[Failure]) -> Optional[Tuple[float, str]]:
    """``(GiB held by others, why)`` when the memory in use as profiling started shows another
    process on the GPU (see the module docstring), else None. Others hold what is in use less
    this process's weights (where known) and :data:`~vllm_doctor.thresholds.CUDA_CONTEXT_MAX_GIB`
    for its CUDA context; it counts when above ``(1 - U) x T`` (U printed, else the release's
    default: V0 0.6.x's share is of the whole card). Only for "No available memory for the cache
    blocks" (:data:`NO_BLOCKS`) among ``failures``: a KV cache that holds some tokens was sized
    beside whatever else was there."""
    if not any(f.patterns & NO_BLOCKS for f in failures):
        return None
    used, total = run.facts.get("initial_usage_gib"), run.value("gpu_total_gib")
    if not used or not total:
        return None
    U = run.value("gpu_memory_utilization")
    said = "as printed"
    if not isinstance(U, (int, float)):
        U, said = gpu_memory_utilization(run.value("vllm_version"), run.engine).low, "vLLM's default"
    own = own_weights(run)
    others = used - (own or 0.0) - thresholds.CUDA_CONTEXT_MAX_GIB
    room = (1 - U) * total
    if others <= room:
        return None
    whose = f", less about {own:.2f} GiB of this instance's weights" if own else " (this instance's weights included)"
    why = (
        f"{used:.2f} of {total:.2f} GiB was in use when profiling started{whose}: more than the "
        f"{room:.2f} GiB its budget leaves for anyone else, (1 - {U:g} [{said}]) x {total:.2f} GiB"
    )
    return max(others, 0.0), why


def kv_alloc_after_profiling(f: Failure) -> bool:
    """An out-of-memory failure raised inside the KV cache's allocation (``kv_alloc`` frames), which
    lists no process: the profiling had sized the cache to what was free."""
    return bool(f.kinds & MEMORY_KINDS) and "kv_alloc" in f.all_tags and "processes" not in f.data


def ask_first(run: Run, remedies: List[Any]) -> List[Any]:
    """``remedies`` of a "no cache blocks" verdict with "is another process on this GPU?" first,
    when nothing in the log shows what this process's weights hold (no weights line, no model
    size), or only the model's name gives a size and the GPU's total is not printed either (the
    budget then is unknown too: q06, a 1.1B model at 0.2 beside a second instance): one
    ``nvidia-smi`` before a bigger budget or a smaller model."""
    printed = run.value("weights_gib") or run.value("peak_torch_gib")
    if printed or (own_weights(run) is not None and run.value("gpu_total_gib")):
        return remedies
    ask = remedy(
        "First check whether another process holds this GPU (nvidia-smi): a second instance or a notebook "
        "starting beside this one takes the memory this one counted on",
        None,
        "the log prints no weights line for this instance; vLLM counts memory other processes take "
        "while it profiles against this instance's budget",
        "host",
    )
    return [ask, *remedies]
