"""The run view: what the log said about one server start, each value with the line that said it.

A source (one file, stdin, one pod) holds one or more server starts; each is a :class:`Run`.
The tracker (:mod:`vllm_doctor.tracker`) fills runs as records stream by; the rules
(:mod:`vllm_doctor.rules`) read them when the input ends (or, in follow mode, whenever it
goes quiet). Nothing here judges: there are no thresholds in this module. Everything is
bounded: lists are capped, series are summarised as they stream by, and the lines kept as
evidence are :class:`Line` copies clipped to :data:`MAX_LINE_CHARS`.

Stats judgements that need every interval (a sustained saturation episode, a backlog) cannot
be made from maxima alone, and the whole series cannot be kept. So a rule may declare a
*stats observer*: an object with ``add(sample)`` that the tracker feeds every
:class:`StatsSample` of the run, in order. The observer belongs to the rule and holds its
thresholds; the tracker only feeds it (see :attr:`StatsSeries.observers`).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Deque, Dict, List, Optional, Set, Tuple

from .events import Phase
from .record import Record

#: Characters of a line kept as evidence: the longest real vLLM message (a torch OOM naming
#: a dozen processes, a config line) fits; a 64 KiB paste does not stay in memory.
MAX_LINE_CHARS = 4096
#: Stats samples kept verbatim at the end of a run (the last intervals: a wedge, a stall).
RECENT_SAMPLES = 16
#: Points of the whole-run stats series kept for a sparkline (merged pairwise when full).
SERIES_POINTS = 256


@dataclass(frozen=True)
class Line:
    """An evidence-grade copy of a :class:`~vllm_doctor.record.Record`.

    ``source`` and 1-based ``lineno`` locate it; ``text`` is the message clipped to
    :data:`MAX_LINE_CHARS`; ``time`` is vLLM's ``MM-DD HH:MM:SS`` (no year) when printed;
    ``proc``/``pid``/``rank`` name the process prefix; ``stream`` keys the process (see
    :attr:`Record.stream`); ``repeated`` is Ray's ``[repeated Nx]`` count; ``level`` and ``file`` are
    vLLM's record prefix (``ERROR``, ``core.py``) where printed. A line that stands for a
    metrics scrape instead of a log line has ``lineno`` = the scrape's number (1-based),
    ``time`` = its ISO time and ``metric`` = what it read (see the field).
    """

    source: str
    lineno: int
    text: str
    time: Optional[str] = None
    proc: Optional[str] = None
    pid: Optional[int] = None
    rank: Optional[int] = None
    stream: str = "-"
    repeated: int = 1
    host: Optional[str] = None
    unit: Optional[str] = None
    level: Optional[str] = None
    file: Optional[str] = None
    #: For a metrics sample (no log line): the series it reads (field -> metric name), their
    #: labels, the interval's start and end (ISO 8601, UTC) and where the scrape came from.
    metric: Optional[Dict[str, Any]] = None

    @classmethod
    def of(cls, rec: Record) -> "Line":
        return cls(
            source=rec.source,
            lineno=rec.lineno,
            text=rec.text[:MAX_LINE_CHARS],
            time=rec.time,
            proc=rec.proc,
            pid=rec.pid,
            rank=rec.rank,
            stream=rec.stream,
            repeated=rec.repeated,
            host=rec.host,
            unit=rec.unit,
            level=rec.level,
            file=rec.file,
        )


@dataclass
class Failure:
    """One root-cause candidate: an error message with what surrounds it.

    ``kind`` is the event kind that opened it (``oom``, ``kv_error``, ``exception`` ..., or
    ``traceback`` for frames whose exception line is not in the log) and ``kinds`` every kind
    merged into it (a torch OOM and vLLM's sampler wrapper of it are one failure); ``data``
    the values recognised (merged over its messages, first value wins); ``pattern`` the
    catalog pattern names seen; ``tags`` what its own traceback frames say, ``context_tags``
    what a chained traceback printed after it says (:mod:`vllm_doctor.frames`);
    ``phase_at`` the run's phase when it was seen; ``lines`` bounded evidence; ``repeats`` how
    often the same message was printed (TP ranks, re-raises); ``seq``/``last_seq`` its order
    among the run's failures; ``served_after`` the first line after its last occurrence that
    shows the server still serving (a stats line, a preemption: tracker.shows_service), None when nothing after it does: a request error the server survived has one.
    """

    kind: str
    data: Dict[str, Any]
    lines: List[Line]
    stream: str
    phase_at: Phase
    seq: int
    tags: Set[str] = field(default_factory=set)
    context_tags: Set[str] = field(default_factory=set)
    kinds: Set[str] = field(default_factory=set)
    patterns: Set[str] = field(default_factory=set)
    exception: Optional[str] = None
    repeats: int = 1
    last_seq: int = 0
    text_hashes: Set[int] = field(default_factory=set)
    served_after: Optional[Line] = None

    MAX_LINES = 8
    MAX_TEXTS = 64

    def add_line(self, line: Line) -> None:
        if len(self.lines) < self.MAX_LINES and all(x.lineno != line.lineno or x.text != line.text for x in self.lines):
            self.lines.append(line)

    def add_text(self, text: str) -> None:
        if len(self.text_hashes) < self.MAX_TEXTS:  # bounded: a log may repeat one failure forever
            self.text_hashes.add(hash(text))

    def has_text(self, text: str) -> bool:
        return hash(text) in self.text_hashes

    @property
    def all_tags(self) -> Set[str]:
        return self.tags | self.context_tags


@dataclass(frozen=True)
class Consequence:
    """A marker that reports a failure elsewhere ("Engine core initialization failed. See root
    cause above", ``EngineDeadError`` ...): ``marker`` names it, ``phase_hint`` is
    ``startup`` / ``runtime`` where the message itself says which, ``who`` the process it names."""

    line: Line
    marker: str
    phase_hint: Optional[str] = None
    who: Optional[str] = None
    exception: Optional[str] = None
    method: Optional[str] = None  # the method a worker was running when it failed (load_model ...)


@dataclass(frozen=True)
class StatsSample:
    """One periodic stats line: counts of requests, KV cache usage (%), throughputs (tokens/s).

    V0 prints ``Pending`` for what V1 calls ``Waiting`` (both are ``waiting``); ``swapped``
    is V0 only; ``preemptions`` is V1's per-interval field where printed; ``engine_index``
    is V1's ``Engine 000`` (0 when not printed).
    """

    line: Line
    engine_index: int = 0
    running: int = 0
    waiting: int = 0
    swapped: Optional[int] = None
    preemptions: int = 0
    kv_usage_pct: Optional[float] = None
    generation_tps: Optional[float] = None
    prompt_tps: Optional[float] = None
    prefix_hit_pct: Optional[float] = None


@dataclass
class SeriesPoint:
    """One point of the downsampled whole-run series: maxima over the intervals it covers."""

    first_lineno: int
    time: Optional[str]
    intervals: int
    kv_usage_pct: Optional[float]
    running: int
    waiting: int
    generation_tps: Optional[float]


@dataclass
class StatsSeries:
    """The stats lines of one run: maxima with the line that printed them, the last few samples,
    a bounded whole-run series for pictures, and the rules' observers (fed every sample)."""

    count: int = 0
    engine: Optional[str] = None
    first: Optional[Line] = None
    last: Optional[Line] = None
    peak_kv_usage_pct: Optional[float] = None
    peak_line: Optional[Line] = None
    max_running: Optional[int] = None
    max_waiting: Optional[int] = None
    max_waiting_line: Optional[Line] = None
    max_swapped: Optional[int] = None
    max_generation_tps: Optional[float] = None
    preemptions_total: int = 0
    intervals_with_preemptions: int = 0
    prefix_hit_first: Optional[float] = None
    prefix_hit_last: Optional[float] = None
    prefix_hit_max: Optional[float] = None
    recent: Deque[StatsSample] = field(default_factory=lambda: deque(maxlen=RECENT_SAMPLES))
    series: List[SeriesPoint] = field(default_factory=list)
    series_stride: int = 1
    observers: Dict[str, Any] = field(default_factory=dict)
    records_after_last: int = 0  # recognised records of the run after the last stats line
    access_after_last: int = 0  # HTTP error access lines after it (the API server still answers)
    lines_after_last: int = 0  # physical lines of the run after it, recognised or not (set at the end)

    def add(self, s: StatsSample, engine: Optional[str]) -> None:
        self.count += 1
        self.engine = self.engine or engine
        if self.first is None:
            self.first = s.line
        self.last = s.line
        self.records_after_last = 0
        self.access_after_last = 0
        self.lines_after_last = 0
        kv = s.kv_usage_pct
        if kv is not None and (self.peak_kv_usage_pct is None or kv > self.peak_kv_usage_pct):
            self.peak_kv_usage_pct, self.peak_line = kv, s.line
        self.max_running = max(self.max_running or 0, s.running)
        if self.max_waiting is None or s.waiting > self.max_waiting:
            self.max_waiting, self.max_waiting_line = s.waiting, s.line
        if s.swapped is not None:
            self.max_swapped = max(self.max_swapped or 0, s.swapped)
        if s.generation_tps is not None:
            self.max_generation_tps = max(self.max_generation_tps or 0.0, s.generation_tps)
        if s.preemptions:
            self.preemptions_total += s.preemptions
            self.intervals_with_preemptions += 1
        if s.prefix_hit_pct is not None:
            self.add_prefix_hit(s.prefix_hit_pct)
        self.recent.append(s)
        self._add_point(s)
        for obs in self.observers.values():
            obs.add(s)

    def add_prefix_hit(self, hit: float) -> None:
        if self.prefix_hit_first is None:
            self.prefix_hit_first = hit
        self.prefix_hit_last = hit
        self.prefix_hit_max = hit if self.prefix_hit_max is None else max(self.prefix_hit_max, hit)

    def _add_point(self, s: StatsSample) -> None:
        last = self.series[-1] if self.series else None
        if last is not None and last.intervals < self.series_stride:
            _merge_into(last, s.kv_usage_pct, s.running, s.waiting, s.generation_tps, 1)
            return
        self.series.append(
            SeriesPoint(s.line.lineno, s.line.time, 1, s.kv_usage_pct, s.running, s.waiting, s.generation_tps)
        )
        if len(self.series) > SERIES_POINTS:
            merged = []
            for i in range(0, len(self.series) - 1, 2):
                a, b = self.series[i], self.series[i + 1]
                _merge_into(a, b.kv_usage_pct, b.running, b.waiting, b.generation_tps, b.intervals)
                merged.append(a)
            if len(self.series) % 2:
                merged.append(self.series[-1])
            self.series = merged
            self.series_stride *= 2


def _max(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _merge_into(p: SeriesPoint, kv, running, waiting, gen, intervals) -> None:
    p.kv_usage_pct = _max(p.kv_usage_pct, kv)
    p.running = max(p.running, running)
    p.waiting = max(p.waiting, waiting)
    p.generation_tps = _max(p.generation_tps, gen)
    p.intervals += intervals


#: Processes whose V0 preemption counts are kept apart (more are in the totals only).
MAX_PREEMPTING = 64


@dataclass
class PreemptionSummary:
    """V0 preemption warnings (printed for the 1st, 51st, 101st ... preemption of each engine):
    how many warnings, the highest cumulative count printed, the modes, the first and last line,
    the highest count per printing process (several engines of one job: an RL trainer's
    rollout workers, each its own scheduler) and Ray's folded repeats."""

    warnings: int = 0
    max_cumulative: int = 0
    modes: Set[str] = field(default_factory=set)
    first: Optional[Line] = None
    last: Optional[Line] = None
    #: Each count is the printing engine's own (one scheduler per engine): the highest count
    #: per process (keyed by :func:`process_label`, at most :data:`MAX_PREEMPTING`), and the
    #: messages the lines stand for (Ray folds N alike into one ``[repeated Nx across cluster]``).
    by_process: Dict[str, int] = field(default_factory=dict)
    messages: int = 0

    def add(self, mode: str, cumulative: int, line: Line) -> None:
        self.warnings += 1
        self.modes.add(mode)
        self.max_cumulative = max(self.max_cumulative, cumulative)
        if self.first is None:
            self.first = line
        self.last = line
        self.messages += line.repeated
        if line.stream != "-":
            who = process_label(line)
            if who in self.by_process or len(self.by_process) < MAX_PREEMPTING:
                self.by_process[who] = max(self.by_process.get(who, 0), cumulative)


@dataclass
class HttpSummary:
    """Error responses in the access log: a count per status class (``4xx``, ``5xx``) and per
    status, the first and last 5xx line."""

    by_bucket: Dict[str, int] = field(default_factory=dict)
    by_status: Dict[int, int] = field(default_factory=dict)
    first_5xx: Optional[Line] = None
    last_5xx: Optional[Line] = None

    MAX_STATUSES = 32

    def add(self, status: int, line: Line) -> None:
        bucket = f"{status // 100}xx"
        self.by_bucket[bucket] = self.by_bucket.get(bucket, 0) + 1
        if status in self.by_status or len(self.by_status) < self.MAX_STATUSES:
            self.by_status[status] = self.by_status.get(status, 0) + 1
        if status >= 500:
            if self.first_5xx is None:
                self.first_5xx = line
            self.last_5xx = line


#: Processes (or ranks) a stall signal counts apart; more are counted in the total only.
MAX_STALL_STREAMS = 64


def process_label(line: Line) -> str:
    """The process a line came from, as an operator finds it: ``EngineCore_DP0 pid 1454``,
    ``rank 3``, or the stream key (``-`` for a line with no process prefix)."""
    if line.proc:
        return f"{line.proc} pid {line.pid}" if line.pid is not None else line.proc
    if line.rank is not None:
        return f"rank {line.rank}"
    if line.pid is not None:
        return f"pid {line.pid}"
    return line.stream


@dataclass
class StallSignal:
    """The messages of one no-progress signal in a run (``signal`` of a ``stall`` event, see
    ``catalog/stalls.py``): how many (Ray's ``[repeated Nx]`` counted), the first and last
    line, the first message's values (``data``), how many per process (``by_stream``, keyed
    by :func:`process_label`, at most :data:`MAX_STALL_STREAMS`) and, for collective timeouts, the lowest sequence number
    each rank timed out at (``seq_by_rank``)."""

    count: int = 0
    first: Optional[Line] = None
    last: Optional[Line] = None
    data: Dict[str, Any] = field(default_factory=dict)
    by_stream: Dict[str, int] = field(default_factory=dict)
    seq_by_rank: Dict[int, int] = field(default_factory=dict)

    def add(self, data: Dict[str, Any], line: Line) -> None:
        self.count += line.repeated
        if self.first is None:
            self.first = line
            self.data = dict(data)
        self.last = line
        who = process_label(line)
        if who in self.by_stream or len(self.by_stream) < MAX_STALL_STREAMS:
            self.by_stream[who] = self.by_stream.get(who, 0) + line.repeated
        rank, seq = data.get("rank", line.rank), data.get("seq")
        if isinstance(rank, int) and isinstance(seq, int):
            if rank in self.seq_by_rank or len(self.seq_by_rank) < MAX_STALL_STREAMS:
                self.seq_by_rank[rank] = min(seq, self.seq_by_rank.get(rank, seq))


@dataclass
class WaitEpisode:
    """Wait warnings that repeat while one wait lasts (``repeats`` signals: shm_broadcast),
    with nothing between them that shows progress: how many (``warnings``), per process
    (``by_stream``, keyed by :func:`process_label`), the first and last line, the phase the run had reached at the first, the
    first warning's values, and the line that showed progress after them (``resolved_by``,
    None while the wait goes on)."""

    warnings: int
    first: Line
    last: Line
    phase_at: Phase
    data: Dict[str, Any] = field(default_factory=dict)
    by_stream: Dict[str, int] = field(default_factory=dict)
    resolved_by: Optional[Line] = None

    @property
    def most_from_one_process(self) -> int:
        """The most warnings one process printed in the episode (each is one more interval of
        the same wait, or of back-to-back waits with no progress between them)."""
        return max(self.by_stream.values(), default=self.warnings)


@dataclass
class UnfinishedClaim:
    """An engine's word that it holds unfinished requests (V1 0.8.4's ``EngineCore loop
    active - local unfinished: True``, catalog/stalls.py) and what the stats said since:
    ``idle_intervals``, the stats lines (of any engine) at 0 running, 0 waiting and 0
    tokens/s."""

    line: Line
    engine_index: int
    idle_intervals: int = 0


def engine_index_of(line: Line) -> int:
    """The data-parallel engine a line's process prefix names (``EngineCore_1``,
    ``EngineCore_DP1`` -> 1), 0 without one (V1 prints ``Engine 000`` for the only engine)."""
    m = re.search(r"EngineCore_(?:DP)?(\d{1,4})$", line.proc or "")
    return int(m[1]) if m else 0


@dataclass
class StallLog:
    """What the run's no-progress messages said: one :class:`StallSignal` per signal, the
    current :class:`WaitEpisode` (``episode``: repeated wait warnings since the last progress)
    and the longest one that ended in progress (``longest_resolved``). Bounded: the signals
    are the catalog's few, the episodes two."""

    signals: Dict[str, StallSignal] = field(default_factory=dict)
    episode: Optional[WaitEpisode] = None
    longest_resolved: Optional[WaitEpisode] = None
    #: open :class:`UnfinishedClaim` by engine index (at most :data:`MAX_STALL_STREAMS`)
    unfinished: Dict[int, UnfinishedClaim] = field(default_factory=dict)

    def add(self, data: Dict[str, Any], line: Line, phase: Phase) -> None:
        name = str(data.get("signal", "stall"))
        self.signals.setdefault(name, StallSignal()).add(data, line)
        if "local_unfinished" in data:
            index = engine_index_of(line)
            self.unfinished.pop(index, None)
            if data["local_unfinished"] and len(self.unfinished) < MAX_STALL_STREAMS:
                self.unfinished[index] = UnfinishedClaim(line, index)
        if not data.get("repeats"):
            return
        ep = self.episode
        if ep is None:
            ep = self.episode = WaitEpisode(0, line, line, phase, dict(data))
        ep.warnings += line.repeated
        ep.last = line
        who = process_label(line)
        if who in ep.by_stream or len(ep.by_stream) < MAX_STALL_STREAMS:
            ep.by_stream[who] = ep.by_stream.get(who, 0) + line.repeated

    def stats(self, sample: StatsSample) -> None:
        """A stats line of any engine: one more idle interval for every open claim (0
        running, 0 waiting, no tokens processed), or every claim is settled when it shows
        work. With data parallelism every engine steps while any holds unfinished requests
        (0.8.4 ``core.py`` ``global_unfinished_reqs``), so any engine's work settles them."""
        if sample.running or sample.waiting or sample.prompt_tps or sample.generation_tps:
            self.unfinished.clear()
        elif sample.generation_tps is not None:  # a first metrics scrape has no rates yet
            for claim in self.unfinished.values():
                claim.idle_intervals += 1

    def progress(self, line: Line) -> None:
        """Something after the wait warnings shows the engine moving: the episode ends."""
        ep = self.episode
        if ep is None:
            return
        ep.resolved_by = line
        best = self.longest_resolved
        if best is None or ep.most_from_one_process > best.most_from_one_process:
            self.longest_resolved = ep
        self.episode = None


@dataclass(frozen=True)
class Neighbour:
    """Another run of the same source that was up when a run started: another vLLM instance
    in the paste (two ``vllm serve`` on one device), as the log shows it. ``index`` is its run
    number, ``process`` its engine process (``EngineCore_DP0 pid 3052``, None when unnamed),
    ``phase`` how far its startup got, ``overlapped`` True when it printed lines after this
    run's first (the startups interleaved), and the figures it printed (GiB, tokens); None
    where not printed."""

    index: int
    process: Optional[str]
    phase: Phase
    overlapped: bool
    gpu_memory_utilization: Optional[float] = None
    gpu_total_gib: Optional[float] = None
    kv_available_gib: Optional[float] = None
    kv_tokens: Optional[int] = None
    line: Optional[Line] = None  # its furthest startup line


@dataclass
class Run:
    """One server start within a source, and everything the log showed about it.

    ``config`` holds the run's configuration (``max_model_len``, ``gpu_memory_utilization``
    ...) as vLLM printed it, ``facts`` what startup measured (``kv_tokens``, ``weights_gib``
    ...; memory in GiB), each with the :class:`Line` that said it in ``config_lines`` /
    ``fact_lines``. ``phase`` is the furthest startup phase reached and ``phase_lines`` the
    first line that proved each; ``markers`` notable one-off lines by name (e.g.
    ``stats_logging_disabled``, ``offline_batch``, ``launch_command``: the operator's own
    command is in the log). ``command_keys`` are the config keys only that command gave
    (vLLM's own printout of its arguments replaces them). ``stalls`` is what the no-progress
    messages said (:class:`StallLog`).
    """

    source: str
    index: int
    start_line: int
    end_line: int = 0
    phase: Phase = Phase.NONE
    phase_lines: Dict[Phase, Line] = field(default_factory=dict)
    config: Dict[str, Any] = field(default_factory=dict)
    config_lines: Dict[str, Line] = field(default_factory=dict)
    command_keys: Set[str] = field(default_factory=set)
    #: Environment variables the log shows set for this run (catalog/environment.py): name ->
    #: value as the shell reads it, and the line that set it (the last one, as a shell does).
    env: Dict[str, str] = field(default_factory=dict)
    env_lines: Dict[str, Line] = field(default_factory=dict)
    facts: Dict[str, Any] = field(default_factory=dict)
    fact_lines: Dict[str, Line] = field(default_factory=dict)
    failures: List[Failure] = field(default_factory=list)
    dropped_failures: int = 0
    consequences: List[Consequence] = field(default_factory=list)
    stats: StatsSeries = field(default_factory=StatsSeries)
    preemption: PreemptionSummary = field(default_factory=PreemptionSummary)
    http: HttpSummary = field(default_factory=HttpSummary)
    stalls: StallLog = field(default_factory=StallLog)
    markers: Dict[str, Line] = field(default_factory=dict)
    vllm_pids: Set[int] = field(default_factory=set)
    #: ``(name, rank)`` of each of vLLM's local worker processes that printed (``Worker_TP1``,
    #: ``VllmWorkerProcess``, ``VllmWorker`` with its ``rank=``): what they prove of the world
    #: size is the plan's to say (rules/plan.py).
    worker_procs: Set[Tuple[str, Optional[int]]] = field(default_factory=set)
    #: The RL framework vLLM runs inside, colocated with the model it trains (a process name or
    #: a frame's path: processes.trainer_of), and the first line that showed it.
    trainer: Optional[str] = None
    trainer_line: Optional[Line] = None
    engine_hints: Set[str] = field(default_factory=set)
    #: The engines recognised records' files prove (engines.engine_of_record): used only when no
    #: other hint tells the engine, and kept out of the tracker's state (remedies3).
    record_engine_hints: Set[str] = field(default_factory=set)
    start_patterns: Set[Tuple[str, str]] = field(default_factory=set)
    #: The run's one-per-instance processes: name (with its rank) -> pid (``EngineCore_DP0``
    #: -> 3052); the same name under another pid is another instance (tracker.instance_role).
    roles: Dict[str, int] = field(default_factory=dict)
    #: Names of the processes that printed the run's lines (``StageEngineCoreProc``,
    #: ``DiffusionWorker``, ``Worker_TP1`` ...), at most 64.
    process_names: Set[str] = field(default_factory=set)
    #: Records with vLLM's own record prefix or a process prefix (not quoted bare lines).
    prefixed_records: int = 0
    #: Of those, records that hold only what vLLM prints on import (tracker.IMPORT_PATTERNS:
    #: the platform it detected), which ``collect_env`` or any script importing vllm prints too.
    import_records: int = 0
    #: What opened the run: ``start`` (a startup marker), ``instance`` (a second instance's
    #: process), ``row`` (stats of another row of a Markdown table: another server compared),
    #: None for a source's first run.
    opened_by: Optional[str] = None
    #: The other runs of the source that were up while this one started (set at the end of
    #: the input: :class:`Neighbour`).
    neighbours: List["Neighbour"] = field(default_factory=list)
    recognised: int = 0
    records: int = 0
    #: What the methods sibling workers failed in tell of the phase (frames.TAG_FUNCS tags):
    #: "Exception in worker ... while processing method load_model" puts this run in loading.
    sibling_tags: Set[str] = field(default_factory=set)
    errors_seen: int = 0  # ERROR / CRITICAL records with something recognised in them
    first_error: Optional[Line] = None
    unexplained_errors: int = 0  # vLLM's ERROR / CRITICAL records with nothing recognised
    first_unexplained_error: Optional[Line] = None

    MAX_FAILURES = 32
    MAX_CONSEQUENCES = 16

    @property
    def engine(self) -> Optional[str]:
        """``v1`` or ``v0`` as the log shows it (process names, file paths, stats shape), else None."""
        if "v1" in self.engine_hints:
            return "v1"
        if "v0" in self.engine_hints:
            return "v0"
        if len(self.record_engine_hints) == 1:
            return next(iter(self.record_engine_hints))
        return None

    def value(self, key: str) -> Any:
        """A configuration value or startup fact, configuration first (None when not printed)."""
        if key in self.config:
            return self.config[key]
        return self.facts.get(key)

    def line_for(self, key: str) -> Optional[Line]:
        """The line that printed a configuration value or fact."""
        return self.config_lines.get(key) or self.fact_lines.get(key)

    def reached(self, phase: Phase, line: Line) -> None:
        if phase > self.phase:
            self.phase = phase
        self.phase_lines.setdefault(phase, line)

    def add_failure(self, f: Failure) -> bool:
        """Keep ``f`` if the cap allows (False and counted in ``dropped_failures`` otherwise)."""
        if len(self.failures) < self.MAX_FAILURES:
            self.failures.append(f)
            return True
        self.dropped_failures += 1
        return False

    def add_consequence(self, c: Consequence) -> None:
        if len(self.consequences) < self.MAX_CONSEQUENCES:
            self.consequences.append(c)


def same_value(a: Any, b: Any) -> bool:
    """Two configuration values as vLLM or a command printed them are the same setting:
    numbers by value (``32768`` and ``32768.0``, ``0.95`` and ``"0.95"``), words by their
    case-insensitive text (``FP8`` and ``fp8``), lists as the sets of their items' text."""
    if isinstance(a, (list, tuple, set)) or isinstance(b, (list, tuple, set)):
        items = lambda x: {str(i).strip().lower() for i in (x if isinstance(x, (list, tuple, set)) else [x])}  # noqa: E731
        return items(a) == items(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return str(a).strip().lower() == str(b).strip().lower()
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a).strip().lower() == str(b).strip().lower()
