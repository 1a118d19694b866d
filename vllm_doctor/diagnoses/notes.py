"""Notes: settings and patterns worth a look, shown only where the log shows them (VD3xx).

What it means:
    Informational findings that never change the primary verdict:

    * ``VD301 kv_pressure`` - some preemption or a saturated stats interval, but not
      sustained (V0 count 1-50, or fewer than 3 saturated intervals);
    * ``VD302 queue_backlog`` - requests waiting while the KV cache is far from full: the
      limit is the batch budget (``max_num_seqs``, ``max_num_batched_tokens``), not memory;
    * ``VD303 high_gpu_memory_utilization`` - ``gpu_memory_utilization`` >= 0.95 (no margin
      for fragmentation, transient activations or a co-tenant);
    * ``VD304 low_prefix_cache_hit`` - prefix-cache hit rate falling to near zero: a
      per-request value (timestamp, user id) at the start of a shared prompt defeats prefix
      caching; no flag fixes it;
    * ``VD305 long_default_max_model_len`` - ``max_model_len`` >= 65536 while the stats show
      little KV use: fit the length to the workload;
    * ``VD306 tp1_multi_gpu`` - an out-of-memory failure with ``tensor_parallel_size`` 1 on
      ``GPU N`` with N >= 1 (PyTorch numbers the GPUs the process can see, so at least N+1
      are visible): tensor parallelism is the capacity option left unused.

Why it happens:
    Defaults left as they are; prompt design; a load pattern.

Remedies, in order:
    Given with each note.

What does not help:
    Changing several knobs at once (one change at a time, in the tuning order).

Sources:
    shared/domain.md "Common pitfalls worth flagging".
"""

from __future__ import annotations

import sys
from typing import Any, List

from ..events import Phase
from ..tracker import Run
from .base import R, ev, make_finding, remedies
from .preemption_storm import MIN_SATURATED_INTERVALS

CLASS = "note"
CODE = "VD300"
SEVERITY = "info"
SUMMARY = "Informational notes on settings and load patterns (never the primary verdict)."

CODES = {
    "kv_pressure": "VD301",
    "queue_backlog": "VD302",
    "high_gpu_memory_utilization": "VD303",
    "low_prefix_cache_hit": "VD304",
    "long_default_max_model_len": "VD305",
    "tp1_multi_gpu": "VD306",
}
SUMMARIES = {
    "kv_pressure": "Some preemption or KV saturation, not sustained.",
    "queue_backlog": "Requests wait while the KV cache has room: the batch budget limits admission.",
    "high_gpu_memory_utilization": "gpu_memory_utilization >= 0.95 leaves no margin.",
    "low_prefix_cache_hit": "Prefix-cache hit rate collapsed: per-request values at the start of prompts.",
    "long_default_max_model_len": "A very long max_model_len while the KV cache stays nearly empty.",
    "tp1_multi_gpu": "Out of memory with tensor_parallel_size 1 while the log shows more GPUs.",
}


def _note(run: Run, name: str, title: str, facts, evidence, rem, phase: str = "runtime") -> Any:
    f = make_finding(sys.modules[__name__], run, phase, title, facts, evidence, rem)
    f.class_id, f.code = name, CODES[name]
    return f


def check(run: Run, storm: bool) -> List[Any]:
    out: List[Any] = []
    s, p = run.stats, run.preemption
    if not storm and (p.warnings or (s.episode and s.episode["intervals"] < MIN_SATURATED_INTERVALS)):
        facts = {}
        if p.warnings:
            facts.update(max_preemptions=p.max_cumulative, preemption_mode="SWAP" if "SWAP" in p.modes else "RECOMPUTE")
        if s.episode:
            facts["saturated_intervals"] = s.episode["intervals"]
        out.append(
            _note(
                run,
                "kv_pressure",
                "Mild KV cache pressure (not sustained: not a storm)",
                facts,
                [
                    ev(p.first, "preemption warning"),
                    ev(s.episode["first"] if s.episode else None, "saturated interval"),
                ],
                remedies(R("Watch the stats lines; if waiting grows with KV usage near 100%, add KV cache memory")),
            )
        )
    if s.backlog_intervals >= 2 and (s.peak_kv_usage_pct or 0) < 85.0:
        out.append(
            _note(
                run,
                "queue_backlog",
                f"Requests wait while the KV cache is at most {s.peak_kv_usage_pct:.1f}% full: the batch "
                "budget limits admission, not memory",
                {
                    "max_waiting": s.max_waiting,
                    "peak_kv_usage_pct": s.peak_kv_usage_pct,
                    "backlog_intervals": s.backlog_intervals,
                },
                [ev(s.backlog_record, "waiting with KV cache room left")],
                remedies(
                    R(
                        "Raise max_num_seqs / max_num_batched_tokens (batch limits come last in the "
                        "tuning order, and memory is not the limit here), or add replicas"
                    )
                ),
            )
        )
    U = run.value("gpu_memory_utilization")
    if U is not None and U >= 0.95:
        out.append(
            _note(
                run,
                "high_gpu_memory_utilization",
                f"gpu_memory_utilization {U} leaves no margin for fragmentation or a co-tenant",
                {"gpu_memory_utilization": U},
                [ev(run.record_for("gpu_memory_utilization"))],
                remedies(
                    R("Keep it at 0.90-0.92 unless the GPU is dedicated and stable", "--gpu-memory-utilization 0.90")
                ),
            )
        )
    if (s.prefix_hit_max or 0) >= 5.0 and s.prefix_hit_last is not None and s.prefix_hit_last < 1.0:
        out.append(
            _note(
                run,
                "low_prefix_cache_hit",
                f"Prefix-cache hit rate fell from {s.prefix_hit_max:.1f}% to {s.prefix_hit_last:.1f}%",
                {"prefix_hit_max_pct": s.prefix_hit_max, "prefix_hit_last_pct": s.prefix_hit_last},
                [ev(s.last_record, "latest stats")],
                remedies(
                    R(
                        "Keep per-request values (timestamps, ids) out of the start of shared prompts",
                        None,
                        "prefix caching reuses only identical leading tokens",
                        "client",
                    )
                ),
            )
        )
    tp = run.value("tensor_parallel_size")
    gpu = max((f.data.get("gpu_index", 0) for f in run.failures if f.kinds & {"oom"}), default=0)
    if tp == 1 and gpu >= 1:
        failure = next(f for f in run.failures if f.data.get("gpu_index", 0) == gpu)
        out.append(
            _note(
                run,
                "tp1_multi_gpu",
                f"tensor_parallel_size is 1 but the process sees at least {gpu + 1} GPUs",
                {"tensor_parallel_size": 1, "gpus_visible_at_least": gpu + 1},
                [ev(failure.records[0], f"GPU {gpu}"), ev(run.record_for("tensor_parallel_size"))],
                remedies(
                    R(
                        "Spread the model over the node's GPUs (a capacity option, not a speed one)",
                        "--tensor-parallel-size 2",
                        "the smallest split; more if the weights need it",
                    )
                ),
                "startup" if run.phase < Phase.READY else "runtime",
            )
        )
    L = run.value("max_model_len")
    if L and L >= 65536 and s.count and (s.peak_kv_usage_pct or 0) < 20.0:
        out.append(
            _note(
                run,
                "long_default_max_model_len",
                f"max_model_len {L} while the KV cache never passed {s.peak_kv_usage_pct:.1f}%",
                {"max_model_len": L, "peak_kv_usage_pct": s.peak_kv_usage_pct},
                [ev(run.record_for("max_model_len"))],
                remedies(R("Fit max_model_len to the workload's longest request")),
            )
        )
    return out
