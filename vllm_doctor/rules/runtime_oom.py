"""Out of memory while serving: something took the headroom vLLM counted on.

What it means:
    The server had started (its KV cache was reserved at startup) and then a request's
    activations, or a sampler/logits buffer, could not be allocated. Since the KV cache does
    not grow at runtime, the cause usually lies outside vLLM's own accounting.

Why it happens:
    * a co-tenant: another process on the same GPU (a second vLLM, a notebook, a training
      job) - the PyTorch message lists it as ``Process N has X GiB memory in use``;
    * ``gpu_memory_utilization`` set above what was really free, leaving no headroom for
      activations and fragmentation;
    * an input of unusual size: prompt logprobs over a long prompt (``echo``), a huge image
      or video, a long LoRA request.

Remedies, in order:
    0. When the frames show one request's input drove the allocation (prompt logprobs'
       ``_get_prompt_logprobs_dict``, a multimodal encoder): bound that request first, then the
       per-step budget, then co-tenants; processes of a bare CUDA context's size (at most
       ``CUDA_CONTEXT_MAX_GIB``) are a note (rules/request_input.py).
    1. Move the co-tenant processes off this GPU (``nvidia-smi``; the PIDs are in the OOM
       message).
    2. Lower ``--gpu-memory-utilization`` to leave headroom (or to what is really free).
    3. Bound request size: ``--max-num-batched-tokens`` (the per-step activation budget),
       cap prompt logprobs / multimodal input sizes (``--limit-mm-per-prompt``).
    4. Against fragmentation (large "reserved but unallocated"): set
       ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.
    Waking from sleep mode (``wake_up`` re-maps the weights and KV cache sleep released:
    the memory is wanted back whole, not for a request): free what another process took
    meanwhile, wake in stages (``/wake_up?tags=weights`` then ``?tags=kv_cache``), or lower
    this instance's or the neighbour's ``gpu_memory_utilization`` so both fit.

    A lowered utilization is never printed outside (0, 1]: when no value leaves the headroom,
    the remedy says so (an allocation larger than the whole device is not judged here at all:
    rules/impossible_allocation.py).

What does not help:
    Lowering ``max_model_len`` or raising ``gpu_memory_utilization`` (more KV cache leaves
    less headroom for activations); killing a "Process N" that is vLLM itself (inside a
    container the message names vLLM's own process by its host PID).

Sources:
    pytorch c10/cuda/CUDACachingAllocator.cpp (message, process list); PyTorch docs "CUDA
    semantics", memory management (notes/cuda: expandable_segments); docs.vllm.ai
    "Conserving Memory" (configuration/conserving_memory); docs.vllm.ai "Sleep Mode"
    (features/sleep_mode) and vllm/entrypoints/openai/api_server.py wake_up (``tags``, v0.8.5+).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import regex

from .. import thresholds
from ..events import Phase
from ..memory import model_weights_estimate, utilization_floor
from ..run import Failure, Run
from ..verdict import Finding
from .oom import device_memory, monitor, named_pids, oom_facts
from .oom_provenance import expandable_done, sleep_mode
from .plan import Constraints, constraints, fraction_in_range
from .request_input import KINDS, bound_remedy, request_path
from .rule import Rule, config_evidence, consequence_evidence, failure_evidence, finding, remedy
from .tree import failure_phase


def _oversized(failures: Sequence[Failure], facts: Dict[str, Any]) -> Tuple[bool, Optional[str]]:
    """Was one request's size behind the allocation? Frames that process a single input
    (prompt logprobs, an image or video) say so, and so does an allocation that is a large
    share of the GPU."""
    G, free, tried = facts.get("gpu_total_gib"), facts.get("gpu_free_gib"), facts.get("tried_to_allocate_gib")
    oversized = bool(
        any(f.data.get("in_model_execution") for f in failures)
        and tried
        and free
        and tried > thresholds.OVERSIZED_ALLOCATION_GIB
    )
    tags = set().union(*(f.all_tags for f in failures))
    input_kind = None
    if "multimodal_input" in tags:
        oversized, input_kind = True, "multimodal input"
    elif "oversized_input" in tags:
        oversized, input_kind = True, "prompt logprobs / input"
    if tried and G and tried >= thresholds.OVERSIZED_ALLOCATION_SHARE * G:
        oversized = True
    return oversized, input_kind


def _cuda_contexts(facts: Dict[str, Any]) -> bool:
    """Every co-tenant the message lists holds at most
    :data:`~vllm_doctor.thresholds.CUDA_CONTEXT_MAX_GIB`: the size of a bare CUDA context."""
    held = list((facts.get("co_tenant_gib") or {}).values())
    return bool(held) and all(g <= thresholds.CUDA_CONTEXT_MAX_GIB for g in held)


def _title(facts: Dict[str, Any], co: List[int], oversized: bool, path: Optional[str] = None) -> str:
    if path and not co:
        return (
            f"Out of {device_memory(facts)} while serving: one request's {KINDS[path]} asked for "
            f"{facts.get('tried_to_allocate_gib') or 0:.2f} GiB"
        )
    if co:
        return (
            f"Out of {device_memory(facts)} while serving: co-tenant process(es) {named_pids(facts)} hold "
            f"{facts.get('co_tenant_total_gib', 0):.2f} GiB of the GPU"
        )
    if facts.get("held_unlisted_gib"):
        return (
            f"Out of {device_memory(facts)} while serving: {facts['held_unlisted_gib']:.2f} GiB of the GPU is held "
            "outside vLLM by processes the message does not list"
        )
    if oversized:
        return (
            f"Out of {device_memory(facts)} while serving: one allocation of {facts['tried_to_allocate_gib']:.2f} GiB "
            "(an oversized request)"
        )
    if "co_tenant_pids" in facts:
        return f"Out of {device_memory(facts)} while serving: vLLM itself used the headroom (no co-tenant listed)"
    return f"Out of {device_memory(facts)} while serving (the message names no processes: check for co-tenants)"


def _lower_utilization(c: Constraints, facts: Dict[str, Any]) -> Tuple[Optional[float], Optional[str]]:
    """A gpu_memory_utilization that leaves the failed allocation (at least MIN_HEADROOM_GIB)
    of headroom below the budget that ran (printed, or vLLM's default), with the arithmetic.
    What vLLM held at the OOM already includes the overshoot, so it is never the base."""
    now = c.in_force("gpu_memory_utilization")
    G, tried = facts.get("gpu_total_gib"), facts.get("tried_to_allocate_gib")
    if not (G and tried) or now.low is None:
        return None, None
    headroom = max(tried, thresholds.MIN_HEADROOM_GIB)
    target = math.floor((now.low - headroom / G) * 100) / 100
    why = f"{now.low:g} x {G:.2f} GiB, less {headroom:.2f} GiB of headroom for the failed allocation"
    if not now.known:
        why += f"; {now.why}"
        if facts.get("vllm_process_gib"):
            why += f"; vLLM held {facts['vllm_process_gib']:.2f} GiB at the OOM, the overshoot included"
    return target, why


def _unserved_default(run: Run, failures: Sequence[Failure], c: Constraints) -> Optional[str]:
    """Why no utilization target is printed from vLLM's default: the log prints none and shows
    the server neither ready nor serving (no stats, no request, no "Starting vLLM API server",
    nothing that places the OOM: :func:`~.tree.failure_phase` finds no step for it, so the
    tree routed it to runtime for want of any),
    so nothing says the default is what ran or that the OOM came after startup, where a lower
    utilization leaves headroom (hunt10 w01: a bare V0 worker OOM). None when a number may be
    printed. remedies3."""
    if c.in_force("gpu_memory_utilization").known or run.phase >= Phase.READY:
        return None
    if any(failure_phase(f, run) is not None for f in failures):
        return None  # something places the OOM in serving (tree.failure_phase: frames, wording, progress)
    return (
        "the log shows no serving and nothing in it places the OOM after startup, so vLLM's default is not sure "
        "to be what ran: lower it from the value the launch command sets"
    )


def _weights_floor(run: Run, G: Optional[float]) -> Optional[Tuple[float, str]]:
    """The share of a ``G`` GiB GPU the weights need (estimated from the model's name, per GPU
    under tensor parallelism), with why; None when the name gives no size."""
    est = model_weights_estimate(run.value("model"), run.value("quantization"), run.value("dtype"))
    if not (est and G):
        return None
    per_gpu = est["weights_gib_estimate"] / max(1, int(run.value("tensor_parallel_size") or 1))
    return utilization_floor(G, weights_gib=per_gpu, overhead=thresholds.WEIGHTS_OVERHEAD)


#: Model names of vision-language families vLLM serves (vllm/model_executor/models: Qwen2-VL /
#: Qwen2.5-VL / Qwen3-VL, LLaVA and LLaVA-NeXT/OneVision, InternVL, MiniCPM-V, Pixtral, Llama
#: 3.2 Vision, Phi-3/3.5/4 vision and multimodal, Idefics, Molmo, GLM-4V, DeepSeek-VL2, Kimi-VL,
#: Gemma 3 [multimodal from 4B]): a token of the name, case-insensitive.
MULTIMODAL_MODEL = regex.compile(
    r"(?i)(?<![a-z0-9])(?:[a-z0-9.]*-?vl[0-9]*|llava[\w.-]*|internvl[\w.-]*|minicpm-[\w.]*v[\w.-]*|pixtral[\w.-]*"
    r"|[\w.-]*-vision[\w.-]*|idefics[\w.-]*|molmo[\w.-]*|glm-4v[\w.-]*|phi-4-multimodal[\w.-]*)(?![a-z0-9])"
)


def multimodal_model(run: Run, failures: Sequence[Failure]) -> Optional[str]:
    """The vision-language model the run serves, by its name (:data:`MULTIMODAL_MODEL`): the
    ``model`` the log printed, else a name the failure's own lines give (a serving framework's
    "model id: Qwen2.5-VL-32B", p26); None when no name is multimodal."""
    texts = [str(run.value("model") or "")] + [x.text for f in failures for x in f.lines[:4]]
    for t in texts:
        m = MULTIMODAL_MODEL.search(t)
        if m:
            return m.group(0)
    return None


def _multimodal_remedy(run: Run, failures: Sequence[Failure]) -> Any:
    """Bound what one request's images cost (a vision encoder's activations grow with the image
    size, and each image is encoded whole): vLLM's ``--limit-mm-per-prompt`` caps the images per
    prompt, the model's processor caps their size (``--mm-processor-kwargs``, e.g. Qwen2-VL's
    ``max_pixels``). None for a model that is not multimodal by name."""
    name = multimodal_model(run, failures)
    if name is None:
        return None
    return remedy(
        "Bound the images of one request: --limit-mm-per-prompt caps how many, the processor's size limit (for "
        "Qwen2-VL and Qwen2.5-VL: --mm-processor-kwargs with max_pixels) caps how large",
        None,
        f"{name} is a vision-language model: each image's encoder activations come on top of the KV cache at "
        "run time; the images that were sent are not in the log, so pick the limits from the workload",
    )


def _batch_remedy(c: Constraints, oversized: bool, input_kind: Optional[str]) -> Any:
    why = "activation memory grows with the tokens processed per step"
    if oversized:
        why = "prompt logprobs / long prompts / large images need activation memory proportional to their size"
        if input_kind == "multimodal input":
            why += "; also cap images per request (--limit-mm-per-prompt)"
    return c.halve(
        "max_num_batched_tokens",
        "Bound the work per step and the size of single requests",
        why,
        unknown="the value in force is not in the log (V0 without chunked prefill uses max_model_len)",
    )


def _waking(run: Run, failures: Sequence[Failure], facts: Dict[str, Any], co: List[int], c: Constraints) -> Finding:
    """Out of memory waking up from sleep mode: the memory sleep released is wanted back
    whole (weights, KV cache), so per-request bounds do not help (hunt4 h03)."""
    rem = [
        remedy(
            f"Move the co-tenant process(es) {named_pids(facts)} off this GPU, or put them to sleep, before "
            "waking this one",
            None,
            f"they hold {facts.get('co_tenant_total_gib', 0):.2f} GiB",
            "host",
        )
        if co
        else remedy(
            "Free what another process took while this one slept before waking it (a second instance, the "
            "trainer of an RL loop: nvidia-smi shows it), or put that one to sleep first",
            None,
            None,
            "host",
        ),
        remedy(
            "Wake in stages: POST /wake_up?tags=weights, then /wake_up?tags=kv_cache once the neighbour has "
            "released its share",
            None,
            "vLLM 0.8.5+ wakes the weights and the KV cache separately",
        ),
        c.lower(
            "gpu_memory_utilization",
            None,
            "Or lower gpu_memory_utilization of this instance or of its neighbour so both fit on the GPU",
            "what the neighbour holds at wake-up is not in the log",
        ),
    ]
    evidence = failure_evidence(failures, "out of memory at wake-up") + consequence_evidence(run, 2)
    dont = [
        "Bounding requests (max_num_batched_tokens, max_num_seqs): no request was running; the memory is the "
        "weights and KV cache sleep mode released",
        "Raising gpu_memory_utilization: it asks for more at wake-up",
    ]
    forbids = [("gpu_memory_utilization", "raise", "it asks for more at wake-up")]
    title = f"Out of {device_memory(facts)} waking up from sleep mode: the memory it released is taken"
    return finding(RULE, run, "runtime", title, facts, evidence, rem, dont, [], forbids=forbids)


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    if not failures:
        return []
    facts: Dict[str, Any] = oom_facts(failures, run)
    U = run.value("gpu_memory_utilization")
    if U is not None:
        facts["gpu_memory_utilization"] = U
    co = facts.get("co_tenant_pids") or []
    G, free, tried = facts.get("gpu_total_gib"), facts.get("gpu_free_gib"), facts.get("tried_to_allocate_gib")
    frag = facts.get("reserved_unallocated_gib")
    oversized, input_kind = _oversized(failures, facts)
    facts["oversized_allocation"] = oversized
    if input_kind:
        facts["oversized_input"] = input_kind
    c = constraints(run)
    target_u, why_u = _lower_utilization(c, facts)
    advised = target_u is not None and target_u > thresholds.MIN_ADVISED_UTILIZATION
    unserved = _unserved_default(run, failures, c)
    if advised and unserved:
        advised, target_u = False, None  # hunt10 w01: 0.81 from an unprinted 0.90, no serving marker
        why_u = f"{why_u}; {unserved}"
    floor = _weights_floor(run, G)
    if advised and floor is not None and target_u < floor[0]:
        advised = False  # never a utilization that cannot hold the weights (hunt6 p19)
        why_u = f"{why_u}: {target_u:.2f} x {G:.2f} GiB cannot hold {floor[1]}"
    if advised:
        facts["gpu_memory_utilization_suggested"] = target_u
    elif target_u is not None and fraction_in_range(target_u):
        why_u = f"{why_u}: {target_u:.2f} would be too little to serve; the GPU is too small for this load"
    elif target_u is not None:  # never print a fraction outside (0, 1] (u06 printed -4.25)
        why_u = f"{why_u}: no value above 0 leaves that much, too little to serve; the GPU is too small for this load"
    if why_u is None and tried is not None and free is not None and G:
        why_u = f"the failed allocation was {tried:.2f} GiB with {free:.3f} GiB free of {G:.2f} GiB"
    if why_u is None:  # m02: the message was cut before its numbers
        why_u = "how much to lower it cannot be worked out: the failed allocation and the GPU's size are not in the log"
    fragmented = bool(frag and frag >= thresholds.FRAGMENTATION_GIB)
    # never repeated when on (said under "does not help"), never where vLLM's sleep-mode allocator refuses it
    expandable_on = fragmented and expandable_done(run)
    fragmented = fragmented and not expandable_on and not sleep_mode(run, failures)
    if any("wake_up" in f.all_tags for f in failures) or "wake_up" in run.sibling_tags:
        return [_waking(run, failures, facts, co, c)]
    path = request_path(failures)
    contexts = bool(path and co and _cuda_contexts(facts))
    co_rem = (
        remedy(
            f"Move the co-tenant process(es) {named_pids(facts)} off this GPU (check with {monitor(facts)})",
            None,
            f"they hold {facts.get('co_tenant_total_gib', 0):.2f} GiB vLLM did not account for",
            "host",
        )
        if co
        else remedy(
            f"Find and move what holds {facts['held_unlisted_gib']:.2f} GiB of this GPU outside vLLM (run "
            f"{monitor(facts)} on the host: the message lists no other process, a container cannot see them)",
            None,
            None,
            "host",
        )
        if facts.get("held_unlisted_gib")
        else None
    )
    rem = [
        co_rem,
        c.lower(
            "gpu_memory_utilization",
            target_u if advised else None,
            "Lower gpu_memory_utilization to leave headroom for activations",
            why_u,
        ),
        _multimodal_remedy(run, failures),
        _batch_remedy(c, oversized, input_kind),
        remedy(
            "Reduce fragmentation: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            None,
            f"{frag:.2f} GiB is reserved by PyTorch but unallocated",
            "host",
        )
        if fragmented
        else None,
    ]
    if path:
        # The frames show one request's input drove the allocation: bound it first, then the
        # per-step budget, then what else holds the GPU (q25; rules/request_input.py).
        facts["request_path"] = KINDS[path]
        rest = [r for r in rem if r is not co_rem]
        rem = [bound_remedy(path, run), rest[1], None if contexts else co_rem, rest[0], *rest[2:]]
    evidence = (
        failure_evidence(failures, "out of memory")
        + config_evidence(run, ("gpu_memory_utilization", "max_num_batched_tokens"))
        + consequence_evidence(run, 2)
    )
    dont = [
        "Raising gpu_memory_utilization: a larger KV cache leaves less headroom",
        "Lowering max_model_len: the KV cache was already reserved at startup",
    ]
    if expandable_on:
        dont.append("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the log shows it on already")
    notes = []
    if facts.get("co_tenant_pids") == [] and facts.get("vllm_pid"):
        notes.append(
            f"Process {facts['vllm_pid']} in the message is vLLM itself (seen across a container PID namespace), "
            "not a co-tenant."
        )
    if contexts:
        sizes = ", ".join(f"{g:.2f}" for g in (facts.get("co_tenant_gib") or {}).values())
        notes.append(
            f"Process(es) {', '.join(map(str, co))} hold {sizes} GiB each: the size of a bare CUDA context (another "
            "vLLM process, an orphan of an earlier run), not what ran this GPU out; free them once the request is bounded."
        )
    forbids = [("gpu_memory_utilization", "raise", "a larger KV cache leaves less headroom")]
    title = _title(facts, [] if contexts else co, oversized, path)
    return [finding(RULE, run, "runtime", title, facts, evidence, rem, dont, notes, forbids=forbids)]


RULE = Rule(
    code="VD200",
    name="runtime_oom",
    severity="critical",
    summary="Out of GPU memory while serving: a co-tenant, too little headroom, or an oversized input.",
    doc=__doc__,
    check=check,
)
