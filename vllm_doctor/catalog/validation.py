"""vLLM's own validation errors: a limit the configuration sets too low, or a combination of
features the release does not support.

Two families, told apart by what fixes them:

* A **limit** (``config_error`` events, the ``config_limit_error`` rule): the message prints the
  number asked for and the flag's value, and the fix is that flag set to the number. LoRA:

  - ``LoRA rank R is greater than max_lora_rank M.`` (``vllm/lora/worker_manager.py``
    ``_load_adapter`` 0.5.5-0.8 :110/:111; ``vllm/lora/peft_helper.py``
    ``validate_legal`` 0.9-0.33, where 0.33 prints the largest rank of ``rank_pattern``): the
    adapter's rank above ``--max-lora-rank``; raised when an adapter is loaded (a request
    naming it, or ``--lora-modules`` at startup);
  - ``LoRA added vocab size V is greater than lora_extra_vocab_size E.`` (worker_manager.py,
    0.5.5-0.11): ``--lora-extra-vocab-size``;
  - ``Number of requested LoRAs (N) is greater than the number of GPU LoRA slots (S).``
    (worker_manager.py ``set_active_adapters``, every release; a RuntimeError): ``--max-loras``;
  - ``max_cpu_loras (C) must be >= max_loras (M)`` (``vllm/config.py`` LoRAConfig 0.5.5-0.9,
    ``vllm/config/lora.py`` 0.10-0.33): ``--max-cpu-loras``;
  - ``max_lora_rank (R) must be one of (8, 16, 32, 64, 128, 256).`` (LoRAConfig 0.5.5-0.10;
    later releases type it as a ``Literal`` and pydantic refuses it in its own words).

  And the CPU swap space: ``Too large swap space. X GiB out of the Y GiB total CPU memory is
  allocated for the swap space.`` (CacheConfig.verify_with_parallel_config, 0.5.5-0.17: X is
  ``swap_space`` x ``tensor_parallel_size``, refused above :data:`SWAP_SPACE_HOST_SHARE` of Y;
  the "Possibly too large swap space." warning above 0.4 is no failure).

* An **unsupported combination** (``unsupported`` events, class ``other``): a feature the release
  refuses with the rest of the configuration; the fix is to drop the flag, or use what the
  message offers instead (:data:`UNSUPPORTED` names, per variant, what is refused, the flag to
  drop and what to use instead):

  - ``Speculative decoding with draft model is not supported yet. Please consider using other
    speculative decoding methods such as ngram, medusa, eagle, or mtp.`` (NotImplementedError,
    ``vllm/config/__init__.py`` 0.10.2 ("... or deepseek_mtp."), ``vllm/config/speculative.py``
    0.11-0.14: V1 before its ``draft_model`` method, vllm PR #24322);
  - ``Pipeline parallelism is not supported for this model. Supported models implement the
    `SupportsPP` interface.`` (ModelConfig.verify_with_parallel_config, 0.6-0.33);
  - ``Prefix caching is not supported with sliding window. Run with --disable-sliding-window to
    use prefix caching.`` (CacheConfig, 0.5.5-0.10);
  - ``Sleep mode is not supported on current platform.`` (ModelConfig, 0.8-0.33);
  - ``num_speculative_tokens was provided but without speculative model.`` (SpeculativeConfig,
    0.11-0.33).

The messages are matched anywhere in a record (not only at its start): a paste whose newlines
were collapsed holds the exception line in the middle of a physical line. The anchors of the
all-lower-case messages (``max_cpu_loras ...``, ``max_lora_rank (...) must be one of``,
``num_speculative_tokens ...``) include the exception's name before them (``ValueError: `` or
pydantic's ``Value error, ``, as every release raises them), so that the block pre-filter's gate
needs no literal common in prose.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ..units import to_int
from .pattern import Pattern

#: The ranks LoRAConfig accepts: 0.5.5-0.10 ``possible_max_ranks``; 0.33 ``MaxLoRARanks``.
LORA_RANKS_OLD: Tuple[int, ...] = (8, 16, 32, 64, 128, 256)
LORA_RANKS_NEW: Tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: lora_extra_vocab_size values LoRAConfig accepts (0.5.5-0.11 ``possible_lora_extra_vocab_size``).
LORA_EXTRA_VOCAB_SIZES: Tuple[int, ...] = (0, 256, 512)


#: The share of the host's RAM vLLM lets the CPU swap space take in all (vllm/config/cache.py
#: CacheConfig.verify_with_parallel_config, every release that checks it: ``cpu_memory_usage > 0.7
#: * total_cpu_memory`` raises). vLLM's constant, not a judgement of this tool.
SWAP_SPACE_HOST_SHARE = 0.7


def smallest_allowed(value: int, allowed: Tuple[int, ...]) -> Optional[int]:
    """The smallest of ``allowed`` at or above ``value``; None when ``value`` is above them all."""
    return next((a for a in sorted(allowed) if a >= value), None)


def _limit(variant: str, keys: Dict[str, str]):
    """A ``config_error`` build: ``variant`` and each group of ``keys`` (group -> data key) as a
    count, where printed."""

    def build(m, rec) -> Dict[str, Any]:
        data: Dict[str, Any] = {"variant": variant}
        for group, key in keys.items():
            if m[group]:
                data[key] = to_int(m[group])
        return data

    return build


def _swap_space(m, rec) -> Dict[str, Any]:
    """The swap space asked for in all (``swap_space`` x TP) and the host's RAM, in GiB."""
    data: Dict[str, Any] = {"variant": "swap_space_above_host"}
    if m["swap"]:
        data["swap_total_gib"] = float(m["swap"])
    if m["total"]:
        data["host_total_gib"] = float(m["total"])
    return data


def _allowed_ranks(m, rec) -> Dict[str, Any]:
    data = _limit("max_lora_rank_not_allowed", {"rank": "max_lora_rank"})(m, rec)
    if m["allowed"]:
        data["allowed_ranks"] = [to_int(x) for x in m["allowed"].replace(" ", "").split(",") if x.isdigit()]
    return data


#: What each unsupported combination refuses, the flag that asks for it (to drop) and what to use
#: instead: ``variant -> (feature, flag, instead)``, for the rule's title and remedies.
UNSUPPORTED: Dict[str, Tuple[str, str, str]] = {
    "draft_model_spec_decode": (
        "speculative decoding with a draft model",
        '--speculative-config (its draft "model")',
        "a method this release supports (ngram, eagle, eagle3, medusa, mtp), or a vLLM release with the "
        "draft_model method (0.15 and later: vllm/config/speculative.py)",
    ),
    "pipeline_parallel_model": (
        "pipeline parallelism for this model",
        "--pipeline-parallel-size",
        "tensor parallelism alone (--tensor-parallel-size) over the same GPUs",
    ),
    "prefix_caching_sliding_window": (
        "prefix caching with a sliding-window model",
        "--enable-prefix-caching",
        "--disable-sliding-window, if the context you serve fits the window",
    ),
    "sleep_mode_platform": (
        "sleep mode on this platform",
        "--enable-sleep-mode",
        "restarting the server instead of sleeping it",
    ),
    "spec_tokens_without_model": (
        "num_speculative_tokens without a speculative method or model",
        "num_speculative_tokens in --speculative-config",
        'a "method" (ngram, eagle, mtp ...) or a draft "model" in --speculative-config',
    ),
}


def _unsupported(variant: str):
    """An ``unsupported`` build: the ``variant`` (a key of :data:`UNSUPPORTED`), the exception
    where printed (pydantic's "Value error," is a ValueError) and the message (up to 300
    characters)."""

    def build(m, rec) -> Dict[str, Any]:
        data: Dict[str, Any] = {"variant": variant, "message": (m["msg"] or "").strip()[:300]}
        exc = m["exc"] or ("ValueError" if m["pyd"] else None)
        if exc:
            data["exception"] = exc
        return data

    return build


#: The exception name before a message, where printed (a record may hold only the message).
_EXC = r"(?:(?P<exc>(?:\w+\.)*\w*(?:Error|Exception)):\s*)?(?:(?P<pyd>Value error,)\s*)?"

PATTERNS = [
    Pattern(
        "lora_rank_above_max",
        "config_error",
        ("LoRA rank ",),
        r"LoRA rank (?P<rank>\d+) is greater than max_lora_rank\s*(?P<max>\d+)\.",  # the full stop: the number is whole
        "vllm/lora/worker_manager.py _load_adapter (0.5.5-0.8); vllm/lora/peft_helper.py validate_legal (0.9-0.33)",
        None,
        _limit("lora_rank_above_max", {"rank": "lora_rank", "max": "max_lora_rank"}),
    ),
    Pattern(
        "lora_vocab_above_extra",
        "config_error",
        ("LoRA added vocab size ",),
        r"LoRA added vocab size (?P<vocab>\d+) is greater than lora_extra_vocab_size\s*(?P<extra>\d+)\.",
        "vllm/lora/worker_manager.py _load_adapter (0.5.5-0.11)",
        None,
        _limit("lora_vocab_above_extra", {"vocab": "lora_added_vocab", "extra": "lora_extra_vocab_size"}),
    ),
    Pattern(
        "loras_above_slots",
        "config_error",
        ("Number of requested LoRAs",),
        r"Number of requested LoRAs \((?P<n>\d+)\) is greater\s*than the number of GPU LoRA slots\s*\((?P<slots>\d+)\)",
        "vllm/lora/worker_manager.py set_active_adapters (RuntimeError, 0.5.5-0.33)",
        None,
        _limit("loras_above_slots", {"n": "requested_loras", "slots": "max_loras"}),
    ),
    Pattern(
        "max_cpu_loras_below_max_loras",
        "config_error",
        ("Error: max_cpu_loras (", "error, max_cpu_loras ("),
        r"max_cpu_loras \((?P<cpu>\d+)\) must be >=\s*max_loras \((?P<max>\d+)\)",
        "vllm/config.py LoRAConfig.__post_init__ (0.5.5-0.9); vllm/config/lora.py (0.10-0.33)",
        None,
        _limit("max_cpu_loras_below_max_loras", {"cpu": "max_cpu_loras", "max": "max_loras"}),
    ),
    Pattern(
        "max_lora_rank_not_allowed",
        "config_error",
        ("Error: max_lora_rank (", "error, max_lora_rank ("),
        r"max_lora_rank \((?P<rank>\d+)\) must be one of\s*\((?P<allowed>[\d, ]+)\)",
        "vllm/config.py LoRAConfig.__post_init__ (0.5.5-0.9); vllm/config/__init__.py (0.10)",
        None,
        _allowed_ranks,
    ),
    Pattern(
        "swap_space_above_host",
        "config_error",
        ("Too large swap space",),
        r"Too large swap space\.\s*(?P<swap>\d+(?:\.\d+)?) GiB out of the\s*(?P<total>\d+(?:\.\d+)?) GiB total CPU "
        r"memory",
        "vllm/config.py CacheConfig.verify_with_parallel_config (0.5.5-0.9); vllm/config/cache.py (0.10-0.17)",
        None,
        _swap_space,
    ),
    Pattern(
        "draft_model_spec_decode_unsupported",
        "unsupported",
        ("Speculative decoding with draft model is not supported",),
        _EXC + r"(?P<msg>Speculative decoding with draft model is not\s*supported yet\.[^\n]{0,160}?"
        r"(?:(?:deepseek_)?mtp\.|$))",
        "vllm/config/__init__.py SpeculativeConfig.__post_init__ (0.10.2); vllm/config/speculative.py (0.11-0.14)",
        None,
        _unsupported("draft_model_spec_decode"),
        cut_from=r"draft model is not\s*supported",
    ),
    Pattern(
        "pipeline_parallel_unsupported_model",
        "unsupported",
        ("Pipeline parallelism is not supported for this model",),
        _EXC + r"(?P<msg>Pipeline parallelism is not supported for this model\.[^\n]{0,100}?(?:interface\.|$))",
        "vllm/config/model.py ModelConfig.verify_with_parallel_config (vllm/config.py before 0.10; 0.6-0.33)",
        None,
        _unsupported("pipeline_parallel_model"),
    ),
    Pattern(
        "prefix_caching_sliding_window_unsupported",
        "unsupported",
        ("Prefix caching is not supported with sliding window",),
        _EXC + r"(?P<msg>Prefix caching is not supported with sliding window\.[^\n]{0,100}?(?:prefix caching\.|$))",
        "vllm/config.py CacheConfig._verify_prefix_caching (0.5.5-0.9); vllm/config/cache.py (0.10)",
        None,
        _unsupported("prefix_caching_sliding_window"),
    ),
    Pattern(
        "sleep_mode_platform_unsupported",
        "unsupported",
        ("Sleep mode is not supported on current platform",),
        _EXC + r"(?P<msg>Sleep mode is not supported on current platform\.?)",
        "vllm/config/model.py ModelConfig (vllm/config.py before 0.10; 0.8-0.33)",
        None,
        _unsupported("sleep_mode_platform"),
    ),
    Pattern(
        "spec_tokens_without_model",
        "unsupported",
        ("Error: num_speculative_tokens was provided", "error, num_speculative_tokens was provided"),
        _EXC + r"(?P<msg>num_speculative_tokens was provided but without\s*speculative model\.?)",
        "vllm/config/speculative.py SpeculativeConfig.__post_init__ (0.11-0.33)",
        None,
        _unsupported("spec_tokens_without_model"),
    ),
]
