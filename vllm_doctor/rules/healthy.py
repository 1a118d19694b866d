"""No memory or slowdown problem in this log.

What it means:
    The log is vLLM output and shows no failure, no KV saturation and no preemption storm;
    nothing in it says a process waits with nothing after it that shows progress, and the
    text around it (a pasted report) names no hang or failure the log does not show (those
    are VD203 and VD901, of low confidence). A log that ends mid-startup with none of these
    is a startup still going (the shared corpus's convention). Notes (``VD3xx``) may still
    point at settings worth a look.

Why it happens:
    The server is fine, or the problem lies outside what vLLM logs (client side, network,
    a slow generation of many tokens).

Remedies, in order:
    1. Nothing to change for memory. For a complaint of slowness, compare generation
       throughput with the number of running requests and check the client's ``max_tokens``.

What does not help:
    Memory tuning without evidence.

Sources:
    vllm/v1/core/kv_cache_utils.py ("GPU KV cache size", "Maximum concurrency" lines);
    vllm/v1/metrics/loggers.py and vllm/engine/metrics.py (the stats lines); docs.vllm.ai
    "Optimization and Tuning" (configuration/optimization).
"""

from __future__ import annotations

from typing import List, Sequence

from ..run import Failure, Run
from ..verdict import Finding
from .rule import Rule


def title(where: str = "the log") -> str:
    """The clean verdict's headline, naming where it was read (``the log``, ``the metrics``:
    :func:`~vllm_doctor.rules.rule.read_from`)."""
    return f"No memory or slowdown problem found in {where}."


def check(run: Run, failures: Sequence[Failure], phase: str = "") -> List[Finding]:
    return []  # healthy is what the verdict says when no rule finds anything


RULE = Rule(
    code="VD000",
    name="healthy",
    severity="ok",
    summary=title(),
    doc=__doc__,
    check=check,
)
