"""Startup progress: weight loading, memory profiling, KV cache sizing, CUDA graphs, ready.

Sources (``shared/vllm-messages.md`` sections 3, 4, 5, 9):

* weights: ``model_executor/model_loader/weight_utils.py`` (``Loading safetensors
  checkpoint shards``, ``Loading weights from``), ``default_loader.py`` (``Loading weights
  took``), ``vllm/worker/model_runner.py`` (V0 ``Loading model weights took %.4f GB``),
  ``gpu_model_runner.py`` (``Model loading took %s GiB``);
* profiling: ``vllm/worker/worker.py determine_num_available_blocks`` (V0 ``Memory
  profiling results: ...`` and the three-line ``Memory profiling takes ...`` form),
  ``vllm/v1/worker/gpu_worker.py determine_available_memory`` (``Available KV cache
  memory: %s GiB``), ``gpu_worker.compile_or_warm_up_model`` (``Free memory on device
  (F/T GiB) on startup. Desired GPU memory utilization is (U, R GiB)``);
* KV sizing: ``vllm/executor/executor_base.py`` and ``gpu_executor.py`` (V0 ``# GPU
  blocks: %d, # CPU blocks: %d``), ``vllm/v1/core/kv_cache_utils.py`` (``GPU KV cache
  size: %s tokens``, ``Maximum concurrency for %s tokens per request: %.2fx``),
  ``vllm/v1/metrics/loggers.py`` (``vllm cache_config_info with initialization after
  num_gpu_blocks is: %d``);
* CUDA graphs: ``vllm/worker/model_runner.py capture_model`` (``Capturing cudagraphs for
  decoding``, older ``Capturing the model for CUDA graphs``), tqdm ``Capturing CUDA graph
  shapes`` / ``Capturing CUDA graphs (...)``, ``Graph capturing finished in %.0f secs, took
  %.2f GiB``, ``gpu_worker.py`` ``CUDA graph pool memory: %s GiB (actual)``;
* ready: ``core.py`` / ``llm_engine.py`` ``init engine (profile, create kv cache, warmup
  model) took``, ``vllm/entrypoints/launcher.py`` ``Available routes are:`` / ``Route:``,
  uvicorn ``Application startup complete.``, api_server ``Starting vLLM API server``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import regex

from ..events import Phase
from ..units import size_to_gib, to_float
from .pattern import NO_CUT, Pattern, default_build

_N = r"(?:-?[\d.]+)"


_HBM_PAIR = regex.compile(r"\(\s*(?P<used>\d+(?:\.\d+)?),\s*(?P<limit>\d+(?:\.\d+)?)\s*\)")
_HBM_FIELD = regex.compile(r"(?P<key>\w+)=(?P<value>-?\d+(?:\.\d+)?)GiB")
#: tpu-inference's "Memory statistics" fields (sums over the worker's devices, GiB) -> data keys.
HBM_STATISTICS = {
    "total_hbm_limit_gb": "hbm_total_gib",
    "total_hbm_limit_cap_gb": "hbm_budget_gib",
    "total_hbm_used_gb": "hbm_used_gib",
    "kv_cache_headroom_gb": "hbm_kv_headroom_gib",
    "total_hbm_avail_gb": "hbm_available_gib",
}


def _tpu_hbm(m, rec) -> Dict[str, Any]:
    """``hbm=[(used, limit), ...]GiB``: one ``(used, limit)`` pair per device of the worker
    (``utils.hbm_usage_gb``: JAX ``memory_stats()`` ``bytes_in_use`` / ``bytes_limit``). The
    device total is the limit (the smallest, should devices differ); before the weights load
    ("Init worker", ``init_device``) what is free is the limit less what is in use, the fact
    CUDA's "Free memory on device (F/T GiB) on startup" gives; after them ("Init model") it is
    not a startup figure and is left out."""
    pairs = [(float(p["used"]), float(p["limit"])) for p in _HBM_PAIR.finditer(m["pairs"])]
    if not pairs or not m["close"]:
        return {}  # cut inside the list: a device may be missing
    data: Dict[str, Any] = {"gpu_total_gib": min(limit for _, limit in pairs), "tpu_devices": len(pairs)}
    if m["when"] == "worker":
        data["gpu_free_gib"] = round(min(limit - used for used, limit in pairs), 2)
    return data


def _tpu_statistics(m, rec) -> Dict[str, Any]:
    """tpu-inference's "Memory statistics | total_hbm_limit_gb=XGiB | ...": sums over the
    worker's devices (all of its TP shards), so kept apart from the per-device facts
    (``hbm_*_gib``, :data:`HBM_STATISTICS`); their ratio is the ``gpu_memory_utilization`` in
    force (``total_hbm_limit_cap = total_hbm_limit * gpu_memory_utilization``)."""
    data: Dict[str, Any] = {}
    for f in _HBM_FIELD.finditer(m.string, m.end()):
        key = HBM_STATISTICS.get(f["key"])
        if key and key not in data:
            data[key] = float(f["value"])
    total, cap = data.get("hbm_total_gib"), data.get("hbm_budget_gib")
    if total and cap and 0 < cap <= total:
        data["gpu_memory_utilization"] = round(cap / total, 2)
    return data


#: A size as HabanaAI's format_bytes prints it ("15.05 GiB", "0 B", "-252 KiB", "1007 GiB").
_SIZE = r"-?\d+(?:\.\d+)? (?:B|KiB|MiB|GiB|TiB)"
#: Where a cut HabanaMemoryProfiler summary starts to count: the device total printed whole.
_HPU_CUT = r"of device memory \(" + _SIZE + r"\s*/\s*" + _SIZE + r" used\)"


def _hpu_sizes(m) -> Dict[str, Any]:
    """The device total and what is in use after the step (GiB) of a HabanaMemoryProfiler summary."""
    return {"gpu_total_gib": size_to_gib(m["total"]), "hpu_used_gib": size_to_gib(m["used"])}


def _npu_bytes(m, rec) -> Optional[Dict[str, Any]]:
    """vllm-ascend's byte counts as GiB: the KV cache's share (``kv_available_gib``, negative
    when the model's peak is above the budget) and the device total (``gpu_total_gib``; below
    1 GiB it is no accelerator's memory but a line cut inside the number, and left out)."""
    data: Dict[str, Any] = {"kv_available_gib": to_float(m["available"]) / 2**30}
    total = to_float(m["total"]) if m["total"] else 0.0
    if total >= 2**30:  # the message ends with it: a line cut inside it may leave a few digits
        data["gpu_total_gib"] = total / 2**30
    return data


def _usage(m, rec) -> Dict[str, Any]:
    data = default_build(m, rec)
    first = data.pop("first", None)
    data.pop("weight", None)
    data.pop("consumed", None)
    if first is not None and m["weight"]:
        data["weights_gib"] = float(first)
    elif first is not None and m["consumed"]:
        data["consumed_gib"] = float(first)
    return data


def _attention_backend(m, rec) -> Dict[str, Any]:
    """The attention backend vLLM chose, as it names it ("AITER MLA", "Triton MLA", "FLASH_ATTN";
    0.33's ``AttentionBackendEnum.X`` printed without the enum's name)."""
    return {"attention_backend": m["backend"].strip().removeprefix("AttentionBackendEnum.")}


PATTERNS = [
    Pattern(
        "attention_backend_selected",
        "config",
        # the names vLLM's platforms print (capitalised: no prose-like literal for the pre-filter's gate)
        (
            "Using AITER",
            "Using Triton",
            "Using ROCm",
            "Using Flash",
            "Using FlexAttention",
            "Using Sparse MLA",
            "Using XFormers",
            "Using TRITON",
            "Using ROCM_",
            "Using FLASH",
            "Using AttentionBackendEnum.",
        ),
        r"^Using (?P<backend>(?:AttentionBackendEnum\.)?[A-Za-z][\w ]{1,40}?) backend"
        r"(?: on V1 engine| \(selected via --attention-backend\)| out of potential backends: [^\n]*)?\.$",
        "vllm/platforms/rocm.py and cuda.py get_attn_backend_cls ('Using AITER MLA backend.', 0.13; 'Using Triton "
        "MLA backend on V1 engine.'; 'Using %s backend out of potential backends: %s.', 0.33)",
        None,
        _attention_backend,
        NO_CUT,
    ),
    # --- weights -------------------------------------------------------------------------
    Pattern(
        "loading_shards",
        "facts",
        ("oading safetensors checkpoint shards", "oading pt checkpoint shards", "oading np_cache checkpoint shards"),
        # _BAR_FORMAT "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [...]"
        r"[Ll]oading (?:safetensors|pt|np_cache) checkpoint shards(?: \([^)]*\))?:\s+\d+%"
        r"(?: Completed \| (?P<shards_loaded>\d+)/(?P<shards_total>\d+))?",
        "model_executor/model_loader/weight_utils.py (tqdm, _BAR_FORMAT; v0.10+ also '(eager)' and "
        "'Multi-thread loading ...')",
        Phase.LOADING_WEIGHTS,
    ),
    Pattern(
        "loading_weights_from",
        "phase",
        ("Loading weights from",),
        r"Loading weights from ",
        "model_executor/model_loader/weight_utils.py",
        Phase.LOADING_WEIGHTS,
    ),
    Pattern(
        "loading_weights_took",
        "phase",
        ("Loading weights took",),
        r"Loading weights took [\d.]+ seconds",
        "model_executor/model_loader/default_loader.py",
        Phase.WEIGHTS_LOADED,
    ),
    Pattern(
        "model_weights_took_v0",
        "facts",
        ("Loading model weights took",),
        r"Loading model weights took\s*(?P<weights_gib>\d+(?:\.\d+)?)\s*Gi?B",
        "vllm/worker/model_runner.py load_model (V0: 'GB' <= v0.7, 'GiB' v0.8-v0.9)",
        Phase.WEIGHTS_LOADED,
    ),
    # Gaudi (HabanaAI vllm-fork, vllm-gaudi): HabanaMemoryProfiler.get_summary_string after each
    # step, "<step> took X of device memory (U/T used) and H of host memory (...)", sizes as
    # format_bytes prints them ("15.05 GiB", "0 B", "-252 KiB").
    Pattern(
        "hpu_weights_loaded",
        "facts",
        ("Loading model weights took in total",),
        r"Loading model weights took in total (?P<weights>" + _SIZE + r") of device memory \((?P<used>" + _SIZE + r")"
        r"\s*/\s*(?P<total>" + _SIZE + r") used\)",
        "HabanaAI vllm-fork vllm/worker/hpu_model_runner.py (habana_model_runner.py) load_model; vllm-gaudi "
        "vllm_gaudi/v1/worker/hpu_model_runner.py load_model",
        Phase.WEIGHTS_LOADED,
        lambda m, rec: {**_hpu_sizes(m), "weights_gib": size_to_gib(m["weights"])},
        cut_from=_HPU_CUT,
    ),
    Pattern(
        "hpu_step_device_memory",
        "facts",
        (" of device memory (",),
        # the weights' own step names them: "Pre-loading model weights on hpu:0 took X" (a10)
        r"(?:(?P<preload>Pre-loading model weights) on [\w:]+ )?\b(?:took|allocated) (?P<consumed>" + _SIZE + r")"
        r" of device memory \((?P<used>" + _SIZE + r")\s*/\s*(?P<total>" + _SIZE + r") used\)",
        "HabanaAI vllm-fork vllm/worker/hpu_model_runner.py, hpu_worker.py (HabanaMemoryProfiler summaries: "
        "'Pre-loading model weights on hpu:0 took', 'Wrapping in HPU Graph took', 'Model profiling run took', "
        "warm-up 'allocated'); vllm-gaudi",
        None,
        lambda m, rec: {**_hpu_sizes(m), **({"weights_gib": size_to_gib(m["consumed"])} if m["preload"] else {})},
        cut_from=_HPU_CUT,
    ),
    Pattern(
        "model_loading_took",
        "facts",
        ("Model loading took",),
        r"Model loading took\s*(?P<weights_gib>\d+(?:\.\d+)?)\s*Gi?B",
        "vllm/worker/model_runner.py, vllm/v1/worker/gpu_model_runner.py load_model ('GiB and' / 'GiB memory and')",
        Phase.WEIGHTS_LOADED,
    ),
    # --- profiling -----------------------------------------------------------------------
    Pattern(
        "profiling_results_v0",
        "facts",
        ("Memory profiling results:",),
        r"Memory profiling results: total_gpu_memory=(?P<gpu_total_gib>[\d.]+)GiB"
        r"(?: initial_memory_usage=(?P<initial_usage_gib>[\d.]+)GiB)?"
        r"(?: peak_torch_memory=(?P<peak_torch_gib>[\d.]+)GiB)?"
        r"(?: memory_usage_post_profile=[\d.]+GiB)?"
        r"(?: non_torch_memory=(?P<non_torch_gib>-?[\d.]+)GiB)?"
        r"(?: kv_cache_size=(?P<kv_available_gib>-?[\d.]+)GiB)?"
        # a fraction in (0, 1]: "0" or "0." cut from "0.90" is no value (and must not cost the line)
        r"(?: gpu_memory_utilization=(?P<gpu_memory_utilization>0?\.\d+|1(?:\.0+)?))?",
        "vllm/worker/worker.py determine_num_available_blocks (V0 0.6.4-0.6.6)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "profiling_budget_v0",
        "facts",
        ("the current vLLM instance can use total_gpu_memory",),
        r"total_gpu_memory\s*\((?P<gpu_total_gib>\d+(?:\.\d+)?)\s*GiB\)\s*x\s*gpu_memory_utilization\s*"
        r"\((?P<gpu_memory_utilization>\d+(?:\.\d+)?)\)\s*=\s*(?P<requested_gib>\d+(?:\.\d+)?)\s*GiB",
        "vllm/worker/worker.py determine_num_available_blocks (V0 0.7-0.10)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "profiling_split_v0",
        "facts",
        ("the rest of the memory reserved for KV Cache is",),
        r"(?:model weights take (?P<weights_gib>[\d.]+)GiB; )?"
        r"(?:non_torch_memory takes (?P<non_torch_gib>-?[\d.]+)GiB; )?"
        r"(?:PyTorch activation peak memory takes (?P<activation_peak_gib>-?[\d.]+)GiB; )?"
        r"the rest of the memory reserved for KV Cache is (?P<kv_available_gib>-?[\d.]+)GiB",
        "vllm/worker/worker.py determine_num_available_blocks (V0 0.7-0.10)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "profiling_result_v1",
        "facts",
        ("Total non KV cache memory",),
        r"Total non KV cache memory:\s*(?P<non_kv_cache_gib>-?\d+(?:\.\d+)?)\s*GiB;\s*torch peak memory increase:\s*"
        r"(?P<activation_peak_gib>-?\d+(?:\.\d+)?)\s*GiB;\s*(?:non-torch forward increase memory:\s*"
        r"(?P<non_torch_gib>-?\d+(?:\.\d+)?)|total consumed \(from mem_get_info\):\s*"
        r"(?P<consumed_gib>-?\d+(?:\.\d+)?))\s*GiB;\s*weights memory:\s*(?P<weights_gib>-?\d+(?:\.\d+)?)\s*GiB",
        "vllm/utils/mem_utils.py (earlier vllm/utils) MemoryProfilingResult.__repr__, logged at DEBUG by "
        "gpu_worker.determine_available_memory (v0.9+; 'total consumed (from mem_get_info)' in the newest)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "profiling_requested_v1",
        "facts",
        ("; Requested memory: ",),
        r"Initial free memory:\s*(?P<gpu_free_gib>\d+(?:\.\d+)?)\s*GiB;\s*Requested memory:\s*"
        r"(?P<gpu_memory_utilization>\d+(?:\.\d+)?)\s*\(util\),\s*(?P<requested_gib>\d+(?:\.\d+)?)\s*GiB",
        "vllm/v1/worker/gpu_worker.py determine_available_memory (DEBUG)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "profiling_requested_v1_early",
        "facts",
        ("requested GPU memory:",),
        r"Initial free memory:\s*(?P<gpu_free_gib>\d+(?:\.\d+)?)\s*GiB,\s*free memory:\s*\d+(?:\.\d+)?\s*GiB,\s*"
        r"requested GPU memory:\s*(?P<requested_gib>\d+(?:\.\d+)?)\s*GiB",
        "vllm/v1/worker/gpu_worker.py determine_available_memory (DEBUG, v0.9)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "worker_requested_memory",
        "facts",
        ("worker requested memory:",),
        r"worker requested memory:\s*(?P<requested_gib>\d+(?:\.\d+)?)\s*GiB",
        "vllm/v1/worker/gpu_worker.py init_device (DEBUG)",
        Phase.CONFIG,
    ),
    # TPU (tpu-inference, the JAX worker): vllm-project/tpu-inference tpu_inference/worker/
    # tpu_worker_jax.py (later tpu_worker.py) init_device "Init worker | ... | hbm=[(U, L)]GiB",
    # runner/tpu_jax_runner.py load_model "Init model | hbm=[(U, L)]GiB", determine_available_memory
    # "Memory statistics | total_hbm_limit_gb=XGiB | total_hbm_limit_cap_gb=YGiB |
    # total_hbm_used_gb=ZGiB | [kv_cache_headroom_gb=HGiB | ]total_hbm_avail_gb=WGiB".
    Pattern(
        "tpu_hbm_usage",
        "facts",
        ("hbm=[(",),
        r"Init (?P<when>worker|model)\b[^\n]*?\|\s*hbm=\[(?P<pairs>[^\]]*)(?P<close>\]GiB)?",
        "tpu-inference tpu_inference/worker/tpu_worker_jax.py (tpu_worker.py) init_device; "
        "runner/tpu_jax_runner.py load_model (utils.hbm_usage_gb)",
        None,
        _tpu_hbm,
    ),
    Pattern(
        "tpu_memory_statistics",
        "facts",
        ("Memory statistics | total_hbm",),
        r"Memory statistics \|(?= total_hbm)",
        "tpu-inference tpu_inference/worker/tpu_worker_jax.py (tpu_worker.py) determine_available_memory",
        Phase.KV_SIZING,
        _tpu_statistics,
    ),
    # vllm-ascend (NPUWorker.determine_available_memory, vllm_ascend/worker/worker_v1.py; its V0
    # worker.py alike): "Available memory: %s, total memory: %s", both in bytes, the first what
    # the KV cache gets (total x gpu_memory_utilization - peak). Older builds print it before
    # clamping, a float that may be negative ("-1234567.0"); newer ones an int clamped at 0.
    Pattern(
        "npu_available_memory_bytes",
        "facts",
        ("Available memory: ",),
        r"Available memory: (?P<available>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?),\s*total memory:\s*"
        r"(?P<total>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)",
        "vllm-ascend vllm_ascend/worker/worker_v1.py NPUWorker.determine_available_memory (bytes)",
        Phase.KV_SIZING,
        _npu_bytes,
        # the event is both figures: the total must have begun
        cut_from=r"Available memory: -?\d[\d.eE+-]*,\s*total memory:\s*\d",
    ),
    Pattern(
        "hpu_free_device_memory",
        "facts",
        ("(VLLM_GRAPH_RESERVED_MEM=",),
        r"Free device memory: (?P<free>" + _SIZE + r"),\s*(?P<usable>" + _SIZE + r") usable "
        r"\(gpu_memory_utilization=(?P<gpu_memory_utilization>\d+(?:\.\d+)?)\),\s*(?P<graphs>" + _SIZE + r") "
        r"reserved for HPUGraphs \(VLLM_GRAPH_RESERVED_MEM=[\d.]+\),\s*(?:" + _SIZE + r" reserved for KV cache "
        r"dummy block,?\s*)?(?P<kv>" + _SIZE + r") reserved for (?:usable KV cache|KV cache(?! dummy))",
        "HabanaAI vllm-fork vllm/worker/hpu_worker.py determine_num_available_blocks ('... reserved for KV cache'); "
        "vllm-gaudi hpu_worker.py ('... reserved for KV cache dummy block X reserved for usable KV cache')",
        Phase.KV_SIZING,
        lambda m, rec: {
            "kv_available_gib": size_to_gib(m["kv"]),
            "gpu_memory_utilization": float(m["gpu_memory_utilization"]),
            "hpu_graphs_reserved_gib": size_to_gib(m["graphs"]),
        },
        # the fork's message ends with "reserved for KV cache", the words vllm-gaudi's goes on from
        # ("... KV cache dummy block X reserved for usable KV cache"): cut there, a dummy block
        # would be read as the KV cache
        cut_from=NO_CUT,
    ),
    Pattern(
        "available_kv_memory",
        "facts",
        ("Available KV cache memory:",),
        r"Available KV cache memory: (?P<kv_available_gib>" + _N + r") GiB",
        "vllm/v1/worker/gpu_worker.py determine_available_memory",
        Phase.KV_SIZING,
    ),
    # vllm-ascend's own line, in bytes (vllm_ascend/worker/worker_v1.py determine_available_memory,
    # 0.11-0.13: fixtures/logs m09): the KV budget left and the NPU's total.
    Pattern(
        "ascend_available_memory",
        "facts",
        ("Available memory:",),
        r"Available memory: (?P<available>\d+), total memory: (?P<total>\d+)\b",
        "vllm_ascend/worker/worker_v1.py determine_available_memory (bytes)",
        Phase.KV_SIZING,
        lambda m, rec: {
            "kv_available_gib": round(int(m["available"]) / 2**30, 4),
            "gpu_total_gib": round(int(m["total"]) / 2**30, 4),
        },
        # "Available memory: N" alone is too common a phrase to read as the KV budget
        cut_from=NO_CUT,
    ),
    # The post-warm-up summary is one message of several sentences, often pasted one
    # sentence a line: each sentence is recognised on its own (its numbers and their roles).
    # NO_CUT: cut before "on startup." it may be the free-memory failure (catalog/checks.py), which
    # opens with the same words and proves no warm-up.
    Pattern(
        "startup_memory_summary_free",
        "facts",
        ("memory on device",),
        r"Free memory on device(?: (?P<device>[\w:]+))?\s*\((?P<gpu_free_gib>\d+(?:\.\d+)?)\s*/\s*"
        r"(?P<gpu_total_gib>\d+(?:\.\d+)?)\s*GiB\)\s*on startup\s*\.",
        "vllm/v1/worker/gpu_worker.py compile_or_warm_up_model (DEBUG v0.11-v0.25, INFO v0.10, v0.26+)",
        Phase.WARMUP,
        cut_from=NO_CUT,
    ),
    Pattern(
        "startup_memory_summary_desired",
        "facts",
        ("Desired GPU memory utilization is",),
        r"Desired GPU memory utilization is\s*\((?P<gpu_memory_utilization>\d+(?:\.\d+)?),\s*"
        r"(?P<requested_gib>\d+(?:\.\d+)?)\s*GiB\)",
        "vllm/v1/worker/gpu_worker.py compile_or_warm_up_model",
        Phase.WARMUP,
    ),
    Pattern(
        "startup_memory_summary_usage",
        "facts",
        ("Actual usage is", "Actual usage:"),
        # the first figure is named after it: "GiB for weight," (v0.10-v0.26) or "GiB for consumed memory"
        # (v0.27+); vllm-ascend's NPUWorker: "Actual usage: X GiB for weights, ..., G GiB for NPU graph
        # memory." (no "and"; the graph figure has the CUDA graphs' role)
        r"Actual usage(?: is|:)\s*(?P<first>\d+(?:\.\d+)?)\s*GiB for (?:(?P<weight>weights?),|"
        r"(?P<consumed>consumed) memory \(weights \+ non-torch\),)\s*"
        r"(?P<activation_peak_gib>\d+(?:\.\d+)?)\s*GiB for peak activation,\s*"
        r"(?:(?P<non_torch_gib>-?\d+(?:\.\d+)?)\s*GiB for non-torch memory,\s*)?(?:and\s*)?"
        r"(?P<cuda_graph_gib>-?\d+(?:\.\d+)?)\s*GiB for (?:CUDAGraph|NPU graph) memory",
        "vllm/v1/worker/gpu_worker.py compile_or_warm_up_model ('for weight' v0.10-v0.26, "
        "'for consumed memory (weights + non-torch)' v0.27+); vllm_ascend/worker/worker.py "
        "compile_or_warm_up_model ('Actual usage: ... for weights, ... for NPU graph memory')",
        Phase.WARMUP,
        _usage,
    ),
    Pattern(
        "startup_memory_summary_kv",
        "facts",
        ("Current kv cache memory in use is", "Current KV cache memory:"),
        r"Current (?:kv cache memory in use is|KV cache memory:)\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>GiB|bytes)",
        "vllm/v1/worker/gpu_worker.py compile_or_warm_up_model (v0.10 prints bytes, later GiB); vllm-ascend "
        "worker.py ('Current KV cache memory: X GiB.')",
        Phase.WARMUP,
        lambda m, rec: (
            {"kv_available_gib": float(m["value"]) / (2**30 if m["unit"] == "bytes" else 1)} if m["unit"] else {}
        ),
    ),
    Pattern(
        "kv_cache_memory_bytes",
        "facts",
        ("memory for KV Cache as specified by kv_cache_memory_bytes",),
        r"Initial free memory\s*(?P<gpu_free_gib>\d+(?:\.\d+)?)\s*GiB,\s*reserved\s*"
        r"(?P<kv_available_gib>\d+(?:\.\d+)?)\s*GiB memory for KV Cache as specified",
        "vllm/v1/worker/gpu_worker.py determine_available_memory (v0.10+)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "persisted_startup_plan",
        "facts",
        ("Applying persisted startup plan",),
        r"Applying persisted startup plan \(fingerprint [^)]*\): kv_cache_memory_bytes=\d+ "
        r"\((?P<kv_available_gib>\d+(?:\.\d+)?) GiB\), recorded free-memory baseline \d+(?:\.\d+)? GiB, current "
        r"(?P<gpu_free_gib>\d+(?:\.\d+)?) GiB",
        "vllm/v1/worker/startup_plan.py (v0.26+; memory profiling skipped)",
        Phase.KV_SIZING,
    ),
    # --- KV sizing -----------------------------------------------------------------------
    Pattern(
        "gpu_blocks",
        "facts",
        ("blocks: ",),
        r"# (?:GPU|[Cc][Uu][Dd][Aa]|rocm|ROCm|xpu|XPU|npu|NPU|hpu|HPU|tpu|TPU|neuron|CPU) blocks: "
        r"(?P<gpu_blocks>\d+)(?:, # CPU blocks: (?P<cpu_blocks>\d+))?",
        "vllm/executor/executor_base.py initialize_cache; vllm/v1/core/kv_cache_utils.py (early V1)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "num_gpu_blocks_info",
        "facts",
        ("initialization after num_gpu_blocks is:",),
        r"initialization after num_gpu_blocks is: (?P<gpu_blocks>\d+)",
        "vllm/v1/metrics/loggers.py log_engine_initialized",
        Phase.KV_SIZING,
    ),
    Pattern(
        "kv_cache_size_tokens",
        "facts",
        (" KV cache size: ",),
        r"(?:GPU|XPU|CPU|TPU|NPU|HPU|[A-Z]{2,5})(?: \+ host)? KV cache size: (?P<kv_tokens>[\d,]+) tokens",
        "vllm/v1/core/kv_cache_utils.py _report_kv_cache_config ('GPU'; v0.30+ the device name, "
        "v0.32+ '<device> + host' with HiSparse)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "max_concurrency",
        "facts",
        ("Maximum concurrency for",),
        r"Maximum concurrency for (?P<concurrency_tokens>[\d,]+) tokens per request: (?P<max_concurrency>[\d.]+)x",
        "vllm/v1/core/kv_cache_utils.py; vllm/executor/executor_base.py (V0)",
        Phase.KV_SIZING,
    ),
    # --- CUDA graphs ---------------------------------------------------------------------
    # TPU: capture_model precompiles the model for its input shapes (the step CUDA graphs take).
    Pattern(
        "tpu_precompile",
        "phase",
        ("with different input shapes",),
        r"Compiling (?:the model|sampling|select_hidden_states|compute_logits|[\w ]+) with different input shapes",
        "vllm/v1/worker/tpu_model_runner.py capture_model / _precompile_* (0.9+)",
        Phase.GRAPH_CAPTURE,
    ),
    Pattern(
        "capturing_graphs",
        "phase",
        (
            "Capturing cudagraphs",
            "Capturing the model for CUDA graphs",
            "Capturing CUDA graph",
            "Capturing CUDA graphs",
            "CUDA graphs can take additional",
            "capture ACL graphs",
            "Capturing ACL graphs",
        ),
        r"Capturing (?:cudagraphs|the model for CUDA graphs|CUDA graph)|CUDA graphs can take additional"
        r"|Starting to capture ACL graphs|Capturing ACL graphs",
        "vllm/worker/model_runner.py capture_model; vllm/v1/worker/gpu_model_runner.py (tqdm); vllm-ascend "
        "vllm_ascend/worker/model_runner_v1.py _capture_aclgraphs ('Starting to capture ACL graphs for cases: %s, "
        "mode: %s, uniform_decode: %s', tqdm 'Capturing ACL graphs (decode, FULL)')",
        Phase.GRAPH_CAPTURE,
    ),
    Pattern(
        "graph_capture_finished",
        "facts",
        ("Graph capturing finished",),
        r"Graph capturing finished in [\d.]+ secs?(?:, took (?P<cuda_graph_gib>-?\d+(?:\.\d+)?) GiB)?",
        "vllm/worker/model_runner.py, vllm/v1/worker/gpu_model_runner.py capture_model",
        Phase.WARMUP,
    ),
    Pattern(
        "cuda_graph_pool",
        "facts",
        ("CUDA graph pool memory:",),
        r"CUDA graph pool memory: (?P<cuda_graph_gib>[\d.]+) GiB \(actual\)",
        "vllm/v1/worker/gpu_worker.py compile_or_warm_up_model (2026)",
        Phase.WARMUP,
    ),
    Pattern(
        "cuda_graph_estimate",
        "facts",
        ("Estimated CUDA graph memory:",),
        r"Estimated CUDA graph memory: (?P<cuda_graph_estimated_gib>\d+(?:\.\d+)?) GiB",
        "vllm/v1/worker/gpu_model_runner.py (v0.18+, profiling)",
        Phase.KV_SIZING,
    ),
    Pattern(
        "cudagraph_disabled",
        "phase",
        ("Cudagraph is disabled under eager mode",),
        r"Cudagraph is disabled under eager mode",
        "vllm/config (V1)",
        Phase.CONFIG,
    ),
    # --- offline batches ----------------------------------------------------------------
    Pattern(
        "offline_progress",
        "marker",
        ("Processed prompts:",),
        r"Processed prompts:\s+\d+%",
        "vllm/entrypoints/llm.py LLM._run_engine (tqdm desc 'Processed prompts')",
        None,
        lambda m, rec: {"marker": "offline_batch"},
    ),
    # --- ready ---------------------------------------------------------------------------
    Pattern(
        "init_engine_took",
        "phase",
        ("init engine (profile, create kv cache, warmup model) took",),
        r"init engine \(profile, create kv cache, warmup model\) took",
        "vllm/v1/engine/core.py _initialize_kv_caches; vllm/engine/llm_engine.py",
        Phase.READY,
    ),
    Pattern(
        "routes",
        "phase",
        ("Available routes are", "Route: /"),
        r"Available routes are|Route: /",
        "vllm/entrypoints/launcher.py serve_http",
        Phase.READY,
    ),
    Pattern(
        "starting_api_server",
        "phase",
        ("Starting vLLM API server", "Starting vLLM server on"),
        r"Starting vLLM (?:API )?server",
        "vllm/entrypoints/openai/api_server.py",
        Phase.READY,
    ),
    Pattern(
        "application_startup_complete",
        "phase",
        ("Application startup complete.",),
        r"Application startup complete\.",
        "uvicorn (vLLM's ready marker)",
        Phase.READY,
    ),
]
