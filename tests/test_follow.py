"""--follow reports a failure while the log is still being written."""

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


def start(*args, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-F", "-f", "json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def next_line(proc, timeout):
    out = []
    t = threading.Thread(target=lambda: out.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return out[0] if out else None


def test_follow_reports_a_kv_failure_before_the_input_ends(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(HEALTHY)
    proc = start(str(log))
    try:
        time.sleep(1.0)
        with open(log, "a") as fh:
            fh.write(KV_ERROR)
        line = next_line(proc, 10)  # the process is still following: the input has not ended
        assert line is not None, "no finding within 10 s"
        finding = json.loads(line)
        assert finding["type"] == "finding" and finding["class"] == "kv_cache_capacity"
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["type"] == "verdict" and summary["primary_class"] == "kv_cache_capacity"
    assert proc.returncode == 1 and "Traceback" not in err


def test_follow_survives_rotation(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(HEALTHY)
    proc = start(str(log))
    try:
        time.sleep(1.0)
        os.rename(log, tmp_path / "server.log.1")  # logrotate moves the file away ...
        log.write_text(KV_ERROR)  # ... and the server writes a new one
        line = next_line(proc, 10)
        assert line is not None and json.loads(line)["class"] == "kv_cache_capacity"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)


def test_follow_stdin_ends_with_the_summary():
    proc = start("-", stdin=subprocess.PIPE)
    proc.stdin.write(HEALTHY + KV_ERROR)
    proc.stdin.flush()
    line = next_line(proc, 10)
    assert line is not None and json.loads(line)["class"] == "kv_cache_capacity"
    proc.stdin.close()  # end of standard input ends following
    out = proc.stdout.read()
    assert proc.wait(timeout=10) == 1
    assert json.loads(out.strip().splitlines()[-1])["type"] == "verdict"
