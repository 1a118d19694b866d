"""A real terminal for tests: run a shell command in a detached tmux pane of a given size and
read back what the screen (and its scrollback) shows.

The pane stays open when the command ends (``remain-on-exit``), so its whole output can be
captured; ``capture-pane -J`` joins the rows the terminal itself wrapped, so a line printed
wider than the pane comes back as one line longer than the pane. Each pane has its own tmux
server (``-L``), killed at the end. Tests that use it skip where tmux is not installed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

#: The command line that runs the CLI with the interpreter running the tests.
VD = f"{shlex.quote(sys.executable)} -m vllm_doctor"


class Pane:
    """A ``width`` x ``height`` tmux pane running ``command`` (``sh -c``, COLUMNS and LINES
    unset as bash leaves them for a program it starts). Use as a context manager: the tmux
    server is killed on exit."""

    def __init__(self, command: str, tmp_path: Path, width: int = 80, height: int = 24) -> None:
        self.sock = f"vd-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        conf = tmp_path / f"{self.sock}.conf"
        conf.write_text("set -g history-limit 50000\nset -g remain-on-exit on\nset -g status off\n")
        self.tmux = ["tmux", "-L", self.sock, "-f", str(conf)]
        # The command's exit status is written by the shell that ran it: tmux may mark a pane
        # dead without ever recording its status (seen under load). bash waits out a Ctrl-C its
        # child handles (the CLI's interrupted verdict) and goes on to write the status.
        self.status_file = tmp_path / f"{self.sock}.status"
        inner = f"unset COLUMNS LINES; cd {shlex.quote(os.getcwd())}; {command}"
        script = f"bash -c {shlex.quote(inner)}; echo $? > {shlex.quote(str(self.status_file))}"
        subprocess.run(
            self.tmux + ["new-session", "-d", "-x", str(width), "-y", str(height), "bash", "-c", script],
            check=True,
            env={**os.environ, "TERM": "xterm-256color"},
        )

    def __enter__(self) -> "Pane":
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run(self.tmux + ["kill-server"], capture_output=True)

    def _ask(self, fmt: str) -> str:
        return subprocess.run(self.tmux + ["display-message", "-p", fmt], capture_output=True, text=True).stdout.strip()

    def screen(self) -> str:
        """The screen and its scrollback, the terminal's own wraps joined."""
        return subprocess.run(
            self.tmux + ["capture-pane", "-p", "-J", "-S", "-", "-E", "-"], capture_output=True, text=True, check=True
        ).stdout

    def wait_for(self, text: str, timeout: float = 60) -> str:
        """The screen once it shows ``text``; AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            assert time.monotonic() < deadline, f"{text!r} not on the screen in {timeout} s:\n{screen}"
            time.sleep(0.2)

    def wait_end(self, timeout: float = 90) -> int:
        """Wait for the command to end; its exit status as its shell saw it (128 + N for a
        signal N that killed it); else what tmux recorded (minus the signal; -1 when tmux never
        says)."""
        deadline = time.monotonic() + timeout
        while self._ask("#{pane_dead}") != "1":
            assert time.monotonic() < deadline, f"the command did not end in {timeout} s:\n{self.screen()}"
            time.sleep(0.2)
        settle = time.monotonic() + 5
        while time.monotonic() < settle:  # the shell writes the status as it ends
            text = self.status_file.read_text().strip() if self.status_file.exists() else ""
            if text:
                return int(text)
            time.sleep(0.05)
        # no status file (the shell itself was killed): ask tmux, which may mark the pane dead
        # before it records how its process ended
        settle = time.monotonic() + 5
        while True:
            status, signal = self._ask("#{pane_dead_status}"), self._ask("#{pane_dead_signal}")
            if status or signal or time.monotonic() > settle:
                break
            time.sleep(0.1)
        if status:
            return int(status)
        return -int(signal) if signal else -1

    def keys(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names: ``C-c`` is Ctrl-C)."""
        subprocess.run(self.tmux + ["send-keys", *keys], check=True)


def run_in_tmux(command: str, tmp_path: Path, width: int = 80, height: int = 24, timeout: float = 90) -> str:
    """Run ``command`` in a :class:`Pane` to its end; the screen and scrollback as text."""
    with Pane(command, tmp_path, width, height) as pane:
        pane.wait_end(timeout)
        return pane.screen()
