"""Repeated preemption: the KV cache is full and requests are being pushed back (slow, not broken).

What it means:
    When the KV cache is full the scheduler preempts running requests (recompute, or V0's
    swap to CPU) and re-queues them. Throughput collapses while GPU compute looks idle. V0
    prints a warning for the 1st, 51st, 101st ... preemption
    (``total_num_cumulative_preemption=N``); V1 prints none, so saturation is judged from
    the stats lines: KV cache usage >= 85 % *with* requests waiting (or swapped, or a
    ``Preemptions:`` count), for at least 3 consecutive intervals - never from one line.

Why it happens:
    More concurrent demand (``max_num_seqs`` x sequence length) than the KV cache holds:
    long ``max_model_len`` contexts, ``n > 1`` sampling, a small ``gpu_memory_utilization``.

Remedies, in order:
    1. More KV cache: raise ``--gpu-memory-utilization`` (where the GPU has room),
       ``--kv-cache-dtype fp8``, more tensor parallelism, quantized weights.
    2. Less demand: lower ``--max-num-seqs`` (fewer requests share the cache) or
       ``--max-model-len``.

What does not help:
    Treating it as a compute or kernel problem; raising ``max_num_seqs`` (more requests
    compete for the same cache).

Sources:
    vllm/core/scheduler.py Scheduler._preempt (V0 warning); vllm/v1/core/sched/scheduler.py
    _preempt_request (no log); vllm/engine/metrics.py and vllm/v1/metrics/loggers.py (stats);
    shared/domain.md "Slow but no OOM".
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any, Dict, List, Optional

from ..envelopes import Record
from ..tracker import Run
from .base import R, ev, make_finding, remedies

CLASS = "preemption_storm"
CODE = "VD201"
SEVERITY = "warning"
SUMMARY = "Slow, not broken: the KV cache is full and requests are preempted over and over."

#: V0 logs every 50th preemption: a count of 51 or more means the warning fired twice.
V0_STORM_CUMULATIVE = 51
#: Consecutive saturated stats intervals that make a storm (V1 has nothing else).
MIN_SATURATED_INTERVALS = 3


def seconds_between(a: Optional[Record], b: Optional[Record]) -> Optional[int]:
    """Seconds from record a to b using vLLM's ``MM-DD HH:MM:SS`` stamps (no year printed)."""
    if not a or not b or not a.time or not b.time:
        return None
    try:
        t0 = datetime.strptime("2000-" + a.time, "%Y-%m-%d %H:%M:%S")
        t1 = datetime.strptime("2000-" + b.time, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    delta = int((t1 - t0).total_seconds())
    return delta if delta >= 0 else None


def check(run: Run) -> List[Any]:
    mod = sys.modules[__name__]
    p, s = run.preemption, run.stats
    ep = s.episode
    storm_v0 = p.max_cumulative >= V0_STORM_CUMULATIVE
    storm_stats = bool(ep) and ep["intervals"] >= MIN_SATURATED_INTERVALS
    storm_v1 = s.intervals_with_preemptions >= 2
    if not (storm_v0 or storm_stats or storm_v1):
        return []
    facts: Dict[str, Any] = {}
    if p.warnings:
        facts["max_preemptions"] = p.max_cumulative
        facts["preemption_mode"] = "SWAP" if "SWAP" in p.modes else "RECOMPUTE"
        facts["preemption_warnings"] = p.warnings
    if s.preemptions_total:
        facts["preemptions_in_stats"] = s.preemptions_total
    if s.count:
        facts.update(peak_kv_usage_pct=s.peak_kv_usage_pct, max_waiting=s.max_waiting, max_running=s.max_running)
        if s.max_swapped is not None:
            facts["max_swapped"] = s.max_swapped
    if ep:
        facts["saturated_intervals"] = ep["intervals"]
        secs = seconds_between(ep["first"], ep["last"])
        if secs is not None:
            facts["saturated_seconds"] = secs
    for k in (
        "kv_tokens",
        "max_concurrency",
        "max_model_len",
        "max_num_seqs",
        "gpu_memory_utilization",
        "kv_cache_dtype",
    ):
        if run.value(k) is not None:
            facts[k] = run.value(k)
    bits = []
    if p.warnings:
        bits.append(f"{p.max_cumulative} cumulative preemptions ({facts['preemption_mode']})")
    if ep:
        dur = f" for {facts['saturated_seconds']} s" if facts.get("saturated_seconds") else ""
        bits.append(
            f"KV cache {ep['peak_kv_usage_pct']:.1f}% full with up to {ep['max_waiting']} waiting over "
            f"{ep['intervals']} intervals{dur}"
        )
    preempted = p.warnings or s.preemptions_total
    why_stats = "V0 logs only every 50th preemption" if (s.engine or run.engine) == "v0" else "V1 logs no preemptions"
    title = (
        "KV cache saturated, requests preempted: "
        if preempted
        else f"KV cache saturated with requests waiting ({why_stats}; judged from the stats lines): "
    ) + "; ".join(bits)
    U = run.value("gpu_memory_utilization")
    seqs = run.value("max_num_seqs")
    dtype = str(run.value("kv_cache_dtype") or "auto")
    L = run.value("max_model_len")
    rem = remedies(
        R(
            "Give the KV cache more memory",
            f"--gpu-memory-utilization {min(0.93, (U or 0.9) + 0.03):.2f}" if (U or 0.9) < 0.93 else None,
            "every extra GiB becomes KV cache blocks"
            + ("" if U else "; the current value is not in the log, 0.9 (the default) assumed"),
        ),
        None
        if dtype.startswith("fp8")
        else R(
            "Halve KV per token (a precision trade-off to evaluate)",
            "--kv-cache-dtype fp8",
            f"about {2 * run.value('kv_tokens')} tokens instead of {run.value('kv_tokens')}"
            if run.value("kv_tokens")
            else None,
        ),
        R("Or more tensor parallelism / quantized weights (more room left for KV cache)"),
        R(
            "Lower demand: fewer concurrent sequences",
            f"--max-num-seqs {max(1, (seqs or (facts.get('max_running') or 256)) // 2)}",
            f"up to {facts.get('max_running')} ran at once"
            if facts.get("max_running")
            else (f"half the configured {seqs}" if seqs else "half of V0's default 256 (the value is not in the log)"),
        ),
        R("Or a shorter max_model_len, if the workload allows", None, f"currently {L}" if L else None),
    )
    if p.first is p.last:
        evidence = [ev(p.first, f"preemption warning ({p.max_cumulative} so far)")]
    else:
        evidence = [ev(p.first, "first preemption warning"), ev(p.last, f"last ({p.max_cumulative} so far)")]
    if ep:
        evidence += [ev(ep["first"], "saturation starts"), ev(ep["last"], "still saturated")]
    evidence.append(ev(s.peak_record, "peak KV usage"))
    evidence += [ev(run.record_for(k), k) for k in ("kv_tokens", "max_concurrency")]
    return [
        make_finding(
            mod,
            run,
            "runtime",
            title,
            facts,
            evidence,
            rem,
            [
                "Treating it as a compute/kernel problem: the scheduler is waiting for KV cache",
                "Raising max_num_seqs: more requests compete for the same cache",
            ],
        )
    ]
