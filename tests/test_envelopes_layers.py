"""Wrapper invariance for whole families of wrappers (round 3, kind F of the hunt report).

Each test takes one kind of damage or wrapper and checks it over several wrappers and
several corpus logs, never one: a per-line source is honoured by the wrap join, learned
prefixes are found under any outer wrapper, and wrappers stack.
"""

import pytest
from conftest import FIXTURES

from vllm_doctor.envelopes import Envelopes, source_key
from vllm_doctor.reassemble import Reassembler

#: A stats line cut by a hard wrap, and its rest (the join these tests are about).
CUT = (
    "INFO 07-03 23:23:42 [metrics.py:536] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "616.1 tokens/s, Running: 32 r"
)
REST = "eqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 17.6%, CPU KV cache usage: 0.0%."


def fixture_text(prefix):
    (path,) = FIXTURES.glob(f"{prefix}-*.log")
    return path.read_text(encoding="utf-8").splitlines()


def read(lines):
    """Records of ``lines`` read as the pipeline reads one input: sniffed first, then
    unwrapped and reassembled."""
    env = Envelopes()
    for line in lines[:200]:
        env.sniff(line)
    r = Reassembler()
    out = []
    for n, line in enumerate(lines, 1):
        out.extend(r.feed(env.unwrap("t", n, line)))
    return out + r.flush()


# Wrappers that name the source of every line: (name, wrap(source, line)).
PER_LINE_SOURCES = [
    ("kubectl-prefix", lambda src, line: f"[pod/vllm-{src}-7d9f/vllm] {line}"),
    (
        "kubectl-prefix-timestamps",
        lambda src, line: f"[pod/vllm-{src}-7d9f/vllm] 2026-11-30T03:08:00.000000000Z {line}",
    ),
    ("journald", lambda src, line: f"Nov 30 03:08:00 gpu-node-3 vllm[{100 + ord(src)}]: {line}"),
    ("journald-iso", lambda src, line: f"2026-11-30T03:08:00+0000 gpu-node-{src} vllm[4127]: {line}"),
    ("stern", lambda src, line: f"vllm-{src}-7d9f8c4b5-x2k4p vllm {line}"),
    ("loki-text", lambda src, line: f'2026-11-30T03:08:00+01:00 {{container="vllm", pod="vllm-{src}"}}   {line}'),
]


def _filler(wrap, n=6):
    """Lines that let a learned wrapper be learned (stern) before the cut line."""
    return [wrap("a" if i % 2 else "b", f"INFO 07-03 23:23:{i:02d} [api_server.py:1] line {i}") for i in range(n)]


@pytest.mark.parametrize("name,wrap", PER_LINE_SOURCES, ids=[n for n, _ in PER_LINE_SOURCES])
def test_a_continuation_from_another_source_is_not_joined(name, wrap):
    lines = _filler(wrap) + [wrap("a", CUT), wrap("b", REST)]
    recs = read(lines)
    cut = next(r for r in recs if r.text.endswith("Running: 32 r") or "Running: 32 r" in r.text)
    assert cut.continued == 0 and cut.text.endswith("Running: 32 r"), cut.text
    rest = next(r for r in recs if r.text.startswith("eqs, Swapped"))
    assert source_key(rest) != source_key(cut) != ""


@pytest.mark.parametrize("name,wrap", PER_LINE_SOURCES, ids=[n for n, _ in PER_LINE_SOURCES])
def test_a_continuation_from_the_same_source_is_joined_without_its_wrapper(name, wrap):
    lines = _filler(wrap) + [wrap("a", CUT), wrap("a", REST)]
    recs = read(lines)
    (cut,) = [r for r in recs if "Running: 32 r" in r.text]
    assert cut.continued == 1
    assert cut.text == CUT.split("] ", 1)[1] + REST  # nothing of the wrapper glued in
