"""Fleet formats (:mod:`vllm_doctor.fleet`): Loki, CloudWatch, vLLM's JSON logging, Docker
json-file, journald JSON; their labels name the sources. Shapes from the tools' sources:
Loki ``pkg/logcli/output/{jsonl,default}.go``, AWS CLI ``awscli/customizations/logs/tail.py``
and the CloudWatch ``FilteredLogEvent`` API, vLLM ``vllm/logging_utils/formatter.py``
``JSON_FORMAT``."""

import io
import json

import pytest
from conftest import fixture_path

from vllm_doctor.cli import FORMAT_NAMES
from vllm_doctor.envelopes import Envelopes, unwrap
from vllm_doctor.formats import FORMATS, reads_every_line
from vllm_doctor.pipeline import build_verdict, diagnose_input
from vllm_doctor.sources import Source

KV = fixture_path("s014-4gb-gpu-free-memory-0.9.log")
HEALTHY = fixture_path("r019-v1-serving-one-request-healthy.log")


def verdict_of(text, input_format="auto", prefilter=True):
    src = Source("x.log", io.BytesIO(text.encode()))
    return build_verdict(diagnose_input(src, prefilter=prefilter, input_format=input_format))


def interleave(a, b):
    out = []
    for i in range(max(len(a), len(b))):
        if i < len(a):
            out.append(a[i])
        if i < len(b):
            out.append(b[i])
    return out


def two_pods(wrap):
    """The healthy r019 and the failing s014, interleaved, each under its own label."""
    healthy, failing = HEALTHY.read_text().splitlines(), KV.read_text().splitlines()
    return "\n".join(
        interleave(
            [wrap("vllm-a", i, x) for i, x in enumerate(healthy)], [wrap("vllm-b", i, x) for i, x in enumerate(failing)]
        )
    )


def test_every_format_name_is_an_input_format_choice():
    assert tuple(FORMATS) == FORMAT_NAMES


# --- Loki -------------------------------------------------------------------------------


def loki(pod, i, line):
    obj = {"labels": {"container": "vllm", "namespace": "ml", "pod": pod}, "line": line}
    obj["timestamp"] = f"2026-11-30T03:08:{i % 60:02d}.{i:09d}Z"
    return json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e")


def test_loki_jsonl_pods_are_sources():
    v = verdict_of(two_pods(loki))
    assert {s.name: s.primary_class for s in v.sources} == {
        "x.log [pod/vllm-a/vllm]": "healthy",
        "x.log [pod/vllm-b/vllm]": "startup_memory_contention",
    }
    assert {s.format for s in v.sources} == {"loki"}


def test_loki_default_output_labels_are_sources():
    def text(pod, i, line):
        return f'2026-11-30T03:08:{i % 60:02d}Z {{container="vllm", pod="{pod}"}} {line.strip()}'

    v = verdict_of(two_pods(text))
    assert {s.name: s.primary_class for s in v.sources} == {
        "x.log [pod/vllm-a/vllm]": "healthy",
        "x.log [pod/vllm-b/vllm]": "startup_memory_contention",
    }


def test_loki_without_a_pod_label_uses_the_container_or_host():
    (rec,) = unwrap("x", 1, json.dumps({"labels": {"container_name": "vllm-1", "job": "docker"}, "line": "hi"}))
    assert (rec.wrapper, rec.host, rec.unit, rec.text) == ("loki", None, "vllm-1", "hi")
    (rec,) = unwrap("x", 1, json.dumps({"labels": {"host": "gpu-7"}, "line": "hi", "timestamp": "t"}))
    assert rec.unit == "gpu-7"


def test_logcli_text_output_gives_a_traceback_its_source_lines_back():
    lines = [
        '2026-11-30T03:08:00Z {pod="p"} File "/x/vllm/worker/model_runner.py", line 1, in capture_model',
        '2026-11-30T03:08:00Z {pod="p"} self.model_runner.capture_model()',
        '2026-11-30T03:08:00Z {pod="p"} torch.OutOfMemoryError: CUDA out of memory.',
    ]
    env = Envelopes()
    texts = [env.unwrap("x", n, line)[0].text for n, line in enumerate(lines, 1)]
    assert texts == [
        'File "/x/vllm/worker/model_runner.py", line 1, in capture_model',
        "    self.model_runner.capture_model()",
        "torch.OutOfMemoryError: CUDA out of memory.",
    ]


def test_a_line_inside_loki_may_be_docker_json_holding_vllm_json():
    inner = json.dumps(
        {"levelname": "ERROR", "message": "EngineCore failed to start.", "process": 7, "filename": "core.py"}
    )
    docker = json.dumps({"log": inner + "\n", "stream": "stderr", "time": "2026-11-30T03:08:00Z"})
    (rec,) = unwrap("x", 3, json.dumps({"labels": {"pod": "p"}, "line": docker}))
    assert (rec.wrapper, rec.host, rec.text, rec.level, rec.pid, rec.file) == (
        "loki",
        "p",
        "EngineCore failed to start.",
        "ERROR",
        7,
        "core.py",
    )


# --- CloudWatch ------------------------------------------------------------------------------


def tail(stream, i, line):
    return f"2026-11-30T03:08:{i % 60:02d}.{i:06d}+00:00 {stream} {line}".rstrip()


def test_aws_logs_tail_streams_are_sources():
    v = verdict_of(two_pods(lambda pod, i, x: tail(f"vllm/{pod}/0f3c9a7e", i, x)))
    assert {s.name: s.primary_class for s in v.sources} == {
        "x.log [stream/vllm/vllm-a/0f3c9a7e]": "healthy",
        "x.log [stream/vllm/vllm-b/0f3c9a7e]": "startup_memory_contention",
    }
    assert {s.format for s in v.sources} == {"cloudwatch"}


def test_docker_time_stamps_are_not_read_as_cloudwatch():
    # "2024-...Z word rest": Docker's and kubectl's stamps end in Z; the first word is message.
    lines = [f"2026-11-30T03:08:0{i}.123456789Z Traceback (most recent call last):" for i in range(5)]
    env = Envelopes()
    for line in lines:
        env.sniff(line)
    assert not env.cloudwatch
    assert env.unwrap("x", 1, lines[0])[0].text == "Traceback (most recent call last):"


def test_forced_cloudwatch_reads_the_stream_name():
    line = "2026-11-30T03:08:00.000000+00:00 my-stream ValueError: No available memory for the cache blocks."
    v = verdict_of(line, input_format="cloudwatch")
    assert v.primary_class == "kv_cache_capacity"
    assert [s.name for s in v.sources] == ["x.log [stream/my-stream]"]


def pretty(events, stream_first):
    out = ["{", '    "events": [']
    for n, (stream, message) in enumerate(events):
        keys = [("logStreamName", stream), ("timestamp", 1764471600000 + n), ("message", message)]
        keys += [("ingestionTime", 1764471600005 + n), ("eventId", f"{n:056d}")]
        if not stream_first:
            keys.insert(3, keys.pop(0))
        out.append("        {")
        out += [f"            {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in keys[:-1]]
        out.append(f"            {json.dumps(keys[-1][0])}: {json.dumps(keys[-1][1])}")
        out.append("        }," if n + 1 < len(events) else "        }")
    out += ["    ],", '    "searchedLogStreams": [', "        {", '            "logStreamName": "other",']
    out += ['            "searchedCompletely": true', "        }", "    ]", "}"]
    return "\n".join(out)


@pytest.mark.parametrize("stream_first", [True, False], ids=["stream-first", "stream-after-message"])
def test_filter_log_events_pretty_json_in_any_key_order(stream_first):
    healthy, failing = HEALTHY.read_text().splitlines(), KV.read_text().splitlines()
    events = interleave([("a", x) for x in healthy], [("b", x) for x in failing])
    v = verdict_of(pretty(events, stream_first))
    assert {s.name: s.primary_class for s in v.sources} == {
        "x.log [stream/a]": "healthy",
        "x.log [stream/b]": "startup_memory_contention",
    }
    # Evidence points at the "message" line of the event.
    text = pretty(events, stream_first).split("\n")
    for f in v.findings:
        for e in f.evidence:
            assert text[e.line - 1].strip().startswith('"message": ')


def test_cloudwatch_events_one_a_line_and_a_whole_response_on_one_line():
    failing = KV.read_text().splitlines()
    events = [{"logStreamName": "s", "timestamp": n, "message": x, "eventId": str(n)} for n, x in enumerate(failing)]
    assert verdict_of("\n".join(json.dumps(e) for e in events)).primary_class == "startup_memory_contention"
    one_line = json.dumps({"events": events, "searchedLogStreams": []})
    v = verdict_of(one_line)
    assert v.primary_class == "startup_memory_contention" and [s.name for s in v.sources] == ["x.log [stream/s]"]


# --- vLLM's JSON logging, Docker json-file -----------------------------------------------------


def test_vllm_json_record_fields():
    obj = {
        "asctime": "2026-11-30 03:08:21,123",
        "levelname": "INFO",
        "name": "vllm.v1.worker.gpu_worker",
        "processName": "EngineCore_DP0",
        "process": 77,
        "message": "Available KV cache memory: 25.91 GiB",
        "filename": "gpu_worker.py",
        "lineno": 298,
    }
    (rec,) = unwrap("x", 4, json.dumps(obj))
    assert (rec.wrapper, rec.level, rec.time, rec.proc, rec.pid, rec.pids, rec.file, rec.vllm_header, rec.text) == (
        "vllm-json",
        "INFO",
        "11-30 03:08:21",
        "EngineCore_DP0",
        77,
        [77],
        "gpu_worker.py",
        True,
        "Available KV cache memory: 25.91 GiB",
    )


def test_vllm_json_exception_traceback_is_read_with_its_frames():
    exc = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 3000, in '
        "capture_model\n"
        "    self._capture_cudagraphs(compilation_cases)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
        "23.57 GiB of which 10.56 MiB is free. Including non-PyTorch memory, this process has 23.55 GiB memory in "
        "use. Of the allocated memory 22.9 GiB is allocated by PyTorch, and 229.61 MiB is reserved by PyTorch but "
        "unallocated."
    )
    obj = {
        "levelname": "ERROR",
        "process": 9,
        "processName": "EngineCore_DP0",
        "message": "EngineCore failed to start.",
    }
    obj["exc_info"] = exc
    recs = unwrap("x", 1, json.dumps(obj))
    assert [r.text for r in recs] == ["EngineCore failed to start."] + exc.split("\n")
    assert {(r.pid, r.level, r.lineno) for r in recs} == {(9, "ERROR", 1)}


def test_vllm_json_behind_vllm_process_prefix_and_ray_count():
    obj = {"levelname": "INFO", "message": "Successfully reset prefix cache", "process": 1, "filename": "block_pool.py"}
    line = f"(RayWorkerWrapper pid=5849, ip=10.0.0.1) {json.dumps(obj)} [repeated 7x across cluster]"
    (rec,) = unwrap("x", 1, line)
    assert (rec.wrapper, rec.proc, rec.pid, rec.repeated, rec.text) == (
        "vllm-json",
        "RayWorkerWrapper",
        5849,
        7,
        "Successfully reset prefix cache",
    )


def test_docker_json_file_lines():
    recs = unwrap("x", 1, json.dumps({"log": "INFO 08-20 10:18:39 [core.py:1] up\n", "stream": "stdout", "time": "t"}))
    assert [(r.wrapper, r.text, r.file) for r in recs] == [("docker-json", "up", "core.py")]


# --- journald JSON behind a BOM or a header line --------------------------------------------


def journald(i, line):
    return json.dumps({"_HOSTNAME": "gpu-node-3", "_PID": "4127", "SYSLOG_IDENTIFIER": "vllm", "MESSAGE": line})


@pytest.mark.parametrize(
    "head", ["\ufeff", "-- Logs begin at Mon 2026-11-30 03:00:00 UTC. --\n", "$ journalctl -u vllm -o json\n"]
)
def test_journald_json_behind_a_bom_or_a_header_line_reads_as_journald(head):
    # s009's phase comes from its traceback: the pre-filter path would lose it (issue 16).
    path = fixture_path("s009-llama2-70b-vllm012-columnparallel-oom.log")
    lines = path.read_text().splitlines()
    text = head + "\n".join(journald(i, x) for i, x in enumerate(lines))
    assert reads_every_line(text.encode())
    assert verdict_of(text).primary_class == verdict_of(path.read_text()).primary_class == "weight_load_oom"


@pytest.mark.parametrize(
    "head,expected",
    [
        (b'{"MESSAGE": "x"}\n', True),
        (b'\xef\xbb\xbf{"line": "x", "labels": {}}\n', True),
        (b'header\n{"message": "x", "levelname": "INFO"}\n', True),
        (b'(EngineCore_DP0 pid=1) {"message": "x", "levelname": "INFO"}\n', True),
        (b'{\n    "events": [\n', True),
        (b'INFO 08-20 10:18:39 [x.py:1] body: {"prompt": 1}\n', False),
        (b'{"prompt": "a request body"}\n', False),
        (b"plain\n" * 100, False),
    ],
)
def test_reads_every_line(head, expected):
    assert reads_every_line(head) is expected


@pytest.mark.parametrize(
    "body",
    [
        {"object": "error", "message": "This model's maximum context length is 3 tokens.", "type": "BadRequestError"},
        {"message": "hi", "name": "bob"},
    ],
)
def test_a_json_body_with_a_message_is_not_a_logging_record(body):
    line = json.dumps(body)
    (rec,) = unwrap("x", 1, line)
    assert (rec.wrapper, rec.text) == (None, line)
