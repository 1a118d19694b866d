"""-j workers die with their parent (issue 16): a real command, real signals, real FIFOs."""

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def children(pid):
    """Every descendant pid of ``pid`` (from /proc)."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in os.listdir(f"/proc/{p}/task") if os.path.isdir(f"/proc/{p}/task") else ():
            try:
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids = {int(k) for k in fh.read().split()}
            except OSError:
                kids = set()
            todo.extend(kids - out)
            out |= kids
    return out


def workers_of(pid):
    """The worker processes under ``pid``: the children of its fork server (or its own
    children when workers are forked or spawned directly)."""
    kids = set()
    for p in children(pid):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        if b"forkserver" in cmd:
            kids |= children(p)
    return kids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def wait_for(cond, deadline=20.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_workers_die_with_their_parent_and_let_go_of_its_pipe(tmp_path, sig):
    # Two FIFOs nobody writes: each worker blocks opening its input, as on a stuck NFS file.
    fifos = [tmp_path / "a.log", tmp_path / "b.log"]
    for f in fifos:
        os.mkfifo(f)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-j", "2", *map(str, fifos)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_for(lambda: len(workers_of(proc.pid)) >= 2), "the workers did not start"
        kids = children(proc.pid)  # the workers and the fork server
        proc.send_signal(sig)
        # The caller's pipe reaches EOF only when every process holding it is gone.
        out, err = proc.communicate(timeout=30)
        assert proc.returncode != 0 and b"Traceback" not in err
        assert wait_for(lambda: not any(alive(k) for k in kids)), "workers outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for f in fifos:  # let any blocked opener go
            try:
                fd = os.open(f, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass


def test_workers_die_when_their_parent_is_killed(tmp_path):
    fifos = [tmp_path / "a.log", tmp_path / "b.log"]
    for f in fifos:
        os.mkfifo(f)
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-j", "2", *map(str, fifos)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_for(lambda: len(workers_of(proc.pid)) >= 2), "the workers did not start"
        kids = children(proc.pid)  # the workers and the fork server
        proc.kill()  # SIGKILL: no handler runs; the kernel and the watcher must do it
        proc.communicate(timeout=30)
        assert wait_for(lambda: not any(alive(k) for k in kids)), "workers outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
