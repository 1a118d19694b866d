"""What an OOM message's facts keep and leave out (rules/oom.py oom_facts), as a family:

* a "this process has M memory in use" below what PyTorch allocated is NVML not seeing the
  process (p21's cumem "0 bytes" beside 8.51 GiB): never shown as what vLLM held;
* a process list cut before its end (breakit3 item 7: 10 000 processes, the "this process"
  clause past the record's cap): no listed PID is guessed to be vLLM's own;
* sizes kept exact (1.00 MiB stays 1.00 MiB, not a GiB rounded to 4 decimals);
* free above total (breakit3 item 9): the free figure is dropped, and a note says why;
* PIDs in a title or a reason: the first few, then how many more.
"""

from __future__ import annotations

import pytest

from vllm_doctor import diagnose, thresholds
from vllm_doctor.rules.oom import named_pids, own_unseen

HEAD = "(EngineCore_DP0 pid=77) ERROR 05-01 10:00:09 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "


def _verdict(lines):
    v = diagnose(lines, name="case.log")
    assert v.findings, v.title
    return v.findings[0]


def _oom(body: str) -> list:
    return [
        "INFO 05-01 10:00:00 [api_server.py:1000] vLLM API server version 0.10.2",
        "(EngineCore_DP0 pid=77) INFO 05-01 10:00:05 [gpu_model_runner.py:1900] Starting to load model m...",
        HEAD + body,
    ]


@pytest.mark.parametrize(
    "own,alloc,unseen",
    [
        ("0 bytes", "8.51 GiB", True),  # p21: cumem allocations NVML does not see
        ("12.40 GiB", "11.90 GiB", False),  # the usual: this process holds more than PyTorch allocated
        ("8.51 GiB", "8.51 GiB", False),  # equal when printed
    ],
)
def test_this_process_below_pytorch_allocated_is_unseen(own, alloc, unseen):
    f = _verdict(
        _oom(
            f"Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.10 GiB is free. "
            f"Including non-PyTorch memory, this process has {own} memory in use. Of the allocated memory {alloc} "
            "is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated."
        )
    )
    assert ("vllm_process_gib" not in f.facts) is unseen, f.facts
    assert bool(f.facts.get("process_memory_unseen")) is unseen
    assert any("NVML did not see" in n for n in f.notes) is unseen


def test_unseen_margin_is_the_rounding_of_two_printed_sizes():
    # 0.0075 GiB short: rounding (margin 0.01 GiB), not unseen; 0.013 GiB short: unseen.
    assert thresholds.UNSEEN_MARGIN_GIB == pytest.approx(0.01)
    assert not own_unseen({"pytorch_allocated_gib": 8.51}, 8.5025)
    assert own_unseen({"pytorch_allocated_gib": 8.51}, 8.497)
    assert not own_unseen({}, 0.0)  # nothing to compare with


def test_a_cut_process_list_guesses_no_own_process_and_keeps_mib_exact():
    listed = " ".join(
        f"Process {pid} has {mib} memory in use." for pid, mib in ((1000, "1.00 MiB"), (1001, "3.00 MiB"))
    )
    f = _verdict(
        _oom(
            f"Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.10 GiB is free. {listed} Process 1002 has 2.0"
        )
    )
    assert f.facts["processes_cut"] is True
    assert "vllm_process_gib" not in f.facts and "vllm_pid" not in f.facts
    assert f.facts["co_tenant_pids"] == [1001, 1000]  # largest first
    assert f.facts["co_tenant_gib"]["1000"] * 1024 == pytest.approx(1.0, abs=1e-3)
    assert any("cut inside its list of processes" in n for n in f.notes)
    assert not any(r.flag and "gpu-memory-utilization" in r.flag for r in f.remedies), "no fit from a cut list"


def test_a_whole_process_list_still_finds_vllms_own_process():
    f = _verdict(
        _oom(
            "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.10 GiB is free. "
            "Process 1000 has 1.00 MiB memory in use. Including non-PyTorch memory, this process has 12.40 GiB "
            "memory in use. Of the allocated memory 11.90 GiB is allocated by PyTorch, and 100.00 MiB is reserved "
            "by PyTorch but unallocated."
        )
    )
    assert "processes_cut" not in f.facts
    assert f.facts["vllm_process_gib"] == pytest.approx(12.40)
    assert f.facts["co_tenant_pids"] == [1000]


def test_free_above_total_is_dropped_and_said():
    f = _verdict(
        _oom(
            "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 40.00 GiB is free. "
            "Including non-PyTorch memory, this process has 15.40 GiB memory in use. Of the allocated memory "
            "14.90 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but unallocated."
        )
    )
    assert "gpu_free_gib" not in f.facts
    assert any("40.00 GiB free of a 23.55 GiB total" in n for n in f.notes), f.notes


def test_free_equal_to_total_is_kept():
    f = _verdict(
        _oom(
            "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 23.55 GiB is free. "
            "Including non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated memory "
            "0 bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
        )
    )
    assert f.facts.get("gpu_free_gib") == pytest.approx(23.55)
    assert not any("contradict" in n for n in f.notes)


@pytest.mark.parametrize("n,text", [(5, "1, 2, 3, 4, 5"), (6, "6, 5, 4, 3, 2 +1 more"), (9, "9, 8, 7, 6, 5 +4 more")])
def test_named_pids_names_the_five_largest(n, text):
    # limits.MAX_NAMED_PROCESSES 5, the largest holders first once they do not all fit (PID p
    # holds p MiB here): at half (2) six PIDs would read "6, 5 +4 more"; at 7, all six.
    facts = {"co_tenant_pids": list(range(1, n + 1)), "co_tenant_gib": {str(p): p / 1024 for p in range(1, n + 1)}}
    assert named_pids(facts) == text


@pytest.mark.parametrize(
    "name,multimodal",
    [
        ("Qwen/Qwen2.5-VL-32B-Instruct", True),
        ("Qwen2-VL-7B", True),
        ("llava-hf/llava-v1.6-mistral-7b-hf", True),
        ("OpenGVLab/InternVL2_5-8B", True),
        ("openbmb/MiniCPM-V-2_6", True),
        ("mistralai/Pixtral-12B-2409", True),
        ("meta-llama/Llama-3.2-11B-Vision-Instruct", True),
        ("Qwen/Qwen2.5-32B-Instruct", False),
        ("meta-llama/Llama-3.1-8B-Instruct", False),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", False),
        ("/models/level-7b", False),
    ],
)
def test_multimodal_model_names(name, multimodal):
    from vllm_doctor.rules.runtime_oom import MULTIMODAL_MODEL

    assert bool(MULTIMODAL_MODEL.search(name)) is multimodal
