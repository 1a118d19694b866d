"""Slow decoding with memory to spare: the cause is not KV capacity.

What it means:
    Several stats intervals in a row show requests running but generating only a few tokens
    per second each, while the KV cache is mostly empty and nothing waits. A capacity problem
    (preemption, a full KV cache, a queue) would show in those numbers; here it does not, so
    tuning memory will not make it faster.

Why it happens:
    The GPU itself is slow or shared (throttled clocks, another job's kernels), speculative
    decoding with a low acceptance rate, structured-output (guided decoding) or detokenization
    work on the CPU, a model running on a fallback implementation, very long outputs that
    the client waits for.

Remedies, in order:
    1. Check the GPU: ``nvidia-smi`` (utilization, clocks, other processes' compute).
    2. Turn off optional per-token work one at a time (speculative decoding, guided
       decoding) and compare the generation throughput.
    3. Compare with a plain benchmark of the same model (``vllm bench``) on the same GPU.

What does not help:
    ``gpu_memory_utilization``, ``max_model_len``, ``max_num_seqs``: memory and batch limits
    are not what is holding decoding back.

Sources:
    vllm/engine/metrics.py and vllm/v1/metrics/loggers.py (the stats lines); docs.vllm.ai
    "Optimization and Tuning" (configuration/optimization).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from .. import thresholds
from ..run import Failure, Line, Run, StatsSample
from ..verdict import Finding
from .rule import Rule, ev, finding, remedy, stats_from


@dataclass
class SlowDecode:
    """Stats observer: the longest run of consecutive intervals decoding slowly with memory to
    spare (requests running, nothing waiting, KV usage low, few tokens per request, and no
    prefill dominating the interval)."""

    streak: int = 0
    first: Optional[Line] = None
    best: int = 0
    best_first: Optional[Line] = None
    best_last: Optional[Line] = None
    slowest_tps: Optional[float] = None
    max_kv_pct: float = 0.0

    def add(self, s: StatsSample) -> None:
        gen = s.generation_tps
        slow = (
            s.running > 0
            and s.waiting == 0
            and gen is not None
            and gen > 0
            and (s.prompt_tps or 0.0) <= gen
            and s.kv_usage_pct is not None
            and s.kv_usage_pct < thresholds.SLOW_MAX_KV_PCT
            and gen / s.running < thresholds.SLOW_TPS_PER_REQUEST
        )
        if not slow:
            self.streak = 0
            return
        self.streak += 1
        if self.streak == 1:
            self.first = s.line
        per = gen / s.running
        self.slowest_tps = per if self.slowest_tps is None else min(self.slowest_tps, per)
        self.max_kv_pct = max(self.max_kv_pct, s.kv_usage_pct)
        if self.streak > self.best:
            self.best, self.best_first, self.best_last = self.streak, self.first, s.line


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    obs = run.stats.observers.get("slow_not_memory")
    if obs is None or obs.best < thresholds.SLOW_MIN_INTERVALS:
        return []
    s = run.stats
    title = (
        f"Slow decoding, not a memory problem: {obs.slowest_tps:.1f} tokens/s per request with the KV cache at most "
        f"{obs.max_kv_pct:.1f}% full and nothing waiting"
    )
    facts = {
        "tokens_per_s_per_request": round(obs.slowest_tps, 3),
        "slow_intervals": obs.best,
        "peak_kv_usage_pct": s.peak_kv_usage_pct,
        "max_running": s.max_running,
        "max_waiting": s.max_waiting,
    }
    rem = [
        remedy("Check the GPU: utilization, clocks and other processes' compute (nvidia-smi)", None, None, "host"),
        remedy(
            "Turn off optional per-token work one at a time (speculative decoding, guided decoding) and compare",
            None,
            f"the generation throughput per request in {stats_from(run)} is the measure",
        ),
        remedy("Compare with a plain benchmark of the same model on the same GPU (vllm bench)", None, None, "host"),
    ]
    evidence = [ev(obs.best_first, "slow, KV cache nearly empty"), ev(obs.best_last, "still slow")]
    dont = ["Memory and batch settings (gpu_memory_utilization, max_model_len, max_num_seqs): memory is not the limit"]
    forbids = [
        ("gpu_memory_utilization", "raise", "memory is not what holds decoding back"),
        ("max_num_seqs", "raise", "nothing waits for a slot"),
    ]
    return [finding(RULE, run, "runtime", title, facts, evidence, rem, dont, confidence="low", forbids=forbids)]


RULE = Rule(
    code="VD307",
    name="slow_not_memory",
    severity="info",
    summary="Slow decoding while the KV cache is nearly empty and nothing waits: not a memory problem.",
    doc=__doc__,
    check=check,
    observer=SlowDecode,
)
