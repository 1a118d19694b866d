"""The engine stalls: requests wait or run, and nothing is generated.

What it means:
    The server answers (``/health`` is 200, access lines go on) but the engine makes no
    progress. Three shapes:

    * **At startup, a trap:** the KV cache holds fewer tokens than ``max_model_len`` while the
      scheduler reserves a request's full input before admitting it
      (``scheduler_reserve_full_isl``, on by default since 0.19): a request longer than the
      KV cache waits forever, and every request behind it.
    * **Head-of-line block:** the stats show ``Running: 0 reqs, Waiting: N reqs`` at 0 tokens/s
      (vllm issue 39734): a waiting request can never be admitted.
    * **Wedge:** the last stats line shows requests running at 0.0 tokens/s, then the stats
      stop while other lines go on. (vLLM prints one idle stats line and then logs them at
      DEBUG only, so a wedged engine goes silent.)

Why it happens:
    A request longer than the KV cache can hold (with full-input reservation); a hung
    collective (NCCL) or kernel between tensor-parallel workers; a deadlock in the engine.

Remedies, in order:
    1. Head-of-line block: a ``--max-model-len`` within the KV cache capacity (so no request
       can need more than it holds), or ``--no-scheduler-reserve-full-isl`` (0.19+).
    2. Wedge: take stack traces of the engine and workers (``py-spy dump --pid``), check the
       GPUs (``nvidia-smi``), restart; report it with the traces.
    3. Watch ``/metrics`` (``vllm:num_requests_running`` and generation tokens) to catch it:
       the log goes quiet when the engine does.

What does not help:
    Memory settings when the engine is wedged: nothing is allocating.

Sources:
    vllm/config/scheduler.py ``scheduler_reserve_full_isl``; vllm/v1/core/sched/scheduler.py;
    vllm/v1/metrics/loggers.py (``engine_is_idle``); vllm issue 39734.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

from .. import defaults, thresholds
from ..events import Phase
from ..memory import floor_tidy
from ..run import Failure, Line, Run, StatsSample
from ..verdict import Finding, Remedy
from .plan import Constraints, constraints
from .rule import Rule, config_evidence, ev, finding, remedy

#: The release that added scheduler_reserve_full_isl (vllm/config/scheduler.py, read in 0.19.1).
RESERVE_FULL_ISL_SINCE = (0, 19, 0)


@dataclass
class Blocked:
    """Stats observer: the longest run of consecutive intervals with requests waiting, none
    running and no tokens processed, and whether the last sample was such an interval."""

    streak: int = 0
    best: int = 0
    first: Optional[Line] = None
    best_first: Optional[Line] = None
    best_last: Optional[Line] = None
    max_waiting: int = 0
    last_blocked: bool = False
    wedge_streak: int = 0
    wedge_best: int = 0
    wedge_first: Optional[Line] = None
    wedge_best_first: Optional[Line] = None
    wedge_best_last: Optional[Line] = None
    wedge_running: int = 0

    def add(self, s: StatsSample) -> None:
        known = s.generation_tps is not None  # a first metrics scrape has no rates yet
        idle = known and not s.generation_tps and not (s.prompt_tps or 0)
        self._wedge(s, idle)
        blocked = s.running == 0 and s.waiting > 0 and idle
        self.last_blocked = blocked
        if not blocked:
            self.streak = 0
            return
        self.streak += 1
        if self.streak == 1:
            self.first = s.line
        self.max_waiting = max(self.max_waiting, s.waiting)
        if self.streak > self.best:
            self.best, self.best_first, self.best_last = self.streak, self.first, s.line

    def _wedge(self, s: StatsSample, idle: bool) -> None:
        """Consecutive intervals with requests running and nothing processed at all."""
        if not (idle and s.running > 0):
            self.wedge_streak = 0
            return
        self.wedge_streak += 1
        if self.wedge_streak == 1:
            self.wedge_first = s.line
        if self.wedge_streak > self.wedge_best:
            self.wedge_best, self.wedge_best_first, self.wedge_best_last = self.wedge_streak, self.wedge_first, s.line
            self.wedge_running = s.running


def _reserves_full_input(run: Run) -> bool:
    v = defaults.parse_version(run.value("vllm_version"))
    if run.value("scheduler_reserve_full_isl") is False:
        return False
    return v is None or v >= RESERVE_FULL_ISL_SINCE


def _length_remedies(c: Constraints, run: Run) -> List[Remedy]:
    T, L = run.value("kv_tokens"), run.value("max_model_len")
    fit = floor_tidy(T) if T else None
    return [
        c.lower(
            "max_model_len",
            fit,
            "Keep every request within what the KV cache holds",
            f"the KV cache holds {T} tokens, max_model_len is {L}; {fit} is that rounded down" if T else None,
        ),
        c.set_to(
            "scheduler_reserve_full_isl",
            False,
            "Or let the scheduler admit a request before its whole input fits (0.19+)",
            "admission then checks only the first chunk; long requests may be preempted instead of blocking",
        )
        if _reserves_full_input(run)
        else None,
    ]


def _startup_trap(run: Run) -> Optional[Finding]:
    T, L = run.value("kv_tokens"), run.value("max_model_len")
    if not (T and L and T < L) or run.phase < Phase.READY or not _reserves_full_input(run):
        return None
    title = (
        f"A stall waiting to happen: the KV cache holds {T} tokens, below max_model_len {L}; a request longer than "
        "that would wait forever, and every request behind it"
    )
    facts = {"kv_tokens": T, "max_model_len": L}
    evidence = config_evidence(run, ("kv_tokens", "max_model_len"))
    rem = _length_remedies(constraints(run), run)
    return finding(RULE, run, "startup", title, facts, evidence, rem, confidence="medium")


def _blocked(run: Run) -> Optional[Finding]:
    obs = run.stats.observers.get("engine_stall")
    s = run.stats
    if obs is None or obs.best == 0:
        return None
    silent_after = obs.last_blocked and _after(s) > 0
    if obs.best < thresholds.BLOCKED_MIN_INTERVALS and not silent_after:
        return None
    title = f"Head-of-line block: {obs.max_waiting} request(s) waiting, none running, nothing generated"
    if silent_after:
        title += "; then the stats stop while the log goes on"
    facts = {
        "blocked_intervals": obs.best,
        "max_waiting": obs.max_waiting,
        "kv_tokens": run.value("kv_tokens"),
        "max_model_len": run.value("max_model_len"),
    }
    rem = _length_remedies(constraints(run), run) + [_watch()]
    evidence = [ev(obs.best_first, "waiting, none running, 0 tokens/s"), ev(obs.best_last, "still blocked")]
    evidence += config_evidence(run, ("kv_tokens", "max_model_len"))
    return finding(RULE, run, "runtime", title, facts, evidence, rem, confidence="medium")


def _after(s) -> int:
    """Lines of the run after its last stats line (recognised or not, where that is known)."""
    return max(s.records_after_last, s.lines_after_last)


def _wedged(run: Run) -> Optional[Finding]:
    s = run.stats
    obs = run.stats.observers.get("engine_stall")
    if obs is not None and obs.wedge_best >= thresholds.WEDGE_MIN_INTERVALS:
        # Several intervals running with nothing processed (metrics, or releases that keep
        # logging idle stats at INFO).
        title = (
            f"Engine wedged: {obs.wedge_running} request(s) running and nothing generated over "
            f"{obs.wedge_best} intervals"
        )
        facts = {"running_at_stall": obs.wedge_running, "wedged_intervals": obs.wedge_best}
        evidence = [ev(obs.wedge_best_first, "running, 0 tokens"), ev(obs.wedge_best_last, "still no tokens")]
        return _wedge_finding(run, title, facts, evidence)
    last = s.recent[-1] if s.recent else None
    if last is None or last.running == 0 or last.generation_tps is None:
        return None
    if last.generation_tps or (last.prompt_tps or 0):
        return None
    if _after(s) == 0:
        return None  # the log ends on it: nothing shows the engine stayed stuck
    title = (
        f"Engine wedged: {last.running} request(s) running at 0.0 tokens/s, then no more stats while "
        f"{_after(s)} other line(s) follow"
    )
    facts = {
        "running_at_stall": last.running,
        "lines_after_last_stats": _after(s),
        "access_lines_after_last_stats": s.access_after_last,
    }
    return _wedge_finding(run, title, facts, [ev(last.line, "the last stats line")])


def _wedge_finding(run: Run, title: str, facts, evidence) -> Finding:
    rem = [
        remedy(
            "Take stack traces of the engine and workers before restarting (py-spy dump --pid PID)",
            None,
            "a hung collective or kernel shows in them; report it with the traces",
            "host",
        ),
        remedy(
            "Check the GPUs (nvidia-smi): a GPU at 100% with no progress, or an Xid error in dmesg", None, None, "host"
        ),
        _watch(),
    ]
    dont = ["Memory settings: nothing is allocating while the engine is stuck"]
    return finding(RULE, run, "runtime", title, facts, evidence, rem, dont, confidence="low")


def _watch() -> Remedy:
    return remedy(
        "Watch /metrics (vllm:num_requests_running, generation tokens) to catch the next one",
        None,
        "the log goes quiet when the engine does: vLLM logs idle stats at DEBUG only",
        "host",
    )


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    for shape in (_blocked, _wedged, _startup_trap):
        found = shape(run)
        if found is not None:
            return [found]
    return []


RULE = Rule(
    code="VD203",
    name="engine_stall",
    severity="warning",
    summary="The engine makes no progress: a head-of-line block, a wedge, or a KV cache shorter than max_model_len.",
    doc=__doc__,
    check=check,
    observer=Blocked,
)
