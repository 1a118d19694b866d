"""The stats line's fast read (vllm_doctor.catalog.fast) gives the events the general way gives.

Speed is measured by bench/run.py, never here. Each case reads a record twice, with the
fast read and with it turned off, and compares every event (kind, pattern, phase, data with
its types and key order) and what the catalog counted (unread values, timeouts).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_catalog_speed import corpus_lines

from vllm_doctor.catalog import Catalog, fast
from vllm_doctor.envelopes import unwrap


def events_of(line, use_fast, monkeypatch):
    """``[(kind, pattern, phase, repr(data))]`` and the catalog's counts for one line."""
    with monkeypatch.context() as m:
        if not use_fast:
            m.setattr(fast, "read", lambda text, rec, selected: None)
        cat = Catalog()
        out = []
        for rec in unwrap("t", 1, line):
            out += [(e.kind, e.pattern, e.phase, repr(e.data)) for e in cat.recognise(rec)]
        return out, repr(cat.unread), cat.timeouts


def same(line, monkeypatch):
    fast_way = events_of(line, True, monkeypatch)
    general = events_of(line, False, monkeypatch)
    assert fast_way == general, line
    return fast_way[0]


PREFIX = "(APIServer pid=1) INFO 11-30 00:00:10 [loggers.py:123] "
V1_MAIN = (
    "Avg prompt throughput: 2148.9 tokens/s, Avg generation throughput: 669.3 tokens/s, "
    "Running: 32 reqs, Waiting: 0 reqs"
)
#: Lines the fast read must take: every wording of vllm/v1/metrics/loggers.py (v0.10-v0.33)
#: and vllm/engine/metrics.py (V0).
TAKEN = [
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 55.0%, Prefix cache hit rate: 31.8%",  # v0.10-v0.19
    f"{V1_MAIN}, GPU KV cache usage: 55.0%, Prefix cache hit rate: 31.8%",  # one engine, no index
    f"2 Engines Aggregated: {V1_MAIN}, GPU KV cache usage: 55.0%, Prefix cache hit rate: 31.8%",
    f"Engine 001: {V1_MAIN}, Preemptions: 7, GPU KV cache usage: 99.9%, Prefix cache hit rate: 0.0%",
    f"Engine 000: {V1_MAIN}, Deferred: 3 reqs, Preemptions: 2, GPU KV cache usage: 100.0%, Prefix cache hit rate: 5.5%",
    f"Engine 000: {V1_MAIN}, Deferred: 3 reqs, GPU KV cache usage: 1.0%",  # no prefix caching
    f"Engine 000: {V1_MAIN}, XPU KV cache usage: 12.5%, Prefix cache hit rate: 31.8%",  # v0.30+: the device
    f"Engine 000: {V1_MAIN}, CPU KV cache usage: 12.5%",
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%, Prefix cache hit rate: 2.0%, MM cache hit rate: 3.0%",
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%, Prefix cache hit rate: 2.0%, Corrupted: 1 reqs",
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%, Prefix cache hit rate: 2.0%, External prefix cache hit rate: 9.0%",
    "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, "
    "Swapped: 0 reqs, Pending: 4 reqs, GPU KV cache usage: 0.4%, CPU KV cache usage: 0.0%.",
    "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, "
    "Swapped: 2 reqs, Pending: 4 reqs, GPU KV cache usage: 0.4%",
]
#: Lines the fast read must leave to the general way (which reads them, or not, as before).
LEFT = [
    f"Engine 000: {V1_MAIN}, Deferred: 3 reqs, KV fetch: 1 waiting to start, 2 in progress, 0 completed waiting, "
    "GPU KV cache usage: 1.0%",  # v0.32's KV fetch: read by the general expression's unknown fields
    "Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Max iteration time: 386.7 ms, "
    "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%",  # a fork's extra field
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%, Prefix cache hit rate: 1.2.3%",
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%, Prefix cache hit rate: \u0663.0%",
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: \u0663.0%",
    f"Engine \u0663: {V1_MAIN}, GPU KV cache usage: 1.0%",
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 101.0%",  # out of range: counted unread
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%, Prefix cache hit rate: 100.5%",
    f"Engine 000: {V1_MAIN.replace('32 reqs', '1234567890123456789 reqs')}, GPU KV cache usage: 1.0%",
    f"Engine 000: {V1_MAIN}, Preemptions: 2, Deferred: 3 reqs, GPU KV cache usage: 1.0%",  # not vLLM's order
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.",  # cut short
    f"Engine 000: {V1_MAIN}",  # cut short
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%, Swapped: 1 reqs",  # both stats patterns' literals
    f"note: Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%",  # not at the start of the message
    f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%, error: out of memory at x",  # another pattern's anchor
    "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, "
    "Swapped: 0 reqs, Pending: 4 reqs, Waiting: 1 reqs, GPU KV cache usage: 0.4%",
    "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, "
    "Swapped: 0 reqs, Pending: 4 reqs, GPU KV cache usage: 0.4%, CPU KV cache usage: 1e3%",
    # a V0 line, then a whole V1 one: both patterns match
    "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 12.3 tokens/s, Running: 1 reqs, "
    f"Swapped: 0 reqs, Pending: 4 reqs, GPU KV cache usage: 0.4%; {V1_MAIN}, GPU KV cache usage: 1.0%",
]


@pytest.mark.parametrize("line", TAKEN)
@pytest.mark.parametrize("prefix", ["", PREFIX, "2026-01-01T00:00:00.000Z stdout F " + PREFIX])
def test_every_wording_of_the_stats_line_is_read_fast_to_the_same_event(line, prefix, monkeypatch):
    rec = unwrap("t", 1, prefix + line)[0]
    from vllm_doctor import catalog

    assert fast.read(rec.text, rec, catalog._anchors_in(rec.text)) is not None, rec.text
    events = same(prefix + line, monkeypatch)
    assert [e[1] for e in events] == ["v0_stats" if "Swapped" in line else "v1_stats"]


@pytest.mark.parametrize("line", LEFT)
@pytest.mark.parametrize("prefix", ["", PREFIX])
def test_lines_the_fast_read_cannot_read_exactly_go_the_general_way(line, prefix, monkeypatch):
    rec = unwrap("t", 1, prefix + line)[0]
    from vllm_doctor import catalog

    assert fast.read(rec.text, rec, catalog._anchors_in(rec.text)) is None, rec.text
    same(prefix + line, monkeypatch)


def test_the_fast_read_gives_the_general_events_on_every_corpus_line(monkeypatch):
    taken = 0
    for line in corpus_lines():
        events = same(line, monkeypatch)
        taken += any(e[0] == "stats" for e in events)
    assert taken > 100  # the corpus holds stats lines of both engines


def test_a_second_pattern_selected_turns_the_fast_read_off():
    from vllm_doctor import catalog

    line = f"Engine 000: {V1_MAIN}, GPU KV cache usage: 1.0%"
    rec = unwrap("t", 1, line)[0]
    selected = catalog._anchors_in(line)
    assert [p.name for _, p in selected] == ["v0_stats", "v1_stats"]
    assert fast.read(line, rec, selected) is not None
    assert fast.read(line, rec, selected[1:]) is None
    assert fast.read(line, rec, tuple(reversed(selected))) is None
    other = catalog._anchors_in(line + ", error: out of memory at x")
    assert len(other) > 2 and fast.read(line, rec, other) is None


FIELD = st.sampled_from(["0", "7", "32", "0.0", "55.0", "100.0", "100.1", "1.", ".5", "1.2.3", "\u0663", "", "x"])
PIECES = st.sampled_from(
    [
        "Engine {}: ",
        "{} Engines Aggregated: ",
        "Avg prompt throughput: {} tokens/s",
        ", Avg generation throughput: {} tokens/s",
        ", Running: {} reqs",
        ", Waiting: {} reqs",
        ", Swapped: {} reqs",
        ", Pending: {} reqs",
        ", Deferred: {} reqs",
        ", Preemptions: {}",
        ", GPU KV cache usage: {}%",
        ", XPU KV cache usage: {}%",
        ", CPU KV cache usage: {}%",
        ", Prefix cache hit rate: {}%",
        ", Max iteration time: {} ms",
        ".",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(PIECES, FIELD), min_size=1, max_size=12))
def test_generated_stats_lines_give_the_same_events_either_way(parts):
    line = "".join(piece.format(value) for piece, value in parts)
    with pytest.MonkeyPatch.context() as mp:
        same(line, mp)
        same(PREFIX + line, mp)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(TAKEN), st.lists(st.tuples(st.integers(0, 400), FIELD), max_size=3))
def test_stats_lines_with_a_value_changed_give_the_same_events_either_way(line, edits):
    for at, value in edits:
        at = min(at, len(line))
        line = line[:at] + value + line[at:]
    with pytest.MonkeyPatch.context() as mp:
        same(line, mp)


def _verdict(path, use_fast):
    from conftest import comparable

    from vllm_doctor.pipeline import diagnose_input
    from vllm_doctor.sources import Source

    with pytest.MonkeyPatch.context() as mp:
        if not use_fast:
            mp.setattr(fast, "read", lambda text, rec, selected: None)
        with open(path, "rb") as fh:
            return comparable(diagnose_input(Source(str(path), fh)))


def test_the_verdicts_are_those_of_the_general_way_on_corpus_logs_with_stats_lines():
    from conftest import fixture_path, load_manifest

    n = 0
    for case in load_manifest():
        path = fixture_path(case["file"])
        with open(path, encoding="utf-8", errors="replace") as fh:
            if "Avg prompt throughput" not in fh.read():
                continue
        assert _verdict(path, True) == _verdict(path, False), case["file"]
        n += 1
    assert n >= 20


def test_the_verdict_of_a_generated_busy_log_is_that_of_the_general_way(tmp_path):
    import os
    import subprocess
    import sys

    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "generate.py")
    log = tmp_path / "busy.log"
    subprocess.run([sys.executable, bench, str(log), "2"], check=True)
    want = _verdict(log, False)
    assert want["primary_class"] == "runtime_oom" and _verdict(log, True) == want
