"""Who raised an out-of-memory message, and whether its numbers describe a shortage at all.

Every OOM message is not vLLM's capacity problem. Before any memory remedy, three questions:

* **Did the allocation survive?** PyTorch's c10 warning ``memory allocation failed with OOM on
  device N while trying to allocate B bytes (free: F, total: T)`` is printed when one
  ``cudaMalloc`` fails; the caching allocator then frees its cache and retries
  (``DeviceCachingAllocator::malloc``). A warning the log follows with the engine moving on
  (a later phase, stats, facts) or with the failure that the retry raised is no failure of
  its own (``retried``).
* **Do the numbers describe a shortage?** When PyTorch raises ``CUDA out of memory`` it has
  already returned every cached block to the driver ("at this point free_cached_blocks has
  already returned all possible 'cached' memory to the driver", c10/cuda/CUDACachingAllocator.cpp)
  and ``free`` is the driver's own count (``cudaMemGetInfo``). The segment it asked the driver
  for is the request rounded up: at most twice it (``roundup_power2_divisions``), and
  :data:`LARGE_SEGMENT_GIB` for a request under 10 MiB (``kLargeBuffer``). The driver maps
  physical pages into one virtual range, so a free count far above that segment cannot be
  fragmentation: the allocation failed for another reason, an allocator or driver failure
  (sleep mode's ``CuMemAllocator`` in ``csrc/cumem_allocator.cpp``, WSL2's memory manager,
  expandable segments' mapping). See :data:`~vllm_doctor.thresholds.ALLOCATOR_FAILURE_FREE_RATIO`
  (``allocator``). Only CUDA and HIP: XPU's "free" can be an estimate (total - reserved, when
  the SYCL runtime lacks ``ext_intel_free_memory``), XLA and Gaudi have no virtual memory.
  Not when the message says "allowed" (``set_per_process_memory_fraction``: a cap, a real limit).
* **Was it raised in vLLM?** Decided from positive evidence only, never from missing
  evidence (most pasted OOM lines are bare, no frames): the OOM's own traceback has frames of
  an application (a trainer, a script: :func:`vllm_doctor.frames.origin_tags` ``app_code``) and
  none of vLLM's; or it is printed under torchrun's ``[rankN]:`` prefix, outside any vLLM record
  or process, in a run whose ranks' tracebacks show app code and no vLLM frame at all (``outside``).

Sources: pytorch c10/cuda/CUDACachingAllocator.cpp (``malloc``, ``alloc_block``,
``round_size``, ``kLargeBuffer``, the OOM message and ``allowed_info``); torchrun's
``[rankN]:`` line prefix (torch.distributed.elastic); vllm/device_allocator/cumem.py.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import regex

from .. import thresholds
from ..catalog.errors import RAY_TASK
from ..memory import gib_text
from ..run import Failure, Run
from ..verdict import Finding
from . import impossible_allocation
from .oom import device_memory, oom_facts
from .plan import env_set
from .rule import Rule, consequence_evidence, ev, failure_evidence, finding, remedy

#: c10's ``kLargeBuffer``: the smallest segment the allocator asks the driver for a request
#: between 1 and 10 MiB (20 MiB), in GiB.
LARGE_SEGMENT_GIB = 20 / 1024
#: c10's rounding with ``roundup_power2_divisions``: a segment is at most twice the request.
ROUNDING_FACTOR = 2.0
#: Where ``free`` is the driver's own count and the driver has virtual memory.
_VIRTUAL_MEMORY_BACKENDS = (None, "CUDA", "HIP")
_ALLOCATOR_FORMS = ("torch", "torch-old", "allocator-warning")


def largest_segment_gib(tried_gib: float) -> float:
    """The largest segment (GiB) the caching allocator may have asked the driver for to serve
    a request of ``tried_gib``: the request rounded up (:data:`ROUNDING_FACTOR`), never less
    than :data:`LARGE_SEGMENT_GIB`."""
    return max(ROUNDING_FACTOR * tried_gib, LARGE_SEGMENT_GIB)


def not_a_shortage(data: Dict[str, Any], text: str = "") -> bool:
    """True when an OOM message's own numbers rule out a shortage: the driver had at least
    :data:`~vllm_doctor.thresholds.ALLOCATOR_FAILURE_FREE_RATIO` times the largest segment the
    allocator could have asked for (:func:`largest_segment_gib`) free. ``data`` is the OOM
    event's data (GiB), ``text`` its line (a per-process cap prints "allowed")."""
    tried, free = data.get("tried_to_allocate_gib"), data.get("gpu_free_gib")
    if tried is None or free is None or tried <= 0:
        return False
    if data.get("form") not in _ALLOCATOR_FORMS or data.get("backend") not in _VIRTUAL_MEMORY_BACKENDS:
        return False
    if " allowed;" in text:
        return False
    return free >= thresholds.ALLOCATOR_FAILURE_FREE_RATIO * largest_segment_gib(tried)


def _outside_frames(tags) -> bool:
    return "app_code" in tags and "vllm_code" not in tags


def _vllm_line(line) -> bool:
    """A line inside a vLLM record or process (a record header, a process prefix, a PID the run
    showed as vLLM's)."""
    return line.level is not None or line.proc is not None


def raised_outside(f: Failure, run: Run) -> bool:
    """Positive evidence that OOM failure ``f`` was raised outside vLLM (see the module doc)."""
    if _outside_frames(f.all_tags):
        return True
    if foreign_actor(f, run) is not None:
        return True
    if f.all_tags:
        return False  # frames of its own that are vLLM's, or say nothing of who called them
    line = f.lines[0]
    if line.rank is None or _vllm_line(line) or run.vllm_pids:
        return False
    if any("vllm_code" in g.all_tags for g in run.failures):
        return False
    ranked = [g for g in run.failures if g is not f and g.lines and g.lines[0].rank is not None]
    return any(_outside_frames(g.all_tags) for g in ranked)


def foreign_actor(f: Failure, run: Run) -> Optional[str]:
    """``Class.method()`` of the application's Ray actor whose task the run shows failing with
    an out-of-memory error (``RayTaskError(OutOfMemoryError): ray::FSDPPolicyWorkerBase.init_model()``,
    the ``foreign_actor_oom`` marker of catalog/errors.py), when OOM failure ``f`` is no vLLM
    record's or process's and has no vLLM frame; else None (hunt10 w02: the trainer's OOM,
    with the colocated vLLM engine as the other process on the GPU)."""
    line = run.markers.get("foreign_actor_oom")
    if line is None or "vllm_code" in f.all_tags or _vllm_line(f.lines[0]):
        return None
    m = _RAY_TASK.search(line.text)
    return f"{m['cls']}.{m['method']}()" if m else "a Ray task"


_RAY_TASK = regex.compile(RAY_TASK)


def _later_lines(run: Run) -> List[int]:
    lines = list(run.phase_lines.values()) + list(run.fact_lines.values())
    if run.stats.last is not None:
        lines.append(run.stats.last)
    return [x.lineno for x in lines if x is not None]


def retried(f: Failure, run: Run) -> bool:
    """True when ``f`` is c10's allocator warning (``allocator_retry``) and the log shows what
    came of the retry: a later failure (the OOM the retry raised; not another such warning), or
    the engine moving on."""
    if not f.data.get("allocator_retry") or f.kinds - {"oom"}:
        return False
    if any(g.seq > f.last_seq and not g.data.get("allocator_retry") for g in run.failures):
        return True  # the failure the retry raised (another warning is the same story again)
    last = max(x.lineno for x in f.lines)
    return any(n > last for n in _later_lines(run))


def provenance(f: Failure, run: Run) -> Optional[str]:
    """``retried``, ``impossible`` (one request larger than the whole device:
    rules/impossible_allocation.py), ``allocator`` (no shortage: an allocator or driver failure), ``outside``
    (raised outside vLLM), or None (vLLM's own OOM, to be judged by the memory rules)."""
    if retried(f, run):
        return "retried"
    if impossible_allocation.impossible(f):  # larger than the device: no shortage to judge
        return "impossible"
    if raised_outside(f, run):
        return "outside"
    if not_a_shortage(f.data, f.lines[0].text if f.lines else ""):
        return "allocator"
    return None


#: Settings no memory reduction should touch when the OOM is no shortage.
_MEMORY_SETTINGS = ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "max_model_len")


def _allocator_finding(rule: Rule, run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    facts: Dict[str, Any] = oom_facts(failures, run)
    facts["not_a_shortage"] = True
    tried, free, total = facts.get("tried_to_allocate_gib"), facts.get("gpu_free_gib"), facts.get("gpu_total_gib")
    sleep = any("wake_up" in f.all_tags for f in failures) or "wake_up" in run.sibling_tags
    sleep = sleep or bool(run.value("enable_sleep_mode"))
    cumem = any(g.data.get("form") == "cumem" for g in run.failures)
    mapping = any("memory mapping failed" in x.text for f in failures for x in f.lines)  # expandable segments
    of_total = f" of {gib_text(total)}" if total else ""
    title = (
        f"Not a capacity OOM: {gib_text(tried)} could not be allocated with {gib_text(free)}{of_total} free "
        f"({device_memory(facts)}): an allocator or driver failure"
    )
    segment = largest_segment_gib(tried)
    rem = [
        remedy(
            "Find the call that really failed: the allocator's or driver's own error printed before the OOM "
            "(sleep mode's CuMemAllocator prints 'CUDA Error: ... at csrc/cumem_allocator.cpp'), and look it up "
            "for your vLLM, PyTorch and driver versions",
            None,
            f"the driver had {gib_text(free)} free, {free / segment:.0f} times the largest segment "
            f"({gib_text(segment)}) PyTorch could have asked for; a shortage leaves less than "
            f"{thresholds.ALLOCATOR_FAILURE_FREE_RATIO:g} times it",
        ),
        remedy(
            "Sleep mode (an RL trainer colocating vLLM, enable_sleep_mode) allocates through vLLM's CuMemAllocator: "
            "run the engine as a separate server instead of colocated, or try a newer vLLM",
            None,
            "the allocation went through csrc/cumem_allocator.cpp" if cumem else None,
        )
        if sleep or cumem
        else None,
        remedy(
            "Unset PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: mapping its segments can fail with memory "
            "free (WSL2's driver)",
            None,
            None,
            "host",
        )
        if mapping
        else None,
        remedy(
            "Rerun with CUDA_LAUNCH_BLOCKING=1 to see the failing call in the traceback",
            None,
            None,
            "host",
        )
        if not env_set(run, "CUDA_LAUNCH_BLOCKING", "1")
        else None,
    ]
    why = f"{gib_text(free)} was free: memory was not short"
    dont = [
        f"Lowering gpu_memory_utilization, max_num_seqs, max_num_batched_tokens, max_model_len or a trainer's "
        f"batch size: {why}",
        "Killing other processes on the GPU: they did not take what was asked for",
    ]
    forbids = [(s, "lower", why) for s in _MEMORY_SETTINGS] + [("gpu_memory_utilization", "raise", why)]
    evidence = failure_evidence(failures, "out of memory with memory free") + consequence_evidence(run, 2)
    return finding(rule, run, phase, title, facts, evidence, rem, dont, forbids=forbids)


def fragmented(facts: Dict[str, Any]) -> bool:
    """True when an OOM's reserved-but-unallocated memory (``reserved_unallocated_gib``) is
    fragmentation worth fixing first: at least :data:`~vllm_doctor.thresholds.FRAGMENTATION_GIB`
    and at least :data:`~vllm_doctor.thresholds.FRAGMENTATION_SHARE_OF_REQUEST` of the failed
    allocation (PyTorch's own hint: "If reserved but unallocated memory is large try setting
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")."""
    frag, tried = facts.get("reserved_unallocated_gib"), facts.get("tried_to_allocate_gib")
    if not isinstance(frag, (int, float)) or frag < thresholds.FRAGMENTATION_GIB:
        return False
    return tried is None or frag >= thresholds.FRAGMENTATION_SHARE_OF_REQUEST * tried


def expandable_done(run: Run) -> bool:
    """The log shows expandable segments already on: its mapping error ("memory mapping
    failed"), or the setting in the operator's launch command or in a failure's lines (not
    PyTorch's own "try setting" hint), or the environment the log shows (plan.env_set; PyTorch 2.9's PYTORCH_ALLOC_CONF too). The remedy is then done, never repeated."""
    texts = [x.text for f in run.failures for x in f.lines]
    command = run.markers.get("launch_command")
    if command is not None:
        texts.append(command.text)
    on = any(
        env_set(run, name, "expandable_segments:True") for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
    )
    return on or any(
        "memory mapping failed" in t or ("expandable_segments:True" in t and "try setting" not in t) for t in texts
    )


def sleep_mode(run: Run, failures: Sequence[Failure] = ()) -> bool:
    """The log shows vLLM's sleep mode (``enable_sleep_mode``, a wake-up, an allocation through
    its CuMemAllocator): vLLM then refuses expandable segments at startup ("Expandable segments
    are not compatible with memory pool", vllm/device_allocator/cumem.py CuMemAllocator.__init__,
    v0.10.2 to v0.19.1), so that setting is no remedy there."""
    if run.value("enable_sleep_mode") or "wake_up" in run.sibling_tags:
        return True
    return any("wake_up" in f.all_tags for f in failures) or any(g.data.get("form") == "cumem" for g in run.failures)


def fragmentation_remedy(facts: Dict[str, Any], run: Run, failures: Sequence[Failure], who: str):
    """The cheap, safe first fix when fragmentation could have served the request: PyTorch's
    expandable segments (a restart with one environment variable; it changes no model or batch
    setting). None when the OOM shows no such fragmentation (:func:`fragmented`), the log shows
    the setting on (:func:`expandable_done`) or sleep mode (:func:`sleep_mode`: vLLM's allocator
    refuses it). The action says the sleep-mode exception, which a log need not show."""
    if not fragmented(facts) or expandable_done(run) or sleep_mode(run, failures):
        return None
    frag, tried = facts["reserved_unallocated_gib"], facts.get("tried_to_allocate_gib")
    against = f", more than the {gib_text(tried)} that failed" if tried is not None and frag >= tried else ""
    return remedy(
        "Reduce fragmentation first: restart with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the "
        "environment (not where vLLM runs with sleep mode: its allocator refuses that setting)",
        None,
        f"{gib_text(frag)} is reserved by PyTorch in {who} but unallocated{against}; PyTorch's own message "
        "names this setting",
        "host",
    )


def _outside_finding(rule: Rule, run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    facts: Dict[str, Any] = oom_facts(failures, run)
    facts["raised_outside_vllm"] = True
    # "this process" is the application's, not vLLM's
    for key in ("vllm_process_gib", "vllm_pid"):
        facts.pop(key, None)
    actor = next((a for a in (foreign_actor(f, run) for f in failures) if a is not None), None)
    where = (
        f"raised in the application's Ray actor {actor}, not in vLLM"
        if actor
        else "the frames that lead to the OOM are an application's (a trainer or a script), none of them vLLM's"
    )
    title = f"Out of {device_memory(facts)} outside vLLM: {where}"
    trainer = remedy(
        "Reduce the trainer's memory: a smaller micro batch, gradient checkpointing, ZeRO-3 or FSDP with "
        "parameter and optimizer offload",
        None,
        "the OOM was raised in the trainer's own code",
        "host",
    )
    engine = colocated_engine_remedy(facts)
    rem = [fragmentation_remedy(facts, run, failures, "the process that failed")]
    # another process holding a large share of the GPU beside the trainer is most likely the
    # colocated engine: freeing it is the first fix, the trainer's own diet the second
    rem += [engine, trainer] if colocated_holder(facts) is not None else [trainer, engine]
    why = "the OOM was not raised in vLLM"
    dont = [f"vLLM serving flags (max_num_seqs, max_model_len, max_num_batched_tokens): {why}"]
    forbids = [(s, "lower", why) for s in ("max_num_seqs", "max_model_len", "max_num_batched_tokens")]
    evidence = failure_evidence(failures, "out of memory outside vLLM") + failure_evidence(
        [g for g in run.failures if g not in failures and _outside_frames(g.all_tags)][:1], "the application's frames"
    )
    if actor:
        evidence.append(ev(run.markers.get("foreign_actor_oom"), "the application's Ray task that failed"))
    return finding(rule, run, phase, title, facts, evidence, rem, dont, forbids=forbids)


def colocated_holder(facts: Dict[str, Any]) -> Optional[Tuple[str, float]]:
    """``(pid, GiB)`` of the largest other process an OOM raised outside vLLM lists on its GPU
    when it holds at least :data:`~vllm_doctor.thresholds.SIGNIFICANT_FOREIGN_SHARE` of it (the
    colocated engine, most likely, in an RL job), else None."""
    held, total = facts.get("co_tenant_gib") or {}, facts.get("gpu_total_gib")
    if not held or not total:
        return None
    pid, gib = max(held.items(), key=lambda kv: kv[1])
    return (pid, gib) if gib >= thresholds.SIGNIFICANT_FOREIGN_SHARE * total else None


def colocated_engine_remedy(facts: Dict[str, Any]):
    """Free the colocated vLLM engine's share for the trainer: sleep it (``enable_sleep_mode``,
    ``LLM.sleep()`` before the trainer allocates) or lower its ``gpu_memory_utilization``; naming
    the process that holds it where the OOM message lists one (:func:`colocated_holder`)."""
    holder = colocated_holder(facts)
    if holder is None:
        return remedy(
            "If a vLLM engine is colocated on these GPUs, its share is not the trainer's: lower the engine's "
            "gpu_memory_utilization in the trainer's rollout config, or put it to sleep while the trainer steps",
            None,
            "the engine keeps its weights and KV cache on the GPU unless it sleeps",
            "host",
        )
    pid, gib = holder
    return remedy(
        "Free what the colocated vLLM engine holds before the trainer allocates: put it to sleep before the trainer's "
        "init or step (enable_sleep_mode), offload it, or lower its gpu_memory_utilization in the rollout config",
        None,
        f"process {pid} holds {gib_text(gib)} of the {gib_text(facts['gpu_total_gib'])} GPU, most likely the "
        "colocated engine: the engine keeps its weights and KV cache on the GPU unless it sleeps",
        "host",
    )


def findings(rule: Rule, run: Run, failures: Sequence[Failure], phase: str) -> List[Finding]:
    """The findings (class ``rule``, VD900 other) for OOM failures that :func:`provenance` calls
    ``impossible``, ``allocator`` or ``outside``; [] when there are none."""
    out: List[Finding] = []
    kinds = [(f, provenance(f, run)) for f in failures]
    allocator = [f for f, p in kinds if p == "allocator"]
    outside = [f for f, p in kinds if p == "outside"]
    impossible = [f for f, p in kinds if p == "impossible"]
    if impossible:
        out.append(impossible_allocation.check(rule, run, impossible, phase))
    if outside:
        out.append(_outside_finding(rule, run, outside, phase))
    if allocator:
        out.append(_allocator_finding(rule, run, allocator, phase))
    return out
