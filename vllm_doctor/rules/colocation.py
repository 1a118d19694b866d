"""vLLM inside an RL trainer, on the GPUs of the model being trained (colocated).

RL frameworks run vLLM as the rollout engine in the trainer's own processes or on its GPUs
(verl's ``WorkerDict``, OpenRLHF's Ray actors, TRL's and ms-swift's colocate modes, SkyRL).
The trainer's parameters, gradients and optimizer state then share the device with vLLM's
weights and KV cache, and what the trainer holds when vLLM starts or wakes is what vLLM lacks.
A memory finding of such a run gets the framework's own levers as its second remedy: free the
trainer's memory while vLLM starts or wakes (offload, sleep), and set vLLM's share with the
framework's setting (the framework passes it to vLLM as ``gpu_memory_utilization``).

The run's ``trainer`` is recorded by the tracker (:func:`vllm_doctor.processes.trainer_of`);
this module only adds the remedy and a note to the findings :func:`apply` is given.

Sources: verl docs (``actor_rollout_ref.rollout.gpu_memory_utilization``, FSDP
``param_offload`` / ``optimizer_offload``); OpenRLHF README (``--vllm_gpu_memory_utilization``,
``--vllm_enable_sleep``, ``--deepspeed_enable_sleep``, ``--colocate_all_models``); TRL
GRPOConfig (``vllm_gpu_memory_utilization``, ``vllm_enable_sleep_mode``, ``vllm_mode``);
ms-swift GRPO docs (``--vllm_gpu_memory_utilization``, ``--offload_model``,
``--offload_optimizer``, ``--sleep_level``).
"""

from __future__ import annotations

from typing import List

from ..run import Run
from ..verdict import Finding
from .rule import ev, remedy

#: framework -> (the setting that becomes vLLM's gpu_memory_utilization, how to free the
#: trainer's memory while vLLM starts or wakes); None where the framework's name is unknown.
LEVERS = {
    "verl": (
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        "actor_rollout_ref.actor.fsdp_config.param_offload=True and optimizer_offload=True",
    ),
    "OpenRLHF": ("--vllm_gpu_memory_utilization", "--vllm_enable_sleep and --deepspeed_enable_sleep"),
    "TRL": ("vllm_gpu_memory_utilization in GRPOConfig", "vllm_enable_sleep_mode=True"),
    "ms-swift": ("--vllm_gpu_memory_utilization", "--offload_model true --offload_optimizer true --sleep_level 1"),
}
#: The classes whose finding is about what fits in GPU memory.
MEMORY_CLASSES = frozenset(
    {
        "weight_load_oom",
        "kv_cache_capacity",
        "startup_memory_contention",
        "cuda_graph_capture_oom",
        "sampler_warmup_oom",
        "runtime_oom",
    }
)


def apply(findings: List[Finding], run: Run) -> None:
    """Add the trainer's levers to each memory finding of a run vLLM shares with an RL trainer
    (``run.trainer``): the second remedy (the first when there is none), a note, and the line
    that shows the framework as evidence. Findings of other classes are left as they are."""
    fw = run.trainer
    if fw is None:
        return
    share, free = LEVERS.get(fw, (None, None))
    action = f"vLLM shares this GPU with {fw}'s training: free the trainer's memory while vLLM starts or wakes"
    action += f" ({free})" if free else " (offload its parameters and optimizer state, or put it to sleep)"
    why = f"set vLLM's share with {share}" if share else "the trainer's parameters and optimizer take what vLLM lacks"
    for f in findings:
        if f.class_id not in MEMORY_CLASSES or any(r.action.startswith("vLLM shares this GPU") for r in f.remedies):
            continue
        f.remedies.insert(min(1, len(f.remedies)), remedy(action, None, why, "host"))
        for i, r in enumerate(f.remedies, 1):
            r.order = i
        f.notes.append(f"vLLM runs inside {fw}, colocated with the model it trains (line {run.trainer_line.lineno}).")
        e = ev(run.trainer_line, f"runs inside {fw}")
        if e is not None and all((x.source, x.line) != (e.source, e.line) for x in f.evidence):
            f.evidence.append(e)
