"""Unit tests for :func:`vllm_doctor.envelopes.unwrap` and :class:`vllm_doctor.reassemble.Reassembler`.

Lines are real ones from ``fixtures/logs`` where a log has them, otherwise built from
the formats in ``shared/vllm-messages.md`` section 0.
"""

import pytest
from conftest import FIXTURES, read_records

from vllm_doctor.envelopes import MAX_RECORD_CHARS, Record, unwrap
from vllm_doctor.reassemble import MAX_JOINED, SENTENCE_CHAINS, Reassembler, reassemble

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
    # Paste damage and wrappers seen in the wild (issue 10).
    (
        "byte-order-mark",
        "\ufeffINFO 08-20 10:18:39 [file.py:123] msg",
        dict(text="msg", level="INFO", time="08-20 10:18:39", file="file.py", **HDR),
    ),
    (
        "docker-desktop-continuation-t023",
        "2025-06-12 20:49:44 CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.",
        dict(
            text="CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
            "below might be incorrect.",
            wrapper="space-timestamp",
        ),
    ),
    (
        "docker-desktop-keeps-traceback-indentation",
        "2025-06-12 20:49:44     self.run()",
        dict(text="    self.run()", wrapper="space-timestamp"),
    ),
    (
        "rfc3339-nano-t025",
        "2026-03-11T17:57:32.372155926Z (EngineCore_DP0 pid=269) ERROR 03-11 17:57:32 [core.py:1006]     raise e "
        "from None",
        dict(
            text="    raise e from None",
            wrapper="timestamp",
            proc="EngineCore_DP0",
            pid=269,
            pids=[269],
            level="ERROR",
            time="03-11 17:57:32",
            file="core.py",
            **HDR,
        ),
    ),
    (
        "cri-log-file-line",
        "2026-03-11T17:57:32.372155926Z stderr F INFO 03-11 17:57:32 [core.py:1] Waiting for init message",
        dict(
            text="Waiting for init message",
            wrapper="timestamp",
            level="INFO",
            time="03-11 17:57:32",
            file="core.py",
            **HDR,
        ),
    ),
    (
        "loki-logcli-default-output",
        '2026-11-30T03:08:21+01:00 {container="vllm", namespace="ml", pod="vllm-0"}   INFO 11-30 03:08:21 '
        "[core.py:1] Waiting for init message",
        dict(
            text="Waiting for init message",
            wrapper="loki-text",
            host="vllm-0",
            unit="vllm",
            level="INFO",
            time="11-30 03:08:21",
            file="core.py",
            **HDR,
        ),
    ),
    (
        "journald-iso-is-no-exception-line",
        # "host ValueError: ..." after a time stamp is a message, not a journald identifier.
        "2026-11-30T03:08:21+00:00 ValueError: No available memory for the cache blocks.",
        dict(text="ValueError: No available memory for the cache blocks.", wrapper="timestamp"),
    ),
    (
        "app-logging-format-u014",
        "2024-12-19 21:40:35 ERROR 56542 [async_llm_engine.py:64]     result = self.fn(*self.args, **self.kwargs)^M",
        dict(
            text="    result = self.fn(*self.args, **self.kwargs)",
            wrapper="app-log",
            pid=56542,
            pids=[56542],
            time="12-19 21:40:35",
            file="async_llm_engine.py",
        ),
    ),
    (
        "ray-job-cli-caret-ansi-u018",
        "2025-04-24 18:57:03,337 ERR cli.py:71 -- ^[[31mJob 'raysubmit_LKFSP4hfiq2xPuz6' failed^[[39m",
        dict(text="Job 'raysubmit_LKFSP4hfiq2xPuz6' failed", wrapper="app-log", time="04-24 18:57:03", file="cli.py"),
    ),
    (
        "caret-ansi-process-prefix-and-ray-count-u018",
        "^[[36m(LLMRayActor pid=95409)^[[0m INFO 04-24 18:22:16 [block_pool.py:264] Successfully reset prefix "
        "cache^[[32m [repeated 7x across cluster]^[[0m",
        dict(
            text="Successfully reset prefix cache",
            proc="LLMRayActor",
            pid=95409,
            pids=[95409],
            level="INFO",
            time="04-24 18:22:16",
            file="block_pool.py",
            repeated=7,
            **HDR,
        ),
    ),
    (
        "lm-eval-logger-r040",
        "2024-11-26:14:42:58,395 INFO     [task.py:411] Building contexts for meta_gpqa_cot on rank 0...",
        dict(
            text="Building contexts for meta_gpqa_cot on rank 0...",
            wrapper="app-log",
            time="11-26 14:42:58",
            file="task.py",
        ),
    ),
    (
        "python-logging-classic-around-a-vllm-record",
        "2024-05-01 10:00:07,123 - lm_eval.models.vllm - INFO - (EngineCore_DP0 pid=7) INFO 05-01 10:00:07 "
        "[gpu_worker.py:298] Available KV cache memory: 25.91 GiB",
        dict(
            text="Available KV cache memory: 25.91 GiB",
            wrapper="app-log",
            proc="EngineCore_DP0",
            pid=7,
            pids=[7],
            level="INFO",
            time="05-01 10:00:07",
            file="gpu_worker.py",
            **HDR,
        ),
    ),
    (
        "python-logging-classic-keeps-traceback-indentation",
        "2024-05-01 10:00:07,123 - launcher - ERROR -     self.run()",
        dict(text="    self.run()", wrapper="app-log", time="05-01 10:00:07"),
    ),
    (
        "loguru",
        "2024-05-01 10:00:07.123 | INFO     | harness.run:main:42 - Loading weights took 0.15 seconds",
        dict(text="Loading weights took 0.15 seconds", wrapper="app-log", time="05-01 10:00:07", file="harness.run"),
    ),
    (
        "rich-handler-source-moved-to-the-end",
        "[05/01/24 10:00:07] INFO     Loading weights took 0.15 seconds                      default_loader.py:280",
        dict(
            text="Loading weights took 0.15 seconds", wrapper="app-log", time="05-01 10:00:07", file="default_loader.py"
        ),
    ),
    (
        "rich-handler-level-padding-then-source-indentation",
        "[05/01/24 10:00:07] ERROR        self.model_runner.capture_model()                  gpu_worker.py:298",
        dict(
            text="    self.model_runner.capture_model()", wrapper="app-log", time="05-01 10:00:07", file="gpu_worker.py"
        ),
    ),
    (
        "rich-handler-repeated-time-left-blank",
        "                    INFO     Loading weights took 0.15 seconds                      default_loader.py:280",
        dict(text="Loading weights took 0.15 seconds", level="INFO", file="default_loader.py"),
    ),
    (
        "app-format-inside-vllm-process-prefix",
        # vLLM's process prefix around its logger's own layout: the level is the record's.
        "(EngineCore_DP0 pid=7) 2024-12-19 21:40:35 ERROR 7 [core.py:700] EngineCore failed to start.",
        dict(
            text="EngineCore failed to start.",
            wrapper="app-log",
            proc="EngineCore_DP0",
            pid=7,
            pids=[7],
            level="ERROR",
            time="12-19 21:40:35",
            file="core.py",
            **HDR,
        ),
    ),
    (
        "app-format-inside-another-process-prefix-keeps-its-level-apart",
        "(TaskRunner pid=7) 2024-12-19 21:40:35 ERROR 7 [trainer.py:70] step failed",
        dict(
            text="step failed",
            wrapper="app-log",
            proc="TaskRunner",
            pid=7,
            pids=[7],
            time="12-19 21:40:35",
            file="trainer.py",
        ),
    ),
    (
        "launcher-bracketed-word-level-and-component-h002",
        "2026-05-08 11:50:14.752 [Error] (Process) (EngineCore pid=3043) ERROR 05-08 11:50:14 [core.py:1136] "
        "    tensor = torch.zeros(",
        dict(
            text="    tensor = torch.zeros(",
            wrapper="app-log",
            proc="EngineCore",
            pid=3043,
            pids=[3043],
            level="ERROR",
            time="05-08 11:50:14",
            file="core.py",
            **HDR,
        ),
    ),
    (
        "launcher-bracketed-word-level-keeps-a-traceback-indentation",
        '2026-05-08 11:50:14.752 [Info] (Server)   File "/x/multiprocessing/process.py", line 314, in _bootstrap',
        dict(
            text='  File "/x/multiprocessing/process.py", line 314, in _bootstrap',
            wrapper="app-log",
            time="05-08 11:50:14",
        ),
    ),
    (
        "launcher-bracketed-word-level-then-a-vllm-process-name",
        "2026-05-08 11:50:14.752 [Info] (EngineCore_DP0) Waiting for init message",
        dict(text="Waiting for init message", wrapper="app-log", proc="EngineCore_DP0", time="05-08 11:50:14"),
    ),
    (
        "a-capitalised-level-word-without-brackets-is-message-text",
        "2026-05-08 11:50:14 Error while loading the model",
        dict(text="Error while loading the model", wrapper="space-timestamp"),
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


# --- paste damage: TUI panes, caret notation ----------------------------------------------


def test_k9s_pane_border_and_padding_are_peeled_t009():
    line = fixture_lines("t009")[2]
    assert line.startswith("\u2502 INFO ") and line.rstrip("\n").endswith("\u2502")
    rec = one(line)
    assert_structure(
        rec,
        text="the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB",
        wrapper="frame",
        level="INFO",
        time="03-21 20:15:45",
        file="worker.py",
        vllm_header=True,
    )


def test_cut_pane_without_its_right_border_u013():
    lines = fixture_lines("u013")
    cut = next(line for line in lines if line.rstrip("\n").endswith("engine.py:157]"))
    assert_structure(one(cut), text="", wrapper="frame", level="ERROR", time="09-27 06:46:46", file="engine.py", **HDR)
    assert one(lines[0]).text == "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_caret_notation_of_real_escapes_reads_the_same():
    real = "\x1b[36m(EngineCore_DP0 pid=1)\x1b[0m \x1b[32mINFO\x1b[0m 08-20 14:03:52 [core.py:1] up\r"
    caret = "^[[36m(EngineCore_DP0 pid=1)^[[0m ^[[32mINFO^[[0m 08-20 14:03:52 [core.py:1] up^M"
    a, b = one(real), one(caret)
    assert_structure(b, **{k: getattr(a, k) for k in STRUCTURE})
    assert b.text == "up"


def test_a_caret_inside_a_message_is_kept():
    assert one("INFO 08-20 14:03:52 [x.py:1] x^2 grows; see ^M and ^[ in docs").text == (
        "x^2 grows; see ^M and ^[ in docs"
    )


# --- envelope numbers: ASCII digits, bounded, a hostile value is ignored ------------------

HUGE = "9" * 5000


@pytest.mark.parametrize(
    "line,expected",
    [
        (
            f"(EngineCore_DP0 pid={HUGE}) ERROR 08-20 10:18:39 [core.py:700] EngineCore failed to start.",
            dict(proc="EngineCore_DP0", pid=None, pids=[], text="EngineCore failed to start."),
        ),
        (
            f"(VllmWorker rank={HUGE} pid=3073) ERROR 05-27 11:47:57 [multiproc_executor.py:470] x",
            dict(proc="VllmWorker", pid=3073, pids=[3073], rank=None, text="x"),
        ),
        (
            f"[rank{HUGE}]: torch.OutOfMemoryError: CUDA out of memory.",
            dict(rank=None, text="torch.OutOfMemoryError: CUDA out of memory."),
        ),
        (
            f"(RayWorkerWrapper pid=5849, ip=10.0.0.1) INFO 04-18 01:30:29 [x.py:1] up [repeated {HUGE}x across cluster]",
            dict(pid=5849, repeated=1, text="up"),
        ),
        (
            f"Nov 30 03:08:21 host vllm[{HUGE}]: INFO 11-30 03:08:21 [x.py:1] up",
            dict(wrapper="journald", pids=[], text="up"),
        ),
        (f"2024-12-19 21:40:35 ERROR {HUGE} [x.py:64] up", dict(wrapper="app-log", pid=None, text="up")),
        # Not ASCII digits: not a number at all (the prefix stays text, the line is still read).
        ("(EngineCore_DP0 pid=\u00b2) EngineCore failed to start.", dict(proc=None, pid=None)),
        ("(EngineCore_DP0 pid=\u0663) EngineCore failed to start.", dict(proc=None, pid=None)),
    ],
)
def test_hostile_envelope_numbers_are_ignored_and_the_line_still_read(line, expected):
    rec = one(line)
    for name, want in expected.items():
        assert getattr(rec, name) == want, name
    assert "failed to start" in rec.text or rec.text == expected.get("text", rec.text)


def test_a_hostile_number_never_costs_the_verdict():
    import json

    from vllm_doctor import diagnose

    kv = (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
        "stored in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine."
    )
    lines = [
        f"(EngineCore_DP0 pid={HUGE}) INFO 08-20 10:18:39 [core.py:1] Waiting for init message",
        f"[rank{HUGE}]: {kv}",
        f"(RayWorkerWrapper pid=1, ip=10.0.0.1) INFO 04-18 01:30:29 [x.py:1] up [repeated {HUGE}x across cluster]",
        '{"MESSAGE": "x", "_PID": "\u00b2", "_HOSTNAME": "h"}',
        '{"MESSAGE": "y", "_PID": ' + HUGE + ', "_HOSTNAME": "h"}',
    ]
    v = diagnose(lines)
    assert v.primary_class == "kv_cache_capacity"
    json.dumps(v.to_dict(), allow_nan=False)  # no 5000-digit integer reached the verdict


def test_journald_json_pid_values():
    import json

    def pids(value):
        (rec,) = unwrap("t", 1, json.dumps({"MESSAGE": "m", "_PID": value, "_HOSTNAME": "h"}))
        return rec.pids

    assert pids("4127") == [4127] and pids(4127) == [4127]
    assert pids("\u00b2") == pids(HUGE) == pids(True) == pids(-1) == pids(1.5) == pids([1]) == pids(None) == []


# --- Reassembler: hand-wrapped errors without a prefix on the continuation ---------------


def test_kv_error_hand_wrapped_over_three_lines_is_one_record_t011():
    lines = fixture_lines("t011")
    (rec,) = reassembled(lines)
    assert (rec.lineno, rec.continued) == (1, 2)
    assert rec.text == (
        "ValueError: To serve at least one request with the model's max seq len (1048576), 22.5 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (17.39 GiB). Based on the available memory, "
        "the estimated maximum model length is 810208."
    )


def test_hard_wrap_at_140_columns_joins_frames_and_the_oom_t016():
    recs = reassembled(fixture_lines("t016"))
    texts = {r.lineno: r.text for r in recs}
    assert texts[1].endswith('/vllm/model_executor/warmup/deep_gemm_warmup.py", line 262, in _warmup')
    assert texts[3] == "    out = torch.empty((MAX_M, n), device=device, dtype=torch.bfloat16)"
    oom = texts[7]
    assert "Tried to allocate 666.00 MiB. GPU 3 has a total capacity of 95.10 GiB" in oom
    assert "Of the allocated memory 92.33 GiB" in oom and "If reserved but unallocated memory" in oom
    # The next record of the traceback stays its own.
    assert texts[12] == "Traceback (most recent call last):"


def test_a_number_after_a_comma_continues_the_clause():
    recs = reassembled(
        [
            "ValueError: To serve at least one request with the model's max seq len (1048576),",
            "22.5 GiB KV cache is needed, which is larger than the available KV cache memory (17.39 GiB).",
        ]
    )
    assert [r.continued for r in recs] == [1]
    assert "(1048576), 22.5 GiB KV cache is needed" in recs[0].text


def test_a_number_and_a_word_split_by_a_wrap_get_their_space_back_t006():
    (rec,) = reassembled(fixture_lines("t006"))
    assert rec.text.startswith(
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please"
    )


def test_docker_desktop_stamps_continuations_only_and_they_still_join():
    recs = reassembled(
        [
            "INFO 07-03 23:23:42 [metrics.py:536] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
            "616.1 tokens/s, Running: 32 r",
            "2025-06-12 20:49:44 eqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 17.6%.",
        ]
    )
    assert [r.continued for r in recs] == [1]
    assert "Running: 32 reqs, Swapped: 0 reqs" in recs[0].text


def test_a_stamp_of_another_source_does_not_join():
    recs = reassembled([LONG_CUT, "[pod/vllm-b/vllm] eqs, Swapped: 0 reqs"])
    assert [r.continued for r in recs] == [0, 0]


@pytest.mark.parametrize("later,earlier", SENTENCE_CHAINS)
def test_sentence_chains_join_and_their_first_sentence_is_a_prefilter_candidate(later, earlier):
    from vllm_doctor.prefilter import LITERALS

    # The fast path reads the first line (it holds a catalog literal) and offers the next.
    assert any(lit in earlier for lit in LITERALS), earlier
    tail = later + "the rest of the sentence."
    (rec,) = reassembled([earlier, tail])
    assert rec.text == earlier + " " + tail and rec.continued == 1
    # After a blank line it is a record of its own.
    assert [r.continued for r in reassembled([earlier, "", tail])] == [0, 0]


@pytest.mark.parametrize(
    "lines",
    [
        # h004's shape: flags indented, a backslash glued to the value or after a space
        ["vllm serve /models/GLM-4-32B-0414 \\", "  -tp 2\\", "  --dtype bfloat16 \\", "  --max-model-len 1024"],
        # a docker run continued, the image's flags after it
        ["docker run --gpus all vllm/vllm-openai:v0.10.1 \\", "--model Qwen/Qwen3-8B \\", "--max-model-len 1024"],
        # python -m, each flag and value on its own line
        ["python -m vllm.entrypoints.openai.api_server \\", "    --model Qwen/Qwen3-8B \\", "    --max-model-len 1024"],
    ],
    ids=["serve", "docker", "python-m"],
)
def test_a_shell_command_continued_over_lines_is_one_record(lines):
    recs = reassembled(lines)
    assert len(recs) == 1 and recs[0].continued == len(lines) - 1
    assert "--max-model-len 1024" in recs[0].text
    from vllm_doctor.catalog import Catalog

    (ev,) = [e for e in Catalog().recognise(recs[0]) if e.pattern == "launch_command"]
    assert ev.data["max_model_len"] == 1024


def test_a_backslash_without_a_flag_or_after_the_last_line_joins_nothing():
    # A Windows path or a regex ending in a backslash is no shell continuation; a command's
    # last line (no backslash) ends it, so the next record stays apart.
    assert len(reassembled(["Loading from C:\\models\\", "next line"])) == 2
    recs = reassembled(["vllm serve m \\", "  --max-model-len 1024", "INFO 01-01 00:00:00 [x.py:1] started"])
    assert [r.lineno for r in recs] == [1, 3]


@pytest.mark.parametrize("elision", ["...", "…", "[...]", "(…)", " . . . "])
def test_a_pasted_elision_continues_nothing(elision):
    # k026's shape: a long command, then a line saying lines were left out; before, the wrap
    # join glued it on ('0.98...') and the utilization was lost.
    cmd = (
        "VLLM_USE_V1=1 vllm serve neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 --gpu-memory-utilization 0.98"
    )
    recs = reassembled(
        [cmd, elision, "INFO 01-30 03:18:12 gpu_model_runner.py:848] Loading model weights took 67.7 GB"]
    )
    assert recs[0].text == cmd and recs[0].continued == 0


# -- A terminal's copy, hard-wrapped at its width (Envelopes.wrap_width) -----------------------


def _read(lines):
    return read_records(lines)


_FREE_MEMORY = (
    "ValueError: Free memory on device cuda:0 (111.99/139.8 GiB) on startup is less than desired GPU memory "
    "utilization (0.95, 132.81 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
)


def _cut(text, width):
    return [text[i : i + width] for i in range(0, len(text), width)]


def test_a_wrap_width_is_learned_and_a_cut_before_a_space_keeps_the_space():
    lines = ["INFO 03-12 08:22:20 [core.py:1] starting"] + _cut(_FREE_MEMORY, 40) + _cut(_FREE_MEMORY, 40)
    # cut at 40 columns, the second piece starts with the space after "cuda:0"
    assert lines[1].endswith("cuda:0") and lines[2].startswith(" (111.99")
    from vllm_doctor.envelopes import WRAP_COLUMNS

    assert WRAP_COLUMNS[0] > 40  # 40 columns is no terminal: nothing learned
    env, recs = _read(lines)
    assert env.wrap_width is None
    lines = ["INFO 03-12 08:22:20 [core.py:1] starting"] + _cut(_FREE_MEMORY, 60) * 2
    env, recs = _read(lines)
    assert env.wrap_width == 60
    assert [r.text for r in recs[1:]] == [_FREE_MEMORY, _FREE_MEMORY]


def test_a_trimmed_space_at_the_cut_is_put_back():
    pieces = [p.rstrip() for p in _cut(_FREE_MEMORY, 63)]
    assert len(pieces[0]) == 62  # a piece that ended with a space, trimmed
    env, recs = _read(pieces * 2)
    assert env.wrap_width == 63
    assert [r.text for r in recs] == [_FREE_MEMORY, _FREE_MEMORY]


def test_one_long_line_followed_by_a_bare_line_is_no_wrap_width():
    from vllm_doctor.envelopes import WRAP_PAIRS_MIN

    assert WRAP_PAIRS_MIN == 2
    lines = _cut(_FREE_MEMORY, 100)[:2] + ["INFO 03-12 08:22:20 [core.py:1] x"]
    env, _ = _read(lines)
    assert env.wrap_width is None
    env, _ = _read(lines + lines)  # twice: learned
    assert env.wrap_width == 100


def test_a_log_store_line_cap_is_no_terminal_width():
    from vllm_doctor.envelopes import WRAP_COLUMNS

    long = "x" * (WRAP_COLUMNS[1] + 1)
    env, _ = _read([long, "rest of it", long, "rest again"])
    assert env.wrap_width is None
    fits = "x" * WRAP_COLUMNS[1]
    env, _ = _read([fits, "rest of it", fits, "rest again"])
    assert env.wrap_width == WRAP_COLUMNS[1]


def test_a_traceback_source_line_after_a_line_at_the_width_is_not_joined():
    frame = '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2200, in x'
    width = len(frame)
    lines = ["Traceback (most recent call last):", frame, "    self.fn()", frame, "    self.fn()"]
    lines += _cut(_FREE_MEMORY, width) * 2
    env, recs = _read(lines)
    assert env.wrap_width == width
    assert "    self.fn()" in [r.text for r in recs]


def test_a_shared_indent_is_taken_off_but_a_traceback_keeps_its_own():
    from vllm_doctor.envelopes import INDENT_MIN, Envelopes

    assert INDENT_MIN == 4
    env = Envelopes()
    block = ["    INFO 05-02 10:00:01 [core.py:1] x", '      File "/x/vllm/a.py", line 1, in f', "        f()"]
    for line in block:
        env.sniff(line)
    assert env.indent == 4
    assert [env.unwrap("x", 1, line)[0].text for line in block[1:]] == [
        '  File "/x/vllm/a.py", line 1, in f',
        "    f()",
    ]
    frames = Envelopes()
    for line in ['  File "/x/vllm/a.py", line 1, in f', "    f()"]:
        frames.sniff(line)
    assert frames.indent == 0  # frames alone share 2 spaces: theirs


def test_a_repeated_long_line_is_no_wrap_width_and_only_the_head_teaches_one():
    from vllm_doctor.envelopes import WRAP_HEAD_BYTES, WRAP_SAME_START

    assert (WRAP_HEAD_BYTES, WRAP_SAME_START) == (8192, 12)
    env, _ = _read(["x" * 156] * 20)  # a line followed by itself, again and again
    assert env.wrap_width is None
    filler = ["INFO 05-02 10:00:01 [core.py:1] " + "y" * 60] * (WRAP_HEAD_BYTES // 90 + 1)
    env, _ = _read(filler + _cut(_FREE_MEMORY, 60) * 2)  # the wrap comes after the head
    assert env.wrap_width is None
