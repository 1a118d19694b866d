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


#: Seconds to wait for a followed process to print. A liveness bound, not a speed target: it
#: only has to outlast a slow start on a loaded machine (two full suites at once took >10 s).
WAIT = 30


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
        line = next_line(proc, WAIT)  # the process is still following: the input has not ended
        assert line is not None, f"no finding within {WAIT} s"
        finding = json.loads(line)
        assert finding["type"] == "finding" and finding["class"] == "kv_cache_capacity"
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=WAIT)
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
        line = next_line(proc, WAIT)
        assert line is not None and json.loads(line)["class"] == "kv_cache_capacity"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=WAIT)


def test_follow_stdin_ends_with_the_summary():
    proc = start("-", stdin=subprocess.PIPE)
    proc.stdin.write(HEALTHY + KV_ERROR)
    proc.stdin.flush()
    line = next_line(proc, WAIT)
    assert line is not None and json.loads(line)["class"] == "kv_cache_capacity"
    proc.stdin.close()  # end of standard input ends following
    out = proc.stdout.read()
    assert proc.wait(timeout=WAIT) == 1
    assert json.loads(out.strip().splitlines()[-1])["type"] == "verdict"


def test_what_follow_streamed_stands_in_its_summary_and_exit_code():
    # breakit4 item 6: a long prefix-less input quoting one OOM reads as a document in batch
    # mode (exit 3); following, the finding was streamed first, then the summary said "no vLLM
    # output" and the exit code was 1. A followed stream is a live log: judged as one.
    prose = "The server is started and then we look at what it printed when it failed."
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "23.58 GiB of which 1.00 GiB is free. Process 4242 has 20.00 GiB memory in use."
    )
    text = "\n".join([prose] * 100 + [oom] + [prose] * 50) + "\n"
    proc = start("-", stdin=subprocess.PIPE)
    out, _ = proc.communicate(text, timeout=60)
    records = [json.loads(x) for x in out.strip().splitlines()]
    streamed = [r["class"] for r in records if r.get("type") != "verdict"]
    verdict = records[-1]
    assert verdict["type"] == "verdict" and streamed
    assert verdict["primary_class"] == streamed[0] != "unknown" and verdict["exit_code"] == 1
    assert proc.returncode == 1


# -- the reader under follow mode, driven in this process: no timing, real files ------------
from vllm_doctor import follow as follow_mod  # noqa: E402
from vllm_doctor import sources  # noqa: E402


def until_idle(gen):
    """The lines a follow reader yields before it next goes idle (yields None)."""
    out = []
    for line in gen:
        if line is None:
            return out
        out.append(line)
    return out


def test_rotation_drains_the_old_file_before_switching(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("a\nb\n")
    f = follow_mod._FileFollower(str(log))
    gen = follow_mod._lines_of_file(f, lambda: False)
    assert until_idle(gen) == ["a", "b"]
    with open(log, "a") as fh:  # written just before logrotate moves the file ...
        fh.write("the failure\nits last line, no newline")
    log.rename(tmp_path / "server.log.1")
    log.write_text("new 1\n")  # ... and the server starts a new one
    # the old file's lines, then the mark that numbers the new file's lines from 1
    assert until_idle(gen) == ["the failure", "its last line, no newline", follow_mod.ROTATED, "new 1"]


def test_copytruncate_is_seen_even_when_the_file_regrew_past_its_old_size(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("".join(f"old {i}\n" for i in range(10)))
    f = follow_mod._FileFollower(str(log))
    gen = follow_mod._lines_of_file(f, lambda: False)
    assert len(until_idle(gen)) == 10
    new = [f"new line number {i}" for i in range(20)]
    with open(log, "r+") as fh:  # copytruncate, then the server writes more than before
        fh.truncate(0)
        fh.write("".join(x + "\n" for x in new))
    assert log.stat().st_size > 70 and f.pos == 60
    assert until_idle(gen) == [follow_mod.ROTATED, *new]


def test_a_plain_growing_file_is_not_mistaken_for_a_truncated_one(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("a\n")
    f = follow_mod._FileFollower(str(log))
    gen = follow_mod._lines_of_file(f, lambda: False)
    assert until_idle(gen) == ["a"]
    with open(log, "a") as fh:
        fh.write("b\nc\n")
    assert until_idle(gen) == ["b", "c"]


def test_follow_keeps_the_batch_line_cap_on_a_100_mib_line(tmp_path):
    import tracemalloc

    log = tmp_path / "long.log"
    with open(log, "wb") as fh:
        for _ in range(100):
            fh.write(b"x" * 2**20)
        fh.write(b"\nafter\n")
    f = follow_mod._FileFollower(str(log))
    tracemalloc.start()
    try:
        lines = until_idle(follow_mod._lines_of_file(f, lambda: False))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [len(x) for x in lines] == [sources.LINE_LIMIT, 5] and lines[1] == "after"
    assert peak < 40 * 2**20  # a window and a capped line, never the whole line


def test_follow_dev_zero_stays_bounded():
    import tracemalloc

    f = follow_mod._FileFollower("/dev/zero")
    reads = []

    def stop():
        reads.append(f.pos)
        return len(reads) > 40  # 40 windows of 8 MiB: 320 MiB of NULs, no newline

    tracemalloc.start()
    try:
        lines = list(follow_mod._lines_of_file(f, stop))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lines == ["\0" * sources.LINE_LIMIT] and f.pos >= 40 * sources.WINDOW
    assert f.cutter.held == 0 and peak < 40 * 2**20


def test_follow_dev_zero_from_the_command_line_ends_on_sigterm():
    proc = start("/dev/zero")
    try:
        time.sleep(1.5)
        with open(f"/proc/{proc.pid}/status") as fh:
            hwm = next(int(x.split()[1]) for x in fh if x.startswith("VmHWM:"))
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert hwm < 150 * 1024  # KiB: bounded, not growing with what was read
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["type"] == "verdict" and summary["sources"][0]["lines"] == 1
    assert "Traceback" not in err


def test_follow_on_a_utf16_log_reads_it(tmp_path):
    log = tmp_path / "ps.log"
    log.write_bytes(b"\xff\xfe" + (HEALTHY + KV_ERROR).replace("\n", "\r\n").encode("utf-16-le"))
    proc = start(str(log))
    try:
        line = next_line(proc, WAIT)
        assert line is not None and json.loads(line)["class"] == "kv_cache_capacity"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=WAIT)
