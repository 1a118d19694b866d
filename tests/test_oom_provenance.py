"""The OOM family (hunt6 kinds 1 and 5): who raised an out-of-memory message, whether its numbers
describe a shortage, and who holds the GPU, over every shape of the message.

A table: (free >> asked | free < asked) x (vLLM frames | only a trainer's frames under torchrun's
``[rankN]:`` | no frames) x (the full "Including non-PyTorch memory, this process has" clause |
a hand-edited "... this process has M in use" | no "this process" clause | "GPU  has" with no
device index). Each case asserts the class, what vLLM holds, the co-tenants, and that no remedy
offers a gpu_memory_utilization under the weights of the model served.
"""

from __future__ import annotations

import itertools

import pytest

from vllm_doctor import diagnose
from vllm_doctor.memory import model_weights_estimate, utilization_floor
from vllm_doctor.rules.oom_provenance import largest_segment_gib, not_a_shortage
from vllm_doctor.thresholds import ALLOCATOR_FAILURE_FREE_RATIO, WEIGHTS_OVERHEAD

MODEL = "Qwen/Qwen2.5-32B-Instruct"
TOTAL = 79.11
CONFIG = f"INFO 05-10 16:00:00 [utils.py:326] non-default args: {{'model': '{MODEL}'}}"

#: (tried, free): a real shortage, and 20 MiB refused with 66.43 GiB free (p21)
FREE = {"short": ("2.00 GiB", "1.50 GiB"), "plenty": ("20.00 MiB", "66.43 GiB")}

_TAIL = (
    "Of the allocated memory {alloc} is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated."
)
#: The process clauses: (text after "is free. ", what vLLM holds, the co-tenants, the device index printed)
CLAUSES = {
    "full": (
        "Process 4242 has 30.00 GiB memory in use. Including non-PyTorch memory, this process has 40.00 GiB memory "
        "in use. " + _TAIL.format(alloc="39.00 GiB"),
        40.0,
        [4242],
        True,
    ),
    # p10: hand-edited, "Including non-PyTorch memory," and "memory" cut, the allocation summary gone
    "edited": ("Process 4242 has 30.00 GiB memory in use. ... this process has 40.00 GiB in use.", 40.0, [4242], True),
    # inside a container NVML names vLLM's own process by its host PID and no "this process"
    # clause is printed: the listed process holding what PyTorch reserved is vLLM
    "missing": ("Process 4242 has 30.00 GiB memory in use. " + _TAIL.format(alloc="29.50 GiB"), 30.0, [], True),
    # p20: "GPU  has", no device index
    "no_index": (
        "Including non-PyTorch memory, this process has 40.00 GiB memory in use. " + _TAIL.format(alloc="39.00 GiB"),
        40.0,
        [],
        False,
    ),
}

VLLM_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_busy_loop',
    "    self._process_engine_step()",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 1400, in execute_model',
    "    hidden_states = self.model(",
]
TRAINER_FRAMES = [
    "[rank3]: Traceback (most recent call last):",
    '[rank3]:   File "/mnt/user/ms-swift/swift/cli/rlhf.py", line 5, in <module>',
    "[rank3]:     rlhf_main()",
    '[rank3]:   File "/mnt/user/ms-swift/swift/llm/train/sft.py", line 187, in run',
    "[rank3]:     return self.train(trainer)",
]
FRAMES = {"vllm": (VLLM_FRAMES, ""), "trainer": (TRAINER_FRAMES, "[rank3]: "), "none": ([], "")}

#: The memory classes a vLLM OOM with a shortage may get, by what the frames show.
MEMORY_CLASSES = {"runtime_oom", "startup_memory_contention"}


def message(free_case: str, clause: str) -> str:
    tried, free = FREE[free_case]
    text, _, _, indexed = CLAUSES[clause]
    gpu = "GPU 0" if indexed else "GPU "
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried}. {gpu} has a total capacity of "
        f"{TOTAL} GiB of which {free} is free. {text}"
    )


GRID = list(itertools.product(FREE, FRAMES, CLAUSES))


@pytest.mark.parametrize("free_case,frames,clause", GRID, ids=["-".join(x) for x in GRID])
def test_the_oom_family(free_case, frames, clause):
    lines, prefix = FRAMES[frames]
    log = [CONFIG, *lines, prefix + message(free_case, clause)]
    verdict = diagnose(log, name="family.log")
    assert all(s.internal_errors == 0 for s in verdict.sources)
    primary = next(f for f in verdict.findings if f.class_id == verdict.primary_class)
    facts = primary.facts
    _, held, co_tenants, indexed = CLAUSES[clause]

    # the class: no shortage, or a trainer's own OOM, is never a vLLM memory class
    if frames == "trainer":
        assert verdict.primary_class == "other" and facts.get("raised_outside_vllm"), primary.title
    elif free_case == "plenty":
        assert verdict.primary_class == "other" and facts.get("not_a_shortage"), primary.title
    else:
        assert verdict.primary_class in MEMORY_CLASSES, primary.title

    # the numbers come out of every shape
    tried, free = FREE[free_case]
    assert facts["gpu_total_gib"] == pytest.approx(TOTAL)
    assert ("gpu_index" in facts) == indexed
    # who holds the GPU: the process the message calls "this process" (or the container's PID)
    if frames == "trainer":
        assert "vllm_process_gib" not in facts  # that process is the trainer, not vLLM
    else:
        assert facts["vllm_process_gib"] == pytest.approx(held)
    assert facts["co_tenant_pids"] == co_tenants

    # no remedy offers a utilization under the weights of the model served
    est = model_weights_estimate(MODEL, None, None)
    floor, _ = utilization_floor(TOTAL, weights_gib=est["weights_gib_estimate"], overhead=WEIGHTS_OVERHEAD)
    for f in verdict.findings:
        for r in f.remedies:
            if r.setting == "gpu_memory_utilization" and r.direction == "lower" and r.value is not None:
                assert r.value >= floor, (f.code, r.flag, r.why)
    if free_case == "plenty" or frames == "trainer":
        assert not any(r.setting in ("max_num_seqs", "max_model_len") for f in verdict.findings for r in f.remedies)


@pytest.mark.parametrize(
    "tried,free,short",
    [
        (1.0, 2.0 * 8 * 0.99, True),  # just under ALLOCATOR_FAILURE_FREE_RATIO segments of 2 GiB
        (1.0, 2.0 * 8 * 1.01, False),  # just over
        (2 / 1024, 0.15, True),  # 2 MiB asks for a 20 MiB segment: 150 MiB is 7.5 of them
        (2 / 1024, 0.17, False),  # 8.5 of them
    ],
)
def test_a_shortage_is_judged_by_the_largest_segment_the_allocator_asked_for(tried, free, short):
    assert ALLOCATOR_FAILURE_FREE_RATIO == 8  # the table's numbers are for this ratio
    data = {"form": "torch", "backend": "CUDA", "tried_to_allocate_gib": tried, "gpu_free_gib": free}
    assert not_a_shortage(data) is (not short)
    assert largest_segment_gib(tried) == pytest.approx(max(2 * tried, 20 / 1024))


def test_c10s_allocator_warning_at_the_end_of_a_log_is_an_oom_in_gib():
    # m22: the log ends with the warning: nothing shows the retry succeeded
    log = [
        "(DiffusionWorker pid=2604) DEBUG 08-30 12:05:56 [layer.py:126] Attention(role=self) -> backend=TORCH_SDPA",
        "[rank0]:[W830 12:05:56.439466645 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on "
        "device 0 while trying to allocate 272629760 bytes (free: 125304832, total: 85017624576).",
    ]
    verdict = diagnose(log, name="m22.log")
    assert verdict.primary_class in MEMORY_CLASSES | {"weight_load_oom"}
    facts = verdict.findings[0].facts
    assert facts["tried_to_allocate_gib"] == pytest.approx(0.2539, rel=1e-3)
    assert facts["gpu_free_gib"] == pytest.approx(0.1167, rel=1e-3)
    assert facts["gpu_total_gib"] == pytest.approx(79.18, rel=1e-3)


# -- hunt10 kind 2: whose process raised it, when a Ray task says ------------------------------

#: hunt10 w02's OOM: the trainer ("this process", 3.28 GiB) beside the colocated engine (PID 136096)
_W02_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 260.00 MiB. GPU 0 has a total capacity of 21.95 "
    "GiB of which 202.62 MiB is free. Process 136096 has 18.46 GiB memory in use. Including non-PyTorch memory, this "
    "process has 3.28 GiB memory in use. Of the allocated memory 2.86 GiB is allocated by PyTorch, and 112.47 MiB is "
    "reserved by PyTorch but unallocated."
)
#: Ray's RayTaskError line for each actor (python/ray/exceptions.py), and whether it is vLLM's
RAY_ACTORS = {
    "skyrl_fsdp": (
        "FAILED tests/test_e2e.py::test_colocate - ray.exceptions.RayTaskError(OutOfMemoryError): "
        "ray::FSDPPolicyWorkerBase.init_model() (pid=141722, ip=192.0.2.164, actor_id=a28f, "
        "repr=<skyrl.backends.skyrl_train.workers.fsdp.fsdp_worker.FSDPPolicyWorkerBase object at 0x7475d6699df0>)",
        False,
    ),
    "openrlhf_actor": (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::ActorModelRayActor.fit() (pid=4121, ip=192.0.2.7)",
        False,
    ),
    "vllm_worker": (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::RayWorkerWrapper.execute_method() (pid=17335, "
        "ip=192.0.2.136, repr=<vllm.executor.ray_utils.RayWorkerWrapper object at 0x71ac9e8a3fe0>)",
        True,
    ),
    "openrlhf_engine": (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::LLMRayActor.generate() (pid=5, ip=192.0.2.5, "
        "repr=<openrlhf.trainer.ray.vllm_engine.LLMRayActor object at 0x1>)",
        True,
    ),
    "verl_rollout": (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_generate_sequences() "
        "(pid=9, ip=192.0.2.9, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f0>)",
        True,
    ),
}


@pytest.mark.parametrize("before", [True, False], ids=["ray_line_after", "ray_line_before"])
@pytest.mark.parametrize("actor", sorted(RAY_ACTORS))
def test_an_oom_of_an_applications_ray_actor_is_outside_vllm(actor, before):
    line, vllm = RAY_ACTORS[actor]
    lines = [_W02_OOM, line] if before else [line, _W02_OOM]
    v = diagnose(lines, name="t.log")
    f = v.findings[0]
    if vllm:
        assert f.class_id != "other" and not f.facts.get("raised_outside_vllm")
        return
    assert f.class_id == "other" and f.facts.get("raised_outside_vllm") is True
    assert "vllm_process_gib" not in f.facts  # "this process" is the trainer's
    assert f.facts["co_tenant_pids"] == [136096]
    # the colocated engine (the other process) is freed first, then the trainer's own diet
    assert "colocated vLLM engine" in f.remedies[0].action and "136096" in (f.remedies[0].why or "")
    assert "trainer's memory" in f.remedies[1].action
    assert not any(r.flag and "gpu-memory-utilization" in r.flag for r in f.remedies)


def test_an_oom_in_vllms_own_record_is_vllms_even_beside_a_trainers_ray_failure():
    own = "(EngineCore_DP0 pid=136096) ERROR 05-10 16:00:00 [core.py:708] " + _W02_OOM
    v = diagnose([own, RAY_ACTORS["skyrl_fsdp"][0]], name="t.log")
    assert not v.findings[0].facts.get("raised_outside_vllm")


def test_an_outside_oom_with_no_large_other_process_leads_with_the_trainer():
    bare = _W02_OOM.replace("Process 136096 has 18.46 GiB memory in use. ", "")
    v = diagnose([bare, RAY_ACTORS["openrlhf_actor"][0]], name="t.log")
    f = v.findings[0]
    assert f.class_id == "other" and "trainer's memory" in f.remedies[0].action
