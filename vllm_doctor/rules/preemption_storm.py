"""Repeated preemption: the KV cache is full and requests are being pushed back (slow, not broken).

What it means:
    When the KV cache is full the scheduler preempts running requests (recompute, or V0's
    swap to CPU) and re-queues them. Throughput collapses while GPU compute looks idle. V0
    prints a warning for the 1st, 51st, 101st ... preemption
    (``total_num_cumulative_preemption=N``); V1 prints none, so saturation is judged from
    the stats lines: KV cache usage >= 85 % *with* requests waiting (or swapped, or a
    ``Preemptions:`` count), for at least 3 consecutive intervals; or in the log's LAST
    interval, KV usage at 95 % or more (85 % with a V0 preemption after it) with 3 times the
    running requests waiting: nothing after it shows the peak passed (a hang, a cut paste).
    After intervals below saturation, that last one alone is a burst that just began (a
    VD301 note): a second saturated interval or a preemption must show it lasting.
    An interval that processed nothing (0.0 prompt and 0.0 generation tokens/s) is never
    saturated: the engine is wedged or the stats are stale (vLLM issue 22545), VD203's
    reading; more KV cache does nothing there.

Why it happens:
    More concurrent demand (``max_num_seqs`` x sequence length) than the KV cache holds:
    long ``max_model_len`` contexts, ``n > 1`` sampling, a small ``gpu_memory_utilization``.

    V0 with SWAP preemption (a sequence group of several sequences: ``n > 1``, beam search)
    parks preempted sequences in vLLM's own CPU swap pool (``--swap-space`` GiB per GPU, 4 by
    default); when that is full too the engine dies: "RuntimeError: Aborted due to the lack of
    CPU swap space. Please increase the swap space to avoid this error." It is the same KV
    capacity problem (RL rollouts sampling n responses per prompt under Ray, verl's
    WorkerDict), not the OS swap and not host RAM.

Remedies, in order:
    1. More KV cache: raise ``--gpu-memory-utilization`` (where the GPU has room),
       ``--kv-cache-dtype fp8``, more tensor parallelism, quantized weights.
    2. Less demand: lower ``--max-num-seqs`` (fewer requests share the cache) or
       ``--max-model-len``.
    After the swap pool ran out: the same two (and fewer samples ``n`` / a lower
    ``max_tokens`` per request), then a larger ``--swap-space`` (vLLM's pinned CPU pool).

What does not help:
    Treating it as a compute or kernel problem; raising ``max_num_seqs`` (more requests
    compete for the same cache). For the swap abort: more OS swap or host RAM (vLLM's swap
    space is its own pool, sized by ``--swap-space``).

Sources:
    vllm/core/scheduler.py Scheduler._preempt (V0 warning); vllm/v1/core/sched/scheduler.py
    _preempt_request (no log); vllm/engine/metrics.py and vllm/v1/metrics/loggers.py (stats);
    docs.vllm.ai "Optimization and Tuning", Preemption (configuration/optimization).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional, Sequence

from .. import thresholds
from ..run import Failure, Line, Run, StatsSample
from ..verdict import Finding
from .plan import constraints
from .rule import Rule, ev, finding, read_from, remedy, stats_from


@dataclass
class Episode:
    """A run of consecutive saturated stats intervals on one engine."""

    engine_index: int
    first: Line
    last: Line
    intervals: int = 0
    peak_kv_usage_pct: float = 0.0
    max_waiting: int = 0
    max_running: int = 0
    max_swapped: int = 0


@dataclass
class _Streaks:
    """Per-engine runs of consecutive saturated intervals, and the longest so far."""

    episode: Optional[Episode] = None
    streak: Dict[int, Episode] = field(default_factory=dict)

    def add(self, s: StatsSample, saturated: bool) -> None:
        st = self.streak.get(s.engine_index)
        if not saturated:
            if st is not None:
                del self.streak[s.engine_index]
            return
        kv = s.kv_usage_pct
        if st is None:
            st = self.streak[s.engine_index] = Episode(s.engine_index, s.line, s.line, peak_kv_usage_pct=kv)
        st.intervals += 1
        st.last = s.line
        st.peak_kv_usage_pct = max(st.peak_kv_usage_pct, kv)
        st.max_waiting = max(st.max_waiting, s.waiting)
        st.max_running = max(st.max_running, s.running)
        st.max_swapped = max(st.max_swapped, s.swapped or 0)
        if self.episode is None or st.intervals > self.episode.intervals or self.episode is st:
            self.episode = st


@dataclass
class Saturation:
    """Stats observer: the longest episode of saturated intervals (KV usage at or above
    :data:`~vllm_doctor.thresholds.SATURATED_KV_PCT` with requests waiting, swapped or
    preempted), per engine; and the same without counting waiting requests, for an offline
    ``LLM()`` batch, whose queue holds every prompt by design. Fed every stats sample."""

    any_pressure: _Streaks = field(default_factory=_Streaks)
    capacity_pressure: _Streaks = field(default_factory=_Streaks)

    def add(self, s: StatsSample) -> None:
        full = s.kv_usage_pct is not None and s.kv_usage_pct >= thresholds.SATURATED_KV_PCT
        full = full and not processed_nothing(s)
        pushed_back = (s.swapped or 0) > 0 or s.preemptions > 0
        self.any_pressure.add(s, full and (pushed_back or s.waiting > 0))
        self.capacity_pressure.add(s, full and pushed_back)


def processed_nothing(s: StatsSample) -> bool:
    """The interval printed both throughputs and both are zero: no prompt token read and no
    token generated. Its KV and queue numbers are then no saturation: the engine did no
    work (a wedge, VD203's reading), or the numbers are stale (vLLM issue 22545: V1's stats
    are not reset after every request was aborted, so ``Running: 106, Waiting: 15, GPU KV
    cache usage: 90.4%`` repeats at 0.0 tokens/s). A full cache that is really in use
    preempts and recomputes, which shows as throughput; more KV cache does nothing for
    an engine that processes nothing."""
    return s.prompt_tps == 0 and s.generation_tps == 0


def episode_of(run: Run) -> Optional[Episode]:
    """The run's longest saturation episode (None when no interval was saturated); for an
    offline batch, waiting requests are not pressure."""
    obs = run.stats.observers.get("preemption_storm")
    if obs is None:
        return None
    return (obs.capacity_pressure if "offline_batch" in run.markers else obs.any_pressure).episode


def seconds_between(a: Optional[Line], b: Optional[Line]) -> Optional[int]:
    """Seconds from line a to b using vLLM's ``MM-DD HH:MM:SS`` stamps (no year printed)."""
    if not a or not b or not a.time or not b.time:
        return None
    try:
        t0 = datetime.strptime("2000-" + a.time, "%Y-%m-%d %H:%M:%S")
        t1 = datetime.strptime("2000-" + b.time, "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    delta = int((t1 - t0).total_seconds())
    return delta if delta >= 0 else None


#: V0 logs the 1st, 51st, 101st ... preemption (vllm/core/scheduler.py Scheduler._preempt:
#: ``if self.num_cumulative_preemption % 50 == 0`` after counting), a fact of the source.
V0_PREEMPTION_LOG_EVERY = 50


def v0_storm(run: Run) -> bool:
    """V0's cumulative count shows the warning fired V0_STORM_WARNINGS times or more (a single
    line of a pasted excerpt may carry the count: ``total_num_cumulative_preemption=101``)."""
    return run.preemption.max_cumulative > V0_PREEMPTION_LOG_EVERY * (thresholds.V0_STORM_WARNINGS - 1)


def warning_facts(run: Run) -> Dict[str, Any]:
    """``max_preemptions`` and ``preemption_mode`` from V0's warnings. A warning cut before its
    ``total_num_cumulative_preemption=N`` still proves one preemption: ``max_preemptions`` is
    then at least 1 and ``preemption_count_cut`` says the count is not known."""
    p = run.preemption
    facts: Dict[str, Any] = {
        "max_preemptions": max(p.max_cumulative, 1),
        "preemption_mode": "SWAP" if "SWAP" in p.modes else "RECOMPUTE",
    }
    if not p.max_cumulative:
        facts["preemption_count_cut"] = True
    if len(p.by_process) > 1:
        # several engines (an RL job's rollout workers): each count is its own scheduler's
        facts["preempting_engines"] = len(p.by_process)
        facts["preemptions_by_engine"] = dict(sorted(p.by_process.items(), key=lambda kv: -kv[1]))
    if p.messages > p.warnings:
        facts["preemption_messages"] = p.messages  # Ray's "[repeated Nx across cluster]" unfolded
    return facts


def full_at_the_end(run: Run) -> Optional[StatsSample]:
    """remedies2: the run's last stats interval, when it shows the KV cache full with a queue
    several times the running batch and nothing after it shows the queue drained (it is the
    last interval the log has), else None. Full means KV usage at or above
    :data:`~vllm_doctor.thresholds.FULL_KV_LAST_INTERVAL_PCT`, or at or above SATURATED_KV_PCT
    with a V0 preemption warning at or after it (V0 preempts only when no block is left:
    vllm/core/scheduler.py _preempt). The queue counts from
    :data:`~vllm_doctor.thresholds.QUEUE_OVER_RUNNING` times the running requests (at least
    one). Not for an offline ``LLM()`` batch, whose queue holds every prompt by design.
    Whether that one interval is a storm is :func:`saturated_at_the_end`'s call."""
    if "offline_batch" in run.markers or not run.stats.recent:
        return None
    s = run.stats.recent[-1]
    kv = s.kv_usage_pct
    if kv is None or processed_nothing(s) or s.waiting < thresholds.QUEUE_OVER_RUNNING * max(1, s.running):
        return None
    preempted = run.preemption.last is not None and run.preemption.last.lineno >= s.line.lineno
    if kv >= thresholds.FULL_KV_LAST_INTERVAL_PCT or (preempted and kv >= thresholds.SATURATED_KV_PCT):
        return s
    return None


def saturated_intervals_at_the_end(run: Run) -> int:
    """How many saturated intervals (the observer's sense: KV usage at or above SATURATED_KV_PCT
    with requests waiting, swapped or preempted) end the run on the last interval's engine; 0
    when the last interval is not one (or no observer ran)."""
    obs = run.stats.observers.get("preemption_storm")
    if obs is None or not run.stats.recent:
        return 0
    st = obs.any_pressure.streak.get(run.stats.recent[-1].engine_index)
    return st.intervals if st is not None else 0


def lone_burst_at_the_end(run: Run) -> bool:
    """The log ends on ONE full interval (:func:`full_at_the_end`) after serving below
    saturation, with no preemption anywhere in the run: a burst that just began (a load test
    starting), weak evidence of a capacity problem (breakit4 item 8: the verdict flipped on
    thresholds at that one sample). Fewer than
    :data:`~vllm_doctor.thresholds.SATURATED_END_MIN_INTERVALS` saturated intervals end the
    run and an earlier one was not saturated. A run whose every stats line is saturated (the
    line an issue quotes as its symptom: q16, k030) has no healthy interval to say so."""
    if full_at_the_end(run) is None:
        return False
    if run.preemption.warnings or run.stats.preemptions_total:
        return False
    streak = saturated_intervals_at_the_end(run)
    return streak < thresholds.SATURATED_END_MIN_INTERVALS and run.stats.count > streak


def saturated_at_the_end(run: Run) -> Optional[StatsSample]:
    """The last interval (:func:`full_at_the_end`) when it is a capacity signal on its own,
    else None. One such interval is no "passing peak": a peak passes only where a later
    interval shows it passed. But one alone after healthy serving is a burst that just began
    (:func:`lone_burst_at_the_end`: VD301's note, not a storm). Fixtures q16 (2 running, 20
    pending, 98.7 %, then a hang), k030 (35, 115, 99 %), h022 (2, 98, 86.1 % and a SWAP
    preemption)."""
    s = full_at_the_end(run)
    if s is None or lone_burst_at_the_end(run):
        return None
    return s


def is_storm(run: Run) -> bool:
    """A sustained capacity problem: V0's cumulative count, a saturation episode, V1
    preemption counts in several intervals, or a log that ends saturated with a queue
    (:func:`saturated_at_the_end`)."""
    ep = episode_of(run)
    return (
        saturated_at_the_end(run) is not None
        or v0_storm(run)
        or (ep is not None and ep.intervals >= thresholds.MIN_SATURATED_INTERVALS)
        or run.stats.intervals_with_preemptions >= thresholds.V1_STORM_PREEMPTION_INTERVALS
    )


def _facts(run: Run, ep: Optional[Episode]) -> Dict[str, Any]:
    p, s = run.preemption, run.stats
    facts: Dict[str, Any] = {}
    if p.warnings:
        facts.update(warning_facts(run))
        facts["preemption_warnings"] = p.warnings
    if s.preemptions_total:
        facts["preemptions_in_stats"] = s.preemptions_total
    if s.count:
        facts.update(peak_kv_usage_pct=s.peak_kv_usage_pct, max_waiting=s.max_waiting, max_running=s.max_running)
        if s.max_swapped is not None:
            facts["max_swapped"] = s.max_swapped
    end = saturated_at_the_end(run)
    if end is not None:
        facts["saturated_at_the_end"] = True
    if ep:
        facts["saturated_intervals"] = ep.intervals
        secs = seconds_between(ep.first, ep.last)
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
    return facts


def _title(run: Run, ep: Optional[Episode], facts: Dict[str, Any]) -> str:
    p, s = run.preemption, run.stats
    bits = []
    end = saturated_at_the_end(run)
    if end is not None and not (ep is not None and ep.intervals >= thresholds.MIN_SATURATED_INTERVALS):
        bits.append(
            f"the last interval the log shows has {end.waiting} waiting against {end.running} running at "
            f"{end.kv_usage_pct:.1f}% KV cache, and nothing after it shows the queue drained"
        )
    if p.warnings and not p.max_cumulative:  # the warning was cut before its count
        bits.append(f"a preemption warning ({facts['preemption_mode']}) cut before its count")
    elif p.warnings:
        bits.append(f"{p.max_cumulative} cumulative preemptions ({facts['preemption_mode']})")
    if s.preemptions_total:
        bits.append(f"{s.preemptions_total} preemptions in {s.intervals_with_preemptions} intervals")
    if ep:
        dur = f" for {facts['saturated_seconds']} s" if facts.get("saturated_seconds") else ""
        if "offline_batch" in run.markers:
            pressure = f"up to {ep.max_swapped} swapped" if ep.max_swapped else "requests preempted"
            bits.append(
                f"KV cache {ep.peak_kv_usage_pct:.1f}% full with {pressure} over {ep.intervals} interval{'s' * (ep.intervals != 1)}{dur}"
            )
            bits.append("an offline LLM() batch: its queue of prompts is by design, not demand")
        else:
            bits.append(
                f"KV cache {ep.peak_kv_usage_pct:.1f}% full with up to {ep.max_waiting} waiting over "
                f"{ep.intervals} interval{'s' * (ep.intervals != 1)}{dur}"
            )
    if p.warnings or s.preemptions_total:
        return "KV cache saturated, requests preempted: " + "; ".join(bits)
    if stats_from(run) == "the metrics":  # vLLM's counter read 0 over the saturated intervals
        why = "the metrics count no preemption; judged from KV cache usage and requests waiting"
    else:
        v0 = (s.engine or run.engine) == "v0"
        why = f"{'V0 logs only every 50th preemption' if v0 else 'V1 logs no preemptions'}; judged from the stats lines"
    return f"KV cache saturated with requests waiting ({why}): " + "; ".join(bits)


def _remedies(run: Run, facts: Dict[str, Any]) -> List[Any]:
    c = constraints(run)
    util = c.in_force("gpu_memory_utilization")
    seqs = c.in_force("max_num_seqs")
    dtype = str(run.value("kv_cache_dtype") or "auto")
    L = run.value("max_model_len")
    kv_tokens = run.value("kv_tokens")
    raised = min(thresholds.MAX_ADVISED_UTILIZATION, (util.high or 0.9) + thresholds.UTILIZATION_RAISE_STEP)
    ran = facts.get("max_running")
    base = min(x for x in (ran, seqs.low) if x) if (ran or seqs.low) else None
    if ran and (not seqs.low or ran < seqs.low):
        seqs_why = f"up to {ran} ran at once"
    else:
        seqs_why = f"half of {seqs.why}"
    if base and base < thresholds.MIN_SEQS_TO_HALVE:
        # a handful at once: the cache holds that few; halving them serialises the server
        seqs_why = f"only {int(base)} ran at once: the KV cache, not the batch, is the limit; more memory comes first"
        base = None
    return [
        c.raise_to(
            "gpu_memory_utilization",
            raised,
            "Give the KV cache more memory",
            f"every extra GiB becomes KV cache blocks: {thresholds.UTILIZATION_RAISE_STEP} above {util.why}",
        ),
        None
        if dtype.startswith("fp8")
        else c.set_to(
            "kv_cache_dtype",
            "fp8",
            "Halve KV per token (a precision trade-off to evaluate)",
            f"about {2 * kv_tokens} tokens instead of {kv_tokens}" if kv_tokens else None,
        ),
        remedy("Or more tensor parallelism / quantized weights (more room left for KV cache)"),
        c.lower(
            "max_num_seqs",
            max(1, int(base) // 2) if base else None,
            "Lower demand: fewer concurrent sequences",
            seqs_why if base or ran else f"the value in force is not in {read_from(run)}",
        ),
        remedy(
            "Or a shorter max_model_len, if the workload allows",
            None,
            (f"currently {L}; " if L else "")
            + f"the workload's longest request decides how much shorter; it is not in {read_from(run)}",
        ),
    ]


def _swap_remedies(run: Run, facts: Dict[str, Any]) -> List[Any]:
    """Remedies for V0's swap abort: more KV first, less demand, then a larger --swap-space."""
    c = constraints(run)
    util = c.in_force("gpu_memory_utilization")
    raised = min(thresholds.MAX_ADVISED_UTILIZATION, (util.high or 0.9) + thresholds.UTILIZATION_RAISE_STEP)
    seqs = c.in_force("max_num_seqs")
    swap = run.value("swap_space")
    swap_action = (
        "Or give vLLM a larger CPU swap pool for preempted sequences (--swap-space, GiB per GPU: vLLM's own "
        "pinned CPU memory, not the OS swap; each GPU's pool must fit in host RAM)"
    )
    return [
        c.raise_to(
            "gpu_memory_utilization",
            raised,
            "Give the KV cache more memory (fewer sequences preempted to CPU)",
            f"{thresholds.UTILIZATION_RAISE_STEP} above {util.why}",
        ),
        remedy("Or more tensor parallelism (more GPU memory left for KV cache per sequence)"),
        c.lower(
            "max_num_seqs",
            max(1, int(seqs.low) // 2) if seqs.known and seqs.low else None,
            "Lower demand: fewer concurrent sequences",
            f"half of {seqs.why}" if seqs.known and seqs.low else f"the value in force is not in {read_from(run)}",
        ),
        remedy(
            "Or fewer samples per prompt (n) or a lower max_tokens: n > 1 makes V0 preempt by swapping whole "
            "groups of sequences to CPU",
            None,
            "the swap pool holds the preempted groups' KV blocks",
            "client",
        ),
        c.raise_to("swap_space", swap * thresholds.SWAP_SPACE_RAISE_FACTOR, swap_action, f"{swap} GiB in force")
        if isinstance(swap, (int, float)) and not isinstance(swap, bool)
        else c.unset(
            "swap_space",
            "raise",
            swap_action
            + f"; vLLM's default is 4 GiB: --swap-space {int(4 * thresholds.SWAP_SPACE_RAISE_FACTOR)} if it runs "
            "at the default, never below the value you run with",
            f"the value in force is not in {read_from(run)}",
        ),
    ]


def _swap_abort(run: Run, failures: Sequence[Failure]) -> List[Finding]:
    facts = _facts(run, episode_of(run))
    facts["preemption_mode"] = "SWAP"
    if run.value("swap_space") is not None:
        facts["swap_space"] = run.value("swap_space")
    title = (
        "KV cache exhausted under SWAP preemption: the engine aborted when vLLM's CPU swap space "
        "(--swap-space, not the OS swap) had no room for the preempted sequences"
    )
    evidence = [ev(f.lines[0], "the engine aborted: no CPU swap blocks left") for f in failures if f.lines]
    evidence.append(ev(run.stats.peak_line, "peak KV usage"))
    dont = [
        "More OS swap or host RAM: vLLM's swap space is its own pinned CPU pool, sized by --swap-space",
        "Raising max_num_seqs: more sequences compete for the same cache",
    ]
    forbids = [("max_num_seqs", "raise", "more sequences compete for the same cache")]
    return [
        finding(
            RULE,
            run,
            "runtime",
            title,
            facts,
            evidence,
            _swap_remedies(run, facts),
            dont,
            severity="critical",
            forbids=forbids,
        )
    ]


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    if failures:  # routed here: V0's swap abort (rules/tree.py SELF_EVIDENT)
        return _swap_abort(run, failures)
    if not is_storm(run):
        return []
    p, s = run.preemption, run.stats
    ep = episode_of(run)
    facts = _facts(run, ep)
    if p.first is p.last:
        evidence = [ev(p.first, f"preemption warning ({p.max_cumulative} so far)")]
    else:
        evidence = [ev(p.first, "first preemption warning"), ev(p.last, f"last ({p.max_cumulative} so far)")]
    if ep:
        evidence += [ev(ep.first, "saturation starts"), ev(ep.last, "still saturated")]
    evidence.append(ev(s.peak_line, "peak KV usage"))
    evidence += [ev(run.line_for(k), k) for k in ("kv_tokens", "max_concurrency")]
    dont = [
        "Treating it as a compute/kernel problem: the scheduler is waiting for KV cache",
        "Raising max_num_seqs: more requests compete for the same cache",
    ]
    confidence = "high" if v0_storm(run) else "low"
    forbids = [("max_num_seqs", "raise", "more requests compete for the same cache")]
    return [
        finding(
            RULE,
            run,
            "runtime",
            _title(run, ep, facts),
            facts,
            evidence,
            _remedies(run, facts),
            dont,
            confidence=confidence,
            forbids=forbids,
        )
    ]


RULE = Rule(
    code="VD201",
    name="preemption_storm",
    severity="warning",
    summary="Slow, not broken: the KV cache is full and requests are preempted over and over.",
    doc=__doc__,
    check=check,
    observer=Saturation,
)
