"""Notes (VD30x) appear only where the log shows them, and never become the verdict."""

import pytest
from conftest import fixture_path

from vllm_doctor import diagnose


def classes(v):
    return {f.class_id for f in v.findings}


@pytest.mark.parametrize(
    "name,note,primary",
    [
        ("r025-v1-queue-backlog-low-kv.log", "queue_backlog", "healthy"),
        ("x021-journalctl-bash-unit-agentic-slow-kv70-not-capacity.log", "low_prefix_cache_hit", "healthy"),
        ("r040-lmeval-tqdm-glued-preemption.log", "kv_pressure", "healthy"),
        ("s013-docker-v091-free-memory-0.95.log", "high_gpu_memory_utilization", "startup_memory_contention"),
    ],
)
def test_note_on_corpus_log(name, note, primary):
    v = diagnose(fixture_path(name))
    assert note in classes(v) and v.primary_class == primary
    assert all(f.severity == "info" for f in v.findings if f.class_id == note)


def test_no_notes_on_a_clean_startup():
    v = diagnose(fixture_path("r022-v1-startup-sm120-healthy.log"))
    assert not any(f.severity == "info" for f in v.findings)


def test_tp1_with_more_gpus_visible():
    log = [
        "INFO 01-01 00:00:00 [parallel_state.py:957] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0",
        "INFO 01-01 00:00:01 [model_runner.py:1110] Starting to load model /m/Llama-3-70B...",
        "ERROR 01-01 00:00:02 [engine.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. "
        "GPU 2 has a total capacity of 79.00 GiB of which 100.00 MiB is free. Including non-PyTorch memory, this "
        "process has 78.90 GiB memory in use. Of the allocated memory 78.00 GiB is allocated by PyTorch, and "
        "10.00 MiB is reserved by PyTorch but unallocated.",
    ]
    v = diagnose(log)
    assert v.primary_class == "weight_load_oom"
    note = next(f for f in v.findings if f.class_id == "tp1_multi_gpu")
    assert note.facts["gpus_visible_at_least"] == 3 and note.phase == "startup"
    # 70e9 params x 2 bytes = 130.4 GiB over 79 GiB GPUs: TP 4 is the smallest power of two that fits.
    wl = next(f for f in v.findings if f.class_id == "weight_load_oom")
    assert wl.facts["smallest_tensor_parallel_size"] == 4


def test_prompt_logprobs_frame_marks_an_oversized_request():
    log = [
        "INFO:     Application startup complete.",
        '  File "/usr/lib/python3.12/site-packages/vllm/worker/model_runner.py", line 1, in _get_prompt_logprobs',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of "
        "79.00 GiB of which 200.00 MiB is free. Process 99 has 78.50 GiB memory in use. Of the allocated memory "
        "77.00 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated.",
    ]
    v = diagnose(log)
    f = v.primary
    assert v.primary_class == "runtime_oom" and f.facts["oversized_allocation"] is True
    assert f.facts["oversized_input"] == "prompt logprobs / input" and f.facts["co_tenant_pids"] == []
