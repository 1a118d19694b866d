"""The engine stalls: requests wait or run, and nothing is generated.

What it means:
    The engine, or a part of it, makes no progress. The shapes:

    * **A hung worker:** a process waits on another that never answers. vLLM says so itself:
      ``No available shared memory broadcast block found in 60 seconds`` repeated with nothing
      in between that shows progress (the engine core waits for its workers), ``RPC call to
      execute_model timed out``, V0's ``Engine iteration timed out``, a stack dump of vLLM's
      watchdog; PyTorch's NCCL watchdog (``Watchdog caught collective operation timeout``) and
      a Ray compiled-graph channel timeout say it of a collective or a pipeline stage.
    * **The log ends waiting:** fewer such warnings than make a stall by themselves (0.11+
      wordings, printed only by a process waiting for an answer), the last word of the log:
      a possible stall, of low confidence (a long compile prints it too, and then goes on).
    * **Work claimed, none scheduled:** an engine says its scheduler holds unfinished requests
      (V1 0.8.4's DEBUG ``EngineCore loop active - local unfinished: True``) and the stats
      after it show 0 running, 0 waiting and 0 tokens/s (a data-parallel wedge, vllm issue
      16580).
    * **A hang the report names:** the text around a pasted log says it hangs (``stuck``,
      ``hangs``, ``stalled``...: the reporter's words, never vLLM's) and the log shows no
      failure, preemption or saturation, and no queue long enough for VD302: low confidence,
      the log cannot rule it out. Requests waiting with the KV cache nearly empty in fewer
      intervals than VD302 reads stay here, with the admission limits (``--max-loras`` first
      where LoRA is enabled: a batch holds at most that many adapters, default 1).
    * **Ray Serve marked the replica unhealthy:** its controller got no health-check answer
      within the deployment's ``health_check_timeout_s`` (``Didn't receive health check
      response for replica ... marking it unhealthy``) and restarts the replica. With the
      engine busy and the KV cache far from full, the replica was too busy to answer (a
      prefill burst), not out of memory: a longer timeout, less admission per replica, more
      replicas.
    * **At startup, a trap:** the KV cache holds fewer tokens than ``max_model_len`` while the
      scheduler reserves a request's full input before admitting it
      (``scheduler_reserve_full_isl``, on by default since 0.19): a request longer than the
      KV cache waits forever, and every request behind it.
    * **Head-of-line block:** the stats show ``Running: 0 reqs, Waiting: N reqs`` at 0 tokens/s
      (vllm issue 39734): a waiting request can never be admitted.
    * **A queue never admitted:** requests wait interval after interval with no prompt tokens
      processed while others run and decode, the KV cache below saturation (intel/llm-scaler
      issue 391: 1 running, 14 waiting at 76.5 % for an hour). The scheduler serves waiting
      requests first come, first served: when the one at the head cannot be admitted (its input
      does not fit beside what runs), none behind it is.
    * **Wedge:** the last stats line shows requests running at 0.0 tokens/s, then the stats
      stop while other lines go on. (vLLM prints one idle stats line and then logs them at
      DEBUG only, so a wedged engine goes silent.)

Why it happens:
    A hung collective (NCCL) or kernel between tensor-, pipeline- or data-parallel workers; a
    worker still compiling or quantizing (the warning's own text since 0.11 names both); a
    deadlock in the engine; a driver or interconnect fault. A request longer than the KV cache
    can hold (with full-input reservation), or one long request holding most of the KV cache,
    keeps a queue from moving.

Remedies, in order:
    1. A hung worker: find the stuck process. Take stack traces of the engine and every worker
       before restarting (``py-spy dump --pid PID``): the one not waiting where the others
       wait is stuck; NCCL's timeout names the ranks and the operation. At startup, if a
       compile or a weight / KV cache quantization is running, it may still be working (its
       stack shows it); ``--enforce-eager`` rules compilation out. Then the GPUs and their
       links: ``nvidia-smi``, Xid errors in ``dmesg``, ``NCCL_DEBUG=INFO``.
    2. Head-of-line block or a queue never admitted: a ``--max-model-len`` within the KV cache
       capacity (so no request can need more than it holds), or
       ``--no-scheduler-reserve-full-isl`` (0.19+).
    3. Wedge: take stack traces, check the GPUs, restart; report it with the traces. Where the
       last stats lines repeat the same numbers at 0 tokens/s, first check they are live (one
       request, ``/metrics``): V1 does not reset its stats after every request was aborted
       (vllm issue 22545), which reads as requests running with nothing generated.
    4. Watch ``/metrics`` (``vllm:num_requests_running`` and generation tokens) to catch it:
       the log goes quiet when the engine does.
    5. A Ray Serve replica marked unhealthy while busy: raise the deployment's
       ``health_check_timeout_s``, limit ``max_ongoing_requests``, add replicas.

What does not help:
    Memory settings when a worker hangs or the engine is wedged: nothing is allocating.
    Raising ``max_num_seqs`` when fewer requests run than it allows: the batch limit is not
    what holds the queue.

Sources:
    vllm/distributed/device_communicators/shm_broadcast.py (``VLLM_RINGBUFFER_WARNING_INTERVAL``);
    vllm/v1/executor/multiproc_executor.py (``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``);
    vllm/engine/async_llm_engine.py (``ENGINE_ITERATION_TIMEOUT_S``); vllm/utils/watch_dog.py;
    PyTorch ProcessGroupNCCL.cpp (watchdog); vllm/v1/executor/ray_executor.py
    (``RAY_CGRAPH_get_timeout``); vllm/config/scheduler.py ``scheduler_reserve_full_isl``;
    vllm/v1/core/sched/scheduler.py; vllm/v1/metrics/loggers.py (``engine_is_idle``); vllm
    issue 39734; intel/llm-scaler issue 391; see catalog/stalls.py for every wording.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from .. import defaults, thresholds
from ..catalog.stalls import reported_excerpt
from ..events import Phase
from ..memory import floor_tidy
from ..run import Failure, Line, Run, StallSignal, StatsSample, WaitEpisode, process_label
from ..tracker import MEMORY_KINDS
from ..verdict import Finding, Remedy
from . import preemption_storm, queue_backlog
from .plan import Constraints, constraints, env_set
from .rule import Rule, config_evidence, ev, finding, not_printed, read_from, remedy, stats_from

#: The release that added scheduler_reserve_full_isl (vllm/config/scheduler.py, read in 0.19.1).
RESERVE_FULL_ISL_SINCE = (0, 19, 0)


@dataclass
class Blocked:
    """Stats observer of three streaks of consecutive intervals, each the longest with its first
    and last line: requests waiting, none running and no tokens processed (``best``; and
    whether the last sample was such an interval), requests running and nothing processed
    (``wedge_*``), requests waiting and none admitted while others run and decode below
    saturation (``queue_*``, with the most waiting and running and the highest KV usage of
    that streak)."""

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
    queue_streak: int = 0
    queue_best: int = 0
    queue_first: Optional[Line] = None
    queue_best_first: Optional[Line] = None
    queue_best_last: Optional[Line] = None
    queue_waiting: int = 0
    queue_running: int = 0
    queue_kv: Optional[float] = None
    _now_waiting: int = 0  # maxima of the current streak
    _now_running: int = 0
    _now_kv: Optional[float] = None

    def add(self, s: StatsSample) -> None:
        known = s.generation_tps is not None  # a first metrics scrape has no rates yet
        idle = known and not s.generation_tps and not (s.prompt_tps or 0)
        self._wedge(s, idle)
        self._queue(s)
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

    def _queue(self, s: StatsSample) -> None:
        """Consecutive intervals with requests waiting and none admitted (no prompt tokens)
        while others run and decode, the KV cache below saturation."""
        below = s.kv_usage_pct is None or s.kv_usage_pct < thresholds.SATURATED_KV_PCT
        queued = (
            s.waiting > 0
            and s.running > 0
            and s.prompt_tps is not None
            and s.prompt_tps == 0
            and bool(s.generation_tps)
            and below
        )
        if not queued:
            self.queue_streak = 0
            return
        self.queue_streak += 1
        if self.queue_streak == 1:
            self.queue_first = s.line
            self._now_waiting, self._now_running, self._now_kv = 0, 0, None
        self._now_waiting = max(self._now_waiting, s.waiting)
        self._now_running = max(self._now_running, s.running)
        if s.kv_usage_pct is not None:
            self._now_kv = max(self._now_kv or 0.0, s.kv_usage_pct)
        if self.queue_streak > self.queue_best:
            self.queue_best, self.queue_best_first, self.queue_best_last = self.queue_streak, self.queue_first, s.line
            self.queue_waiting, self.queue_running, self.queue_kv = self._now_waiting, self._now_running, self._now_kv


def _reserves_full_input(run: Run) -> bool:
    v = defaults.parse_version(run.value("vllm_version"))
    if run.value("scheduler_reserve_full_isl") is False:
        return False
    if (run.stats.engine or run.engine) == "v0":  # a V1 scheduler setting: V0 has no such flag
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
            f"the KV cache holds {T} tokens, max_model_len is {L}; {fit} is that rounded down"
            if T
            else "the log prints no KV cache size: take it from the startup line 'GPU KV cache size: N tokens'",
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
    rem = _length_remedies(constraints(run), run) + [_watch(run)]
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
        if _frozen(run):
            facts["stats_frozen"] = True
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


def _frozen(run: Run) -> bool:
    """The last stats lines (at least WEDGE_MIN_INTERVALS of them) repeat the same running,
    waiting and KV numbers at 0 tokens/s: numbers that may not be live (vLLM issue 22545: V1
    does not reset its stats after every request was aborted, a29)."""
    recent = run.stats.recent
    if len(recent) < thresholds.WEDGE_MIN_INTERVALS or run.stats.engine == "v0":
        return False  # V0 resets its counts: the issue is V1's
    first = recent[0]
    return all(
        not (x.prompt_tps or x.generation_tps)
        and (x.running, x.waiting, x.kv_usage_pct, x.engine_index)
        == (first.running, first.waiting, first.kv_usage_pct, first.engine_index)
        for x in recent
    )


def _wedge_finding(run: Run, title: str, facts, evidence) -> Finding:
    stale = (
        remedy(
            "Check whether the numbers are live before restarting: send one request and read /metrics "
            "(vllm:num_requests_running); if it is served, the engine is idle and the stats are stale",
            None,
            "the stats lines repeat the same running, waiting and KV numbers at 0 tokens/s: V1 does not reset them "
            "after every request was aborted (vLLM issue 22545)",
            "host",
        )
        if facts.get("stats_frozen")
        else None
    )
    rem = [
        stale,
        remedy(
            "Take stack traces of the engine and workers before restarting (py-spy dump --pid PID)",
            None,
            "a hung collective or kernel shows in them; report it with the traces",
            "host",
        ),
        remedy(
            "Check the GPUs (nvidia-smi): a GPU at 100% with no progress, or an Xid error in dmesg", None, None, "host"
        ),
        _watch(run),
    ]
    dont = ["Memory settings: nothing is allocating while the engine is stuck"]
    # Wait warnings that do not decide by themselves (an old release's, printed when idle too)
    # still show who waited.
    evidence = list(evidence) + _episode_evidence(run.stalls.episode or run.stalls.longest_resolved)
    return finding(RULE, run, "runtime", title, facts, evidence, rem, dont, confidence="low")


def _watch(run: Run) -> Remedy:
    why = "the log goes quiet when the engine does: vLLM logs idle stats at DEBUG only"
    if stats_from(run) == "the metrics":
        why = f"the metrics showed this one; {why}"
    return remedy(
        "Watch /metrics (vllm:num_requests_running, generation tokens) to catch the next one", None, why, "host"
    )


# -- a hung worker: the log's own no-progress messages ------------------------------------------

#: The signals that end the engine (catalog/stalls.py ``fatal``), the one that names the hang
#: best first: what timed out, and after how long.
FATAL_ORDER = (
    "rpc_timeout",
    "iteration_timeout",
    "collective_timeout",
    "collective_stuck",
    "ray_channel_timeout",
    "barrier_timeout",
)


def _stall_phase(run: Run, at: Optional[Phase] = None) -> str:
    """``startup`` when the run (at ``at``, else as far as it got) was past its configuration
    and not yet ready; ``runtime`` otherwise (serving, or no phase in the log)."""
    p = run.phase if at is None else at
    return "startup" if Phase.CONFIG <= p < Phase.READY else "runtime"


def _memory_failure(run: Run) -> Optional[Failure]:
    """A memory failure of the run: when one rank ran out of memory, the others hang waiting
    for it, and that failure comes first."""
    return next((f for f in run.failures if f.kinds & MEMORY_KINDS), None)


def _hung_title(name: str, sig: StallSignal) -> str:
    d = sig.data
    if name == "rpc_timeout":
        method = d.get("method", "a call")
        limit = (
            " (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, 300 s by default since 0.9; 40 s in 0.8)"
            if method == "execute_model"
            else ""
        )
        return f"Engine stalled: the workers did not answer {method} in time{limit}, and the engine stopped"
    if name == "iteration_timeout":
        return (
            "Engine stalled: one engine step took longer than VLLM_ENGINE_ITERATION_TIMEOUT_S (60 s by default), "
            "and the engine stopped"
        )
    if name == "collective_timeout":
        ranks = sorted(sig.seq_by_rank) or ([d["rank"]] if "rank" in d else [])
        on = f" on rank(s) {', '.join(map(str, ranks[:16]))}" if ranks else ""
        secs = f" within {d['timeout_ms'] // 1000} s" if d.get("timeout_ms") else ""
        return (
            f"Engine stalled: a {d.get('backend', 'NCCL')} {d.get('op', 'collective')} (SeqNum {d.get('seq', '?')}) "
            f"did not complete{secs}{on}; the process group was taken down"
        )
    if name == "collective_stuck":
        return (
            f"Engine stalled: the {d.get('backend', 'NCCL')} watchdog itself made no progress for "
            f"{d.get('stuck_s', '?')} s (a {d.get('backend', 'NCCL')} or driver call hangs)"
        )
    if name == "ray_channel_timeout":
        within = f" within {d['timeout_s']} s" if d.get("timeout_s") else ""
        return f"Engine stalled: a Ray compiled-graph channel got no output{within} (RAY_CGRAPH_get_timeout)"
    within = f" within {d['timeout_s']} s" if d.get("timeout_s") else ""
    return f"Engine stalled: not every rank reached a barrier{within}"


def _ranks_behind(sig: StallSignal) -> Optional[str]:
    """Ranks that timed out at a lower sequence number than the others: they fell behind (or
    ran another collective), which is where to look first."""
    seqs = sig.seq_by_rank
    if len(set(seqs.values())) < 2:
        return None
    low = min(seqs.values())
    behind = sorted(r for r, q in seqs.items() if q == low)
    return (
        f"rank(s) {', '.join(map(str, behind))} timed out at SeqNum {low}, the others at "
        f"{max(seqs.values())}: look at those ranks first"
    )


def _silent_ranks(run: Run, sig: StallSignal) -> List[int]:
    """Ranks of the world (tensor x pipeline parallel size, where printed) that printed no
    collective timeout while others did: the stuck rank is among them."""
    tp, pp = run.value("tensor_parallel_size"), run.value("pipeline_parallel_size") or 1
    ranks = set(sig.seq_by_rank)
    if not (isinstance(tp, int) and ranks) or tp * pp > 1024:
        return []
    world = set(range(tp * pp))
    if not ranks <= world:
        return []
    return sorted(world - ranks)


def _diagnose_remedies(
    run: Run, names_work: bool, before_ready: bool, names_quantization: bool = False
) -> List[Optional[Remedy]]:
    """Where to look for a hung worker, in order: which process is stuck, whether it is a
    compile or quantization still running (where the warning names them and the log does not
    show the server ready: at startup, or no phase in the log), then the GPUs and their links."""
    c = constraints(run)
    out: List[Optional[Remedy]] = [
        remedy(
            "Find the stuck process: take stack traces of the engine and of every worker before restarting "
            "(py-spy dump --pid PID)",
            None,
            "the process that is not waiting where the others wait is the stuck one; report the hang with the traces",
            "host",
        )
    ]
    if names_work and before_ready:
        named = "compilation and weight/kv cache quantization" if names_quantization else "compilation"
        out.append(
            c.set_unless_done(
                "enforce_eager",
                True,
                "If a compile or a weight / KV cache quantization is running (a first start, a cold compile cache), "
                "it may still be working: its stack shows torch.compile / inductor or quantization frames; wait, or "
                "restart in eager mode to rule compilation out",
                f"vLLM's own warning names {named} as the usual long steps; eager mode decodes slower: a step to "
                "find the cause, not a fix",
                None,
            )
        )
    nccl_debug = env_set(run, "NCCL_DEBUG", "INFO")
    out.append(
        remedy(
            "Check the GPUs and their links: nvidia-smi (rocm-smi, npu-smi, xpu-smi elsewhere) for a device at 100% "
            "with no progress, dmesg for Xid errors, and "
            + (
                f"what NCCL prints at INFO ({nccl_debug}) for the collective that hangs"
                if nccl_debug
                else "a rerun with NCCL_DEBUG=INFO for the collective that hangs"
            ),
            None,
            None,
            "host",
        )
    )
    return out


def _no_memory_remedy(run: Run) -> List[str]:
    if _memory_failure(run) is not None:
        return []  # the log shows a memory failure: its finding says what to change
    return ["Memory settings: nothing is allocating while a worker is stuck"]


def _episode_evidence(ep: Optional[WaitEpisode]) -> List[Any]:
    if ep is None:
        return []
    return [
        ev(ep.first, "waiting on another process (shm_broadcast)"),
        ev(ep.last, f"still waiting: {ep.warnings} warning(s) in a row"),
    ]


def _hung(run: Run) -> Optional[Finding]:
    """A timeout or watchdog message: a worker or a collective gave no answer in time."""
    sigs = run.stalls.signals
    fatal = [(n, sigs[n]) for n in FATAL_ORDER if n in sigs]
    dump = sigs.get("watchdog_dump")
    if not fatal and dump is None:
        return None
    ep = run.stalls.episode or run.stalls.longest_resolved
    names_work = bool(ep and ep.data.get("names_compilation"))
    rem = _diagnose_remedies(run, names_work, run.phase < Phase.READY, bool(ep and ep.data.get("names_quantization")))
    facts: Dict[str, Any] = {}
    notes: List[str] = []
    evidence: List[Any] = []
    if dump is not None:
        path = dump.data.get("dump_path")
        rem.insert(
            0,
            remedy(
                f"Read the stack dump vLLM's watchdog wrote: {path}"
                if path
                else "Read the stack dump vLLM's watchdog wrote",
                None,
                "it holds every thread of the process that stopped feeding the watchdog, at the moment it stalled",
                "host",
            ),
        )
        facts["stack_dump"] = path
        evidence.append(ev(dump.first, "vLLM's watchdog: no progress within its timeout"))
    if fatal:
        name, sig = fatal[0]
        title = _hung_title(name, sig)
        severity = "critical"
        facts["stall_signal"] = name
        facts["timeouts"] = sum(s.count for _, s in fatal)
        if sig.seq_by_rank:
            facts["timed_out_ranks"] = sorted(sig.seq_by_rank)
            behind = _ranks_behind(sig)
            if behind:
                notes.append(behind)
            silent = _silent_ranks(run, sig)
            if silent:
                facts["silent_ranks"] = silent
                notes.append(f"rank(s) {', '.join(map(str, silent))} printed no timeout: the stuck rank is among them")
        for _, other in fatal:
            evidence += [ev(other.first, "timed out"), ev(other.last, f"{other.count} such line(s)")]
        if name == "rpc_timeout" and sig.data.get("method") == "execute_model":
            rem.append(
                remedy(
                    "Only if the stack traces show the step still working (a very long prefill on slow hardware): "
                    "raise VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS",
                    None,
                    "a longer timeout hides a real hang for longer; it is no fix for one",
                    "host",
                )
            )
        if name == "ray_channel_timeout":
            rem.append(
                remedy(
                    "Only if the stack traces show the stage still working: raise RAY_CGRAPH_get_timeout "
                    "(vLLM sets 300 s)",
                    None,
                    "a longer timeout hides a real hang for longer; it is no fix for one",
                    "host",
                )
            )
    else:
        title = "Engine stalled: vLLM's watchdog saw no progress within its timeout and dumped the stacks"
        severity = None
    mem = _memory_failure(run)
    if mem is not None:
        notes.append(
            "this run also has a memory failure: a rank that ran out of memory leaves the others waiting; "
            "that failure comes first"
        )
    evidence += _episode_evidence(ep)
    rem.append(_watch(run))
    return finding(
        RULE,
        run,
        _stall_phase(run),
        title,
        facts,
        evidence,
        rem,
        _no_memory_remedy(run),
        notes,
        confidence="high" if fatal else "medium",
        severity=severity,
    )


def _duration(seconds: int) -> str:
    """``180 s``, ``25 min``, ``5.0 h``: as a title reads it."""
    if seconds < 600:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


def _wait_s(ep: WaitEpisode) -> int:
    """How long the longest wait of an episode lasted at least: one process's warnings in a
    row times the interval the warning names."""
    return ep.most_from_one_process * int(ep.data.get("interval_s") or 60)


def _waited(run: Run) -> Optional[Finding]:
    """Repeated shm_broadcast waits with nothing in between that shows progress: still going
    at the end of the log, or (while serving) long enough before the engine went on."""
    log = run.stalls
    ep, resolved = log.episode, False
    if ep is None or ep.data.get("idle_prints") or _wait_s(ep) < thresholds.STALL_MIN_WAIT_S:
        ep, resolved = log.longest_resolved, True
        if ep is None or ep.phase_at < Phase.READY:
            return _ends_waiting(run)  # a long startup step that then finished (a compile, a load) is no stall
        if ep.data.get("idle_prints") or _wait_s(ep) < thresholds.STALL_MIN_WAIT_S:
            return _ends_waiting(run)
    phase = _stall_phase(run, ep.phase_at)
    startup = phase == "startup"
    waited = _wait_s(ep)
    who = sorted(ep.by_stream, key=lambda k: -ep.by_stream[k])
    procs = ", ".join(k for k in who[:4] if k != "-")
    where = f" from {procs}" if procs else ""
    if resolved:
        title = (
            f"Engine stalled for at least {_duration(waited)} while serving ({ep.warnings} shared-memory broadcast "
            f"wait warnings{where}), then went on"
        )
    else:
        during = f" during startup ({ep.phase_at.label})" if startup else ""
        title = (
            f"Engine stalled{during}: no progress for at least {_duration(waited)}, {ep.warnings} shared-memory broadcast "
            f"wait warnings in a row{where} and nothing after them"
        )
    facts = {
        "stall_wait_s": waited,
        "stall_warnings": ep.warnings,
        "waiting_processes": len(ep.by_stream),
        "wait_interval_s": ep.data.get("interval_s"),
    }
    notes = []
    names_work = bool(ep.data.get("names_compilation"))
    if startup:
        notes.append(
            "at startup a long compile, load or quantization prints this warning too; a log that ends "
            "while it runs cannot tell the two apart"
        )
    evidence = _episode_evidence(ep)
    if resolved and ep.resolved_by is not None:
        evidence.append(ev(ep.resolved_by, "progress again"))
    before_ready = ep.phase_at < Phase.READY and not resolved
    rem = _diagnose_remedies(run, names_work, before_ready, bool(ep.data.get("names_quantization"))) + [_watch(run)]
    confidence = "low" if startup or resolved else "medium"
    return finding(RULE, run, phase, title, facts, evidence, rem, _no_memory_remedy(run), notes, confidence)


def _ends_waiting(run: Run) -> Optional[Finding]:
    """The log's last word on a wait: shm_broadcast warnings (0.11+: printed only by a process
    waiting for an answer, not by an idle worker) with nothing after them that shows progress,
    fewer than make a stall by themselves. Not health: a possible stall, of low confidence."""
    ep = run.stalls.episode
    if ep is None or ep.data.get("idle_prints"):
        return None  # up to 0.10.2 idle workers print it too: by itself it says nothing
    waited = _wait_s(ep)
    phase = _stall_phase(run, ep.phase_at)
    title = (
        f"Possible stall: the log ends while a process waits (at least {_duration(waited)}, {ep.warnings} "
        "shared-memory broadcast wait warning(s)) and nothing after it shows progress"
    )
    facts = {
        "stall_wait_s": waited,
        "stall_warnings": ep.warnings,
        "waiting_processes": len(ep.by_stream),
        "wait_interval_s": ep.data.get("interval_s"),
        "log_ends_waiting": True,
    }
    notes = [
        f"fewer than the {thresholds.STALL_MIN_WAIT_S} s of waiting that make a stall by themselves: a long compile, "
        "load or quantization prints this warning too and then goes on ('init engine ... took', a stats line); a log "
        "that ends here cannot tell the two apart: look at the server now, or at the log after this line"
    ]
    before_ready = ep.phase_at < Phase.READY
    names_work = bool(ep.data.get("names_compilation"))
    rem = _diagnose_remedies(run, names_work, before_ready, bool(ep.data.get("names_quantization"))) + [_watch(run)]
    return finding(
        RULE, run, phase, title, facts, _episode_evidence(ep), rem, _no_memory_remedy(run), notes, confidence="low"
    )


# -- an engine that says it has work and schedules none -----------------------------------------


def _unfinished_idle(run: Run) -> Optional[Finding]:
    """An engine said its scheduler holds unfinished requests (V1 0.8.4's DEBUG ``EngineCore
    loop active - local unfinished: True``), then every stats line since shows 0 running, 0
    waiting and 0 tokens/s: work it believes it has and never schedules (fixtures/logs v26)."""
    claims = [c for c in run.stalls.unfinished.values() if c.idle_intervals >= thresholds.UNFINISHED_IDLE_MIN_INTERVALS]
    if not claims:
        return None
    claim = min(claims, key=lambda c: c.line.lineno)
    who = process_label(claim.line)
    named = f"{who} " if who != "-" else "the engine "
    title = (
        f"Engine stalled: {named}says it has unfinished requests (local unfinished: True), then {claim.idle_intervals} "
        "stats line(s) show 0 running, 0 waiting and 0 tokens/s"
    )
    facts = {"unfinished_engine": claim.engine_index, "idle_intervals_after_claim": claim.idle_intervals}
    rem: List[Optional[Remedy]] = [
        remedy(
            f"Take a stack trace of {who if who != '-' else 'the engine core process'} and of its workers before "
            "restarting (py-spy dump --pid PID)",
            None,
            "the engine holds a request its scheduler never runs: the trace shows where its loop is",
            "host",
        ),
        remedy(
            "Upgrade vLLM: this wording is 0.8.4's, whose data-parallel engine loop 0.8.5 reworked",
            None,
            "vllm/v1/engine/core.py: 0.8.5 replaced the loop that prints it",
            "server",
        ),
        _watch(run),
    ]
    evidence = [ev(claim.line, "says it has unfinished requests")]
    last = run.stats.recent[-1] if run.stats.recent else None
    if last is not None and last.line.lineno > claim.line.lineno:
        evidence.append(ev(last.line, "0 running, 0 waiting, 0 tokens/s"))
    dont = ["Memory settings: the KV cache is empty and nothing is allocating"]
    return finding(RULE, run, "runtime", title, facts, evidence, rem, dont, confidence="low")


# -- a queue never admitted -----------------------------------------------------------------------


def _no_room_for_one_more(obs: Blocked) -> Optional[bool]:
    """Whether the KV cache left free is smaller than what one running request holds on
    average (usage / running): then a request like those running cannot be admitted beside
    them. None when the stats print no KV usage."""
    if obs.queue_kv is None or not obs.queue_running:
        return None
    return 100.0 - obs.queue_kv < obs.queue_kv / obs.queue_running


def _queued(run: Run) -> Optional[Finding]:
    """Requests wait, none is admitted, while others run and decode below saturation.

    A stall (warning) when what holds the queue is the KV room (less is free than one running
    request holds) or cannot be the batch limit (max_num_seqs printed, above what runs); a
    note (info) when the batch limit may be what holds it (max_num_seqs not printed, room
    left for one more request of the running size)."""
    obs = run.stats.observers.get("engine_stall")
    if obs is None or obs.queue_best < thresholds.QUEUE_BLOCKED_MIN_INTERVALS:
        return None
    c = constraints(run)
    seqs = c.in_force("max_num_seqs")
    limit = int(seqs.low) if seqs.known and seqs.low is not None else None
    if limit is not None and obs.queue_running >= limit:
        return None  # as many run as max_num_seqs allows: the batch limit (VD302), not a stall
    no_room = _no_room_for_one_more(obs)
    stalled = bool(no_room) or limit is not None
    kv = f", KV cache at most {obs.queue_kv:.1f}% full" if obs.queue_kv is not None else ""
    R, W, n = obs.queue_running, obs.queue_waiting, obs.queue_best
    if stalled:
        title = (
            f"Queue never admitted: {W} request(s) waiting behind {R} running, no prompt tokens processed "
            f"over {n} intervals{kv}"
        )
    else:
        title = (
            f"{W} request(s) waiting and none admitted over {n} intervals while {R} run{kv}: the batch limit "
            "(max_num_seqs, not printed) or an input that does not fit what is free"
        )
    facts = {
        "queued_intervals": n,
        "max_waiting": W,
        "running_while_queued": R,
        "kv_usage_pct": obs.queue_kv,
        "kv_tokens": run.value("kv_tokens"),
        "max_model_len": run.value("max_model_len"),
    }
    if no_room:
        held = (
            f"{R} request(s) hold {obs.queue_kv:.1f}% of the KV cache, {obs.queue_kv / R:.1f}% each on average, "
            f"more than the {100 - obs.queue_kv:.1f}% left free"
        )
    else:
        held = f"{R} request(s) decode while {W} wait and none is admitted{kv}"
    rem: List[Optional[Remedy]] = []
    notes: List[str] = []
    if limit is None:
        unsaid = "the log does not print it" if read_from(run) == "the log" else "not in the metrics"
        check_seqs = remedy(
            f"Check max_num_seqs ({unsaid}): if it is {R}, that is the limit holding the queue: raise it",
            None,
            f"max_num_seqs is {not_printed(run)}; vLLM runs at most that many at once, and {R} run while "
            "none is admitted",
            "server",
        )
        if not no_room:
            rem.append(check_seqs)
        else:
            notes.append(f"max_num_seqs is {not_printed(run)}: if it was set to {R}, that is what holds the queue")
    rem.append(
        remedy(
            "Find the request at the head of the queue and the ones holding the KV cache: a long request (a long "
            "prompt, a large max_tokens) keeps the next input from fitting beside it",
            None,
            f"{held}: the scheduler admits waiting requests in order, so one that cannot fit holds the rest",
            "client",
        )
    )
    rem += _length_remedies(c, run)
    rem.append(_watch(run))
    forbids = []
    dont: List[str] = []
    if limit is not None:
        why = f"only {R} of the {limit} requests max_num_seqs allows run"
        forbids.append(("max_num_seqs", "raise", why))
        dont.append(f"Raising max_num_seqs: {why}")
    evidence = [ev(obs.queue_best_first, "waiting, none admitted"), ev(obs.queue_best_last, "still none admitted")]
    evidence += config_evidence(run, ("kv_tokens", "max_model_len", "max_num_seqs"))
    return finding(
        RULE,
        run,
        "runtime",
        title,
        facts,
        evidence,
        rem,
        dont,
        notes,
        confidence="medium" if stalled else "low",
        severity=None if stalled else "info",
        forbids=forbids,
    )


# -- a hang the report around the log names --------------------------------------------------


def _reported_hang(run: Run) -> Optional[Finding]:
    """The text around the log says it hangs (catalog/stalls.py ``reported_hang``: prose, not
    vLLM's words), and the log shows no failure, no queue, no preemption and no saturated KV
    cache (each a slowness of its own, which its rule names): a stall the report names, which
    the log can neither show nor rule out (its last line is the last thing anyone saw). Low
    confidence."""
    said = run.markers.get("reported_hang")
    if said is None or run.failures or run.consequences or run.phase == Phase.NONE:
        return None  # a failure says more; no vLLM step at all: nothing recognisable to judge
    s = run.stats
    if (
        run.preemption.warnings  # VD201 or VD301 takes a V0 preemption warning
        or preemption_storm.is_storm(run)
        or preemption_storm.episode_of(run) is not None  # VD301 takes a passing saturation
        or queue_backlog.fires(run)
    ):
        # requests queue or are preempted: that is the slowness the report calls a hang, and
        # the rule that reads it takes the log (never a hand-off to a rule that does not fire)
        return None
    last = run.stats.recent[-1] if run.stats.recent else None
    tail = f"; its last stats line is at line {last.line.lineno}" if last is not None else ""
    # waiting with KV room (VD302's sense), in fewer intervals than VD302 reads
    queued = (s.max_waiting or 0) > 0 and (s.peak_kv_usage_pct or 0) < thresholds.BACKLOG_MAX_KV_PCT
    shows = (
        f"the log shows up to {s.max_waiting} request(s) waiting with the KV cache at most "
        f"{s.peak_kv_usage_pct or 0:.1f}% full (admission, not memory, holds them){tail}"
        if queued
        else f"the log shows no stall message and nothing that rules one out{tail}"
    )
    title = (
        f"Reported hang: the text around the log says it hangs ('{reported_excerpt('reported_hang', said.text)}'); "
        + shows
    )
    facts: Dict[str, Any] = {"reported_hang": True}
    evidence = [ev(said, "the report's words")]
    if last is not None:
        facts["running_at_last_stats"] = last.running
        evidence.append(ev(last.line, "the last stats line: nothing after it shows progress"))
    debug = env_set(run, "VLLM_LOGGING_LEVEL", "DEBUG")
    notes = [
        "this rests on the report's words: vLLM's own log here holds no timeout or wait warning; "
        + (
            f"the log ran with {debug}: its debug lines around the hang show which process waits"
            if debug
            else "a log taken while it hangs (with VLLM_LOGGING_LEVEL=DEBUG) shows which process waits"
        )
    ]
    rem = _diagnose_remedies(run, False, False) + [_watch(run)]
    if queued:
        rem = [queue_backlog.lora_slots(run)] + rem
        rem.append(queue_backlog.batch_limit(run, s.max_running or 0))
    return finding(RULE, run, _stall_phase(run), title, facts, evidence, rem, _no_memory_remedy(run), notes, "low")


# -- Ray Serve marked the replica unhealthy -----------------------------------------------------


def _health_check_missed(run: Run) -> Optional[Finding]:
    """Ray Serve's controller got no health-check answer from the replica in time and marks it
    unhealthy (catalog/stalls.py ``serve_health_check_missed``): the replica is restarted with
    every request in flight. With the engine busy (requests waiting, tokens flowing) it was
    too busy to answer (a prefill burst holds the replica's event loop): the timeout and the
    admission are the levers, not memory. A failure in the log says more (its rule names it)."""
    sig = run.stalls.signals.get("health_check_missed")
    if sig is None or run.failures:
        return None
    s = run.stats
    timeout = sig.data.get("timeout_s")
    within = f" within {timeout:g} s" if timeout else ""
    busy = ""
    if s.count:
        busy = (
            f" while the engine was busy ({s.max_running or 0} running, {s.max_waiting or 0} waiting, "
            f"KV cache at most {s.peak_kv_usage_pct or 0:.1f}% full)"
        )
    title = f"Ray Serve marked the replica unhealthy: no health-check answer{within}{busy}"
    facts: Dict[str, Any] = {"health_check_missed": sig.count}
    if timeout:
        facts["health_check_timeout_s"] = timeout
    evidence = [ev(sig.first, "Ray Serve's controller: no health-check answer in time")]
    if s.peak_line is not None:
        evidence.append(ev(s.peak_line, "the engine's load"))
    waited = f" it waited {timeout:g} s" if timeout else " the timeout is the deployment's"
    rem: List[Optional[Remedy]] = [
        remedy(
            "Raise the deployment's health_check_timeout_s (and health_check_period_s) in the Ray Serve config",
            None,
            f"{waited.strip()}; a replica busy with a burst answers late and Serve restarts it, losing every request "
            "in flight",
        ),
        remedy(
            "Limit admission per replica: the deployment's max_ongoing_requests (and max_queued_requests), so a "
            "replica holds no more than it serves",
            None,
            f"up to {s.max_waiting} requests waited behind {s.max_running} running" if s.max_waiting else None,
        ),
        remedy("Or add replicas (num_replicas, autoscaling_config) so the load spreads"),
        remedy(
            "If the replica never answers again: take stack traces of it before the restart (py-spy dump --pid PID)",
            None,
            "a hung engine misses the health check the same way",
            "host",
        ),
    ]
    dont = []
    if (s.peak_kv_usage_pct or 0) < thresholds.SATURATED_KV_PCT and s.count:
        dont.append(
            f"Memory settings (gpu_memory_utilization, KV cache size): the KV cache was at most "
            f"{s.peak_kv_usage_pct or 0:.1f}% full"
        )
    return finding(RULE, run, "runtime", title, facts, evidence, rem, dont, confidence="low")


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    for shape in (
        _hung,
        _waited,
        _unfinished_idle,
        _blocked,
        _queued,
        _wedged,
        _startup_trap,
        _health_check_missed,
        _reported_hang,
    ):
        found = shape(run)
        if found is not None:
            return [found]
    return []


RULE = Rule(
    code="VD203",
    name="engine_stall",
    severity="warning",
    summary="The engine makes no progress: a hung worker, a queue never admitted, a wedge, or a KV cache shorter "
    "than max_model_len.",
    doc=__doc__,
    check=check,
    observer=Blocked,
)
