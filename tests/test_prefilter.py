"""The pre-filtered path gives the same verdict as reading every line (issue 6's promise)."""

import io

import pytest
from conftest import comparable, fixture_path, load_manifest, serial

from vllm_doctor import prefilter
from vllm_doctor.catalog import PATTERNS
from vllm_doctor.pipeline import diagnose_input, diagnose_source
from vllm_doctor.sources import Source, read_lines

CASES = load_manifest()


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
    assert fast(path) == serial(path)


@pytest.mark.parametrize("case", CASES[::5], ids=[c["file"] for c in CASES[::5]])
def test_same_verdict_with_tiny_blocks(case, monkeypatch):
    # Blocks of 97 bytes put block boundaries inside records, continuations and tracebacks.
    path = fixture_path(case["file"])
    assert fast(path, 97, monkeypatch) == serial(path)


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


def _catalog_literals():
    """What the pre-filter must find, taken from the catalog and the frame tags themselves."""
    from vllm_doctor.frames import KV_ALLOC_FUNCS, TAG_FUNCS

    return (
        {a for p in PATTERNS for a in p.anchors} | {f for funcs in TAG_FUNCS.values() for f in funcs} | KV_ALLOC_FUNCS
    )


def test_the_gate_covers_every_anchor_and_tag_function_in_at_most_four_teddy_groups():
    gate = prefilter.GATE
    assert prefilter.MAX_GATE == 64 and prefilter.MAX_GATE_GROUPS == 4 and prefilter.PROSE_GROUP == 24
    gates, _, _ = prefilter._automata()
    long_groups = [part for _, part in gates if all(len(gate[i]) >= prefilter.SHORT for i in part)]
    assert 1 <= len(long_groups) <= prefilter.MAX_GATE_GROUPS
    assert all(len(part) <= prefilter.MAX_GATE for part in long_groups)
    # the literals that start like prose words are in small groups of their own
    for part in long_groups:
        starts = {prefilter._prose_start(gate[i]) for i in part}
        assert len(starts) == 1
        assert len(part) <= (prefilter.PROSE_GROUP if starts == {True} else prefilter.MAX_GATE)
    assert prefilter._prose_start("init") and prefilter._prose_start(" time")
    assert not prefilter._prose_start("Avg prompt") and not prefilter._prose_start('File "')
    # every gate literal is searched exactly once
    assert sorted(i for _, part in gates for i in part) == list(range(len(gate)))
    uncovered = sorted(lit for lit in _catalog_literals() if not any(g in lit for g in gate))
    assert uncovered == []


def test_the_gate_stays_a_cover_when_patterns_are_added():
    # A new anchor no preferred gate literal is part of gets one of its own.
    new = ["Zebra stripes overflowed", "quux_frobnicate", "Zebra stripes underflowed", "ab"]
    gate = prefilter.gate_literals(list(prefilter.LITERALS) + new)
    assert all(any(g in lit for g in gate) for lit in list(prefilter.LITERALS) + new)
    assert len(gate) <= len(prefilter.GATE) + 3  # the two Zebra lines share one


@pytest.mark.parametrize("literal", sorted(_catalog_literals()))
def test_a_line_holding_any_literal_is_a_candidate(literal):
    noise = b'INFO:     10.0.0.1:4000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    line = b"(EngineCore_DP0 pid=7) WARNING 01-01 00:00:00 [x.py:1] zz " + literal.encode() + b" zz\n"
    block = noise * 3 + line + noise * 2
    assert prefilter.candidate_starts(block) == [len(noise) * 3]


def test_a_gate_hit_without_a_literal_is_not_a_candidate():
    # "initial" hits the gate's "init", "reload" its "load": neither is a literal.
    block = b"the initial plan was to reload\n" + b"    self.model_runner.init_device()\n"
    assert prefilter.candidate_starts(block) == [len(b"the initial plan was to reload\n")]


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
    line = b"ValueError: No available memory for the cache blocks. " + b"x" * 500 + b"\n"
    data = b"a" * 1000 + b"\n" + line + b"b" * 70
    slow_v = comparable(diagnose_source("x", read_lines(Source("x", io.BytesIO(data)))))
    for block_size in (16, 97, 4096):
        assert build_verdict_from_scanner(data, block_size) == slow_v
    assert slow_v["primary_class"] == "kv_cache_capacity" and slow_v["sources"][0]["lines"] == 3


def build_verdict_from_scanner(data, block_size):
    src = Source("x", io.BytesIO(data))
    original = prefilter.scanner_for
    try:
        prefilter.scanner_for = lambda s, on_block=None: prefilter.BlockScanner(s, block_size)
        return comparable(diagnose_input(src))
    finally:
        prefilter.scanner_for = original


def test_the_cheap_continuation_test_never_rules_out_a_line_the_reassembler_would_join():
    # _cannot_continue() decides without unwrapping; it must agree with would_join()
    # whenever it says "no": over every pair of consecutive corpus lines, wrapped or not.
    from vllm_doctor.envelopes import unwrap
    from vllm_doctor.pipeline import _cannot_continue
    from vllm_doctor.reassemble import Reassembler

    checked = ruled_out = 0
    for case in CASES:
        lines = fixture_path(case["file"]).read_text(errors="replace").splitlines()
        for prefix in ("", "(APIServer pid=1) ", "(EngineCore_DP0 pid=7) ERROR 01-01 00:00:00 [x.py:1] "):
            reasm = Reassembler()
            for n, line in enumerate(lines, 1):
                cur = prefix + line if n % 2 else line
                recs = unwrap("x", n, cur)
                if _cannot_continue(reasm, cur):
                    ruled_out += 1
                    assert not reasm.would_join(recs), (case["file"], n)
                checked += 1
                reasm.feed(recs)
    assert checked > 2000 and ruled_out > checked // 4


BULK_LINES = [
    # V1 request logging, the request, the access line, a metrics scrape
    "(APIServer pid=1) INFO 11-30 10:00:00 [logger.py:49] Received request chatcmpl-0001: prompt: 'Summarise the"
    " report for the board', params: SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, "
    "repetition_penalty=1.0, temperature=0.7, top_p=0.95, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], "
    "bad_words=[], include_stop_str_in_output=False, ignore_eos=False, max_tokens=512, min_tokens=0, logprobs=None, "
    "prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, truncate_prompt_tokens=None, "
    "guided_decoding=None, extra_args=None), prompt_token_ids: None, prompt_embeds shape: None, lora_request: None.",
    "(APIServer pid=1) INFO 11-30 10:00:00 [async_llm.py:382] Added request chatcmpl-0001.",
    '(APIServer pid=1) INFO:     10.0.3.4:41234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:50000 - "GET /metrics HTTP/1.1" 200 OK',
    # V0: the engine's own file names are in every request's record prefix
    "INFO 07-03 23:23:42 [async_llm_engine.py:211] Added request cmpl-0123456789abcdef.",
    "INFO 07-03 23:23:43 [async_llm_engine.py:179] Finished request cmpl-0123456789abcdef.",
    "INFO 07-03 23:23:42 [logger.py:39] Received request cmpl-0123: prompt: 'Hello', params: SamplingParams(n=1, "
    "best_of=1, use_beam_search=False, max_tokens=16), prompt_token_ids: [1, 2], lora_request: None, "
    "prompt_adapter_request: None.",
    # prompts in plain English: the model, time, tables (a gate literal common in prose, such
    # as "odel " once chosen for the model runner lines, makes every request line a gate hit
    # and the gate several times slower); the words of bench/generate.py's prompts among them
    "(APIServer pid=1) INFO 11-30 10:00:00 [logger.py:49] Received request chatcmpl-0002: prompt: 'the quick brown"
    " fox jumps over the lazy dog while the model reads a long context about memory, caches, tokens and schedulers"
    " in a busy inference server; explain the model in time for the table, is it able to run this model twice',"
    " params: SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=512), lora_request: None.",
]


@pytest.mark.parametrize("line", BULK_LINES, ids=range(len(BULK_LINES)))
def test_the_bulk_of_a_busy_log_does_not_even_hit_the_gate(line):
    # Not just "not a candidate": the gate itself passes them over, so they cost no exact check.
    gates, _, _ = prefilter._automata()
    assert prefilter._gate_hits((line + "\n").encode(), gates) == []


@pytest.mark.parametrize(
    "size", [0, 1, 4095, 4096, 4097, prefilter.PIECE - 1, prefilter.PIECE, 3 * prefilter.PIECE + 5]
)
def test_newlines_counts_as_bytes_count_does(size):
    import random

    rnd = random.Random(size)
    block = bytes(rnd.choice(b"ab\n\r") for _ in range(size))
    spans = [(0, None), (0, size), (size // 3, size), (1, max(size - 1, 1))]
    spans += [(a, b) for a, b in (sorted(rnd.randrange(size + 1) for _ in range(2)) for _ in range(20))]
    for start, end in spans:
        assert prefilter.newlines(block, start, end) == block.count(b"\n", start, end), (start, end)
    assert prefilter.newlines(b"\n" * size) == size
