"""What the catalog recognises in a record: an :class:`Event`.

An event has a ``kind`` (one of :data:`KINDS`), the :class:`~vllm_doctor.record.Record`
it came from (for evidence: source and line number), ``data`` (values in the
vocabulary of ``shared/corpus/README.md``: memory in GiB, token counts as ints)
and, for phase markers, the startup ``phase`` it proves the run has reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Dict, Optional

from .record import Record


class Phase(IntEnum):
    """How far a server run got, in vLLM's startup order (V0 and V1 alike).

    Sources: ``vllm/v1/engine/core.py`` ``EngineCore.__init__`` (load model ->
    ``_initialize_kv_caches``: profile, allocate KV, ``compile_or_warm_up_model``:
    CUDA graph capture then sampler warm-up) and ``vllm/engine/llm_engine.py`` (V0).
    """

    NONE = 0
    CONFIG = 1
    LOADING_WEIGHTS = 2
    WEIGHTS_LOADED = 3
    KV_SIZING = 4
    GRAPH_CAPTURE = 5
    WARMUP = 6
    READY = 7
    SERVING = 8

    @property
    def label(self) -> str:
        return _PHASE_LABELS[self]


_PHASE_LABELS = {
    Phase.NONE: "unknown",
    Phase.CONFIG: "config",
    Phase.LOADING_WEIGHTS: "loading weights",
    Phase.WEIGHTS_LOADED: "weights loaded (profiling)",
    Phase.KV_SIZING: "KV cache sizing",
    Phase.GRAPH_CAPTURE: "CUDA graph capture",
    Phase.WARMUP: "warm-up",
    Phase.READY: "ready",
    Phase.SERVING: "serving",
}

#: Every event kind the catalog produces, with what its ``data`` holds.
KINDS = {
    "run_start": "a server start marker ({marker}); opens a new run when the current one got past config",
    "config": "configuration values ({max_model_len, gpu_memory_utilization, ...})",
    "facts": "startup facts (KV sizing, weights, GPU memory, CUDA graph memory)",
    "phase": "a phase marker with no values",
    "kv_error": "the KV cache cannot hold one max-length request, or no room for any block",
    "oom": "an out-of-memory error (torch allocator message, CUDA/driver/NCCL error)",
    "host_oom": "HOST memory (RAM) ran out, not a GPU OOM: a process killed or a CPU allocation refused; "
    "{killer: ray|kernel|cgroup|kubernetes|torch-cpu-allocator} and, where printed, {pid, process, "
    "host_used_gib, host_total_gib, host_usage_fraction, threshold, process_used_gib, anon_rss_gib, "
    "workers_killed, tried_to_allocate_gib} (catalog/host_memory.py)",
    "no_device": "no usable accelerator: no platform, no driver, no GPU visible, a driver too old for the "
    "image's CUDA, or a CPU-only PyTorch; {form: no_platform|no_driver|no_gpu|driver_too_old|cpu_torch} and, "
    "where printed, {library, driver_version} (catalog/platform.py)",
    "sampler_oom": "OOM while warming up the sampler/pooler with N dummy requests",
    "load_oom": "vLLM's own 'Failed to load model - not enough GPU memory'",
    "free_memory": "startup check: free memory below gpu_memory_utilization x total",
    "profiling_error": "'Error in memory profiling': free memory grew while profiling",
    "quant_error": "quantization method not supported on this GPU",
    "config_error": "length / batch / LoRA limits that contradict each other, the model or an adapter "
    "({variant} and the numbers printed; catalog/checks.py, catalog/validation.py)",
    "unsupported": "a feature combination the release refuses ({variant, feature, flag: the flag to drop, "
    "instead, exception, message}; catalog/validation.py)",
    "cli_error": "the launch command refused by vLLM's argument parser ('vllm serve: error: ...'; {prog, "
    "message, form, argument, value, choices, flags, hint}; catalog/arguments.py)",
    "too_long": "a request longer than the model's context (HTTP 400)",
    "swap_exhausted": "V0 SWAP preemption found no free block in vLLM's CPU swap space (--swap-space, not the "
    "OS swap): 'Aborted due to the lack of CPU swap space' ends the engine (catalog/scheduler.py)",
    "client": "a client's transcript of a request (catalog/requests.py): {status} of a 4xx status line, "
    "{body} of a response body naming a length limit, {request_max_tokens} the request asked for",
    "preemption": "V0 preemption warning (printed for the 1st, 51st, 101st ...)",
    "stats": "a periodic stats line (V0 or V1)",
    "prefix_hit": "V0 prefix-cache hit-rate line",
    "exception": "a Python exception line 'Name: message'",
    "cuda_error": "an accelerator runtime error other than out-of-memory (CUDA illegal access, device assert; "
    "NCCL; Ascend NPU function errors; Gaudi fatal errors; ROCm HSA faults; the Neuron compiler; XPU out of "
    "resources; XLA scratch limits)",
    "tb_start": "'Traceback (most recent call last):'",
    "tb_frame": "a traceback frame 'File \"...\", line N, in func'",
    "tb_chain": "'The above exception was the direct cause ...' / 'During handling ...'",
    "engine_dead": "a consequence marker: engine/worker died, 'see root cause above'",
    "access": "an HTTP access line with an error status (uvicorn)",
    "stall": "a process waits on another that makes no progress (catalog/stalls.py): {signal: shm_wait|"
    "rpc_timeout|iteration_timeout|barrier_timeout|watchdog_dump|collective_timeout|collective_stuck|"
    "ray_channel_timeout}, {fatal} when the message ends the engine, {repeats} when it is printed again "
    "while the wait lasts, and the values printed (interval_s, method, rank, seq, op, timeout_ms, dump_path ...)",
    "env": "environment variables the log shows set ({env: {NAME: VALUE}}, {implied} when a line only "
    "implies one, e.g. NCCL INFO lines imply NCCL_DEBUG=INFO; catalog/environment.py)",
    "marker": "a notable one-off line, kept by name ({marker}): e.g. stats logging disabled",
}


@dataclass
class Event:
    """One recognised message. See :data:`KINDS` for ``kind`` and ``data``."""

    kind: str
    record: Record
    data: Dict[str, Any] = field(default_factory=dict)
    phase: Optional[Phase] = None
    pattern: str = ""  # name of the catalog pattern that produced it
