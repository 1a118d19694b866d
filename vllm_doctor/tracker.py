"""Follow each source through its server runs, keeping bounded state and evidence.

A source (one file, stdin, one pod) may hold several server starts (systemd restarts):
each start opens a new :class:`Run`. Within a run the tracker keeps the phase reached,
the configuration and startup facts (each with the line that said it), the failures
(root causes with the traceback frames around them), the "engine died" consequence
markers, and online summaries of the stats lines and preemption warnings. Nothing grows
with the size of the log: lists are capped, series are summarised as they stream by.

The diagnoses (:mod:`vllm_doctor.diagnoses`) read this state; they never read the log.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, List, Optional, Set, Tuple

from .envelopes import VLLM_PROCESS_NAMES, Record
from .events import Event, Phase
from .frames import code_tags, frame_tags

MAX_FAILURES = 32
MAX_EVIDENCE = 8
MAX_CONSEQUENCES = 16
MAX_STREAMS = 64
MAX_FRAMES = 64
MAX_PIDS = 256
MERGE_WINDOW = 60  # failures within which memory messages of one failure are merged
MAX_TEXTS = 64  # distinct message texts remembered per failure (for de-duplication)

#: Stats thresholds for KV saturation (a judgement, documented in diagnoses/preemption_storm.py).
SATURATED_KV_PCT = 85.0

#: Events whose pattern marks the start of a server process (a new run when the current
#: one already got past its configuration).
START_PATTERNS = {"api_server_version", "engine_config", "non_default_args", "args_namespace"}

#: Exception names that report a failure elsewhere instead of being one.
CONSEQUENCE_EXCEPTIONS = {
    "EngineDeadError",
    "MQEngineDeadError",
    "AsyncEngineDeadError",
    "EngineGenerateError",
    "CancelledError",
    "KeyboardInterrupt",
    "SystemExit",
    "BrokenPipeError",
    "ConnectionResetError",
}
CONSEQUENCE_MESSAGES = (
    "Engine core initialization failed",
    "Engine process failed to start",
    "Worker failed with error",
    "Executor failed",
    "Background loop has errored",
    "see root cause above",
    "See root cause above",
    "Engine loop is not running",
    "EngineCore encountered an issue",
    "Inspect the stacktrace",
)
MEMORY_KINDS = {"oom", "sampler_oom", "load_oom"}
CONFIG_IN_ERRORS = ("gpu_memory_utilization", "max_model_len", "max_num_batched_tokens", "max_num_seqs")
#: Event kinds any Python program prints: alone they do not prove the input is vLLM output.
GENERIC_KINDS = {"tb_start", "tb_frame", "tb_chain", "exception", "access", "cuda_error"}
FAILURE_KINDS = MEMORY_KINDS | {
    "kv_error",
    "free_memory",
    "profiling_error",
    "quant_error",
    "config_error",
    "too_long",
    "cuda_error",
    "exception",
}


@dataclass
class Failure:
    """One root-cause candidate: an error message with what surrounds it.

    ``kind`` is the event kind (``oom``, ``kv_error``, ``exception`` ..., or ``traceback``
    for frames whose exception line is not in the log); ``data`` the values recognised
    (merged over the related messages); ``tags`` what its own traceback frames say,
    ``context_tags`` what a chained traceback printed after it says; ``phase_at`` the
    run's phase when it was seen; ``records`` bounded evidence; ``repeats`` how often the
    same message was printed (TP ranks, re-raises).
    """

    kind: str
    data: Dict[str, Any]
    records: List[Record]
    stream: str
    phase_at: Phase
    seq: int
    tags: Set[str] = field(default_factory=set)
    context_tags: Set[str] = field(default_factory=set)
    kinds: Set[str] = field(default_factory=set)
    exception: Optional[str] = None
    repeats: int = 1
    last_seq: int = 0
    texts: Set[str] = field(default_factory=set)

    def add_record(self, rec: Record) -> None:
        if len(self.records) < MAX_EVIDENCE and all(r is not rec for r in self.records):
            self.records.append(rec)

    def add_text(self, text: str) -> None:
        if len(self.texts) < MAX_TEXTS:  # bounded: a log may repeat one failure forever
            self.texts.add(text)


@dataclass
class StatsSummary:
    """Online summary of the periodic stats lines of one run (V0 and V1).

    ``episode`` is the longest run of consecutive saturated intervals on one engine
    (KV usage >= :data:`SATURATED_KV_PCT` with requests waiting, swapped or preempted).
    """

    count: int = 0
    engine: Optional[str] = None
    peak_kv_usage_pct: Optional[float] = None
    peak_record: Optional[Record] = None
    max_running: Optional[int] = None
    max_waiting: Optional[int] = None
    max_waiting_record: Optional[Record] = None
    max_swapped: Optional[int] = None
    preemptions_total: int = 0
    intervals_with_preemptions: int = 0
    prefix_hit_first: Optional[float] = None
    prefix_hit_last: Optional[float] = None
    prefix_hit_max: Optional[float] = None
    backlog_intervals: int = 0  # waiting > 0 while KV usage < 70 %
    backlog_record: Optional[Record] = None
    first_record: Optional[Record] = None
    last_record: Optional[Record] = None
    streak: Dict[int, Dict[str, Any]] = field(default_factory=dict)
    episode: Optional[Dict[str, Any]] = None

    def add(self, ev: Event) -> None:
        d = ev.data
        rec = ev.record
        self.count += 1
        self.engine = self.engine or d.get("engine")
        if self.first_record is None:
            self.first_record = rec
        self.last_record = rec
        kv = d.get("kv_usage_pct")
        running, waiting = d.get("running", 0), d.get("waiting", 0)
        swapped, preempted = d.get("swapped", 0), d.get("preemptions", 0)
        if kv is not None and (self.peak_kv_usage_pct is None or kv > self.peak_kv_usage_pct):
            self.peak_kv_usage_pct, self.peak_record = kv, rec
        self.max_running = max(self.max_running or 0, running)
        if self.max_waiting is None or waiting > self.max_waiting:
            self.max_waiting, self.max_waiting_record = waiting, rec
        if "swapped" in d:
            self.max_swapped = max(self.max_swapped or 0, swapped)
        if preempted:
            self.preemptions_total += preempted
            self.intervals_with_preemptions += 1
        hit = d.get("prefix_hit_pct")
        if hit is not None:
            self.add_prefix_hit(hit)
        if kv is not None and waiting > 0 and kv < 70.0:
            self.backlog_intervals += 1
            self.backlog_record = self.backlog_record or rec
        engine_index = d.get("engine_index", 0)
        saturated = kv is not None and kv >= SATURATED_KV_PCT and (waiting > 0 or swapped > 0 or preempted > 0)
        st = self.streak.get(engine_index)
        if saturated:
            if st is None:
                st = self.streak[engine_index] = {
                    "intervals": 0,
                    "first": rec,
                    "last": rec,
                    "peak_kv_usage_pct": kv,
                    "max_waiting": waiting,
                    "max_running": running,
                    "engine_index": engine_index,
                }
            st["intervals"] += 1
            st["last"] = rec
            st["peak_kv_usage_pct"] = max(st["peak_kv_usage_pct"], kv)
            st["max_waiting"] = max(st["max_waiting"], waiting)
            st["max_running"] = max(st["max_running"], running)
            if self.episode is None or st["intervals"] > self.episode["intervals"] or self.episode is st:
                self.episode = st
        elif st is not None:
            del self.streak[engine_index]

    def add_prefix_hit(self, hit: float) -> None:
        if self.prefix_hit_first is None:
            self.prefix_hit_first = hit
        self.prefix_hit_last = hit
        self.prefix_hit_max = hit if self.prefix_hit_max is None else max(self.prefix_hit_max, hit)


@dataclass
class PreemptionSummary:
    """V0 preemption warnings: the highest cumulative count printed, the mode, evidence."""

    warnings: int = 0
    max_cumulative: int = 0
    modes: Set[str] = field(default_factory=set)
    first: Optional[Record] = None
    last: Optional[Record] = None

    def add(self, ev: Event) -> None:
        self.warnings += 1
        self.modes.add(ev.data.get("mode", "RECOMPUTE"))
        self.max_cumulative = max(self.max_cumulative, ev.data.get("cumulative", 0))
        if self.first is None:
            self.first = ev.record
        self.last = ev.record


@dataclass
class _Stream:
    frames: Deque[Tuple[str, str, Set[str]]] = field(default_factory=lambda: deque(maxlen=MAX_FRAMES))
    records: Deque[Record] = field(default_factory=lambda: deque(maxlen=4))
    open: bool = False
    chained: bool = False
    last_failure: Optional[Failure] = None

    def tags(self) -> Set[str]:
        out: Set[str] = set()
        for _, _, t in self.frames:
            out |= t
        return out


@dataclass
class Run:
    """One server start within a source, and everything the log showed about it."""

    source: str
    index: int
    start_line: int
    end_line: int = 0
    phase: Phase = Phase.NONE
    phase_records: Dict[str, Record] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)
    config_records: Dict[str, Record] = field(default_factory=dict)
    facts: Dict[str, Any] = field(default_factory=dict)
    fact_records: Dict[str, Record] = field(default_factory=dict)
    failures: List[Failure] = field(default_factory=list)
    dropped_failures: int = 0
    consequences: List[Event] = field(default_factory=list)
    stats: StatsSummary = field(default_factory=StatsSummary)
    preemption: PreemptionSummary = field(default_factory=PreemptionSummary)
    access_status: Dict[str, int] = field(default_factory=dict)
    vllm_pids: Set[int] = field(default_factory=set)
    engine_hints: Set[str] = field(default_factory=set)
    start_patterns: Set[Tuple[str, str]] = field(default_factory=set)
    recognised: int = 0
    records: int = 0

    # -- helpers used by the diagnoses ------------------------------------------------
    @property
    def engine(self) -> Optional[str]:
        if "v1" in self.engine_hints:
            return "v1"
        if "v0" in self.engine_hints:
            return "v0"
        return None

    def value(self, key: str) -> Any:
        """A configuration value or startup fact, configuration first."""
        if key in self.config:
            return self.config[key]
        return self.facts.get(key)

    def record_for(self, key: str) -> Optional[Record]:
        return self.config_records.get(key) or self.fact_records.get(key)

    def reached(self, phase: Phase, rec: Record) -> None:
        if phase > self.phase:
            self.phase = phase
        self.phase_records.setdefault(phase.label, rec)


class SourceTracker:
    """Consumes the records of one source, in order; holds its runs.

    ``feed(record, events)`` updates the current run; ``finish()`` closes the input
    (tracebacks still open become failures). ``runs`` lists the runs, oldest first;
    only the newest :data:`MAX_RUNS` are kept, ``dropped_runs`` counts the others.
    """

    MAX_RUNS = 64

    def __init__(self, source: str) -> None:
        self.source = source
        self.runs: List[Run] = []
        self.dropped_runs = 0
        self.seq = 0
        self.streams: "OrderedDict[str, _Stream]" = OrderedDict()
        self.records = 0
        self.recognised = 0
        self.vllm_seen = False
        self._new_run(1)

    # -- runs ---------------------------------------------------------------------------
    @property
    def run(self) -> Run:
        return self.runs[-1]

    def _new_run(self, line: int) -> Run:
        if self.runs:
            self._close_streams()  # what the old run left open belongs to the old run
        index = (self.runs[-1].index + 1) if self.runs else 1
        run = Run(source=self.source, index=index, start_line=line, end_line=line)
        self.runs.append(run)
        if len(self.runs) > self.MAX_RUNS:
            self.runs.pop(0)
            self.dropped_runs += 1
        return run

    # -- streams (tracebacks per process) ------------------------------------------------
    def _stream(self, key: str) -> _Stream:
        st = self.streams.get(key)
        if st is None:
            st = self.streams[key] = _Stream()
            if len(self.streams) > MAX_STREAMS:
                old_key, old = self.streams.popitem(last=False)
                self._end_traceback(old)
        else:
            self.streams.move_to_end(key)
        return st

    def _end_traceback(self, st: _Stream) -> None:
        """A traceback whose exception line never came: keep it as a 'traceback' failure."""
        if st.open and st.frames and st.records:
            tags = st.tags()
            rec = st.records[0]
            f = self._add_failure("traceback", {"frames": [fn for fn, _, _ in st.frames][-12:]}, rec, st, tags)
            for r in list(st.records)[1:]:
                f.add_record(r)
        st.open = False
        st.frames.clear()
        st.records.clear()

    def _close_streams(self) -> None:
        for st in self.streams.values():
            self._end_traceback(st)
            st.last_failure = None
            st.chained = False

    # -- failures -----------------------------------------------------------------------
    def _add_failure(
        self, kind: str, data: Dict[str, Any], rec: Record, st: Optional[_Stream], tags: Set[str]
    ) -> Failure:
        run = self.run
        self.seq += 1
        text = rec.text.strip()
        # The same message again (every TP rank, re-raised by the engine): count it once.
        for f in run.failures:
            if f.kind == kind and text in f.texts:
                f.repeats += rec.repeated
                f.tags |= tags
                f.add_record(rec)
                f.last_seq = self.seq
                return f
        # Memory messages that belong together (torch OOM + the sampler/loader wrapper): from
        # the same process (or an unprefixed line), close together, and not two full OOM
        # messages (those are two failures, e.g. two ranks on two GPUs).
        if kind in MEMORY_KINDS:
            for f in reversed(run.failures):
                same_process = f.stream == rec.stream or "-" in (f.stream, rec.stream)
                two_full_ooms = kind == "oom" and bool(data.get("gpu_total_gib")) and bool(f.data.get("gpu_total_gib"))
                if (
                    f.kinds & MEMORY_KINDS
                    and self.seq - f.last_seq <= MERGE_WINDOW
                    and same_process
                    and not two_full_ooms
                ):
                    for k, v in data.items():
                        f.data.setdefault(k, v)
                    f.kinds.add(kind)
                    f.tags |= tags
                    f.add_text(text)
                    f.add_record(rec)
                    f.repeats = max(f.repeats, rec.repeated)
                    f.last_seq = self.seq
                    return f
        f = Failure(
            kind=kind,
            data=dict(data),
            records=[rec],
            stream=rec.stream,
            phase_at=run.phase,
            seq=self.seq,
            last_seq=self.seq,
            tags=set(tags),
            kinds={kind},
            repeats=rec.repeated,
        )
        f.texts.add(text)
        if len(run.failures) < MAX_FAILURES:
            run.failures.append(f)
        else:
            run.dropped_failures += 1
        return f

    # -- the main entry -----------------------------------------------------------------
    def feed(self, rec: Record, events: List[Event], code_line_tags: Optional[Set[str]] = None) -> None:
        """Update the state with one record and the events recognised in it.

        Invariant the block pre-filter (:mod:`vllm_doctor.prefilter`) relies on: a record
        with no event changes nothing but counters, unless it is a traceback source line
        naming a function of :data:`vllm_doctor.frames.TAG_FUNCS` (those names are
        pre-filter literals too). ``code_line_tags`` may be passed in when the caller
        already computed them. So skipping records without anchors gives the same state.
        """
        self.records += 1
        if code_line_tags is None and not events and rec.text[:1].isspace():
            code_line_tags = code_tags(rec.text)  # not computed by the caller
        if not events and not code_line_tags:
            self.run.records += 1
            return
        run = self.run
        # A start marker opens a new run once the current one got past its configuration.
        for ev in events:
            if ev.pattern in START_PATTERNS:
                key = (ev.pattern, rec.stream)
                if run.phase >= Phase.LOADING_WEIGHTS or key in run.start_patterns:
                    run = self._new_run(rec.lineno)
                if len(run.start_patterns) < MAX_STREAMS:
                    run.start_patterns.add(key)
                break
        run.records += 1
        run.end_line = max(run.end_line, rec.lineno)
        vllm_proc = rec.proc is not None and rec.proc.startswith(VLLM_PROCESS_NAMES)
        vllmish = rec.vllm_header or vllm_proc or any(ev.kind not in GENERIC_KINDS for ev in events)
        if rec.pid is not None and vllm_proc and len(run.vllm_pids) < MAX_PIDS:
            run.vllm_pids.add(rec.pid)
        if rec.unit and rec.pids and len(run.vllm_pids) < MAX_PIDS:
            run.vllm_pids.add(rec.pids[0])
        if rec.proc:
            if rec.proc.startswith(("EngineCore", "APIServer", "ApiServer", "Worker_TP")) or (
                rec.rank is not None and rec.proc.startswith("VllmWorker")
            ):
                run.engine_hints.add("v1")
            elif rec.proc == "VllmWorkerProcess":
                run.engine_hints.add("v0")

        st = self._stream(rec.stream)
        kinds = {ev.kind for ev in events}
        # Traceback bookkeeping (frames belong to the process that printed them).
        if "tb_start" in kinds:
            self._end_traceback(st)
            st.open = True
        elif "tb_chain" in kinds:
            self._end_traceback(st)
            st.chained = True
        elif "tb_frame" in kinds:
            ev = next(e for e in events if e.kind == "tb_frame")
            tags = frame_tags(ev.data["func"], ev.data["path"])
            if "/vllm/" in ev.data["path"]:
                vllmish = True
                if "/vllm/v1/" in ev.data["path"]:
                    run.engine_hints.add("v1")
                elif "/vllm/engine/" in ev.data["path"] or "/vllm/worker/worker.py" in ev.data["path"]:
                    run.engine_hints.add("v0")
            st.open = True
            st.frames.append((ev.data["func"], ev.data["path"], tags))
            if len(st.records) < st.records.maxlen:
                st.records.append(rec)
            if st.chained and st.last_failure is not None:
                st.last_failure.context_tags |= tags
        elif code_line_tags:
            # A source line printed under a frame (or the tail of one cut from the paste).
            st.frames.append(("<code>", "", code_line_tags))
            st.open = True
            if len(st.records) < st.records.maxlen:
                st.records.append(rec)
            if st.chained and st.last_failure is not None:
                st.last_failure.context_tags |= code_line_tags
        elif st.open and events and not kinds & (FAILURE_KINDS | {"engine_dead"}):
            self._end_traceback(st)

        if events:
            self.recognised += 1
            run.recognised += 1
        if vllmish:
            self.vllm_seen = True

        failure_made = False
        for ev in events:
            k = ev.kind
            if ev.phase is not None:
                run.reached(ev.phase, rec)
            if k in ("config", "run_start"):
                self._set_config(run, ev)
            elif k == "facts":
                self._set_facts(run, ev)
                # A KV budget of zero or less is itself the failure, whether or not the
                # ValueError that follows made it into the log.
                if (ev.data.get("kv_available_gib", 1) <= 0 or ev.data.get("gpu_blocks", 1) == 0) and not failure_made:
                    self._add_failure("kv_error", dict(ev.data, variant="no_budget"), rec, st, st.tags())
                    failure_made = True
            elif k == "stats":
                run.stats.add(ev)
                run.reached(Phase.SERVING, rec)
                run.engine_hints.add(ev.data.get("engine", ""))
            elif k == "prefix_hit":
                run.stats.add_prefix_hit(ev.data["prefix_hit_pct"])
            elif k == "preemption":
                run.preemption.add(ev)
                run.engine_hints.add("v0")
                run.reached(Phase.SERVING, rec)
            elif k == "access":
                status = str(ev.data.get("status", ""))
                if status:
                    bucket = status[0] + "xx"
                    run.access_status[bucket] = run.access_status.get(bucket, 0) + 1
                    if ev.data.get("path", "").startswith(("/v1/", "/generate", "/worker_generate", "/openai/")):
                        run.reached(Phase.SERVING, rec)
            elif k == "engine_dead":
                if len(run.consequences) < MAX_CONSEQUENCES:
                    run.consequences.append(ev)
            elif k in FAILURE_KINDS and not failure_made:
                if k == "exception" and self._is_consequence(ev):
                    if len(run.consequences) < MAX_CONSEQUENCES:
                        run.consequences.append(ev)
                    # The traceback it ends reports a failure elsewhere: it is no failure itself.
                    st.open = False
                    st.frames.clear()
                    st.records.clear()
                    continue
                if ev.data.get("warning_only"):
                    continue
                tags = st.tags()
                # Error messages print configuration too (the utilization a startup check
                # used, the max_model_len a length check used): keep it with the run.
                for key in CONFIG_IN_ERRORS:
                    if key in ev.data and key not in run.config:
                        run.config[key] = ev.data[key]
                        run.config_records[key] = rec
                f = self._add_failure(k, ev.data, rec, st, tags)
                exc = next((e.data["exception"] for e in events if e.kind == "exception"), None)
                if exc and not f.exception:
                    f.exception = exc
                if k == "exception" and not f.exception:
                    f.exception = ev.data.get("exception")
                st.last_failure = f
                st.chained = False
                st.open = False
                st.frames.clear()
                st.records.clear()
                failure_made = True

    @staticmethod
    def _is_consequence(ev: Event) -> bool:
        name = ev.data.get("exception", "").rsplit(".", 1)[-1]
        if name in CONSEQUENCE_EXCEPTIONS:
            return True
        msg = ev.data.get("message", "")
        return any(m in msg for m in CONSEQUENCE_MESSAGES)

    def _set_config(self, run: Run, ev: Event) -> None:
        for key, val in ev.data.items():
            if key == "vllm_version":
                run.facts.setdefault("vllm_version", val)
                run.fact_records.setdefault("vllm_version", ev.record)
            elif key == "engine":
                run.engine_hints.add(val)
            elif key not in run.config:
                run.config[key] = val
                run.config_records[key] = ev.record

    def _set_facts(self, run: Run, ev: Event) -> None:
        for key, val in ev.data.items():
            if key == "concurrency_tokens":
                # "Maximum concurrency for N tokens per request": N is the run's max_model_len.
                if "max_model_len" not in run.config:
                    run.config["max_model_len"] = val
                    run.config_records["max_model_len"] = ev.record
                continue
            if key == "gpu_memory_utilization":
                if key not in run.config:
                    run.config[key] = val
                    run.config_records[key] = ev.record
                continue
            old = run.facts.get(key)
            # TP ranks each print their KV sizing: the smallest is what the engine can use.
            if key in ("kv_tokens", "max_concurrency", "gpu_blocks", "kv_available_gib") and old is not None:
                if val < old:
                    run.facts[key] = val
                    run.fact_records[key] = ev.record
                continue
            if old is None:
                run.facts[key] = val
                run.fact_records[key] = ev.record

    def finish(self) -> None:
        """End of input: open tracebacks become failures."""
        self._close_streams()
