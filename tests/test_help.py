"""Help and explain pages at 80 columns (fresh-user report, finding 9): nothing wider than the
terminal, no word split across two lines (a choices list, a hyphenated word), command
summaries whole, explain's reflow without lone fragments, examples under diagnose --help."""

import os
import re
import subprocess
import sys

import pytest
from terminal import VD, needs_tmux, run_in_tmux

from vllm_doctor.render.pages import rewrap
from vllm_doctor.rules import RULES, lookup

HELPS = [[], ["diagnose"], ["compare"], ["rules"], ["explain"]]


def _help(args, columns: int) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    p = subprocess.run([sys.executable, "-m", "vllm_doctor", *args, "--help"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("args", HELPS, ids=lambda a: " ".join(a) or "top")
def test_help_at_80_columns_fits_and_splits_no_word(args):
    narrow, wide = _help(args, 80), _help(args, 200)
    assert max(len(x) for x in narrow.splitlines()) <= 80
    # Wrapping moves only the spaces: the words, in order, are those of the widest rendering
    # (a word split at a hyphen or inside a choices list would be two words here).
    assert narrow.split() == wide.split()
    assert not re.search(r"\w-$", narrow, re.M)


def test_command_summaries_are_whole_sentences():
    top = _help([], 80)
    commands = top.split("Commands:", 1)[1].strip().splitlines()
    assert len(commands) == 4
    for line in commands:
        assert line.rstrip().endswith(".") and not line.rstrip().endswith("..."), line
    assert "compare   Compare two server runs: what changed, what matters first." in top


def test_input_format_choices_are_listed_as_words():
    for args in (["diagnose"], ["compare"]):
        out = _help(args, 80)
        assert "--input-format FORMAT" in out and "[auto|plain" not in out
        flat = " ".join(out.split())
        assert "FORMAT is one of auto, plain, journald, journald-json, docker," in flat


def test_diagnose_help_ends_with_examples_then_exit_codes():
    out = _help(["diagnose"], 80)
    examples, codes = out.index("Examples:"), out.index("Exit codes:")
    assert out.index("-h, --help") < examples < codes
    shown = out[examples:codes]
    for example in ("vllm-doctor diagnose server.log", "| vllm-doctor diagnose -", "-F ", "--metrics http://"):
        assert example in shown


@needs_tmux
def test_help_on_an_80_column_terminal(tmp_path):
    screen = run_in_tmux(f"{VD} diagnose --help; {VD} compare --help; {VD} --help", tmp_path)
    assert "Exit codes:" in screen and "Commands:" in screen
    assert max(len(x) for x in screen.splitlines()) <= 80


def _lines_fill(text: str, width: int):
    """Pairs of lines of one block where the second's first word would have fitted on the
    first: a lone fragment the reflow left."""
    lines = text.splitlines()
    item = re.compile(r"^\s*(?:[*-]|\d{1,2}[.)])\s")
    bad = []
    for a, b in zip(lines, lines[1:]):
        if not a.strip() or not b.strip() or not a.startswith(" ") or item.match(b) or item.match(a):
            continue
        if len(a) - len(a.lstrip()) != len(b) - len(b.lstrip()) or a.endswith(":"):
            continue
        if len(a) + 1 + len(b.split()[0]) <= width:
            bad.append((a, b))
    return bad


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_explain_pages_reflow_without_fragments(rule):
    for width in (80, 60):
        page = rewrap(rule.explanation, width)
        assert max(len(x) for x in page.splitlines()) <= width or any(len(w) > width - 8 for w in page.split()), page
        assert _lines_fill(page, width) == [], _lines_fill(page, width)
        # A word hyphenated across two source lines is joined whole ("pipeline- or" stays).
        assert set(re.findall(r"\w+- \w+", page)) <= set(re.findall(r"\w+- \w+", rule.explanation))


def test_explain_vd101_at_80_columns():
    page = rewrap(lookup("VD101").explanation, 80)
    assert "out-of-memory error" in page and "out-of- memory" not in page
    assert "startup fails (V0:\n" not in page
    # The paragraph after the numbered list keeps the list's own indent, not the item text's.
    assert "\n    Negative/zero budget: raise `--gpu-memory-utilization`" in page
    assert "check): the activation peak of the profiling batch" in " ".join(page.split())
