"""KV cache capacity errors, in every wording (``shared/vllm-messages.md`` section 1).

Sources:

* V0 ``vllm/worker/worker.py raise_if_cache_size_invalid``: ``The model's max seq len
  (%d) is larger than the maximum number of tokens that can be stored in KV cache (%d).``
  and ``No available memory for the cache blocks.``;
* V1 ``vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory`` /
  ``_check_enough_kv_cache_memory``: ``To serve at least one request with the models's
  max seq len (%d), (%s GiB KV cache is needed, which is larger than the available KV
  cache memory (%s GiB).`` (``model's`` in the newest builds; from about v0.9 followed by
  ``Based on the available memory, the estimated maximum model length is %d.``), its
  ``No available memory for the cache blocks`` twin, and the auto-fit failure
  ``Cannot auto-fit max_model_len: not enough GPU memory``.
"""

from __future__ import annotations

from .pattern import Pattern, default_build

# Tolerance: a paste or a hand re-wrap may drop or double spaces and drop the "(" before
# the GiB figure (``max seq len (1048576),\n22.5 GiB KV cache is needed``); the numbers and
# their roles are the invariant core. v0.7 printed "GB" for the same GiB values.
_S = r"\s*"
_GIB = r"(?P<{}>-?\d+(?:\.\d+)?)" + _S + r"Gi?B"

PATTERNS = [
    Pattern(
        "kv_v0_max_seq_len",
        "kv_error",
        ("is larger than the maximum number of tokens that can be stored in KV cache",),
        r"max seq len" + _S + r"\((?P<max_model_len>[\d,]+)\)" + _S + r"is larger than the maximum number of tokens "
        r"that can be stored in KV cache" + _S + r"\((?P<kv_tokens>[\d,]+)\)",
        "vllm/worker/worker.py raise_if_cache_size_invalid (V0; also cpu/openvino/xpu workers); "
        "vllm/v1/worker/gpu_worker.py (v0.10)",
    ),
    Pattern(
        "kv_v1_one_request",
        "kv_error",
        ("To serve at least one request with the model",),
        r"To serve at least one request with the models?'s max seq len"
        + _S
        + r"\((?P<max_model_len>[\d,]+)\),?"
        + _S
        + r"\(?"
        + _S
        + _GIB.format("kv_needed_gib")
        + _S
        + r"KV"
        + _S
        + r"cache is needed,?"
        + _S
        + r"which is larger than the available KV"
        + _S
        + r"cache"
        + _S
        + r"memory"
        + _S
        + r"\(?"
        + _S
        + _GIB.format("kv_available_gib")
        + _S
        + r"\)?\.?"
        r"(?:\s*Based on the available memory,\s*the estimated maximum model length is"
        # the period, or the end of a paste cut after the number (z03): a number cut mid-digits
        # is smaller, so --max-model-len at or below it still fits (never a larger one)
        r"\s*(?P<estimated_max_model_len>\d[\d,]*)(?:\.|(?=\s)|$))?",
        "vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory / _check_enough_kv_cache_memory; "
        "vllm/v1/core/kv_cache_planning.py (v0.33)",
    ),
    Pattern(
        "kv_no_cache_blocks",
        "kv_error",
        ("No available memory for the cache blocks",),
        r"No available memory for the cache blocks",
        "vllm/worker/worker.py raise_if_cache_size_invalid; vllm/v1/core/kv_cache_utils.py",
    ),
    # TPU (tpu-inference determine_available_memory): what the model holds after profiling is
    # above gpu_memory_utilization of the HBM: no room is left for the KV cache (sums over the
    # worker's devices).
    Pattern(
        "kv_tpu_hbm_budget",
        "kv_error",
        ("exceeds total_hbm_limit_cap_gb=",),
        r"total_hbm_used_gb=(?P<hbm_used_gib>\d+(?:\.\d+)?)GiB exceeds total_hbm_limit_cap_gb="
        r"(?P<hbm_budget_gib>\d+(?:\.\d+)?)GiB by -?\d+(?:\.\d+)?GiB\.\s*Please consider increasing "
        r"--gpu-memory-utilization from (?P<gpu_memory_utilization>\d+(?:\.\d+)?) to a larger value",
        "tpu-inference tpu_inference/worker/tpu_worker_jax.py (tpu_worker.py) determine_available_memory (ValueError)",
        None,
        lambda m, rec: {**default_build(m, rec), "variant": "no_blocks"},
    ),
    Pattern(
        "kv_cannot_auto_fit",
        "kv_error",
        ("Cannot auto-fit max_model_len",),
        r"Cannot auto-fit max_model_len: not enough GPU memory",
        "vllm/v1/core/kv_cache_utils.py _auto_fit_max_model_len (v0.14+)",
    ),
]
