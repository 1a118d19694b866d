"""The decision tree of ``shared/domain.md``: startup or runtime first, then the class.

:func:`route` takes one failure of a run and says which rule explains it, in which phase,
and how sure that is: ``high`` when the error line itself names the problem (a KV capacity
error, the free-memory check), ``medium`` when traceback frames or the phase the run had
reached decide (a bare torch OOM inside ``capture_model``), ``low`` when only the run's
progress decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .. import thresholds
from ..defaults import gpu_memory_utilization
from ..events import Phase
from ..frames import dispatch_only, phase_of, startup_step_of
from ..memory import model_weights_estimate
from ..processes import is_engine_process
from ..run import Failure, Run
from ..tracker import MEMORY_KINDS
from . import contention
from .oom import co_tenants_of, held_unlisted
from .oom_provenance import provenance

#: Failure kinds whose own message names the problem (and so its class and phase).
SELF_EVIDENT = {
    "kv_error": ("kv_cache_capacity", "startup"),
    "free_memory": ("startup_memory_contention", "startup"),
    "profiling_error": ("startup_memory_contention", "startup"),
    "quant_error": ("quantization_unsupported", "startup"),
    "config_error": ("config_limit_error", "startup"),
    # A feature the release refuses with the rest of the configuration (catalog/validation.py).
    "unsupported": ("other", "startup"),
    # The launch command refused by the argument parser (catalog/arguments.py).
    "cli_error": ("other", "startup"),
    "too_long": ("request_too_long", "runtime"),
    # V0 SWAP preemption with vLLM's CPU swap pool full: KV capacity, the engine dies (catalog/scheduler.py).
    "swap_exhausted": ("preemption_storm", "runtime"),
    # No accelerator at all: vLLM stops before it loads anything (catalog/platform.py).
    "no_device": ("other", "startup"),
}


@dataclass(frozen=True)
class Route:
    """Where a failure goes: the rule ``name`` (a class id, or None for a request error that
    did not hurt the server), ``phase`` (``startup`` / ``runtime``), ``confidence``."""

    name: Optional[str]
    phase: str
    confidence: str
    placed: Optional[str] = None  # why, when only the memory numbers place a startup step


def failure_phase(f: Failure, run: Run) -> Optional[Phase]:
    """Where a failure happened: its frames, a chained traceback's frames, the method a sibling
    worker failed in, its kind, the run's progress, the markers around it."""
    p = phase_of(f.tags) or phase_of(f.context_tags) or phase_of(run.sibling_tags)
    if p is not None:
        return p
    if f.phase_at < Phase.READY:
        # Nothing served before it (no stats, no access line, no ready marker): the sampler's
        # frames are its warm-up, torch's module moves are the weights loading (frames.py).
        p = startup_step_of(f.all_tags)
        if p is not None:
            return p
    if "sampler_oom" in f.kinds:
        return Phase.WARMUP
    if "load_oom" in f.kinds:
        return Phase.LOADING_WEIGHTS
    if f.kind == "kv_error":
        return Phase.KV_SIZING
    if f.kind in ("free_memory", "quant_error", "config_error", "unsupported", "cli_error", "no_device"):
        return Phase.CONFIG
    if f.kind == "profiling_error":
        return Phase.WEIGHTS_LOADED
    if f.kind == "too_long" or f.data.get("in_model_execution") or f.data.get("generation_progress"):
        return Phase.SERVING
    if offline_progress_before(f, run):
        return Phase.SERVING
    if f.all_tags & REQUEST_PATH_TAGS and run.phase <= Phase.CONFIG:
        # A request's own path (its image through the multimodal encoder, its prompt logprobs)
        # and no startup step in the log: serving. At startup the encoder runs under
        # profile_run, whose own frame (or a startup line) would say so (hunt7 q07).
        return Phase.SERVING
    if f.data.get("form") == "xla-compile":
        if f.data.get("memory_space") == "hbm" and run.phase < Phase.WEIGHTS_LOADED:
            # rules7 (z10): no line shows the weights on the chips: XLA's program holds them as
            # its arguments (sharded over the slice), so a program larger than the chip's HBM
            # is first the model not fitting the slice (chips x HBM), not the compiled shapes
            return Phase.LOADING_WEIGHTS
        return Phase.GRAPH_CAPTURE  # XLA compiles the model for its shapes in capture_model
    if f.data.get("program_load") and f.phase_at < Phase.READY:
        # The TPU runtime loading a compiled program ("Error loading program: Attempting to
        # reserve"): the programs compiled for the model's shapes, run first in the profiling run
        # and loaded one by one in capture_model's precompile, after the KV cache (hunt9 v04)
        return Phase.GRAPH_CAPTURE
    if f.phase_at >= Phase.READY:
        return Phase.SERVING
    hints = {c.phase_hint for c in run.consequences}
    if "runtime" in hints and "startup" not in hints:
        return Phase.SERVING
    if run.phase <= Phase.CONFIG and "startup" not in hints and graphs_captured(f, run):
        # PyTorch already held CUDA graphs' private pools: the graphs were captured, after the
        # KV cache, at the very end of startup; neither a command line nor vLLM's printout of
        # its arguments above is a later step (hunt8 u07). A marker that startup failed
        # ("EngineCore failed to start") says otherwise.
        return Phase.SERVING
    # A startup failure: the run died where it got to (stderr may print the last progress
    # bar after the traceback, so take the furthest phase the run reached).
    if Phase.CONFIG <= run.phase < Phase.READY:
        return run.phase if run.phase > Phase.CONFIG else placed_by_memory(f, run) or Phase.CONFIG
    entry = "launch_command" in run.markers or run.opened_by == "attempt" or "server_entry" in f.all_tags
    # A worker's OOM whose traceback shows only the executor dispatching a method to it (its
    # method cut): the startup steps run under it as the serving loop does, and with nothing
    # served in the log, "while serving" would be a claim no line makes (hunt10 w01)
    entry = entry or dispatched(f)
    if "startup" in hints or (entry and nothing_served(run)):
        # The operator's command (or a retry after a failed startup: tracker.CONFIG_FATAL_KINDS,
        # or the API server's entry in the failure's frames: run_server), then the failure, and
        # nothing served in between: the server never came up, though no line names the step.
        return placed_by_memory(f, run) or Phase.CONFIG
    return None


def dispatched(f: Failure) -> bool:
    """An out-of-memory failure of an engine or worker process whose traceback shows only the
    executor dispatching a method to it (:func:`vllm_doctor.frames.dispatch_only`): its step
    is cut from the paste (hunt10 w01)."""
    return bool(f.kinds & MEMORY_KINDS) and is_engine_process(f.lines[0].proc) and dispatch_only(f.data.get("frames"))


#: Tags of a request's own path (frames.py): a single image, video or long prompt's work.
REQUEST_PATH_TAGS = frozenset({"multimodal_input", "oversized_input"})


def offline_progress_before(f: Failure, run: Run) -> bool:
    """An offline batch's progress bar (``Processed prompts: N%``, vllm/entrypoints/llm.py
    ``_run_engine``) was printed before the failure: generation was running."""
    line = run.markers.get("offline_batch")
    return line is not None and bool(f.lines) and line.lineno <= f.lines[0].lineno


def graphs_captured(f: Failure, run: Run) -> bool:
    """An out-of-memory failure whose message shows PyTorch holding memory in private pools
    (``c10/cuda/CUDACachingAllocator.cpp``: "with N MiB allocated in private pools (e.g., CUDA
    Graphs)", printed only when that is not zero): vLLM's CUDA graphs were captured, the last
    allocating step of startup (after the KV cache: ``gpu_model_runner.capture_model`` under
    ``compile_or_warm_up_model``). Not with sleep mode on (``enable_sleep_mode``: its
    ``CuMemAllocator`` pool holds the weights and the KV cache from the start).

    Why not what vLLM's process held: without a co-tenant, an OOM always finds the failing
    process holding about total - free, whatever the step, so "held >= utilization x total"
    proves nothing."""
    pools = f.data.get("private_pools_gib")
    return isinstance(pools, (int, float)) and pools > 0 and not run.config.get("enable_sleep_mode")


def nothing_served(run: Run) -> bool:
    """The log shows no sign of a server that came up: no ready marker, no stats line, no
    access line, no preemption."""
    return run.phase < Phase.READY and not run.stats.count and not run.http.by_status and not run.preemption.warnings


def placed_by_memory(f: Failure, run: Run) -> Optional[Phase]:
    """The startup step of an out-of-memory failure no line places (see :func:`placement`)."""
    p = placement(f, run)
    return p[0] if p is not None else None


def placement(f: Failure, run: Run) -> Optional[Tuple[Phase, str]]:
    """``(phase, why)``: the startup step of an out-of-memory failure no line places, from where the memory
    stood when it failed (``shared/domain.md``: weights first, then the KV cache fills the
    ``gpu_memory_utilization`` budget, then CUDA graphs and warm-ups take what is left):

    * the weights (estimated from the model's name, dtype and quantization, per GPU under
      ``tensor_parallel_size`` x ``pipeline_parallel_size``) do not fit the GPU, or were not
      all in memory yet (allocated + requested <= their share): loading weights;
    * PyTorch already held more than the budget (the KV cache is allocated): graph capture
      or a warm-up after it;
    * otherwise, between the two: profiling and sizing the KV cache.

    ``why`` says it with the numbers. None when the message gives no total or allocated
    memory, or the model name no size."""
    if not (f.kinds & MEMORY_KINDS) or f.kind == "host_oom":
        return None
    d = f.data
    total, allocated = d.get("gpu_total_gib"), d.get("pytorch_allocated_gib")
    est = model_weights_estimate(run.value("model"), run.value("quantization"), run.value("dtype"))
    if not total or allocated is None or est is None:
        return None
    parallel = (run.value("tensor_parallel_size") or 1) * (run.value("pipeline_parallel_size") or 1)
    share = est["weights_gib_estimate"] / max(1, parallel)
    weights = f"weights about {share:.1f} GiB per GPU ({est['params_billion']:g}B params x {est['bits']} bits"
    weights += f" over {parallel} GPUs)" if parallel > 1 else ")"
    if share >= total:
        return Phase.LOADING_WEIGHTS, f"no step is named; {weights} do not fit the {total:.2f} GiB device"
    needed = allocated + (d.get("tried_to_allocate_gib") or 0)
    if needed <= share:
        return Phase.LOADING_WEIGHTS, f"no step is named; {needed:.2f} GiB held and asked for, within the {weights}"
    util = run.value("gpu_memory_utilization")
    if not isinstance(util, (int, float)):
        util = gpu_memory_utilization(run.value("vllm_version"), run.engine).low
    budget = f"the {util:g} x {total:.2f} GiB = {util * total:.2f} GiB budget"
    if share >= util * total:
        # The weights alone fill the budget: no KV cache could have been allocated (vLLM stops at
        # its KV check first), so the OOM came while the weights or the profiling run took the
        # card, and what does not fit is the model (hunt9 v19: 8B in fp16 on a 16 GiB V100).
        return Phase.LOADING_WEIGHTS, f"no step is named; {weights} fill {budget}: the model does not fit"
    if allocated >= util * total:
        return Phase.GRAPH_CAPTURE, (
            f"no step is named; PyTorch held {allocated:.2f} GiB, past {budget}: the KV cache was allocated"
        )
    return Phase.KV_SIZING, f"no step is named; PyTorch held {allocated:.2f} GiB: past the {weights}, within {budget}"


def _decided_by_frames(f: Failure, run: Run) -> bool:
    """Frames (its own, a chained traceback's, a sibling worker's method) or a wrapper message
    decide the phase, not only how far the run got."""
    tags = (f.tags, f.context_tags, run.sibling_tags)
    if any(phase_of(t) is not None for t in tags) or bool(f.kinds - {"oom"}):
        return True
    return f.phase_at < Phase.READY and startup_step_of(f.all_tags) is not None


#: Out-of-memory spellings an exception line cut at the end of a log may have been going to
#: print (lower case), each with the shortest cut of it that still counts: torch's c10 check
#: ("CUDA error: out of memory"), vLLM's cumem allocator (``csrc/cumem_allocator.cpp``: "CUDA
#: Error: out of memory at FILE:LINE"), HIP's, torch's allocators ("CUDA out of memory.", "XPU
#: out of memory.", NPU), the bare words. The error heads count whole ("CUDA error:" may go on
#: to any CUDA error, out of memory among them); a device name needs the "o" after it ("cuda"
#: alone ends many messages); the bare words need "out of m" ("out of range" is no OOM).
CUT_OOM_SPELLINGS = (
    ("cuda error: out of memory", len("cuda error:")),
    ("hip error: out of memory", len("hip error:")),
    ("cuda out of memory", len("cuda o")),
    ("hip out of memory", len("hip o")),
    ("xpu out of memory", len("xpu o")),
    ("npu out of memory", len("npu o")),
    ("out of memory", len("out of m")),
)
#: The shortest cut of each spelling that no other message of its runtime starts with: "CUDA
#: error: o" may go on to "operation not permitted when stream is capturing" (a graph capture
#: error), "CUDA o" to nothing else torch or vLLM prints, "out of m" to nothing but memory.
#: Cut there or later, the message was an out-of-memory (:func:`cut_oom`).
SURE_CUT_OOM = {
    "cuda error: out of memory": len("cuda error: out"),
    "hip error: out of memory": len("hip error: out"),
    "cuda out of memory": len("cuda out"),
    "hip out of memory": len("hip out"),
    "xpu out of memory": len("xpu out"),
    "npu out of memory": len("npu out"),
    "out of memory": len("out of m"),
}


def _cut_at(f: Failure, run: Run, sure: bool) -> bool:
    if f.kind != "exception" or f.lines[-1].lineno < run.end_line:
        return False
    msg = str(f.data.get("message", "")).strip().lower()
    for whole, shortest in CUT_OOM_SPELLINGS:
        for k in range(SURE_CUT_OOM[whole] if sure else shortest, len(whole)):
            part = whole[:k].rstrip()
            if msg.endswith(part) and (len(msg) == len(part) or not msg[-len(part) - 1].isalnum()):
                return True
    return False


def cut_short(f: Failure, run: Run) -> bool:
    """The failure's exception line is the run's last recognised line and its message ends
    in a strict prefix of an out-of-memory spelling (:data:`CUT_OOM_SPELLINGS`, at least its
    shortest cut) that starts at a word: the paste was cut where the message may have said
    "out of memory" (hunt6 p01: ``RuntimeError: CUDA Error: o``)."""
    return _cut_at(f, run, sure=False)


def cut_oom(f: Failure, run: Run) -> bool:
    """:func:`cut_short`, cut at or past the point where the spelling can only be an
    out-of-memory (:data:`SURE_CUT_OOM`: ``RuntimeError: CUDA out of``, hunt9 v03)."""
    return _cut_at(f, run, sure=True)


def cut_oom_step(f: Failure, run: Run) -> Optional[Phase]:
    """The startup step of an out-of-memory message cut short (:func:`cut_oom`) that the
    failure's own frames (or its chained traceback's) place before the server was ready
    (``_dummy_sampler_run``, ``capture_model``, ``load_model``, ``profile_run``), else None:
    the frame and the words printed are the proof, not the run's progress."""
    if not cut_oom(f, run):
        return None
    p = phase_of(f.tags) or phase_of(f.context_tags)
    return p if p is not None and Phase.CONFIG < p < Phase.READY else None


def _fatal(f: Failure, run: Run, phase: Optional[Phase]) -> bool:
    """Did this error take the server down: positive evidence only (a startup step, an engine
    or worker process, a consequence marker)."""
    if f.kind == "cuda_error":
        return True
    if phase is not None and phase < Phase.READY:
        return True
    line = f.lines[0]
    if is_engine_process(line.proc) or line.rank is not None:
        return True
    return bool(run.consequences)


def _memory(f: Failure, run: Run, phase: Optional[Phase], startup: bool) -> Route:
    confidence = "medium" if _decided_by_frames(f, run) else "low"
    if "sampler_oom" in f.kinds or "load_oom" in f.kinds:
        confidence = "high"
    crowded = _crowded(f, run)
    if phase is None:
        return (
            Route("startup_memory_contention", "startup", "medium")
            if crowded
            else Route("runtime_oom", "runtime", "low")
        )
    if not startup:
        return Route("runtime_oom", "runtime", confidence if confidence != "low" else "medium")
    if crowded and "load_oom" not in f.kinds:
        return Route("startup_memory_contention", "startup", "medium")
    if phase == Phase.CONFIG and not f.kinds - {"oom"} and unplaced(f, run) and co_tenants_of(f, run):
        # No frame, marker or number shows the step (a bare OOM, then "Engine core initialization
        # failed"): "loading weights" would be a guess. The one thing the message does show is
        # another process on the GPU, which vLLM's budget did not count: lead with it (hunt6 p10).
        return Route("startup_memory_contention", "startup", "low")
    if "sampler_oom" in f.kinds:
        return Route("sampler_warmup_oom", "startup", confidence)
    return Route(memory_class_at(phase), "startup", confidence)


def unplaced(f: Failure, run: Run) -> bool:
    """A startup failure whose step nothing shows: no frame (its own, a chained traceback's, a
    sibling worker's), no wrapper message, no startup step the run reached past its
    configuration, no memory numbers that place it (:func:`placement`)."""
    return not _decided_by_frames(f, run) and run.phase <= Phase.CONFIG and placement(f, run) is None


def memory_class_at(phase: Phase) -> str:
    """The class of an out-of-memory failure in startup step ``phase``."""
    if phase == Phase.WARMUP:
        return "sampler_warmup_oom"
    if phase == Phase.GRAPH_CAPTURE:
        return "cuda_graph_capture_oom"
    if phase in (Phase.WEIGHTS_LOADED, Phase.KV_SIZING):
        return "kv_cache_capacity"
    return "weight_load_oom"


def _crowded(f: Failure, run: Run) -> bool:
    """Other processes hold a significant share of the GPU, as the OOM message lists them."""
    total = f.data.get("gpu_total_gib")
    if not total:
        return False
    if held_unlisted(f, run) is not None:
        return True  # held by processes the message does not list (a container hides them)
    if "processes" not in f.data:
        return False
    others = co_tenants_of(f, run)
    return sum(g for _, g in others) >= thresholds.SIGNIFICANT_FOREIGN_SHARE * total


def route(f: Failure, run: Run) -> Route:
    """The rule that explains failure ``f`` of ``run`` (see the module docstring)."""
    if f.kind == "kv_error" and contention.held_at_startup(run, [f]) is not None:
        # remedies2: the card held more than this budget leaves for others when profiling began
        return Route("startup_memory_contention", "startup", "medium")
    if f.kind == "too_long" and f.data.get("seen_from") == "client":
        if f.data.get("body_gap", 0) > thresholds.CLIENT_BODY_LINES:
            return Route(None, "runtime", "low")  # too far from the status line to be its body
        # a client's transcript (catalog/requests.py): the response, not the server's own line
        # (a gateway or a tokenizer in front of it may have refused the request)
        return Route("request_too_long", "runtime", "low")
    if f.kind in SELF_EVIDENT:
        name, phase = SELF_EVIDENT[f.kind]
        return Route(name, phase, "high")
    phase = failure_phase(f, run)
    startup = phase is not None and phase < Phase.READY
    label = "startup" if startup else "runtime"
    tags = f.all_tags
    if "quant_check" in tags:
        return Route("quantization_unsupported", "startup", "medium")
    if "too_long" in f.tags:
        return Route("request_too_long", "runtime", "medium")
    if f.kind == "host_oom":
        # Host RAM, not the GPU: its own finding (class "other"), never a GPU OOM class.
        return Route("other", label, "high")
    if f.kinds & MEMORY_KINDS:
        origin = provenance(f, run)  # no shortage, raised outside vLLM, or a retry that went on
        if origin == "retried":
            return Route(None, label, "medium")
        if origin is not None:
            return Route("other", label, "high" if origin == "allocator" else "medium")
        if startup and contention.kv_alloc_after_profiling(f):
            # remedies2: profiling sized the cache to what was free; memory was taken since
            return Route("startup_memory_contention", "startup", "medium")
        r = _memory(f, run, phase, startup)
        if startup and run.phase <= Phase.CONFIG and not _decided_by_frames(f, run):
            p = placement(f, run)
            if p is not None and p[0] == phase:
                r = Route(r.name, r.phase, r.confidence, p[1])
            elif p is None and phase == Phase.CONFIG and dispatched(f) and nothing_served(run):
                frames = ", ".join(f.data.get("frames") or ())
                r = Route(
                    r.name,
                    r.phase,
                    r.confidence,
                    f"no step is named: the traceback shows only the executor "
                    f"dispatching a method to the worker ({frames}), the method cut, and nothing was served: "
                    "loading or profiling at startup, not a request",
                )
        return r
    if f.kind == "exception":
        if f.served_after is not None:
            return Route(None, label, "high")  # the server went on serving: a request error it survived
        fatal = _fatal(f, run, phase)
        if not (fatal or f.data.get("vllm_frames")):
            # A bare exception line, no vLLM frame under it and nothing else to say it hurt
            # the server: a client's or a script's error pasted beside the log.
            return Route(None, label, "low")
        step = cut_oom_step(f, run)
        if step is not None:
            # "RuntimeError: CUDA out of" under _dummy_sampler_run: the step's frame and the
            # words printed name the out-of-memory the cut hides (hunt9 v03)
            return Route(memory_class_at(step), "startup", "medium")
        if cut_short(f, run):
            return Route("unknown", label, "medium")  # the one word that would name it is cut
        if fatal:
            return Route("other", label, "high")
        # vLLM's frames, and nothing after it shows the server survived or died: an
        # exception no rule explains, never "healthy" (hunt6 p01).
        return Route("unknown", label, "medium")
    if f.kind == "cuda_error":
        return Route("other", label, "high")
    if f.kind == "traceback":
        if "tokenize" in f.tags and not f.kinds - {"traceback"}:
            # Cut inside the API server's tokenizing of one prompt, whose only raise of vLLM's
            # own is the length check (_validate_input): a request rejected, the engine is fine.
            return Route("request_too_long", "runtime", "medium")
        if "kv_check" in f.tags:
            # Cut inside vLLM's KV capacity check, whose only raise is the KV capacity error.
            return Route("kv_cache_capacity", "startup", "medium")
        return Route("unknown", label, "medium")
    return Route(None, label, "low")
