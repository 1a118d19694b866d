"""Whatever wraps the log, the verdict does not change (issue 4's acceptance)."""

import gzip
import io
import json

import pytest
from conftest import fixture_path, load_manifest

from vllm_doctor import diagnose
from vllm_doctor.pipeline import build_verdict, diagnose_input
from vllm_doctor.sources import Source

CORE_AND_STARTUP = {
    "weight_load_oom",
    "kv_cache_capacity",
    "runtime_oom",
    "preemption_storm",
    "startup_memory_contention",
    "cuda_graph_capture_oom",
    "sampler_warmup_oom",
    "quantization_unsupported",
    "config_limit_error",
}
CASES = [c for c in load_manifest() if c["class"] in CORE_AND_STARTUP]


def journald_short(i, line):
    return f"Nov 30 03:{i // 60 % 60:02d}:{i % 60:02d} gpu-node-3 vllm[4127]: {line}"


def journald_iso(i, line):
    return f"2026-11-30T03:{i // 60 % 60:02d}:{i % 60:02d}+0000 gpu-node-3 vllm[4127]: {line}"


def journald_precise(i, line):
    return f"Nov 30 03:{i // 60 % 60:02d}:{i % 60:02d}.{i:06d} gpu-node-3 vllm[4127]: {line}"


def journald_json(i, line):
    return json.dumps(
        {
            "__REALTIME_TIMESTAMP": str(1764471600000000 + i),
            "_HOSTNAME": "gpu-node-3",
            "_PID": "4127",
            "SYSLOG_IDENTIFIER": "vllm",
            "MESSAGE": line,
        }
    )


def compose(i, line):
    return f"vllm-1  | {line}"


def kubectl_ts(i, line):
    return f"2026-11-30T03:08:{i % 60:02d}.{i:09d}Z {line}"


WRAPPERS = [journald_short, journald_iso, journald_precise, journald_json, compose, kubectl_ts]


def verdict_of(data: bytes):
    return build_verdict(diagnose_input(Source("x.log", io.BytesIO(data))))


def essence(v):
    """What must not change: class, and each finding's class, facts and evidence lines."""
    return (
        v.primary_class,
        sorted(
            (f.class_id, json.dumps(f.facts, sort_keys=True, default=str), tuple(e.line for e in f.evidence))
            for f in v.findings
        ),
    )


def wrapped(path, wrap):
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return ("\n".join(wrap(i, line) for i, line in enumerate(lines)) + "\n").encode()


@pytest.mark.parametrize("wrap", WRAPPERS, ids=[w.__name__ for w in WRAPPERS])
@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_wrapped_log_gets_the_bare_verdict(case, wrap):
    path = fixture_path(case["file"])
    assert essence(verdict_of(wrapped(path, wrap))) == essence(verdict_of(path.read_bytes()))


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_gzip_log_gets_the_bare_verdict(case, tmp_path):
    path = fixture_path(case["file"])
    gz = tmp_path / "log.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert essence(diagnose(gz)) == essence(diagnose(path))


def test_journald_json_message_as_byte_array():
    line = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
    obj = {"_HOSTNAME": "h", "_PID": "7", "MESSAGE": list(line.encode() + b" \xff")}
    assert verdict_of((json.dumps(obj) + "\n").encode()).primary_class == "kv_cache_capacity"


def test_two_server_starts_give_two_runs():
    first = fixture_path("r022-v1-startup-sm120-healthy.log").read_text()
    start = (
        "INFO 06-22 03:00:00 [api_server.py:1885] vLLM API server version 0.9.2\n"
        "INFO 06-22 03:00:00 [utils.py:328] non-default args: {'model': 'm', 'max_model_len': 131072}\n"
    )
    second = fixture_path("s006-v1-kv-1m-estimate-199552.log").read_text()
    v = verdict_of((start + first + start + second).encode())
    assert [r.index for r in v.runs] == [2, 1]  # newest first
    assert v.runs[0].classes == ["kv_cache_capacity"] and v.runs[1].classes == []
    assert v.primary_class == "kv_cache_capacity" and v.primary.run == 2


def test_interleaved_pods_give_findings_only_for_the_pod_that_failed():
    healthy = fixture_path("r019-v1-serving-one-request-healthy.log").read_text().splitlines()
    failing = fixture_path("s014-4gb-gpu-free-memory-0.9.log").read_text().splitlines()
    lines = []
    for i in range(max(len(healthy), len(failing))):
        if i < len(healthy):
            lines.append(f"[pod/vllm-a-7d9f/vllm] {healthy[i]}")
        if i < len(failing):
            lines.append(f"[pod/vllm-b-5c2e/vllm] {failing[i]}")
    v = verdict_of(("\n".join(lines) + "\n").encode())
    assert {f.source for f in v.findings if f.severity != "info"} == {"x.log [pod/vllm-b-5c2e/vllm]"}
    by_name = {s.name: s.primary_class for s in v.sources}
    assert by_name == {
        "x.log [pod/vllm-a-7d9f/vllm]": "healthy",
        "x.log [pod/vllm-b-5c2e/vllm]": "startup_memory_contention",
    }
    assert all(s.format == "kubectl-prefix" for s in v.sources)


def test_forced_format_keeps_other_wrappers_in_the_text():
    line = b"vllm-1  | ValueError: No available memory for the cache blocks.\n"
    [r] = diagnose_input(Source("x", io.BytesIO(line)), input_format="plain")
    assert r.summary.format == "plain"
    [r] = diagnose_input(Source("x", io.BytesIO(line)))
    assert r.summary.format == "compose"


def test_journald_restarts_are_sources_and_the_newest_failure_is_primary():
    first = fixture_path("s014-4gb-gpu-free-memory-0.9.log").read_text().splitlines()
    second = fixture_path("s006-v1-kv-1m-estimate-199552.log").read_text().splitlines()
    lines = [journald_short(i, line).replace("vllm[4127]", "vllm[100]") for i, line in enumerate(first)]
    lines += [journald_short(i, line).replace("vllm[4127]", "vllm[200]") for i, line in enumerate(second)]
    v = verdict_of(("\n".join(lines) + "\n").encode())
    assert [s.primary_class for s in v.sources] == ["startup_memory_contention", "kv_cache_capacity"]
    assert v.primary_class == "kv_cache_capacity"  # the restart that failed last
