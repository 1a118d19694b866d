"""One allocation larger than the whole device: no memory setting can make it fit.

What it means:
    An out-of-memory message whose request is larger than the device's total memory
    (``Tried to allocate 408.29 GiB`` on a GPU with ``a total capacity of 79.33 GiB``) is no
    capacity problem: neither a lower nor a higher ``gpu_memory_utilization``, more tensor
    parallelism (it splits the weights, not one runaway activation) nor quantized weights can
    make one tensor fit in more memory than the device has. Something asked for a tensor of
    the wrong size: an unbounded input (an image or video at the processor's largest size, a
    multimodal encoder's dummy input during profiling, a huge prompt with ``prompt_logprobs``)
    or an attention path that materialises ``seq_len x seq_len`` scores (no flash attention).

Remedies, in order:
    0. In the profiling run (``profile_run`` frames), whose dummy batch is
       ``max_num_batched_tokens`` tokens as printed: lower it (the allocation grows with it) to
       ``PROFILE_BATCH_SHARE`` of the count that would fill the whole device.
    1. Bound the input that made it: for a multimodal model, the images or videos per prompt
       (``--limit-mm-per-prompt``) and their size (``--mm-processor-kwargs`` with the
       processor's ``max_pixels`` / ``longest_edge``), or serve text-only; for a request, its
       prompt length and ``prompt_logprobs``.
    2. Find the operation that asked for it in the worker's own traceback (the wrapper's
       message says "check the stack trace above"); an attention backend without flash
       attention materialises the full score matrix.
    3. With the inputs bounded and the allocation still absurd: a bug in the model's code or
       the release; report it with the traceback.

What does not help:
    ``gpu_memory_utilization`` either way, ``tensor_parallel_size``, quantization,
    ``max_num_seqs``: no setting gives a device more memory than it has.

Sources:
    pytorch c10/cuda/CUDACachingAllocator.cpp (the message: "Tried to allocate X. GPU N has a
    total capacity of T"); vllm/v1/executor/multiproc_executor.py get_response ("Worker failed
    with error '...', please check the stack trace above for the root cause"); docs.vllm.ai
    "Conserving Memory" (``limit_mm_per_prompt``, ``mm_processor_kwargs``); fixtures/logs u06
    (408.29 of 79.33 GiB, Kimi-VL) and q04 (256 GiB HIP on 15.98 GiB, Qwen3-VL).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import regex

from .. import thresholds
from ..run import Failure, Run
from ..verdict import Finding
from .oom import device_memory, oom_facts
from .plan import constraints
from .rule import Rule, config_evidence, consequence_evidence, failure_evidence, finding, remedy

#: A model name that says it takes images or video (Qwen2.5-VL, Kimi-VL, LLaVA, InternVL,
#: Pixtral, "vision", "omni", "-mm").
_MULTIMODAL_NAME = regex.compile(
    r"(?i)(?:^|[-_/.])(?:vl|vlm|vision|llava|internvl|pixtral|omni|mm)(?:$|[-_/.\d])|llava|-vl-"
)
#: Settings no remedy of this finding touches: none of them gives the device more memory.
_SETTINGS = ("gpu_memory_utilization", "tensor_parallel_size", "max_num_seqs")


def impossible(f: Failure) -> bool:
    """True when OOM failure ``f`` asked for more than
    :data:`~vllm_doctor.thresholds.IMPOSSIBLE_ALLOCATION_SHARE` of its device's total memory
    (both in GiB, from the message: ``tried_to_allocate_gib``, ``gpu_total_gib``)."""
    tried, total = f.data.get("tried_to_allocate_gib"), f.data.get("gpu_total_gib")
    return bool(tried and total and tried > thresholds.IMPOSSIBLE_ALLOCATION_SHARE * total)


def multimodal(run: Run, failures: Sequence[Failure]) -> bool:
    """The run serves images or video: a multimodal model name, a ``limit_mm_per_prompt`` or
    ``mm_processor_kwargs`` setting, or frames of a multimodal encoder (``multimodal_input``)."""
    model = str(run.value("model") or "")
    if model and _MULTIMODAL_NAME.search(model):
        return True
    if run.value("limit_mm_per_prompt") is not None or run.value("mm_processor_kwargs") is not None:
        return True
    return any("multimodal_input" in f.all_tags for f in failures)


def _input_remedy(run: Run, failures: Sequence[Failure]) -> Any:
    if multimodal(run, failures):
        return remedy(
            "Bound the multimodal input: cap images/videos per prompt (--limit-mm-per-prompt) and their size "
            "(--mm-processor-kwargs with the processor's max_pixels / longest_edge), or serve text-only to confirm",
            None,
            "the encoder's input (a real image, or the dummy image at the processor's largest size that "
            "profiling runs) decides the size of this tensor; no memory setting does",
        )
    return remedy(
        "Bound the input that made it: the request's prompt length and prompt_logprobs, any image or video "
        "(--limit-mm-per-prompt, and --mm-processor-kwargs with the processor's max_pixels); at startup, the "
        "profiling run's dummy input",
        None,
        "one input decides the size of this tensor; no memory setting does",
    )


def _profile_batch_remedy(run: Run, failures: Sequence[Failure], tried: Any, total: Any) -> Any:
    """In the profiling run (``profile`` frames), whose dummy batch is ``max_num_batched_tokens``
    tokens as printed, the allocation scales with that count (breakit4 item 4: 1,048,576
    tokens asked 112 GiB of 79.19): lower it to :data:`~vllm_doctor.thresholds.PROFILE_BATCH_SHARE`
    of the most that would fit the device; None elsewhere (a request's input is bounded by
    the next remedy)."""
    now = constraints(run).in_force("max_num_batched_tokens")
    if not (tried and total and now.known and now.low) or not any("profile" in f.all_tags for f in failures):
        return None
    fits = int(now.low * total / tried)
    target = int(fits * thresholds.PROFILE_BATCH_SHARE)
    target = target // 1024 * 1024 if target >= 2048 else max(1, target)  # a count an operator types
    return constraints(run).lower(
        "max_num_batched_tokens",
        target,
        "Lower max_num_batched_tokens: profiling runs a dummy batch of that many tokens",
        f"this allocation grows with it: {now.why} asked {tried:.2f} GiB; about {fits} tokens would fill the whole "
        f"{total:.2f} GiB device, and the weights and the KV cache need room too",
    )


def check(rule: Rule, run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """The finding (class of ``rule``, VD900 other) for OOM failures that :func:`impossible`
    holds; ``phase`` as the tree routed them."""
    facts: Dict[str, Any] = oom_facts(failures, run)
    tried, total = facts.get("tried_to_allocate_gib"), facts.get("gpu_total_gib")
    facts["impossible_allocation"] = True
    if tried and total:
        facts["allocation_over_device"] = round(tried / total, 2)
    title = (
        f"Not a capacity problem: one allocation of {tried:.2f} GiB is larger than the {total:.2f} GiB of "
        f"{device_memory(facts)} the whole device has: a runaway tensor, an unbounded input"
    )
    rem = [
        _profile_batch_remedy(run, failures, tried, total),
        _input_remedy(run, failures),
        remedy(
            "Find the operation that asked for it in the worker's own traceback (printed above the error); an "
            "attention path without flash attention materialises the full seq_len x seq_len scores",
            None,
            None,
        ),
        remedy(
            "With the inputs bounded and the allocation still larger than the device: report it as a bug with "
            "the traceback, the model and the vLLM version",
            None,
            None,
        ),
    ]
    why = f"no setting makes {tried:.2f} GiB fit in a {total:.2f} GiB device"
    dont = [
        f"gpu_memory_utilization (either way), tensor_parallel_size, quantization or max_num_seqs: {why}",
        "Stopping other processes on the GPU: the whole device would still be too small",
    ]
    forbids = [(s, d, why) for s in _SETTINGS for d in ("raise", "lower")]
    evidence = (
        failure_evidence(failures, "an allocation larger than the device")
        + config_evidence(run, ("model", "limit_mm_per_prompt"))
        + consequence_evidence(run, 1)
    )
    return finding(rule, run, phase, title, facts, evidence, rem, dont, forbids=forbids)


def first_impossible(failures: Sequence[Failure]) -> Optional[Failure]:
    """The first failure :func:`impossible` holds, or None."""
    return next((f for f in failures if impossible(f)), None)
