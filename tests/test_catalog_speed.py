"""The catalog's shortcuts give what the plain way gives, over every catalog pattern.

Speed itself is measured by bench/run.py, never here: these tests pin that each shortcut of
the per-line path (one Aho-Corasick pass for the anchors, the cheap ``cut_from`` test first
in :meth:`Pattern.cut_match`, the regex-free common case of the number parsers) is exact.
"""

import regex
from conftest import fixture_path, load_manifest
from hypothesis import given
from hypothesis import strategies as st

from vllm_doctor import catalog, units
from vllm_doctor.catalog import NO_CUT, PATTERNS, TIMEOUT
from vllm_doctor.catalog.pattern import _compiled

CASES = load_manifest()


def corpus_lines():
    """Every line of every corpus log, once."""
    seen = set()
    for case in CASES:
        with open(fixture_path(case["file"]), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = line.rstrip("\n")
                if line not in seen:
                    seen.add(line)
                    yield line


def plain_anchors_in(text):
    """What _anchors_in gave before the automaton: one substring test per anchor."""
    found = {}
    for a in catalog._ANCHOR_LIST:
        if a in text:
            for i, p in catalog._BY_ANCHOR[a]:
                found[i] = p
    return sorted(found.items(), key=lambda item: item[0])


def test_the_automaton_finds_the_anchors_the_substring_tests_find_on_every_corpus_line():
    assert catalog._AUTOMATON is not None  # ahocorasick_rs is a dependency
    n = 0
    for line in corpus_lines():
        assert list(catalog._anchors_in(line)) == plain_anchors_in(line), line
        assert list(catalog._anchors_in_loop(line)) == plain_anchors_in(line), line
        n += 1
    assert n > 1000


def test_every_anchor_is_found_alone_inside_others_and_overlapping():
    anchors = catalog._ANCHOR_LIST
    texts = list(anchors)
    texts.append(" ".join(anchors))  # all of them in one line
    texts.append("".join(anchors))  # glued: anchors overlapping the joins
    texts += [f"é{a}\u00a0…{a[:-1]}" for a in anchors]  # non-ASCII around, a cut copy after
    texts += [a[1:] + a[:-1] for a in anchors]  # neither whole
    texts.append("\udcff" + anchors[0])  # a lone surrogate (errors='surrogateescape' text)
    for text in texts:
        assert list(catalog._anchors_in(text)) == plain_anchors_in(text), text
    assert catalog._anchors_in("") == ()


def test_the_pattern_sets_are_read_from_the_catalog_not_remembered_wrongly():
    # The bounded memo of selections holds the catalog's structure: the same set of anchors
    # gives the same patterns, full or not.
    text = PATTERNS[0].anchors[0]
    before = list(catalog._anchors_in(text))
    saved = dict(catalog._SELECTED)
    try:
        catalog._SELECTED.clear()
        catalog._SELECTED.update({frozenset([-k]): () for k in range(1, catalog.MAX_SELECTED + 1)})
        assert list(catalog._anchors_in(text)) == before == plain_anchors_in(text)
        assert len(catalog._SELECTED) == catalog.MAX_SELECTED
    finally:
        catalog._SELECTED.clear()
        catalog._SELECTED.update(saved)


def test_no_cut_from_depends_on_where_a_search_starts():
    # cut_match looks for cut_from from the text's start before the partial search, and
    # returns None when it is absent. That is a necessary condition only because a search
    # from 0 tries every position the later finditer(text, pos) tries, with the same
    # result: true for lookbehinds, \b and ^ (the regex module reads them in the whole
    # string, below), false for \G, which matches where a search starts.
    assert regex.compile(r"(?<![\w.])b").search("ab", 1) is None
    assert regex.compile(r"\bb").search("ab", 1) is None
    assert regex.compile(r"^b").search("ab", 1) is None
    cuts = [p.cut_from for p in PATTERNS if p.cut_from not in (None, NO_CUT)]
    assert cuts, "no pattern has a cut_from: the test reads nothing"
    for cut in cuts:
        assert r"\G" not in cut, cut


def reference_cut_match(p, text):
    """Pattern.cut_match as it was written before its cheap first test."""
    if p.cut_from == NO_CUT:
        return None
    rx = p.compiled()
    end = len(text)
    while True:
        m = rx.search(text, 0, end, partial=True, timeout=TIMEOUT)
        if m is None or not m.partial:
            return None
        reaching = [m.start(g) for g in rx.groupindex if m.start(g) >= 0 and m.start(g) < end == m.end(g)]
        if not reaching:
            break
        end = min(reaching)
    if p.cut_from is None:
        return m if any(text.find(a, max(0, m.start() - len(a) + 1)) >= 0 for a in p.anchors) else None
    for c in _compiled(p.cut_from).finditer(text, max(0, m.start() - 200), timeout=TIMEOUT):
        if c.end() > m.start():
            return m
    return None


def span(m):
    return None if m is None else (m.span(), m.groupdict())


def test_cut_match_gives_what_it_gave_on_every_corpus_line_and_every_cut_of_the_messages():
    cutting = [p for p in PATTERNS if p.cut_from not in (None, NO_CUT)]
    texts = []
    for line in corpus_lines():
        texts.append(line)
        if any(a in line for p in cutting for a in p.anchors):
            texts += [line[:k] for k in range(len(line) - 1, 0, -7)]  # the line cut anywhere
    matched = 0
    for text in texts:
        for p in cutting:
            want = span(reference_cut_match(p, text))
            assert span(p.cut_match(text)) == want, (p.name, text)
            matched += want is not None
    assert matched > 50  # the cuts reach the messages: the comparison is not all None


COUNTS = st.one_of(
    st.integers(0, 10**20).map(str),
    st.from_regex(r"[ +-]?[0-9,.]{0,12} ?", fullmatch=True),
    st.text(alphabet="0123456789.,+-e٣² _", max_size=12),
)


def reference_to_int(text):
    t = text.strip()
    if len(t) > units.MAX_NUMBER_CHARS or not units._COUNT.fullmatch(t):
        raise ValueError
    value = int(t.partition(".")[0].replace(",", ""))
    if abs(value) > units.MAX_COUNT:
        raise ValueError
    return value


def reference_to_float(text):
    t = text.strip()
    if len(t) > units.MAX_NUMBER_CHARS or not units._FLOAT.fullmatch(t):
        raise ValueError
    number = float(t)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError
    return number


def outcome(fn, text):
    try:
        return fn(text)
    except ValueError:
        return "refused"


@given(COUNTS)
def test_to_int_reads_and_refuses_what_the_regex_alone_did(text):
    assert outcome(units.to_int, text) == outcome(reference_to_int, text)


@given(st.one_of(COUNTS, st.floats(allow_nan=True, allow_infinity=True).map(repr)))
def test_to_float_reads_and_refuses_what_the_regex_alone_did(text):
    assert outcome(units.to_float, text) == outcome(reference_to_float, text)


def test_the_common_cases_of_the_number_parsers():
    assert units.to_int("32") == 32 and units.to_int(" 447,088 ") == 447088 and units.to_int("7.0") == 7
    assert units.to_float("2148.9") == 2148.9 and units.to_float("12.") == 12.0 and units.to_float(".5") == 0.5
    for bad in ("٣", "²", "1.2.3", "", ".", "9" * 49):
        assert outcome(units.to_int, bad) == "refused" == outcome(units.to_float, bad), bad


def reference_convert(name, value):
    """catalog.convert for counts and rates as it was written before its common case."""
    from vllm_doctor.catalog import FLOAT_FIELDS, FLOAT_RANGES, INT_FIELDS

    if name in INT_FIELDS:
        number = reference_to_int(value)
        if number < 0:
            raise ValueError
        return number
    assert name in FLOAT_FIELDS
    number = reference_to_float(value)
    low, high = FLOAT_RANGES.get(name, (0.0, 1e18))
    if not low <= number <= high or (name == "gpu_memory_utilization" and number == 0):
        raise ValueError
    return number


NUMERIC = sorted(catalog.INT_FIELDS | catalog.FLOAT_FIELDS)


@given(st.sampled_from(NUMERIC), st.one_of(COUNTS, st.integers(-5, 10**19).map(str), st.floats().map(str)))
def test_convert_reads_and_refuses_what_it_did_for_every_numeric_field(name, text):
    got, want = outcome(lambda t: catalog.convert(name, t), text), outcome(lambda t: reference_convert(name, t), text)
    assert got == want and type(got) is type(want)


def test_a_plain_cut_from_is_looked_for_as_text_and_any_other_by_its_expression():
    from vllm_doctor.catalog.pattern import _occurs

    assert _occurs("reqs, Swapped: ", "Running: 3 reqs, Swapped: 0", TIMEOUT)
    assert not _occurs("reqs, Swapped: ", "Running: 3 reqs, Waiting: 0", TIMEOUT)
    assert _occurs("on startup\\s*(?:is|falls)", "memory on startup  is", TIMEOUT)
    assert _occurs("a.b", "axb", TIMEOUT) and not _occurs("a\\.b", "axb", TIMEOUT)
    for p in PATTERNS:  # each cut_from read the way it is compiled: as text only when plain
        if p.cut_from not in (None, NO_CUT):
            plain = not any(c in p.cut_from for c in ".^$*+?{}[]\\|()")
            assert plain == (regex.escape(p.cut_from, special_only=True, literal_spaces=True) == p.cut_from), p.cut_from
