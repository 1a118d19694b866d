"""The quantization method (or dtype) needs a newer GPU than this one.

What it means:
    vLLM checks the GPU's compute capability (major x 10 + minor: 75 Turing, 80 A100, 86
    RTX 30xx/A10, 89 L4/RTX 40xx, 90 H100) against what the method's kernels need: "The
    quantization method fp8 is not supported for the current GPU. Minimum capability: 89.
    Current capability: 86." (compressed-tensors: ``_check_scheme_supported``); bfloat16
    needs 8.0.

Why it happens:
    A checkpoint quantized for newer hardware (FP8, NVFP4, some W4A16/W8A8 schemes), or a
    ``--quantization`` flag the GPU generation cannot accelerate.

Remedies, in order:
    1. Use a checkpoint in a format this GPU supports (e.g. AWQ / GPTQ on Turing/Ampere, or
       the unquantized model with TP), or ``--dtype half`` where bfloat16 is the problem.
    2. Or run on a GPU with at least the minimum capability.

What does not help:
    Memory settings (``gpu_memory_utilization``, ``max_model_len``): this is not a memory
    problem.

Sources:
    vllm/config/vllm.py _get_quantization_config;
    vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py
    _check_scheme_supported; vllm/platforms/cuda.py (bfloat16); docs.vllm.ai "Supported
    Hardware" (features/quantization/supported_hardware).
"""

from __future__ import annotations

from typing import List, Sequence

from ..run import Failure, Run
from ..verdict import Finding
from .plan import constraints
from .rule import Rule, config_evidence, failure_evidence, finding, merged_data, remedy


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    data = merged_data(failures)
    keys = ("quantization", "min_capability", "current_capability", "dtype", "supported_dtypes")
    facts = {k: data[k] for k in keys if k in data}
    # The model refusing a dtype the method takes (gemma3 and float16): that dtype is tried
    # and ruled out, so it is no remedy.
    refused = sorted({f.data["refused_dtype"] for f in failures if f.data.get("refused_dtype")})
    if refused:
        facts["model_refuses_dtypes"] = refused
    if "quantization" not in facts and run.value("quantization"):
        facts["quantization"] = run.value("quantization")
    if "min_capability" in facts:
        title = (
            f"Quantization {facts.get('quantization', 'scheme')} needs compute capability "
            f"{facts['min_capability']}, this GPU has {facts['current_capability']}"
        )
    elif "supported_dtypes" in facts:
        title = (
            f"Quantization {facts.get('quantization', '')} does not run in {facts.get('dtype')}: "
            f"it takes {', '.join(facts['supported_dtypes'])}"
        )
    elif "dtype" in facts:  # the method's list of dtypes was cut off in the log
        title = f"Quantization {facts.get('quantization', '')} does not run in {facts['dtype']}"
    elif any("quant_check" in f.tags for f in failures):
        title = "Quantization scheme rejected by the GPU capability check (the error line itself is not in the log)"
    else:
        title = "Quantization or dtype not supported on this GPU"
    supported = [d for d in facts.get("supported_dtypes") or [] if d not in refused]
    if facts.get("supported_dtypes") and not supported:
        title += f"; the model refuses {', '.join(refused)}: no dtype suits both"
    rem = [
        # The method takes other activation dtypes: ask for one (vLLM casts the model to it).
        constraints(run).set_to(
            "dtype",
            supported[0],
            f"Run the model in {supported[0]}, a dtype {facts.get('quantization', 'the method')} takes",
            f"{facts.get('dtype')} was refused; the method takes {', '.join(supported)}",
        )
        if supported
        else None,
        remedy(
            f"Serve another checkpoint of the model: {facts.get('quantization')} and this model have no dtype in "
            "common (an unquantized, GPTQ or FP8 one that runs in bfloat16)",
            None,
            f"the method takes {', '.join(facts['supported_dtypes'])}; the model refuses {', '.join(refused)}",
        )
        if facts.get("supported_dtypes") and not supported
        else None,
        remedy(
            f"Run the model in another dtype {facts.get('quantization', 'the method')} takes (--dtype): the "
            "message naming them is cut off in this log; a rerun prints it whole",
            None,
            f"{facts['dtype']} was refused",
        )
        if "dtype" in facts and "supported_dtypes" not in facts
        else None,
    ]
    if "supported_dtypes" not in facts and "dtype" not in facts:  # the GPU refused it, not the method
        rem += [
            remedy(
                "Use a checkpoint format this GPU generation supports (e.g. AWQ/GPTQ on Turing/Ampere)"
                + ("" if "float16" in refused else ", or --dtype half where bfloat16 is refused")
            ),
            remedy(
                "Or run on a GPU with at least the minimum compute capability",
                None,
                f"minimum {facts['min_capability']}, current {facts['current_capability']}"
                if "min_capability" in facts
                else None,
                "host",
            ),
        ]
    evidence = failure_evidence(failures, "the check that refused it") + config_evidence(run, ("quantization", "model"))
    dont = ["Memory settings (gpu_memory_utilization, max_model_len): not a memory problem"]
    return [finding(RULE, run, "startup", title, facts, evidence, rem, dont)]


RULE = Rule(
    code="VD105",
    name="quantization_unsupported",
    severity="critical",
    summary="Startup failed: the quantization method (or dtype) is not supported on this GPU generation.",
    doc=__doc__,
    check=check,
)
