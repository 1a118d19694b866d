"""Out-of-memory messages: PyTorch's allocator message in both forms, and the short ones.

Sources (``shared/vllm-messages.md`` sections 3, 6, 10, 13):

* PyTorch ``c10/cuda/CUDACachingAllocator.cpp`` ``DeviceCachingAllocator::malloc``:
  current form (torch >= 2.1) ``CUDA out of memory. Tried to allocate X. GPU N has a total
  capacity of T of which F is free. [Process P has M memory in use. | Including non-PyTorch
  memory, this process has M memory in use. ]* Of the allocated memory A is allocated by
  PyTorch, [with P allocated in private pools (e.g., CUDA Graphs), ]and R is reserved by
  PyTorch but unallocated.`` (``capacty`` typo in 2.1; HIP/XPU/MUSA/MLU/NPU variants);
  old form (torch 1.10-2.0) ``Tried to allocate X (GPU N; T total capacity; A already
  allocated; F free; R reserved in total by PyTorch)``;
* torch allocator warning (>= 2.8): ``memory allocation failed with OOM on device N while
  trying to allocate B bytes (free: F, total: T)``;
* CUDA runtime/driver: ``CUDA error: out of memory``, ``CUDA driver error: out of memory``,
  NCCL ``Cuda failure 'out of memory'``;
* vLLM ``vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run`` / ``_dummy_pooler_run``:
  ``CUDA out of memory occurred when warming up sampler with %d dummy requests.``;
* vLLM ``gpu_model_runner.load_model`` (newest): ``Failed to load model - not enough GPU
  memory.``.

The ``processes`` list of the current form is kept in order as ``(pid, GiB)`` pairs, with
``pid`` None for the "this process" clause; who is a co-tenant is decided later, with what
the whole log says about vLLM's own PIDs (:mod:`vllm_doctor.memory`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import regex

from ..units import size_to_gib
from . import Pattern

_SIZE = r"[\d.]+ (?:bytes|KiB|MiB|GiB|TiB)"
_TRIED = regex.compile(r"Tried to allocate (?P<v>" + _SIZE + r")")
_NEW_GPU = regex.compile(
    r"GPU (?P<gpu>\d+) has a total capac(?:i)?ty of (?P<total>" + _SIZE + r") of which (?P<free>" + _SIZE + r") is free"
)
_OLD_GPU = regex.compile(
    r"\(GPU (?P<gpu>\d+); (?P<total>" + _SIZE + r") total capacity; (?P<alloc>" + _SIZE + r") already allocated; "
    r"(?P<free>"
    + _SIZE
    + r") free;(?: (?P<allowed>"
    + _SIZE
    + r") allowed;)?(?: (?P<resv>"
    + _SIZE
    + r") reserved in total)?"
)
_PROC = regex.compile(
    r"(?:Process (?P<pid>\d+)|Including non-PyTorch memory, this process) has (?P<mem>" + _SIZE + r") memory in use"
)
_ALLOCATED = regex.compile(r"Of the allocated memory (?P<v>" + _SIZE + r") is allocated by PyTorch")
_PRIVATE = regex.compile(r"with (?P<v>" + _SIZE + r") allocated in private pools")
_UNALLOCATED = regex.compile(r"(?P<v>" + _SIZE + r") is reserved by PyTorch but unallocated")
_BACKEND = regex.compile(r"\b(?P<b>CUDA|HIP|XPU|MUSA|MLU|NPU) out of memory")


def _torch_oom(m, rec) -> Optional[Dict[str, Any]]:
    text = m.string
    data: Dict[str, Any] = {"form": "torch"}
    b = _BACKEND.search(text)
    if b:
        data["backend"] = b["b"]
    t = _TRIED.search(text, m.start())
    if t:
        data["tried_to_allocate_gib"] = size_to_gib(t["v"])
    g = _NEW_GPU.search(text, m.start())
    if g:
        data["gpu_index"] = int(g["gpu"])
        data["gpu_total_gib"] = size_to_gib(g["total"])
        data["gpu_free_gib"] = size_to_gib(g["free"])
        procs = []
        seen = set()
        for p in _PROC.finditer(text, g.end()):
            pid = int(p["pid"]) if p["pid"] else None
            if pid in seen:  # a damaged or repeated paste lists a PID twice: count it once
                continue
            seen.add(pid)
            procs.append((pid, size_to_gib(p["mem"])))
        data["processes"] = procs
        data["processes_listed"] = bool(procs) or "memory in use" in text
        a = _ALLOCATED.search(text, g.end())
        if a:
            data["pytorch_allocated_gib"] = size_to_gib(a["v"])
        p = _PRIVATE.search(text, g.end())
        if p:
            data["private_pools_gib"] = size_to_gib(p["v"])
        u = _UNALLOCATED.search(text, g.end())
        if u:
            data["reserved_unallocated_gib"] = size_to_gib(u["v"])
    else:
        o = _OLD_GPU.search(text, m.start())
        if o:
            data["form"] = "torch-old"
            data["gpu_index"] = int(o["gpu"])
            data["gpu_total_gib"] = size_to_gib(o["total"])
            data["gpu_free_gib"] = size_to_gib(o["free"])
            data["pytorch_allocated_gib"] = size_to_gib(o["alloc"])
            if o["resv"]:
                data["pytorch_reserved_gib"] = size_to_gib(o["resv"])
    if "Error in model execution" in text:
        data["in_model_execution"] = True
    return data


def _alloc_warning(m, rec) -> Dict[str, Any]:
    return {
        "form": "allocator-warning",
        "gpu_index": int(m["gpu"]),
        "tried_to_allocate_gib": int(m["req"]) / 2**30,
        "gpu_free_gib": int(m["free"]) / 2**30,
        "gpu_total_gib": int(m["total"]) / 2**30,
        "warning_only": True,
    }


def _short(form: str):
    def build(m, rec) -> Dict[str, Any]:
        return {"form": form}

    return build


PATTERNS = [
    Pattern(
        "torch_oom",
        "oom",
        ("out of memory. Tried to allocate", "out of memory.", "Tried to allocate"),
        r"(?:CUDA|HIP|XPU|MUSA|MLU|NPU) out of memory\.(?:\s*Tried to allocate|\s*\W*$)|^Tried to allocate \d",
        "pytorch c10/cuda/CUDACachingAllocator.cpp DeviceCachingAllocator::malloc",
        None,
        _torch_oom,
    ),
    Pattern(
        "torch_oom_allocator_warning",
        "oom",
        ("memory allocation failed with OOM",),
        r"memory allocation failed with OOM on device (?P<gpu>\d+) while trying to allocate (?P<req>\d+) bytes "
        r"\(free: (?P<free>\d+), total: (?P<total>\d+)\)",
        "pytorch c10/cuda/CUDACachingAllocator.cpp (torch >= 2.8, warning)",
        None,
        _alloc_warning,
    ),
    Pattern(
        "cuda_error_oom",
        "oom",
        ("error: out of memory",),
        r"CUDA (?:driver )?error: out of memory",
        "CUDA runtime / driver via torch (RuntimeError)",
        None,
        _short("cuda-error"),
    ),
    Pattern(
        "nccl_cuda_oom",
        "oom",
        ("Cuda failure 'out of memory'", 'Cuda failure "out of memory"'),
        r"Cuda failure ['\"]out of memory['\"]",
        "NCCL (enqueue.cc / ncclUnhandledCudaError)",
        None,
        _short("nccl"),
    ),
    Pattern(
        "sampler_warmup_oom",
        "sampler_oom",
        ("occurred when warming up",),
        r"out of memory occurred when warming up (?P<target>sampler|pooler)(?: \(task=[^)]*\))? "
        r"with (?P<dummy_requests>\d+) dummy requests",
        "vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run / _dummy_pooler_run",
    ),
    Pattern(
        "failed_to_load_model",
        "load_oom",
        ("Failed to load model - not enough GPU memory",),
        r"Failed to load model - not enough GPU memory",
        "vllm/v1/worker/gpu_model_runner.py load_model (newest)",
    ),
]
