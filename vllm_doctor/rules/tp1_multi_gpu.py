"""Out of memory with tensor_parallel_size 1 while the log shows more GPUs.

What it means:
    An out-of-memory failure names ``GPU N`` with N of 1 or more while the run's
    ``tensor_parallel_size`` is 1. PyTorch numbers the GPUs the process can see, so at least
    N+1 are visible: tensor parallelism, the capacity option, is left unused.

Why it happens:
    ``tensor_parallel_size`` defaults to 1: a multi-GPU host uses one GPU unless told.

Remedies, in order:
    1. Spread the model over the node's GPUs with ``--tensor-parallel-size`` (a capacity
       option, not a speed one).

What does not help:
    Pinning the process to another single GPU: the model still has one GPU's memory.

Sources:
    vllm/config/parallel.py (tensor_parallel_size default 1); docs.vllm.ai "Distributed
    Inference and Serving" (serving/distributed_serving).
"""

from __future__ import annotations

from typing import List, Sequence

from ..events import Phase
from ..run import Failure, Run
from ..verdict import Finding
from .plan import constraints
from .rule import Rule, ev, finding


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    if run.value("tensor_parallel_size") != 1:
        return []
    gpu = max((f.data.get("gpu_index", 0) for f in run.failures if "oom" in f.kinds), default=0)
    if gpu < 1:
        return []
    failure = next(f for f in run.failures if f.data.get("gpu_index", 0) == gpu)
    title = f"tensor_parallel_size is 1 but the process sees at least {gpu + 1} GPUs"
    facts = {"tensor_parallel_size": 1, "gpus_visible_at_least": gpu + 1}
    evidence = [ev(failure.lines[0], f"GPU {gpu}"), ev(run.line_for("tensor_parallel_size"))]
    rem = [
        constraints(run).raise_to(
            "tensor_parallel_size",
            2,
            "Spread the model over the node's GPUs (a capacity option, not a speed one)",
            "the smallest split; more if the weights need it",
        )
    ]
    where = "startup" if run.phase < Phase.READY else "runtime"
    return [finding(RULE, run, where, title, facts, evidence, rem, confidence="medium")]


RULE = Rule(
    code="VD306",
    name="tp1_multi_gpu",
    severity="info",
    summary="Out of memory with tensor_parallel_size 1 while the log shows more GPUs.",
    doc=__doc__,
    check=check,
)
