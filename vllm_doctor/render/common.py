"""Pieces the human renderers share: which facts are key, how numbers read."""

from __future__ import annotations

from typing import Any, List, Tuple

KEY_FACTS = (
    "vllm_version",
    "engine",
    "model",
    "max_model_len",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "kv_cache_dtype",
    "max_num_seqs",
    "gpu_total_gib",
    "gpu_free_gib",
    "tried_to_allocate_gib",
    "co_tenant_pids",
    "weights_gib",
    "kv_available_gib",
    "kv_needed_gib",
    "kv_tokens",
    "estimated_max_model_len",
    "fitting_max_model_len",
    "gpu_memory_utilization_needed",
    "gpu_memory_utilization_that_fits",
    "requested_gib",
    "held_by_others_gib",
    "dummy_requests",
    "max_preemptions",
    "peak_kv_usage_pct",
    "max_waiting",
    "max_running",
    "saturated_seconds",
    "prompt_tokens",
    "max_tokens",
    "requested_tokens",
    "exception",
)


def fmt_value(key: str, value: Any) -> str:
    if isinstance(value, float):
        if key.endswith("_gib"):
            # as vLLM and PyTorch print them: small sizes in MiB
            return f"{value * 1024:.2f} MiB" if abs(value) < 1 else f"{value:.2f} GiB"
        if key.endswith("_pct"):
            return f"{value:.1f}%"
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "none"
    return str(value)


def key_facts(verdict, finding) -> List[Tuple[str, str]]:
    pool = {}
    for run in verdict.runs:
        if finding is not None and (run.source != finding.source or run.index != finding.run):
            continue
        pool.update({k: v for k, v in run.facts.items()})
        pool.update({k: v for k, v in run.config.items()})
        break
    if finding is not None:
        pool.update(finding.facts)
    return [(k, fmt_value(k, pool[k])) for k in KEY_FACTS if k in pool and pool[k] is not None]
