"""A ticket's title: what happened, on which GPU, where and when
(``Runtime OOM on GPU 0 (79.33 GiB) at 02-10 18:06:30``), never the tool's own name."""

from __future__ import annotations

from .evidence import verdict_times
from .facts import _gpu_label, fact_pool, size
from .names import where

#: What a ticket title calls each class.
SYMPTOM = {
    "weight_load_oom": "Out of memory loading the weights",
    "kv_cache_capacity": "KV cache too small for max_model_len",
    "startup_memory_contention": "GPU memory taken by another process at startup",
    "cuda_graph_capture_oom": "Out of memory capturing CUDA graphs",
    "sampler_warmup_oom": "Out of memory in the sampler warm-up",
    "quantization_unsupported": "Quantization not supported on this GPU",
    "config_limit_error": "Configuration rejected at startup",
    "runtime_oom": "Runtime OOM",
    "preemption_storm": "KV cache saturated, requests waiting or preempted",
    "request_too_long": "Requests rejected as longer than max_model_len",
    "engine_stall": "Engine stalled",
    "other": "Server failure",
    "unknown": "Server failure, root cause not in the log",
    "healthy": "vLLM server healthy",
    "not checked": "Not checked: the selected rules found nothing",
}

#: What the text and Markdown views call such a verdict, and its "severity".
NOT_CHECKED, SELECTED_RULES_ONLY = "not checked", "selected rules only"
#: Phases after which a server is up (events.Phase labels).
UP_PHASES = ("ready", "serving")


def not_checked(verdict):
    """``verdict`` as the text and Markdown views show it: a clean verdict of ``--select``
    (``verdict.selected_rules`` set: some rules only) is "not checked", never "healthy" (the rules that would explain a
    failure may not have run): the class reads ``not checked``, the severity ``selected rules
    only``, and the title says the selected rules found nothing and, where the log shows it,
    that the server never became ready (the last phase its runs reached). Any other verdict
    is returned as it is. A shallow copy: ``verdict`` itself, its JSON and its exit code (the
    selected rules' verdict, 0) are not changed."""
    import copy

    if verdict.primary_class != "healthy" or verdict.selected_rules is None:
        return verdict
    title = f"the selected rules ({', '.join(verdict.selected_rules)}) found nothing"
    known = [r for r in verdict.runs if r.phase_reached and r.phase_reached != "unknown"]
    down = [r for r in known if r.phase_reached not in UP_PHASES]
    if down and len(verdict.runs) == 1:
        title = f"The server never became ready in this log (last phase: {down[0].phase_reached}); {title}"
    elif down:
        title = f"{len(down)} of {len(verdict.runs)} runs never became ready in the log; {title}"
    else:
        title = title[0].upper() + title[1:]
    shown = copy.copy(verdict)
    shown.primary_class, shown.severity = NOT_CHECKED, SELECTED_RULES_ONLY
    shown.title = title + ". Run without --select for the whole diagnosis."
    shown.sources = []
    for s in verdict.sources:
        if s.primary_class == "healthy":
            s = copy.copy(s)
            s.primary_class = NOT_CHECKED
        shown.sources.append(s)
    return shown


def _lead(title: str) -> str:
    """The opening of a finding's title, what a ticket's title says of a failure the classes
    do not name (``Out of GPU memory outside vLLM``): its first clause (up to ``: ``), or
    its first two when the first is a bare ``Startup failed`` of two words or fewer."""
    parts = title.rstrip(".").split(": ")
    lead = parts[0] if len(parts[0].split()) > 2 or len(parts) == 1 else ": ".join(parts[:2])
    return lead[:1].upper() + lead[1:]


def symptom_title(verdict) -> str:
    """The ticket's title: what happened, on which GPU, where and when, e.g. ``Runtime OOM on
    GPU 0 (79.33 GiB) at 02-10 18:06:30`` (parts the log does not give are left out)."""
    p = verdict.primary
    if p is None:
        if verdict.primary_class == "unknown" and not any(s.vllm_output for s in verdict.sources):
            return "Nothing recognisable as vLLM output"
        return SYMPTOM.get(verdict.primary_class, verdict.title)
    pool = fact_pool(verdict, p)
    title = SYMPTOM.get(p.class_id, p.class_id.replace("_", " ").capitalize())
    word = pool.get("device_word") or "GPU"
    if word != "GPU":  # the device the log names (an Ascend log says NPU)
        title = title.replace("GPU", word)
    if p.class_id == "kv_cache_capacity" and pool.get("max_model_len"):
        title += f" {pool['max_model_len']}"
    if p.class_id == "other" and pool.get("exception"):
        title += f": {pool['exception']}"
    elif p.class_id == "other" and p.title:
        title = _lead(p.title)
    total = size(pool.get("gpu_total_gib"))
    if total and p.class_id in (
        "weight_load_oom",
        "startup_memory_contention",
        "cuda_graph_capture_oom",
        "sampler_warmup_oom",
        "runtime_oom",
        "kv_cache_capacity",
    ):
        # "on GPU 0 (79.33 GiB)"; without the index, "on a 60.96 GiB NPU" (never a blank)
        title += (
            f" on {_gpu_label(pool)} ({total})" if isinstance(pool.get("gpu_index"), int) else f" on a {total} {word}"
        )
    host = [v.split(" (", 1)[0] for k, v in where(p.source) if k in ("Host", "Pod")]
    if host:
        title += f" on {host[0]}"
    first, _ = verdict_times(verdict)
    if first:
        title += f" at {first}"
    return title
