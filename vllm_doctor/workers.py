"""Worker processes for both cores: one pool for ``-j`` over files and for the chunked scan.

Workers die with their parent: on Linux the kernel kills them when it exits
(``PR_SET_PDEATHSIG``), and everywhere a watcher thread ends a worker whose parent is gone
(checked every :data:`WATCH` seconds), so a SIGTERM or SIGINT of the parent never leaves
workers sleeping with the caller's pipe open. Workers also let go of standard input and
output at once (they print nothing: results come back to the parent as values).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Optional

#: Seconds between two checks that a worker's parent is still alive.
WATCH = 0.2


def _die_with(parent: int) -> None:
    """Worker initializer: end this process when ``parent`` ends."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the kernel kills us with our parent
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl: the watcher does it
            pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle

    def watch() -> None:
        while True:
            time.sleep(WATCH)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # pragma: no cover - the pid was reused by another user
                os._exit(1)

    threading.Thread(target=watch, name="vllm-doctor-parent-watch", daemon=True).start()
    try:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
    except OSError:  # pragma: no cover - nothing to let go of
        pass


def _context():
    """forkserver where the platform has it (no fork of a process with threads), else spawn.

    The fork server is started with standard input, output and error on the null device,
    so neither it nor the workers it forks hold the caller's pipes or print into them (a
    worker that dies while starting would print a traceback)."""
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" not in methods:
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver

    ctx.set_forkserver_preload(["vllm_doctor.chunks", "vllm_doctor.pipeline"])
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        saved = [os.dup(fd) for fd in (0, 1, 2)]
    except OSError:  # a standard stream is closed: nothing of the caller's to hold
        forkserver.ensure_running()
        return ctx
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        forkserver.ensure_running()
    finally:
        for fd, old in zip((0, 1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(null)
    return ctx


def pool(workers: Optional[int] = None) -> ProcessPoolExecutor:
    """A process pool whose workers die with this process (default: one per core)."""
    n = workers or os.cpu_count() or 1
    return ProcessPoolExecutor(max_workers=n, mp_context=_context(), initializer=_die_with, initargs=(os.getpid(),))


def shutdown(ex: ProcessPoolExecutor) -> None:
    """Stop a pool at once: queued work is dropped and running workers are killed."""
    procs = list(getattr(ex, "_processes", {}).values())  # not public: the executor has no kill()
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.kill()
        except (OSError, AttributeError, ValueError):
            pass
