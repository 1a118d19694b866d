"""Out of memory while loading the weights: the model does not fit the GPU(s).

What it means:
    The process ran out of GPU memory while building the model or reading its weights
    (frames such as ``load_model``, ``load_weights``, ``create_weights``, a repack of
    quantized weights, or a failure right after "Starting to load model" and before
    "Model loading took"). Nothing about the KV cache or requests is involved yet.

Why it happens:
    The weights (parameters x bytes per parameter) are larger than one GPU, or than each
    GPU's share under the current ``tensor_parallel_size``; a quantized checkpoint loaded
    through a path that materialises full-precision weights; a co-tenant holding memory.

Remedies, in order:
    1. Quantization: a checkpoint in fewer bits (AWQ, GPTQ, FP8 ... where the GPU
       generation supports it; an already-quantized checkpoint needs no ``--quantization``).
    2. Tensor parallelism over the GPUs of the node: the smallest ``--tensor-parallel-size``
       whose share fits.
    3. A smaller model.
    When the weights clearly fit, the log points at a bug or a regression (a version
    change, a fallback implementation): try another vLLM version, and report it.
    On a TPU, XLA's compile-time "Ran out of memory in memory space hbm" before any line
    shows the weights loaded is here: the program holds the weights, sharded over the slice.
    Compare the model's size with the chips x HBM per chip: a larger slice (more chips), or
    quantized weights, then a smaller model; never the compiled shapes first.

What does not help:
    Raising ``gpu_memory_utilization`` (the weights need the memory before the budget
    matters; most of it is granted already); lowering ``max_model_len`` or ``max_num_seqs``
    (the KV cache is not allocated yet).

Sources:
    vllm/v1/worker/gpu_model_runner.py load_model ("Failed to load model - not enough GPU
    memory"); vllm/worker/model_runner.py load_model; vllm/model_executor/model_loader;
    docs.vllm.ai "Conserving Memory" (configuration/conserving_memory: tensor parallelism,
    quantization).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from .. import thresholds
from ..events import Phase
from ..memory import FP32_DTYPES, model_weights_estimate
from ..run import Failure, Run
from ..verdict import Finding, Remedy
from .oom import device_memory, named_pids, oom_facts
from .plan import Constraints, constraints
from .rule import Rule, config_evidence, consequence_evidence, ev, failure_evidence, finding, remedy

#: Words in a model name or quantization config that say the checkpoint is already quantized.
QUANTIZED_WORDS = (
    "awq",
    "gptq",
    "int4",
    "int8",
    "w4a16",
    "w8a8",
    "w4a8",
    "nvfp4",
    "mxfp4",
    "fp8",
    "bnb",
    "4bit",
    "8bit",
    "gguf",
    "exl2",
    "quant",
    "compressed-tensors",
)


def _sentence(text: str) -> str:
    """``text`` with its first letter in capitals, the rest as written (str.capitalize would
    lower "GiB" and "GPU")."""
    return text[:1].upper() + text[1:]


def quantized(run: Run, failures: Sequence[Failure]) -> Optional[str]:
    """How the log shows the checkpoint is already quantized (the method or the evidence),
    or None: the run's quantization config, the model's name, or frames that only run for
    quantized weights (a Marlin repack, a layer under layers/quantization)."""
    q = run.value("quantization")
    if q:
        return str(q)
    name = str(run.value("model") or "").rsplit("/", 1)[-1].lower()
    word = next((w for w in QUANTIZED_WORDS if w in name), None)
    if word:
        return f"{word} (model name)"
    if any("quantized_weights" in f.all_tags for f in failures):
        return "frames of a quantized-weights kernel"
    return None


def _smallest_tp(W: float, G: float) -> int:
    """The smallest power-of-two TP whose per-GPU share of ``W`` GiB of weights (with the
    overhead) leaves KV_FLOOR_SHARE of each ``G`` GiB GPU inside WEIGHTS_USABLE_SHARE."""
    room = G * (thresholds.WEIGHTS_USABLE_SHARE - thresholds.KV_FLOOR_SHARE)
    need = max(1, math.ceil(W * thresholds.WEIGHTS_OVERHEAD / room)) if room > 0 else 1
    return 1 << (need - 1).bit_length()


def _regression(run: Run, facts: Dict[str, Any], G: Optional[float]) -> Optional[str]:
    """The weights loaded so far cannot fill the GPU: a few of the checkpoint's shards loaded
    while the process already holds nearly all of it. Returns the sentence that says so."""
    loaded, total = run.value("shards_loaded"), run.value("shards_total")
    held = facts.get("vllm_process_gib") or facts.get("pytorch_allocated_gib")
    if not (loaded and total and held and G):
        return None
    if loaded / total > thresholds.REGRESSION_SHARDS_SHARE or held < thresholds.REGRESSION_HELD_SHARE * G:
        return None
    return (
        f"only {loaded} of {total} checkpoint shards were loaded while the process already held {held:.2f} of "
        f"{G:.2f} GiB: the weights read so far cannot fill the GPU"
    )


def _span_why(c: Constraints, tp: int) -> str:
    """What shows the run's GPUs: the printed world size, or what proves a lower bound (the GPU
    index a worker failed on, the workers' names: :meth:`~.plan.Constraints.tp_at_least`)."""
    if c.run.value("world_size"):
        return "as the world size says"
    return f"at least that many, since {c.tp_at_least()[1]}"


def _tp_remedy(c: Constraints, est: Optional[Dict[str, Any]], facts: Dict[str, Any], G: Optional[float]) -> Remedy:
    """Tensor parallelism: the smallest split that fits, from the weights' size when the log
    tells it (the model name), else at least the memory already allocated when loading failed.
    The number is printed only where :meth:`~.plan.Constraints.raise_tp` allows one (the TP in
    force printed, the GPUs for it shown); else the split that would fit stays in the reason."""
    action = "Split the weights over more GPUs of the node with tensor parallelism"
    now = c.in_force("tensor_parallel_size")
    tp = int(now.high or 1)
    if not now.known and tp > 1:
        return remedy(
            action + " only if the node has more GPUs",
            None,
            f"the run already spans {tp} GPUs, {_span_why(c, tp)}; add nodes (pipeline parallelism) or use a "
            "smaller model",
        )
    if est and G:
        need = _smallest_tp(est["weights_gib_estimate"], G)
        facts["smallest_tensor_parallel_size"] = need
        why = (
            f"weights about {est['weights_gib_estimate']:.1f} GiB ({est['params_billion']:g}B params x {est['bits']} "
            f"bits) over {G:.2f} GiB GPUs, leaving {thresholds.KV_FLOOR_SHARE:.0%} of each for the KV cache"
        )
        if need <= tp:
            return remedy(action, None, f"{why}: TP {tp} should already fit")
        return c.raise_tp(need, action, f"{why}: {need} GPUs")
    allocated = facts.get("pytorch_allocated_gib")
    if allocated and G:
        need = max(2 * tp, _smallest_tp(allocated, G))
        why = (
            f"at least: the weights are more than the {allocated:.2f} GiB PyTorch had allocated when loading failed; "
            "the log does not say the model's size, so more may be needed"
        )
        return c.raise_tp(need, action, why)
    return c.raise_tp(2 * tp, action, "each GPU holds 1/TP of the weights; the model's size is not in the log")


def _slice_remedies(
    facts: Dict[str, Any], est: Optional[Dict[str, Any]], G: Optional[float], q: Optional[str]
) -> List[Any]:
    """A TPU's compiled program out of HBM before any line shows the weights loaded (z10):
    the weights are its arguments, sharded over the slice's chips, so the first question is
    the model's size against chips x HBM per chip; a larger slice (more chips) or fewer bits
    per weight, never the compiled shapes (they come after the weights fit)."""
    need, over = facts.get("required_gib"), facts.get("exceeded_by_gib")
    hbm = f"{G:g} GiB of HBM" if G else "the chip's HBM"
    program = (
        f"XLA's program needed {need:g} GiB per chip of {hbm}" + (f", {over:g} GiB over" if over else "")
        if need
        else f"XLA's program did not fit {hbm} per chip"
    )
    if est and G:
        chips = _smallest_tp(est["weights_gib_estimate"], G)
        size = (
            f"{program}; about {est['weights_gib_estimate']:.0f} GiB of weights need at least {chips} chips "
            f"of {G:g} GiB, before the KV cache (the slice's chip count is not in the log)"
        )
    else:
        size = (
            f"{program}; the model's size is not in the log: parameters x bytes per parameter (2 in bf16) "
            "against the chips x HBM of the slice, with room left for the KV cache"
        )
    return [
        remedy(
            "Compare the model's size with the slice: if the weights do not fit the chips x HBM per chip with room "
            "for the KV cache, use a larger TPU slice (more chips, tensor_parallel_size set to the chips)",
            None,
            size,
        ),
        None
        if q
        else remedy(
            "Or serve quantized weights (int8 or fp8, where vLLM's TPU backend supports the method)",
            None,
            "fewer bits per weight: each chip's shard shrinks with them",
        ),
        remedy("Or serve a smaller model"),
    ]


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    c = constraints(run)
    facts: Dict[str, Any] = oom_facts(failures, run)
    for key in ("model", "tensor_parallel_size", "pipeline_parallel_size", "quantization", "gpu_memory_utilization"):
        if run.value(key) is not None:
            facts[key] = run.value(key)
    G = facts.get("gpu_total_gib") or c.gpu_total_gib
    tp = int(c.in_force("tensor_parallel_size").high or 1)
    est = model_weights_estimate(run.value("model"), run.value("quantization"), run.value("dtype"))
    notes: List[str] = []
    suspects = []
    if est:
        facts.update(est)
        if (
            G
            and est["weights_gib_estimate"] / tp * thresholds.WEIGHTS_OVERHEAD
            < G * thresholds.WEIGHTS_CLEARLY_FIT_SHARE
        ):
            suspects.append(
                f"the weights (about {est['weights_gib_estimate']:.1f} GiB) should fit {G:.2f} GiB per GPU at TP {tp}"
            )
        bits_fit = (
            [
                b
                for b in (8, 4)
                if est["params_billion"] * 1e9 * b / 8 / 2**30 * thresholds.WEIGHTS_OVERHEAD
                < G * thresholds.WEIGHTS_USABLE_SHARE
            ]
            if G
            else []
        )
        if bits_fit and est["bits"] > bits_fit[0]:
            facts["weight_bits_that_fit_one_gpu"] = bits_fit[0]
    shards = _regression(run, facts, G)
    if shards:
        suspects.append(shards)
    q = quantized(run, failures)
    if q:
        facts["already_quantized"] = q
    if suspects:
        notes.append(
            _sentence("; ".join(suspects)) + ": the OOM points at something else (a fallback implementation, a "
            "quantized path materialising full-precision weights, a version regression)."
        )
    tpu = facts.get("oom_backend") == "TPU"
    if tpu:
        for key in ("required_gib", "exceeded_by_gib"):
            v = next((f.data[key] for f in failures if f.data.get(key) is not None), None)
            if v is not None:
                facts[key] = v
    title = f"Out of {device_memory(facts)} while building the model / loading weights"
    if tpu and facts.get("required_gib") and G:
        title += f": the program needs {facts['required_gib']:g} GiB per chip of {G:g} GiB"
    elif G:
        title += f" ({G} GiB {'per chip' if tpu else 'GPU'})"
    if suspects:
        title += ": the weights should fit, suspect a bug or regression"
    bits = facts.get("weight_bits_that_fit_one_gpu")
    co = facts.get("co_tenant_pids") or []
    dtype = run.value("dtype")
    fp32 = str(dtype or "").lower() in FP32_DTYPES
    if fp32:
        facts["dtype"] = dtype
    rem = [
        # Full precision asked for: 16 bits halves the weights before any other change.
        c.set_to(
            "dtype",
            "auto",
            "Load the weights in 16 bits (auto: the checkpoint's bfloat16, or float16 where the GPU lacks bfloat16)",
            f"--dtype {dtype} loads 32-bit weights, twice the 16-bit size"
            + (
                f": about {est['weights_gib_estimate'] / 2:.1f} GiB instead of {est['weights_gib_estimate']:.1f}"
                if est
                else ""
            ),
        )
        if fp32
        else None,
        remedy(
            f"Free the GPU of process(es) {named_pids(facts)}: the weights may then fit",
            None,
            f"they hold {facts.get('co_tenant_total_gib', 0):.2f} GiB of the GPU vLLM was loading into",
            "host",
        )
        if co
        else None,
        # When the weights clearly fit, the size remedies are not the first thing to try.
        remedy(
            "The weights should fit: try another vLLM version (or the model's native implementation) and report "
            "the regression",
            None,
            "; ".join(suspects),
        )
        if suspects
        else None,
        None
        if q
        else remedy(
            "Serve a quantized checkpoint (fewer bits per weight), one the GPU generation supports",
            None,
            f"{bits}-bit weights would fit one GPU" if bits else None,
        ),
        _tp_remedy(c, est, facts, G),
        remedy("Or serve a smaller model"),
    ]
    if tpu:  # the slice, not a node's GPUs: chips x HBM against the model's size
        rem = rem[:3] + _slice_remedies(facts, est, G, q)
    if q:
        notes.append(f"The checkpoint is already quantized ({q}): quantizing again is not the remedy.")
    evidence = (
        failure_evidence(failures, "out of memory")
        + [ev(run.phase_lines.get(Phase.LOADING_WEIGHTS), "phase: loading weights")]
        + config_evidence(
            run,
            ("model", "tensor_parallel_size", "quantization", "world_size", "shards_loaded")
            + (("dtype",) if fp32 else ()),
        )
        + consequence_evidence(run, 1)
    )
    dont = [
        "Raising gpu_memory_utilization: the weights need the memory before the budget matters",
        "Lowering max_model_len or max_num_seqs: the KV cache is not allocated yet",
    ]
    if tpu:
        dont.append("Compiling for fewer shapes (max_num_seqs, enforce_eager): the program holds the weights first")
    forbids = [("gpu_memory_utilization", "raise", "the weights need the memory before the budget matters")]
    return [finding(RULE, run, "startup", title, facts, evidence, rem, dont, notes, forbids=forbids)]


RULE = Rule(
    code="VD100",
    name="weight_load_oom",
    severity="critical",
    summary="Startup failed: out of GPU memory while loading the model weights.",
    doc=__doc__,
    check=check,
)
