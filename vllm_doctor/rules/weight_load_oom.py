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

What does not help:
    Raising ``gpu_memory_utilization`` (the weights need the memory before the budget
    matters; most of it is granted already); lowering ``max_model_len`` or ``max_num_seqs``
    (the KV cache is not allocated yet).

Sources:
    vllm/v1/worker/gpu_model_runner.py load_model ("Failed to load model - not enough GPU
    memory"); vllm/worker/model_runner.py load_model; model_executor/model_loader;
    shared/domain.md "Weights do not fit".
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Sequence

from .. import thresholds
from ..events import Phase
from ..run import Failure, Run
from ..units import tidy
from ..verdict import Finding
from .oom import oom_facts
from .rule import Rule, config_evidence, consequence_evidence, ev, failure_evidence, finding, remedy

_PARAMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s?[Bb](?![a-zA-Z])")
_BITS = (
    ("awq", 4),
    ("gptq", 4),
    ("int4", 4),
    ("w4a16", 4),
    ("nvfp4", 4),
    ("fp4", 4),
    ("mxfp4", 4),
    ("bnb", 4),
    ("4bit", 4),
    ("fp8", 8),
    ("int8", 8),
    ("w8a8", 8),
    ("8bit", 8),
)


def model_weights_estimate(
    model: Optional[str], quantization: Optional[str], dtype: Optional[str]
) -> Optional[Dict[str, Any]]:
    """Weights size from a model name (``Qwen3-30B-A3B-GPTQ`` -> 30e9 params at 4 bits).

    Returns ``{"params_billion", "bits", "weights_gib_estimate"}`` or None when the name
    carries no parameter count. Total parameters count (an MoE's active share is not what
    memory holds). Bits come from the quantization named in the config or the model name,
    else 16 (the dtype of an unquantized checkpoint).
    """
    if not model:
        return None
    name = model.rsplit("/", 1)[-1]
    m = _PARAMS.search(name)
    if not m:
        return None
    params = float(m.group(1))
    low = f"{name} {quantization or ''} {dtype or ''}".lower()
    bits = next((b for key, b in _BITS if key in low), 32 if "float32" in low else 16)
    gib = params * 1e9 * bits / 8 / 2**30
    return {"params_billion": params, "bits": bits, "weights_gib_estimate": tidy(gib, 2)}


def _sizing(facts: Dict[str, Any], est: Dict[str, Any], G: float, tp: int, notes: List[str]) -> Dict[str, Any]:
    """TP and bits that fit, from the estimated weights and the GPU total. Adds the facts
    ``smallest_tensor_parallel_size`` and ``weight_bits_that_fit_one_gpu``; returns
    ``{"tp_flag", "why_tp", "suspect_bug"}``."""
    W = est["weights_gib_estimate"]
    usable = G * thresholds.WEIGHTS_USABLE_SHARE
    need_tp = max(1, math.ceil(W * thresholds.WEIGHTS_OVERHEAD / usable))
    need_tp = 1 << (need_tp - 1).bit_length()
    facts["smallest_tensor_parallel_size"] = need_tp
    out: Dict[str, Any] = {
        "tp_flag": f"--tensor-parallel-size {need_tp}" if need_tp > tp else None,
        "why_tp": f"weights about {W:.1f} GiB ({est['params_billion']:g}B params x {est['bits']} bits) vs {G:.2f} GiB per GPU",
        "suspect_bug": False,
    }
    if W / tp * thresholds.WEIGHTS_OVERHEAD < G * thresholds.WEIGHTS_CLEARLY_FIT_SHARE:  # each share clearly fits
        out["suspect_bug"] = True
        notes.append(
            f"The weights (about {W:.1f} GiB) should fit {G:.2f} GiB per GPU at TP {tp}: "
            "the OOM points at something else (a fallback implementation, a quantized path "
            "materialising full-precision weights, a version regression)."
        )
    bits_fit = [b for b in (8, 4) if est["params_billion"] * 1e9 * b / 8 / 2**30 * thresholds.WEIGHTS_OVERHEAD < usable]
    if bits_fit and est["bits"] > bits_fit[0]:
        facts["weight_bits_that_fit_one_gpu"] = bits_fit[0]
    return out


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    facts: Dict[str, Any] = oom_facts(failures, run)
    for key in ("model", "tensor_parallel_size", "pipeline_parallel_size", "quantization", "gpu_memory_utilization"):
        if run.value(key) is not None:
            facts[key] = run.value(key)
    G = facts.get("gpu_total_gib")
    tp = run.value("tensor_parallel_size") or 1
    est = model_weights_estimate(run.value("model"), run.value("quantization"), run.value("dtype"))
    notes: List[str] = []
    sizing = {"tp_flag": None, "why_tp": "each GPU holds 1/TP of the weights", "suspect_bug": False}
    if est:
        facts.update(est)
        if G:
            sizing = _sizing(facts, est, G, tp, notes)
    tp_flag = sizing["tp_flag"]
    if tp_flag is None and not sizing["suspect_bug"]:
        tp_flag = f"--tensor-parallel-size {2 * tp}"
    title = "Out of GPU memory while building the model / loading weights"
    if G:
        title += f" ({facts.get('gpu_total_gib')} GiB GPU)"
    if sizing["suspect_bug"]:
        title += ": the weights should fit, suspect a bug or regression"
    bits = facts.get("weight_bits_that_fit_one_gpu")
    rem = [
        # When the weights clearly fit, the size remedies are not the first thing to try.
        remedy(
            "The weights should fit: try another vLLM version (or the model's native implementation) and report "
            "the regression"
        )
        if sizing["suspect_bug"]
        else None,
        remedy(
            "Serve a quantized checkpoint (fewer bits per weight), one the GPU generation supports",
            None,
            f"{bits}-bit weights would fit one GPU" if bits else None,
        ),
        remedy("Split the weights over more GPUs of the node with tensor parallelism", tp_flag, sizing["why_tp"]),
        remedy("Or serve a smaller model"),
    ]
    evidence = (
        failure_evidence(failures, "out of memory")
        + [ev(run.phase_lines.get(Phase.LOADING_WEIGHTS), "phase: loading weights")]
        + config_evidence(run, ("model", "tensor_parallel_size", "quantization"))
        + consequence_evidence(run, 1)
    )
    dont = [
        "Raising gpu_memory_utilization: the weights need the memory before the budget matters",
        "Lowering max_model_len or max_num_seqs: the KV cache is not allocated yet",
    ]
    return [finding(RULE, run, "startup", title, facts, evidence, rem, dont, notes)]


RULE = Rule(
    code="VD100",
    name="weight_load_oom",
    severity="critical",
    summary="Startup failed: out of GPU memory while loading the model weights.",
    doc=__doc__,
    check=check,
)
