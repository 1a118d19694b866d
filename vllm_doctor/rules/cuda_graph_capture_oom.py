"""Out of memory while capturing CUDA graphs, at the end of startup.

What it means:
    After the KV cache is allocated, vLLM captures CUDA graphs for a range of batch sizes;
    each captured graph keeps its memory pool. The OOM happens inside ``capture_model`` /
    ``torch.cuda.graph`` (or while the "Capturing CUDA graphs" progress bar runs).

Why it happens:
    The profiling run does not (in older versions) count graph memory, so a budget that fit
    weights + activations + KV cache has no room left for the graphs; many captured sizes
    (large ``max_num_seqs``); ``gpu_memory_utilization`` close to 1.

Remedies, in order:
    1. ``--enforce-eager`` (no graphs; slower decoding) or capture fewer sizes
       (``--max-num-seqs`` lower, or a smaller ``cudagraph_capture_sizes`` list).
    2. Lower ``--max-num-seqs`` (fewer, smaller graphs).
    3. Leave headroom: lower ``--gpu-memory-utilization`` a little (graph memory comes out
       of what is left after the KV cache).

What does not help:
    Raising ``gpu_memory_utilization`` (leaves even less outside the KV cache); lowering
    ``max_model_len`` alone (graphs are sized by batch, not by length).

Sources:
    vllm/worker/model_runner.py capture_model (V0 advice text);
    vllm/v1/worker/gpu_model_runner.py capture_model / _capture_cudagraphs; torch/cuda/graphs.py.
"""

from __future__ import annotations

from typing import List, Sequence

from .. import thresholds
from ..events import Phase
from ..run import Failure, Run
from ..verdict import Finding, Remedy
from .oom import device_memory, oom_facts
from .plan import constraints, env_set
from .rule import Rule, consequence_evidence, ev, failure_evidence, finding, remedy


def _headroom(c, util) -> Remedy:
    return c.lower(
        "gpu_memory_utilization",
        util.low - thresholds.WARMUP_UTILIZATION_STEP if util.low else None,
        "Leave headroom outside the KV cache for the warm-up",
        f"what the warm-up allocates comes out of what the KV cache left: {thresholds.WARMUP_UTILIZATION_STEP} below "
        f"{util.why}",
    )


def _fewer_seqs(c, action: str) -> Remedy:
    return c.halve("max_num_seqs", action, "each captured batch size up to max_num_seqs is a graph", floor=8)


def _variant(facts, failures) -> str:
    if facts.get("oom_backend") in ("TPU", "XLA"):
        return "xla"
    if any("kernel_warmup" in f.all_tags for f in failures):
        return "kernels"
    return "graphs"


def _remedies(c, variant: str) -> List[Remedy]:
    util = c.in_force("gpu_memory_utilization")
    if variant == "kernels":
        # A kernel warm-up (DeepGEMM, FlashInfer autotune) runs the GEMMs for the shapes the
        # engine may see: eager mode does not skip it; headroom and smaller batches do.
        return [
            _headroom(c, util),
            c.halve(
                "max_num_batched_tokens",
                "Warm up smaller shapes: fewer tokens per step",
                "the warm-up runs GEMMs up to the per-step token budget",
            ),
            remedy(
                "Or skip the DeepGEMM warm-up (VLLM_DEEP_GEMM_WARMUP=skip, 0.11+): the first requests then compile",
                None,
                None,
                "host",
            )
            if not env_set(c.run, "VLLM_DEEP_GEMM_WARMUP", "skip")
            else None,
        ]
    if variant == "xla":
        return [_headroom(c, util), _fewer_seqs(c, "Compile for fewer and smaller shapes: lower max_num_seqs")]
    return [
        c.set_to("enforce_eager", True, "Run without CUDA graphs (slower decode) or capture fewer sizes", None),
        _fewer_seqs(c, "Capture fewer and smaller graphs by lowering max_num_seqs"),
        _headroom(c, util),
    ]


TITLES = {
    "xla": "while compiling the model for its input shapes",
    "kernels": "warming up kernels after the KV cache was allocated",
    "graphs": "while capturing CUDA graphs",
}


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    facts = oom_facts(failures, run)
    for k in ("max_num_seqs", "gpu_memory_utilization", "enforce_eager"):
        if run.value(k) is not None:
            facts[k] = run.value(k)
    variant = _variant(facts, failures)
    evidence = (
        failure_evidence(failures, "out of memory")
        + [ev(run.phase_lines.get(Phase.GRAPH_CAPTURE), "phase: post-KV warm-up")]
        + consequence_evidence(run, 1)
    )
    dont = [
        "Raising gpu_memory_utilization: even less memory stays outside the KV cache",
        "Lowering max_model_len alone: the warm-up is sized by batch, not length",
    ]
    forbids = [("gpu_memory_utilization", "raise", "even less memory stays outside the KV cache")]
    title = f"Out of {device_memory(facts)} {TITLES[variant]}"
    return [
        finding(
            RULE, run, "startup", title, facts, evidence, _remedies(constraints(run), variant), dont, forbids=forbids
        )
    ]


RULE = Rule(
    code="VD103",
    name="cuda_graph_capture_oom",
    severity="critical",
    summary="Startup failed: out of GPU memory while capturing CUDA graphs.",
    doc=__doc__,
    check=check,
)
