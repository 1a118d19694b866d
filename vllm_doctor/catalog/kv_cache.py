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

from . import Pattern

PATTERNS = [
    Pattern(
        "kv_v0_max_seq_len",
        "kv_error",
        ("is larger than the maximum number of tokens that can be stored in KV cache",),
        r"max seq len \((?P<max_model_len>\d+)\) is larger than the maximum number of tokens "
        r"that can be stored in KV cache \((?P<kv_tokens>\d+)\)",
        "vllm/worker/worker.py raise_if_cache_size_invalid (V0)",
    ),
    Pattern(
        "kv_v1_one_request",
        "kv_error",
        ("To serve at least one request with the model",),
        r"To serve at least one request with the models?'s max seq len \((?P<max_model_len>\d+)\), "
        r"\((?P<kv_needed_gib>[\d.]+) GiB KV cache is needed, which is larger than the available KV cache "
        r"memory \((?P<kv_available_gib>-?[\d.]+) GiB\)\.(?: Based on the available memory, the estimated "
        r"maximum model length is (?P<estimated_max_model_len>\d+)\.)?",
        "vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory (V1)",
    ),
    Pattern(
        "kv_no_cache_blocks",
        "kv_error",
        ("No available memory for the cache blocks",),
        r"No available memory for the cache blocks",
        "vllm/worker/worker.py raise_if_cache_size_invalid; vllm/v1/core/kv_cache_utils.py",
    ),
    Pattern(
        "kv_cannot_auto_fit",
        "kv_error",
        ("Cannot auto-fit max_model_len",),
        r"Cannot auto-fit max_model_len: not enough GPU memory",
        "vllm/v1/core/kv_cache_utils.py _auto_fit_max_model_len (newest)",
    ),
]
