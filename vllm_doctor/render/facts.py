"""A finding's key facts as a person reads them: ``(label, value)`` rows in words and units.

``GPU 0  23.56 GiB total, 21.75 MiB free``, never an internal name with mixed units
(``gpu_free_gib | 109.81 MiB``); configuration keeps vLLM's own names (``max_model_len``),
as the flags do. Sizes are GiB as vLLM and PyTorch print them (MiB below 1 GiB). The facts
come from the finding's run (configuration and startup facts) with the finding's own over
them (vocabulary: ``fixtures/logs/README.md``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import regex

from .names import where

# -- values ------------------------------------------------------------------------------


def size(gib: Any) -> Optional[str]:
    """A memory size given in GiB as vLLM and PyTorch print it: ``21.75 MiB`` below 1 GiB,
    ``23.56 GiB`` above; None for a missing or non-numeric value."""
    if isinstance(gib, bool) or not isinstance(gib, (int, float)):
        return None
    return f"{gib * 1024:.2f} MiB" if abs(gib) < 1 else f"{gib:.2f} GiB"


def number(value: Any) -> str:
    """A plain number the way a flag takes it (``29000``, ``0.9``); other values as text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "none"
    return str(value)


def fmt_value(key: str, value: Any) -> str:
    """One fact value with its unit, by the suffix of its name (``_gib`` a size, ``_pct`` a
    percentage, ``_seconds`` seconds); anything else as :func:`number` gives it."""
    if key.endswith("_gib") and size(value):
        return size(value)
    if key.endswith("_pct") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.1f}%"
    if key.endswith("_seconds") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g} s"
    return number(value)


def _join(*parts: Optional[str], sep: str = ", ") -> Optional[str]:
    kept = [p for p in parts if p]
    return sep.join(kept) if kept else None


def _gpu(p: Dict[str, Any]) -> Optional[str]:
    total, free = size(p.get("gpu_total_gib")), size(p.get("gpu_free_gib"))
    return _join(
        p.get("gpu_name") and str(p["gpu_name"]),
        p.get("device") and f"device {p['device']}",
        total and f"{total} total",
        free and f"{free} free",
    )


#: What an accelerator is called, by the words a log of it prints (first match wins; a log
#: with none of them is a GPU's). Ascend: torch_npu and vllm-ascend (``NPU function error``,
#: ``npu:0``, ``Starting to capture ACL graphs``, vllm_ascend/worker/model_runner_v1.py);
#: Intel: torch's ``xpu`` device and IPEX; TPU: torch_xla / libtpu / tpu-inference.
DEVICE_WORDS: Tuple[Tuple[str, Any], ...] = (
    ("NPU", regex.compile(r"\bNPU\b|\bnpu:[0-9]|torch_npu|vllm[_-]ascend|\bAscend\b|\bACL graphs?\b|\baclnn")),
    ("XPU", regex.compile(r"\bXPU\b|\bxpu:[0-9]|intel_extension_for_pytorch|\bIPEX\b")),
    ("TPU", regex.compile(r"\bTPU\b|libtpu|torch_xla|tpu_inference")),
)


def device_word(texts: Iterable[str]) -> str:
    """``GPU``, or ``NPU`` / ``XPU`` / ``TPU`` when one of ``texts`` (the evidence lines the
    verdict quotes) uses that device's own words (:data:`DEVICE_WORDS`)."""
    texts = list(texts)
    for word, pattern in DEVICE_WORDS:
        if any(pattern.search(t) for t in texts):
            return word
    return "GPU"


def _gpu_label(p: Dict[str, Any]) -> str:
    word = p.get("device_word") or "GPU"
    return f"{word} {p['gpu_index']}" if isinstance(p.get("gpu_index"), int) else word


def listed_processes(p: Dict[str, Any]) -> Tuple[List[Any], int]:
    """The co-tenant PIDs of the facts ``p`` a view names, the largest holders first past
    :data:`~vllm_doctor.limits.MAX_NAMED_PROCESSES`, and how many more there are (the
    titles and remedies name the same ones)."""
    from ..limits import largest_pids

    return largest_pids(p)


def _co_tenants(p: Dict[str, Any]) -> Optional[str]:
    pids = p.get("co_tenant_pids")
    if pids is None:
        return None
    if not pids:
        if p.get("held_unlisted_gib"):  # memory held elsewhere that the message does not list
            return f"none listed; {p['held_unlisted_gib']:.2f} GiB held outside this process"
        whose = "the failing process only" if p.get("raised_outside_vllm") else "vLLM's own process only"
        return f"none listed ({whose})"
    held = p.get("co_tenant_gib") or {}
    shown, more = listed_processes(p)
    text = ", ".join(
        f"PID {pid}" + (f" ({size(held.get(str(pid)))})" if size(held.get(str(pid))) else "") for pid in shown
    )
    if more:
        rest = size(p.get("co_tenant_total_gib"))
        text += f", +{more} more" + (f" ({rest} held by all {len(pids)} together)" if rest else "")
    return text


def concurrency(value: float) -> str:
    """Max concurrency as vLLM prints it (``Maximum concurrency for 40,960 tokens per request:
    6.15x``, two decimals; ``vllm/v1/core/kv_cache_utils.py``): ``1.05x``, never ``1.05469x``
    (a ratio worked out from metrics)."""
    return f"{value:.2f}x"


def _kv(p: Dict[str, Any]) -> Optional[str]:
    tokens = p.get("kv_tokens")
    conc = p.get("max_concurrency")
    return _join(
        size(p.get("kv_available_gib")),
        f"{tokens} tokens" if isinstance(tokens, int) else None,
        f"{concurrency(conc)} concurrency at max_model_len" if isinstance(conc, (int, float)) else None,
    )


def _request(p: Dict[str, Any]) -> Optional[str]:
    prompt, mx, total = p.get("prompt_tokens"), p.get("max_tokens"), p.get("requested_tokens")
    if prompt is None and total is None:
        return None
    parts = [f"{prompt} prompt tokens" if prompt is not None else None, f"max_tokens {mx}" if mx is not None else None]
    return _join(*parts, f"{total} in all" if total is not None else None)


def _stats(p: Dict[str, Any]) -> Optional[str]:
    kv, run, wait = p.get("peak_kv_usage_pct"), p.get("max_running"), p.get("max_waiting")
    secs = p.get("saturated_seconds")
    return _join(
        f"KV cache up to {kv:.1f}%" if isinstance(kv, (int, float)) else None,
        f"up to {run} running" if run is not None else None,
        f"up to {wait} waiting" if wait is not None else None,
        f"saturated for {secs:g} s" if isinstance(secs, (int, float)) and secs else None,
    )


def _preemptions(p: Dict[str, Any]) -> Optional[str]:
    n = p.get("max_preemptions")
    if n is None:
        return None
    mode = p.get("preemption_mode")
    count = f"at least {n} (the warning's count is cut off)" if p.get("preemption_count_cut") else f"{n} (cumulative)"
    engines = p.get("preempting_engines")
    if engines:
        # V0 counts per engine and warns at its 1st, 51st, 101st ... preemption
        count = f"{n} at most per engine, {engines} engines preempting (each count is that engine's own)"
    return count + (f", mode {mode}" if mode else "")


def _exception(p: Dict[str, Any]) -> Optional[str]:
    exc, msg = p.get("exception"), p.get("message")
    if not exc:
        return None
    return f"{exc}: {msg}" if msg and str(msg) not in str(exc) else str(exc)


def _fits_len(p: Dict[str, Any]) -> Optional[str]:
    if p.get("fitting_max_model_len") is not None:
        return str(p["fitting_max_model_len"])
    if p.get("estimated_max_model_len") is not None:
        return f"{p['estimated_max_model_len']} (vLLM's estimate)"
    return None


def _util_fits(p: Dict[str, Any]) -> Optional[str]:
    for key in ("gpu_memory_utilization_needed", "gpu_memory_utilization_that_fits"):
        if isinstance(p.get(key), (int, float)):
            return f"{p[key]:g}"
    return None


def _plain(key: str) -> Callable[[Dict[str, Any]], Optional[str]]:
    return lambda p: fmt_value(key, p[key]) if p.get(key) is not None else None


#: The key-fact rows, in reading order: (label, value from the pool of facts, or None).
#: Configuration keeps vLLM's own names (as the flags do); measured values are named in words.
FACT_ROWS: Tuple[Tuple[Any, Callable[[Dict[str, Any]], Optional[str]]], ...] = (
    ("Exception", _exception),
    (_gpu_label, _gpu),
    ("Failed allocation", lambda p: size(p.get("tried_to_allocate_gib"))),
    ("Held by vLLM", lambda p: size(p.get("vllm_process_gib"))),
    ("Other processes", _co_tenants),
    ("Held by others", lambda p: size(p.get("held_by_others_gib")) if p.get("co_tenant_pids") is None else None),
    ("Requested at startup", lambda p: size(p.get("requested_gib"))),
    (
        "Fragmentation",
        lambda p: (
            _join(size(p.get("reserved_unallocated_gib")), "reserved but unallocated", sep=" ")
            if isinstance(p.get("reserved_unallocated_gib"), (int, float)) and p["reserved_unallocated_gib"] >= 1
            else None
        ),
    ),
    ("max_model_len", _plain("max_model_len")),
    ("gpu_memory_utilization", _plain("gpu_memory_utilization")),
    ("tensor_parallel_size", _plain("tensor_parallel_size")),
    ("kv_cache_dtype", _plain("kv_cache_dtype")),
    ("max_num_seqs", _plain("max_num_seqs")),
    ("max_num_batched_tokens", _plain("max_num_batched_tokens")),
    ("Weights", lambda p: size(p.get("weights_gib"))),
    ("KV cache", _kv),
    (
        "KV cache needed",
        lambda p: (
            _join(size(p.get("kv_needed_gib")), "for one max_model_len request", sep=" ")
            if size(p.get("kv_needed_gib"))
            else None
        ),
    ),
    ("max_model_len that fits", _fits_len),
    (lambda p: "Utilization needed" if "gpu_memory_utilization_needed" in p else "Utilization that fits", _util_fits),
    ("Model's own limit", lambda p: str(p["derived_max_model_len"]) if p.get("derived_max_model_len") else None),
    ("Request", _request),
    ("Sampler warm-up", lambda p: f"{p['dummy_requests']} dummy requests" if p.get("dummy_requests") else None),
    ("Preemptions", _preemptions),
    ("Stats lines", _stats),
)


def fact_pool(verdict, finding) -> Dict[str, Any]:
    """What is known about ``finding``'s run: its configuration and startup facts, then the
    finding's own facts over them (for ``finding`` None: the newest run's)."""
    pool: Dict[str, Any] = {}
    run = run_of(verdict, finding)
    if run is not None:
        pool.update(run.facts)
        pool.update(run.config)
    if finding is not None:
        pool.update(finding.facts)
    # the device's own word, from the lines quoted about that source (an NPU's log says NPU)
    quoted = [f for f in getattr(verdict, "findings", None) or [] if finding is None or f.source == finding.source]
    pool["device_word"] = device_word(e.text for f in quoted or [finding] if f is not None for e in f.evidence)
    return {k: v for k, v in pool.items() if v is not None}


#: Formats of a metrics source (:mod:`vllm_doctor.metrics.parse`): its stats are scrapes.
_METRICS_FORMATS = frozenset({"prometheus", "openmetrics", "query_range", "metrics"})


def stats_from_metrics(verdict, finding) -> bool:
    """True when the stats of ``finding``'s run (the newest run's for None) came from
    /metrics scrapes, not from a log's stats lines: its evidence is scrapes, or its source is
    a metrics series, or a log source the metrics filled (``sources[].metrics``)."""
    if finding is not None and any(e.kind == "metric" for e in finding.evidence):
        return True
    run = run_of(verdict, finding)
    for s in verdict.sources:
        if run is not None and s.name == run.source:
            return bool(s.metrics) or set(s.format.split("+")) <= _METRICS_FORMATS
    return False


def fact_rows(verdict, finding) -> List[Tuple[str, str]]:
    """The key facts of ``finding`` (or of the newest run when None) as ``(label, value)``
    rows (see :data:`FACT_ROWS`); ``vLLM``, ``model`` and host are :func:`context_rows`. The
    stats row says where they came from: ``Stats lines`` of a log, or ``Metrics``."""
    pool = fact_pool(verdict, finding)
    rows = []
    for label, get in FACT_ROWS:
        value = get(pool)
        if value is not None:
            label = label(pool) if callable(label) else label
            if label == "Stats lines" and stats_from_metrics(verdict, finding):
                label = "Metrics"
            rows.append((label, value))
    return rows


def context_rows(verdict, finding) -> List[Tuple[str, str]]:
    """Where it ran: ``vLLM`` (version, engine), ``model``, host / pod / process."""
    pool = fact_pool(verdict, finding)
    rows = []
    if "vllm_version" in pool or "engine" in pool:
        version = str(pool.get("vllm_version", ""))
        engine = f"engine {pool['engine']}" if "engine" in pool else ""
        rows.append(("vLLM", f"{version}, {engine}" if version and engine else version or engine))
    if "model" in pool:
        rows.append(("Model", str(pool["model"])))
    if finding is not None:
        rows += [(k, v) for k, v in where(finding.source)]
    return rows


def run_of(verdict, finding):
    """The :class:`~vllm_doctor.verdict.RunSummary` of ``finding`` (None finding: the newest
    run of the first source; None when there is none)."""
    for run in verdict.runs:
        if finding is None or (run.source == finding.source and run.index == finding.run):
            return run
    return None
