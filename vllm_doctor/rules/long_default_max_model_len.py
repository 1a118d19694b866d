"""A very long max_model_len while the KV cache stays nearly empty.

What it means:
    ``max_model_len`` is 64k tokens or more, and the stats lines show the KV cache never
    passed a small share of its capacity. The length limit bounds the worst case: a long one
    costs KV capacity per request and startup headroom, and here the workload never used it.

Why it happens:
    ``max_model_len`` left at the model's default (128k, 256k, 1M) for a workload of short
    requests.

Remedies, in order:
    1. Fit ``--max-model-len`` to the workload's longest request.

What does not help:
    Raising ``gpu_memory_utilization`` to make room for lengths nobody sends.

Sources:
    vllm/config/model.py (max_model_len from the model's config); docs.vllm.ai "Conserving
    Memory" (configuration/conserving_memory: context length and batch size).
"""

from __future__ import annotations

from typing import List, Sequence

from .. import thresholds
from ..run import Failure, Run
from ..verdict import Finding
from .rule import Rule, ev, finding, remedy


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    L, s = run.value("max_model_len"), run.stats
    if not L or L < thresholds.LONG_MAX_MODEL_LEN or not s.count:
        return []
    if (s.peak_kv_usage_pct or 0) >= thresholds.LOW_KV_USE_PCT:
        return []
    title = f"max_model_len {L} while the KV cache never passed {s.peak_kv_usage_pct:.1f}%"
    facts = {"max_model_len": L, "peak_kv_usage_pct": s.peak_kv_usage_pct}
    rem = [
        remedy(
            "Fit max_model_len to the workload's longest request",
            None,
            f"the KV cache never passed {s.peak_kv_usage_pct:.1f}% of its capacity; the longest request is not in the "
            "log, so the length that fits the workload is yours to set",
        )
    ]
    return [finding(RULE, run, "runtime", title, facts, [ev(run.line_for("max_model_len"))], rem, confidence="low")]


RULE = Rule(
    code="VD305",
    name="long_default_max_model_len",
    severity="info",
    summary="A very long max_model_len while the KV cache stays nearly empty.",
    doc=__doc__,
    check=check,
)
