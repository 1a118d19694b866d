"""gpu_memory_utilization at 0.95 or above: no margin left.

What it means:
    vLLM claims ``gpu_memory_utilization x total`` of the GPU at startup and fills what is
    left after weights and activations with KV cache. At 0.95 and above nothing is left for
    fragmentation, transient activations of unusual requests, CUDA graph pools that were
    not profiled, or another process on the same GPU.

Why it happens:
    Pushed up to make a long ``max_model_len`` fit, or copied from a benchmark on a
    dedicated GPU.

Remedies, in order:
    1. Keep it at 0.90-0.92 unless the GPU is dedicated and its load stable.

What does not help:
    Raising it further: the failures it causes appear only on some request mixes.

Sources:
    vllm/config/cache.py CacheConfig.gpu_memory_utilization; docs.vllm.ai "Conserving Memory"
    (configuration/conserving_memory).
"""

from __future__ import annotations

from typing import List, Sequence

from .. import thresholds
from ..events import Phase
from ..run import Failure, Run
from ..verdict import Finding
from .plan import constraints
from .rule import Rule, ev, finding


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    U = run.value("gpu_memory_utilization")
    if U is None or U < thresholds.HIGH_UTILIZATION:
        return []
    title = f"gpu_memory_utilization {U} leaves no margin for fragmentation or a co-tenant"
    rem = [
        constraints(run).lower(
            "gpu_memory_utilization",
            0.90,
            "Keep it at 0.90-0.92 unless the GPU is dedicated and stable",
            "vLLM's defaults are 0.9 and, from 0.20, 0.92",
        )
    ]
    where = "startup" if run.phase < Phase.READY else "runtime"
    evidence = [ev(run.line_for("gpu_memory_utilization"))]
    return [finding(RULE, run, where, title, {"gpu_memory_utilization": U}, evidence, rem)]


RULE = Rule(
    code="VD303",
    name="high_gpu_memory_utilization",
    severity="info",
    summary="gpu_memory_utilization >= 0.95 leaves no margin.",
    doc=__doc__,
    check=check,
)
