"""Unit tests for :func:`vllm_doctor.envelopes.unwrap` and :class:`vllm_doctor.reassemble.Reassembler`.

Lines are real ones from ``fixtures/logs`` where a log has them, otherwise built from
the formats in ``shared/vllm-messages.md`` section 0.
"""

import pytest
from conftest import FIXTURES

from vllm_doctor.envelopes import MAX_RECORD_CHARS, Record, unwrap
from vllm_doctor.reassemble import MAX_JOINED, Reassembler, reassemble

#: Every field an envelope can fill; the default Record says what "not found" looks like.
STRUCTURE = (
    "text",
    "wrapper",
    "host",
    "unit",
    "proc",
    "pid",
    "pids",
    "rank",
    "level",
    "time",
    "file",
    "vllm_header",
    "repeated",
)
_DEFAULT = Record(source="", lineno=0, text="")


def fixture_lines(prefix):
    """The physical lines of ``fixtures/logs/<prefix>-*.log``, newlines kept."""
    (path,) = FIXTURES.glob(f"{prefix}-*.log")
    with open(path, encoding="utf-8") as fh:
        return fh.readlines()


def one(line, lineno=7, source="log.txt"):
    recs = unwrap(source, lineno, line)
    assert len(recs) == 1, [r.text for r in recs]
    return recs[0]


def assert_structure(rec, **expected):
    """Fields named in ``expected`` have those values; every other field keeps its default."""
    for name in STRUCTURE:
        want = expected.get(name, getattr(_DEFAULT, name))
        assert getattr(rec, name) == want, f"{name}: {getattr(rec, name)!r} != {want!r}"


# --- one physical line, one record: each wrapper and prefix form ---------------------------

HDR = dict(vllm_header=True)

CASES = [
    # ANSI colour (ColoredFormatter) and line endings.
    (
        "ansi-colour",
        "\x1b[32mINFO\x1b[0m 08-20 14:03:52 \x1b[90m[default_loader.py:280]\x1b[0m Loading weights took 0.15 seconds",
        dict(
            text="Loading weights took 0.15 seconds",
            level="INFO",
            time="08-20 14:03:52",
            file="default_loader.py",
            **HDR,
        ),
    ),
    (
        "ansi-cyan-process-prefix",
        "\x1b[36m(EngineCore_DP0 pid=39544)\x1b[0m \x1b[32mINFO\x1b[0m 08-20 14:03:52 [gpu_worker.py:298] "
        "Available KV cache memory: 25.91 GiB",
        dict(
            text="Available KV cache memory: 25.91 GiB",
            proc="EngineCore_DP0",
            pid=39544,
            pids=[39544],
            level="INFO",
            time="08-20 14:03:52",
            file="gpu_worker.py",
            **HDR,
        ),
    ),
    (
        "crlf-newline-formatter",
        "INFO 08-20 14:03:52 [default_loader.py:280] Loading weights took 0.15 seconds\r\n",
        dict(
            text="Loading weights took 0.15 seconds",
            level="INFO",
            time="08-20 14:03:52",
            file="default_loader.py",
            **HDR,
        ),
    ),
    # Outer wrappers.
    (
        "journald-short",
        "Nov 30 03:08:21 host vllm[4127]: (APIServer pid=4127) INFO 11-30 03:08:21 [api_server.py:1885] "
        "vLLM API server version 0.11.0",
        dict(
            text="vLLM API server version 0.11.0",
            wrapper="journald",
            host="host",
            unit="vllm",
            proc="APIServer",
            pid=4127,
            pids=[4127, 4127],
            level="INFO",
            time="11-30 03:08:21",
            file="api_server.py",
            **HDR,
        ),
    ),
    (
        "journald-short-padded-day-no-pid",
        "Nov  3 03:08:21 gpu-box python3: INFO 11-03 03:08:21 [api_server.py:1885] vLLM API server version 0.11.0",
        dict(
            text="vLLM API server version 0.11.0",
            wrapper="journald",
            host="gpu-box",
            unit="python3",
            level="INFO",
            time="11-03 03:08:21",
            file="api_server.py",
            **HDR,
        ),
    ),
    (
        "journald-short-bash-unit-x021",
        "Apr 22 15:35:31 host1 bash[6277]: (APIServer pid=6277) INFO 04-22 15:35:31 [loggers.py:259] Engine 000: x",
        dict(
            text="Engine 000: x",
            wrapper="journald",
            host="host1",
            unit="bash",
            proc="APIServer",
            pid=6277,
            pids=[6277, 6277],
            level="INFO",
            time="04-22 15:35:31",
            file="loggers.py",
            **HDR,
        ),
    ),
    (
        "journald-short-iso",
        "2026-11-30T03:08:21+0000 host vllm[4127]: (APIServer pid=4127) INFO 11-30 03:08:21 [api_server.py:1885] "
        "vLLM API server version 0.11.0",
        dict(
            text="vLLM API server version 0.11.0",
            wrapper="journald-iso",
            host="host",
            unit="vllm",
            proc="APIServer",
            pid=4127,
            pids=[4127, 4127],
            level="INFO",
            time="11-30 03:08:21",
            file="api_server.py",
            **HDR,
        ),
    ),
    (
        "rfc3339-kubectl-timestamps-r014",
        "2025-10-14T23:59:26.998008524Z (APIServer pid=1) ERROR 10-14 16:59:26 [serving_chat.py:251]     "
        "async for result in self._tokenize_prompt_inputs_async(",
        dict(
            text="    async for result in self._tokenize_prompt_inputs_async(",
            wrapper="timestamp",
            proc="APIServer",
            pid=1,
            pids=[1],
            level="ERROR",
            time="10-14 16:59:26",
            file="serving_chat.py",
            **HDR,
        ),
    ),
    (
        "rfc3339-docker-logs-t-offset",
        "2024-05-01T10:00:00.123456+02:00 INFO 05-01 10:00:00 [core.py:74] Waiting for init message from front-end.",
        dict(
            text="Waiting for init message from front-end.",
            wrapper="timestamp",
            level="INFO",
            time="05-01 10:00:00",
            file="core.py",
            **HDR,
        ),
    ),
    (
        "docker-compose-x012",
        'vllm-1  | (APIServer pid=1) INFO:     192.0.2.1:49200 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        dict(
            text='192.0.2.1:49200 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
            wrapper="compose",
            unit="vllm",
            proc="APIServer",
            pid=1,
            pids=[1],
            level="INFO",
            file="uvicorn",
        ),
    ),
    (
        "docker-compose-v1-underscore",
        "vllm_server_1  | INFO 08-20 14:03:52 [launcher.py:37] Route: /health, Methods: GET",
        dict(
            text="Route: /health, Methods: GET",
            wrapper="compose",
            unit="vllm_server",
            level="INFO",
            time="08-20 14:03:52",
            file="launcher.py",
            **HDR,
        ),
    ),
    (
        "kubectl-prefix",
        "[pod/vllm-abc/vllm] INFO 08-20 14:03:52 [default_loader.py:280] Loading weights took 0.15 seconds",
        dict(
            text="Loading weights took 0.15 seconds",
            wrapper="kubectl-prefix",
            host="vllm-abc",
            unit="vllm",
            level="INFO",
            time="08-20 14:03:52",
            file="default_loader.py",
            **HDR,
        ),
    ),
    (
        "bracket-timestamp-r023",
        "[2024-07-08 15:17:34] INFO 07-08 07:17:34 metrics.py:334] Avg prompt throughput: 6501.4 tokens/s",
        dict(
            text="Avg prompt throughput: 6501.4 tokens/s",
            wrapper="bracket-timestamp",
            level="INFO",
            time="07-08 07:17:34",
            file="metrics.py",
            **HDR,
        ),
    ),
    (
        "bracket-iso-timestamp-s012",
        "[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) ValueError: Free memory on device cuda:1 (19.77/22.05 GiB)",
        dict(
            text="ValueError: Free memory on device cuda:1 (19.77/22.05 GiB)",
            wrapper="bracket-timestamp",
            proc="EngineCore_DP0",
            pid=6940,
            pids=[6940],
        ),
    ),
    (
        "fastchat-r027",
        "2023-12-27 11:25:36 | ERROR | stderr | Traceback (most recent call last):",
        dict(text="Traceback (most recent call last):", wrapper="fastchat", level="ERROR"),
    ),
    (
        "fastchat-around-uvicorn-r027",
        '2023-12-27 11:25:36 | INFO | stdout | INFO:     127.0.0.1:34180 - "POST /worker_generate HTTP/1.1" 500 '
        "Internal Server Error",
        dict(
            text='127.0.0.1:34180 - "POST /worker_generate HTTP/1.1" 500 Internal Server Error',
            wrapper="fastchat",
            level="INFO",
            file="uvicorn",
        ),
    ),
    (
        "pipe-timestamp-r032",
        "2025-05-30 09:53:48.746 | INFO 05-30 07:53:48 [monitor.py:33] torch.compile takes 3.88 s in total",
        dict(
            text="torch.compile takes 3.88 s in total",
            wrapper="pipe-timestamp",
            level="INFO",
            time="05-30 07:53:48",
            file="monitor.py",
            **HDR,
        ),
    ),
    (
        "markdown-quote-r008",
        "> (EngineCore pid=103) ERROR 05-04 22:52:30 [core.py:1138]     return original_fwd(",
        dict(
            text="    return original_fwd(",
            wrapper="quote",
            proc="EngineCore",
            pid=103,
            pids=[103],
            level="ERROR",
            time="05-04 22:52:30",
            file="core.py",
            **HDR,
        ),
    ),
    (
        "markdown-quote-without-space",
        ">INFO 05-04 22:52:30 [core.py:1138] EngineCore failed to start.",
        dict(
            text="EngineCore failed to start.",
            wrapper="quote",
            level="INFO",
            time="05-04 22:52:30",
            file="core.py",
            **HDR,
        ),
    ),
    # Process prefixes.
    (
        "apiserver",
        "(APIServer pid=1) INFO 08-20 10:18:39 [api_server.py:1885] vLLM API server version 0.10.1.1",
        dict(
            text="vLLM API server version 0.10.1.1",
            proc="APIServer",
            pid=1,
            pids=[1],
            level="INFO",
            time="08-20 10:18:39",
            file="api_server.py",
            **HDR,
        ),
    ),
    (
        "enginecore-dp0",
        "(EngineCore_DP0 pid=39544) ERROR 08-20 10:18:39 [core.py:700] EngineCore failed to start.",
        dict(
            text="EngineCore failed to start.",
            proc="EngineCore_DP0",
            pid=39544,
            pids=[39544],
            level="ERROR",
            time="08-20 10:18:39",
            file="core.py",
            **HDR,
        ),
    ),
    (
        "vllmworker-rank",
        "(VllmWorker rank=5 pid=3073) ERROR 05-27 11:47:57 [multiproc_executor.py:470] WorkerProc hit an exception.",
        dict(
            text="WorkerProc hit an exception.",
            proc="VllmWorker",
            pid=3073,
            rank=5,
            pids=[3073],
            level="ERROR",
            time="05-27 11:47:57",
            file="multiproc_executor.py",
            **HDR,
        ),
    ),
    (
        "vllmworkerprocess-v0",
        "(VllmWorkerProcess pid=232075) INFO 10-14 12:32:47 multiproc_worker_utils.py:233] Worker ready; awaiting tasks",
        dict(
            text="Worker ready; awaiting tasks",
            proc="VllmWorkerProcess",
            pid=232075,
            pids=[232075],
            level="INFO",
            time="10-14 12:32:47",
            file="multiproc_worker_utils.py",
            **HDR,
        ),
    ),
    (
        "rayworkerwrapper-repeated",
        "(RayWorkerWrapper pid=5849, ip=10.121.129.12) INFO 04-18 01:30:29 [parallel_state.py:959] rank 9 in world "
        "size 16 is assigned as DP rank 0, PP rank 1, TP rank 1 [repeated 7x across cluster]",
        dict(
            text="rank 9 in world size 16 is assigned as DP rank 0, PP rank 1, TP rank 1",
            proc="RayWorkerWrapper",
            pid=5849,
            pids=[5849],
            level="INFO",
            time="04-18 01:30:29",
            file="parallel_state.py",
            repeated=7,
            **HDR,
        ),
    ),
    (
        "ray-repeated-with-dedup-note",
        "(RayWorkerWrapper pid=639, ip=192.0.2.196) host1:639:639 [5] NCCL INFO Using network IB [repeated 15x across "
        "cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
        "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication for more "
        "options.)",
        dict(
            text="host1:639:639 [5] NCCL INFO Using network IB",
            proc="RayWorkerWrapper",
            pid=639,
            pids=[639],
            repeated=15,
        ),
    ),
    (
        "nested-ray-task-and-enginecore-r038",
        "(inference_worker_task pid=6758, ip=192.0.2.88) (EngineCore_DP0 pid=7110) INFO 01-15 15:45:29 "
        "[weight_utils.py:162] Loading weights from /home/ray/model-00001-of-00004.safetensors",
        dict(
            text="Loading weights from /home/ray/model-00001-of-00004.safetensors",
            proc="EngineCore_DP0",
            pid=7110,
            pids=[6758, 7110],
            level="INFO",
            time="01-15 15:45:29",
            file="weight_utils.py",
            **HDR,
        ),
    ),
    (
        "nested-ray-data-mapworker",
        "(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=36916, ip=10.0.96.245) (Worker pid=37014) INFO 01-15 15:45:29 "
        "[gpu_worker.py:298] Available KV cache memory: 3.5 GiB",
        dict(
            text="Available KV cache memory: 3.5 GiB",
            proc="Worker",
            pid=37014,
            pids=[36916, 37014],
            level="INFO",
            time="01-15 15:45:29",
            file="gpu_worker.py",
            **HDR,
        ),
    ),
    (
        "raylet-without-pid",
        "(raylet) A worker died or was killed while executing a task by an unexpected system error.",
        dict(text="A worker died or was killed while executing a task by an unexpected system error.", proc="raylet"),
    ),
    (
        "torch-rank",
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
        dict(text="torch.OutOfMemoryError: CUDA out of memory.", rank=0),
    ),
    (
        "torch-rank-cpp-warning-four-digit-date",
        "[rank3]:[W1223 23:34:22.775000000 ProcessGroupNCCL.cpp:1553] Warning: WARNING: destroy_process_group() was "
        "not called before program exit, which can leak resources.",
        dict(
            text="Warning: WARNING: destroy_process_group() was not called before program exit, which can leak "
            "resources.",
            rank=3,
        ),
    ),
    (
        "omni-stage-s015",
        "(Worker pid=2291010) [Stage-0] ERROR 03-12 08:22:28 [multiproc_executor.py:800]     raise ValueError(",
        dict(
            text="    raise ValueError(",
            proc="Worker",
            pid=2291010,
            pids=[2291010],
            level="ERROR",
            time="03-12 08:22:28",
            file="multiproc_executor.py",
            **HDR,
        ),
    ),
    # vLLM's record prefix and uvicorn's.
    (
        "vllm-header-new",
        "INFO 08-20 10:18:39 [file.py:123] msg",
        dict(text="msg", level="INFO", time="08-20 10:18:39", file="file.py", **HDR),
    ),
    (
        "vllm-header-old",
        "INFO 08-20 10:18:39 file.py:123] msg",
        dict(text="msg", level="INFO", time="08-20 10:18:39", file="file.py", **HDR),
    ),
    (
        "vllm-header-debug-relative-path",
        "DEBUG 08-20 10:18:39 [v1/executor/multiproc_executor.py:597] Worker 0 ready",
        dict(
            text="Worker 0 ready", level="DEBUG", time="08-20 10:18:39", file="v1/executor/multiproc_executor.py", **HDR
        ),
    ),
    (
        "vllm-header-cut-s013",
        "[multiproc_executor.py:492] ValueError: Free memory on device (31.44/47.38 GiB) on startup",
        dict(
            text="ValueError: Free memory on device (31.44/47.38 GiB) on startup", file="multiproc_executor.py", **HDR
        ),
    ),
    (
        "uvicorn",
        "INFO:     Application startup complete.",
        dict(text="Application startup complete.", level="INFO", file="uvicorn"),
    ),
    (
        "uvicorn-under-apiserver",
        "(APIServer pid=1) INFO:     Application startup complete.",
        dict(text="Application startup complete.", proc="APIServer", pid=1, pids=[1], level="INFO", file="uvicorn"),
    ),
    # Nothing to peel.
    (
        "bare-tqdm-bar",
        "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 155.70it/s]",
        dict(text="Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 155.70it/s]"),
    ),
]


@pytest.mark.parametrize("line,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unwrap_form(line, expected):
    rec = one(line)
    assert_structure(rec, **expected)
    assert (rec.source, rec.lineno) == ("log.txt", 7)


def test_torch_rank_cpp_warning_three_digit_date_s021():
    line = fixture_lines("s021")[1]
    assert line.startswith("[rank0]:[W409 11:42:27.776885251 ProcessGroupNCCL.cpp:1250] ")
    rec = one(line)
    assert rec.rank == 0
    assert rec.text.startswith("Warning: WARNING: process group has NOT been destroyed")


def test_record_keeps_raw_line_and_bare_flag():
    rec = one("(APIServer pid=1) INFO 08-20 10:18:39 [api_server.py:1] up\r\n", lineno=3, source="a.log")
    assert rec.raw == "(APIServer pid=1) INFO 08-20 10:18:39 [api_server.py:1] up"
    assert (rec.source, rec.lineno, rec.inner_bare, rec.stream) == ("a.log", 3, False, "pid:1")
    bare = one("    self.run()")
    assert (bare.inner_bare, bare.wrapper, bare.stream, bare.text) == (True, None, "-", "    self.run()")


def test_trailing_space_and_line_length_are_recorded():
    rec = one("Of the allocated memory 9.67 GiB is allocated by PyTorch,   \n")
    assert rec.text == "Of the allocated memory 9.67 GiB is allocated by PyTorch,"
    assert rec.trailing_space is True
    assert rec.line_len == len(rec.text)


# --- glued records: one physical line, several records -------------------------------------


def test_tqdm_bar_glued_before_v0_record_r004():
    line = fixture_lines("r004")[0]
    bar, stats = unwrap("r004", 1, line)
    assert bar.lineno == stats.lineno == 1
    assert_structure(
        bar,
        text="Processed prompts:   0%|  | 34/10000 [00:29<3:36:54,  1.31s/it, est. speed "
        "input: 407.31 toks/s, output: 7561.83 toks/s]",
    )
    assert_structure(
        stats,
        level="INFO",
        time="06-16 21:24:15",
        file="metrics.py",
        vllm_header=True,
        text="Avg prompt throughput: 2706.1 tokens/s, Avg generation throughput: 13395.4 tokens/s, "
        "Running: 34 reqs, Swapped: 100 reqs, Pending: 9832 reqs, GPU KV cache usage: 99.2%, "
        "CPU KV cache usage: 70.4%.",
    )


def test_tqdm_bar_glued_brief_example():
    line = (
        "Processed prompts:   0%|  | 34/10000 [00:29<3:36:54,  1.31s/it]INFO 06-16 21:24:15 metrics.py:341] "
        "Avg prompt throughput: 1.0 tokens/s"
    )
    recs = unwrap("t", 12, line)
    assert [(r.lineno, r.level, r.file, r.text) for r in recs] == [
        (12, None, None, "Processed prompts:   0%|  | 34/10000 [00:29<3:36:54,  1.31s/it]"),
        (12, "INFO", "metrics.py", "Avg prompt throughput: 1.0 tokens/s"),
    ]


def test_v1_stats_lines_glued_r042():
    line = fixture_lines("r042")[1]
    recs = unwrap("r042", 2, line)
    common = "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    tail = " tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: {}%, Prefix cache hit rate: 0.0%"
    assert [(r.time, r.text) for r in recs] == [
        ("07-28 06:41:09", common + "239.2" + tail.format("91.6")),
        ("07-28 06:41:19", common + "240.0" + tail.format("91.9")),
        ("07-28 06:41:29", common + "240.8 tokens/"),  # the paste was cut here
    ]
    for r in recs:
        assert (r.lineno, r.level, r.file, r.vllm_header) == (2, "INFO", "loggers.py", True)


def test_glued_records_take_their_own_process_prefix_and_share_the_outer_wrapper():
    line = (
        "Aug 19 18:34:30 host1 vllm[100]: (APIServer pid=8707) INFO 07-28 06:41:09 [loggers.py:118] a"
        "(EngineCore_DP0 pid=8710) WARNING 07-28 06:41:19 [core.py:1] b"
    )
    first, second = unwrap("t", 5, line)
    assert_structure(
        first,
        text="a",
        wrapper="journald",
        host="host1",
        unit="vllm",
        proc="APIServer",
        pid=8707,
        pids=[100, 8707],
        level="INFO",
        time="07-28 06:41:09",
        file="loggers.py",
        vllm_header=True,
    )
    assert_structure(
        second,
        text="b",
        wrapper="journald",
        host="host1",
        unit="vllm",
        proc="EngineCore_DP0",
        pid=8710,
        pids=[100, 8710],
        level="WARNING",
        time="07-28 06:41:19",
        file="core.py",
        vllm_header=True,
    )
    assert first.lineno == second.lineno == 5


def test_carriage_returns_separate_pieces_each_read_as_a_line():
    # Progress-bar redraws, a record written after a bar, and old CR-only line endings alike.
    recs = unwrap("t", 4, "Loading 50%\rINFO 08-20 10:18:39 [file.py:1] msg\rLoading 100%\r\n")
    assert [(r.lineno, r.level, r.text) for r in recs] == [
        (4, None, "Loading 50%"),
        (4, "INFO", "msg"),
        (4, None, "Loading 100%"),
    ]
    assert [r.text for r in unwrap("t", 1, "bar 10%\rbar 20%\rbar 30%")] == ["bar 10%", "bar 20%", "bar 30%"]


# --- size limits and robustness -------------------------------------------------------------


def test_ten_megabyte_line_is_cut_to_max_record_chars():
    header = "INFO 08-20 10:18:39 [f.py:1] "
    rec = one(header + "x" * (10 * 2**20))
    assert len(rec.raw) == MAX_RECORD_CHARS
    assert rec.text == "x" * (MAX_RECORD_CHARS - len(header))


def test_many_glued_records_stop_at_max_record_chars():
    unit = "INFO 08-20 10:18:39 [f.py:1] abc"
    recs = unwrap("t", 2, unit * 5000)
    assert len(recs) == MAX_RECORD_CHARS // len(unit)
    assert {(r.lineno, r.text, r.file) for r in recs} == {(2, "abc", "f.py")}


@pytest.mark.parametrize(
    "line",
    [
        "",
        "\n",
        "\r\n",
        "\r\r\r",
        "\x1b",
        "\x1b[",
        "((((((",
        "(x pid=) ",
        "[rank",
        "> > > ",
        "[pod/a/b] ",
        "2025-01-01T00:00:00Z",
        "Nov 30 03:08:21 host vllm[1]: ",
        "(" * 70000,
        "[" * 70000,
        "vllm-1  | " * 10000,
        "INFO " * 20000,
        "\x00\udcff\ufffd",
        "(APIServer pid=1) " * 5000,
    ],
)
def test_unwrap_never_raises_and_stays_within_bounds(line):
    recs = unwrap("t", 9, line)
    assert recs and all(isinstance(r, Record) for r in recs)
    assert all(r.lineno == 9 and len(r.text) <= MAX_RECORD_CHARS for r in recs)


# --- Reassembler: hard-wrapped and re-typed lines -------------------------------------------


def reassembled(lines, source="t"):
    r = Reassembler()
    out = []
    for n, line in enumerate(lines, 1):
        out.extend(r.feed(unwrap(source, n, line)))
    return out + r.flush()


def test_hard_wrapped_stats_line_is_joined():
    recs = reassembled(
        [
            "INFO 07-03 23:23:42 [metrics.py:536] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
            "616.1 tokens/s, Running: 32 r\n",
            "eqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 17.6%, CPU KV cache usage: 0.0%.\n",
        ]
    )
    assert len(recs) == 1
    rec = recs[0]
    assert "Running: 32 reqs, Swapped" in rec.text
    assert rec.text == (
        "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 616.1 tokens/s, Running: "
        "32 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 17.6%, CPU KV cache usage: "
        "0.0%."
    )
    assert (rec.continued, rec.lineno, rec.level, rec.file) == (1, 1, "INFO", "metrics.py")


def test_hard_wrapped_fixture_r006_joins_every_pair():
    recs = reassembled(fixture_lines("r006")[:4])
    assert [(r.lineno, r.continued) for r in recs] == [(1, 1), (3, 1)]
    assert all(r.text.endswith("CPU KV cache usage: 0.0%.") and "Running: 32 reqs, Swapped" in r.text for r in recs)


def test_hard_wrapped_traceback_frame_under_timestamps_r014():
    recs = reassembled(fixture_lines("r014")[:2])
    assert len(recs) == 1
    assert recs[0].text == (
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_engine.py",'
        " line 704, in _tokenize_prompt_input_async"
    )
    assert (recs[0].wrapper, recs[0].continued) == ("timestamp", 1)


def test_hard_wrapped_oom_repr_r012():
    recs = reassembled(fixture_lines("r012")[3:5])
    assert len(recs) == 1 and recs[0].continued == 1
    assert "(e.g., CUDA Graphs), and 1.47 GiB is reserved by PyTorch but unallocated." in recs[0].text


def test_oom_retyped_one_sentence_per_line_x010():
    lines = fixture_lines("x010")
    recs = reassembled(lines)
    by_line = {r.lineno: r for r in recs}
    oom = by_line[4]
    assert oom.continued == 5
    assert oom.text.startswith(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 252.00 MiB. GPU 0 has "
        "a total capacity of 10.57 GiB of which 163.12 MiB is free. Process 2073789 has "
        "10.41 GiB memory in use. Of the allocated memory 9.67 GiB is allocated by PyTorch,"
    )
    assert oom.text.endswith("26.44 MiB is reserved by PyTorch but unallocated.")
    # The sampler message before it and the advice after it stay records of their own.
    assert by_line[1].text == (
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests."
    )
    assert by_line[2].continued == 0 and by_line[10].continued == 0
    assert by_line[10].text == "If reserved but unallocated memory is large try setting"
    # Every non-blank physical line is accounted for.
    assert sum(1 + r.continued for r in recs) == sum(1 for line in lines if line.strip())


def test_oom_retyped_keeps_the_space_after_a_comma_x010():
    oom = next(r for r in reassembled(fixture_lines("x010")) if r.lineno == 4)
    assert (
        "allocated by PyTorch, with 299.88 MiB allocated in private pools (e.g., CUDA Graphs), and 26.44 MiB"
        in oom.text
    )


def test_short_unrelated_lines_are_not_joined_s001():
    lines = fixture_lines("s001")
    recs = reassembled(lines)
    assert [(r.lineno, r.continued, r.text) for r in recs] == [
        (n, 0, line.rstrip("\n")) for n, line in enumerate(lines, 1)
    ]


LONG_CUT = "INFO 07-03 23:23:42 [metrics.py:536] Avg prompt throughput: 0.0 tokens/s, Running: 32 r"


@pytest.mark.parametrize(
    "follower",
    [
        "INFO 07-03 23:23:43 [metrics.py:536] eqs",  # carries its own record prefix
        "(APIServer pid=1) eqs, Swapped: 0 reqs",  # carries a process prefix
        "    eqs, Swapped: 0 reqs",  # indented: a traceback source line
        "Eqs, Swapped: 0 reqs",  # starts a new sentence
        "ValueError: something",  # starts an exception
    ],
)
def test_lines_with_an_envelope_or_a_new_start_are_not_joined(follower):
    recs = reassembled([LONG_CUT, follower])
    assert [r.continued for r in recs] == [0, 0]
    assert recs[0].text.endswith("Running: 32 r")


def test_blank_line_ends_the_held_record():
    recs = reassembled([LONG_CUT, "", "eqs, Swapped: 0 reqs"])
    assert [(r.lineno, r.continued) for r in recs] == [(1, 0), (3, 0)]


def test_short_previous_line_is_not_a_hard_wrap():
    recs = reassembled(["INFO 07-03 23:23:42 [x.py:1] Running: 32 r", "eqs"])
    assert [r.text for r in recs] == ["Running: 32 r", "eqs"]


def test_at_most_max_joined_lines_are_joined():
    piece = "abcdefghij" * 8
    recs = reassembled([piece] * (MAX_JOINED + 3))
    assert [(r.lineno, r.continued) for r in recs] == [(1, MAX_JOINED), (MAX_JOINED + 2, 1)]
    assert recs[0].text == piece * (MAX_JOINED + 1)


def test_reassemble_generator_matches_the_class():
    lines = fixture_lines("r006")
    got = list(reassemble(unwrap("t", n, line) for n, line in enumerate(lines, 1)))
    want = reassembled(lines)
    assert [(r.lineno, r.continued, r.text) for r in got] == [(r.lineno, r.continued, r.text) for r in want]
