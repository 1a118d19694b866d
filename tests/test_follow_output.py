"""What --follow prints: a banner, each finding once with the log's time, a short summary, and
line numbers that start again in a rotated file (issue 12)."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

from conftest import fixture_path

KV_ERROR = fixture_path("s004-v1-kv-1m-context-oneline.log").read_text()
HEALTHY = fixture_path("r019-v1-serving-one-request-healthy.log").read_text()
OOM = fixture_path("r003-club3090-enginecore-oom-runtime.log").read_text()


#: Seconds to wait for a followed process to print. A liveness bound, not a speed target: it
#: only has to outlast a slow start on a loaded machine (two full suites at once took >10 s).
WAIT = 30


def follow(*args, stdin=None):
    return subprocess.Popen(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-F", *args],
        stdin=subprocess.PIPE if stdin is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
    )


def read_until(stream, needle, timeout=WAIT):
    got = []

    def reader():
        for line in stream:
            got.append(line)
            if needle in line:
                return

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(timeout)
    return "".join(got)


def test_text_follow_prints_a_banner_each_finding_once_with_its_time_and_a_short_summary():
    proc = follow("-", stdin=True)
    out, err = proc.communicate(HEALTHY + OOM, timeout=30)
    assert proc.returncode == 1
    assert err.splitlines()[0] == (
        "following standard input: findings appear as they are certain; the summary when it ends (or Ctrl-C)"
    )
    finding, _, summary = out.partition("\nsummary (")
    assert finding.startswith("[05-01 14:39:06] VD200 runtime_oom (critical, medium confidence)")
    assert "do this first: --gpu-memory-utilization 0.85" in finding
    # the summary is the verdict line and a table, not the findings again
    assert summary.count("Bound the work per step") == 0 and finding.count("Bound the work per step") == 1
    rows = summary.splitlines()
    head = next(
        i for i, x in enumerate(rows) if x.split() == ["time", "code", "class", "source", "do", "this", "first"]
    )
    assert rows[head + 1].split() == [
        "05-01",
        "14:39:06",
        "VD200",
        "runtime_oom",
        "<stdin>",
        "--gpu-memory-utilization",
        "0.85",
    ]
    assert len(summary.splitlines()) < 12


def test_markdown_follow_ends_with_a_findings_table():
    proc = follow("-f", "markdown", "-", stdin=True)
    out, _ = proc.communicate(OOM, timeout=30)
    assert out.startswith("### 05-01 14:39:06 VD200 runtime_oom (critical, medium confidence)")
    tail = out.split("## Runtime OOM on GPU 0 (23.56 GiB) at 05-01 14:39:06", 1)[1]
    assert "| 05-01 14:39:06 | VD200 | runtime_oom | `<stdin>` | `--gpu-memory-utilization 0.85` |" in tail
    assert "Remedies, in order" not in tail


def test_line_numbers_start_again_after_a_rotation(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(HEALTHY)
    proc = follow("-f", "json", str(log))
    try:
        time.sleep(1.0)
        os.rename(log, tmp_path / "server.log.1")
        log.write_text(KV_ERROR)  # the new file's line 1 is the error
        line = read_until(proc.stdout, '"type": "finding"')
        finding = json.loads(line.strip().splitlines()[-1])
        assert finding["class"] == "kv_cache_capacity"
        assert [e["line"] for e in finding["evidence"]] == [1]
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=WAIT)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["sources"][0]["lines"] == 1  # the file now followed has one line
