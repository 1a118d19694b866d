"""The settings that differ between two runs, and what each one does to memory and start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..catalog.config import CONFIG_KEYS
from ..run import Line, Run
from .values import Value, args_line, parse_args, plain, show

#: What names the model: compared as the ``model`` row (an environment change), not as a flag.
IDENTITY = frozenset({"model", "served_model_name", "model_tag"})


@dataclass
class Setting:
    """A setting that differs: vLLM's name for it, each run's value (``"(default)"`` where the
    run's non-default args leave it out) and the line that printed each."""

    key: str
    old: Any
    new: Any
    old_line: Optional[Line]
    new_line: Optional[Line]


def differing_settings(old: Run, new: Run, ov: Dict[str, Value], nv: Dict[str, Value]) -> Tuple[List[Setting], bool]:
    """The settings that differ between the runs (config values both printed, and arguments
    one run set and the other left at vLLM's default), and whether both runs' argument lines
    are in the log (so "same args" can be said)."""
    okind, oargs = parse_args(args_line(old))
    nkind, nargs = parse_args(args_line(new))
    changed: Dict[str, Setting] = {}
    for key in CONFIG_KEYS:
        if key in IDENTITY or key not in ov or key not in nv:
            continue
        if ov[key].value != nv[key].value:
            changed[key] = Setting(key, ov[key].value, nv[key].value, ov[key].line, nv[key].line)
    if okind and nkind:
        if okind == nkind == "all":
            keys = [k for k in oargs if k in nargs]
        elif okind == nkind:
            keys = list(dict.fromkeys([*oargs, *nargs]))
        else:
            keys = list(oargs if okind == "non-default" else nargs)
        for key in keys:
            if key in changed or key in IDENTITY:
                continue
            a, b = oargs.get(key), nargs.get(key)
            if a == b or (okind != nkind and None in (a, b) and (a if okind == "all" else b) is None):
                continue  # an option the older release (its Namespace lists them all) did not have
            a_val = plain(a) if a is not None else "(default)"
            b_val = plain(b) if b is not None else "(default)"
            if a_val == b_val:
                continue
            changed[key] = Setting(key, a_val, b_val, args_line(old), args_line(new))
    return list(changed.values()), bool(okind and nkind)


#: What a changed setting does, in a phrase (vLLM's own docs for each flag; shared/domain.md).
EFFECTS = {
    "max_model_len": "the longest request, which bounds what one sequence may take of the KV cache",
    "gpu_memory_utilization": "the share of the GPU vLLM takes; the KV cache gets what is left of it",
    "kv_cache_dtype": "bytes per cached token (fp8 halves them)",
    "quantization": "what the weights take",
    "dtype": "what weights and activations take",
    "tensor_parallel_size": "how weights and KV cache are split over GPUs",
    "pipeline_parallel_size": "how layers are split over GPUs",
    "data_parallel_size": "how many engine copies run",
    "max_num_seqs": "the batch size: CUDA graph sizes, the sampler warm-up and activation peak grow with it",
    "max_num_batched_tokens": "tokens per step: the activation peak profiled at start-up grows with it",
    "enforce_eager": "CUDA graphs: captured (memory and start-up time) only without eager mode",
    "enable_chunked_prefill": "how prompts are scheduled",
    "enable_prefix_caching": "whether shared prompt prefixes are reused from the KV cache",
    "block_size": "tokens per KV cache block",
    "cpu_offload_gb": "weights kept in host memory",
    "swap_space": "host memory for swapped KV blocks (V0)",
    "compilation_config": "torch.compile and CUDA graph capture (sizes, mode)",
    "max_logprobs": "the logits buffer of the sampler warm-up",
    "limit_mm_per_prompt": "multimodal inputs per prompt, which the profiling run sizes for",
}
#: The settings that bear on each failure class (what its rule's remedies change).
RELATED = {
    "kv_cache_capacity": (
        "max_model_len",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "quantization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "cpu_offload_gb",
        "compilation_config",
        "enforce_eager",
    ),
    "cuda_graph_capture_oom": (
        "enforce_eager",
        "max_num_seqs",
        "gpu_memory_utilization",
        "compilation_config",
        "cuda_graph_sizes",
        "max_cudagraph_capture_size",
    ),
    "sampler_warmup_oom": ("max_num_seqs", "gpu_memory_utilization", "max_logprobs"),
    "weight_load_oom": (
        "quantization",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "dtype",
        "cpu_offload_gb",
        "gpu_memory_utilization",
    ),
    "startup_memory_contention": ("gpu_memory_utilization",),
    "config_limit_error": ("max_model_len", "max_num_batched_tokens", "max_num_seqs"),
    "quantization_unsupported": ("quantization", "dtype", "kv_cache_dtype"),
    "runtime_oom": ("gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs", "limit_mm_per_prompt"),
    "preemption_storm": ("max_num_seqs", "max_model_len", "gpu_memory_utilization", "kv_cache_dtype"),
    "request_too_long": ("max_model_len",),
}
#: How failure messages name a setting (vLLM prints flag names, CLI spellings and phrases).
NAMED_AS = {
    "max_model_len": ("max_model_len", "max-model-len", "max seq len", "max_seq_len"),
    "gpu_memory_utilization": ("gpu_memory_utilization", "gpu-memory-utilization"),
    "max_num_seqs": ("max_num_seqs", "max-num-seqs"),
    "max_num_batched_tokens": ("max_num_batched_tokens", "max-num-batched-tokens"),
    "enforce_eager": ("enforce_eager", "enforce-eager", "eager mode"),
    "kv_cache_dtype": ("kv_cache_dtype", "kv-cache-dtype"),
    "quantization": ("quantization",),
    "tensor_parallel_size": ("tensor_parallel_size", "tensor-parallel-size"),
}
#: Settings that change what the KV cache gets (for "the config changed it").
CAPACITY_SETTINGS = (
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "quantization",
    "dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enforce_eager",
    "cpu_offload_gb",
    "block_size",
    "compilation_config",
    "limit_mm_per_prompt",
)
#: The order config differences are listed in: what ran (version, engine, GPU, model), then the
#: settings in the tuning order of shared/domain.md (fit the model, the length, KV headroom,
#: then batching), then every other flag by name.
CONFIG_ORDER = (
    "vllm_version",
    "engine",
    "model_runner",
    "gpu_total_gib",
    "model",
    "quantization",
    "dtype",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "cpu_offload_gb",
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_dtype",
    "block_size",
    "enforce_eager",
    "compilation_config",
    "max_num_seqs",
    "max_num_batched_tokens",
)
ENVIRONMENT = ("vllm_version", "engine", "model_runner", "gpu_total_gib", "model")
#: The start-up phase each failure class happens in, for a run whose excerpt shows no phase
#: marker (the order of vllm/v1/engine/core.py EngineCore.__init__ and gpu_worker.py: the free
#: memory check in init_device, load_model, determine_available_memory and the KV cache,
#: compile_or_warm_up_model: CUDA graph capture, then the sampler warm-up).


def change_text(s: Setting) -> str:
    return f"{s.key} {show(s.old)} -> {show(s.new)}"
