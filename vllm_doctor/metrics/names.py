"""vLLM's Prometheus metric names, release by release, and the fields they fill.

Read from vLLM's own source (the wheels of each release: ``vllm/engine/metrics.py`` for the V0
engine, ``vllm/v1/metrics/loggers.py`` for V1). Counters are registered through
``prometheus_client``, which exposes a counter named ``x`` or ``x_total`` as the sample
``x_total`` (and, in the text format, a ``x_created`` gauge with its creation time), so the
names below are given without ``_total``: :func:`counter_base` strips it.

Gauges (one value per scrape):

* KV cache usage, a fraction 0..1 ("1 means 100 percent usage"):
  ``vllm:gpu_cache_usage_perc`` - V0 (every release to 0.10.x) and V1 from its first release
  (0.7.x); deprecated in 0.9.2, hidden in 0.11.x (shown only with
  ``--show-hidden-metrics-for-version=0.10``), removed in 0.12.0.
  ``vllm:kv_cache_usage_perc`` - V1 from 0.9.2 (0.9.2 and 0.10.x print both, same value).
* ``vllm:num_requests_running``, ``vllm:num_requests_waiting`` - V0 and V1, every release.
* ``vllm:num_requests_swapped`` - V0 only (V1 never swaps KV to the CPU).
* ``vllm:num_requests_waiting_by_reason{reason="capacity"|"deferred"}`` - V1 from 0.20.x:
  ``capacity`` waits for scheduling capacity (KV blocks, batch budget), ``deferred`` for a
  transient constraint (LoRA budget, KV transfer); the two add up to ``num_requests_waiting``.
* ``vllm:gpu_prefix_cache_hit_rate`` - V0 only, a rate 0..1 (``-1`` while nothing was asked).
* ``vllm:cache_config_info`` - an info gauge (always 1) whose labels are the CacheConfig:
  ``block_size``, ``num_gpu_blocks``, ``gpu_memory_utilization``, ``cache_dtype``,
  ``enable_prefix_caching``, ``num_cpu_blocks``, ``swap_space_bytes`` (V0) and, in newer V1,
  ``kv_cache_size_tokens``, ``kv_cache_max_concurrency``, ``kv_cache_memory_bytes``. V0 gives
  it no ``model_name`` label; V1 gives it ``engine``.

Counters (cumulative since the process started; a drop means a restart):

* ``vllm:num_preemptions`` - V0 (as ``vllm:num_preemptions_total``) and V1 from 0.8.x.
* ``vllm:prompt_tokens``, ``vllm:generation_tokens`` - every release (V0 and V1 up to 0.8.x
  register them as ``..._total``; from 0.9.2 V1 registers the base name; the sample is
  ``..._total`` either way).
* ``vllm:request_success{finished_reason=...}`` - every release.
* Prefix cache, in blocks (V1 0.7-0.8) then tokens (0.9.2 on): ``vllm:gpu_prefix_cache_queries``
  / ``vllm:gpu_prefix_cache_hits`` - V1 0.7.x to 0.10.x (deprecated in 0.9.2, hidden in 0.11.x,
  removed in 0.12.0); ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` - from 0.9.2.

Labels: V0 labels every series ``model_name`` (the first served model name); V1 adds
``engine`` (the data-parallel engine index) from 0.8.x. A Prometheus server adds the target's
``instance``/``job`` (and, on Kubernetes, ``namespace``/``pod``/``container``).
"""

from __future__ import annotations

from typing import Dict, Tuple

#: Gauge fields and the metric names that fill them, the preferred (newest) name first: when a
#: release prints both (0.9.2-0.10.x), the new one is read and the old one ignored.
GAUGES: Dict[str, Tuple[str, ...]] = {
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "swapped": ("vllm:num_requests_swapped",),
    "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
}

#: The per-reason waiting gauge (its ``reason`` label is kept).
WAITING_BY_REASON = "vllm:num_requests_waiting_by_reason"

#: Counter fields and their metric names without ``_total``, the preferred name first.
COUNTERS: Dict[str, Tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions",),
    "generation_tokens": ("vllm:generation_tokens",),
    "prompt_tokens": ("vllm:prompt_tokens",),
    "request_success": ("vllm:request_success",),
    "prefix_cache_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
}

#: The info gauge whose labels are the cache configuration.
CACHE_CONFIG_INFO = "vllm:cache_config_info"
#: prometheus_client's process start time (seconds since the epoch): a change is a restart.
PROCESS_START = "process_start_time_seconds"

#: Labels that say which server (source) a series belongs to. ``model_name`` names the model;
#: ``pod`` (else ``instance``), with ``namespace``, names where it runs.
MODEL_LABEL = "model_name"
LOCATION_LABELS = ("pod", "instance")
SOURCE_LABELS = ("model_name", "namespace", "pod", "instance", "job", "container")
#: The label of V1's data-parallel engine index.
ENGINE_LABEL = "engine"

_GAUGE_BY_NAME = {name: f for f, names in GAUGES.items() for name in names}
_COUNTER_BY_NAME = {name: f for f, names in COUNTERS.items() for name in names}


def counter_base(name: str) -> str:
    """``vllm:num_preemptions_total`` -> ``vllm:num_preemptions`` (names without it unchanged)."""
    return name[:-6] if name.endswith("_total") else name


def gauge_field(name: str) -> str:
    """The gauge field a sample name fills, or ``""``."""
    return _GAUGE_BY_NAME.get(name, "")


def counter_field(name: str) -> Tuple[str, bool]:
    """``(field, is_created)`` for a counter sample name (``x``, ``x_total`` or ``x_created``);
    ``("", False)`` when it is none of ours."""
    if name.endswith("_created"):
        return _COUNTER_BY_NAME.get(name[:-8], ""), True
    return _COUNTER_BY_NAME.get(counter_base(name), ""), False


def preference(field: str, name: str) -> int:
    """Rank of ``name`` among the names of ``field`` (0 is the newest, preferred)."""
    names = GAUGES.get(field) or COUNTERS.get(field) or ()
    base = counter_base(name[:-8] if name.endswith("_created") else name)
    for i, n in enumerate(names):
        if n in (name, base):
            return i
    return len(names)
