"""The quantization method (or dtype) needs a newer GPU than this one, or this platform lacks it.

What it means:
    vLLM checks the GPU's compute capability (major x 10 + minor: 75 Turing, 80 A100, 86
    RTX 30xx/A10, 89 L4/RTX 40xx, 90 H100) against what the method's kernels need: "The
    quantization method fp8 is not supported for the current GPU. Minimum capability: 89.
    Current capability: 86." (compressed-tensors: ``_check_scheme_supported``); bfloat16
    needs 8.0. On other platforms than CUDA the platform checks the method against its own
    list: "gptq_bitblas quantization is currently not supported in rocm." (ROCm, TPU, XPU,
    HPU, CPU, Neuron; vllm-ascend: npu).

Why it happens:
    A checkpoint quantized for newer hardware (FP8, NVFP4, some W4A16/W8A8 schemes), or a
    ``--quantization`` flag the GPU generation cannot accelerate. On ROCm, XPU, CPU ... a
    method only CUDA builds have kernels for; or one vLLM chose itself: with no
    ``--quantization`` it upgrades a GPTQ/AWQ checkpoint to a faster kernel (``gptq_marlin``,
    ``gptq_bitblas``, ``awq_marlin``) the platform may not have (vllm#17410).

Remedies, in order:
    1. Use a checkpoint in a format this GPU supports (e.g. AWQ / GPTQ on Turing/Ampere, or
       the unquantized model with TP), or ``--dtype half`` where bfloat16 is the problem.
    2. Or run on a GPU with at least the minimum capability.
    Refused by the platform: where vLLM picked the kernel variant, pass the checkpoint's own
    method explicitly (``--quantization gptq`` / ``awq``: no upgrade then), unless the log
    shows it passed; else a checkpoint in a format the platform supports (or unquantized),
    or a vLLM build for the platform that supports the method.

What does not help:
    Memory settings (``gpu_memory_utilization``, ``max_model_len``): this is not a memory
    problem.

Sources:
    vllm/config/vllm.py _get_quantization_config;
    vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py
    _check_scheme_supported; vllm/platforms/cuda.py (bfloat16); vllm/platforms/interface.py
    Platform.verify_quantization (platform lists: rocm.py, tpu.py, xpu.py, cpu.py ...); the
    method override: quantization ``override_quantization_method``; docs.vllm.ai "Supported
    Hardware" (features/quantization/supported_hardware).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ..run import Failure, Run
from ..verdict import Finding
from .plan import constraints
from .rule import Rule, config_evidence, failure_evidence, finding, merged_data, remedy

#: Kernel variants vLLM picks itself for a checkpoint of the method named (with no
#: ``--quantization``, or with the base method's name it keeps the base kernel): the method's
#: ``override_quantization_method`` (gptq_marlin.py, gptq_bitblas.py, awq_marlin.py).
AUTO_VARIANTS = {"gptq_marlin": "gptq", "gptq_bitblas": "gptq", "awq_marlin": "awq"}
#: Platforms whose list holds the plain gptq / awq methods the variants fall back to
#: (vllm/platforms/rocm.py, xpu.py, cpu.py supported_quantization).
PLAIN_KERNELS = ("ROCm", "XPU", "CPU")


def _platform_remedies(run: Run, facts: Dict[str, Any]) -> List[Optional[Any]]:
    """Remedies for a method the platform (not the GPU generation) refused."""
    quant, device = facts.get("quantization", "this method"), facts.get("device", "this platform")
    shown = str(run.value("quantization") or "").lower()
    base = AUTO_VARIANTS.get(str(quant).lower())
    rem: List[Optional[Any]] = []
    if base and device in PLAIN_KERNELS:
        if shown == base:
            rem.append(
                remedy(
                    f"Upgrade vLLM: --quantization {base} is already set, yet this build still picked {quant} "
                    f"(fixed upstream by vllm#17411)",
                    None,
                    f"the log shows quantization {base}",
                )
            )
        else:
            rem.append(
                constraints(run).set_to(
                    "quantization",
                    base,
                    f"Pass the checkpoint's own method explicitly: vLLM upgraded the {base.upper()} checkpoint to "
                    f"{quant} itself, a kernel {device} lacks; an explicit --quantization {base} keeps the plain kernel",
                    f"{quant} is {base} with another kernel; {device} runs {base}",
                )
            )
    rem += [
        remedy(
            f"Serve a checkpoint in a format vLLM supports on {device} (the list per release: docs.vllm.ai, "
            f'"Supported Hardware" for quantization), or the unquantized model (more devices / TP if it does not fit)'
        ),
        remedy(
            f"Or a vLLM build for {device} whose release supports {quant} there: each platform's list grows by release",
            None,
            None,
            "host",
        ),
    ]
    return rem


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    data = merged_data(failures)
    if data.get("refused_by") == "platform":
        return _refused_by_platform(run, failures, data)
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


def _refused_by_platform(run: Run, failures: Sequence[Failure], data: Dict[str, Any]) -> List[Finding]:
    facts = {k: data[k] for k in ("quantization", "device") if k in data}
    if "quantization" not in facts and run.value("quantization"):
        facts["quantization"] = run.value("quantization")
    quant = facts.get("quantization", "the quantization method")
    title = f"Quantization {quant} is not supported on {facts.get('device', 'this platform')} (the platform's list, not GPU memory)"
    base = AUTO_VARIANTS.get(str(quant).lower())
    if base:
        title += f": vLLM chose the {quant} kernel for a {base.upper()} checkpoint"
    evidence = failure_evidence(failures, "the platform check that refused it") + config_evidence(
        run, ("quantization", "model")
    )
    dont = ["Memory settings (gpu_memory_utilization, max_model_len): not a memory problem"]
    return [finding(RULE, run, "startup", title, facts, evidence, _platform_remedies(run, facts), dont)]


RULE = Rule(
    code="VD105",
    name="quantization_unsupported",
    severity="critical",
    summary="Startup failed: the quantization method (or dtype) is not supported on this GPU generation or platform.",
    doc=__doc__,
    check=check,
)
