"""The tracker records what the log says, per run, in bounded memory, and judges nothing."""

import ast
from pathlib import Path

from vllm_doctor.catalog import Catalog
from vllm_doctor.envelopes import unwrap
from vllm_doctor.events import Phase
from vllm_doctor.run import MAX_LINE_CHARS, SERIES_POINTS, Failure
from vllm_doctor.tracker import SourceTracker

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU {gpu} has a total capacity of "
    "23.56 GiB of which 11.00 MiB is free. Including non-PyTorch memory, this process has 23.54 GiB memory in use. "
    "Of the allocated memory 22.10 GiB is allocated by PyTorch, and 90.00 MiB is reserved by PyTorch but unallocated."
)
STATS = (
    "(APIServer pid=1) INFO 05-19 10:13:{s:02d} [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 10.0 tokens/s, Running: {run} reqs, Waiting: {wait} reqs, GPU KV cache usage: "
    "{kv}%, Prefix cache hit rate: 0.0%"
)


def track(lines, observers=None):
    t = SourceTracker("t.log", observers=observers)
    cat = Catalog()
    for n, line in enumerate(lines, 1):
        for rec in unwrap("t.log", n, line):
            t.feed(rec, cat.recognise(rec))
    t.finish()
    return t


def test_a_second_server_start_opens_a_new_run_and_keeps_configs_apart():
    t = track(
        [
            "INFO 08-20 10:00:00 [api_server.py:1] vLLM API server version 0.10.1",
            "INFO 08-20 10:00:01 [utils.py:326] non-default args: {'max_model_len': 8192}",
            "INFO 08-20 10:00:02 [gpu_model_runner.py:1] Starting to load model Qwen/Qwen3-8B...",
            "INFO 08-20 11:00:00 [api_server.py:1] vLLM API server version 0.10.2",
            "INFO 08-20 11:00:01 [utils.py:326] non-default args: {'max_model_len': 4096}",
        ]
    )
    assert [(r.index, r.start_line) for r in t.runs] == [(1, 1), (2, 4)]
    assert [r.config["max_model_len"] for r in t.runs] == [8192, 4096]
    assert [r.facts["vllm_version"] for r in t.runs] == ["0.10.1", "0.10.2"]
    assert t.runs[1].config_lines["max_model_len"].lineno == 5


def test_tp_ranks_each_printing_kv_sizing_keep_the_smallest_with_its_line():
    t = track(
        [
            "(VllmWorker rank=0 pid=10) INFO 05-10 16:00:00 [kv_cache_utils.py:716] GPU KV cache size: 120,000 tokens",
            "(VllmWorker rank=1 pid=11) INFO 05-10 16:00:00 [kv_cache_utils.py:716] GPU KV cache size: 110,000 tokens",
            "(VllmWorker rank=2 pid=12) INFO 05-10 16:00:00 [kv_cache_utils.py:716] GPU KV cache size: 115,000 tokens",
        ]
    )
    run = t.run
    assert run.facts["kv_tokens"] == 110000 and run.fact_lines["kv_tokens"].lineno == 2
    assert run.vllm_pids == {10, 11, 12} and run.engine == "v1" and run.phase == Phase.KV_SIZING


def test_an_oom_and_vllms_wrapper_of_it_are_one_failure_two_gpus_are_two():
    t = track(
        [
            "(EngineCore_DP0 pid=5) ERROR 05-10 16:00:15 [core.py:1] " + OOM.format(gpu=0),
            "(EngineCore_DP0 pid=5) ERROR 05-10 16:00:15 [core.py:1] RuntimeError: CUDA out of memory occurred when "
            "warming up sampler with 256 dummy requests. Please try lowering `max_num_seqs`.",
            "(EngineCore_DP0 pid=5) ERROR 05-10 16:00:16 [core.py:1] " + OOM.format(gpu=1),
        ]
    )
    failures = t.run.failures
    assert [sorted(f.kinds) for f in failures] == [["oom", "sampler_oom"], ["oom"]]
    assert failures[0].data["dummy_requests"] == 256 and failures[0].data["gpu_index"] == 0
    assert failures[1].data["gpu_index"] == 1


def test_frames_tag_the_failure_of_their_own_process_only():
    frame = '  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 9, in capture_model'
    t = track(
        [
            "(Worker_TP0 pid=7) Traceback (most recent call last):",
            "(Worker_TP0 pid=7) " + frame,
            "(Worker_TP1 pid=8) " + OOM.format(gpu=1),
            "(Worker_TP0 pid=7) " + OOM.format(gpu=0),
        ]
    )
    by_gpu = {f.data["gpu_index"]: f for f in t.run.failures}
    assert by_gpu[0].tags == {"graph_capture"} and by_gpu[0].stream == "pid:7"
    assert by_gpu[1].tags == set()


def test_a_consequence_exception_is_recorded_as_such_not_as_a_failure():
    t = track(
        [
            "(APIServer pid=1) ERROR 05-10 16:00:15 [async_llm.py:1] AsyncLLM output_handler failed.",
            "(APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
            "trace (above) for the root cause.",
        ]
    )
    assert t.run.failures == []
    assert [c.marker for c in t.run.consequences] == ["output_handler_failed", "engine_dead"]


def test_records_without_events_change_only_counters():
    t = track(["hello", "INFO 05-10 16:00:00 [x.py:1] nothing to see", "   plain text"])
    run = t.run
    assert run.records == 3 and run.recognised == 0 and run.failures == [] and run.config == {}
    assert run.phase == Phase.NONE and not t.vllm_seen


class Recorder:
    def __init__(self):
        self.seen = []

    def add(self, sample):
        self.seen.append((sample.line.lineno, sample.kv_usage_pct, sample.waiting))


def test_observers_get_every_stats_sample_of_their_run_in_order():
    lines = [STATS.format(s=i, run=4, wait=i, kv=10.0 * i) for i in range(5)]
    lines.insert(2, "INFO 08-20 11:00:00 [api_server.py:1] vLLM API server version 0.10.2")  # a restart
    t = track(lines, observers=lambda: {"rec": Recorder()})
    first, second = (r.stats.observers["rec"].seen for r in t.runs)
    assert first == [(1, 0.0, 0), (2, 10.0, 1)]
    assert second == [(4, 20.0, 2), (5, 30.0, 3), (6, 40.0, 4)]
    assert t.runs[1].stats.peak_kv_usage_pct == 40.0 and t.runs[1].stats.max_waiting == 4


def test_what_a_run_keeps_is_bounded():
    long_line = "(EngineCore_DP0 pid=5) ERROR 05-10 16:00:15 [core.py:1] RuntimeError: " + "x" * 100_000
    lines = [long_line.replace("RuntimeError", f"Error{i}Error") for i in range(100)]
    lines += [STATS.format(s=i % 60, run=1, wait=0, kv=1.0) for i in range(5000)]
    t = track(lines)
    run = t.run
    assert len(run.failures) == run.MAX_FAILURES and run.dropped_failures == 100 - run.MAX_FAILURES
    assert all(len(x.text) <= MAX_LINE_CHARS for f in run.failures for x in f.lines)
    assert run.stats.count == 5000 and len(run.stats.series) <= SERIES_POINTS
    assert sum(p.intervals for p in run.stats.series) == 5000
    assert len(Failure(kind="x", data={}, lines=[], stream="-", phase_at=Phase.NONE, seq=0).text_hashes) == 0


def test_the_tracker_and_the_run_view_judge_nothing():
    # No thresholds: neither module reads the judgement constants.
    root = Path(__file__).resolve().parents[1] / "vllm_doctor"
    for name in ("tracker.py", "run.py"):
        tree = ast.parse((root / name).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "thresholds" not in imported and "thresholds" not in modules, name


def test_a_pasted_launch_command_gives_config_that_vllms_own_printout_replaces():
    # The operator's command (h004's flags), then vLLM's own non-default args with another
    # utilization: vLLM's value is the one in force; the command's other values stay, marked
    # as the command's.
    t = track(
        [
            "vllm serve /models/GLM-4-32B-0414 -tp 2 --gpu-memory-utilization 0.6 --max-model-len 1024",
            "(APIServer pid=1) INFO 08-20 10:18:39 [utils.py:328] non-default args: {'gpu_memory_utilization': 0.8}",
        ]
    )
    run = t.runs[0]
    assert run.config["gpu_memory_utilization"] == 0.8 and run.config_lines["gpu_memory_utilization"].lineno == 2
    assert run.config["tensor_parallel_size"] == 2 and run.config["max_model_len"] == 1024
    assert run.command_keys == {"model", "tensor_parallel_size", "max_model_len"}
    assert run.markers["launch_command"].lineno == 1
    assert t.vllm_seen  # through vLLM's own line, not the command


def test_a_launch_command_alone_is_not_vllm_output():
    t = track(["`vllm serve Qwen/Qwen3-8B --max-model-len 8192`", "then it crashed, see below"])
    assert not t.vllm_seen and t.runs[0].config["max_model_len"] == 8192
