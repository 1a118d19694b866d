"""Every wording vLLM has printed is recognised, with its numbers, in the log prefix of its era.

The table ``fixtures/wordings/wordings.jsonl`` is read from vLLM's own releases by
``tools/wordings/extract.py`` (each row: a message template with typed placeholders, the releases
that print it and where). Each row is rendered here with plausible values, inside the record
prefix that release's ``vllm/logger.py`` prints (``fixtures/wordings/log_formats.json``) and the
process prefix of its era, for the oldest and the newest release that print it, and put through
the real front of the pipeline (``envelopes.unwrap`` + ``catalog.Catalog().recognise``).

:data:`COVER` says, per wording, which event kind it must give and which numbers (placeholders
are given their role by the literal text just before them). Rows the catalog deliberately does
not recognise are in :data:`NOT_COVERED`, each with its reason; every row must be one or the
other, and every entry of either list must match a row of the table (no stale entries).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from vllm_doctor import prefilter
from vllm_doctor.catalog import Catalog
from vllm_doctor.envelopes import unwrap
from vllm_doctor.events import Phase
from vllm_doctor.frames import TAG_FUNCS, TAG_PHASE, frame_tags, phase_of

DATA = Path(__file__).resolve().parent.parent / "fixtures" / "wordings"
ROWS: List[dict] = [json.loads(line) for line in (DATA / "wordings.jsonl").read_text(encoding="utf-8").splitlines()]
FORMATS: Dict[str, dict] = json.loads((DATA / "log_formats.json").read_text(encoding="utf-8"))
FRAMES: dict = json.loads((DATA / "frames.json").read_text(encoding="utf-8"))


def vkey(v: str) -> Tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


@dataclass(frozen=True)
class Role:
    """A placeholder whose preceding literal text matches ``before`` (searched, ``{}`` marks
    earlier placeholders; and whose expression matches ``expr`` when given) is rendered from
    ``value``; ``key`` names the event data that must hold ``expect`` (default: ``value``).
    ``key`` None: rendered only."""

    before: str
    key: Optional[str]
    value: Any
    expect: Any = None
    expr: Optional[str] = None  # and the placeholder's Python expression matches this


@dataclass(frozen=True)
class Cover:
    """Rows of ``family`` whose template matches ``template`` must give an event of ``kind``
    (with ``phase`` when given) holding every role's value and ``extra``. Every placeholder
    must have a role, unless its preceding text matches ``fill`` (values that carry no fact)."""

    family: str
    template: str
    kind: str
    roles: Tuple[Role, ...] = ()
    phase: Optional[Phase] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    fill: Optional[str] = None  # placeholders whose preceding text matches this get a filler value


R = Role
_KV_ROLES = (
    R(r"max seq len \($", "max_model_len", 131072),
    R(r"\), \($", "kv_needed_gib", 16.0),
    R(r"KV cache memory \($", "kv_available_gib", 0.71),
    R(r"model length is $", "estimated_max_model_len", 5632),
    R(r"stored in KV cache \($", "kv_tokens", 3664),
)
_FREE_ROLES = (
    R(r"on device $", "device", "cuda:0"),
    R(r"on device (?:\{\} )?\($", "gpu_free_gib", 3.27),
    R(r"/$", "gpu_total_gib", 15.98),
    R(r"(?:utilization|weights) \($", "gpu_memory_utilization", 0.9),
    R(r"\(\{\}, $", "requested_gib", 14.39),
)
_SUMMARY_ROLES = (
    R(r"on device \($", "gpu_free_gib", 110.37),
    R(r"/$", "gpu_total_gib", 121.69),
    R(r"utilization is \($", "gpu_memory_utilization", 0.87),
    R(r"\(\{\}, $", "requested_gib", 105.87),
    R(r"Actual usage is $", "weights_gib", 14.25, expr=r"model_memory_usage"),  # v0.10-v0.26
    R(r"Actual usage is $", "consumed_gib", 55.99, expr=r"consumed"),  # v0.27+
    R(r"non-torch\), $|for weight, $", "activation_peak_gib", 1.4),
    R(r"for peak activation, and $|for non-torch memory, and $", "cuda_graph_gib", 0.5),
    R(r"for peak activation, $", "non_torch_gib", 0.12),
    R(r"kv-cache-memory=$", None, 52830620611),
    R(r"kv-cache-memory=\{\}` \($", None, 49.2),
    R(r"memory in use is $", "kv_available_gib", 80.25 * 2**30, 80.25, expr=r"^int\("),  # v0.10: bytes
    R(r"memory in use is $", "kv_available_gib", 80.29),
)
_STATS_ROLES = (
    R(r"^Engine $", None, 0),
    R(r"^$", None, "Engine 000: "),  # the V1 log_prefix placeholder opening the line
    R(r"prompt throughput: $", "prompt_tps", 120.5),
    R(r"generation throughput: $", "generation_tps", 14.6),
    R(r"Running: $", "running", 3),
    R(r"Swapped: $", "swapped", 1),
    R(r"Pending: $", "waiting", 2),
    R(r"Waiting: $", "waiting", 2),
    R(r"Deferred: $", "deferred", 1),
    R(r"Preemptions: $", "preemptions", 4),
    R(r"(?:reqs|\}), $", None, "GPU"),  # v0.30+: the KV cache device
    R(r"(?:GPU|\{\}) KV cache usage: $", "kv_usage_pct", 97.5),
    R(r"CPU KV cache usage: $", "cpu_kv_usage_pct", 0.0),
    R(r"Prefix cache hit rate: $", "prefix_hit_pct", 23.6),
    R(r"Prefix cache hit rate: GPU: $", "prefix_hit_pct", 23.6),
    R(r"GPU: \{\}%, CPU: $", None, 0.0),
)
# fields the stats patterns read past without a fact (v0.32's KV fetch counts, corrupted requests,
# external and multimodal cache hit rates)
_STATS_FILL = (
    r"KV fetch: $|waiting to start, $|in progress, $|Corrupted: $|prefix cache hit rate: $|MM cache hit rate: $"
)
_TOO_LONG_ROLES = (
    R(r"context length is $", "max_model_len", 4096),
    R(r"too large: $", "max_tokens", 1000),
    R(r"you requested $", None, 5000),
    R(r"prompt contains (?:at least )?$", "prompt_tokens", 4000),
    R(r"for a total of (?:at least )?$", "requested_tokens", 5000),
    R(r"request has $", "prompt_tokens", 4000),
    R(r"\($", "prompt_tokens", 4000),
    R(r"in the messages, $", "max_tokens", 1000),
    R(r"The $", None, "decoder"),
    R(r"\(length $", "prompt_tokens", 4100),
    R(r"Prompt length of $", "prompt_tokens", 4100),
    R(r"maximum model length of $", "max_model_len", 4096),
    R(r"Input prompt \($", "prompt_tokens", 4100),
    R(r"exceeds limit of $", "prompt_limit", 4096),  # V0: min(max_model_len, max_num_batched_tokens)
    R(r"more than $", None, 786432),
    R(r"upper bound for $", "prompt_tokens_at_least", 31744),
    R(r"input for $", None, "embedding"),
)
# the arithmetic vLLM spells out after the counts: (max_tokens > max_model_len - prompt), (a + b = c > d)
_TOO_LONG_FILL = r"\(\{\} > $|> \{\} - $|tokens \($|\(\{\} \+ $|\{\} = $|= \{\} > $"
_DERIVED_ROLES = (
    R(r"User-specified max_model_len \($", "max_model_len", 65536),
    R(r"derived max_model_len \($", "derived_key", "max_position_embeddings"),
    R(r"derived max_model_len \([^()]*=$", "derived_max_model_len", 32768),
    R(r"or model_max_length=$", None, "None"),
)

COVER: Tuple[Cover, ...] = (
    # --- KV cache capacity ---------------------------------------------------------------------
    Cover("kv_capacity", r"max seq len \(\{0\}\) is larger than the maximum number of tokens", "kv_error", _KV_ROLES),
    Cover("kv_capacity", r"^To serve at least one request", "kv_error", _KV_ROLES),
    Cover("kv_capacity", r"^No available memory for the cache blocks", "kv_error"),
    Cover("kv_capacity", r"^Cannot auto-fit max_model_len", "kv_error"),
    # --- free memory / profiling checks ----------------------------------------------------------
    Cover("free_memory", r"on startup is less than", "free_memory", _FREE_ROLES),
    Cover(
        "free_memory",
        r"^Externally held weights",
        "free_memory",
        (
            R(r"on device $", "device", "cuda:0"),
            R(r"on device \{\} \($", "external_weights_gib", 75.0),
            R(r"/$", "gpu_total_gib", 79.19),
            R(r"utilization \($", "gpu_memory_utilization", 0.9),
            R(r"\(\{\}, $", "requested_gib", 71.27),
        ),
        extra={"variant": "external_weights_exceed_budget"},
    ),
    Cover("free_memory", r"on startup\. Desired GPU memory utilization is", "facts", _SUMMARY_ROLES, Phase.WARMUP),
    Cover(
        "free_memory",
        r"Initial free memory \{0\} GiB",
        "profiling_error",
        (R(r"Initial free memory $", "initial_free_gib", 70.5), R(r"current free memory $", "current_free_gib", 72.25)),
    ),
    Cover(
        "free_memory",
        r"Initial free memory \{0\}, current",  # raw bytes
        "profiling_error",
        (
            R(r"Initial free memory $", "initial_free_gib", int(70.5 * 2**30), 70.5),
            R(r"current free memory $", "current_free_gib", int(72.25 * 2**30), 72.25),
        ),
    ),
    Cover(
        "free_memory",
        r"Initial used memory \{0\}",  # raw bytes
        "profiling_error",
        (
            R(r"Initial used memory $", "initial_used_gib", 10 * 2**30, 10.0),
            R(r"currently used memory $", "current_used_gib", int(8.5 * 2**30), 8.5),
        ),
    ),
    # --- KV sizing facts -----------------------------------------------------------------------
    Cover(
        "kv_sizing",
        r"blocks: \{\d\}",
        "facts",
        (
            R(r"^# $", None, "cuda"),
            R(r"^# (?:\w+|\{\}) blocks: $", "gpu_blocks", 5519),
            R(r", # CPU blocks: $", "cpu_blocks", 2048),
        ),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"^Available KV cache memory",
        "facts",
        (R(r"memory: $", "kv_available_gib", 25.91),),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"after num_gpu_blocks is",
        "facts",
        (R(r"^Engine $", None, 0), R(r"^$", None, 2), R(r"gpu_blocks is: $", "gpu_blocks", 41345)),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"KV cache size: \{\d\} tokens",
        "facts",
        (
            R(r"^$", None, "GPU"),
            R(r"KV cache size: $", "kv_tokens", 447088),
            R(r"Maximum concurrency for $", "concurrency_tokens", 32768),
            R(r"per request: $", "max_concurrency", 13.64),
        ),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"^Maximum concurrency for",
        "facts",
        (R(r"Maximum concurrency for $", "concurrency_tokens", 32768), R(r"per request: $", "max_concurrency", 20.19)),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"as specified by kv_cache_memory_bytes",
        "facts",
        (R(r"Initial free memory $", "gpu_free_gib", 78.5), R(r"reserved $", "kv_available_gib", 10.0)),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"^Applying persisted startup plan",
        "facts",
        (
            R(r"fingerprint $", None, "3fa2c1"),
            R(r"kv_cache_memory_bytes=$", None, 53687091200),
            R(r"kv_cache_memory_bytes=\{\} \($", "kv_available_gib", 50.0),
            R(r"baseline $", None, 78.1),
            R(r"current $", "gpu_free_gib", 78.05),
        ),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"^Memory profiling takes \{0\} seconds\n",  # V0: three lines, each with the record prefix
        "facts",
        (
            R(r"profiling takes $", None, 17.59),
            R(r"total_gpu_memory \($", "gpu_total_gib", 23.58),
            R(r"gpu_memory_utilization \($", "gpu_memory_utilization", 0.99),
            R(r"\) = $", "requested_gib", 23.35),
            R(r"weights take $", "weights_gib", 21.21),
            R(r"non_torch_memory takes $", "non_torch_gib", 0.2),
            R(r"peak memory takes $", "activation_peak_gib", 0.37),
            R(r"KV Cache is $", "kv_available_gib", 1.57),
        ),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"^Memory profiling takes \{0\} seconds\. Total non KV cache memory",  # V1 repr, logged at DEBUG
        "facts",
        (
            R(r"profiling takes $", None, 14.06),
            R(r"non KV cache memory: $", "non_kv_cache_gib", 1.05),
            R(r"peak memory increase: $", "activation_peak_gib", 0.24),
            R(r"forward increase memory: $", "non_torch_gib", 0.14),
            R(r"mem_get_info\): $", "consumed_gib", 61.49),
            R(r"weights memory: $", "weights_gib", 0.67),
        ),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"^Initial free memory: \{0\} GiB; Requested memory",
        "facts",
        (
            R(r"Initial free memory: $", "gpu_free_gib", 78.66),
            R(r"Requested memory: $", "gpu_memory_utilization", 0.85),  # %.2f in v0.10, %f later
            R(r"\(util\), $", "requested_gib", 65.32),
        ),
        Phase.KV_SIZING,
    ),
    Cover(
        "kv_sizing",
        r"^Initial free memory: \{0\} GiB, free memory",
        "facts",
        (
            R(r"Initial free memory: $", "gpu_free_gib", 78.66),
            R(r", free memory: $", None, 12.1),
            R(r"requested GPU memory: $", "requested_gib", 71.27),
        ),
        Phase.KV_SIZING,
    ),
    Cover("kv_sizing", r"^worker requested memory", "facts", (R(r"memory: $", "requested_gib", 65.32),)),
    Cover(
        "kv_sizing",
        r"^Memory profiling results",
        "facts",
        (
            R(r"total_gpu_memory=$", "gpu_total_gib", 23.58),
            R(r"initial_memory_usage=$", "initial_usage_gib", 15.34),
            R(r"peak_torch_memory=$", "peak_torch_gib", 17.98),
            R(r"memory_usage_post_profile=$", None, 15.35),
            R(r"non_torch_memory=$", "non_torch_gib", 0.35),
            R(r"kv_cache_size=$", "kv_available_gib", 2.89),
            R(r"gpu_memory_utilization=$", "gpu_memory_utilization", 0.9),
        ),
        Phase.KV_SIZING,
    ),
    # --- weights -------------------------------------------------------------------------------
    Cover(
        "weights",
        r"^(?:Loading model weights|Model loading) took \{0\} Gi?B",
        "facts",
        (R(r"took $", "weights_gib", 14.9888), R(r"and $", None, 28.479916)),
        Phase.WEIGHTS_LOADED,
    ),
    Cover("weights", r"^Loading weights took", "phase", (R(r"took $", None, 0.15),), Phase.WEIGHTS_LOADED),
    Cover(
        "weights",
        r"^Starting to load model",
        "config",
        (R(r"load model $", "model", "Qwen/Qwen3-8B"),),
        Phase.LOADING_WEIGHTS,
    ),
    Cover(
        "weights",
        r"^Failed to load model - not enough GPU memory",
        "load_oom",
        (R(r"original error: $", None, "CUDA out of memory. Tried to allocate 2.00 GiB."),),
    ),
    Cover(
        "weights", r"checkpoint shards", "facts", phase=Phase.LOADING_WEIGHTS
    ),  # shards_loaded/total: _BAR_FORMAT only
    # --- CUDA graphs ---------------------------------------------------------------------------
    Cover(
        "cuda_graph",
        r"^Capturing CUDA graph",
        "phase",
        (R(r"\($", None, "decode"), R(r", $", None, "FULL")),
        Phase.GRAPH_CAPTURE,
    ),
    Cover(
        "cuda_graph",
        r"^(?:Capturing cudagraphs|Capturing the model for CUDA graphs|CUDA graphs can take additional)",
        "phase",
        phase=Phase.GRAPH_CAPTURE,
    ),
    Cover(
        "cuda_graph",
        r"^Graph capturing finished in \{0\} secs, took",
        "facts",
        (R(r"finished in $", None, 7), R(r"took $", "cuda_graph_gib", 0.95)),
        Phase.WARMUP,
    ),
    Cover("cuda_graph", r"^Graph capturing finished in \{0\} secs\.$", "facts", (R(r"in $", None, 7),), Phase.WARMUP),
    Cover(
        "cuda_graph",
        r"^CUDA graph pool memory",
        "facts",
        (
            R(r"memory: $", "cuda_graph_gib", 2.0),
            R(r"\(actual\), $", None, 1.59),
            R(r"difference: $", None, 0.41),
            R(r"GiB \($", None, 20.2),
        ),
        Phase.WARMUP,
    ),
    Cover(
        "cuda_graph",
        r"^Estimated CUDA graph memory",
        "facts",
        (R(r"memory: $", "cuda_graph_estimated_gib", 1.59),),
    ),
    Cover("cuda_graph", r"^Cudagraph is disabled under eager mode", "phase", phase=Phase.CONFIG),
    # --- sampler / pooler warm-up --------------------------------------------------------------
    Cover(
        "warmup",
        r"when warming up",
        "sampler_oom",
        (R(r"task=$", None, "'embed'"), R(r"with $", "dummy_requests", 256)),
    ),
    # --- stats and preemption ------------------------------------------------------------------
    Cover("stats", r"Avg prompt throughput", "stats", _STATS_ROLES, fill=_STATS_FILL),
    Cover("stats", r"^Prefix cache hit rate: GPU", "prefix_hit", _STATS_ROLES),
    Cover(
        "preemption",
        r"is preempted by",
        "preemption",
        (
            R(r"Sequence group $", None, "cmpl-1"),
            R(r"preempted by $", "mode", "PreemptionMode.RECOMPUTE", "RECOMPUTE"),
            R(r"preemption=$", "cumulative", 51),
        ),
    ),
    # --- config / length errors ----------------------------------------------------------------
    Cover(
        "config_error",
        r"is smaller than max_model_len",
        "config_error",
        (
            R(r"max_num_batched_tokens \($", "max_num_batched_tokens", 2048),
            R(r"max_model_len \($", "max_model_len", 131072),
        ),
    ),
    Cover(
        "config_error",
        r"must be greater than or equal to max_num_seqs",
        "config_error",
        (
            R(r"max_num_batched_tokens \($", "max_num_batched_tokens", 128),
            R(r"max_num_seqs \($", "max_num_seqs", 256),
        ),
    ),
    # the same wording is an error when raised, a fact (override allowed) when logged
    Cover("config_error", r"^User-specified max_model_len", "config_error", _DERIVED_ROLES),
    # hybrid Mamba models: one Mamba cache block per decode sequence (v0.20+ an error; v0.18-v0.19
    # capped the capture sizes and warned: facts)
    Cover(
        "config_error",
        r"exceeds available Mamba cache blocks",
        "config_error",
        (
            R(r"^max_num_seqs \($", "max_num_seqs", 1024),
            R(r"Mamba cache blocks \($", "mamba_cache_blocks", 939),
            R(r"at most $", None, 939),
        ),
        extra={"variant": "max_num_seqs_above_mamba_blocks"},
    ),
    Cover(
        "config_error",
        r"^Capping cudagraph capture sizes",
        "facts",
        (
            R(r"from max $", None, 512),
            R(r"from max \{\} to $", "cudagraph_max_capture_size", 256),
            R(r"Mamba cache blocks \($", "mamba_cache_blocks", 300),
        ),
    ),
    Cover(
        "config_error",
        r"^No valid cudagraph capture sizes remain",
        "facts",
        (R(r"Mamba cache blocks \($", "mamba_cache_blocks", 4), R(r"capture size was $", None, 8)),
        extra={"cudagraph_max_capture_size": 0},
    ),
    # --- quantization --------------------------------------------------------------------------
    Cover(
        "quantization",
        r"quantization method|Quantization scheme",
        "quant_error",
        (
            R(r"quantization method $", "quantization", "fp8"),
            R(r"(?:Minimum|Min|Required) capability: $", "min_capability", 89),
            R(r"Current capability: $", "current_capability", 86),
        ),
    ),
    Cover(
        "quantization",
        r"^Bfloat16 is only supported",
        "quant_error",
        (
            R(r"Your $", "gpu_name", "Tesla T4"),
            R(r"has compute capability $", None, "7", expr=r"\[0\]"),  # 0.5.5: major.minor
            R(r"has compute capability $", None, "7.5", expr=r"version_str"),
            R(r"has compute capability \{\}\.$", None, "5"),
        ),
    ),
    # --- too-long requests ---------------------------------------------------------------------
    Cover(
        "too_long",
        r"^(?!.*characters \(more than)(?:.*maximum context length is|.*maximum model length of|.*is too long)",
        "too_long",
        _TOO_LONG_ROLES,
        fill=_TOO_LONG_FILL,
    ),
    Cover(
        "too_long",
        r"characters \(more than",
        "too_long",
        (
            R(r"context length is $", "max_model_len", 4096),
            R(r"you requested $", "max_tokens", 1000),
            R(r"prompt contains $", "prompt_chars", 900000),
            R(r"more than $", None, 786432),
            R(r"upper bound for $", "prompt_tokens_at_least", 31744),
        ),
    ),
    # --- engine death --------------------------------------------------------------------------
    Cover(
        "engine_death",
        r".",
        "engine_dead",
        (
            R(r"proc $|process $|RayWorkerProc rank=$|^Worker $", None, "EngineCore_DP0"),
            R(r"exit code: $|pid $", None, 1),
            R(r"proc\(s\): $", None, "{'EngineCore_DP0': 1}"),
            R(r"with error '$", None, "boom"),
            R(r"original error: $", None, "ValueError('boom')"),
        ),
    ),
    # --- startup / ready -----------------------------------------------------------------------
    Cover(
        "ready",
        r"^(?:Available routes are|Starting vLLM|init engine)",
        "phase",
        (
            R(r"http://$|https://$", None, "0.0.0.0"),
            R(r"API server $", None, 0),
            R(r":$", None, 8000),
            R(r" on $", None, "http://0.0.0.0:8000"),
            R(r"took $", None, 25.99),
            R(r"compilation: $", None, 10.5),
            R(r"language_model: $", None, 9.5),
            R(r"encoder: $", None, 1.0),
        ),
        Phase.READY,
    ),
    Cover(
        "ready",
        r"server version",
        "run_start",
        (R(r"version $", "vllm_version", "0.9.2"), R(r"serving model $", "model", "Qwen/Qwen3-8B")),
        Phase.CONFIG,
    ),
    # --- configuration lines -------------------------------------------------------------------
    Cover(
        "config",
        r"^Chunked prefill is enabled",
        "config",
        (R(r"max_num_batched_tokens=$", "max_num_batched_tokens", 2048),),
    ),
    Cover(
        "config",
        r"^Initializing an? (?:V[01] )?LLM engine \(v\{0\}\) with config: \{1\}",
        "run_start",
        (
            R(r"\(v$", "vllm_version", "0.10.1"),
            # the config string never ends with a value the catalog reads (VllmConfig.__str__ ends with
            # compilation_config={...})
            R(r"with config: $", None, "model='Qwen/Qwen3-8B', max_seq_len=32768, tensor_parallel_size=2, seed=0"),
            R(r"use_cached_outputs=$", None, True),
        ),
        extra={"model": "Qwen/Qwen3-8B", "max_model_len": 32768, "tensor_parallel_size": 2},
    ),
    Cover(
        "config",
        r"LLM engine \(v\{0\}\) with config: model=",
        "run_start",
        (
            R(r"\(v$", "vllm_version", "0.5.5"),
            R(r"config: model=$", "model", "Qwen/Qwen3-8B"),
            R(r"max_seq_len=$", "max_model_len", 32768),
            R(r"tensor_parallel_size=$", "tensor_parallel_size", 2),
            R(r"pipeline_parallel_size=$", "pipeline_parallel_size", 1),
            R(r"quantization=$", "quantization", "fp8"),
            R(r"kv_cache_dtype=$", "kv_cache_dtype", "auto"),
            R(r"enforce_eager=$", "enforce_eager", False),
        ),
        fill=r"=$",  # the other fields of the config line
    ),
    Cover("config", r"^Using max model len", "config", (R(r"len $", "max_model_len", 32768),)),
    Cover(
        "config",
        r"^args: \{0\}$",
        "config",
        (R(r"args: $", None, "Namespace(host='0.0.0.0', model='Qwen/Qwen3-8B', max_model_len=16384)"),),
        extra={"model": "Qwen/Qwen3-8B", "max_model_len": 16384},
    ),
    Cover(
        "config",
        r"^non-default args",
        "config",
        (R(r"args: $", None, "{'model': 'Qwen/Qwen3-8B', 'max_model_len': 32768, 'gpu_memory_utilization': 0.95}"),),
        extra={"model": "Qwen/Qwen3-8B", "max_model_len": 32768, "gpu_memory_utilization": 0.95},
    ),
    Cover(
        "config",
        r"in world size",
        "config",
        (R(r"^rank $", None, 0), R(r"world size $", None, 1)),
        extra={"tensor_parallel_size": 1, "pipeline_parallel_size": 1},
        fill=r"rank $",
    ),
)

#: Rows of the table the catalog does not recognise on purpose, with the reason.
NOT_COVERED: Tuple[Tuple[str, str, str], ...] = (
    (
        "kv_capacity",
        r"attention-free model",
        "a misconfigured attention-free model (blocks allocated where none should be), not a capacity "
        "problem; it surfaces as a plain ValueError",
    ),
    (
        "kv_sizing",
        r"^Multiplying the GPU KV cache size by the",
        "a note on context-parallel scaling; the KV cache size line that follows carries the result",
    ),
    (
        "kv_sizing",
        r"^Free memory after profiling",
        "a DEBUG intermediate of determine_available_memory; the KV cache budget it leads to is read from "
        "'Available KV cache memory'",
    ),
    (
        "weights",
        r"^Loading model weights took in total \{0\}$",
        "Intel Gaudi (HPU) runner only; its value is a free-form memory summary string",
    ),
    (
        "config",
        r"^Dumping input data for V1 LLM engine",
        "printed by dump_input after a failed step: the failure itself is read from its traceback and the "
        "config repeats the start line's",
    ),
    (
        "oom",
        r"^Out of memory! No free blocks are available\.$",
        "v0.5 V0 block manager internal error, not a device out-of-memory (the scheduler preempts first)",
    ),
    (
        "oom",
        r"Out Of Memory",
        "the P2P-NCCL KV connector's transfer buffer (disaggregated prefill) is full; the transfer is retried, "
        "not a device out-of-memory",
    ),
)


def cover_of(row: dict) -> Tuple[Optional[Cover], Optional[str]]:
    """The Cover (or the NOT_COVERED reason) that applies to ``row``; exactly one must."""
    covers = [c for c in COVER if c.family == row["family"] and re.search(c.template, row["template"])]
    skips = [r for f, t, r in NOT_COVERED if f == row["family"] and re.search(t, row["template"])]
    assert len(covers) + len(skips) == 1, (row["template"][:120], [c.template for c in covers], skips)
    return (covers[0], None) if covers else (None, skips[0])


def role_for(cover: Cover, param: dict) -> Optional[Role]:
    """The first role that fits ``param``; roles that also fit must name the same data key (so
    that an earlier, looser role can never hide the value a later one asserts)."""
    fits = [
        r
        for r in cover.roles
        if re.search(r.before, param["before"]) and (r.expr is None or re.search(r.expr, param["expr"]))
    ]
    assert len({r.key for r in fits}) <= 1, f"ambiguous roles for {param}: {fits}"
    return fits[0] if fits else None


_FILLER = {"int": 7, "float": 1.5, "gib": 2.5, "str": "x"}


def render_value(value: Any, param: dict) -> str:
    spec, style, ptype = param["spec"], param["style"], param["type"]
    if style == "%":
        conv = spec[-1:] or "s"
        if conv == "r":
            return repr(value)
        if conv == "s":
            return _plain(value, ptype)
        return ("%" + spec) % value
    if spec:
        return format(value, spec)
    return _plain(value, ptype)


def _plain(value: Any, ptype: str) -> str:
    if isinstance(value, float) and ptype == "gib":
        return str(round(value, 2))  # format_gib / GiB(): round(b / GiB_bytes, 2)
    return str(value)


def render_message(row: dict, cover: Cover) -> str:
    """The message of ``row``, its placeholders given their roles' values."""
    return row["template"].format(*render_values(row, cover))


def render_args(row: dict, cover: Cover) -> Tuple[str, ...]:
    """The arguments of an exception ``row`` raises with several (its ``args``), rendered."""
    values = render_values(row, cover)
    return tuple(piece.format(*values) for piece in row["args"])


def render_values(row: dict, cover: Cover) -> List[str]:
    values = []
    for p in row["params"]:
        role = role_for(cover, p)
        if role is None:
            assert cover.fill and re.search(cover.fill, p["before"]), f"no role for {p} in {row['template'][:90]!r}"
        value = role.value if role else _FILLER[p["type"]]
        try:
            values.append(render_value(value, p))
        except (TypeError, ValueError) as e:
            raise AssertionError(f"cannot render {value!r} for {p} in {row['template'][:80]!r}: {e}") from e
    return values


_DATE = "08-20 10:18:39"


def process_prefix(version: str, file: str) -> str:
    """The ``(NAME pid=N) `` that vLLM's output decoration of that era puts before each line."""
    if not FORMATS[version]["process_prefix_on_output"]:
        return ""
    if vkey(version) >= (0, 10, 2):
        return "(APIServer pid=4242) " if file.startswith("vllm/entrypoints/") else "(EngineCore_DP0 pid=4243) "
    if file.startswith("vllm/v1/worker/"):
        return "(VllmWorker rank=0 pid=4243) "
    if file.startswith(("vllm/worker/", "vllm/executor/")):
        return "(VllmWorkerProcess pid=4243) "
    return ""


def record_prefix(version: str, level: str, file: str) -> str:
    fmt = FORMATS[version]["format"]
    name = file.rsplit("/", 1)[-1]
    head = fmt % {
        "levelname": level.upper(),
        "asctime": _DATE,
        "filename": name,
        "fileinfo": name,
        "lineno": 123,
        "process": 4243,
        "vllm_process_name": "EngineCore_DP0",
        "message": "\x00",
    }
    return head.split("\x00")[0]


def shapes(row: dict, version: str, message: str, args: Tuple[str, ...] = ()) -> List[Tuple[str, List[str]]]:
    """``(shape name, physical lines)`` in which ``version`` prints ``message``; ``args``: the
    exception's several arguments, when it is raised with several (printed as their tuple:
    ``str(exc)`` is ``str(exc.args)``, ``repr(exc)`` is ``Name('a', 'b')``)."""
    site = next(s for s in row["sites"] if version in s["releases"])
    file, level = site["file"], row["level"]
    proc = process_prefix(version, file)
    if level == "tqdm":
        return [("tqdm", [f"{proc}{message}: 100%|##########| 35/35 [00:43<00:00,  1.24s/it]"])]
    if level == "repr":
        level = "debug"  # logger.debug(profile_result)
    if level.startswith("raise:") or level == "assert":
        exc = "AssertionError" if level == "assert" else level.split(":", 1)[1]
        line = f"{exc}: {repr(args) if args else message}"
        # as the traceback's last line on stderr, and as logged by logger.exception in core.py
        logged = record_prefix(version, "error", "vllm/v1/engine/core.py")
        out = [("stderr", [proc + line]), ("logged", [proc + logged + line])]
        if args:  # and its repr, as a wrapper quotes it ("original error: RuntimeError('a', 'b')")
            out.append(("repr", [proc + logged + f"Engine core initialization failed (original error: {exc}{args!r})"]))
        return out
    head = proc + record_prefix(version, level, file)
    # NewLineFormatter: every line of a multi-line message repeats the prefix
    return [("record", [head + part for part in message.split("\n")])]


def cases():
    out = []
    for row in ROWS:
        cover, reason = cover_of(row)
        if cover is None:
            continue
        versions = sorted({row["releases"][0], row["releases"][-1]}, key=vkey)
        for v in versions:
            message = render_message(row, cover)
            # an exception raised with several arguments: as printed (their tuple), and joined
            forms = [render_args(row, cover), ()] if "args" in row else [()]
            for args in forms:
                for shape, lines in shapes(row, v, message, args):
                    tuple_form = ":args" if args else ""
                    out.append(
                        pytest.param(
                            row, cover, lines, id=f"{row['family']}:{v}:{shape}{tuple_form}:{row['template'][:48]}"
                        )
                    )
    return out


def close(got: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    return got == want


def expected(row: dict, cover: Cover) -> Dict[str, Any]:
    want: Dict[str, Any] = dict(cover.extra)
    for p in row["params"]:
        role = role_for(cover, p)
        if role is not None and role.key is not None:
            want[role.key] = role.value if role.expect is None else role.expect
    return want


def expected_kind(row: dict, cover: Cover) -> str:
    if cover.template == r"^User-specified max_model_len" and not row["level"].startswith("raise"):
        return "facts"  # logged when VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a fact about the limits
    return cover.kind


@pytest.mark.parametrize("row,cover,lines", cases())
def test_wording_is_recognised_with_its_numbers(row, cover, lines):
    cat = Catalog()
    events = [e for i, line in enumerate(lines, 1) for rec in unwrap("w", i, line) for e in cat.recognise(rec)]
    kind = expected_kind(row, cover)
    hits = [e for e in events if e.kind == kind]
    assert hits, (lines, [(e.kind, e.pattern) for e in events])
    merged: Dict[str, Any] = {}
    for e in hits:
        for k, v in e.data.items():
            merged.setdefault(k, v)
    want = expected(row, cover)
    wrong = {k: (v, merged.get(k)) for k, v in want.items() if not close(merged.get(k), v)}
    assert not wrong, (lines, wrong)
    if cover.phase is not None:
        assert any(e.phase == cover.phase for e in events), [(e.pattern, e.phase) for e in events]
    assert cat.timeouts == 0
    if prefilter.available():  # the block pre-filter lets the line through (an anchor is whole in it)
        assert any(prefilter.candidate_starts((line + "\n").encode()) for line in lines), lines


def test_every_row_is_covered_or_excused_and_no_entry_is_stale():
    for row in ROWS:
        cover_of(row)  # asserts exactly one applies
    used_covers = {id(c) for row in ROWS for c in [cover_of(row)[0]] if c is not None}
    assert [c.template for c in COVER if id(c) not in used_covers] == []
    used_skips = {cover_of(row)[1] for row in ROWS} - {None}
    assert {r for _, _, r in NOT_COVERED} == used_skips


def test_the_table_spans_vllm_0_5_to_the_newest_release():
    releases = FRAMES["releases"]
    minors = {tuple(vkey(v)[:2]) for v in releases}
    assert len(minors) >= 10 and min(minors) <= (0, 5) and releases == sorted(releases, key=vkey)
    assert set(FORMATS) == set(releases)
    # every release prints the families the catalog lives on
    for v in releases:
        families = {r["family"] for r in ROWS if v in r["releases"]}
        assert {"kv_capacity", "weights", "config", "ready", "too_long"} <= families, v


def test_each_release_logger_format_is_one_the_envelopes_peel():
    for v, fmt in FORMATS.items():
        line = process_prefix(v, "vllm/v1/worker/gpu_worker.py") + record_prefix(v, "info", "vllm/worker/worker.py")
        [rec] = unwrap("w", 1, line + "Available KV cache memory: 1.0 GiB")
        assert rec.vllm_header and rec.text == "Available KV cache memory: 1.0 GiB", (v, fmt, rec)


# --- the frame table ---------------------------------------------------------------------------

#: The phase each frames.json tag proves (vllm_doctor.frames.TAG_PHASE must agree).
PHASE_OF_TAG = {
    "weight_load": Phase.LOADING_WEIGHTS,
    "profile": Phase.WEIGHTS_LOADED,
    "kv_init": Phase.KV_SIZING,
    "kernel_warmup": Phase.GRAPH_CAPTURE,
    "graph_capture": Phase.GRAPH_CAPTURE,
    "sampler_warmup": Phase.WARMUP,
    "startup": Phase.CONFIG,
    "runtime": Phase.SERVING,
    "wake_up": Phase.SERVING,
}


@pytest.mark.parametrize("func,entry", sorted(FRAMES["functions"].items()), ids=sorted(FRAMES["functions"]))
def test_frames_tag_every_phase_function_of_vllm(func, entry):
    tag = entry["phase"]
    assert func in TAG_FUNCS[tag], f"{func} ({entry['files'][0]}) is not tagged {tag}"
    for path in entry["files"][:3]:
        tags = frame_tags(func, "/usr/lib/python3/dist-packages/" + path)
        assert phase_of(tags) == PHASE_OF_TAG[tag], (func, path, tags)


def test_each_tag_proves_its_phase():
    assert {t: p for t, p in TAG_PHASE if t in PHASE_OF_TAG} == PHASE_OF_TAG


def test_a_hard_wrapped_kernel_warmup_frame_is_still_a_warmup_frame():
    # t016: the only frame names a generic "_warmup", in model_executor/warmup/deep_gemm_warmup.py
    tags = frame_tags(
        "_warmup", "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/warmup/deep_gemm_warmup.py"
    )
    assert phase_of(tags) == Phase.GRAPH_CAPTURE
