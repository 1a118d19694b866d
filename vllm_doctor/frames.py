"""What a traceback's frames say about where a failure happened.

vLLM's startup runs in a fixed order (load weights -> profile -> allocate the KV cache ->
capture CUDA graphs -> warm up the sampler), and each step has its own functions. A
frame or a code line naming one of them tags the failure; :func:`phase_of` turns tags
into the :class:`~vllm_doctor.events.Phase` they prove, most specific first.

The table is checked against vLLM's own releases: ``tools/wordings/extract.py`` writes
``fixtures/wordings/frames.json`` (each phase function with the releases that define it) and
``tests/test_wordings.py`` asserts that :data:`TAG_FUNCS` tags every one of them with its phase.
Kernel warm-ups (``gpu_worker.compile_or_warm_up_model`` -> ``kernel_warmup``: DeepGEMM,
FlashInfer autotune, Triton/CuTe DSL JIT warm-ups, ``vllm/model_executor/warmup/``) run after
the KV cache is allocated and before CUDA graph capture: the ``kernel_warmup`` tag proves that
post-KV warm-up step (:data:`~vllm_doctor.events.Phase` ``GRAPH_CAPTURE``, the warm-up phase
before capture). ``wake_up`` (sleep mode, ``CuMemAllocator``) re-allocates a sleeping
server's memory: serving, not startup.

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
    # vllm/v1/worker/gpu_worker.py compile_or_warm_up_model (V0: worker.py): kernel warm-up,
    # CUDA graph capture and the sampler warm-up, all after the KV cache is allocated; which
    # one, only a deeper frame says (hunt4 h01: its own frame printed, the step's cut)
    "post_kv": {"compile_or_warm_up_model", "_warm_up_model"},
    # vllm/model_executor/warmup/* and vllm/v1/worker/gpu/warmup.py, reached from kernel_warmup /
    # warmup_kernels (fixtures/wordings/frames.json lists each with its releases)
    "kernel_warmup": {
        "_autotune_cache_fingerprint",
        "_autotune_kimi_k3_kda_qkvg",
        "_clamp_warmup_tokens",
        "_collect_warmup_units",
        "_compile_cutedsl_warmup_units",
        "_compile_warmup_units",
        "_count_warmup_iterations",
        "_deepgemm_fp8_fp4_mega_moe_warmup",
        "_deepgemm_fp8_gemm_nt_warmup",
        "_deepgemm_grouped_fp8_gemm_nt_contiguous_warmup",
        "_deepseek_v4_sparse_mla_decode_autotune",
        "_expand_warmup_cases",
        "_flashinfer_autotune_cache_hash",
        "_flashinfer_autotune_skip_ops",
        "_flashinfer_autotune_token_counts",
        "_flashinfer_sparse_mla_decode_autotune",
        "_generate_optimal_warmup_m_values",
        "_get_fp8_fp4_mega_moe_warmup_key",
        "_iter_cutedsl_warmup_compile_units",
        "_load_shared_autotune_cache",
        "_materialize_warmup_case",
        "_qwen_gdn_warmup_config",
        "_replayssm_autotune_kwargs",
        "_resolve_flashinfer_autotune_file",
        "_run_flashinfer_autotune_dummy_runs",
        "_run_flashinfer_bf16_autotune_dummy_run",
        "_run_flashinfer_sparse_mla_decode_autotune",
        "_run_sparse_mla_decode_autotune_v2",
        "_select_mhc_warmup_token_sizes",
        "_select_tuned_winner",
        "_temporary_replayssm_autotune_state",
        "_tune_workload",
        "_warm_attn_res",
        "_warm_batch_memcpy_kernel",
        "_warm_causal_conv1d_fwd_kernel",
        "_warm_combine_topk_swa_indices_kernel",
        "_warm_compute_slot_mapping_kernel",
        "_warm_fa4_mla_prefill",
        "_warm_fused_gdn_decode_post_conv_mtp_kernel",
        "_warm_fused_post_conv_kernel",
        "_warm_fused_sigmoid_gating_delta_rule_update_kernel",
        "_warm_gated_rms_norm_kernel",
        "_warm_gluon_chunk_kda",
        "_warm_inkling_fa4_rel_attention",
        "_warm_mrope",
        "_warm_prefill_chunk_metadata_kernel",
        "_warm_recurrent_kda",
        "_warm_sparse_swa_prefill_metadata_kernel",
        "_warm_vision",
        "_warm_zero_kv_blocks_kernel",
        "_warm_zero_kv_blocks_with_runner_zeroer",
        "_warmup_bf16x3_router_gemm",
        "_warmup_block_count",
        "_warmup_block_counter",
        "_warmup_gemm_rs_ar",
        "_warmup_hc_head",
        "_warmup_kernels",
        "_warmup_kimi_k3_gemm_rs_ar",
        "_warmup_layer_mhc",
        "_warmup_ll_bf16_router_gemm",
        "_warmup_segmented_attention",
        "_zero_kv_warmup_config",
        "autotune_hisparse_flashinfer_attention",
        "b12x_warmup",
        "compile_triton_warmup",
        "cutedsl_warmup",
        "deep_gemm_warmup",
        "deepgemm_fp8_fp4_mega_moe_warmup",
        "deepgemm_fp8_gemm_nt_warmup",
        "deepgemm_grouped_fp8_gemm_nt_contiguous_warmup",
        "deepseek_v4_mhc_warmup",
        "deepseek_v4_sparse_mla_attention_warmup",
        "deepseek_v4_sparse_triton_warmup",
        "fa4_cutedsl_warmup",
        "flashinfer_autotune",
        "flashinfer_autotune_cache_hash",
        "flashinfer_autotune_filename",
        "flashinfer_autotune_root",
        "flashinfer_sparse_mla_decode_autotune_warmup",
        "kernel_warmup",
        "kimi_k3_triton_warmup",
        "mamba_triton_warmup",
        "minimax_m3_msa_warmup",
        "mixed_batch_attention_warmup",
        "qwen4_exp_qsa_triton_warmup",
        "qwen_triton_warmup",
        "qwen_vl_triton_warmup",
        "replayssm_autotune_warmup",
        "resolve_flashinfer_autotune_file",
        "resolve_flashinfer_autotune_v2_root",
        "resolve_rank_flashinfer_autotune_file",
        "rocm_segmented_attn_autotune_warmup",
        "run_mixed_prefill_decode_warmup",
        "sparse_mla_triton_warmup",
        "sparse_mla_triton_warmup_if_needed",
        "step5_dsa_warmup",
        "use_flashinfer_autotune_v2",
        "warm_v1_block_table_kernels",
        "warmup_kernels",
        "warmup_segmented_attention",
        "watermark_sample_warmup",
        "write_flashinfer_autotune_cache",
    },
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
        "_allocate_kv_cache_tensors",
        "initialize_kv_cache_tensors",
        "_reshape_kv_cache_tensors",
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
    # sleep mode: re-mapping a sleeping server's weights and KV cache (vllm/device_allocator/cumem.py)
    "wake_up": {"wake_up", "create_and_map"},
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
    # The API server tokenizing one request's prompt (vllm/entrypoints/openai/serving_engine.py,
    # 0.10 to 0.15: _tokenize_prompt_input(s)_async; the older names are FRAME_TAGS'). A
    # traceback cut in them, under "Error in preprocessing prompt inputs" (serving_chat.py's
    # logger.exception, 0.6.4 to 0.17), is a request the server rejected: its only raise of
    # vLLM's own there is the too-long error (hunt9 v14). Phase: serving (TAG_PHASE).
    "tokenize": {"_tokenize_prompt_input_async", "_tokenize_prompt_inputs_async"},
    "quant_check": {"_check_scheme_supported", "verify_quantization", "_verify_quantization"},
    # V1's sampler (vllm/v1/sample/ops/topk_topp_sampler.py, vllm/v1/sample/sampler.py;
    # 0.8.5 to 0.33): it runs for every step, and at startup in _dummy_sampler_run (profile_run,
    # compile_or_warm_up_model) with max_num_seqs dummy requests. No phase of its own
    # (TAG_PHASE): before anything was served it is the warm-up (CONDITIONAL_TAGS). The names
    # are the module-level functions only (a code line under a cut frame names one of them).
    "sampler": {
        "apply_top_k_top_p",
        "apply_top_k_only",
        "apply_top_k_top_p_pytorch",
        "apply_top_k_top_p_tpu",
        "flashinfer_sample",
        "compiled_random_sample",
        "aiter_sample",
        "xpu_sample",
    },
    # a single request whose size drives the allocation: prompt logprobs over a long prompt ...
    "oversized_input": {
        "_get_prompt_logprobs",
        "get_prompt_logprobs",
        "_get_prompt_logprobs_dict",
    },
    # ... or a large image or video through the multimodal encoder (tpu-inference's runner
    # jits it per image shape: maybe_jit_embed_multimodal_func, hunt7 q07)
    "multimodal_input": {
        "_process_image_input",
        "_process_video_input",
        "get_multimodal_embeddings",
        "_execute_mm_encoder",
        "embed_multimodal",
        "maybe_jit_embed_multimodal_func",  # tpu-inference's jitted encoder call (hunt7 q07; remedies2)
        # the encoder's output scattered into the prompt's embeddings (model_executor/models/utils.py,
        # 0.6.4.post1 to 0.33.0; hunt9 v17's failing frame; remedies3)
        "_merge_multimodal_embeddings",
        "merge_multimodal_embeddings",
        "merge_multimodal_embeddings_from_map",
    },
}
_FUNC_TAG = {f: tag for tag, funcs in TAG_FUNCS.items() for f in funcs}
#: Tags read from a frame's function only (``File "...", line N, in func``), never from a
#: source line under it: the pre-filter passes every frame line, but a source line only where
#: it names a :data:`TAG_FUNCS` function, whose names must stay within its gate.
FRAME_TAGS = {
    # serving_engine.py 0.5.5 to 0.9: _tokenize_prompt_input(s) -> _normalize_prompt_text_to_input /
    # _normalize_prompt_tokens_to_input, which end in _validate_input (0.5.5 to 0.15)
    "tokenize": {
        "_tokenize_prompt_input",
        "_tokenize_prompt_inputs",
        "_normalize_prompt_text_to_input",
        "_normalize_prompt_tokens_to_input",
    },
    # The API server's entry (vllm/entrypoints/openai/api_server.py run_server / run_server_worker,
    # 0.4 to 0.33): the engine starts under it (``async with build_async_engine_client``), then
    # serve_http serves. No phase of its own: with nothing served before the failure, the server
    # never came up (rules/tree.py failure_phase; hunt9 v04).
    "server_entry": {"run_server", "run_server_worker"},
}
_FRAME_TAG = {f: tag for tag, funcs in FRAME_TAGS.items() for f in funcs}
#: The executors' dispatch of a method to a worker: every startup step and the serving loop
#: run under them, so a traceback of these alone (its deeper frames cut) names no step and no
#: request. ``vllm/executor/multiproc_worker_utils.py`` ``_run_worker_process`` (V0, 0.5 to
#: 0.10), ``vllm/v1/executor/multiproc_executor.py`` ``worker_main`` / ``worker_busy_loop``
#: (0.6.6 to 0.33), ``worker_base.py`` ``execute_method`` (V0 and V1), ``vllm/utils``
#: ``run_method`` (0.8 to 0.10; ``v1/serial_utils.py`` later), ``collective_rpc``, ``_run_workers``.
DISPATCH_FUNCS = frozenset(
    {
        "_run_worker_process",
        "worker_main",
        "worker_busy_loop",
        "execute_method",
        "run_method",
        "collective_rpc",
        "_run_workers",
    }
)


def dispatch_only(frames) -> bool:
    """True when a failure's frames (function names, innermost last) are all executors'
    dispatch (:data:`DISPATCH_FUNCS`): the method the worker ran is cut from the paste."""
    return bool(frames) and all(f in DISPATCH_FUNCS for f in frames)


#: Functions that only run for quantized weights (a second tag beside their phase tag):
#: ``vllm/_custom_ops.py`` repacks of GPTQ / AWQ checkpoints for the Marlin kernels.
QUANTIZED_FUNCS = frozenset(
    {"gptq_marlin_repack", "awq_marlin_repack", "gptq_marlin_moe_repack", "awq_marlin_moe_repack"}
)
#: Functions that allocate the KV cache tensors, a second tag (``kv_alloc``) beside their
#: phase tag: an out-of-memory error there is the budget asking for more than the device can
#: give, not the profiling run's activation peak. ``vllm/worker/cache_engine.py``
#: ``_allocate_kv_cache`` and ``vllm/worker/worker.py`` ``_init_cache_engine`` (V0);
#: ``vllm/v1/worker/gpu_model_runner.py`` ``initialize_kv_cache_tensors``,
#: ``_allocate_kv_cache_tensors``, ``_reshape_kv_cache_tensors`` and ``vllm/v1/worker/utils.py``
#: ``allocate_kv_cache`` (0.33).
KV_ALLOC_FUNCS = frozenset(
    {
        "_allocate_kv_cache",
        "_init_cache_engine",
        "initialize_kv_cache_tensors",
        "_allocate_kv_cache_tensors",
        "_reshape_kv_cache_tensors",
        "allocate_kv_cache",
    }
)
#: vLLM's KV capacity checks, a second tag (``kv_check``): their only raise is the KV
#: capacity error, so a traceback cut inside one still says what failed.
#: ``vllm/worker/worker.py`` ``raise_if_cache_size_invalid`` (V0) and
#: ``vllm/v1/core/kv_cache_utils.py`` ``check_enough_kv_cache_memory`` (V1; 0.33:
#: ``_check_enough_kv_cache_memory``).
KV_CHECK_FUNCS = frozenset(
    {"raise_if_cache_size_invalid", "check_enough_kv_cache_memory", "_check_enough_kv_cache_memory"}
)
#: torch's ``nn.Module.to`` / ``.cuda()`` / ``.half()`` path (``torch/nn/modules/module.py``:
#: ``to`` -> ``_apply`` -> ``convert``, which calls ``t.to(device, ...)`` on each parameter):
#: a whole model's weights moving to the device, as loaders do (ipex-llm's ``model.to("xpu")``,
#: hunt6 p13), never one request. Not the forward path (``_call_impl``).
MODULE_MOVE_FUNCS = frozenset({"convert", "_apply", "to", "cuda", "xpu", "half", "bfloat16", "to_empty"})
#: Tags that place a failure only when nothing was served before it (the run had not reached
#: READY when it was printed): the sampler runs at startup only in its warm-up, and a model
#: moves its weights to the device while loading, but both may run later too (every step
#: samples; a trainer beside the engine moves its own model). Weaker than every TAG_PHASE tag.
CONDITIONAL_TAGS = (("sampler", Phase.WARMUP), ("weight_move", Phase.LOADING_WEIGHTS))
_CALLS = regex.compile(r"[A-Za-z_]\w*")

#: Tags in order of specificity; the first present decides the phase.
TAG_PHASE = (
    ("sampler_warmup", Phase.WARMUP),
    ("graph_capture", Phase.GRAPH_CAPTURE),
    ("weight_load", Phase.LOADING_WEIGHTS),
    ("kernel_warmup", Phase.GRAPH_CAPTURE),
    ("profile", Phase.WEIGHTS_LOADED),
    ("kv_init", Phase.KV_SIZING),
    ("kv_alloc", Phase.KV_SIZING),
    ("quant_check", Phase.CONFIG),
    ("startup", Phase.CONFIG),
    ("too_long", Phase.SERVING),
    ("tokenize", Phase.SERVING),
    ("wake_up", Phase.SERVING),
    ("runtime", Phase.SERVING),
    # Prompt logprobs are computed for a real request only (execute_model; no dummy or
    # warm-up run asks for them), so these frames place a failure in serving even where the
    # sampler's frames after them would read as its warm-up (hunt7 q25).
    ("oversized_input", Phase.SERVING),
    # Weaker than every step it runs (kernel warm-up, capture, sampler warm-up): only the
    # KV cache allocated before it is certain; graph capture is its first step that allocates.
    ("post_kv", Phase.GRAPH_CAPTURE),
    # Weakest: only where no other frame says more. vLLM builds the model under
    # `with target_device:` (vllm/model_executor/model_loader/base_loader.py load_model), so a
    # tensor created there passes through torch's device-context hook.
    ("device_ctx", Phase.LOADING_WEIGHTS),
)


#: A file of vLLM or of one of its platform plugins (``vllm_ascend``, ``vllm_omni``, ``vllm_gaudi`` ...),
#: or vLLM's own console script: ``setup.py`` / ``pyproject.toml`` ``[project.scripts] vllm =
#: "vllm.entrypoints.cli.main:main"`` installs ``bin/vllm`` in a venv or conda env, in
#: ``/usr/local/bin`` (pip as root, the Docker images), ``~/.local/bin`` (``pip --user``, pipx's
#: and uv tool's links), ``~/.local/pipx/venvs/vllm/bin/vllm``, ``~/.local/share/uv/tools/vllm/bin/vllm``;
#: Windows ``Scripts\vllm.exe`` / ``vllm-script.py``. Its frame (``File ".../bin/vllm", line 8, in
#: <module>``, then ``sys.exit(main())``) is vLLM's entry, never an application's (hunt8 u11).
_CONSOLE_SCRIPT = regex.compile(r"(?:^|[/\\])(?:bin|Scripts)[/\\]vllm(?:\.exe|-script\.py)?$")
_VLLM_PATH = regex.compile(r"(?:^|[/\\])vllm(?:_[a-z]+)?[/\\]|" + _CONSOLE_SCRIPT.pattern)


def vllm_console_script(path: str) -> bool:
    """True when a frame's ``path`` is vLLM's ``vllm`` console script (:data:`_CONSOLE_SCRIPT`)."""
    return _CONSOLE_SCRIPT.search(path) is not None


#: Packages vLLM itself runs on: their frames say nothing of who called them (a vLLM engine or
#: a trainer). Python's own library (``lib/python3.N/`` outside site-packages) is one too.
_RUNTIME_PACKAGES = regex.compile(
    r"/(?:site|dist)-packages/(?:torch\w*|intel_extension_for_pytorch|"
    r"habana_frameworks|triton|transformers|tokenizers|safetensors|huggingface_hub|ray|flashinfer|xformers|"
    r"flash_attn|vllm_flash_attn|bitsandbytes|compressed_tensors|numpy|uvicorn|uvloop|starlette|fastapi|anyio|"
    r"zmq|msgspec|cloudpickle|typing_extensions|_pytest|pluggy|click|tqdm)(?:[/._-]|$)"
    r"|/lib/python\d+(?:\.\d+)?/(?!(?:site|dist)-packages/)|^<"
)


def origin_tags(path: str) -> Set[str]:
    """Who wrote the code of a frame at ``path``: ``vllm_code`` (vLLM or its platform plugin),
    ``app_code`` (an application: a trainer such as ms-swift, TRL, verl, OpenRLHF, DeepSpeed,
    or a user's script; neither vLLM nor a package vLLM runs on), or nothing (torch, the
    Python library, another runtime package, a frame without a path). A traceback whose frames
    are app code and none vLLM's was raised outside vLLM (:mod:`vllm_doctor.rules.oom_provenance`)."""
    if not path:
        return set()
    if _VLLM_PATH.search(path):
        return {"vllm_code"}
    if _RUNTIME_PACKAGES.search(path):
        return set()
    return {"app_code"}


#: Files only the V0 engine runs (0.2 to 0.10: ``vllm/worker/`` model runners, workers and the
#: cache engine, ``vllm/engine/multiprocessing/`` MQLLMEngine, ``vllm/spec_decode/``), or
#: ``vllm/engine/llm_engine.py`` / ``async_llm_engine.py`` outside the functions V1 shares.
#: Not ``vllm/worker/worker_base.py`` (V1's workers subclass its ``WorkerBase`` and its
#: ``WorkerWrapperBase`` runs them, 0.8 to 0.10), ``vllm/executor/`` (V1's uniproc and Ray
#: executors subclass V0's there), ``vllm/engine/arg_utils.py`` / ``protocol.py`` (both engines').
_V0_PATH = regex.compile(
    r"/vllm/(?:worker/(?!worker_base\.py)|engine/multiprocessing/|engine/output_processor/|spec_decode/"
    r"|engine/(?:async_)?llm_engine\.py)"
)
#: Functions of ``vllm/engine/llm_engine.py`` / ``async_llm_engine.py`` V1 runs too: the class
#: methods that pick the V1 engine when ``VLLM_USE_V1`` is set (0.8.5 llm_engine.py:495-508,
#: 0.10.2 async_llm_engine.py:558-572); from 0.11 both files only alias V1's classes (``<module>``).
_SHARED_ENGINE_FUNCS = frozenset({"from_engine_args", "from_vllm_config", "<module>"})


def engine_of_frame(func: str, path: str) -> Optional[str]:
    """``v1`` or ``v0``: the engine a frame ``File "path", line N, in func`` proves runs
    (``vllm/v1/`` is V1's; :data:`_V0_PATH` files are V0's), or None (a file both run, or not
    vLLM's). The V0 engine was removed in 0.11 (``vllm/worker/`` is gone from 0.11.2)."""
    if "/vllm/v1/" in path:
        return "v1"
    m = _V0_PATH.search(path)
    if m is None:
        return None
    if "_engine.py" in m.group(0) and func in _SHARED_ENGINE_FUNCS:
        return None
    return "v0"


#: The offline entry's request methods (``vllm/entrypoints/llm.py`` ``LLM``; from 0.3x the
#: shared ``vllm/entrypoints/common/offline.py``): they run once the engine is up, for prompts.
#: Not ``__init__`` (the engine's startup runs under it).
OFFLINE_REQUEST_FUNCS = frozenset(
    {"generate", "chat", "encode", "embed", "classify", "score", "reward", "beam_search", "_run_engine"}
)
_OFFLINE_ENTRY = ("/vllm/entrypoints/llm.py", "/vllm/entrypoints/common/offline.py")


def frame_tags(func: str, path: str) -> Set[str]:
    """Tags for one frame ``File "path", line N, in func`` (and who wrote it: :func:`origin_tags`)."""
    tags: Set[str] = origin_tags(path)
    tag = _FUNC_TAG.get(func) or _FRAME_TAG.get(func)
    if tag:
        tags.add(tag)
    if func in QUANTIZED_FUNCS or "/layers/quantization/" in path:
        tags.add("quantized_weights")  # a quantized checkpoint is being loaded or run
    if func in KV_ALLOC_FUNCS:
        tags.add("kv_alloc")
    if func in KV_CHECK_FUNCS:
        tags.add("kv_check")
    if path.endswith(_OFFLINE_ENTRY) and func in OFFLINE_REQUEST_FUNCS or "/entrypoints/openai/serving_" in path:
        tags.add("runtime")  # a request: LLM.generate & co., or an API handler (serving_chat.py ...)
    if path.endswith("torch/utils/_device.py"):
        tags.add("device_ctx")
    if path.endswith("torch/nn/modules/module.py") and func in MODULE_MOVE_FUNCS:
        tags.add("weight_move")
    if "/vllm/v1/sample/" in path or "/vllm/v1/worker/gpu/sample/" in path:
        tags.add("sampler")
    if path.endswith("torch/cuda/graphs.py"):
        tags.add("graph_capture")
    elif "/model_executor/warmup/" in path or path.endswith("/v1/worker/gpu/warmup.py"):
        tags.add("kernel_warmup")  # every function there runs in the post-KV kernel warm-up
    elif "/model_loader/" in path:
        tags.add("weight_load")
    elif func == "__init__" and "/model_executor/" in path:
        tags.add("weight_load")  # building the model allocates its weights
    elif func == "__init__" and ("/v1/engine/core.py" in path or "/executor/" in path):
        tags.add("startup")
    return tags


#: A traceback's source line whose indentation a log shipper stripped (GKE's export, hunt4
#: h01): a Python statement, a call at its start (``self.model_runner._dummy_sampler_run(``,
#: ``return func(*args)``, ``a, b = x.sort(``).
_STATEMENT = regex.compile(r"(?:[\w.]+(?:, *[\w.]+)* = |return |await |yield )?[A-Za-z_][\w.]*\(")


#: IPython's arrow at the line that raised, in its numbered source listing (``---> 64
#: torch.empty(kv_cache_shape,``; the other listed lines are indented by their number).
_IPYTHON_ARROW = regex.compile(r"-+> *\d+ ")


def looks_like_code(text: str) -> bool:
    """True when ``text`` may be a traceback's source line: indented, a statement that
    starts with a call (:data:`_STATEMENT`) where a shipper stripped the indentation, or
    IPython's ``---> N`` arrow line (:data:`_IPYTHON_ARROW`)."""
    return text[:1].isspace() or _STATEMENT.match(text) is not None or _IPYTHON_ARROW.match(text) is not None


#: A traceback's source line that is a statement raising an exception or a string literal of
#: one (``raise RuntimeError(f"NCCL error: {error_str}")``, pynccl_wrapper.py; Python 3.11+
#: prints every line of a multi-line statement, 3.13 elides the middle: ``"CUDA out of memory
#: occurred when warming up sampler with "``, ``f"{num_reqs} dummy requests. ..."``): the
#: message's template in the source, never the message printed (hunt10 w03).
_SOURCE_STATEMENT = regex.compile(r"\s*(?:raise\s+[A-Za-z_][\w.]*\s*\(|(?:[rR]?[fF]|[fF][rR])[\"'])")


#: A placeholder of a message template: an f-string field (``{error_str}``, ``{x!r}``,
#: ``{n:.2f}``) or a %-format one (``%d``, ``%(name)s``).
_PLACEHOLDER = regex.compile(r"\{[A-Za-z_][^{}\n]*\}|%(?:\([A-Za-z_]\w*\))?[-+ #0]*\d*(?:\.\d+)?[sdifrx]\b")


def source_statement(text: str) -> bool:
    """True when ``text`` is a ``raise`` statement or an f-string literal of a traceback's
    source (:data:`_SOURCE_STATEMENT`) holding a placeholder (:data:`_PLACEHOLDER`): what it
    quotes is a template, not a message printed. A literal message (``raise ValueError("No
    available memory for the cache blocks. "``) is the message itself and stays one."""
    return _SOURCE_STATEMENT.match(text) is not None and _PLACEHOLDER.search(text) is not None


def code_tags(code: str) -> Set[str]:
    """Tags for a source line printed under a frame (``self.model_runner.capture_model(...)``)."""
    tags: Set[str] = set()
    for name in _CALLS.findall(code[:400]):
        tag = _FUNC_TAG.get(name)
        if tag:
            tags.add(tag)
        if name in QUANTIZED_FUNCS:
            tags.add("quantized_weights")
        if name in KV_ALLOC_FUNCS:
            tags.add("kv_alloc")
        if name in KV_CHECK_FUNCS:
            tags.add("kv_check")
    return tags


def step_tag(tags: Iterable[str]) -> Optional[str]:
    """The most specific tag of :data:`TAG_PHASE` present (the step :func:`phase_of` reads
    its phase from: ``wake_up`` where that phase is only ``SERVING``), or None."""
    present = set(tags)
    return next((tag for tag, _ in TAG_PHASE if tag in present), None)


def startup_step_of(tags: Iterable[str]) -> Optional[Phase]:
    """The startup step a :data:`CONDITIONAL_TAGS` tag names, for a failure printed before
    anything was served (the caller checks that), or None."""
    present = set(tags)
    return next((phase for tag, phase in CONDITIONAL_TAGS if tag in present), None)


def phase_of(tags: Iterable[str]) -> Optional[Phase]:
    """The most specific phase the tags prove, or None."""
    present = set(tags)
    for tag, phase in TAG_PHASE:
        if tag in present:
            return phase
    return None
