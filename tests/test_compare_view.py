"""The compare text view as an operator reads it on an 80x24 terminal: wrapped with hanging
indents at the width, each quoted log line clipped and quoted once, sides labelled by which
run of which input they are (fresh-user report, finding 3)."""

from pathlib import Path

import pytest
from terminal import VD, needs_tmux, run_in_tmux

from vllm_doctor.compare import compare_logs
from vllm_doctor.render.compare import render_compare
from vllm_doctor.render.names import CLIP

RESTART = Path(__file__).resolve().parent.parent / "fixtures" / "compare" / "journald-restart-r022-then-s006.log"
ERROR = "To serve at least one request"


@pytest.fixture(scope="module")
def restart():
    return compare_logs(RESTART, runs=(1, 2), redact=True)


@pytest.mark.parametrize("width", [80, 60, 100])
def test_text_view_is_wrapped_with_hanging_indents_at_the_width(restart, width):
    out = render_compare(restart, "text", width=width)
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= width
    # The terminal never has to wrap: a continuation line is indented under its first line.
    starts = ("regression", "no regression", "old", "new", "What changed", " ", "(:N", "note:", CLIP)
    assert all(x.startswith(starts) for x in lines if x), [x for x in lines if x and not x.startswith(starts)]
    assert any(len(x) > width - 12 for x in lines)  # it uses the width it was given


def test_a_long_log_line_is_clipped_and_quoted_once(restart):
    out = render_compare(restart, "text", width=80)
    # The 400-character ValueError backs three differences: quoted the first time only.
    assert out.count(ERROR) == 1
    assert out.count("the line quoted under 1.") == 3
    quoted = next(x for x in out.splitlines() if ERROR in x)
    assert quoted.lstrip().startswith("new :14 ValueError")
    assert f"{CLIP} \u2190 the error" in out  # clipped, marked, the note kept
    assert "(8.42 GiB)" in out  # the clause with the number the difference reads is kept
    assert " ".join(out.split()).endswith(
        f"{CLIP} = text left out of a long line (--format json or markdown has it, whole up to 600 characters)"
    )
    # The full line is in the ticket.
    md = render_compare(restart, "markdown")
    assert "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details." in md


def test_sides_say_which_run_of_which_input_they_are(restart):
    out = render_compare(restart, "text", width=200)
    old = next(x for x in out.splitlines() if x.startswith("old:"))
    new = next(x for x in out.splitlines() if x.startswith("new:"))
    assert old.startswith(f"old: run 1 of 2 in {RESTART.as_posix()} [vllm[100]@<host-1>], reached ready, healthy")
    assert new.startswith(f"new: run 2 of 2 in {RESTART.as_posix()} [vllm[200]@<host-1>], no phase marker")
    md = render_compare(restart, "markdown")
    assert f"**Old:** run 1 of 2 in `{RESTART.as_posix()} [vllm[100]@<host-1>]`" in md
    assert f"**New:** run 2 of 2 in `{RESTART.as_posix()} [vllm[200]@<host-1>]`" in md


def test_a_log_of_one_run_is_named_as_its_only_run(tmp_path):
    old = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "r022-v1-startup-sm120-healthy.log"
    new = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "s006-v1-kv-1m-estimate-199552.log"
    out = render_compare(compare_logs(old, new), "text", width=200)
    assert f"old: {old.as_posix()} (its only run), reached ready" in out
    assert f"new: {new.as_posix()} (its only run)," in out


@needs_tmux
def test_compare_on_an_80_column_terminal(tmp_path):
    screen = run_in_tmux(f"{VD} compare {RESTART} --runs 1,2", tmp_path)
    lines = screen.rstrip("\n").splitlines()
    assert "What changed, what matters first:" in screen
    assert max(len(x) for x in lines) <= 80, [x for x in lines if len(x) > 80]
    assert screen.count(ERROR) == 1
    assert "run 2 of 2 in" in screen
