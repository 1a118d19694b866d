"""What a traceback's frames say about where a failure happened.

vLLM's startup runs in a fixed order (load weights -> profile -> allocate the KV cache ->
capture CUDA graphs -> warm up the sampler), and each step has its own functions. A
frame or a code line naming one of them tags the failure; :func:`phase_of` turns tags
into the :class:`~vllm_doctor.events.Phase` they prove, most specific first.

Function names are read from the vLLM source: ``vllm/v1/worker/gpu_model_runner.py``
(``load_model``, ``profile_run``, ``capture_model``, ``_capture_cudagraphs``,
``_dummy_sampler_run``, ``_dummy_pooler_run``), ``vllm/worker/model_runner.py`` (V0
``capture_model``, ``CUDAGraphRunner.capture``), ``model_executor/model_loader/*``
(``load_weights``, ``weight_loader``, ``process_weights_after_loading``),
``model_executor/layers/*`` (``create_weights``, ``gptq_marlin_repack``),
``vllm/v1/worker/gpu_worker.py`` (``init_device``, ``determine_available_memory``),
``vllm/worker/worker.py`` (``determine_num_available_blocks``, ``initialize_cache``,
``raise_if_cache_size_invalid``), ``vllm/v1/engine/core.py`` (``run_busy_loop``,
``_initialize_kv_caches``), ``vllm/engine/async_llm_engine.py`` (``run_engine_loop``,
``engine_step``), ``vllm/entrypoints/openai/serving_engine.py`` (``_validate_input``),
compressed-tensors ``_check_scheme_supported``; PyTorch ``torch/cuda/graphs.py``.
"""

from __future__ import annotations

from typing import Iterable, Optional, Set

import regex

from .events import Phase

TAG_FUNCS = {
    "sampler_warmup": {"_dummy_sampler_run", "_dummy_pooler_run", "dummy_metadata", "_dummy_sampler"},
    "graph_capture": {
        "capture_model",
        "_capture_cudagraphs",
        "capture_end",
        "capture_begin",
        "_capture_graphs",
        "capture_graph",
        "_capture",
    },
    "weight_load": {
        "load_model",
        "load_weights",
        "_load_weights",
        "weight_loader",
        "create_weights",
        "get_model",
        "_initialize_model",
        "initialize_model",
        "process_weights_after_loading",
        "gptq_marlin_repack",
        "awq_marlin_repack",
        "load_state_dict",
        "_load_module",
        "load_weights_and_postprocess",
    },
    "profile": {"profile_run", "_profile_run", "determine_available_memory", "determine_num_available_blocks"},
    "kv_init": {
        "initialize_cache",
        "initialize_kv_cache",
        "_initialize_kv_caches",
        "get_kv_cache_config",
        "get_kv_cache_configs",
        "check_enough_kv_cache_memory",
        "_check_enough_kv_cache_memory",
        "raise_if_cache_size_invalid",
        "_allocate_kv_cache",
        "initialize_from_config",
    },
    "startup": {
        "init_device",
        "_init_executor",
        "make_async_mp_client",
        "wait_for_engine_startup",
        "launch_core_engines",
        "build_async_engine_client",
        "build_async_engine_client_from_engine_args",
        "create_engine_config",
        "from_engine_args",
        "_init_workers_ray",
        "init_worker",
        "request_memory",
        "_run_workers_init",
        "init_worker_distributed_environment",
    },
    "runtime": {
        "run_busy_loop",
        "execute_model",
        "engine_step",
        "run_engine_loop",
        "step_async",
        "output_handler",
        "_process_engine_step",
        "process_input_queue",
        "execute_model_async",
        "step_with_batch_queue",
        "_run_engine",
        "sample_tokens",
        "get_output_async",
    },
    "too_long": {
        "_validate_input",
        "_validate_tokens",
        "_token_len_check",
        "_validate_model_input",
        "_validate_model_inputs",
        "_validate_prompt",
    },
    "quant_check": {"_check_scheme_supported", "verify_quantization", "_verify_quantization"},
    # a single request whose size drives the allocation: prompt logprobs over a long prompt ...
    "oversized_input": {
        "_get_prompt_logprobs",
        "get_prompt_logprobs",
        "_get_prompt_logprobs_dict",
    },
    # ... or a large image or video through the multimodal encoder
    "multimodal_input": {
        "_process_image_input",
        "_process_video_input",
        "get_multimodal_embeddings",
        "_execute_mm_encoder",
        "embed_multimodal",
    },
}
_FUNC_TAG = {f: tag for tag, funcs in TAG_FUNCS.items() for f in funcs}
#: Functions that only run for quantized weights (a second tag beside their phase tag):
#: ``vllm/_custom_ops.py`` repacks of GPTQ / AWQ checkpoints for the Marlin kernels.
QUANTIZED_FUNCS = frozenset(
    {"gptq_marlin_repack", "awq_marlin_repack", "gptq_marlin_moe_repack", "awq_marlin_moe_repack"}
)
_CALLS = regex.compile(r"[A-Za-z_]\w*")

#: Tags in order of specificity; the first present decides the phase.
TAG_PHASE = (
    ("sampler_warmup", Phase.WARMUP),
    ("graph_capture", Phase.GRAPH_CAPTURE),
    ("weight_load", Phase.LOADING_WEIGHTS),
    ("profile", Phase.WEIGHTS_LOADED),
    ("kv_init", Phase.KV_SIZING),
    ("quant_check", Phase.CONFIG),
    ("startup", Phase.CONFIG),
    ("too_long", Phase.SERVING),
    ("runtime", Phase.SERVING),
)


def frame_tags(func: str, path: str) -> Set[str]:
    """Tags for one frame ``File "path", line N, in func``."""
    tags: Set[str] = set()
    tag = _FUNC_TAG.get(func)
    if tag:
        tags.add(tag)
    if func in QUANTIZED_FUNCS or "/layers/quantization/" in path:
        tags.add("quantized_weights")  # a quantized checkpoint is being loaded or run
    if path.endswith("torch/cuda/graphs.py"):
        tags.add("graph_capture")
    elif "/model_loader/" in path:
        tags.add("weight_load")
    elif func == "__init__" and "/model_executor/" in path:
        tags.add("weight_load")  # building the model allocates its weights
    elif func == "__init__" and ("/v1/engine/core.py" in path or "/executor/" in path):
        tags.add("startup")
    return tags


def code_tags(code: str) -> Set[str]:
    """Tags for a source line printed under a frame (``self.model_runner.capture_model(...)``)."""
    tags: Set[str] = set()
    for name in _CALLS.findall(code[:400]):
        tag = _FUNC_TAG.get(name)
        if tag:
            tags.add(tag)
        if name in QUANTIZED_FUNCS:
            tags.add("quantized_weights")
    return tags


def phase_of(tags: Iterable[str]) -> Optional[Phase]:
    """The most specific phase the tags prove, or None."""
    present = set(tags)
    for tag, phase in TAG_PHASE:
        if tag in present:
            return phase
    return None
