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
* torch allocator warning (>= 2.8, ``[W... CUDACachingAllocator.cpp:NNNN]``): ``memory allocation
  failed with OOM on device N while trying to allocate B bytes (free: F, total: T)`` (also
  hard-wrapped and pasted without "while"), printed before the allocator frees its cache and
  retries;
* CUDA/HIP runtime and driver through torch: ``CUDA error: out of memory`` (``RuntimeError``;
  newest torch ``torch.AcceleratorError``), ``CUDA driver error: out of memory``, ``HIP error:
  out of memory``, ``hipErrorOutOfMemory``;
* Triton's launcher (``triton/backends/nvidia/driver.c`` / ``amd/driver.c`` ``gpuAssert``):
  ``Triton Error [CUDA]: out of memory``, ``Triton Error [HIP]:  Code: 2, Messsage: out of memory``;
* vLLM's own C++ allocators (``csrc/cumem_allocator.cpp`` ``CUDA_CHECK``, sleep mode's
  ``CuMemAllocator``): ``CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:N``;
* NCCL (``enqueue.cc`` / ``alloc.h`` ``NCCL WARN``, torch c10d ``ncclUnhandledCudaError``):
  ``Cuda failure 'out of memory'`` (newer ``Cuda failure 2 'out of memory'``), ``Failed to CUDA
  calloc N bytes``;
* CUDA libraries' handle/workspace allocation: ``CUBLAS_STATUS_ALLOC_FAILED when calling
  `cublasCreate(handle)``` (also HIPBLAS, CUSOLVER, CUDNN);
* Intel XPU (Level Zero / Unified Runtime): ``UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY``,
  ``ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY``; Intel Gaudi ``MODULE:PT_DEVMEM Allocation failed``;
  Ascend NPU (torch_npu) ``NPU out of memory. Tried to allocate X (NPU N; T total capacity; A
  already allocated; C current active; F free; R reserved in total by PyTorch)``;
* Ascend CANN ``Memory_Allocation_Failure(EL0004): Failed to allocate memory.``, ``Call rtMalloc
  fail, purpose: ..., size:N`` (bytes), ACL error 207018; AWS Neuron's runtime
  ``nrt_tensor_allocate status=4 message="Allocation Failure"``;
* TPU / JAX / torch_xla (XLA ``ResourceExhausted``): ``RESOURCE_EXHAUSTED: Error allocating
  device buffer: Attempting to allocate 1.00G. That was not possible. There are 474.83M free.``,
  ``Attempting to reserve X at the bottom of memory``, compile time ``Ran out of memory in memory
  space hbm. Used X of Y hbm. Exceeded hbm capacity by Z.``, ``Out of memory while trying to
  allocate N bytes``;
* vLLM ``vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run`` / ``_dummy_pooler_run``:
  ``CUDA out of memory occurred when warming up sampler with %d dummy requests.``;
* vLLM ``gpu_model_runner.load_model`` (newest): ``Failed to load model - not enough GPU
  memory.``.

Every ``oom`` event's data names its ``form`` (``torch``, ``torch-old``, ``allocator-warning``,
``cuda-error``, ``accelerator-error``, ``triton``, ``cumem``, ``csrc``, ``nccl``, ``cuda-library``,
``level-zero``, ``cann``, ``neuron-runtime``, ``hpu``, ``xla``, ``xla-compile``) and ``backend`` (``CUDA``, ``HIP``, ``XPU``,
``NPU``, ``HPU``, ``TPU``, ``MUSA``, ``MLU``, ``NEURON``, or ``XLA`` when the device is not printed), and the
numbers where printed: ``tried_to_allocate_gib``, ``gpu_free_gib``, ``gpu_total_gib``,
``gpu_index`` (device memory, whatever the accelerator).

Host memory is another matter: :mod:`vllm_doctor.catalog.host_memory` recognises a worker
killed for host RAM (Ray's memory monitor, the kernel OOM killer, Kubernetes ``OOMKilled``)
as ``host_oom``, which is never a GPU out-of-memory.

The ``processes`` list of the current form is kept in order as ``(pid, GiB)`` pairs, with
``pid`` None for the "this process" clause (``processes_cut`` True when the text ends before
the list does: the clauses printed whole are kept, others may follow); who is a co-tenant is decided later, with what
the whole log says about vLLM's own PIDs (:mod:`vllm_doctor.memory`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import regex

from ..units import to_gib
from .pattern import Pattern

# A space lost where a hard-wrapped line was joined back ("allocate|666.00 MiB") or a unit glued
# to its number must not lose the figure: the numbers and their roles are the invariant core.
_SIZE = r"\d+(?:\.\d+)?\s*(?:bytes|KiB|MiB|GiB|TiB)"
_SIZE_PARTS = regex.compile(r"(?P<n>\d+(?:\.\d+)?)\s*(?P<u>bytes|KiB|MiB|GiB|TiB)")
_TRIED = regex.compile(r"Tried to allocate\s*(?P<v>" + _SIZE + r")")
# The device index may be missing ("GPU  has": torch printing an unset index, p20), and a hard
# wrap may have eaten the space of "of which" (m07, "22.36 GiB of|which").
_NEW_GPU = regex.compile(
    r"GPU\s*(?P<gpu>\d*)\s*has a total capac(?:i)?ty of\s*(?P<total>"
    + _SIZE
    + r")\s*of\s*which\s*(?P<free>"
    + _SIZE
    + r")\s*is free"
)
# torch <= 2.0, torch_npu ("(NPU 0; ...; C current active; F free; ...)"), IPEX XPU (no "free").
_OLD_GPU = regex.compile(
    r"\((?:GPU|NPU|XPU) (?P<gpu>\d+); (?P<total>" + _SIZE + r") total capacity; (?P<alloc>" + _SIZE + r") already "
    r"allocated;(?: (?:" + _SIZE + r") current active;)?(?: (?P<free>" + _SIZE + r") free;)?"
    r"(?: (?P<allowed>" + _SIZE + r") allowed;)?(?: (?P<resv>" + _SIZE + r") reserved in total)?"
)
# "Including non-PyTorch memory, this process has M memory in use" is torch's clause for the
# failing process; a hand-edited or shortened paste keeps only "... this process has M in use"
# (p10): any "this process has M" is that clause, and "memory" before "in use" is optional.
_PROC = regex.compile(
    r"(?:Process\s*(?P<pid>\d+)|\bthis\s+process)\s*has\s*(?P<mem>" + _SIZE + r")\s*(?:memory\s*)?in\s+use"
)
_ALLOCATED = regex.compile(r"Of the allocated memory\s*(?P<v>" + _SIZE + r")\s*is allocated by PyTorch")
_PRIVATE = regex.compile(r"with\s*(?P<v>" + _SIZE + r")\s*allocated in private pools")
_UNALLOCATED = regex.compile(r"(?P<v>" + _SIZE + r")\s*is reserved by PyTorch but unallocated")


def size_to_gib(text: str) -> float:
    """``"666.00 MiB"`` or ``"666.00MiB"`` -> GiB. Raises ValueError when it is not a size."""
    m = _SIZE_PARTS.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"not a size: {text[:40]!r}")
    return to_gib(m["n"], m["u"])


_BACKEND = regex.compile(r"\b(?P<b>CUDA|HIP|XPU|MUSA|MLU|NPU) out of memory")


def _cut_search(rx: "regex.Pattern", text: str, pos: int) -> "Optional[regex.Match]":
    """``rx`` searched in ``text`` from ``pos``, or, when the end of the text cut its message
    short, its partial match (the values printed whole; one the end cut into is left out)."""
    m = rx.search(text, pos)
    if m is not None:
        return m
    end = len(text)
    while True:
        m = rx.search(text, pos, end, partial=True)
        if m is None or m.start() == end:
            return None
        reaching = [m.start(g) for g in rx.groupindex if 0 <= m.start(g) < end == m.end(g)]
        if not reaching:
            return m
        end = min(reaching)


def _torch_oom(m, rec) -> Optional[Dict[str, Any]]:
    text = m.string
    data: Dict[str, Any] = {}
    b = _BACKEND.search(text)
    if b:
        data["backend"] = b["b"]
    t = _TRIED.search(text, m.start())
    if t:  # the size ends with its unit: a size the end of the text cut into does not match
        data["tried_to_allocate_gib"] = size_to_gib(t["v"])
    g = _cut_search(_NEW_GPU, text, m.start())
    o = None if g else _cut_search(_OLD_GPU, text, m.start())
    if g and g["total"]:
        data["form"] = "torch"
        if g["gpu"]:  # "GPU  has": no index printed
            data["gpu_index"] = int(g["gpu"])
        if g["total"]:
            data["gpu_total_gib"] = size_to_gib(g["total"])
        if g["free"]:
            data["gpu_free_gib"] = size_to_gib(g["free"])
            _drop_impossible_free(data)
    if g and not g.partial:
        # The processes come next, up to "Of the allocated memory". A message cut before that
        # keeps the clauses printed whole (the list's start) and says so: "processes_cut".
        a = _ALLOCATED.search(text, g.end())
        stop = a.start() if a else text.find("Of the allocated memory", g.end())
        procs = []
        seen = set()
        for p in _PROC.finditer(text, g.end(), stop if stop >= 0 else len(text)):
            pid = int(p["pid"]) if p["pid"] else None
            if pid in seen:  # a damaged or repeated paste lists a PID twice: count it once
                continue
            seen.add(pid)
            procs.append((pid, size_to_gib(p["mem"])))
        data["processes"] = procs
        if stop < 0 and "non-PyTorch memory" not in text[g.end() :]:
            # (PyTorch prints "Including non-PyTorch memory, this process has ..." after every
            # "Process N": a message cut after it has listed the others whole)
            data["processes_cut"] = True
        if procs or stop >= 0:  # whether torch listed any is not known from a list cut before its first
            data["processes_listed"] = bool(procs) or "in use" in text
        if a:
            data["pytorch_allocated_gib"] = size_to_gib(a["v"])
        p = _PRIVATE.search(text, g.end())
        if p:
            data["private_pools_gib"] = size_to_gib(p["v"])
        u = _UNALLOCATED.search(text, g.end())
        if u:
            data["reserved_unallocated_gib"] = size_to_gib(u["v"])
    elif o and o["gpu"]:
        data["form"] = "torch-old"
        data["gpu_index"] = int(o["gpu"])
        for key, group in (
            ("gpu_total_gib", "total"),
            ("gpu_free_gib", "free"),
            ("pytorch_allocated_gib", "alloc"),
            ("pytorch_reserved_gib", "resv"),
        ):
            if o[group]:
                data[key] = size_to_gib(o[group])
    if "Error in model execution" in text:
        data["in_model_execution"] = True
    if data.get("form") == "torch-old":
        _drop_impossible_free(data)
    return data


def _drop_impossible_free(data: Dict[str, Any]) -> None:
    """A message whose free memory exceeds the device's total ("a total capacity of 23.55 GiB
    of which 40.00 GiB is free": a damaged or hand-edited paste) cannot say what was free:
    the free figure is dropped, never reasoned on, and ``inconsistent`` keeps both numbers
    (GiB) so the verdict can say why it is missing."""
    total, free = data.get("gpu_total_gib"), data.get("gpu_free_gib")
    if total is not None and free is not None and free > total:
        del data["gpu_free_gib"]
        data["inconsistent"] = {"gpu_free_gib": free, "gpu_total_gib": total}


def _alloc_warning(m, rec) -> Dict[str, Any]:
    """c10's warning that one ``cudaMalloc`` (or an expandable segment's map) failed. The
    allocator then frees its cache and retries (``DeviceCachingAllocator::malloc``): the warning
    alone is no failure, only a failure candidate (``allocator_retry``) until the log shows the
    retry survived (:func:`vllm_doctor.rules.oom_provenance.provenance`)."""
    data: Dict[str, Any] = {"form": "allocator-warning", "backend": "CUDA", "allocator_retry": True}
    if m["gpu"]:
        data["gpu_index"] = int(m["gpu"])
    for key, group in (("tried_to_allocate_gib", "req"), ("gpu_free_gib", "free"), ("gpu_total_gib", "total")):
        if m[group]:
            data[key] = int(m[group]) / 2**30
    return data


def _short(form: str, backend: str = "CUDA"):
    def build(m, rec) -> Dict[str, Any]:
        return {"form": form, "backend": backend}

    return build


def _runtime_error(m, rec) -> Dict[str, Any]:
    """``CUDA error: out of memory`` and its HIP / driver / AcceleratorError spellings."""
    text = m.string
    backend = "HIP" if (m["api"] or "").upper() == "HIP" or m["hip"] else "CUDA"
    form = "accelerator-error" if "AcceleratorError" in text[max(0, m.start() - 40) : m.start()] else "cuda-error"
    return {"form": form, "backend": backend}


def _triton(m, rec) -> Dict[str, Any]:
    data = {"form": "triton"}
    if m["api"]:
        data["backend"] = m["api"].upper()
    return data


def _csrc(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"backend": "CUDA"}
    path = m["path"]
    if path:
        data["form"] = "cumem" if "cumem" in path else "csrc"
        data["source_file"] = path.rsplit("/", 1)[-1]
    if m["line"]:
        data["source_line"] = int(m["line"])
    return data


def _nccl(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"form": "nccl", "backend": "CUDA"}
    if m["bytes"]:
        data["tried_to_allocate_gib"] = int(m["bytes"]) / 2**30
    return data


def _library(m, rec) -> Dict[str, Any]:
    lib = m["lib"].upper()
    return {"form": "cuda-library", "backend": "HIP" if lib.startswith("HIP") else "CUDA", "library": lib.lower()}


_XLA_UNITS = {"B": "bytes", "K": "KiB", "M": "MiB", "G": "GiB", "T": "TiB"}


def _xla_gib(text: str) -> float:
    """XLA's human-readable size (``1.00G``, ``474.83M``, ``0B``, ``12K``) in GiB (binary)."""
    number, unit = text[:-1], text[-1]
    return to_gib(number, _XLA_UNITS[unit])


def _xla(m, rec) -> Dict[str, Any]:
    # "XLA": the device is not named (in what the record holds: its name follows the sizes)
    # The TPU runtime's program loader reserves a compiled program's memory "at the bottom of
    # memory" ("Error loading program: Attempting to reserve 1.04G at the bottom of memory",
    # libtpu through torch_xla / jax; hunt9 v04): a TPU, loading a program
    loading = "Error loading program" in m.string or "at the bottom of memory" in m.string
    tpu = loading or "HBM" in m.string or "TPU" in m.string
    data: Dict[str, Any] = {"form": "xla", "backend": "TPU" if tpu else "XLA"}
    if loading:
        data["program_load"] = True
    if m["req"]:
        data["tried_to_allocate_gib"] = _xla_gib(m["req"])
    if m["free"]:
        data["gpu_free_gib"] = _xla_gib(m["free"])
    if m["verb"] == "reserve":
        data["reserve"] = True
    return data


def _xla_sizes(m, keys: Dict[str, str]) -> Dict[str, Any]:
    """The XLA sizes of ``m`` (``group -> data key``) that were printed whole, in GiB."""
    out: Dict[str, Any] = {}
    for group, key in keys.items():
        for g in (group, group + "2"):
            value = m.groupdict().get(g)
            if value:
                out[key] = _xla_gib(value)
    return out


def _xla_compile(m, rec) -> Dict[str, Any]:
    """HBM, the device memory, ran out when XLA compiled the program (E1000)."""
    data: Dict[str, Any] = {"form": "xla-compile", "backend": "TPU", "memory_space": "hbm"}
    sizes = {"used": "required_gib", "total": "gpu_total_gib", "over": "exceeded_by_gib", "total_free": "gpu_free_gib"}
    data.update(_xla_sizes(m, sizes))
    if m["early"]:
        data["early_abort"] = True
    return data


def _xla_scratch(m, rec) -> Dict[str, Any]:
    """An on-chip scratch memory (smem, vmem, sflag ...) ran out when XLA compiled the program:
    a compile-time limit of the TPU core, not the device memory (HBM) the KV cache lives in."""
    data: Dict[str, Any] = {
        "exception": "XLA:TPU compile error",
        "message": m.group(0).strip()[:300],
        "form": "xla-compile",
        "backend": "TPU",
        "memory_space": m["space"],
    }
    data.update(_xla_sizes(m, {"used": "space_used_gib", "total": "space_capacity_gib", "over": "exceeded_by_gib"}))
    if m["scoped"]:
        data["scoped"] = True
    return data


def _xla_bytes(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"form": "xla", "backend": "XLA"}
    if m["bytes"]:
        data["tried_to_allocate_gib"] = int(m["bytes"]) / 2**30
    return data


def _hpu(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"form": "hpu", "backend": "HPU"}
    if m["mb"]:
        data["tried_to_allocate_gib"] = float(m["mb"]) / 1024
    return data


def _cann(m, rec) -> Dict[str, Any]:
    """Ascend's CANN runtime could not allocate device memory (``EL0004``, ``rtMalloc``, ACL
    error 207018): an NPU out-of-memory; the size where ``rtMalloc`` prints it (bytes)."""
    data: Dict[str, Any] = {"form": "cann", "backend": "NPU"}
    size = _RTMALLOC_SIZE.search(m.string, m.start())
    if size is not None:
        data["tried_to_allocate_gib"] = int(size["bytes"]) / 2**30
    return data


_RTMALLOC_SIZE = regex.compile(r"\bsize\s*[:=]\s*(?P<bytes>\d{1,18})(?=[,;\s\]])")  # whole: a separator after it


def _neuron(m, rec) -> Dict[str, Any]:
    """The Neuron runtime (libnrt) could not allocate a tensor on the NeuronCores' device memory
    (``nrt_tensor_allocate status=4 message="Allocation Failure"``; status 4 is NRT_RESOURCE)."""
    data: Dict[str, Any] = {"form": "neuron-runtime", "backend": "NEURON", "call": m["call"]}
    if m["status"]:
        data["status"] = int(m["status"])
    return data


_SP = r"[ \t]*"  # a space a hard wrap or a paste may have dropped or doubled
#: After "Ran out of memory in memory space S": "Used X of Y S. Exceeded S capacity by Z." (each
#: part optional, so that a message cut inside it keeps what came before).
_XLA_USED = (
    r"(?:\."
    + _SP
    + r"Used (?P<used>[\d.]+[BKMGT])(?: of (?P<total>[\d.]+[BKMGT]) {space}\b(?:\."
    + _SP
    + r"Exceeded {space} capacity by (?P<over>[\d.]+[BKMGT]))?)?)?"
)

PATTERNS = [
    Pattern(
        "torch_oom",
        "oom",
        ("out of memory. Tried to allocate", "out of memory.", "Tried to allocate"),
        r"(?:CUDA|HIP|XPU|MUSA|MLU|NPU) out of memory\.(?:\s*Tried to allocate|\s*\W*$)|^Tried to allocate \d",
        "pytorch c10/cuda/CUDACachingAllocator.cpp DeviceCachingAllocator::malloc; torch_npu; intel-extension-for-pytorch",
        None,
        _torch_oom,
    ),
    Pattern(
        "torch_oom_allocator_warning",
        "oom",
        ("failed with OOM",),
        r"memory\s*(?:allocation|mapping)\s*failed\s*with\s*OOM\s*on\s*device\s*(?P<gpu>\d+)\s*(?:while\s*)?"
        r"trying\s*to\s*(?:allocate|map)\s*(?P<req>\d+)\s*bytes\s*\(free:\s*(?P<free>\d+),\s*total:\s*(?P<total>\d+)\)",
        "pytorch c10/cuda/CUDACachingAllocator.cpp (torch >= 2.8, warning; expandable_segments mapping)",
        None,
        _alloc_warning,
    ),
    Pattern(
        "cuda_error_oom",
        "oom",
        ("error: out of memory", "hipErrorOutOfMemory"),
        r"(?P<api>CUDA|HIP) (?:driver )?error: out of memory|(?P<hip>hipErrorOutOfMemory)",
        "torch c10/cuda/CUDAException.h C10_CUDA_CHECK (RuntimeError; torch.AcceleratorError in torch >= 2.8); "
        "CUDA driver API; HIP runtime (hipified torch)",
        None,
        _runtime_error,
    ),
    Pattern(
        "triton_oom",
        "oom",
        ("Triton Error [",),
        r"Triton Error \[(?P<api>CUDA|HIP)\]:\s*(?:Code: 2, Mess?sage: )?out of memory",
        "triton backends/nvidia/driver.c and backends/amd/driver.c gpuAssert (RuntimeError)",
        None,
        _triton,
    ),
    Pattern(
        "csrc_cuda_error_oom",
        "oom",
        ("CUDA Error: out of memory at",),
        r"CUDA Error: out of memory at (?P<path>\S+?\.(?:cpp|cu|cc|h)):(?P<line>\d+)",
        "vllm csrc/cumem_allocator.cpp CUDA_CHECK (sleep mode CuMemAllocator: wake_up / create_and_map)",
        None,
        _csrc,
    ),
    Pattern(
        "nccl_cuda_oom",
        "oom",
        ("Cuda failure", "Failed to CUDA calloc"),
        r"Cuda failure (?:\d+ )?['\"]out of memory['\"]|Failed to CUDA calloc (?P<bytes>\d+) bytes",
        "NCCL enqueue.cc / include/alloc.h NCCL WARN; torch c10d ncclUnhandledCudaError 'Last error:'",
        None,
        _nccl,
    ),
    Pattern(
        "cuda_library_alloc_failed",
        "oom",
        ("_STATUS_ALLOC_FAILED",),
        r"(?P<lib>CUBLAS|HIPBLAS|CUSOLVER|CUDNN)_STATUS_ALLOC_FAILED",
        "torch aten/src/ATen/cuda/CublasHandlePool.cpp (CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
        "`cublasCreate(handle)`); cuSOLVER / cuDNN status codes",
        None,
        _library,
    ),
    Pattern(
        "level_zero_oom",
        "oom",
        ("_ERROR_OUT_OF_DEVICE_MEMORY",),
        r"(?:UR|ZE)_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
        "Intel Unified Runtime / Level Zero result codes (XPU; torch xpu, IPEX, SYCL)",
        None,
        _short("level-zero", "XPU"),
    ),
    Pattern(
        "cann_memory_allocation_failure",
        "oom",
        # no anchor of digits alone: a pre-filter literal's digits must never cover a masked
        # time-stamp digit run (repeats.masks_safe)
        (
            "Memory_Allocation_Failure",
            "EL0004",
            "rtMalloc fail",
            "rtMalloc execute failed",
            "error code is 207018",
            "ACL_ERROR_RT_MEMORY_ALLOCATION",
        ),
        r"Memory_Allocation_Failure\(EL0004\)|EL0004: Failed to allocate memory|Call rtMalloc fail"
        r"|rtMalloc execute failed|error code is 207018|ACL_ERROR_RT_MEMORY_ALLOCATION",
        "Ascend CANN runtime (through torch_npu / vllm-ascend, vllm-omni): 'Memory_Allocation_Failure(EL0004): "
        "Failed to allocate memory.', 'Call rtMalloc fail, purpose: ..., size:N', ACL error 207018 "
        "(ACL_ERROR_RT_MEMORY_ALLOCATION)",
        None,
        _cann,
    ),
    Pattern(
        "neuron_runtime_allocation_failure",
        "oom",
        ("Allocation Failure",),
        r"(?P<call>nrt_\w+) status=(?P<status>\d+) message=\"?Allocation Failure",
        "AWS Neuron runtime (libnrt, through torch-neuronx / transformers-neuronx: 'RuntimeError: "
        'nrt_tensor_allocate status=4 message="Allocation Failure"\')',
        None,
        _neuron,
    ),
    Pattern(
        "hpu_devmem_oom",
        "oom",
        ("MODULE:PT_DEVMEM",),
        r"MODULE:PT_DEVMEM\s*Allocation failed(?: for size::?\s*(?P<bytes>\d+) \((?P<mb>[\d.]+)\)MB)?",
        "Intel Gaudi habana_frameworks PT_DEVMEM allocator (HPU)",
        None,
        _hpu,
    ),
    Pattern(
        "xla_resource_exhausted",
        "oom",
        ("That was not possible. There are",),
        r"Attempting to (?P<verb>allocate|reserve) (?P<req>[\d.]+[BKMGT])\b.{0,40}?\."
        + _SP
        + r"That was not possible\."
        + _SP
        + r"There are (?P<free>[\d.]+[BKMGT]) free",
        "XLA (TPU) tsl ResourceExhausted via jax / torch_xla: 'RESOURCE_EXHAUSTED: Error allocating device buffer'",
        None,
        _xla,
    ),
    # XLA:TPU compile-time out of memory (openxla/xla docs/errors/error_1000.md, error_1001.md): in
    # "memory space hbm" the device memory (E1000; also its early abort "Requires X, has Y
    # available"); in any other space (vmem E1001, smem, sflag ...) an on-chip scratch memory
    # of the TPU core: a compile-time limit of the shapes compiled, not a device OOM.
    Pattern(
        "xla_compile_hbm_oom",
        "oom",
        ("Ran out of memory in memory space", "Aborting compilation early"),
        r"(?:Ran out of memory in memory space hbm\b"
        + _XLA_USED.format(space="hbm")
        + r"|(?P<early>Aborting compilation early because it's unlikely to have enough memory)\."
        + _SP
        + r"(?:Requires (?P<used>[\d.]+[BKMGT])(?:, has (?P<total_free>[\d.]+[BKMGT]) available)?)?)",
        "XLA:TPU compiler (RESOURCE_EXHAUSTED: 'XLA:TPU compile permanent error. Ran out of memory in memory space "
        "hbm. Used X of Y hbm. Exceeded hbm capacity by Z.'; openxla/xla docs/errors/error_1000.md)",
        None,
        _xla_compile,
        cut_from=r"memory space hbm(?!\w)|Aborting compilation early",
    ),
    Pattern(
        "xla_compile_scratch_limit",
        "cuda_error",
        ("Ran out of memory in memory space",),
        r"Ran out of memory in memory space (?!hbm\b)(?P<space>[a-z]\w*)\b"
        + _XLA_USED.format(space=r"(?P=space)")
        + r"(?:"
        + _SP
        + r"while allocating on stack for\b.*?(?P<scoped>Scoped allocation) with size (?P<used2>[\d.]+[BKMGT])"
        r"(?: and limit (?P<total2>[\d.]+[BKMGT])(?: exceeded scoped (?P=space) limit by (?P<over2>[\d.]+[BKMGT]))?)?)?",
        "XLA:TPU compiler ('Ran out of memory in memory space smem. Used 1.00M of 1.00M smem. Exceeded smem "
        "capacity by 1.7K.'; vmem: '... while allocating on stack for %op ... Scoped allocation with size X and limit "
        "Y exceeded scoped vmem limit by Z.', openxla/xla docs/errors/error_1001.md)",
        None,
        _xla_scratch,
        cut_from=r"memory space (?!hbm\b)[a-z]\w*(?=\W)",
    ),
    Pattern(
        "xla_out_of_memory_bytes",
        "oom",
        ("Out of memory while trying to allocate",),
        r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate (?P<bytes>\d+) bytes",
        "XLA BFC allocator (jax / torch_xla on GPU or TPU)",
        None,
        _xla_bytes,
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
