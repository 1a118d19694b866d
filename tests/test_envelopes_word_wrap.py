"""Lines wrapped with no width to learn it from (an excerpt too short, an editor's or a person's
wrap): the joiner tells a wrap at a space, whose space went with the line break (w19's "... on
startup" / "is less than ...", w30's "... 256 dummy" / "requests`"), from a word a terminal cut in
two ("throughpu" / "t:") by the words of vLLM's messages (:func:`vllm_doctor.reassemble._two_words`).
Both tables run over every wording of the catalog's case table (tests/test_catalog.py), cut at
every place the joiner has to choose, and assert the wording is read with the same numbers."""

import pytest
import regex
from test_catalog import ALL_CASES, assert_data

from vllm_doctor.catalog import Catalog
from vllm_doctor.envelopes import unwrap
from vllm_doctor.reassemble import _FIRST_WORD, WRAP_MIN_WIDTH, Reassembler, _two_words, _wording_words, cut_word


def _lines():
    """Each case's line that is one record (a line holding several, glued or collapsed, is cut
    inside a record prefix: another shape)."""
    for p in ALL_CASES:
        line, pattern, _kind, data = p.values
        if "\n" not in line and "\r" not in line and len(unwrap("t", 1, line)) == 1:
            yield line, pattern, data


def _bare(rest):
    """True when nothing peels a wrapper off ``rest`` (``worker | rank=0`` reads as compose's)."""
    rec = unwrap("t", 2, rest)[0]
    return rec.wrapper is None and rec.inner_bare


def _at_spaces():
    """A wrap at each space after :data:`WRAP_MIN_WIDTH` characters or more that has a word of
    vLLM's messages on either side (a size or duration with its unit before it), the two glued
    no word: the space dropped."""
    for line, pattern, data in _lines():
        for i, c in enumerate(line):
            if c == " " and i >= WRAP_MIN_WIDTH and _two_words(line[:i], line[i + 1 :]) and _bare(line[i + 1 :]):
                yield pytest.param(
                    line[:i], line[i + 1 :], pattern, data, id=f"{pattern}:{i}:{line[:30]}:{line[i - 8 : i + 8]}"
                )


def _in_words():
    """A terminal's cut inside each word after :data:`WRAP_MIN_WIDTH` characters or more, in its
    middle (lower case on both sides of the cut), whose second piece starts no word of vLLM's
    messages."""
    words = _wording_words()
    for line, pattern, data in _lines():
        for m in _WORD_IN_LINE.finditer(line, WRAP_MIN_WIDTH):
            i = (m.start() + m.end()) // 2
            if line[i - 1].islower() and line[i].islower():
                piece = _FIRST_WORD.match(line, i)[0].lower()
                if piece not in words and _bare(line[i:]):
                    yield pytest.param(
                        line[:i], line[i:], pattern, data, id=f"{pattern}:{i}:{line[:30]}:{line[i - 8 : i + 8]}"
                    )


_WORD_IN_LINE = regex.compile(r"[A-Za-z]{4,}")
AT_SPACES = list(_at_spaces())
IN_WORDS = list(_in_words())


def _events(lines, pattern):
    r, catalog = Reassembler(), Catalog()
    recs = [rec for n, line in enumerate(lines, 1) for rec in r.feed(unwrap("t", n, line))] + r.flush()
    return [e for rec in recs for e in catalog.recognise(rec) if e.pattern == pattern]


def test_the_tables_hold_many_cuts():
    assert len(AT_SPACES) > 2000 and len(IN_WORDS) > 1000


@pytest.mark.parametrize("head,rest,pattern,data", AT_SPACES)
def test_a_wording_wrapped_at_a_space_keeps_its_numbers(head, rest, pattern, data):
    (ev,) = _events([head, rest], pattern)
    assert_data(ev.data, data)


@pytest.mark.parametrize("head,rest,pattern,data", IN_WORDS)
def test_a_wording_cut_inside_a_word_keeps_its_numbers(head, rest, pattern, data):
    (ev,) = _events([head, rest], pattern)
    assert_data(ev.data, data)


@pytest.mark.parametrize(
    "prev,text,spaced",
    [
        ("ValueError: Free memory on device cuda:0 (12.38/287.69 GiB) on startup", "is less than desired", True),
        (
            "The failures themselves were `CUDA out of memory occurred when warming up sampler with 256 dummy",
            "requests`",
            True,
        ),
        ("Using AITER MLA", "backend.", True),  # an acronym
        ("hpu weights took in total 512 MiB", "of device memory", True),  # a size's unit
        ("Exception in worker VllmWorkerProcess", "while processing method", True),  # a camel-case name's last word
        ("Avg prompt through", "put: 0.0 tokens/s", False),  # "throughput": glued
        ("Avg prompt throughpu", "t: 0.0 tokens/s", False),  # a cut word
        ("GPU KV cach", "e usage: 99.2%", False),
    ],
)
def test_two_words_tells_a_wrap_at_a_space_from_a_cut_word(prev, text, spaced):
    assert _two_words(prev, text) is spaced


@pytest.mark.parametrize(
    "prev,text,cut",
    [
        ("Avg generation throughpu", "t: 756.7 tokens/s", True),  # v06 wrapped again at 80
        ("the maximum number of tokens that ca", "n be stored in KV cache", True),  # w25 at 80
        ("Avg generation throughput:", "756.7 tokens/s", False),
        ("on startup", "is less than", False),  # two words
        ("the model in", "to memory", False),  # "in" is a word: "into" is no cut of it
        ("took 512 MiB", "of memory", False),  # a unit
    ],
)
def test_cut_word_tells_a_word_cut_in_two(prev, text, cut):
    assert cut_word(prev, text) is cut
