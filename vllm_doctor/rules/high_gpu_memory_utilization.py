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
    1. Keep it at 0.90-0.92 unless the GPU is dedicated and its load stable - where the
       startup line shows the weights and activations fit there with a KV cache of at least
       ``KV_FLOOR_GIB``. Where they do not (hunt4 h19: 21.78 GiB of 23.58 at 0.99), a lower
       value would not start: lower only as far as they fit, or make the model smaller
       (quantized weights, tensor parallelism) to buy the margin.

What does not help:
    Raising it further: the failures it causes appear only on some request mixes.

Sources:
    vllm/config/cache.py CacheConfig.gpu_memory_utilization; docs.vllm.ai "Conserving Memory"
    (configuration/conserving_memory).
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

from .. import thresholds
from ..events import Phase
from ..run import Failure, Run
from ..verdict import Finding
from .plan import constraints
from .rule import Rule, ev, finding, remedy


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    U = run.value("gpu_memory_utilization")
    if U is None or U < thresholds.HIGH_UTILIZATION:
        return []
    title = f"gpu_memory_utilization {U} leaves no margin for fragmentation or a co-tenant"
    c = constraints(run)
    floor = _lowest_that_starts(run, U)
    if floor is None or floor[0] <= 0.90:
        rem = [
            c.lower(
                "gpu_memory_utilization",
                0.90,
                "Keep it at 0.90-0.92 unless the GPU is dedicated and stable",
                "vLLM's defaults are 0.9 and, from 0.20, 0.92",
            )
        ]
    else:
        fixed, total = floor[1], floor[2]
        rem = [
            c.lower(
                "gpu_memory_utilization",
                floor[0] if floor[0] < U else None,
                "Lower it only as far as the model still starts: at 0.90 it would not",
                f"weights, activations and non-torch memory take {fixed:.2f} GiB of {total:.2f} GiB; "
                f"{thresholds.KV_FLOOR_GIB:g} GiB of KV cache needs {floor[0]:.2f}",
            ),
            remedy("For a real margin, make the model smaller on this GPU: quantized weights or tensor parallelism"),
        ]
    where = "startup" if run.phase < Phase.READY else "runtime"
    evidence = [ev(run.line_for("gpu_memory_utilization"))]
    return [finding(RULE, run, where, title, {"gpu_memory_utilization": U}, evidence, rem)]


def _lowest_that_starts(run: Run, U: float) -> Optional[Tuple[float, float, float]]:
    """``(utilization, fixed GiB, total GiB)``: the lowest gpu_memory_utilization (rounded up
    to 0.01) whose budget still holds what the startup line shows outside the KV cache (the
    budget less the KV cache: weights, activation peak, non-torch memory) and
    ``KV_FLOOR_GIB`` of KV cache; None when the log does not show the budget's split."""
    total, kv = run.value("gpu_total_gib"), run.value("kv_available_gib")
    if not total or kv is None:
        return None
    fixed = U * total - kv
    if fixed <= 0:
        return None
    return math.ceil((fixed + thresholds.KV_FLOOR_GIB) / total * 100) / 100, fixed, total


RULE = Rule(
    code="VD303",
    name="high_gpu_memory_utilization",
    severity="info",
    summary="gpu_memory_utilization >= 0.95 leaves no margin.",
    doc=__doc__,
    check=check,
)
