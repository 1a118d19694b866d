"""The tracker records what the log says, per run, in bounded memory, and judges nothing."""

import ast
from pathlib import Path

import pytest

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
    assert by_gpu[0].tags == {"graph_capture", "vllm_code"} and by_gpu[0].stream == "pid:7"
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


SHM = (
    "({proc} pid={pid}) INFO 05-28 14:{m:02d}:28 [shm_broadcast.py:681] No available shared memory broadcast block "
    "found in 60 seconds. This typically happens when some processes are hanging or doing some time-consuming work "
    "(e.g. compilation, weight/kv cache quantization)."
)


def test_repeated_wait_warnings_are_counted_per_process_with_the_first_and_last_line():
    lines = [SHM.format(proc="EngineCore_DP0", pid=10, m=m) for m in range(3)]
    lines += [SHM.format(proc="EngineCore_DP1", pid=11, m=m) for m in range(2)]
    t = track(lines)
    log = t.run.stalls
    sig = log.signals["shm_wait"]
    assert sig.count == 5 and (sig.first.lineno, sig.last.lineno) == (1, 5)
    assert sig.by_stream == {"EngineCore_DP0 pid 10": 3, "EngineCore_DP1 pid 11": 2}
    ep = log.episode
    assert ep.warnings == 5 and ep.most_from_one_process == 3 and ep.resolved_by is None
    assert (ep.first.lineno, ep.last.lineno) == (1, 5) and ep.data["interval_s"] == 60
    assert log.longest_resolved is None
    assert t.vllm_seen  # a stall message alone is vLLM output


def test_progress_after_wait_warnings_ends_the_episode_a_zero_stats_line_does_not():
    idle = STATS.format(s=0, run=2, wait=0, kv=5.0).replace("10.0 tokens/s", "0.0 tokens/s")
    lines = [SHM.format(proc="EngineCore_DP0", pid=10, m=m) for m in range(2)]
    lines += [idle]  # running at 0 tokens/s: no progress
    lines += [SHM.format(proc="EngineCore_DP0", pid=10, m=3)]
    lines += ["(Worker pid=12) INFO 05-28 14:05:00 [monitor.py:53] torch.compile took 54.58 s in total"]
    lines += [SHM.format(proc="EngineCore_DP0", pid=10, m=9)]
    log = track(lines).run.stalls
    assert log.longest_resolved.warnings == 3 and log.longest_resolved.resolved_by.lineno == 5
    assert log.episode.warnings == 1 and log.episode.first.lineno == 6
    assert log.signals["shm_wait"].count == 4


def test_rays_repeated_count_is_counted_and_collective_timeouts_keep_each_ranks_sequence():
    lines = [
        "(RayWorkerWrapper pid=21, ip=10.0.0.2) DEBUG 05-14 09:12:03 [shm_broadcast.py:394] No available shared "
        "memory broadcast block found in 60 second. [repeated 7x across cluster]",
    ]
    for rank, seq in ((0, 100), (1, 100), (2, 99)):
        lines.append(
            f"[rank{rank}]:[E1218 20:27:21.4 ProcessGroupNCCL.cpp:629] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600081 milliseconds before timing out."
        )
    log = track(lines).run.stalls
    assert log.signals["shm_wait"].count == 7 and log.episode.warnings == 7
    assert log.episode.data["idle_prints"] is True
    nccl = log.signals["collective_timeout"]
    assert nccl.count == 3 and nccl.seq_by_rank == {0: 100, 1: 100, 2: 99}
    assert nccl.data["op"] == "ALLREDUCE" and log.episode.data["signal"] == "shm_wait"


def test_what_the_stall_log_keeps_is_bounded():
    lines = [SHM.format(proc=f"Worker_TP{i}", pid=1000 + i, m=i % 60) for i in range(500)]
    log = track(lines).run.stalls
    assert log.signals["shm_wait"].count == 500 and log.episode.warnings == 500
    assert len(log.signals["shm_wait"].by_stream) == 64 and len(log.episode.by_stream) == 64
    assert set(log.signals) == {"shm_wait"}


# -- a traceback printed after the failure it explains (hunt4 h01, h06) -------------------------

_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of "
    "79.00 GiB of which 10.00 MiB is free. Including non-PyTorch memory, this process has 78.90 GiB memory in use."
)
_P = "(EngineCore_DP0 pid=270) ERROR 11-19 12:16:36 [v1/engine/core.py:842] "
_STEPS = [
    ("load_model", "vllm/v1/worker/gpu_model_runner.py", "weight_load_oom"),
    ("capture_model", "vllm/v1/worker/gpu_model_runner.py", "cuda_graph_capture_oom"),
    ("_dummy_sampler_run", "vllm/v1/worker/gpu_model_runner.py", "sampler_warmup_oom"),
]


def _message_first(func, path):
    """V0's engine (logger.exception(e)): the message, then the traceback under it."""
    return [
        _P + _OOM,
        _P + "Traceback (most recent call last):",
        _P + f'  File "/usr/lib/python3.12/site-packages/{path}", line 10, in {func}',
        _P + "    x = torch.empty(n)",
    ]


def _no_header(func, path):
    """A chained traceback pasted without its "The above exception ..." header."""
    return [_P + _OOM, _P + f'  File "/usr/lib/python3.12/site-packages/{path}", line 10, in {func}']


def _unindented_code(func, path):
    """GKE's export strips the indentation of the source lines (h01)."""
    return [
        _P + _OOM,
        _P
        + 'File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 507, in compile_or_warm_up_model',
        _P + f"self.model_runner.{func}(hidden_states=last_hidden_states)",
    ]


@pytest.mark.parametrize("shape", [_message_first, _no_header, _unindented_code], ids=lambda f: f.__name__)
@pytest.mark.parametrize("func,path,cls", _STEPS, ids=[s[0] for s in _STEPS])
def test_a_traceback_after_the_failure_places_it(shape, func, path, cls):
    from vllm_doctor import diagnose

    assert diagnose(shape(func, path)).primary_class == cls


def test_an_unplaced_failure_stays_unplaced_without_a_traceback_after_it():
    from vllm_doctor import diagnose

    assert diagnose([_P + _OOM]).primary_class == "runtime_oom"


def test_compile_or_warm_up_model_alone_is_after_the_kv_cache():
    from vllm_doctor import diagnose

    lines = [
        _P + _OOM,
        _P
        + 'File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 507, in compile_or_warm_up_model',
    ]
    assert diagnose(lines).primary_class == "cuda_graph_capture_oom"
