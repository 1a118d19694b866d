"""Out of memory while warming up the sampler with ``max_num_seqs`` dummy requests.

What it means:
    The last startup step (V1 ``_dummy_sampler_run``) samples from logits for
    ``min(max_num_seqs, max_num_batched_tokens)`` dummy requests at once: a
    ``num_reqs x vocab_size`` float32 buffer. vLLM says "CUDA out of memory occurred when
    warming up sampler with N dummy requests"; older logs show only the frames.

Why it happens:
    A large vocabulary times a large ``max_num_seqs`` (256, or 1024 on big GPUs), after the
    KV cache and CUDA graphs took the rest of the budget.

Remedies, in order:
    1. Lower ``--max-num-seqs`` (halve it: the buffer shrinks in proportion).
    2. Leave headroom: lower ``--gpu-memory-utilization`` a little.

What does not help:
    Raising ``gpu_memory_utilization`` (less room outside the KV cache);
    ``max_model_len`` (the buffer depends on batch and vocabulary, not length).

Sources:
    vllm/v1/worker/gpu_model_runner.py _dummy_sampler_run / _dummy_pooler_run;
    vllm/v1/worker/gpu_worker.py compile_or_warm_up_model.
"""

from __future__ import annotations

from typing import List, Sequence

from .. import thresholds
from ..run import Failure, Run
from ..verdict import Finding
from .oom import device_memory, oom_facts
from .plan import constraints
from .rule import Rule, consequence_evidence, failure_evidence, finding, merged_data


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    data = merged_data(failures)
    facts = oom_facts(failures, run)
    c = constraints(run)
    seqs = c.in_force("max_num_seqs")
    n = data.get("dummy_requests") or (int(seqs.low) if seqs.low else None)
    if data.get("dummy_requests"):
        facts["dummy_requests"] = data["dummy_requests"]
    util = c.in_force("gpu_memory_utilization")
    shown = data.get("dummy_requests") or run.value("max_num_seqs")  # never a default in the headline
    if shown:
        title = f"Out of {device_memory(facts)} warming up the sampler with {shown} dummy requests"
    else:
        title = f"Out of {device_memory(facts)} warming up the sampler (dummy sampler run)"
    if data.get("dummy_requests"):
        seqs_why = f"{n} dummy requests did not fit; half as many need half the logits buffer"
    else:
        seqs_why = f"half of {seqs.why}; the warm-up samples min(max_num_seqs, max_num_batched_tokens) requests"
    rem = [
        c.lower(
            "max_num_seqs",
            max(1, n // 2) if n else None,
            "Lower max_num_seqs: the warm-up samples for that many requests at once",
            seqs_why if n else "the value in force is not in the log",
        ),
        c.lower(
            "gpu_memory_utilization",
            util.low - thresholds.WARMUP_UTILIZATION_STEP if util.low else None,
            "Leave headroom outside the KV cache",
            f"{thresholds.WARMUP_UTILIZATION_STEP} below {util.why}",
        ),
    ]
    evidence = failure_evidence(failures, "sampler warm-up") + consequence_evidence(run, 1)
    dont = [
        "Raising gpu_memory_utilization: less memory stays outside the KV cache",
        "Lowering max_model_len: the buffer depends on batch size and vocabulary",
    ]
    forbids = [("gpu_memory_utilization", "raise", "less memory stays outside the KV cache")]
    return [finding(RULE, run, "startup", title, facts, evidence, rem, dont, forbids=forbids)]


RULE = Rule(
    code="VD104",
    name="sampler_warmup_oom",
    severity="critical",
    summary="Startup failed: out of GPU memory warming up the sampler with max_num_seqs dummy requests.",
    doc=__doc__,
    check=check,
)
