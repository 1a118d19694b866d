"""What an out-of-memory message says, for every rule that explains one.

PyTorch's caching-allocator message (``c10/cuda/CUDACachingAllocator.cpp``) gives the failed
allocation, the GPU's total and free memory, the processes holding it (via NVML), and what
PyTorch itself allocated and reserved; the catalog (:mod:`vllm_doctor.catalog.oom`) reads
those into a failure's data. Who of the listed processes is vLLM and who is a co-tenant is
decided here, with what the whole run says about vLLM's own PIDs
(:func:`vllm_doctor.memory.split_processes`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import thresholds
from ..limits import MAX_NAMED_PROCESSES, largest_pids  # noqa: F401 - named here too
from ..memory import foreign_gib, gib_text, split_processes
from ..run import Failure, Run
from ..units import tidy

OOM_FACT_KEYS = (
    "tried_to_allocate_gib",
    "gpu_total_gib",
    "gpu_free_gib",
    "gpu_index",
    "pytorch_allocated_gib",
    "reserved_unallocated_gib",
    "private_pools_gib",
)


def _split(f: Failure, run: Run):
    """``(own, co_tenants)`` of ``f``'s process list (:func:`vllm_doctor.memory.split_processes`),
    the co-tenants largest first. A list cut before its end (``processes_cut``) may have lost
    its "this process" clause: no listed process is then guessed to be vLLM's own (breakit3
    item 7: 10 000 listed, the clause past the record's cap)."""
    d = f.data
    reserved = None
    if "pytorch_allocated_gib" in d:
        reserved = d["pytorch_allocated_gib"] + d.get("reserved_unallocated_gib", 0.0)
    procs = d["processes"]
    if list_cut(d):
        known = set(run.vllm_pids)
        own, others = None, [(pid, g) for pid, g in procs if pid not in known]
    else:
        own, others = split_processes(procs, run.vllm_pids, reserved)
    return own, sorted(others, key=lambda p: -p[1])


def list_cut(d: Dict[str, Any]) -> bool:
    """True when an OOM message (its data ``d``) is cut inside its process list: cut before
    "Of the allocated memory" (``processes_cut``) with no "this process" clause read, which
    PyTorch prints after every ``Process N`` (a message cut after it lists them all)."""
    return bool(d.get("processes_cut")) and all(pid is not None for pid, _ in d.get("processes", ()))


def own_unseen(d: Dict[str, Any], own_gib: float) -> bool:
    """True when the "this process has M memory in use" clause shows less than PyTorch itself
    allocated in that process (``0 bytes`` beside "8.51 GiB is allocated by PyTorch"): NVML did
    not see the process's memory (vLLM's CuMemAllocator maps it outside the caching
    allocator's view, or a PID namespace hides it), so M is not what the process holds."""
    alloc = d.get("pytorch_allocated_gib")
    return alloc is not None and own_gib + thresholds.UNSEEN_MARGIN_GIB < alloc


#: What the memory that ran out is called on each backend (the OOM message's ``backend``).
DEVICE_NAMES = {
    "TPU": "TPU memory (HBM)",
    "XLA": "device memory",
    "XPU": "XPU memory",
    "NPU": "NPU memory",
    "HPU": "HPU memory",
    "MLU": "MLU memory",
    "MUSA": "GPU memory",
    "NEURON": "NeuronCore memory",
}


#: The tool that lists the processes on each backend's devices (the OOM message's ``backend``).
MONITORS = {
    "HIP": "amd-smi",
    "NPU": "npu-smi info",
    "XPU": "xpu-smi",
    "HPU": "hl-smi",
    "MLU": "cnmon",
    "NEURON": "neuron-top",
}


def monitor(facts: Dict[str, Any]) -> str:
    """``nvidia-smi``, or the tool that shows who holds the memory of the OOM's accelerator."""
    return MONITORS.get(facts.get("oom_backend"), "nvidia-smi")


def device_memory(facts: Dict[str, Any]) -> str:
    """``GPU memory`` (CUDA, ROCm/HIP), or what the accelerator's memory is called."""
    return DEVICE_NAMES.get(facts.get("oom_backend"), "GPU memory")


def co_tenants_of(f: Failure, run: Run) -> List[Tuple[int, float]]:
    """``[(pid, GiB)]`` of other processes the OOM message of ``f`` lists on its GPU."""
    if "processes" not in f.data:
        return []
    return _split(f, run)[1]


def unlisted_gib(f: Failure, run: Run) -> Optional[float]:
    """GiB of the device that were neither free nor the failing process's when ``f``'s OOM
    message lists no other process: total - free - this process's memory (``this process has
    M memory in use``), or, in the old torch format that lists none, total - free - reserved
    by PyTorch (in the torch format without a process list: total - free - allocated and
    reserved by PyTorch; with no free printed, IPEX's XPU form: total - reserved - the request, a floor:
    the request did not fit). None when the message lists another process (:func:`co_tenants_of` says who)
    or lacks the numbers."""
    d = f.data
    total, free = d.get("gpu_total_gib"), d.get("gpu_free_gib")
    if total and free is None and d.get("form") == "torch-old" and d.get("pytorch_reserved_gib") is not None:
        # IPEX's XPU message prints no free memory (p13: "0 bytes already allocated; 0 bytes reserved"):
        # the request did not fit, so less than it was free: others hold at least the rest
        tried = d.get("tried_to_allocate_gib")
        return None if tried is None else max(total - d["pytorch_reserved_gib"] - tried, 0.0)
    if not total or free is None:
        return None
    if "processes" in d and (d["processes"] or d.get("processes_listed", True)):
        own, others = _split(f, run)
        if others or own is None or list_cut(d):
            return None
        # NVML may see none of this process's memory across a PID namespace ("this process
        # has 0 bytes memory in use", x018): what PyTorch reserved is a floor
        held = max(own[1], d.get("pytorch_allocated_gib", 0.0) + d.get("reserved_unallocated_gib", 0.0))
    elif d.get("form") == "torch-old" and d.get("pytorch_reserved_gib") is not None:
        held = d["pytorch_reserved_gib"]
    elif d.get("form") == "torch" and d.get("pytorch_allocated_gib") is not None:
        # rules7 (z15): the message of PyTorch 2.0-2.1 and of ROCm/DTK builds without the
        # process list ("Of the allocated memory 971.02 MiB is allocated by PyTorch, and 984.00
        # KiB is reserved by PyTorch but unallocated"): what PyTorch holds is this process's
        # share; the rest of what is not free is held elsewhere (or by this process outside
        # PyTorch: the share threshold allows for that)
        held = d["pytorch_allocated_gib"] + d.get("reserved_unallocated_gib", 0.0)
    else:
        return None
    return max(total - free - held, 0.0)


def held_unlisted(f: Failure, run: Run) -> Optional[float]:
    """:func:`unlisted_gib` when it reaches :data:`~vllm_doctor.thresholds.UNLISTED_FOREIGN_SHARE`
    of the device (then other processes hold it, unnamed), else None."""
    held = unlisted_gib(f, run)
    total = f.data.get("gpu_total_gib")
    if held is None or not total or held < thresholds.UNLISTED_FOREIGN_SHARE * total:
        return None
    return held


def named_pids(facts: Dict[str, Any]) -> str:
    """``1001, 1002`` (every co-tenant PID when they fit :data:`MAX_NAMED_PROCESSES`), else
    the largest holders and ``+N more`` (``4242, 77, 1001, 1002, 1003 +9995 more``)."""
    shown, more = largest_pids(facts)
    return ", ".join(map(str, shown)) + (f" +{more} more" if more else "")


def oom_facts(failures: Sequence[Failure], run: Run) -> Dict[str, Any]:
    """Numbers of the first OOM message with numbers, and who holds the GPU.

    Returns facts in the corpus vocabulary (GiB): the keys of :data:`OOM_FACT_KEYS` that were
    printed, ``oom_form``; ``co_tenant_pids`` (PIDs of other processes on that GPU; ``[]``
    when the message lists only vLLM's own process; absent when it lists none at all),
    ``co_tenant_gib`` and ``co_tenant_total_gib``, ``vllm_process_gib`` / ``vllm_pid``;
    ``held_unlisted_gib`` (memory other processes hold that the message does not list,
    :func:`held_unlisted`);
    ``ranks`` that printed it and ``times_printed``.
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
    if d.get("backend"):
        facts["oom_backend"] = d["backend"]
    if "processes" in d:
        own, others = _split(source, run)
        facts["co_tenant_pids"] = [pid for pid, _ in others]
        if others:
            facts["co_tenant_gib"] = {str(pid): tidy(g) for pid, g in others}
            facts["co_tenant_total_gib"] = tidy(foreign_gib(others))
        if own is not None and own[0] is None and own_unseen(d, own[1]):
            facts["process_memory_unseen"] = True  # "this process has 0 bytes": not a fact to show
        elif own is not None:
            facts["vllm_process_gib"] = tidy(own[1])
            if own[0] is not None:
                facts["vllm_pid"] = own[0]
        if list_cut(d):
            facts["processes_cut"] = True
    if d.get("inconsistent"):
        bad = d["inconsistent"]
        facts["inconsistent_numbers"] = (
            f"{gib_text(bad['gpu_free_gib'])} free of a {gib_text(bad['gpu_total_gib'])} total: the free figure is "
            "dropped"
        )
    unlisted = held_unlisted(source, run)
    if unlisted is not None:
        facts["held_unlisted_gib"] = tidy(unlisted)
    ranks = sorted({line.rank for f in failures for line in f.lines if line.rank is not None})
    if ranks:
        facts["ranks"] = ranks
    repeats = sum(f.repeats for f in failures)
    if repeats > 1:
        facts["times_printed"] = repeats
    return facts
