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
    vllm/v1/engine/core.py run_engine_core; torch CUDA error checks; shared/corpus/README.md.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

from ..tracker import Failure, Run
from .base import R, consequence_evidence, failure_evidence, make_finding, remedies

CLASS = "other"
CODE = "VD900"
SEVERITY = "critical"
SUMMARY = "A failure that is not a memory or slowdown problem; the exception is named."


def build(failures: Sequence[Failure], run: Run, phase: str) -> Any:
    mod = sys.modules[__name__]
    f = failures[0]
    name = f.data.get("exception") or f.exception or "error"
    msg = f.data.get("message", "")
    facts = {"exception": name, "message": msg[:300]}
    cuda = name in ("CUDA error", "NCCL error")
    rem = remedies(
        R(f"Look up '{name}: {msg[:80]}' for your vLLM, PyTorch and driver versions"),
        R(
            "Rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing kernel; try --enforce-eager to rule out CUDA graphs",
            "--enforce-eager",
            None,
            "server",
        )
        if cuda
        else None,
    )
    title = f"{phase.capitalize()} failure: {name}" + (f": {msg[:100]}" if msg else "")
    return make_finding(
        mod,
        run,
        phase,
        title,
        facts,
        failure_evidence(failures, "the error") + consequence_evidence(run, 2),
        rem,
        ["Memory tuning: this failure is not about capacity"],
    )
