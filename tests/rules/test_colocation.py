"""vLLM inside an RL trainer: memory findings get the framework's own levers (rules/colocation.py)."""

import pytest

from vllm_doctor import diagnose

_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB "
    "of which 1.20 GiB is free. Including non-PyTorch memory, this process has 78.00 GiB memory in use. Of the "
    "allocated memory 70.10 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated."
)
_KV = (
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine."
)


def _frames(prefix, paths):
    out = [f"{prefix}Traceback (most recent call last):"]
    for path, func in paths:
        out.append(f'{prefix}  File "{path}", line 10, in {func}')
    return out


@pytest.mark.parametrize(
    "framework,lines,lever",
    [
        (
            "OpenRLHF",
            _frames(
                "(ActorModelRayActor pid=348952) ",
                [("/usr/local/lib/python3.10/dist-packages/vllm/device_allocator/cumem.py", "wake_up")],
            )
            + [f"(ActorModelRayActor pid=348952) {_OOM}"],
            "--vllm_enable_sleep",
        ),
        (
            "verl",
            _frames(
                "",
                [
                    ("/opt/verl/verl/workers/fsdp_workers.py", "init_model"),
                    (
                        "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py",
                        "check_enough_kv_cache_memory",
                    ),
                ],
            )
            + [_KV],
            "actor_rollout_ref.rollout.gpu_memory_utilization",
        ),
        (
            "ms-swift",
            _frames(
                "[rank0]: ",
                [
                    ("/opt/ms-swift/swift/trainers/rlhf_trainer/grpo_trainer.py", "_move_model_to_vllm"),
                    ("/usr/lib/python3.11/site-packages/vllm/v1/worker/gpu_worker.py", "wake_up"),
                ],
            )
            + ["[rank0]: " + _OOM],
            "--offload_model true",
        ),
        (
            "TRL",
            _frames(
                "",
                [
                    ("/usr/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", "_generate"),
                    ("/usr/lib/python3.11/site-packages/vllm/v1/worker/gpu_model_runner.py", "execute_model"),
                ],
            )
            + [_OOM],
            "vllm_enable_sleep_mode=True",
        ),
    ],
)
def test_a_memory_finding_in_a_colocated_trainer_gets_its_levers_second(framework, lines, lever):
    v = diagnose(lines, name="rl.log")
    f = v.findings[0]
    actions = [r.action for r in f.remedies]
    assert len(actions) >= 2 and actions[1].startswith(f"vLLM shares this GPU with {framework}'s training"), actions
    assert lever in " ".join(f"{r.action} {r.why}" for r in f.remedies)
    assert any(framework in n for n in f.notes)
    assert any(e.note == f"runs inside {framework}" for e in f.evidence)


def test_a_server_without_a_trainer_gets_no_trainer_remedy():
    v = diagnose(["(EngineCore_DP0 pid=9) " + _OOM], name="srv.log")
    assert v.findings and not any("shares this GPU" in r.action for f in v.findings for r in f.remedies)


def test_a_failure_that_is_not_about_memory_gets_no_trainer_remedy():
    lines = _frames("", [("/opt/verl/verl/workers/fsdp_workers.py", "generate_sequences")]) + [
        "RuntimeError: CUDA error: an illegal memory access was encountered"
    ]
    v = diagnose(lines, name="rl.log")
    assert v.primary_class == "other"
    assert not any("shares this GPU" in r.action for f in v.findings for r in f.remedies)


@pytest.mark.parametrize(
    "prefix,path",
    [
        ("", "/home/swift/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py"),
        ("", "/data/verl/envs/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py"),
        ("(LLMRayActor pid=77) ", "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py"),
    ],
)
def test_a_directory_named_like_a_framework_or_its_engine_actor_alone_is_no_trainer(prefix, path):
    # breakit3: only the frameworks' own sub-packages and their training actors prove colocation
    lines = _frames(prefix, [(path, "load_model")]) + [prefix + _OOM]
    v = diagnose(lines, name="srv.log")
    assert v.findings and not any("shares this GPU" in r.action for f in v.findings for r in f.remedies)
