"""Which run a line's numbers belong to, for what the rules conclude (tracker run splitting):

* stats rows of a Markdown table labelled by different models (m25: 1.5B beside 7B) are two
  series, never one trend; rows of one label, or labelled by a time, are one series;
* a second launch command pasted after a run got going (m09: two ``vllm serve`` in prose) is
  the next instance's; with no next instance it stays the run's, as before.
"""

from __future__ import annotations

import pytest

from vllm_doctor import diagnose
from vllm_doctor.envelopes import row_label

STATS = (
    "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 2699.0 tokens/s, Running: 256 reqs, "
    "Swapped: 0 reqs, Pending: 768 reqs, GPU KV cache usage: {kv}%, CPU KV cache usage: 0.0%."
)


def _row(label: str, kv: float) -> str:
    return f"| {label} | 19% | 80.9% | {STATS.format(kv=kv)} |"


def _intervals(run) -> int:
    return sum(p["intervals"] for p in run.series)


def _stats_runs(lines):
    v = diagnose(lines, name="case.log")
    return [r for r in v.runs if r.series]


@pytest.mark.parametrize(
    "labels,series",
    [
        (["DeepSeek-R1-Distill-Qwen-1.5B", "DeepSeek-R1-Distill-Qwen-7B"], 2),  # m25: two models
        (["Qwen-7B", "Qwen-7B", "Qwen-7B"], 1),  # one model, three intervals
        (["10:00:01", "10:00:11"], 1),  # one server over time
        (["10:01 AM", "10:02 AM", "10:03 AM"], 1),  # a clock with its AM/PM (breakit4 item 7)
        (["step 1", "step 2", "step 3"], 1),  # steps of one run
        (["t+10s", "t+20s"], 1),
        (["Qwen2.5-7B", "Qwen2.5-14B"], 2),  # models that differ only in their numbers
        (["", ""], 1),  # no label
    ],
)
def test_table_rows_of_different_labels_are_different_series(labels, series):
    lines = ["| model | NPU utilization | HBM-Usage | vllm log |", "|---|---|---|---|"]
    lines += [_row(label, kv) for label, kv in zip(labels, (7.9, 97.8, 50.0))]
    runs = _stats_runs(lines)
    assert len(runs) == series, [(r.index, _intervals(r)) for r in runs]
    assert sum(_intervals(r) for r in runs) == len(labels)


@pytest.mark.parametrize(
    "cell,label",
    [
        ("DeepSeek-R1-Distill-Qwen-1.5B", "DeepSeek-R1-Distill-Qwen-1.5B"),
        ("2025-07-18 10:00:01", None),
        ("19%", "19%"),  # a letter-free cell with a sign still labels (not a time or a number)
        ("42", None),
        ("10:01 AM", None),
        ("step 12", None),
        ("#3", None),
        ("epoch 2", None),
        ("Qwen2.5-7B", "Qwen2.5-7B"),
        ("run A", "run A"),
        ("x" * 101, None),
        ("", None),
    ],
)
def test_row_label(cell, label):
    assert row_label(cell) == label


TWO = [
    "**instance 1: vllm server model_path --port 8001 --gpu-memory-utilization 0.4",
    "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [worker_v1.py:270] Available memory: 23106324992, total memory: "
    "65452113920",
    "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [kv_cache_utils.py:1286] GPU KV cache size: 1,880,320 tokens",
    "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [model_runner_v1.py:3072] Starting to capture ACL graphs for "
    "cases: [256, 248]",
    "**instance 2: vllm serve model_path --port 8002 --gpu-memory-utilization 0.45 --max-model-len 8192",
]


def test_a_second_command_is_the_next_instances():
    lines = TWO + [
        "(EngineCore_DP0 pid=4146) INFO 01-15 06:47:41 [worker_v1.py:270] Available memory: 0, total memory: "
        "65452113920",
        "(EngineCore_DP0 pid=4146) ERROR 01-15 06:47:41 [core.py:843] EngineCore failed to start.",
    ]
    runs = sorted(diagnose(lines, name="case.log").runs, key=lambda r: r.index)
    assert [r.config.get("gpu_memory_utilization") for r in runs] == [0.4, 0.45]
    assert "max_model_len" not in runs[0].config and runs[1].config["max_model_len"] == 8192


def test_a_second_command_with_no_next_instance_stays_the_runs():
    runs = diagnose(TWO, name="case.log").runs
    assert len(runs) == 1
    # the first command's value stands; what only the second gives is added, as before
    assert runs[0].config["gpu_memory_utilization"] == 0.4 and runs[0].config["max_model_len"] == 8192
