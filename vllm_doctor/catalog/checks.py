"""Startup checks vLLM runs and fails: free memory, profiling, quantization, length limits.

Sources (``shared/vllm-messages.md`` sections 2, 11, 12; wordings per release in
``fixtures/wordings/wordings.jsonl``):

* ``vllm/v1/worker/gpu_worker.py Worker.init_device`` (v0.9-v0.13), ``vllm/v1/worker/utils.py
  request_memory`` (v0.14+): ``Free memory on device [DEV ](F/T GiB) on startup is less than
  desired GPU memory utilization (U, R GiB).``; v0.32+ also ``... on startup is less than the
  engine's budget after excluding external process's weights (U, R GiB).`` and ``Externally
  held weights on device DEV (W/T GiB) exceed the desired GPU memory utilization (U, R GiB).``;
  builds outside the releases (a ROCm TheRock build, t003) say ``Available memory on device
  cuda:0 (F/T GiB) is below required GPU memory utilization (U, R GiB).`` -- the pattern is
  keyed on the numbers and their roles, not on the verb;
* ``gpu_worker.py determine_available_memory`` / V0 ``worker.py``: ``Error in memory
  profiling. Initial free memory X[ GiB], current free memory Y[ GiB].`` (older builds print
  bytes) and the V0 ``Initial used memory X, currently used memory Y`` form;
* ``vllm/config/vllm.py _get_quantization_config`` (older ``model_loader``): ``The
  quantization method %s is not supported for the current GPU. Minimum capability: %d.
  Current capability: %d.`` (also ``moe_wna16 + awq``); compressed-tensors
  ``_check_scheme_supported``: ``Quantization scheme is not supported for the current GPU.
  Min capability: %d.`` (v0.29+: ``Required capability: %d.``) ``Current capability: %d.``;
  ``Bfloat16 is only supported on GPUs with compute capability of at least 8.0``;
* ``vllm/platforms/interface.py Platform.verify_quantization`` (v0.6.3+): ``%s quantization is
  currently not supported in %s.`` with the platform's ``device_name`` (``rocm``, ``tpu``,
  ``xpu``, ``hpu``, ``cpu``, ``neuron``; vllm-ascend ``npu``); before it ``vllm/config.py
  ModelConfig._verify_quantization`` printed ``... not supported in ROCm.`` (v0.2-v0.6.2),
  ``... in TPU.``/``... in neuron.``/``... in HPU.`` -- the method refused by the platform,
  not by the GPU generation;
* ``vllm/config/model.py _get_and_verify_max_len``: ``User-specified max_model_len (%d) is
  greater than the derived max_model_len (%s=%s or model_max_length=...`` -- an error, or,
  with ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``, a warning that goes on (``VLLM_ALLOW_LONG_MAX_MODEL_LEN
  must be used with extreme caution`` / ``... CUDA errors. Make sure the value is correct``);
* ``vllm/config/scheduler.py SchedulerConfig._verify_args``: ``max_num_batched_tokens (%d)
  is smaller than max_model_len (%d).`` and ``max_num_batched_tokens (%d) must be greater
  than or equal to max_num_seqs (%d).``;
* ``vllm/config/compilation.py CompilationConfig`` (the cudagraph mode check, v0.20-v0.33, the
  same words in every release): ``max_num_seqs (%d) exceeds available Mamba cache blocks (%d).
  Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed.
  Please lower max_num_seqs to at most %d or increase gpu_memory_utilization.`` (a ValueError,
  raised only with full decode CUDA graphs for a hybrid Mamba model); v0.18-v0.19 capped the
  capture sizes instead and warned (``adjust_cudagraph_sizes_for_mamba_cache``: ``Capping
  cudagraph capture sizes from max %d to %d to fit Mamba cache blocks (%d blocks available).``,
  ``No valid cudagraph capture sizes remain after capping to Mamba cache blocks (%d).``): facts,
  not failures.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import regex

from ..events import Phase
from ..units import to_int
from .pattern import Pattern, default_build


def _profiling(m, rec) -> Dict[str, Any]:
    if not m["kind"]:
        return {}  # cut before "free" or "used": which memory it compared is not known
    data: Dict[str, Any] = {"variant": "free" if m["kind"] == "free" else "used"}
    for key in ("initial", "current"):
        if not m[key] or (not m[key + "_unit"] and " GiB".startswith(m.string[m.end(key) : m.end(key) + 4])):
            continue  # not printed before the cut, or the cut may have taken its unit ("72.25 Gi")
        raw = float(m[key])
        unit = m[key + "_unit"]
        # Old builds print raw bytes (no unit); new ones GiB.
        gib = raw if unit else raw / 2**30
        data[f"{key}_{'free' if data['variant'] == 'free' else 'used'}_gib"] = gib
    return data


_OVERRIDE_ALLOWED = regex.compile(
    r"\s*(?:VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used|This may lead to incorrect model outputs or CUDA errors\."
    r"\s*Make sure)"
)


def _derived(m, rec) -> Dict[str, Any]:
    data = default_build(m, rec)
    data["variant"] = "max_model_len_above_derived"
    return data


def _derived_warning(m, rec) -> Optional[Dict[str, Any]]:
    """The warning form (override allowed): facts about the limits, not an error."""
    if not _OVERRIDE_ALLOWED.match(m.string, m.end()):
        return None
    data = default_build(m, rec)
    data["long_max_model_len_allowed"] = True
    return data


def _error_form(m, rec) -> Optional[Dict[str, Any]]:
    if _OVERRIDE_ALLOWED.match(m.string, m.end()):
        return None
    return _derived(m, rec)


def _free_memory(m, rec) -> Dict[str, Any]:
    data = default_build(m, rec)
    data.pop("external", None)
    data.pop("lead", None)
    if m["external"]:
        data["variant"] = "engine_budget_after_external_weights"
    elif m["lead"] == "Available":
        data["variant"] = "available_below_required"
    return data


def _external_weights(m, rec) -> Dict[str, Any]:
    data = default_build(m, rec)
    data["variant"] = "external_weights_exceed_budget"
    return data


def _batched(variant: str):
    def build(m, rec) -> Dict[str, Any]:
        data = default_build(m, rec)
        data["variant"] = variant
        return data

    return build


_S = r"\s*"
_N = r"\d+(?:\.\d+)?"
_DERIVED = (
    r"User-specified max_model_len\s*\((?P<max_model_len>[\d,]+)\)\s*is greater than the derived max_model_len\s*"
    r"\((?P<derived_key>\w+)=(?P<derived_max_model_len>\d+(?:\.\d+)?)[^)]*\)\.?"
)


def _quant_dtype(m, rec) -> Dict[str, Any]:
    """The dtype refused and the dtypes the method takes, without ``torch.`` (no list when
    the message was cut before it)."""
    data = {k: m[k] for k in ("dtype", "quantization") if m[k]}
    if m["supported_dtypes"]:
        data["supported_dtypes"] = [
            d.strip().removeprefix("torch.") for d in m["supported_dtypes"].split(",") if d.strip()
        ]
    return data


#: How each platform's ``device_name`` (or an older release's literal) is shown.
PLATFORM_NAMES = {
    "rocm": "ROCm",
    "hip": "ROCm",
    "tpu": "TPU",
    "xpu": "XPU",
    "hpu": "HPU",
    "cpu": "CPU",
    "neuron": "Neuron",
    "npu": "NPU",
    "cuda": "CUDA",
}


def _quant_platform(m, rec) -> Dict[str, Any]:
    """The method, ``refused_by: platform`` and the platform that refused it (``device``: ROCm,
    TPU, XPU, HPU, CPU, Neuron, NPU; a name this table lacks as printed; none when cut off)."""
    data: Dict[str, Any] = {"quantization": m["quantization"].strip("`'\""), "refused_by": "platform"}
    if m["device"]:
        data["device"] = PLATFORM_NAMES.get(m["device"].lower(), m["device"])
    return data


def _mamba_blocks(m, rec) -> Dict[str, Any]:
    """``max_num_seqs`` and the Mamba cache blocks (counts); the blocks may be cut off."""
    data: Dict[str, Any] = {"variant": "max_num_seqs_above_mamba_blocks", "max_num_seqs": to_int(m["max_num_seqs"])}
    if m["blocks"]:
        data["mamba_cache_blocks"] = to_int(m["blocks"])
    return data


def _mamba_capped(m, rec) -> Dict[str, Any]:
    """The v0.18-v0.19 warnings: the blocks, and the largest capture size left (0: none)."""
    data: Dict[str, Any] = {"mamba_cache_blocks": to_int(m["blocks"])}
    data["cudagraph_max_capture_size"] = to_int(m["capped"]) if m["capped"] else 0
    return data


PATTERNS = [
    Pattern(
        "free_memory_below_utilization",
        "free_memory",
        ("memory on device",),
        r"(?P<lead>Free|Available) memory on device(?: (?P<device>[\w:]+))?"
        + _S
        + r"\((?P<gpu_free_gib>"
        + _N
        + r")"
        # a range merged by hand over ranks ("34.51-34.54 / 139.8", w18): the lower bound is
        # the fact (the rank with least free fails the gate first), the upper one is kept
        + r"(?:"
        + _S
        + r"[-\u2013~]"
        + _S
        + r"(?P<gpu_free_upper_gib>"
        + _N
        + r"))?"
        + _S
        + r"/"
        + _S
        + r"(?P<gpu_total_gib>"
        + _N
        + r")"
        + _S
        + r"GiB\)(?:"
        + _S
        + r"on startup)?"
        + _S
        + r"(?:is|falls)"
        + _S
        + r"(?:less than|below)"
        + _S
        + r"(?:the engine's budget after excluding (?P<external>external)[^()]{0,40}?|(?:the )?(?:desired|required)"
        + _S
        + r"GPU"
        + _S
        + r"memory"
        + _S
        + r"utilization)"
        + _S
        + r"\((?P<gpu_memory_utilization>"
        + _N
        + r"),"
        + _S
        + r"(?P<requested_gib>"
        + _N
        + r")"
        + _S
        + r"GiB\)",
        "vllm/v1/worker/gpu_worker.py init_device (v0.9-v0.13); vllm/v1/worker/utils.py request_memory (v0.14+); "
        "'Available memory ... is below required' from a ROCm TheRock build (fixtures/logs t003)",
        None,
        _free_memory,
        # the startup summary opens with the same words ("Free memory on device (F/T GiB) on startup.")
        cut_from=r"on startup\s*(?:is|falls)|is below required",
    ),
    Pattern(
        "external_weights_exceed_budget",
        "free_memory",
        ("Externally held weights on device",),
        r"Externally held weights on device(?: (?P<device>[\w:]+))?"
        + _S
        + r"\((?P<external_weights_gib>"
        + _N
        + r")"
        + _S
        + r"/"
        + _S
        + r"(?P<gpu_total_gib>"
        + _N
        + r")"
        + _S
        + r"GiB\)"
        + _S
        + r"exceed the desired GPU "
        r"memory utilization"
        + _S
        + r"\((?P<gpu_memory_utilization>"
        + _N
        + r"),"
        + _S
        + r"(?P<requested_gib>"
        + _N
        + r")"
        + _S
        + r"GiB\)",
        "vllm/v1/worker/utils.py request_memory (v0.32+)",
        None,
        _external_weights,
    ),
    Pattern(
        "memory_profiling_error",
        "profiling_error",
        ("Error in memory profiling",),
        r"Error in memory profiling\.\s*Initial (?P<kind>free|used) memory (?P<initial>\d+(?:\.\d+)?)"
        r"(?P<initial_unit> ?GiB)?,\s*current(?:ly used)?(?: free)? memory (?P<current>\d+(?:\.\d+)?)"
        r"(?P<current_unit> ?GiB)?\.\s",  # "... current free memory Y. This happens when ..."
        "vllm/v1/worker/gpu_worker.py determine_available_memory; vllm/worker/worker.py (V0)",
        None,
        _profiling,
    ),
    Pattern(
        "quantization_capability",
        "quant_error",
        # the second anchor is whole in the tuple repr of 0.5.5-0.28 ("... supported for ', 'the current GPU")
        ("is not supported for the current GPU", "Quantization scheme is not supported for"),
        r"(?:quantization method (?P<quantization>\S+(?: \+ \S+)?)|Quantization scheme) is not supported for the "
        r"current GPU\.\s*(?:Min(?:imum)?|Required) capability: (?P<min_capability>\d+)\.\s*Current capability: "
        r"(?P<current_capability>\d+)\.",
        "vllm/config/vllm.py _get_quantization_config; compressed_tensors.py _check_scheme_supported (0.5.5-0.28 "
        "raise it with three arguments, printed as their tuple repr: catalog/normalise.py joins it)",
    ),
    Pattern(
        "quantization_dtype",
        "quant_error",
        ("is not supported for quantization method",),
        r"(?:torch\.)?(?P<dtype>\w+) is not supported for quantization method (?P<quantization>[\w-]+)\.\s*"
        r"Supported dtypes: \[(?P<supported_dtypes>[\w., ]{1,200})\]",
        "vllm/config/vllm.py _get_quantization_config (vllm/config.py 0.6-0.9; model_loader/loader.py 0.5): "
        "the model's dtype is not among the quantization method's get_supported_act_dtypes()",
        None,
        _quant_dtype,
    ),
    Pattern(
        "quantization_platform",
        "quant_error",
        ("quantization is currently not supported in",),
        r"(?P<quantization>[`'\"]?[\w-]+[`'\"]?) quantization is currently not supported in (?P<device>[A-Za-z]+)\.",
        "vllm/platforms/interface.py Platform.verify_quantization (v0.6.3+, the platform's device_name); "
        "vllm/config.py ModelConfig._verify_quantization before (ROCm, TPU, neuron, HPU literals)",
        None,
        _quant_platform,
    ),
    Pattern(
        "model_dtype_refused",
        "quant_error",
        ("does not support float16",),
        r"The model type '(?P<model_type>[\w.-]+)' does not support (?P<refused_dtype>float16)\.",
        "vllm/config/model.py _check_valid_dtype (0.9+; vllm/config.py 0.9): _FLOAT16_NOT_SUPPORTED_MODELS",
    ),
    Pattern(
        "bfloat16_capability",
        "quant_error",
        ("Bfloat16 is only supported on GPUs with compute capability",),
        r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0\. Your (?P<gpu_name>.+?) GPU "
        r"(?:has compute capability (?P<current_capability_text>\d+(?:\.\d+)?)(?=\.\s)|does not have a compute capability)",
        "vllm/worker/worker.py _check_if_gpu_supports_dtype; vllm/platforms/cuda.py",
    ),
    Pattern(
        "max_model_len_above_derived",
        "config_error",
        ("is greater than the derived max_model_len",),
        _DERIVED,
        "vllm/config/model.py _get_and_verify_max_len (ValueError; pydantic 'Value error, ...' in newer builds)",
        None,
        _error_form,
        # cut short, the error is told from the warning by the exception name or its own advice
        cut_from=r"(?:Error:|[Vv]alue error,)\s*User-specified max_model_len|To allow overriding this maximum",
    ),
    Pattern(
        "max_model_len_above_derived_allowed",
        "facts",
        ("is greater than the derived max_model_len",),
        _DERIVED,
        "vllm/config/model.py _get_and_verify_max_len (warning when VLLM_ALLOW_LONG_MAX_MODEL_LEN=1)",
        Phase.CONFIG,
        _derived_warning,
        cut_from=r"VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used|CUDA errors\.\s*Make sure",
    ),
    Pattern(
        "batched_tokens_below_max_model_len",
        "config_error",
        ("is smaller than max_model_len",),
        r"max_num_batched_tokens \((?P<max_num_batched_tokens>\d+)\) is smaller than max_model_len "
        r"\((?P<max_model_len>\d+)\)",
        "vllm/config/scheduler.py SchedulerConfig._verify_args",
        None,
        _batched("batched_tokens_below_max_model_len"),
    ),
    Pattern(
        "batched_tokens_below_max_num_seqs",
        "config_error",
        ("must be greater than or equal to max_num_seqs",),
        r"max_num_batched_tokens \((?P<max_num_batched_tokens>\d+)\) must be greater than or equal to "
        r"max_num_seqs \((?P<max_num_seqs>\d+)\)",
        "vllm/config/scheduler.py SchedulerConfig._verify_args",
        None,
        _batched("batched_tokens_below_max_num_seqs"),
    ),
    Pattern(
        "tp_not_divisor_of_heads",
        "config_error",
        ("must be divisible by tensor parallel size",),
        r"Total number of attention heads \((?P<num_attention_heads>\d+)\)\s*must be divisible by tensor parallel "
        r"size \((?P<tensor_parallel_size>\d+)\)",
        "vllm/config/model.py ModelConfig.verify_with_parallel_config (vllm/config.py before v0.10; every release)",
        None,
        _batched("tp_not_divisor_of_heads"),
    ),
    Pattern(
        "max_num_seqs_above_mamba_blocks",
        "config_error",
        ("exceeds available Mamba cache",),
        r"max_num_seqs\s*\((?P<max_num_seqs>\d+)\)\s*exceeds available Mamba cache\s*blocks\s*\((?P<blocks>\d+)\)",
        "vllm/config/compilation.py CompilationConfig cudagraph mode check (ValueError, v0.20-v0.33)",
        None,
        _mamba_blocks,
    ),
    Pattern(
        "mamba_capture_sizes_capped",
        "facts",
        ("to fit Mamba cache blocks", "after capping to Mamba cache blocks"),
        r"Capping cudagraph capture sizes from max \d+ to (?P<capped>\d+) to fit Mamba cache blocks\s*"
        r"\((?P<blocks>\d+) blocks available\)|No valid cudagraph capture sizes remain after capping\s*"
        r"to Mamba cache blocks \((?P<blocks>\d+)\)",  # one group name in both branches (regex allows it)
        "vllm/config/compilation.py adjust_cudagraph_sizes_for_mamba_cache (warnings, v0.18-v0.19)",
        None,
        _mamba_capped,
        # the event is the block count: nothing before it is whole
        cut_from=r"\(\d+ blocks available\)|Mamba cache blocks \(\d+\)",
    ),
]
