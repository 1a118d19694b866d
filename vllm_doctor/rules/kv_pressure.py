"""Some KV cache pressure: preemption or saturated intervals, but not sustained (not a storm).

What it means:
    The KV cache filled up for a moment: V0 printed a preemption warning (its count stayed
    below a storm's), or a few stats intervals showed the KV cache nearly full with requests
    waiting, fewer than make a sustained episode. Requests were slowed for those seconds.
    Or the log ends on one full interval after intervals below saturation (a load test
    that just began): too little to call a storm (preemption_storm.lone_burst_at_the_end).

Why it happens:
    A burst of long requests; concurrency close to what the KV cache holds.

Remedies, in order:
    1. What the log showed (how full, how many waiting, how long), and what would make it a
       capacity problem: the same for longer. Then give the KV cache more memory before
       raising ``max_num_seqs`` (see ``vllm-doctor explain preemption_storm``).

What does not help:
    Tuning anything now: one passing peak is not a capacity problem yet.

Sources:
    vllm/core/scheduler.py Scheduler._preempt (V0 warning every 50th preemption);
    vllm/v1/metrics/loggers.py (stats lines); docs.vllm.ai "Optimization and Tuning",
    Preemption (configuration/optimization).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from .. import thresholds
from ..run import Failure, Run
from ..verdict import Finding
from .preemption_storm import (
    V0_PREEMPTION_LOG_EVERY,
    Episode,
    episode_of,
    full_at_the_end,
    is_storm,
    lone_burst_at_the_end,
    warning_facts,
)
from .rule import Rule, ev, finding, remedy, stats_from

#: Why the remedy carries no number (every server remedy without one says so).
WHY = (
    "a passing peak is not a capacity problem yet, one that lasts is (see vllm-doctor explain VD201); how much "
    "more memory cannot be worked out from a passing peak"
)


def _remedy(run: Run, ep: Optional[Episode], warnings: int):
    """What to do about pressure that was seen but did not last: say what the log showed
    (the saturated interval's KV usage and waiting requests, or the preemption warnings), and
    what makes it a capacity problem worth memory (the same for longer: a storm); never "watch
    for" what the evidence already shows."""
    more = (
        "give the KV cache more memory (a higher gpu_memory_utilization where the GPU has room, fp8 KV cache) "
        "before raising max_num_seqs"
    )
    if ep is not None:
        waited = f" with up to {ep.max_waiting} waiting" if ep.max_waiting else ""
        return remedy(
            f"The KV cache was {ep.peak_kv_usage_pct:.1f}% full{waited} for {ep.intervals} stats interval"
            f"{'s' if ep.intervals != 1 else ''} (from line {ep.first.lineno}), fewer than the "
            f"{thresholds.MIN_SATURATED_INTERVALS} that make a sustained episode: if {stats_from(run)} show it "
            f"for longer, {more}",
            None,
            WHY,
        )
    engines = run.preemption.by_process
    if len(engines) > 1:
        top = max(engines.values())
        count = (
            f"the highest cumulative count {top}, under the {V0_PREEMPTION_LOG_EVERY} between two warnings"
            if top
            else "their counts cut"
        )
        return remedy(
            f"{len(engines)} engines each warned of preemption ({count}; each count is its own engine's scheduler, "
            f"so none reached a storm): if any engine's warnings repeat, {more} for each engine",
            None,
            WHY,
        )
    return remedy(
        f"V0 warned of preemption {warnings} time{'s' if warnings != 1 else ''}, fewer than a storm: if the warnings "
        f"repeat, {more}",
        None,
        WHY,
    )


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
    rem = [_remedy(run, ep, p.warnings)]
    title = "Mild KV cache pressure (not sustained: not a storm)"
    if lone_burst_at_the_end(run):
        end = full_at_the_end(run)
        facts["saturated_at_the_end"] = True
        title = (
            f"KV cache full in one interval at the end of the log ({end.kv_usage_pct:.1f}%, {end.waiting} waiting, "
            f"{end.running} running) after intervals below saturation: one interval is no storm yet"
        )
        rem = [
            remedy(
                f"One interval is too little to size memory by: if {stats_from(run)} show the next intervals full "
                "with requests waiting (or preemptions), it is a storm (vllm-doctor explain VD201): then give the "
                "KV cache more memory before raising max_num_seqs",
                None,
                "the intervals before it were below saturation, and the log ends on this one; " + WHY.split("; ", 1)[1],
            )
        ]
    return [finding(RULE, run, "runtime", title, facts, evidence, rem, confidence="low")]


RULE = Rule(
    code="VD301",
    name="kv_pressure",
    severity="info",
    summary="Some preemption or KV saturation, not sustained.",
    doc=__doc__,
    check=check,
)
