"""A remedy line never nests parentheses: the renderers put a reason in parentheses, and a
reason quotes phrases (a version's default, the line a value was printed on, what vLLM held)
that may hold their own. Checked on every remedy of every fixture log, as printed."""

import re
from pathlib import Path

import pytest

from vllm_doctor import diagnose
from vllm_doctor.render import render
from vllm_doctor.render.names import why_parts

LOGS = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "logs").glob("*.log"))
_ITEM = re.compile(r"^\s*\d+\. ")


def depth(line: str) -> int:
    """The deepest nesting of the parentheses in ``line`` (Markdown's ``\\(`` counts too)."""
    d = deepest = 0
    for ch in line:
        if ch == "(":
            d += 1
            deepest = max(deepest, d)
        elif ch == ")":
            d -= 1
    return deepest


def remedy_lines(text: str):
    return [line for line in text.splitlines() if _ITEM.match(line)]


@pytest.mark.parametrize("path", LOGS, ids=[p.name[:4] for p in LOGS])
def test_no_remedy_line_nests_parentheses(path):
    v = diagnose(path)
    lines = remedy_lines(render(v, "text", width=100_000)) + remedy_lines(render(v, "markdown"))
    if any(f.remedies for f in v.findings):
        assert lines
    for line in lines:
        assert depth(line) <= 1 and "))" not in line, line


def test_the_runtime_oom_reason_of_r003_reads_without_nesting():
    """ux2: `…, not printed in the log (vLLM held 23.50 GiB at the OOM, the overshoot included))`."""
    v = diagnose(LOGS[0].parent / "r003-club3090-enginecore-oom-runtime.log")
    assert v.primary.remedies[0].why == (
        "0.9 x 23.56 GiB, less 1.00 GiB of headroom for the failed allocation; vLLM's default 0.90-0.92 "
        "(0.92 from vLLM 0.20), not printed in the log; vLLM held 23.50 GiB at the OOM, the overshoot included"
    )
    line = remedy_lines(render(v, "text", width=100_000))[0]
    assert line.endswith(
        "(0.9 x 23.56 GiB, less 1.00 GiB of headroom for the failed allocation; vLLM's default 0.90-0.92 "
        "[0.92 from vLLM 0.20], not printed in the log; vLLM held 23.50 GiB at the OOM, the overshoot included)"
    )


@pytest.mark.parametrize(
    "action,why,shown",
    [
        ("Raise it", "0.85 as printed on line 3", ("Raise it", "0.85 as printed on line 3")),
        ("Raise it", "vLLM's default 1 (V1), not printed", ("Raise it", "vLLM's default 1 [V1], not printed")),
        ("Halve KV (a trade-off)", "about 2 (x2)", ("Halve KV", "a trade-off; about 2 [x2]")),
        ("Do it", None, ("Do it", None)),
    ],
)
def test_why_parts_puts_inner_parentheses_in_brackets(action, why, shown):
    assert why_parts(action, why) == shown
