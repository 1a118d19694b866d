"""How a log is pasted, beyond what wraps each line: table cells, Buildkite's stamps and web
gutter, wrappers cut at the end of a paste (hunt5 m22, m23, m25; hunt6 p16).

Each shape is checked on its own lines and as a transform of the whole corpus: the
transformed log must get the bare log's verdict (class, findings, facts, evidence lines)."""

import json

import pytest
from conftest import fixture_path, load_manifest, marked_known, read_records
from test_formats import buildkite_apc, buildkite_raw, essence, log_lines, verdict_of

from vllm_doctor.envelopes import STUB_MAX, Envelopes, table_cells
from vllm_doctor.numbered import Gutter, has_gutter

ALL = load_manifest()


def read(lines):
    """Records of ``lines`` as the pipeline reads them: sniffed first, unwrapped, joined."""
    return read_records(lines)[1]


def texts(lines):
    return [(r.lineno, r.text) for r in read(lines)]


def mapped(data_lines, where):
    """The verdict essence of ``data_lines`` with evidence line numbers mapped back by ``where``
    (a transformed line number -> the bare log's)."""
    return essence(verdict_of(("\n".join(data_lines) + "\n").encode()), where)


# --- Markdown table cells (m25) ---------------------------------------------------------------

STATS = (
    "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {g} tokens/s, Running: 256 reqs, "
    "Swapped: 0 reqs, Pending: 768 reqs, GPU KV cache usage: {kv}%, CPU KV cache usage: 0.0%."
)


def table(rows, pad=True):
    """A GitHub-flavoured table of ``rows`` (lists of cells), a header row and a delimiter row
    first, each column padded to its widest cell as a Markdown formatter pads it."""
    rows = [["model", "util", "vllm log"]] + rows
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if pad else [0] * len(rows[0])
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(rows[0], widths)) + " |"]
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    out += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows[1:]]
    return out


@pytest.mark.parametrize("pad", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("prefix", ["", "> ", "    "], ids=["bare", "quoted", "indented"])
def test_every_row_of_a_table_is_read_cell_by_cell(pad, prefix):
    rows = [["1.5B", "19%", STATS.format(g="2699.0", kv="7.9")], ["7B", "47%", STATS.format(g="2309.2", kv="97.8")]]
    lines = [prefix + line for line in table(rows, pad)]
    got = texts(lines)
    stats = [(n, t) for n, t in got if t.startswith("Avg prompt")]
    assert stats == [(3, rows[0][2]), (4, rows[1][2])]
    assert [t for n, t in got if n == 3] == rows[0]  # every cell a record, in order
    v = verdict_of(("\n".join(lines) + "\n").encode())
    # two rows labelled by two models are two series, not one trend (fresh19 P3)
    runs = v.to_dict()["runs"]
    assert sorted(r["facts"]["peak_kv_usage_pct"] for r in runs) == [7.9, 97.8]


def test_a_table_row_teaches_no_wrap_width_and_is_never_joined():
    # Every row of an aligned table is as long as the others: no terminal cut them.
    rows = [[f"m{i}", f"{i}%", STATS.format(g=f"{i}.0", kv=f"{i}.5")] for i in range(6)]
    env = Envelopes()
    for line in table(rows):
        env.sniff(line)
    assert env.wrap_width is None
    recs = read(["a long line of prose before the table, long enough to look cut at the edge of it"] + table(rows))
    assert all(r.continued == 0 for r in recs)
    assert [r.text for r in recs if r.lineno == 2] == ["model", "util", "vllm log"]


@pytest.mark.parametrize(
    "row,cells",
    [
        ("| a | b |", ["a", "b"]),
        ("|a|b|c|", ["a", "b", "c"]),
        ("| x \\| y | z |", ["x | y", "z"]),  # an escaped pipe is the cell's
        ("|---|:--:|--:|", []),  # the delimiter row
        ("| a |  |", ["a", ""]),
        ("| one cell |", None),  # one cell: a box, not a table
        ("| a | b \\|", None),  # the last pipe escaped: no closing border
        ("  | [2025-03-10T15:07:20Z] ERROR msg", None),  # a viewer's gutter, no closing pipe
        ("|", None),
    ],
)
def test_table_cells(row, cells):
    assert table_cells(row.strip() if row.startswith("|") else row) == cells


def test_a_delimiter_row_ends_the_record_before_it():
    lines = ["ValueError: No available memory for the cache blocks.", "|---|---|", "Try increasing x"]
    assert [r.continued for r in read(lines)][0] == 0


#: Logs whose bare verdict joins no lines: a table cell holds no line break, so the rest of a
#: wrapped line cannot sit in the next row's cell.
def _joins(case):
    v = verdict_of(fixture_path(case["file"]).read_bytes())
    return sum(s.joined for s in v.sources)


def markdown_table(lines):
    """Every line in the last cell of a row (pipes escaped), a number cell before it, under a
    header and a delimiter row: ``(lines, transformed line -> bare line)``."""
    out = ["| # | log |", "|---|-----|"]
    where = {}
    for i, line in enumerate(lines, 1):
        out.append(f"| {i} | {line.replace('|', chr(92) + '|')} |")
        where[len(out)] = i
    return out, where


#: Logs whose bare verdict is itself wrong (tests/test_corpus.py) and differs in a table.
KNOWN_WRONG_IN_A_TABLE: set = set()


@pytest.mark.parametrize("case", marked_known(ALL, KNOWN_WRONG_IN_A_TABLE))
def test_a_log_pasted_into_a_table_gets_the_bare_verdict(case):
    path = fixture_path(case["file"])
    if _joins(case):
        pytest.skip("the bare log joins wrapped lines: a table cannot hold them")
    out, where = markdown_table(log_lines(path))
    assert mapped(out, where) == essence(verdict_of(path.read_bytes()))


# --- Buildkite: the raw log's stamps, a stamp cut at the end, the web viewer's gutter (m22, m23) ---


@pytest.mark.parametrize("wrap", [buildkite_raw, buildkite_apc], ids=lambda w: w.__name__)
def test_a_buildkite_stamp_is_peeled(wrap):
    line = '  File "/w/diffusion_worker.py", line 701, in worker_main'
    (rec,) = Envelopes().unwrap("x", 1, wrap(0, line))
    assert rec.text == line


M23 = "m23-omni-buildkite-bk-t-prefix-diffusionworker-traceback-cut-before-oom.log"


@pytest.mark.parametrize("stub", ["bk", "bk;", "bk;t", "bk;t=", "bk;t=17781777", "_bk;t", "bk;t=1 bk"])
def test_a_stamp_cut_at_the_end_is_glued_onto_nothing_m23(stub):
    lines = log_lines(fixture_path(M23))
    assert lines[-1] == "bk"  # the paste ends inside the next line's stamp
    frames = [t for _, t in texts(lines[:-1] + [stub]) if t.lstrip().startswith("File ")]
    assert frames[-1].endswith(", line 701, in worker_main")


@pytest.mark.parametrize(
    "before,stub",
    [
        ("vllm-1  | {}", "vllm-1"),  # docker compose's service name, cut
        ("vllm-7d9f8c4b5-x2k4p vllm {}", "vllm-7d9f8c4b5-x2"),  # stern's pod name, cut
        ("Nov 30 03:08:21 gpu-node-3 vllm[4127]: {}", "Nov 30 03:08:2"),  # journald
    ],
)
def test_the_start_of_the_wrapper_before_it_is_no_rest_of_a_line(before, stub):
    frame = '  File "/usr/local/lib/python3.12/site-packages/vllm/worker/model_runner.py", line 1, in load_model'
    lines = [before.format("Traceback (most recent call last):"), before.format(frame), stub]
    got = texts(lines)
    assert got[-1][1].endswith("in load_model") and len(got) == 2


def test_only_a_line_shorter_than_the_wrapper_before_it_is_its_stub():
    env = Envelopes()
    env.unwrap("x", 1, "vllm-1  | INFO 01-01 00:00:00 [core.py:1] message")
    assert env._stub("vllm-1") and env._stub("vllm-1  | INFO 01-01")
    assert not env._stub("vllm-1  | INFO 01-01 00:00:00 [core.py:1] mess")  # past the wrapper: text
    assert not env._stub("vllm-2")
    assert not env._stub("vllm-1", bare=False)  # under a wrapper of its own: only Buildkite's stub
    assert STUB_MAX >= len("vllm-deployment-7d9f8c4b5-x2k4p vllm-server 2026-11-30T03:08:00")


def web_gutter(lines):
    """A copy of Buildkite's web log viewer: ``Actions for L<n>`` and ``<n>`` after each line."""
    out, where = [], {}
    for i, line in enumerate(lines, 1):
        out.append(line)
        where[len(out)] = i
        out += [f"Actions for L{i + 1500}", str(i + 1500)]
    return out, where


def test_the_web_gutter_gives_no_record_and_keeps_a_log_number():
    g = Gutter()
    assert [g.take(t) for t in ["Actions for L1512\n", "1512", "1512", "Actions for L7", "8"]] == [
        True,
        True,
        False,  # a number of the log's own: not right after its gutter label
        True,
        False,
    ]
    assert has_gutter(b"x\nActions for L1512\n1512\n") and not has_gutter(b"say Actions for L1512 here\n")


#: Logs whose verdict differs as a copy of the web viewer (being fixed: hunt10, imported at 10eedad).
KNOWN_WRONG_WEB_VIEWER: set = set()


@pytest.mark.parametrize("case", marked_known(ALL, KNOWN_WRONG_WEB_VIEWER))
def test_a_copy_of_the_web_viewer_gets_the_bare_verdict(case):
    path = fixture_path(case["file"])
    out, where = web_gutter(log_lines(path))
    assert mapped(out, where) == essence(verdict_of(path.read_bytes()))


@pytest.mark.parametrize("case", ALL, ids=[c["file"] for c in ALL])
def test_a_raw_buildkite_log_cut_inside_its_last_stamp_gets_the_bare_verdict(case):
    path = fixture_path(case["file"])
    lines = log_lines(path)
    if any(line[:1] in "\u2502\u2503\u2551" for line in lines):
        pytest.skip("a copy of a TUI pane is no CI job's output")
    out = [buildkite_raw(i, line) for i, line in enumerate(lines)] + ["bk"]
    assert mapped(out, None) == essence(verdict_of(path.read_bytes()))


def test_gutter_and_stamps_are_json_safe():
    # A journald JSON envelope around a stamped line: peeled inside the envelope too.
    obj = {
        "_HOSTNAME": "h",
        "_PID": "7",
        "MESSAGE": buildkite_raw(0, "ValueError: No available memory for the cache blocks."),
    }
    v = verdict_of((json.dumps(obj) + "\n").encode())
    assert v.primary_class == "kv_cache_capacity"


# --- one blank line after every line: a paste that doubled the newlines (p16) ----------------

#: vLLM's OpenAI-compatible error for a request over the context (vllm/entrypoints/openai
#: serving_engine.py ``_validate_input``; the same wording hosted APIs return), as a client
#: prints it inside its error repr.
CONTEXT_ERROR = (
    "Error code: 400 - {'error': {'message': \"This model's maximum context length is 131072 tokens. "
    "However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please "
    "reduce the length of the messages or completion.\", 'type': 'invalid_request_error', 'param': None}}"
)


def word_wrap(text, width):
    """``text`` wrapped at words to ``width`` columns, as an editor or a web page does."""
    import textwrap

    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


def doubled(lines):
    """A blank line after every line: ``(lines, transformed line -> bare line)``."""
    out, where = [], {}
    for i, line in enumerate(lines, 1):
        out.append(line)
        where[len(out)] = i
        out.append("")
    return out, where


@pytest.mark.parametrize(
    "width",
    [
        72,
        # Two lines at 76 and 75 columns teach a terminal width of 76 (Envelopes._learn_width
        # counts a line one short as a cut after a space), and "context length" / "is" is then
        # glued as a word cut at that width: a paragraph wrapped at words is not told from a
        # terminal's cut on so few lines. Strict: passes once the width learner tells them.
        pytest.param(77, marks=pytest.mark.xfail(strict=True, reason="word wrap read as a terminal cut")),
        80,
        88,
    ],
)
def test_a_word_wrapped_context_error_with_doubled_newlines_keeps_its_numbers(width):
    lines = ["Error details: request failed for model 'deepseek-chat' (status=400):"] + word_wrap(CONTEXT_ERROR, width)
    lines = doubled(lines)[0]
    v = verdict_of(("\n".join(lines) + "\n").encode())
    assert v.primary_class == "request_too_long"
    facts = v.findings[0].facts
    assert (facts["max_model_len"], facts.get("requested_tokens"), facts.get("prompt_tokens")) == (
        131072,
        131134,
        122942,
    )


def test_p16_reads_its_numbers_across_the_blank_lines():
    lines = log_lines(fixture_path("p16-fast-agent-deepseek-hosted-api-context-131072-requested-131134-not-vllm.log"))
    assert lines[1] == lines[3] == ""
    (rec,) = [r for r in read(lines) if "maximum context length" in r.text]
    assert "However, you requested 131134 tokens (122942 in the messages, 8192 in the completion)" in rec.text


@pytest.mark.parametrize(
    "after",
    [
        "Next paragraph starts here.",  # a new sentence
        "INFO 01-01 00:00:00 [core.py:1] a record of its own",  # a record
        "Traceback (most recent call last):",  # a new thing
        "",  # two blank lines: a paragraph break in a doubled paste
    ],
)
def test_a_blank_line_is_crossed_only_into_a_sentence_that_goes_on(after):
    first = "a long line of the message that ends in the middle of its sentence, then a blank"
    lines = [first, "", after, "tail of it"] if after else [first, "", "", "tail of it"]
    recs = read(lines)
    assert recs[0].text == first and recs[0].continued == 0


@pytest.mark.parametrize("ending", [".", ":", ")", " ok!"])
def test_a_line_that_ends_its_sentence_is_not_continued_across_a_blank(ending):
    first = "a long line of the message that ends its sentence before the blank line comes" + ending
    assert read([first, "", "and this line is another one"])[0].continued == 0


def test_a_short_line_is_not_continued_across_a_blank():
    assert read(["short line, then", "", "more text"])[0].continued == 0


#: Logs whose verdict differs with their newlines doubled (being fixed: hunt10, imported at 10eedad).
KNOWN_WRONG_DOUBLED: set = set()


@pytest.mark.parametrize("case", marked_known(ALL, KNOWN_WRONG_DOUBLED))
def test_a_log_with_its_newlines_doubled_gets_the_bare_verdict(case):
    """Only a sentence that goes on, or the rest of a line cut at the input's width, crosses a
    blank line: a log whose bare reading joins lines by another rule (re-typed sentences, an
    open OOM message, a shell command) is not comparable, and is skipped."""
    path = fixture_path(case["file"])
    if _joins(case):
        pytest.skip("the bare log joins lines by rules that stop at a blank line")
    out, where = doubled(log_lines(path))
    assert mapped(out, where) == essence(verdict_of(path.read_bytes()))


# --- an indented block inside prose, hard-wrapped at words (m07) -----------------------------

OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 136.00 MiB. GPU 0 has a total capacity of "
    "22.36 GiB of which 120.88 MiB is free. Including non-PyTorch memory, this process has 22.23 GiB memory in "
    "use. Of the allocated memory 21.50 GiB is allocated by PyTorch, and 300.00 MiB is reserved by PyTorch but "
    "unallocated."
)


@pytest.mark.parametrize("indent", [4, 8])
@pytest.mark.parametrize("width", [72, 80, 100])
def test_an_indented_word_wrapped_message_is_one_record_without_its_indent(indent, width):
    lines = ["It OOMed at capture:", ""] + [" " * indent + p for p in word_wrap(OOM, width - indent)] + ["", "Prose."]
    (rec,) = [r for r in read(lines) if "out of memory" in r.text]
    assert rec.text == OOM
    v = verdict_of(("\n".join(lines) + "\n").encode())
    facts = v.findings[0].facts
    assert (facts["gpu_total_gib"], facts["gpu_free_gib"]) == (22.36, pytest.approx(0.118, abs=1e-3))


def test_m07_reads_total_and_free_across_its_wrap():
    lines = log_lines(fixture_path("m07-pr-indented-hard-wrapped-capture-oom-136mib-22p36gib-5090-laptop.log"))
    (rec,) = [r for r in read(lines) if "Tried to allocate" in r.text]
    assert rec.text.startswith("Tried to allocate 136.00 MiB. GPU 0 has a total capacity of 22.36 GiB of which 120.88")


@pytest.mark.parametrize(
    "lines",
    [
        # a traceback's source line, long, and the next frame: never one record
        [
            '  File "/usr/lib/python3.12/site-packages/vllm/worker/model_runner.py", line 1, in load_model',
            "    self.model = get_model(vllm_config=self.vllm_config, model_config=self.model_config)",
            "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ],
        # a deeper indentation is a block of its own (a call's arguments), not the rest
        [
            "    result = some_long_function_name_for_the_example(argument_one, argument_two,",
            "        argument_three)",
        ],
        # a new sentence at the same indentation
        ["    The first line of an indented block, long enough to look wrapped at its edge.", "    Another."],
    ],
)
def test_indented_lines_that_are_no_wrapped_rest_stay_apart(lines):
    recs = read(lines)
    assert all(r.continued == 0 for r in recs)
