"""One plan per run: the constraints every remedy of a run shares, and the reconciliation that
keeps the run's findings from contradicting each other.

A remedy is read at 3 a.m. and followed, so three things hold for every remedy of a run:

* **Directions hold.** A "lower" gives a value below the value that ran (printed in the log,
  or vLLM's default for that release and GPU from :mod:`vllm_doctor.defaults`, saying which);
  a "raise" gives one above it and never above what the GPU can give after co-tenants and a
  margin (:meth:`Constraints.utilization_ceiling`); no remedy sets a flag to the value in force.
* **One value per flag.** When two findings of a run set one flag, the more severe finding's
  value is the plan; the other finding points to it instead of naming a second value.
* **Nothing a finding forbids.** When a finding says raising (or lowering) a setting does not
  help, no other finding of the run advises it; it says which finding comes first and why.

:class:`Constraints` gives the rules what they need to build such remedies (:meth:`lower`,
:meth:`raise_to`); :func:`reconcile` enforces the three rules on what they built, as the
last step of judging a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import regex

from .. import defaults, thresholds
from ..processes import is_worker_process
from ..run import Line, Run
from ..verdict import Finding, Remedy
from .oom import co_tenants_of, held_unlisted
from .rule import not_printed, read_from

#: Settings a raise worked out from vLLM's default (the log does not print the value in force)
#: gives no flag for, only a number the action makes conditional: operators often run them above
#: the default (0.95 to chase KV space; a larger token budget), so the default-based target
#: may be below what runs (fresh20 item 3). tensor_parallel_size has its own guard
#: (:meth:`Constraints._tp_unsafe`: what the log proves of the world size); max_num_seqs is
#: raised only where as many requests ran as its default allows (VD302: the cap shows).
SAID_IF_ASSUMED = ("gpu_memory_utilization", "max_num_batched_tokens")

#: The tensor-parallel rank in a V1 worker's name (``Worker_TP1``, ``Worker_PP0_TP3_EP3``).
_TP_NAME = regex.compile(r"_TP(?P<tp>[0-9]{1,4})(?![0-9])")

#: A device list set before the launch command (``CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve``;
#: ROCm's HIP_VISIBLE_DEVICES, Ascend's ASCEND_RT_VISIBLE_DEVICES).
_VISIBLE = regex.compile(
    r"(?<![\w])(?P<var>CUDA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|ASCEND_RT_VISIBLE_DEVICES)"
    r"=[\"']?(?P<ids>[0-9]{1,3}(?:,[0-9]{1,3}){0,63})(?![\w,])"
)

#: Any spelling of tensor parallelism on a command line (``--tensor-parallel-size``, ``-tp``,
#: ``--tensor_parallel_size``, ``tensor_parallel_size=``).
_TP_WORDS = regex.compile(r"(?i)tensor[-_]parallel|(?<![\w-])-tp\b")

#: A shell line continuation in a command's text (at its end, or where a paste's lines were joined).
_CONTINUED = regex.compile(r"\\(?:\s|$)")

#: Settings whose values are fractions (two decimals), the rest are counts.
FRACTIONS = {"gpu_memory_utilization"}


@dataclass(frozen=True)
class InForce:
    """The value of a setting that ran: ``low``..``high`` (one value when the log prints it),
    ``known`` when the log printed it (``line`` says where), ``why`` one plain phrase with the
    value and where it comes from (``0.85 as printed on line 12``, ``vLLM's default 1, not
    printed in the log``), which remedies' reasons quote inside theirs (so no parentheses of
    its own around the line: the renderers put the reason in parentheses)."""

    setting: str
    low: Optional[float]
    high: Optional[float]
    known: bool
    why: str
    line: Optional[Line] = None

    @property
    def value(self) -> Optional[float]:
        return self.low if self.low == self.high else None


def fraction_in_range(value: Any) -> bool:
    """A fraction setting's value a remedy may print: in (0, 1] (gpu_memory_utilization is a
    share of the whole device: vllm/config/cache.py checks it is in (0, 1])."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1


#: Values that switch a variable on, as the libraries that read them do (NCCL, vLLM's envs.py
#: ``bool(int(...))`` / ``.lower() in ("1", "true")``).
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})
#: Variables read by an exact word, not as a switch: vllm-gaudi's HPU model runner reads
#: ``VLLM_SKIP_WARMUP`` as ``.lower() == "true"`` ("1" does not skip it).
_EXACT = frozenset({"VLLM_SKIP_WARMUP"})
#: NCCL_DEBUG levels at or finer than INFO: each prints the INFO lines (NCCL's docs).
_NCCL_INFO_OR_FINER = frozenset({"info", "trace"})


def env_matches(name: str, wanted: str, value: str) -> bool:
    """Whether environment variable ``name`` at ``value`` already does what ``wanted`` asks:
    equal ignoring case (a switch: any of ``1``/``true``/``yes``/``on``, or of ``0``/``false``/
    ``no``/``off``; :data:`_EXACT` names only their word), NCCL_DEBUG at INFO
    or TRACE for INFO, and an allocator option list (``PYTORCH_CUDA_ALLOC_CONF``, comma
    separated) that holds the wanted option."""
    wanted, value = wanted.strip().lower(), value.strip().lower()
    if name == "NCCL_DEBUG" and wanted == "info":
        return value in _NCCL_INFO_OR_FINER
    if name.endswith("_ALLOC_CONF"):
        return wanted in {v.strip() for v in value.split(",")}
    if name in _EXACT:
        return value == wanted
    return value == wanted or (wanted in _ON and value in _ON) or (wanted in _OFF and value in _OFF)


def env_set(run: Run, name: str, wanted: Optional[str] = None) -> Optional[str]:
    """Where the log shows environment variable ``name`` in force for ``run`` (set to
    ``wanted``, when given, as :func:`env_matches` compares): ``"NAME=VALUE, set on line N"``
    (``"... as NCCL's INFO lines show on line N"`` when a line only implies it), else None.
    A remedy never asks for what the log shows done (catalog/environment.py reads the lines)."""
    value = run.env.get(name)
    if value is None or (wanted is not None and not env_matches(name, wanted, value)):
        return None
    line = run.env_lines.get(name)
    if line is None:
        return f"{name}={value}, set in the log"
    how = "as NCCL's INFO lines show" if "NCCL INFO" in line.text and " set by environment" not in line.text else "set"
    return f"{name}={value}, {how} on line {line.lineno}"


def env_todo(run: Run, assignments: str) -> Tuple[str, List[str]]:
    """Split ``assignments`` (``"AMD_SERIALIZE_KERNEL=3 HIP_LAUNCH_BLOCKING=1"``) into those the
    log does not show in force, joined again (``""`` when none is left), and the
    :func:`env_set` descriptions of those it does."""
    todo, done = [], []
    for pair in assignments.split():
        name, _, wanted = pair.partition("=")
        where = env_set(run, name, wanted)
        if where is None:
            todo.append(pair)
        else:
            done.append(where)
    return " ".join(todo), done


def fmt(setting: str, value: Any) -> str:
    """A value as an operator types it: ``0.85`` for fractions, ``4096`` for counts, words as
    they are (``fp8``)."""
    if isinstance(value, str):
        return value
    return f"{value:.2f}" if setting in FRACTIONS else str(int(value))


class Constraints:
    """What every remedy of one run shares: the GPU's total memory (GiB), the memory other
    processes hold on it, vLLM's version and engine, whether it is an offline ``LLM()`` batch,
    and the value of each setting in force."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.version = run.value("vllm_version")
        self.engine = run.engine
        self.offline = "offline_batch" in run.markers or "offline_llm" in run.markers
        self.gpu_total_gib = self._gpu_total()
        self.held_by_others_gib = self._held_by_others()

    def _gpu_total(self) -> Optional[float]:
        total = self.run.value("gpu_total_gib")
        if total:
            return total
        return next((f.data["gpu_total_gib"] for f in self.run.failures if f.data.get("gpu_total_gib")), None)

    def _held_by_others(self) -> float:
        held = 0.0
        for f in self.run.failures:
            held = max(held, sum(g for _, g in co_tenants_of(f, self.run)), held_unlisted(f, self.run) or 0.0)
            if f.kind == "free_memory" and f.data.get("gpu_total_gib") and f.data.get("gpu_free_gib") is not None:
                held = max(held, f.data["gpu_total_gib"] - f.data["gpu_free_gib"])
        free = self.run.facts.get("gpu_startup_free_gib")
        if free is not None and self.gpu_total_gib:
            held = max(held, self.gpu_total_gib - free)
        return held

    # -- values in force -----------------------------------------------------------------
    def in_force(self, setting: str) -> InForce:
        """The value of ``setting`` that ran (see :class:`InForce`)."""
        value = self.run.value(setting)
        said = "as the launch command sets it" if setting in self.run.command_keys else "as printed"
        if isinstance(value, (str, bool)):
            line = self.run.line_for(setting)
            return InForce(setting, value, value, True, f"{value} {said}", line)
        if value is not None:
            line = self.run.line_for(setting)
            where = f"on line {line.lineno}" if line else f"in {read_from(self.run)}"
            if line is not None and line.metric is not None:  # a metrics scrape gave it, not a log line
                said, where = "as /metrics reports it", f"in scrape {line.lineno}"
            return InForce(setting, value, value, True, f"{fmt(setting, value)} {said} {where}", line)
        stated = self._stated(setting)
        if stated is not None:
            value, line = stated
            where = f"on line {line.lineno}" if line else "in the log"
            return InForce(setting, value, value, True, f"{fmt(setting, value)} as the error prints it {where}", line)
        d = self._default(setting)
        floor = self._at_least(setting)
        if d is None and floor is None:
            return InForce(setting, None, None, False, f"not in {read_from(self.run)}")
        if d is None or (floor is not None and floor > d.high):
            return InForce(setting, floor, floor, False, f"at least {fmt(setting, floor)} ({self._floor_why})")
        low = max(d.low, floor) if floor is not None else d.low
        shown = fmt(setting, low) if low == d.high else f"{fmt(setting, low)}-{fmt(setting, d.high)}"
        whose = d.why.replace("{value}", shown) if "{value}" in d.why else f"{d.why} {shown}"
        return InForce(setting, low, d.high, False, f"{whose}, {not_printed(self.run)}")

    def _stated(self, setting: str) -> Optional[Tuple[float, Optional[Line]]]:
        """The value of ``setting`` an error message prints as the one it checked ("Total
        number of attention heads (32) must be divisible by tensor parallel size (3)",
        "max_num_batched_tokens (2048) is smaller than max_model_len (8192)"): the value
        that ran, when no other line prints it. ``(value, the message's first line)``."""
        for f in self.run.failures:
            v = f.data.get(setting)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return v, f.lines[0] if f.lines else None
        return None

    _floor_why = "the sampler warm-up used that many dummy requests, min(max_num_seqs, max_num_batched_tokens)"

    def _at_least(self, setting: str) -> Optional[float]:
        """A lower bound the log gives for a setting it does not print: the sampler warm-up's
        dummy requests are min(max_num_seqs, max_num_batched_tokens) (gpu_model_runner.py
        _dummy_sampler_run), so both settings are at least that."""
        if setting not in ("max_num_seqs", "max_num_batched_tokens"):
            return None
        counts = [f.data["dummy_requests"] for f in self.run.failures if f.data.get("dummy_requests")]
        return max(counts) if counts else None

    def _default(self, setting: str) -> Optional[defaults.Default]:
        if setting == "gpu_memory_utilization":
            return defaults.gpu_memory_utilization(self.version, self.engine)
        if setting == "max_num_seqs":
            return defaults.max_num_seqs(self.version, self.engine, self.gpu_total_gib)
        if setting == "max_num_batched_tokens":
            return defaults.max_num_batched_tokens(self.version, self.engine, self.gpu_total_gib, self.offline)
        if setting == "tensor_parallel_size":
            tp = self._world_tp()
            low, why = self.tp_at_least()
            if low > tp:
                return defaults.Default(low, low, f"at least {{value}} ({why})")
            return defaults.Default(tp, tp, "{value}, from the world size" if tp > 1 else "vLLM's default")
        if setting == "kv_cache_dtype":
            return None
        if setting == "max_loras":  # vllm/config/lora.py (EngineArgs.max_loras before it): 1 in every release
            return defaults.Default(1, 1, "vLLM's default {value}")
        return None

    def _ranks_at_least(self) -> int:
        """Ranks on this node the log proves: a failure on GPU N printed by a vLLM worker
        process means N + 1 of them (each worker sets cuda:<local rank>: vllm/worker/worker.py,
        vllm/v1/worker/gpu_worker.py init_device; Ray workers see one GPU each, index 0)."""
        idx = [
            f.data["gpu_index"]
            for f in self.run.failures
            if isinstance(f.data.get("gpu_index"), int) and f.lines and is_worker_process(f.lines[0].proc)
        ]
        return max(idx) + 1 if idx else 0

    def tp_at_least(self) -> Tuple[int, str]:
        """The smallest tensor_parallel_size the log proves, and how (0 and "" when nothing
        does): a worker's OOM on GPU N (:meth:`_ranks_at_least`); a worker named ``_TP<n>``
        (vLLM adds ``_TP<rank>`` to a worker's name only when tensor_parallel_size > 1:
        vllm/v1/executor/multiproc_executor.py setup_proc_title_and_log_prefix), so n + 1 and
        at least 2; a ``VllmWorker`` printing ``rank=N`` (world size N + 1); V0's
        ``VllmWorkerProcess`` (started for ranks 1 to world_size - 1, the driver being rank 0:
        vllm/executor/multiproc_gpu_executor.py), so a world of at least 2; V1's multiprocess
        executor (a record or frame of ``v1/executor/multiproc_executor.py``: vllm/config/parallel.py
        picks it for ``world_size > 1``, "uni" for one GPU), a world of at least 2. A world size is
        divided by pipeline_parallel_size, rounding up."""
        pp = self.run.value("pipeline_parallel_size") or 1
        best, why = 0, ""
        ranks = self._ranks_at_least()
        if ranks:
            best, why = -(-ranks // pp), f"the OOM is on GPU {ranks - 1}, and vLLM's workers use cuda:<local rank>"
        for name, rank in sorted(self.run.worker_procs, key=str):
            m = _TP_NAME.search(name)
            if m:
                n, because = max(int(m["tp"]) + 1, 2), f"a worker is named {name}, and vLLM names TP ranks only above 1"
            elif name == "VllmWorkerProcess":
                n, because = -(-2 // pp), "V0 starts VllmWorkerProcess workers only for ranks 1 and up"
            elif name.startswith("VllmWorker") and rank is not None:
                n, because = -(-(rank + 1) // pp), f"a worker of rank {rank} printed"
            else:
                continue
            n = min(n, thresholds.MAX_PROVEN_RANKS)
            if n > best:
                best, why = n, because
        if "multiproc_executor" in self.run.markers and -(-2 // pp) > best:
            best = -(-2 // pp)
            why = "vLLM's multiprocess executor ran, which it starts only for more than one GPU"
        return best, why

    def _world_tp(self) -> int:
        world = self.run.value("world_size")
        pp = self.run.value("pipeline_parallel_size") or 1
        return max(1, int(world // pp)) if world else 1

    def utilization_ceiling(self) -> Tuple[float, str]:
        """The highest gpu_memory_utilization a remedy may advise on this GPU, and why."""
        cap = thresholds.MAX_ADVISED_UTILIZATION
        G, held = self.gpu_total_gib, self.held_by_others_gib
        if G and held > 0:
            free_share = math.floor((G - held) / G * thresholds.FREE_SHARE_TAKEN * 100) / 100
            if free_share < cap:
                return free_share, f"other processes hold {held:.2f} of {G:.2f} GiB"
        return cap, f"{cap} keeps a margin below {thresholds.HIGH_UTILIZATION}"

    # -- remedies ---------------------------------------------------------------------------
    def flag(self, setting: str, value: Any) -> str:
        """The flag as the run takes it: ``--max-num-seqs 128`` (``--enforce-eager`` for a
        switch), or for an offline ``LLM()`` batch the keyword ``LLM(max_num_seqs=128)``."""
        if self.offline:
            shown = repr(value) if isinstance(value, str) else fmt(setting, value)
            return f"LLM({setting}={value if isinstance(value, bool) else shown})"
        if value is True:
            return f"--{setting.replace('_', '-')}"
        if value is False:  # argparse's BooleanOptionalAction spells the off switch --no-NAME
            return f"--no-{setting.replace('_', '-')}"
        return f"--{setting.replace('_', '-')} {fmt(setting, value)}"

    def set_to(self, setting: str, value: Any, action: str, why: Optional[str], direction: str = "set") -> Remedy:
        """A remedy setting ``setting`` to ``value`` (``direction``: lower / raise / set). A
        fraction setting outside (0, 1] (:func:`fraction_in_range`) is never printed: the remedy
        keeps its action and says no value serves."""
        if not isinstance(value, (str, bool)):
            value = round(float(value), 2) if setting in FRACTIONS else int(value)
        if setting in FRACTIONS and not fraction_in_range(value):
            reason = (
                f"no {setting} in (0, 1] does it: the arithmetic gives {'less than 0' if value <= 0 else 'more than 1'}"
            )
            return self.unset(setting, direction, action, f"{why}; {reason}" if why else reason)
        return Remedy(
            order=0,
            action=action,
            flag=self.flag(setting, value),
            why=why,
            setting=setting,
            value=value,
            direction=direction,
        )

    def set_unless_done(
        self, setting: str, value: Any, action: str, why: Optional[str], done: Optional[str]
    ) -> Optional[Remedy]:
        """:meth:`set_to`, unless the log shows ``setting`` already at ``value``: then a remedy
        with the rule's ``done`` action (no flag: nothing to change) that says what ran, or
        ``None`` when ``done`` is ``None`` (the step has nothing left to try). A remedy never
        repeats what the log shows is already done (the house rule; plan.reconcile would strip
        the flag, but the action would still tell the operator to do it)."""
        now = self.in_force(setting)
        if now.known and now.low == value:
            if done is None:
                return None
            return Remedy(order=0, action=done, why=f"{setting} is already {now.why}")
        return self.set_to(setting, value, action, why)

    @staticmethod
    def unset(setting: str, direction: str, action: str, why: Optional[str]) -> Remedy:
        """A remedy about ``setting`` that carries no number (``why`` says what is missing)."""
        return Remedy(order=0, action=action, why=why, setting=setting, direction=direction)

    def halve(
        self,
        setting: str,
        action: str,
        reason: str,
        floor: int = 1,
        unknown: Optional[str] = None,
        printed_only: bool = False,
    ) -> Remedy:
        """A remedy lowering a count ``setting`` to half the value in force (at least ``floor``),
        ``why`` = ``reason`` and the arithmetic; without a value in force, ``reason`` and
        ``unknown`` (default: the value in force is not in the log, or the metrics) and no number. ``printed_only``: halve only a value the log prints, never
        a version's default (where a guessed default could break another limit)."""
        now = self.in_force(setting)
        if not now.low or (printed_only and not now.known):
            unknown = unknown or f"the value in force is not in {read_from(self.run)}"
            return self.lower(setting, None, action, f"{reason}; {unknown}")
        return self.lower(setting, max(floor, int(now.low) // 2), action, f"{reason}: half of {now.why}")

    def lower(self, setting: str, target: Optional[float], action: str, why: Optional[str]) -> Remedy:
        """A remedy lowering ``setting`` to ``target``, kept below the value in force: when the
        target is not below it, the remedy carries no number and says why."""
        now = self.in_force(setting)
        if target is None:
            return self.unset(setting, "lower", action, why)
        target = round(target, 2) if setting in FRACTIONS else int(target)
        if now.low is not None and target >= now.low:
            reason = f"the value in force is {now.why}; no lower value follows from {read_from(self.run)}"
            return self.unset(setting, "lower", action, f"{why}; {reason}" if why else reason)
        refused = self._refused(setting, target)  # remedies3: never a value vLLM refuses to start with
        if refused:
            return self.unset(setting, "lower", action, f"{why}; {refused}" if why else refused)
        return self.set_to(setting, target, action, self._with_in_force(why, now), "lower")

    def chunked_prefill(self) -> Optional[bool]:
        """Whether the log shows chunked prefill on (``enable_chunked_prefill=True``, "Chunked
        prefill is enabled with max_num_batched_tokens=..."), off, or None when it does not say."""
        on = self.run.value("enable_chunked_prefill")
        if isinstance(on, bool):
            return on
        line = self.run.line_for("max_num_batched_tokens")
        return True if line is not None and "Chunked prefill is enabled" in line.text else None

    def _refused(self, setting: str, target: float) -> Optional[str]:
        """Why vLLM would refuse to start with ``setting`` at ``target``, or None. remedies3:
        a max_num_batched_tokens below max_model_len without chunked prefill (hunt9 v02:
        "--max-num-batched-tokens 1024" on a V0 run; :func:`vllm_doctor.defaults.batched_tokens_floor`)."""
        if setting != "max_num_batched_tokens":
            return None
        floor = defaults.batched_tokens_floor(
            self.version, self.engine, self.run.value("max_model_len"), self.chunked_prefill()
        )
        if floor is None:
            return None
        least, because = floor
        if least is None:
            return f"{because}; max_model_len is not in {read_from(self.run)}, so no lower value is sure to start"
        if target < least:
            return f"{because} ({least}), so {int(target)} would not start"
        return None

    def visible_devices(self) -> Optional[Tuple[int, str]]:
        """How many devices the launch command lets vLLM see (``CUDA_VISIBLE_DEVICES=0,1`` and
        the like before the command), with why; None when it sets none."""
        line = self.run.markers.get("launch_command")
        m = _VISIBLE.search(line.text) if line is not None else None
        if m is None:
            return None
        ids = [x for x in m["ids"].split(",") if x.strip()]
        return len(ids), f"{m['var']}={m['ids']} on line {line.lineno} shows {len(ids)}"

    def devices_at_least(self) -> Tuple[int, str]:
        """How many GPUs the log shows this run can use, a lower bound, and how (0 and "" when
        nothing shows more than the one every run has). remedies3: the TP helpers' device
        count, so that no TP target is printed above the GPUs the log shows (hunt10 w05, w20-w25:
        "--tensor-parallel-size 2" on one-GPU posts).

        * a device list before the launch command (:meth:`visible_devices`): exactly that many;
        * ``world_size`` or tensor_parallel_size x pipeline_parallel_size printed: one GPU per rank;
        * ``GPU N`` in an out-of-memory message of the run (whoever printed it): PyTorch numbers
          the devices the process can see, so N + 1 are visible. That proves devices, not the
          tensor parallelism in force (a data-parallel rank, or a device picked by hand, sits on
          GPU N with TP 1): :meth:`tp_at_least` counts only a worker's index as ranks;
        * the ranks :meth:`tp_at_least` proves.
        """
        visible = self.visible_devices()
        if visible is not None:
            return visible
        best, why = 0, ""
        world = self.run.value("world_size")
        tp, pp = self.run.value("tensor_parallel_size"), self.run.value("pipeline_parallel_size") or 1
        if isinstance(world, int) and world > best:
            best, why = world, f"the world size is {world}"
        if isinstance(tp, int) and tp * pp > best:
            best, why = tp * pp, f"tensor_parallel_size {tp} x pipeline_parallel_size {pp}"
        idx = [f.data["gpu_index"] for f in self.run.failures if isinstance(f.data.get("gpu_index"), int)]
        if idx and max(idx) + 1 > best:
            best, why = max(idx) + 1, f"an out-of-memory message names GPU {max(idx)}, so {max(idx) + 1} are visible"
        floor, because = self.tp_at_least()
        if floor > best:
            best, why = floor, because
        best = min(best, thresholds.MAX_PROVEN_RANKS)
        return (best, why) if best > 1 else (0, "")

    def _tp_unsafe(self, target: int, now: InForce) -> Optional[str]:
        """Why a tensor_parallel_size target cannot be printed, or None. remedies3: a number
        needs both ends known (hunt8 u04/u12, hunt9 v02/v18, hunt10 w05, w20-w25):

        * the value in force, printed: when the log does not print it, "vLLM's default 1" is a
          guess (a prose or docker command the log does not parse, u04's "2" on an 8-GPU run),
          and a proven floor (a worker's rank) is only a lower bound: any number may be at or
          below what ran;
        * GPUs for it: target x pipeline_parallel_size at most the devices the log shows
          (:meth:`devices_at_least`; exactly those
          a device list makes visible). A post that shows one GPU gets no number ("if you have
          more GPUs")."""
        visible = self.visible_devices()
        if visible is not None and target > visible[0]:
            return f"{target} GPUs are more than vLLM can see ({visible[1]})"
        if not now.known and self.command_leaves_tp_default() is None:
            if (now.low or 1) > 1:
                return (
                    f"more than now: the log shows more than one GPU in use ({now.why}) but tensor_parallel_size is "
                    "not printed, so no number is sure to be above it"
                )
            return (
                "tensor_parallel_size is not printed in the log, so no number is sure to be above the value in force; "
                "raise it to a divisor of the attention heads that the host's GPUs allow"
            )
        have, why = self.devices_at_least()
        pp = int(self.run.value("pipeline_parallel_size") or 1)
        need = target * pp  # one GPU per rank: tensor x pipeline parallel
        if need > have:
            shown = f"only {have} ({why})" if have else "no more than one"
            per = f" ({target} x pipeline_parallel_size {pp})" if pp > 1 else ""
            return (
                f"the log does not show {need} GPUs{per} for it, {shown}: only if the host has them, with "
                "tensor_parallel_size dividing the attention heads"
            )
        return None

    def command_leaves_tp_default(self) -> Optional[Line]:
        """The launch command, when the log shows it whole and it sets no tensor parallelism
        (so vLLM's default 1 ran: vllm/engine/arg_utils.py ``tensor_parallel_size = 1``), else
        None. A command cut at a line continuation (``\\``: a docker run over several lines,
        hunt9 v02's ``--tensor-parallel-size 4`` on its seventh line) or mentioning TP in any
        spelling proves nothing. remedies3, a TP helper."""
        line = self.run.markers.get("launch_command")
        if line is None or _CONTINUED.search(line.text):
            return None
        if _TP_WORDS.search(line.text):
            return None
        return line

    def raise_tp(self, target: Optional[int], action: str, why: Optional[str]) -> Remedy:
        """A remedy raising tensor_parallel_size to ``target`` when :meth:`_tp_unsafe` allows a
        number; otherwise the same step without a number, its action starting "If this host has
        more GPUs" (remedies3)."""
        r = self.raise_to("tensor_parallel_size", target, action, why)
        if r.flag is None and not action.lower().startswith("if this host has more gpus"):
            r.action = "If this host has more GPUs: " + action[0].lower() + action[1:]
        return r

    def raise_to(self, setting: str, target: Optional[float], action: str, why: Optional[str]) -> Remedy:
        """A remedy raising ``setting`` to ``target``, kept above the value in force and, for
        gpu_memory_utilization, at or below :meth:`utilization_ceiling`; a tensor_parallel_size
        only where :meth:`_tp_unsafe` allows a number."""
        now = self.in_force(setting)
        if target is None:
            return self.unset(setting, "raise", action, why)
        target = round(target, 2) if setting in FRACTIONS else int(target)
        if setting == "tensor_parallel_size":
            unsafe = self._tp_unsafe(int(target), now)
            if unsafe:
                return self.unset(setting, "raise", action, f"{why}; {unsafe}" if why else unsafe)
        if setting == "gpu_memory_utilization":
            ceiling, because = self.utilization_ceiling()
            if target > ceiling + 1e-9:
                reason = (
                    f"{fmt(setting, target)} would be needed, above the {ceiling:.2f} this GPU can give ({because})"
                )
                return self.unset(setting, "raise", action, f"{why}; {reason}" if why else reason)
        if now.high is not None and target <= now.high:
            reason = f"the value in force is already {now.why}"
            return self.unset(setting, "raise", action, f"{why}; {reason}" if why else reason)
        if setting in SAID_IF_ASSUMED and not now.known and now.low is not None:
            return self._raise_if_default(setting, target, action, why, now)
        return self.set_to(setting, target, action, self._with_in_force(why, now), "raise")

    def _raise_if_default(self, setting: str, target: float, action: str, why: Optional[str], now: InForce) -> Remedy:
        """A raise worked out from vLLM's default where the log does not print the value in
        force (fresh20 item 3): a bare ``--gpu-memory-utilization 0.93`` would LOWER a 0.95
        the operator runs with. No flag: the action says the number holds only at the default,
        and never to go below the value they run with."""
        whose = now.why.split(f", {not_printed(self.run)}")[0]
        shown = fmt(setting, round(target, 2) if setting in FRACTIONS else int(target))
        said = (
            f"{action}: the value in force is {not_printed(self.run)}, {whose} unless set: raise {setting} to "
            f"{shown} if it runs at the default, never below the value you run with"
        )
        return self.unset(setting, "raise", said, why)

    @staticmethod
    def _with_in_force(why: Optional[str], now: InForce) -> Optional[str]:
        """Say what value the change is against when the log did not print it (once)."""
        if now.known or (why and now.why in why):
            return why
        return f"{why}; in force: {now.why}" if why else f"in force: {now.why}"


def constraints(run: Run) -> Constraints:
    """The run's :class:`Constraints` (cheap: a walk over the run's few failures)."""
    return Constraints(run)


# -- reconciliation --------------------------------------------------------------------------
def _strip(r: Remedy, why: str) -> None:
    """Take the number off a remedy (it keeps its setting and direction) and say why."""
    r.why = f"{why}; {r.why}" if r.why else why
    r.flag, r.value = None, None


def _violates_direction(c: Constraints, r: Remedy) -> Optional[str]:
    now = c.in_force(r.setting)
    if r.direction == "lower" and now.low is not None and r.value >= now.low:
        return f"not below the value in force ({now.why})"
    if r.direction == "raise" and now.high is not None and r.value <= now.high:
        return f"not above the value in force ({now.why})"
    if r.direction == "set" and now.known and now.low == r.value:
        return f"already the value in force ({now.why})"
    return None


def reconcile(findings: Sequence[Finding], run: Run) -> List[Dict[str, Any]]:
    """Make the remedies of one run's findings one plan (see the module docstring), in place.

    ``findings`` are in the order the verdict lists them (most severe first). Returns what was
    changed, one ``{"code", "flag", "reason"}`` per remedy adjusted, for tests and debugging.
    """
    c = constraints(run)
    changed: List[Dict[str, Any]] = []
    planned: Dict[str, Tuple[float, str]] = {}
    forbidden: Dict[Tuple[str, str], Tuple[str, str]] = {}
    for f in findings:
        for r in f.remedies:
            if not r.setting:
                continue
            reason = None
            ban = forbidden.get((r.setting, r.direction))
            if ban is not None and ban[0] != f.code:
                reason = f"not now: {ban[0]} comes first ({ban[1]})"
            elif r.flag is None:
                continue
            elif r.setting in planned and planned[r.setting][0] != r.value:
                value, code = planned[r.setting]
                reason = f"{code}'s {c.flag(r.setting, value)} is this run's plan"
            else:
                reason = _violates_direction(c, r)
            if reason:
                changed.append({"code": f.code, "flag": r.flag, "reason": reason})
                _strip(r, reason)
            else:
                planned.setdefault(r.setting, (r.value, f.code))
        for setting, direction, why in f.forbids:
            forbidden.setdefault((setting, direction), (f.code, why))
    return changed
