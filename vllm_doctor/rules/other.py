"""A failure that is not a memory or slowdown problem (named by its exception).

What it means:
    The server failed, and the root cause is in the log, but it is not one of the memory
    classes: a CUDA error such as "an illegal memory access was encountered", an NCCL error,
    a missing module, a bad argument. The finding names the exception and quotes it.

Why it happens:
    Kernel or driver bugs, hardware faults, version mismatches, configuration mistakes.

Remedies, in order:
    1. Read the quoted exception; search the vLLM issue tracker for it with your vLLM and
       driver versions.
    2. For CUDA errors: rerun with ``CUDA_LAUNCH_BLOCKING=1`` to get the real failing call;
       try ``--enforce-eager`` to rule out CUDA graphs.

What does not help:
    Memory tuning (``gpu_memory_utilization``, ``max_model_len``): the failure is not about
    capacity. Ray's "killed by SIGKILL by OOM killer" is generic boilerplate listing possible
    causes, not evidence of a GPU OOM.

Sources:
    vllm/v1/engine/core.py run_engine_core; pytorch c10/cuda/CUDAException.h (CUDA error
    checks); PyTorch docs "CUDA semantics" (notes/cuda: CUDA_LAUNCH_BLOCKING for a precise
    stack).
"""

from __future__ import annotations

from typing import List, Sequence

from ..run import Failure, Run
from ..verdict import Finding
from .plan import constraints
from .rule import Rule, consequence_evidence, failure_evidence, finding, remedy


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    if not failures:
        return []
    f = failures[0]
    name = f.data.get("exception") or f.exception or "error"
    msg = f.data.get("message", "")
    facts = {"exception": name, "message": msg[:300]}
    cuda = name in ("CUDA error", "NCCL error")
    rem = [
        remedy(f"Look up '{name}: {msg[:80]}' for your vLLM, PyTorch and driver versions"),
        constraints(run).set_to(
            "enforce_eager",
            True,
            "Rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing kernel; try --enforce-eager to rule out CUDA graphs",
            None,
        )
        if cuda
        else None,
    ]
    title = f"{phase.capitalize()} failure: {name}" + (f": {msg[:100]}" if msg else "")
    evidence = failure_evidence(failures, "the error") + consequence_evidence(run, 2)
    return [
        finding(RULE, run, phase, title, facts, evidence, rem, ["Memory tuning: this failure is not about capacity"])
    ]


RULE = Rule(
    code="VD900",
    name="other",
    severity="critical",
    summary="A failure that is not a memory or slowdown problem; the exception is named.",
    doc=__doc__,
    check=check,
)
