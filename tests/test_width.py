"""The width of the text view when standard output is not a terminal (fresh-user report,
finding 4): ``| less`` on an 80-column terminal wraps at 80, not at the pipe's 100."""

import os
import subprocess
import sys

from conftest import fixture_path
from terminal import VD, needs_tmux, run_in_tmux

from vllm_doctor.render.text import PIPE_WIDTH

LOG = fixture_path("r003-club3090-enginecore-oom-runtime.log")


def _widest(path) -> int:
    return max(len(x) for x in path.read_text(encoding="utf-8").splitlines())


@needs_tmux
def test_a_pipe_takes_the_width_of_the_terminal_on_standard_error(tmp_path):
    out = tmp_path / "out.txt"
    run_in_tmux(f"{VD} diagnose {LOG} | cat > {out}", tmp_path, width=80)
    assert 70 < _widest(out) <= 80


@needs_tmux
def test_with_standard_error_redirected_too_the_controlling_terminal_gives_it(tmp_path):
    out = tmp_path / "out.txt"
    run_in_tmux(f"{VD} diagnose {LOG} 2>/dev/null | cat > {out}", tmp_path, width=72)
    assert 62 < _widest(out) <= 72


@needs_tmux
def test_columns_still_sets_the_width_in_a_pipe(tmp_path):
    out = tmp_path / "out.txt"
    run_in_tmux(f"COLUMNS=60 {VD} diagnose {LOG} | cat > {out}", tmp_path, width=80)
    assert 50 < _widest(out) <= 60


def test_with_no_terminal_at_all_it_is_the_documented_100():
    # A new session has no controlling terminal (cron, CI, a service); nothing is a tty.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", str(LOG)],
        capture_output=True,
        text=True,
        env=env,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    widest = max(len(x) for x in p.stdout.splitlines())
    assert PIPE_WIDTH == 100 and 90 < widest <= PIPE_WIDTH


def test_help_and_readme_say_how_the_width_is_chosen():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert "/dev/tty" in readme and "100\ncolumns" in readme
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert "/dev/tty" in p.stdout and "COLUMNS" in p.stdout
