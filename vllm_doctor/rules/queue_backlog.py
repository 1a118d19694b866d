"""Requests wait while the KV cache has room: the batch budget limits admission, not memory.

What it means:
    Several stats intervals show requests waiting while the KV cache is far from full. The
    scheduler admits at most ``max_num_seqs`` requests and ``max_num_batched_tokens`` tokens
    per step; the rest wait even though memory is free.

Why it happens:
    ``max_num_seqs`` / ``max_num_batched_tokens`` set low (or left at a small default) for
    the load; a burst of arrivals. With LoRA enabled, requests for more distinct adapters
    than ``--max-loras`` (default 1) slots: the rest wait for a slot.

    One interval is enough when as many requests ran as ``max_num_seqs`` allows (the value
    in force): the cap is seen holding the rest back.

Remedies, in order:
    1. With LoRA enabled (where the log shows it): raise ``--max-loras`` to the number of
       adapters requested at once.
    2. Raise ``--max-num-seqs`` (twice the value in force) if latency allows, or
       ``--max-num-batched-tokens`` when fewer ran than max_num_seqs allows (batch limits
       come last in the tuning order, and memory is not the limit here), or add replicas.

What does not help:
    More KV cache memory (``gpu_memory_utilization``, fp8 KV cache): it is not full.

Sources:
    vllm/v1/core/sched/scheduler.py (admission by max_num_seqs / token budget);
    vllm/v1/metrics/loggers.py (stats lines); docs.vllm.ai "Optimization and Tuning"
    (configuration/optimization).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from .. import thresholds
from ..run import Failure, Line, Run, StatsSample
from ..verdict import Finding, Remedy
from .plan import constraints
from .rule import Rule, ev, finding, read_from, remedy


@dataclass
class Backlog:
    """Stats observer: intervals with requests waiting while KV usage is below
    :data:`~vllm_doctor.thresholds.BACKLOG_MAX_KV_PCT`, and the first such line."""

    intervals: int = 0
    first: Optional[Line] = None
    max_running: int = 0  # the most requests running in such an interval

    def add(self, s: StatsSample) -> None:
        if s.kv_usage_pct is not None and s.waiting > 0 and s.kv_usage_pct < thresholds.BACKLOG_MAX_KV_PCT:
            self.intervals += 1
            self.max_running = max(self.max_running, s.running)
            if self.first is None:
                self.first = s.line


def _at_cap(run: Run, b: Backlog) -> bool:
    """Requests waited with KV room while as many ran as max_num_seqs allows (the value in
    force, printed or the release's one default; a range of defaults proves nothing): the
    batch cap is seen holding them back, one interval is enough."""
    seqs = constraints(run).in_force("max_num_seqs")
    return seqs.value is not None and b.max_running >= seqs.value > 0


def batch_limit(run: Run, ran: int) -> Remedy:
    """The batch limit that held requests back: max_num_seqs when as many ran as it allows,
    else the per-step token budget (new requests are admitted as their prefill fits)."""
    c = constraints(run)
    seqs = c.in_force("max_num_seqs")
    action = "Raise the batch limit (batch limits come last in the tuning order; memory is not the limit here)"
    if seqs.low and ran >= seqs.low:
        kv = run.stats.peak_kv_usage_pct
        room = f"; the KV cache was at most {kv:.1f}% full, so memory is not what holds the rest back" if kv else ""
        why = f"{ran} requests ran at once, as many as max_num_seqs allows ({seqs.why}){room}"
        return c.raise_to(
            "max_num_seqs",
            2 * (seqs.high or seqs.low),
            action + ", if latency allows: a larger batch makes each step, and each token, slower",
            why,
        )
    tokens = c.in_force("max_num_batched_tokens")
    if not tokens.high:
        return remedy(action, None, f"max_num_batched_tokens is not in {read_from(run)} (V0 without chunked prefill)")
    why = (
        f"at most {ran} requests ran, fewer than max_num_seqs allows: the per-step token budget "
        f"({tokens.why}) admits new requests as their prefill fits"
    )
    return c.raise_to("max_num_batched_tokens", 2 * tokens.high, action, why)


def lora_shown(run: Run) -> bool:
    """The log shows LoRA enabled: ``--enable-lora`` (or ``enable_lora=True``) or a
    ``max_loras`` it prints."""
    return run.value("enable_lora") is True or run.value("max_loras") is not None


def lora_slots(run: Run) -> Optional[Remedy]:
    """With LoRA enabled, the batch holds requests for at most ``max_loras`` distinct adapters
    (vllm/config/lora.py ``max_loras``, default 1; the scheduler leaves a request for another
    adapter waiting while the slots are taken: vllm/core/scheduler.py and
    vllm/v1/core/sched/scheduler.py): requests wait with the KV cache empty. None when the
    log does not show LoRA enabled."""
    if not lora_shown(run):
        return None
    return constraints(run).unset(
        "max_loras",
        "raise",
        "Raise --max-loras to the number of distinct adapters requested at once: with LoRA enabled a batch "
        "holds requests for at most max_loras adapters, the rest wait however empty the KV cache is",
        f"in force: {constraints(run).in_force('max_loras').why}; each slot is preallocated on the GPU "
        "(max_loras x max_lora_rank), a little less KV cache",
    )


def fires(run: Run) -> bool:
    """Whether this rule takes the run: requests waited with KV room in
    :data:`~vllm_doctor.thresholds.BACKLOG_MIN_INTERVALS` intervals (or one at the
    max_num_seqs cap), and the cache never filled. VD203's reported hang hands a log with a
    queue over only when this holds, so no log is left that nobody takes."""
    s = run.stats
    b = s.observers.get("queue_backlog")
    if b is None or not b.intervals or (b.intervals < thresholds.BACKLOG_MIN_INTERVALS and not _at_cap(run, b)):
        return False
    return (s.peak_kv_usage_pct or 0) < thresholds.SATURATED_KV_PCT  # a cache that filled is pressure


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    s = run.stats
    b = s.observers.get("queue_backlog")
    if not fires(run):
        return []
    title = (
        f"Requests wait while the KV cache is at most {s.peak_kv_usage_pct:.1f}% full: the batch "
        "budget limits admission, not memory"
    )
    facts = {"max_waiting": s.max_waiting, "peak_kv_usage_pct": s.peak_kv_usage_pct, "backlog_intervals": b.intervals}
    rem = [lora_slots(run), batch_limit(run, s.max_running or 0), remedy("Or add replicas")]
    evidence = [ev(b.first, "waiting with KV cache room left")]
    return [finding(RULE, run, "runtime", title, facts, evidence, rem, confidence="low")]


RULE = Rule(
    code="VD302",
    name="queue_backlog",
    severity="info",
    summary="Requests wait while the KV cache has room: the batch budget limits admission.",
    doc=__doc__,
    check=check,
    observer=Backlog,
)
