"""Some KV cache pressure: preemption or saturated intervals, but not sustained (not a storm).

What it means:
    The KV cache filled up for a moment: V0 printed a preemption warning (its count stayed
    below a storm's), or a few stats intervals showed the KV cache nearly full with requests
    waiting, fewer than make a sustained episode. Requests were slowed for those seconds.

Why it happens:
    A burst of long requests; concurrency close to what the KV cache holds.

Remedies, in order:
    1. Watch the stats lines: if waiting grows while KV usage stays near 100 %, the cache is
       too small for the load (see ``vllm-doctor explain preemption_storm``).

What does not help:
    Tuning anything now: one passing peak is not a capacity problem yet.

Sources:
    vllm/core/scheduler.py Scheduler._preempt (V0 warning every 50th preemption);
    vllm/v1/metrics/loggers.py (stats lines); docs.vllm.ai "Optimization and Tuning",
    Preemption (configuration/optimization).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from .. import thresholds
from ..run import Failure, Run
from ..verdict import Finding
from .preemption_storm import episode_of, is_storm, warning_facts
from .rule import Rule, ev, finding, remedy, stats_from


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    p = run.preemption
    ep = episode_of(run)
    passing = ep is not None and ep.intervals < thresholds.MIN_SATURATED_INTERVALS
    if is_storm(run) or not (p.warnings or passing):
        return []
    facts: Dict[str, Any] = {}
    if p.warnings:
        facts.update(warning_facts(run))
    if ep:
        facts["saturated_intervals"] = ep.intervals
    evidence = [ev(p.first, "preemption warning"), ev(ep.first if ep else None, "saturated interval")]
    rem = [remedy(f"Watch {stats_from(run)}; if waiting grows with KV usage near 100%, add KV cache memory")]
    title = "Mild KV cache pressure (not sustained: not a storm)"
    return [finding(RULE, run, "runtime", title, facts, evidence, rem, confidence="low")]


RULE = Rule(
    code="VD301",
    name="kv_pressure",
    severity="info",
    summary="Some preemption or KV saturation, not sustained.",
    doc=__doc__,
    check=check,
)
