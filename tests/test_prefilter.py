"""The pre-filtered path gives the same verdict as reading every line (issue 6's promise)."""

import io

import pytest
from conftest import fixture_path, load_manifest

from vllm_doctor import prefilter
from vllm_doctor.pipeline import build_verdict, diagnose_input, diagnose_source
from vllm_doctor.sources import Source, read_lines

CASES = load_manifest()


def comparable(results):
    d = build_verdict(results).to_dict()
    for s in d["sources"]:
        s.pop("records"), s.pop("joined")  # records examined: fewer on the fast path, by design
    return d


def slow(path):
    with open(path, "rb") as fh:
        return comparable(diagnose_source(str(path), read_lines(Source(str(path), fh))))


def fast(path, block_size=prefilter.BLOCK_SIZE, monkeypatch=None):
    with open(path, "rb") as fh:
        src = Source(str(path), fh)
        if monkeypatch is not None:
            monkeypatch.setattr(prefilter, "BLOCK_SIZE", block_size)
            monkeypatch.setattr(
                prefilter, "scanner_for", lambda s, on_block=None: prefilter.BlockScanner(s, block_size)
            )
        return comparable(diagnose_input(src))


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_same_verdict_as_reading_every_line(case):
    path = fixture_path(case["file"])
    assert fast(path) == slow(path)


@pytest.mark.parametrize("case", CASES[::5], ids=[c["file"] for c in CASES[::5]])
def test_same_verdict_with_tiny_blocks(case, monkeypatch):
    # Blocks of 97 bytes put block boundaries inside records, continuations and tracebacks.
    path = fixture_path(case["file"])
    assert fast(path, 97, monkeypatch) == slow(path)


def test_every_catalog_case_line_is_a_candidate_among_boring_lines():
    # Whatever the catalog recognises, the scanner must hand over: each line of the catalog's
    # own cases, buried in request logging, comes out as a candidate with its line number.
    from test_catalog import ALL_CASES

    boring = b'INFO:     127.0.0.1:5000 - "GET /metrics HTTP/1.1" 200 OK\n' * 3
    for p in ALL_CASES:
        line = p.values[0].encode()
        data = boring + line + b"\n" + boring
        got = [(n, cand) for n, _, cand in prefilter.BlockScanner(Source("x", io.BytesIO(data)), 64)]
        assert (4, True) in got, p.id


def test_scanner_counts_every_line_and_numbers_candidates():
    data = b"boring\n" * 5 + b"INFO 01-01 00:00:00 [x.py:1] GPU KV cache size: 1,000 tokens\n" + b"boring\n" * 3
    sc = prefilter.BlockScanner(Source("x", io.BytesIO(data)), 16)
    got = [(n, cand) for n, _, cand in sc]
    assert got == [(6, True)] and sc.lines == 9


def test_a_continuation_after_a_candidate_is_offered_and_joined():
    data = (
        b"INFO 07-03 23:23:42 [metrics.py:536] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
        b"616.1 tokens/s, Running: 32 r\n"
        b"eqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 17.6%, CPU KV cache usage: 0.0%.\n"
    )
    [result] = diagnose_input(Source("x", io.BytesIO(data * 3)))
    assert result.tracker.runs[-1].stats.count == 3 and result.summary.lines == 6


def test_over_long_lines_are_cut_the_same_way_on_both_paths(monkeypatch):
    from vllm_doctor import sources

    monkeypatch.setattr(sources, "LINE_LIMIT", 64)
    monkeypatch.setattr(prefilter, "LINE_LIMIT", 64)
    line = b"ValueError: No available memory for the cache blocks. " + b"x" * 500 + b"\n"
    data = b"a" * 1000 + b"\n" + line + b"b" * 70
    slow_v = comparable(diagnose_source("x", read_lines(Source("x", io.BytesIO(data)))))
    sc_results = build_verdict_from_scanner(data, 16)
    assert sc_results == slow_v
    assert slow_v["primary_class"] == "kv_cache_capacity" and slow_v["sources"][0]["lines"] == 3


def build_verdict_from_scanner(data, block_size):
    src = Source("x", io.BytesIO(data))
    original = prefilter.scanner_for
    try:
        prefilter.scanner_for = lambda s, on_block=None: prefilter.BlockScanner(s, block_size)
        return comparable(diagnose_input(src))
    finally:
        prefilter.scanner_for = original
