"""Startup checks vLLM runs and fails: free memory, profiling, quantization, length limits.

Sources (``shared/vllm-messages.md`` sections 2, 11, 12):

* ``vllm/v1/worker/gpu_worker.py Worker.init_device`` (v0.9-v0.12), newest
  ``vllm/v1/worker/utils.py request_memory``: ``Free memory on device [DEV ](F/T GiB) on
  startup is less than desired GPU memory utilization (U, R GiB).``;
* ``gpu_worker.py determine_available_memory`` / V0 ``worker.py``: ``Error in memory
  profiling. Initial free memory X[ GiB], current free memory Y[ GiB].`` (older builds print
  bytes) and the V0 ``Initial used memory X, currently used memory Y`` form;
* ``vllm/config/vllm.py _get_quantization_config`` (older ``model_loader``): ``The
  quantization method %s is not supported for the current GPU. Minimum capability: %d.
  Current capability: %d.``; compressed-tensors ``_check_scheme_supported``: ``Quantization
  scheme is not supported for the current GPU. Min capability: %d. Current capability: %d.``;
  ``Bfloat16 is only supported on GPUs with compute capability of at least 8.0``;
* ``vllm/config/model.py _get_and_verify_max_len``: ``User-specified max_model_len (%d) is
  greater than the derived max_model_len (%s=%s or model_max_length=...``;
* ``vllm/config/scheduler.py SchedulerConfig._verify_args``: ``max_num_batched_tokens (%d)
  is smaller than max_model_len (%d).`` and ``max_num_batched_tokens (%d) must be greater
  than or equal to max_num_seqs (%d).``
"""

from __future__ import annotations

from typing import Any, Dict

from . import Pattern, default_build


def _profiling(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"variant": "free" if m["kind"] == "free" else "used"}
    for key in ("initial", "current"):
        raw = float(m[key])
        unit = m[key + "_unit"]
        # Old builds print raw bytes (no unit); new ones GiB.
        gib = raw if unit else raw / 2**30
        data[f"{key}_{'free' if data['variant'] == 'free' else 'used'}_gib"] = gib
    return data


def _derived(m, rec) -> Dict[str, Any]:
    data = default_build(m, rec)
    data["variant"] = "max_model_len_above_derived"
    return data


def _batched(variant: str):
    def build(m, rec) -> Dict[str, Any]:
        data = default_build(m, rec)
        data["variant"] = variant
        return data

    return build


PATTERNS = [
    Pattern(
        "free_memory_below_utilization",
        "free_memory",
        ("on startup is less than desired GPU memory utilization",),
        r"Free memory on device (?:(?P<device>\S+) )?\((?P<gpu_free_gib>[\d.]+)/(?P<gpu_total_gib>[\d.]+) GiB\) "
        r"on startup is less than desired GPU memory utilization \((?P<gpu_memory_utilization>[\d.]+), "
        r"(?P<requested_gib>[\d.]+) GiB\)",
        "vllm/v1/worker/gpu_worker.py init_device; vllm/v1/worker/utils.py request_memory",
    ),
    Pattern(
        "memory_profiling_error",
        "profiling_error",
        ("Error in memory profiling",),
        r"Error in memory profiling\. Initial (?P<kind>free|used) memory (?P<initial>[\d.]+)(?P<initial_unit> ?GiB)?, "
        r"current(?:ly used)?(?: free)? memory (?P<current>[\d.]+)(?P<current_unit> ?GiB)?",
        "vllm/v1/worker/gpu_worker.py determine_available_memory; vllm/worker/worker.py (V0)",
        None,
        _profiling,
    ),
    Pattern(
        "quantization_capability",
        "quant_error",
        ("is not supported for the current GPU",),
        r"(?:quantization method (?P<quantization>\S+)|Quantization scheme) is not supported for the current GPU\. "
        r"Min(?:imum)? capability: (?P<min_capability>\d+)\. Current capability: (?P<current_capability>\d+)",
        "vllm/config/vllm.py _get_quantization_config; compressed_tensors.py _check_scheme_supported",
    ),
    Pattern(
        "bfloat16_capability",
        "quant_error",
        ("Bfloat16 is only supported on GPUs with compute capability",),
        r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0\. Your (?P<gpu_name>.+?) GPU "
        r"(?:has compute capability (?P<current_capability_text>\d+(?:\.\d+)?)|does not have a compute capability)",
        "vllm/worker/worker.py _check_if_gpu_supports_dtype; vllm/platforms/cuda.py",
    ),
    Pattern(
        "max_model_len_above_derived",
        "config_error",
        ("is greater than the derived max_model_len",),
        r"User-specified max_model_len \((?P<max_model_len>\d+)\) is greater than the derived max_model_len "
        r"\((?P<derived_key>\w+)=(?P<derived_max_model_len>[\d.]+)",
        "vllm/config/model.py _get_and_verify_max_len",
        None,
        _derived,
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
]
