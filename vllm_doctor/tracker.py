"""Follow each source through its server runs: record what the log says, judge nothing.

A source (one file, stdin, one pod) may hold several server starts (systemd restarts):
each start opens a new :class:`~vllm_doctor.run.Run`. :class:`SourceTracker` takes the
records of one source in order, with the events the catalog recognised in each, and keeps:

* runs: a start marker opens a new one once the current run got past its configuration or
  stopped (a failure); so does the operator's next command after a failure (a trailing one with
  nothing after it folds back into the run it follows), and a memory failure after a run that
  configuration checks alone refused (a later attempt);
* per run: the phase reached, configuration and startup facts (each with its line), the
  failures (root-cause candidates with their traceback frames, kept apart per process so a
  chained traceback gives context), the "engine died" consequence markers, the stats lines
  (maxima, recent samples, a bounded series, and the rules' observers), V0 preemption
  warnings, HTTP error responses, notable markers, the no-progress messages (counted per
  signal, and repeated wait warnings per episode until something shows progress:
  :data:`PROGRESS_KINDS`).

Nothing grows with the size of the log. There are no thresholds here: the rules
(:mod:`vllm_doctor.rules`) judge what the runs hold.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Set, Tuple

import regex

from .engines import engine_of_record
from .events import Event, Phase
from .frames import code_tags, engine_of_frame, frame_tags, looks_like_code, source_statement, vllm_console_script
from .processes import engine_of_process, is_vllm_path, is_vllm_process, is_worker_process, trainer_of
from .record import Record
from .run import Consequence, Failure, Line, Neighbour, Run, StatsSample, same_value

#: Processes whose tracebacks are kept apart at once; the least recently seen is closed first.
MAX_STREAMS = 64
MAX_FRAMES = 64
MAX_PIDS = 256
#: Environment variables kept a run (Run.env), and settings held for the next run: a bound, so
#: a log of a million exports holds no more (breakit6 item 6).
MAX_ENV = 64
#: Failures within which memory messages of one process are merged into one failure
#: (a torch OOM and vLLM's sampler / loader wrapper of it), counted in failures seen.
MERGE_WINDOW = 60

#: Patterns that mark the start of a server process (a new run once the current one got past
#: its configuration).
START_PATTERNS = frozenset({"api_server_version", "engine_config", "non_default_args", "args_namespace"})
#: Process names vLLM gives ONE process of a server instance (vllm/v1/engine/core.py
#: ``EngineCore`` / ``EngineCore_DP{rank}``, about v0.10.1 ``EngineCore_{rank}``;
#: vllm/v1/utils.py ``APIServer`` / ``ApiServer_{i}``; vllm/v1/executor/multiproc_executor.py
#: ``Worker_TP{rank}``, ``Worker_DP0_EP1`` ...; vllm-omni ``StageEngineCoreProc_stage2_replica0``;
#: ``VllmWorker rank=N`` with its rank): the same name under a second pid is a second
#: instance (or a restart). Not ``Worker`` (every worker's name before its groups exist),
#: ``VllmWorkerProcess`` (every V0 worker), Ray's actor class names (``RayWorkerWrapper``,
#: ``DPEngineCoreActor``, ``WorkerDict``: one name for every actor of the class) nor
#: vllm-omni's bare ``StageEngineCoreProc`` (one per stage of one server).
_INSTANCE_ROLE = regex.compile(
    r"(?:EngineCore(?:_DP[0-9]+|_[0-9]+)?|APIServer(?:_DP[0-9]+|_[0-9]+)?|ApiServer_[0-9]+"
    r"|Worker(?:_(?:DP|PP|PCP|TP|DCP|EP)[0-9]+)+|StageEngineCoreProc_\w+)"
)


def _starting(events: List[Event]) -> bool:
    """The record shows a process starting up: configuration, a startup fact, or a phase
    marker before the server is ready."""
    return any(
        ev.kind in ("config", "facts", "run_start") or (ev.phase is not None and ev.phase < Phase.READY)
        for ev in events
    )


def instance_role(proc: Optional[str], rank: Optional[int]) -> Optional[str]:
    """The one-per-instance role a process name names (``EngineCore_DP0``, ``Worker_TP1``,
    ``VllmWorker rank=1``), or None for names many processes of one server share."""
    if not proc:
        return None
    if proc == "VllmWorker" and rank is not None:
        return f"VllmWorker rank={rank}"
    return proc if _INSTANCE_ROLE.fullmatch(proc) else None


#: Patterns of what the operator wrote (a pasted launch command), not of what vLLM printed:
#: they give configuration but never make an input vLLM output.
OPERATOR_PATTERNS = frozenset({"launch_command", "offline_llm_call", "engine_args_repr"})
#: Patterns of what vLLM prints when it is imported, before any server starts (vllm/platforms/
#: __init__.py resolve_current_platform_cls_qualname): ``collect_env``, a script or a notebook
#: that imports vllm prints them too, so after a pasted command they prove no server started
#: (breakit4 item 9: an issue's "How to reproduce" command, then its collect_env output).
IMPORT_PATTERNS = frozenset({"platform_detected"})
#: The configuration those lines give (the platform vllm resolved).
IMPORT_KEYS = frozenset({"platform"})
#: Failure kinds that stop a server at its configuration checks, before it allocates anything
#: (``vllm/config.py`` / ``vllm/platforms/cuda.py`` dtype and quantization checks, the config
#: limits, no accelerator): a memory failure after one in the same paste is another attempt,
#: started again with the setting changed (hunt8 u08: the bf16 refusal, then the fp16 OOM).
CONFIG_FATAL_KINDS = frozenset({"quant_error", "config_error", "no_device"})
MEMORY_KINDS = frozenset({"oom", "sampler_oom", "load_oom"})
#: Traceback structure events (a record holding one starts or goes on with a traceback).
TB_KINDS = frozenset({"tb_start", "tb_frame", "tb_chain"})
#: Configuration that error messages print (the utilization a startup check used, the
#: max_model_len a length check used): kept with the run when no config line gave it.
CONFIG_IN_ERRORS = ("gpu_memory_utilization", "max_model_len", "max_num_batched_tokens", "max_num_seqs")
#: Event kinds any Python program prints: alone they do not prove the input is vLLM output.
#: (A CUDA error does count: it is what a GPU server's log is read for, pasted bare or not.)
GENERIC_KINDS = frozenset({"tb_start", "tb_frame", "tb_chain", "exception", "access"})
#: When one record holds several failure events, the most specific names the failure:
#: "RuntimeError: CUDA error: an illegal memory access" is a CUDA error before an exception.
FAILURE_PRIORITY = {"exception": 2, "cuda_error": 1}
FAILURE_KINDS = MEMORY_KINDS | {
    "kv_error",
    "free_memory",
    "profiling_error",
    "quant_error",
    "config_error",
    "unsupported",
    "cli_error",
    "too_long",
    "cuda_error",
    "exception",
    "host_oom",
    "no_device",
    "swap_exhausted",
}
#: Facts where TP ranks each print their own value: the smallest is what the engine can use.
SMALLEST_WINS = ("kv_tokens", "max_concurrency", "gpu_blocks", "kv_available_gib")
#: Facts that grow as startup goes on (a progress bar): the furthest printed is kept.
LARGEST_WINS = ("shards_loaded",)
#: Event kinds that show the engine moving (beside any phase marker and a stats line with tokens
#: processed): they end an episode of repeated wait warnings (run.StallLog). Startup facts are
#: printed when a step finished (weights loaded, KV cache sized, compile done).
PROGRESS_KINDS = frozenset({"facts", "preemption"})
#: Logger sites whose ``logger.exception(e)`` prints the exception's own text as the message
#: before its traceback: V0 MQLLMEngine's run_mp_engine / engine loop
#: (``vllm/engine/multiprocessing/engine.py``, 0.6 to 0.10: every ``logger.exception`` call
#: there passes the exception). Other sites log a description ("Error in preprocessing prompt
#: inputs", "EngineCore failed to start."), not the exception.
EXCEPTION_MESSAGE_SITES = frozenset({"engine.py"})
#: Levels of a record that the tracker counts even when nothing in it is recognised (an error
#: no rule explains rules out "healthy"). The words are pre-filter literals, so the count is
#: the same on the pre-filtered path (vllm_doctor.prefilter).
ERROR_LEVELS = ("ERROR", "CRITICAL")


def shows_progress(ev: Event) -> bool:
    """An event that shows the engine moving: a phase marker, a :data:`PROGRESS_KINDS` event,
    a stats line with tokens processed (a stats line at 0 tokens/s shows the opposite)."""
    if ev.kind == "stall":
        return False
    if ev.phase is not None or ev.kind in PROGRESS_KINDS:
        return True
    return ev.kind == "stats" and bool(ev.data.get("prompt_tps") or ev.data.get("generation_tps"))


def unexplained_error(rec: Record) -> bool:
    """A record vLLM (or uvicorn) logged at an error level: kept even when nothing in it is
    recognised."""
    return rec.level in ERROR_LEVELS and (rec.vllm_header or rec.file == "uvicorn")


def _alive(run: Run) -> bool:
    """Nothing in the run shows its server stopped: no failure, no "engine died" marker."""
    return not run.failures and not run.consequences


def _after_failure(run: Run, rec: Record) -> bool:
    """``rec`` comes after the run stopped (a failure or an "engine died" marker), and is not
    one of its own earlier lines pasted below the error, nor the next attempt after
    configuration checks alone refused it (:data:`CONFIG_FATAL_KINDS`). A record whose vLLM time is before
    the first failure's (hunt7 q26: the error quoted first, then the log it ended) belongs to
    the run it failed. Times are vLLM's ``MM-DD HH:MM:SS``; only equal-length times compare."""
    if _alive(run):
        return False
    if run.failures and all(f.kind in CONFIG_FATAL_KINDS for f in run.failures):
        # configuration checks refused each attempt: the attempts stay one run, so the rule sees
        # every setting tried (k028: bf16, fp16, then fp32 each refused; never advise one again)
        return False
    first = min((f.lines[0] for f in run.failures if f.lines), key=lambda ln: ln.lineno, default=None)
    if first is None and run.consequences:
        first = run.consequences[0].line
    if first is None or not rec.time or not first.time or len(rec.time) != len(first.time):
        return True
    return rec.time >= first.time


def _superseded(run: Run, events: List[Event]) -> bool:
    """A memory failure arrives in a run that already stopped at a configuration check
    (:data:`CONFIG_FATAL_KINDS`): that server never allocated anything, so this one is a later
    attempt's."""
    if not any(ev.kind in MEMORY_KINDS for ev in events):
        return False
    return any(f.kind in CONFIG_FATAL_KINDS for f in run.failures) and not run.failures[-1].kinds & MEMORY_KINDS


def _command_only(run: Run) -> bool:
    """A run opened by a pasted command that no startup output of a new server follows: no
    failure, no consequence, no process prefix, no stats, no startup fact, no configuration
    the command did not give, beside what vLLM prints on import (:data:`IMPORT_PATTERNS`:
    ``collect_env`` prints it too). The command quoted below its run's error (an issue's "How
    to reproduce"), or pasted again, is a note about that run, not a second server. The
    command's own values (its flags, its image tag's release) are in ``run.command_keys``."""
    return (
        run.opened_by == "command"
        and _alive(run)
        and run.prefixed_records <= run.import_records
        and not run.stats.count
        and set(run.facts) <= run.command_keys  # an image tag's release is the command's own
        and run.phase <= Phase.CONFIG
        and set(run.config) <= run.command_keys | IMPORT_KEYS
    )


def _quoted_only(run: Run, start: Event) -> bool:
    """The run holds only bare lines (no vLLM record or process prefix: a summary quoted in a
    blog or an issue) and the start marker names no other model than theirs: the marker
    starts the server those lines summarise, not a second one."""
    if run.prefixed_records or run.failures:
        return False
    model, theirs = start.data.get("model"), run.config.get("model")
    return model is None or theirs is None or model == theirs


#: Request paths whose access lines prove the server was serving (not only health checks).
SERVING_PATHS = ("/v1/", "/generate", "/worker_generate", "/openai/", "/pooling", "/score", "/rerank")


#: Function names of a failure's frames kept in ``Failure.data["frames"]`` (the last ones).
FAILURE_FRAMES = 12


def note_frame(f: Failure, func: str, path: str) -> None:
    """Keep one frame of ``f``'s traceback: its function in ``data["frames"]`` (the last
    :data:`FAILURE_FRAMES`), and ``data["vllm_frames"]`` True once a frame is a file of vLLM
    itself (``/vllm/`` in its path) or its console script
    (:func:`~vllm_doctor.frames.vllm_console_script`): the traceback ran through vLLM, not only
    a client's code."""
    if func == "<code>":
        return  # a source line under a frame, not a frame
    frames = f.data.setdefault("frames", [])
    if isinstance(frames, list):
        frames.append(func)
        del frames[:-FAILURE_FRAMES]
    if "/vllm/" in path or vllm_console_script(path):
        f.data["vllm_frames"] = True


#: The tail of an offline batch's progress bar glued into a message (the bar's ``\r`` redraw
#: and the error shared one line: hunt7 q12 "... was encountered/s, output: 240.71 toks/s]"):
#: tqdm's rate and the postfix of ``vllm/entrypoints/llm.py`` ``_run_engine`` (0.4 to 0.20;
#: ``entrypoints/common/offline.py`` from 0.3x) ``est. speed input: {in:.2f} toks/s, output:
#: {out:.2f} toks/s``, from any point of it to its closing bracket. The rate's unit is
#: taken only where no letter precedes it (a word of the message keeps its last letter).
PROGRESS_TAIL = regex.compile(
    r"(?:,?[ \t]*(?:(?<![A-Za-z])[\d.]+(?:it/s|s/it)|/(?:s|it)))?,?[ \t]*"
    r"(?:(?:est\. speed )?input: [\d.]+ toks/s,[ \t]*)?output: [\d.]+ toks/s\]?[ \t]*$"
)


def strip_progress_tail(data: Dict[str, Any]) -> Dict[str, Any]:
    """``data`` with a glued :data:`PROGRESS_TAIL` cut off its ``message`` (a copy, with
    ``generation_progress`` True: the bar shows generation was running), or ``data`` itself."""
    msg = data.get("message")
    if not isinstance(msg, str) or "toks/s" not in msg:
        return data
    m = PROGRESS_TAIL.search(msg)
    if m is None or m.start() == 0:
        return data
    return {**data, "message": msg[: m.start()].rstrip(), "generation_progress": True}


def shows_service(ev: Event) -> bool:
    """An event that proves the server was serving when it was printed: a stats line, a V0
    preemption warning. (An error answer does not: the API server answers 5xx with the engine
    dead; the catalog recognises no 2xx access line, for speed: catalog/requests.py.)"""
    return ev.kind in ("stats", "preemption")


def multiproc_executor(rec: Record, events: List[Event]) -> bool:
    """The record is V1's multiprocess executor's (its record header names
    ``multiproc_executor.py``, or a traceback frame of it): vLLM starts it only for a world of
    more than one GPU (vllm/config/parallel.py: ``world_size > 1`` -> "mp", one GPU -> "uni")."""
    if rec.file is not None and rec.file.startswith("multiproc_executor.py"):
        return True
    return any(
        e.kind == "tb_frame" and e.data.get("path", "").endswith("v1/executor/multiproc_executor.py") for e in events
    )


@dataclass
class _Stream:
    """The traceback a process is printing: its frames (function, path, tags) and first lines."""

    frames: Deque[Tuple[str, str, Set[str]]] = field(default_factory=lambda: deque(maxlen=MAX_FRAMES))
    lines: Deque[Line] = field(default_factory=lambda: deque(maxlen=4))
    open: bool = False
    chained: bool = False
    last_failure: Optional[Failure] = None
    #: The stream's last record (with an event) was a failure's message: a traceback that
    #: starts right after it is that failure's (vLLM's V0 engine logs the message first, then
    #: the traceback: logger.exception(e) in engine/multiprocessing/engine.py run_mp_engine;
    #: a chained traceback pasted without its "The above exception ..." header).
    fresh: bool = False
    #: An ERROR record of vLLM's no pattern knows, the stream's last record: if a traceback
    #: header from the same logger site (file, time) follows, the two are one log record,
    #: ``logger.exception(msg)`` (V0 MQLLMEngine: ``logger.exception(e)``, so ``msg`` is the
    #: exception's text: 0.6.6 ``engine/multiprocessing/engine.py:366``, 0.7.3 ``:400``, the
    #: HabanaAI fork ``:387``). Kept with the traceback (``logged_open``) until its end: a
    #: traceback cut before its exception line ends in that message instead (hunt6 p12).
    logged: Optional[Line] = None
    logged_open: bool = False

    def tags(self) -> Set[str]:
        out: Set[str] = set()
        for _, _, t in self.frames:
            out |= t
        return out

    def add_frame(self, func: str, path: str, tags: Set[str], line: Line) -> None:
        self.open = True
        self.frames.append((func, path, tags))
        if len(self.lines) < self.lines.maxlen:
            self.lines.append(line)
        if self.chained and self.last_failure is not None:
            self.last_failure.context_tags |= tags
            note_frame(self.last_failure, func, path)

    def reset(self) -> None:
        self.open = False
        self.frames.clear()
        self.lines.clear()
        self.logged = None
        self.logged_open = False


#: Runs kept over all the sources of one input (pods, journald processes): one budget, so the
#: caps do not multiply (64 runs x 256 pods).
RUN_BUDGET = 256
#: Oldest runs looked at for one without a failure before the oldest is evicted anyway.
EVICTION_SCAN = 16


class RunBudget:
    """One budget of runs for all the trackers of one input: past :data:`RUN_BUDGET`, the least
    recently updated run is evicted (one without failures first, among the oldest few), and
    counted in its tracker's ``dropped_runs``. A tracker's current run is never evicted."""

    def __init__(self, limit: int = RUN_BUDGET) -> None:
        self.limit = limit
        self.lru: "OrderedDict[int, Tuple[SourceTracker, Run]]" = OrderedDict()

    def add(self, tracker: "SourceTracker", run: Run) -> None:
        self.lru[id(run)] = (tracker, run)
        while len(self.lru) > self.limit:
            if not self._evict_one():
                break

    def touch(self, run: Run) -> None:
        key = id(run)
        if key in self.lru:
            self.lru.move_to_end(key)

    def forget(self, run: Run) -> None:
        self.lru.pop(id(run), None)

    def _evict_one(self) -> bool:
        oldest = list(self.lru.items())[:EVICTION_SCAN]
        movable = [(k, t, r) for k, (t, r) in oldest if r is not t.run]
        if not movable:
            return False
        k, tracker, run = next(((k, t, r) for k, t, r in movable if not r.failures), movable[0])
        del self.lru[k]
        tracker.evict(run)
        return True


class SourceTracker:
    """Consumes the records of one source, in order; holds its runs.

    ``feed(record, events)`` updates the current run; ``finish()`` closes the input
    (tracebacks still open become failures). ``runs`` lists the runs, oldest first; only the
    newest :data:`MAX_RUNS` are kept, ``dropped_runs`` counts the others. ``observers`` is a
    callable returning a fresh ``{name: observer}`` dict for each run: every stats sample of
    the run is fed to each observer (the rules own them; see :mod:`vllm_doctor.run`).
    """

    MAX_RUNS = 64

    def __init__(
        self,
        source: str,
        observers: Optional[Callable[[], Dict[str, Any]]] = None,
        budget: Optional[RunBudget] = None,
    ) -> None:
        self.source = source
        self.observers = observers
        self.budget = budget
        self.runs: List[Run] = []
        self.dropped_runs = 0
        self.seq = 0
        self.folded_runs = 0  # runs the fast path for repeated input counted instead of opening
        self.streams: "OrderedDict[str, _Stream]" = OrderedDict()
        self.records = 0
        self.recognised = 0
        self.vllm_seen = False
        #: Which run each process (stream key) printed for: a process of an earlier instance
        #: that still prints goes on filling its own run (two startups interleaved).
        self.owner: "OrderedDict[str, Run]" = OrderedDict()
        self.routed_back = 0  # records that went to an earlier, still running instance's run
        self._target: Optional[Run] = None  # the run of the record being fed
        #: A second pasted launch command after the run got past its configuration: the next
        #: instance's (two ``vllm serve`` in one paste), given to the next run that opens, or
        #: to the current one at the end when none does (:meth:`_on_config`).
        self.pending_command: Optional[Tuple[Event, Line]] = None
        #: Environment settings printed after the current run failed: the next run's, if one
        #: starts (breakit6 item 2: an export pasted after the error, before a restart).
        self.pending_env: List[Tuple[Event, Line]] = []
        #: A client transcript's last 4xx status and request max_tokens: (value, line number).
        self._client_status: Optional[Tuple[int, int]] = None
        self._client_request: Optional[Tuple[int, int]] = None
        #: The table-row label each run's stats lines came from (:meth:`_row_run`), by run index.
        self.row_labels: Dict[int, str] = {}
        self._new_run(1)

    # -- runs ---------------------------------------------------------------------------
    @property
    def run(self) -> Run:
        return self.runs[-1]

    def _new_run(self, lineno: int, opened_by: Optional[str] = None) -> Run:
        if self.runs and opened_by != "instance":
            # what the old run left open belongs to the old run (another instance's processes
            # go on printing beside the new one: their tracebacks stay theirs)
            self._close_streams()
        index = (self.runs[-1].index + 1 + self.folded_runs) if self.runs else 1
        self.folded_runs = 0
        run = Run(source=self.source, index=index, start_line=lineno, end_line=lineno, opened_by=opened_by)
        if self.observers is not None:
            run.stats.observers = self.observers()
        self.runs.append(run)
        if len(self.runs) > self.MAX_RUNS:
            old = self.runs.pop(0)
            self.dropped_runs += 1
            if self.budget is not None:
                self.budget.forget(old)
        if self.budget is not None:
            self.budget.add(self, run)
        pending, self.pending_command = self.pending_command, None
        if pending is not None:
            self._on_config(run, *pending, deferred=True)
        envs, self.pending_env = self.pending_env, []
        for ev, line in envs:
            self._set_env(run, ev, line)
        return run

    def evict(self, run: Run) -> None:
        """Drop ``run`` (the input's run budget is spent): counted in ``dropped_runs``."""
        if run in self.runs and run is not self.run:
            self.runs.remove(run)
            self.dropped_runs += 1

    def release(self) -> None:
        """This tracker is evicted whole: give its runs back to the budget."""
        if self.budget is not None:
            for run in self.runs:
                self.budget.forget(run)

    def _run_for(self, rec: Record, events: List[Event]) -> Run:
        """The run this record belongs to (recording, not judging: which run a verdict is about
        is the rules' and the verdict's choice).

        * A process that printed for an earlier run still running (no failure), where only
          other instances' processes opened runs since, goes on filling that run: two instances
          whose startups interleave each keep their own lines.
        * A start marker opens a new run once the current run got past its configuration or
          stopped (:func:`_after_failure`), or when the same process prints the same marker
          again; not when the current run holds
          only bare quoted lines (no vLLM record or process prefix: a summary pasted before
          the log) of no other model: those are this startup's.
        * A one-per-instance process (:func:`instance_role`) under a pid the current run
          does not know, where the run already has that role under another pid, is a second
          instance: the earliest running run without that role takes it while instances
          interleave, else it opens a new run once the current run got past its
          configuration.
        * The operator's command (:data:`OPERATOR_PATTERNS`) after a failure opens a new run
          (``opened_by="command"``; folded back at :meth:`finish` when nothing follows it:
          :func:`_command_only`); a memory failure after a run refused by configuration checks
          alone opens one too (``"attempt"``: :func:`_superseded`).
        """
        key = rec.stream
        owner = self.owner.get(key) if rec.pid is not None else None
        start = next((ev for ev in events if ev.pattern in START_PATTERNS), None)
        command = start is None and any(ev.pattern in OPERATOR_PATTERNS for ev in events)
        if owner is not None and owner is not self.run:
            again = start is not None and (start.pattern, key) in owner.start_patterns
            if not again and _alive(owner) and self._instances_since(owner):
                self.routed_back += 1
                if start is not None and len(owner.start_patterns) < MAX_STREAMS:
                    owner.start_patterns.add((start.pattern, key))
                return owner
            if again:
                self.owner.clear()  # the same process starts again: a restart reusing pids
        run = self.run
        role = instance_role(rec.proc, rec.rank) if rec.pid is not None else None
        if role is not None and owner is None and run.roles.get(role) != rec.pid:
            if run.opened_by == "instance" or role in run.roles:
                run = self._instance_run(rec, role, events)
        if start is not None and run is self.run:
            mark = (start.pattern, key)
            if (
                mark in run.start_patterns
                or (run.phase >= Phase.LOADING_WEIGHTS and not _quoted_only(run, start))
                or _after_failure(run, rec)
            ):
                run = self._new_run(rec.lineno, "start")
            if len(run.start_patterns) < MAX_STREAMS:
                run.start_patterns.add(mark)
        elif command and run is self.run and _after_failure(run, rec):
            # the operator's next command after a failure: the server they started again
            # (hunt7 q04: the multimodal run's OOM, then the text-only command and its log)
            run = self._new_run(rec.lineno, "command")
        elif run is self.run and _superseded(run, events):
            run = self._new_run(rec.lineno, "attempt")
        if rec.row is not None and run is self.run and any(ev.kind == "stats" for ev in events):
            run = self._row_run(run, rec)
        if role is not None and role not in run.roles and len(run.roles) < MAX_STREAMS:
            run.roles[role] = rec.pid
        if rec.pid is not None:
            self.owner[key] = run
            self.owner.move_to_end(key)
            if len(self.owner) > MAX_PIDS:
                self.owner.popitem(last=False)
        return run

    def _row_run(self, run: Run, rec: Record) -> Run:
        """The run of a stats line read from a Markdown table row labelled ``rec.row``: a
        table comparing servers (one row per model: m25, 1.5B beside 7B) is no time series,
        so a row whose label differs from the one the run's stats came from opens a run of its
        own (``opened_by="row"``); the same label goes on."""
        label = self.row_labels.get(run.index)
        if label is None:
            self.row_labels[run.index] = rec.row
            return run
        if label == rec.row or not run.stats.count:
            return run
        new = self._new_run(rec.lineno, "row")
        self.row_labels[new.index] = rec.row
        return new

    def _instances_since(self, run: Run) -> bool:
        """``run`` is still kept and every run opened after it was opened by another instance's
        process (a run opened by a start marker is a restart: the processes before it are gone,
        and a pid seen again is reused)."""
        if run not in self.runs:
            return False
        later = self.runs[self.runs.index(run) + 1 :]
        return all(r.opened_by == "instance" for r in later)

    def _instance_run(self, rec: Record, role: str, events: List[Event]) -> Run:
        """The run of a process of role ``role`` no run knows yet, where another instance may
        have it: while instances interleave (the current run was opened by one), the earliest
        running run without that role (the instances' processes come up in the order the
        instances started); else, when the current run has that role under another pid, a new
        run; else the current run."""
        if self.run.opened_by == "instance":
            for run in self.runs:
                if role not in run.roles and _alive(run) and run.prefixed_records and self._instances_since(run):
                    return run
        if role in self.run.roles and self.run.phase >= Phase.LOADING_WEIGHTS and _starting(events):
            # the run got past its configuration and this process starts up: a second startup
            # (an excerpt mixing one configuration line with another server's lines is not one,
            # nor a failure or a consequence under another pid: snippets of one incident)
            return self._new_run(rec.lineno, "instance")
        return self.run

    # -- streams (tracebacks per process) ------------------------------------------------
    def _stream(self, key: str) -> _Stream:
        st = self.streams.get(key)
        if st is None:
            st = self.streams[key] = _Stream()
            if len(self.streams) > MAX_STREAMS:
                _, old = self.streams.popitem(last=False)
                self._end_traceback(old)
        else:
            self.streams.move_to_end(key)
        return st

    def _end_traceback(self, st: _Stream) -> None:
        """A traceback whose exception line never came: keep it as a ``traceback`` failure."""
        if st.open and st.frames and st.lines:
            lines = list(st.lines)
            frames = [fn for fn, _, _ in st.frames if fn != "<code>"][-12:]  # source lines are no frames
            if st.logged_open and st.logged is not None:
                # logger.exception(msg)'s traceback cut before its exception line: the message
                # logged with it is what failed
                data = {"exception": "Error", "message": st.logged.text.strip()[:500], "logged_before": True}
                f = self._add_failure("exception", data, st.logged, st.tags(), "logged_before_traceback")
                f.data.setdefault("frames", [])
                for func, path, _ in st.frames:
                    note_frame(f, func, path)
            else:
                f = self._add_failure("traceback", {"frames": frames}, lines[0], st.tags(), "traceback")
            for line in lines[1:]:
                f.add_line(line)
        st.reset()

    def _close_streams(self) -> None:
        for st in self.streams.values():
            self._end_traceback(st)
            st.last_failure = None
            st.chained = False

    # -- failures -----------------------------------------------------------------------
    def _add_failure(self, kind: str, data: Dict[str, Any], line: Line, tags: Set[str], pattern: str) -> Failure:
        run = self._target or self.run
        self.seq += 1
        text = line.text.strip()
        # The same message again (every TP rank, re-raised by the engine): count it once.
        for f in run.failures:
            if f.kind == kind and f.has_text(text):
                f.repeats += line.repeated
                f.tags |= tags
                f.add_line(line)
                f.last_seq = self.seq
                f.served_after = None  # survived only if the server serves after this one too
                return f
        if kind in MEMORY_KINDS:
            merged = self._merge_memory(run, kind, data, line, tags, pattern, text)
            if merged is not None:
                return merged
        f = Failure(
            kind=kind,
            data=dict(data),
            lines=[line],
            stream=line.stream,
            phase_at=run.phase,
            seq=self.seq,
            last_seq=self.seq,
            tags=set(tags),
            kinds={kind},
            patterns={pattern},
            repeats=line.repeated,
        )
        f.add_text(text)
        run.add_failure(f)
        return f

    def _note_service(self, run: Run, events: List[Event], line: Line) -> None:
        """A record that shows the server serving (:func:`shows_service`): every failure of the
        run printed before it was survived (``Failure.served_after``; a failure printed again
        is reset to None in :meth:`_add_failure`). Bounded by ``Run.MAX_FAILURES``."""
        if run.failures and any(shows_service(ev) for ev in events):
            for f in run.failures:
                if f.served_after is None:
                    f.served_after = line

    def _merge_memory(self, run, kind, data, line, tags, pattern, text) -> Optional[Failure]:
        """Memory messages that belong together (a torch OOM and the sampler / loader wrapper
        of it): from the same process (or an unprefixed line), close together, and not two
        full OOM messages (those are two failures, e.g. two ranks on two GPUs)."""
        for f in reversed(run.failures):
            same_process = f.stream == line.stream or "-" in (f.stream, line.stream)
            two_full_ooms = kind == "oom" and bool(data.get("gpu_total_gib")) and bool(f.data.get("gpu_total_gib"))
            if f.kinds & MEMORY_KINDS and self.seq - f.last_seq <= MERGE_WINDOW and same_process and not two_full_ooms:
                for k, v in data.items():
                    f.data.setdefault(k, v)
                f.kinds.add(kind)
                f.patterns.add(pattern)
                f.tags |= tags
                f.add_text(text)
                f.add_line(line)
                f.repeats = max(f.repeats, line.repeated)
                f.last_seq = self.seq
                f.served_after = None
                return f
        return None

    # -- the main entry -----------------------------------------------------------------
    def feed(self, rec: Record, events: List[Event], code_line_tags: Optional[Set[str]] = None) -> None:
        """Update the state with one record and the events recognised in it.

        Invariant the block pre-filter (:mod:`vllm_doctor.prefilter`) relies on: a record
        with no event changes nothing but counters, unless it is a traceback source line
        naming a function of :data:`vllm_doctor.frames.TAG_FUNCS`, or a record of vLLM's
        (or uvicorn's) at an :data:`ERROR_LEVELS` level (those names and words are
        pre-filter literals too). ``code_line_tags`` may be passed in when the caller
        already computed them. So skipping records without anchors gives the same state.
        """
        self.records += 1
        if events and source_statement(rec.text):
            # ``raise RuntimeError(f"NCCL error: {error_str}")``: the source of the exception
            # line that follows, a template (frames.source_statement); no failure of its own
            events = [ev for ev in events if ev.kind not in FAILURE_KINDS]
        if code_line_tags is None and not events and looks_like_code(rec.text):
            code_line_tags = code_tags(rec.text)  # not computed by the caller
        if not events and not code_line_tags:
            run = self.run
            run.records += 1
            if unexplained_error(rec):
                run.unexplained_errors += 1
                if run.first_unexplained_error is None:
                    run.first_unexplained_error = Line.of(rec)
                if rec.file in EXCEPTION_MESSAGE_SITES and rec.vllm_header and rec.text.strip():
                    st = self._stream(rec.stream)
                    if not st.logged_open:
                        st.logged = Line.of(rec)  # a traceback may follow as the same record
                if rec.vllm_header:
                    # vLLM's own record prefix at ERROR: vLLM output, though no pattern knows
                    # the message (ERROR records reach here on the pre-filtered path too)
                    self.vllm_seen = True
            return
        run = self._target = self._run_for(rec, events)
        try:
            self._feed(run, rec, events, code_line_tags)
        finally:
            self._target = None

    def _feed(self, run: Run, rec: Record, events: List[Event], code_line_tags: Optional[Set[str]]) -> None:
        if self.budget is not None:
            self.budget.touch(run)
        run.records += 1
        run.end_line = max(run.end_line, rec.lineno)
        line = Line.of(rec)
        vllmish = self._note_process(run, rec, events)
        if rec.level in ("ERROR", "CRITICAL"):
            run.errors_seen += 1
            if run.first_error is None:
                run.first_error = line
        st = self._stream(rec.stream)
        # the failure this record may go on from: the stream's record right before was one
        continued = st.last_failure if st.fresh and not any(ev.kind in TB_KINDS for ev in events) else None
        if self._traceback(run, st, events, code_line_tags, line):
            vllmish = True
        if any(not ev.data.get("prose") for ev in events):  # a reporter's words are no vLLM output
            self.recognised += 1
            run.recognised += 1
            run.stats.records_after_last += 1
        if vllmish:
            self.vllm_seen = True
        failure_made = False
        if len(events) > 1:  # the most specific failure event first (stable for the rest)
            events = sorted(events, key=lambda e: FAILURE_PRIORITY.get(e.kind, 0))
        for ev in events:
            if ev.phase is not None:
                run.reached(ev.phase, line)
            handler = _HANDLERS.get(ev.kind)
            if handler is not None:
                handler(self, run, ev, line)
            elif ev.kind in FAILURE_KINDS and not failure_made:
                failure_made = self._failure(run, st, ev, events, line, continued)
            elif failure_made and ev.kind in MEMORY_KINDS and st.last_failure is not None:
                # One message naming two memory events (vLLM's "Failed to load model - not
                # enough GPU memory ... (original error: CUDA out of memory ...)"): one failure.
                f = st.last_failure
                f.kinds.add(ev.kind)
                f.patterns.add(ev.pattern)
                for k, v in ev.data.items():
                    f.data.setdefault(k, v)
        if run.stalls.episode is not None and any(shows_progress(ev) for ev in events):
            run.stalls.progress(line)
        self._note_service(run, events, line)

    def _note_process(self, run: Run, rec: Record, events: List[Event]) -> bool:
        """Record vLLM's own PIDs and what the process name tells of the engine; return True
        when the record is surely vLLM output."""
        vllm_proc = is_vllm_process(rec.proc)
        if rec.vllm_header or rec.proc:
            run.prefixed_records += 1
            if events and all(ev.pattern in IMPORT_PATTERNS for ev in events):
                run.import_records += 1
        if rec.proc and len(run.process_names) < MAX_STREAMS:
            run.process_names.add(rec.proc)
        if rec.pid is not None and vllm_proc and len(run.vllm_pids) < MAX_PIDS:
            run.vllm_pids.add(rec.pid)
        if rec.unit and rec.pids and len(run.vllm_pids) < MAX_PIDS:
            run.vllm_pids.add(rec.pids[0])
        if is_worker_process(rec.proc) and len(run.worker_procs) < MAX_PIDS:
            run.worker_procs.add((rec.proc, rec.rank))
        if "multiproc_executor" not in run.markers and multiproc_executor(rec, events):
            run.markers["multiproc_executor"] = Line.of(rec)  # remedies2: more than one GPU (plan.tp_at_least)
        if run.trainer is None:
            trainer = trainer_of(rec.proc) or next(
                (trainer_of(path=e.data.get("path", "")) for e in events if e.kind == "tb_frame"), None
            )
            if trainer is not None:
                run.trainer, run.trainer_line = trainer, Line.of(rec)
        if events and len(run.record_engine_hints) < 2:  # remedies3: a recognised record's file (not state)
            by_file = engine_of_record(rec.file)
            if by_file:
                run.record_engine_hints.add(by_file)
        engine = engine_of_process(rec.proc, rec.rank)
        if engine:
            run.engine_hints.add(engine)
        return (
            rec.vllm_header
            or vllm_proc
            or any(
                ev.kind not in GENERIC_KINDS
                and ev.kind != "client"  # a client's transcript is no vLLM output
                and ev.pattern not in OPERATOR_PATTERNS
                and not ev.data.get("prose")
                for ev in events
            )
        )

    def _traceback(self, run: Run, st: _Stream, events: List[Event], code_line_tags, line: Line) -> bool:
        """Traceback bookkeeping (frames belong to the process that printed them). Returns
        True when a frame names a file of vLLM itself."""
        kinds = {ev.kind for ev in events}
        fresh, st.fresh = st.fresh, False
        if fresh and st.last_failure is not None and kinds & {"tb_start", "tb_frame"}:
            # a traceback right after a failure's message, its header printed or not: its
            # frames tell where the failure just logged happened
            self._end_traceback(st)
            st.open = st.chained = True
            kinds.discard("tb_start")
        logged = st.logged
        if not st.logged_open:
            st.logged = None  # only the record right before a traceback header is its message
        if "tb_start" in kinds:
            self._end_traceback(st)
            st.open = True
            if logged is not None and (logged.file, logged.time, logged.level) == (line.file, line.time, line.level):
                st.logged, st.logged_open = logged, True
        elif "tb_chain" in kinds:
            self._end_traceback(st)
            st.chained = True
        elif "tb_frame" in kinds:
            d = next(e for e in events if e.kind == "tb_frame").data
            path = d["path"]
            st.add_frame(d["func"], path, frame_tags(d["func"], path), line)
            engine = engine_of_frame(d["func"], path)
            if engine is not None:
                run.engine_hints.add(engine)
            if is_vllm_path(path) or vllm_console_script(path):
                return True
        elif code_line_tags:
            # A source line printed under a frame (or the tail of one cut from the paste).
            st.add_frame("<code>", "", code_line_tags, line)
        elif st.open and events and not kinds & (FAILURE_KINDS | {"engine_dead"}):
            self._end_traceback(st)
        return False

    def _failure(
        self, run: Run, st: _Stream, ev: Event, events: List[Event], line: Line, continued: Optional[Failure] = None
    ) -> bool:
        """A root-cause candidate (or a consequence marker in an exception's clothes).
        ``continued`` is the failure of the same process's record right before, if any.
        Returns True when a failure was recorded (one per record)."""
        if ev.kind == "exception" and ev.data.get("consequence"):
            if not any(e.kind == "engine_dead" for e in events):
                run.add_consequence(Consequence(line, "exception", exception=ev.data.get("exception")))
            st.reset()  # the traceback it ends reports a failure elsewhere: it is no failure itself
            return False
        if ev.data.get("warning_only"):
            return False
        for key in CONFIG_IN_ERRORS:
            if key in ev.data and key not in run.config:
                run.config[key] = ev.data[key]
                run.config_lines[key] = line
        data = strip_progress_tail(ev.data)
        if data is not ev.data:
            run.markers.setdefault("offline_batch", line)
        tags = st.tags()
        if continued is not None and any(g is continued for g in run.failures):
            # the next line of the same process's failure message (a JAX error's code on one
            # line, its "Ran out of memory in memory space vmem" on the next: hunt7 q07): the
            # frames that placed the first place this one
            tags |= continued.tags
        f = self._add_failure(ev.kind, data, line, tags, ev.pattern)
        if "frames" not in f.data:
            for func, path, _ in st.frames:
                note_frame(f, func, path)
        exc = next((e.data["exception"] for e in events if e.kind == "exception"), None)
        if exc and not f.exception:
            f.exception = exc
        st.last_failure = f
        st.chained = False
        st.reset()
        st.fresh = True
        return True

    # -- event handlers (kinds that are not failures) ------------------------------------
    def _on_config(self, run: Run, ev: Event, line: Line, deferred: bool = False) -> None:
        command = ev.data.get("launch_command") is True
        first = run.markers.get("launch_command")
        if command and not deferred and first is not None and first is not line and run.phase >= Phase.LOADING_WEIGHTS:
            # a second command pasted after this run got going: the next instance's (m09)
            self.pending_command = (ev, line)
            return
        if command:
            run.markers.setdefault("launch_command", line)
            if ev.pattern == "offline_llm_call":
                # the operator's LLM(...) call: its settings are keywords, even when it failed
                # before its batch began (breakit4 item 12); no proof of serving (offline_batch)
                run.markers.setdefault("offline_llm", line)
        for key, val in ev.data.items():
            if key == "launch_command":
                continue
            if key in run.command_keys and not command:
                # vLLM's own printout of its arguments replaces what a pasted command said.
                run.command_keys.discard(key)
                run.config[key] = val
                run.config_lines[key] = line
                continue
            if key == "vllm_version":
                # an image tag in a command (catalog/config.py) is a hint: a later command's tag
                # replaces it, and vLLM's own version line replaces both (breakit5 item 7)
                if "vllm_version" not in run.facts or "vllm_version" in run.command_keys:
                    run.facts["vllm_version"] = val
                    run.fact_lines["vllm_version"] = line
                    if command:
                        run.command_keys.add("vllm_version")
                    else:
                        run.command_keys.discard("vllm_version")
            elif key == "engine":
                run.engine_hints.add(val)
            elif key not in run.config:
                run.config[key] = val
                run.config_lines[key] = line
                if command:
                    run.command_keys.add(key)

    def _on_env(self, run: Run, ev: Event, line: Line) -> None:
        """What the log shows set in the environment. A setting printed after the run failed
        is held for the next run (it set nothing for the one that failed); NCCL's own lines
        (implied) are the failing run's."""
        if run.failures and not ev.data.get("implied"):
            if len(self.pending_env) < MAX_ENV:
                self.pending_env.append((ev, line))
            return
        self._set_env(run, ev, line)

    @staticmethod
    def _set_env(run: Run, ev: Event, line: Line) -> None:
        """The last line that sets a name wins (as in a shell), an unset takes it out; a value a
        line only implies (NCCL INFO lines: NCCL_DEBUG) never replaces one. At most
        :data:`MAX_ENV` names a run."""
        for name in ev.data.get("unset", ()):
            run.env.pop(name, None)
            run.env_lines.pop(name, None)
        implied = ev.data.get("implied")
        for name, value in ev.data["env"].items():
            if implied and name in run.env:
                continue
            if name not in run.env and len(run.env) >= MAX_ENV:
                continue
            run.env[name] = value
            run.env_lines[name] = line

    def _on_facts(self, run: Run, ev: Event, line: Line) -> None:
        for key, val in ev.data.items():
            if key == "concurrency_tokens":
                # "Maximum concurrency for N tokens per request": N is the run's max_model_len.
                key = "max_model_len"
            if key in ("gpu_memory_utilization", "max_model_len"):
                # what vLLM printed outranks a pasted command's (v13: two prose commands, the
                # first's --max-model-len 32, then "Maximum concurrency for 512 tokens")
                if key not in run.config or key in run.command_keys:
                    run.command_keys.discard(key)
                    run.config[key] = val
                    run.config_lines[key] = line
                continue
            old = run.facts.get(key)
            if old is None or (key in SMALLEST_WINS and val < old) or (key in LARGEST_WINS and val > old):
                run.facts[key] = val
                run.fact_lines[key] = line

    def _on_stats(self, run: Run, ev: Event, line: Line) -> None:
        d = ev.data
        sample = StatsSample(
            line=line,
            engine_index=d.get("engine_index", 0),
            running=d.get("running", 0),
            waiting=d.get("waiting", 0),
            swapped=d.get("swapped"),
            preemptions=d.get("preemptions", 0),
            kv_usage_pct=d.get("kv_usage_pct"),
            generation_tps=d.get("generation_tps"),
            prompt_tps=d.get("prompt_tps"),
            prefix_hit_pct=d.get("prefix_hit_pct"),
        )
        run.stats.add(sample, d.get("engine"))
        if run.stalls.unfinished:
            run.stalls.stats(sample)
        run.reached(Phase.SERVING, line)
        if d.get("engine"):
            run.engine_hints.add(d["engine"])

    def _on_prefix_hit(self, run: Run, ev: Event, line: Line) -> None:
        run.stats.add_prefix_hit(ev.data["prefix_hit_pct"])

    def _on_preemption(self, run: Run, ev: Event, line: Line) -> None:
        run.preemption.add(ev.data.get("mode", "RECOMPUTE"), ev.data.get("cumulative", 0), line)
        run.engine_hints.add("v0")
        run.reached(Phase.SERVING, line)

    def _on_access(self, run: Run, ev: Event, line: Line) -> None:
        status = ev.data.get("status")
        if isinstance(status, int):
            run.http.add(status, line)
            run.stats.access_after_last += 1
            if str(ev.data.get("path", "")).startswith(SERVING_PATHS):
                run.reached(Phase.SERVING, line)

    def _on_engine_dead(self, run: Run, ev: Event, line: Line) -> None:
        d = ev.data
        method = d.get("method")
        run.add_consequence(
            Consequence(line, d.get("marker", "engine_dead"), d.get("phase_hint"), d.get("who"), method=method)
        )
        if method:
            run.sibling_tags |= frame_tags(method, "")

    def _on_stall(self, run: Run, ev: Event, line: Line) -> None:
        run.stalls.add(ev.data, line, run.phase)

    def _on_client(self, run: Run, ev: Event, line: Line) -> None:
        """A client's transcript (catalog/requests.py): its 4xx status line and the max_tokens
        its request asked for are kept; a body naming a length limit within
        after such a status line may be that
        response's: a request rejected as too long, seen from the client (``seen_from``), its
        distance from the status line kept (``body_gap``: the tree judges whether it is that
        response's). A body, or a tokenizer's warning, with no status line before it is nothing."""
        d = ev.data
        if "status" in d:
            self._client_status = (d["status"], line.lineno)
            return
        if "request_max_tokens" in d:
            self._client_request = (d["request_max_tokens"], line.lineno)
            return
        status = self._client_status
        if status is None or line.lineno < status[1]:
            return
        self._client_status = None  # one response, one body
        data: Dict[str, Any] = {"seen_from": "client", "status": status[0], "variant": "client"}
        data["body_gap"] = line.lineno - status[1]
        if "max_model_len" in d:
            data["max_model_len"] = d["max_model_len"]
        req = self._client_request
        if req is not None and req[1] <= status[1]:
            data["max_tokens"] = req[0]
        self._add_failure("too_long", data, line, set(), ev.pattern)

    def _on_marker(self, run: Run, ev: Event, line: Line) -> None:
        name = ev.data.get("marker") or ev.pattern
        run.markers.setdefault(name, line)

    # -- folding repeated input (vllm_doctor.repeats) --------------------------------------
    def fold_state(self) -> Tuple[Dict[str, int], Dict[str, int], Dict[str, Any]]:
        """What the fast path for repeated input (:mod:`vllm_doctor.repeats`) compares between
        two cycles of the same lines, read in full: ``(counts, run_counts, steady)``.

        ``counts`` are this tracker's counters, ``run_counts`` the current run's (integers each
        record adds to); ``steady`` is everything else one more cycle may change once the input
        has settled into the cycle: sizes of the bounded lists, the frames each process's
        traceback holds, the run's phase, sets and first lines. The fast path folds a cycle only
        when ``steady`` is equal at its ends; it then adds the counters' growth per cycle for the
        cycles it does not feed (:meth:`fold_advance`). Nothing here judges."""
        run = self.run
        counts = {
            "records": self.records,
            "recognised": self.recognised,
            "seq": self.seq,
            "dropped_runs": self.dropped_runs,
            "index": run.index,
        }
        rc = {
            "records": run.records,
            "recognised": run.recognised,
            "errors_seen": run.errors_seen,
            "unexplained_errors": run.unexplained_errors,
            "dropped_failures": run.dropped_failures,
            "preemption_warnings": run.preemption.warnings,
            "preemption_messages": run.preemption.messages,
            "prefixed_records": run.prefixed_records,
            "import_records": run.import_records,
            "records_after_last": run.stats.records_after_last,
            "access_after_last": run.stats.access_after_last,
        }
        for bucket, n in run.http.by_bucket.items():
            rc[f"http_bucket:{bucket}"] = n
        for status, n in run.http.by_status.items():
            rc[f"http_status:{status}"] = n
        for i, f in enumerate(run.failures):
            rc[f"failure_repeats:{i}"] = f.repeats
        steady = {
            "runs": len(self.runs),
            "vllm_seen": self.vllm_seen,
            "pending_command": self.pending_command is not None,
            "pending_env": len(self.pending_env),
            "streams": [
                (
                    key,
                    st.open,
                    st.chained,
                    st.fresh,
                    st.logged is None,
                    st.logged_open,
                    # which failure the stream's next traceback belongs to (None, or its place)
                    None
                    if st.last_failure is None
                    else next((i for i, f in enumerate(run.failures) if f is st.last_failure), -1),
                    len(st.lines),
                    tuple((fn, path, frozenset(tags)) for fn, path, tags in st.frames),
                )
                for key, st in self.streams.items()
            ],
            "phase": run.phase,
            "phase_lines": frozenset(run.phase_lines),
            "config": frozenset(run.config),
            "command_keys": frozenset(run.command_keys),
            "facts": tuple(sorted((k, repr(v)) for k, v in run.facts.items())),
            "markers": frozenset(run.markers),
            "failures": [
                (
                    f.kind,
                    len(f.lines),
                    len(f.text_hashes),
                    frozenset(f.kinds),
                    frozenset(f.patterns),
                    frozenset(f.tags),
                    frozenset(f.context_tags),
                    f.exception,
                    len(f.data),
                    f.served_after is None,
                )
                for f in run.failures
            ],
            "consequences": len(run.consequences),
            "stats": run.stats.count,
            "prefix_hit": (run.stats.prefix_hit_first, run.stats.prefix_hit_max),
            "preemption": (run.preemption.max_cumulative, frozenset(run.preemption.modes)),
            "http_statuses": frozenset(run.http.by_status),
            "vllm_pids": frozenset(run.vllm_pids),
            "worker_procs": frozenset(run.worker_procs),
            "trainer": run.trainer,
            "engine_hints": frozenset(run.engine_hints),
            "start_patterns": frozenset(run.start_patterns),
            "roles": tuple(sorted(run.roles.items())),
            "process_names": frozenset(run.process_names),
            # records that went to an earlier instance's run change a run this state does not
            # show: a cycle that does so is never folded
            "routed_back": self.routed_back,
            "owners": len(self.owner),
            "preempting": tuple(sorted(run.preemption.by_process.items())),
            "sibling_tags": frozenset(run.sibling_tags),
            "first_error": run.first_error is None,
            "first_unexplained_error": run.first_unexplained_error is None,
            "stalls": (
                tuple(sorted(run.stalls.signals)),
                run.stalls.episode is None,
                run.stalls.longest_resolved is None,
                # an open claim counts every idle interval: a cycle that adds one is never folded
                tuple(sorted((i, c.idle_intervals) for i, c in run.stalls.unfinished.items())),
            ),
        }
        return counts, rc, steady

    def fold_advance(self, counts: Dict[str, int], run_counts: Dict[str, int], times: int) -> None:
        """Account ``times`` more cycles the fast path did not feed: add ``times`` x each
        growth per cycle (the keys of :meth:`fold_state`; ``index``: runs opened and, the run
        list being full, dropped by those cycles, numbered as :meth:`_new_run` would)."""
        self.records += counts.get("records", 0) * times
        self.recognised += counts.get("recognised", 0) * times
        self.seq += counts.get("seq", 0) * times
        self.dropped_runs += counts.get("dropped_runs", 0) * times
        self.folded_runs += counts.get("index", 0) * times
        run = self.run
        for key, d in run_counts.items():
            if not d:
                continue
            add = d * times
            name, _, arg = key.partition(":")
            if name == "http_bucket":
                run.http.by_bucket[arg] += add
            elif name == "http_status":
                run.http.by_status[int(arg)] += add
            elif name == "failure_repeats":
                run.failures[int(arg)].repeats += add
            elif name == "preemption_warnings":
                run.preemption.warnings += add
            elif name == "preemption_messages":
                run.preemption.messages += add
            elif name in ("records_after_last", "access_after_last"):
                setattr(run.stats, name, getattr(run.stats, name) + add)
            else:
                setattr(run, name, getattr(run, name) + add)

    def finish(self, total_lines: Optional[int] = None) -> None:
        """End of input: open tracebacks become failures. ``total_lines`` (the input's physical
        lines, when this source is the input's only one) tells how much of the log follows each
        run's last stats line, recognised or not (access and health lines go on while a wedged
        engine is silent)."""
        self._close_streams()
        pending, self.pending_command = self.pending_command, None
        if pending is not None:  # no instance followed: the command stays this run's, as before
            self._on_config(self.run, *pending, deferred=True)
        self._fold_trailing_command()
        self._note_neighbours()
        if total_lines is not None:
            for i, run in enumerate(self.runs):
                last = run.stats.last
                if last is None:
                    continue
                end = self.runs[i + 1].start_line - 1 if i + 1 < len(self.runs) else total_lines
                run.stats.lines_after_last = max(run.stats.records_after_last, end - last.lineno)

    def _fold_trailing_command(self) -> None:
        """A run opened by a command after a failure, that holds nothing but the command
        (:func:`_command_only`) and ends the input, is no second server: the run is dropped.
        When the command agrees with what the failed run printed (the same command pasted
        below its error, an issue's "How to reproduce"), its values are that run's: they go
        back to it (what the run's own lines printed stays), so its remedies know e.g. the
        gpu_memory_utilization that was in force. A command that contradicts what the run
        printed (another max_model_len) is another command, never run here: none of its
        values are the failed run's."""
        if len(self.runs) < 2 or not _command_only(self.run):
            return
        cmd, run = self.runs.pop(), self.runs[-1]
        if self.budget is not None:
            self.budget.forget(cmd)
        same = all(same_value(run.config[k], v) for k, v in cmd.config.items() if k in run.config)
        for key, val in cmd.config.items():
            if same and key not in run.config:
                run.config[key] = val
                run.config_lines[key] = cmd.config_lines[key]
                if key in cmd.command_keys:
                    run.command_keys.add(key)
        for name, value in cmd.env.items():
            if same and name not in run.env:
                run.env[name] = value
                run.env_lines[name] = cmd.env_lines[name]
        for name, line in cmd.markers.items():
            if same or name != "launch_command":
                run.markers.setdefault(name, line)
            else:
                run.markers.setdefault("later_command", line)  # the operator's next command, never run here
        run.records += cmd.records
        run.recognised += cmd.recognised
        run.end_line = max(run.end_line, cmd.end_line)

    def _note_neighbours(self) -> None:
        """Give each run the earlier runs of this source that were up when it started
        (:class:`~vllm_doctor.run.Neighbour`): opened before it, with no failure before its
        first line, and past their configuration (they held memory). Only runs of distinct
        instances count: one opened by a second instance's process, or whose engine
        processes differ from this run's."""
        for i, run in enumerate(self.runs):
            for other in self.runs[:i]:
                if other.phase < Phase.LOADING_WEIGHTS or not _up_at(other, run.start_line):
                    continue
                if not _distinct_instances(other, run):
                    continue
                engine = next((r for r in sorted(other.roles) if r.startswith(("EngineCore", "Worker"))), None)
                process = f"{engine} pid {other.roles[engine]}" if engine else None
                run.neighbours.append(
                    Neighbour(
                        index=other.index,
                        process=process,
                        phase=other.phase,
                        overlapped=other.end_line > run.start_line,
                        gpu_memory_utilization=other.config.get("gpu_memory_utilization"),
                        gpu_total_gib=other.value("gpu_total_gib"),
                        kv_available_gib=other.facts.get("kv_available_gib"),
                        kv_tokens=other.facts.get("kv_tokens"),
                        line=other.phase_lines.get(other.phase),
                    )
                )


def _up_at(run: Run, lineno: int) -> bool:
    """No failure or "engine died" marker of ``run`` came before line ``lineno``."""
    lines = [f.lines[0].lineno for f in run.failures if f.lines] + [c.line.lineno for c in run.consequences]
    return all(n > lineno for n in lines)


def _distinct_instances(a: Run, b: Run) -> bool:
    """Two runs are two instances (not a restart of one): ``b`` was opened by a second
    instance's process, or both name an engine role with different pids."""
    if b.opened_by == "instance":
        return True
    shared = set(a.roles) & set(b.roles)
    return bool(shared) and any(a.roles[r] != b.roles[r] for r in shared) and a.end_line > b.start_line


#: Event kinds whose handling, for a record fed again one cycle after an equal one (same text,
#: envelope and events; line number and time aside), only adds to counters, keeps the first or
#: last few lines (at most 64), or adds to a set: the fast path for repeated input
#: (:mod:`vllm_doctor.repeats`) may count cycles of records that carry only these (and none).
#: Not ``stats`` (every sample feeds the series and the rules' observers), nor a kind added
#: after this list was written: a new handler is fed every record until it is reviewed here.
FOLDABLE_KINDS = frozenset(
    {"run_start", "config", "facts", "phase", "prefix_hit", "preemption", "access", "engine_dead", "marker"}
    | {"tb_start", "tb_frame", "tb_chain"}
    | FAILURE_KINDS
)
#: In cycles that each open a run (a restart loop) every run is its own: its stats too.
RUN_FOLDABLE_KINDS = FOLDABLE_KINDS | {"stats"}

_HANDLERS: Dict[str, Callable[[SourceTracker, Run, Event, Line], None]] = {
    "config": SourceTracker._on_config,
    "run_start": SourceTracker._on_config,
    "facts": SourceTracker._on_facts,
    "stats": SourceTracker._on_stats,
    "prefix_hit": SourceTracker._on_prefix_hit,
    "preemption": SourceTracker._on_preemption,
    "access": SourceTracker._on_access,
    "engine_dead": SourceTracker._on_engine_dead,
    "marker": SourceTracker._on_marker,
    "client": SourceTracker._on_client,
    "stall": SourceTracker._on_stall,
    "env": SourceTracker._on_env,
}
