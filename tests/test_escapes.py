"""Unit tests for :mod:`vllm_doctor.escapes`: pastes through a Markdown editor or an HTML page.

The whole-corpus property (every fixture, escaped either way, gets its bare verdict) is
``tests/test_formats.py::test_an_escaped_paste_gets_the_bare_verdict``.
"""

import pytest

from vllm_doctor.envelopes import Envelopes
from vllm_doctor.escapes import has_markdown_escape, looks_escaped, unescape

UNESCAPED = [
    # Discourse's composer (k025): the record prefix's brackets, an elision.
    (
        r"INFO 05-02 10:00:01 \[gpu_model_runner.py:1234\] Model loading took 18.47 GiB",
        "INFO 05-02 10:00:01 [gpu_model_runner.py:1234] Model loading took 18.47 GiB",
    ),
    (r"\[...\]", "[...]"),
    (r"max\_model\_len (131072) \*\*is\*\* larger", "max_model_len (131072) **is** larger"),
    (r"\# heading\_1 \- list \+ \> quote", "# heading_1 - list + > quote"),  # others once a mark is there
    # HTML (k020's <pre> block)
    (
        "  File &quot;&lt;frozen runpy&gt;&quot;, line 198, in _run_module_as_main",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
    ),
    ("ValueError: model &#39;x&#39; &amp; &#x27;y&#x27;", "ValueError: model 'x' & 'y'"),
    ("&amp;lt;", "&lt;"),  # undone once
]

UNTOUCHED = [
    r"C:\Users\ops\models\llama",  # a backslash before a letter
    r'{"message": "a \"quoted\" word\n"}',  # JSON's escapes
    r"regex \d+\s*",
    r"vllm serve /models/x \\",  # a doubled backslash, in an input not known to be escaped
    "a & b; R&D",  # an ampersand that is no character reference
    "max_model_len (131072) [core.py:708]",
]


@pytest.mark.parametrize("escaped,plain", UNESCAPED)
def test_escapes_are_undone(escaped, plain):
    assert unescape(escaped) == plain


@pytest.mark.parametrize("text", UNTOUCHED)
def test_text_without_escapes_is_returned_as_it_is(text):
    assert unescape(text) == text


def test_a_doubled_backslash_is_undone_only_in_a_markdown_escaped_input():
    line = r"vllm serve /models/x \\"
    assert unescape(line) == line
    assert unescape(line, markdown_input=True) == "vllm serve /models/x \\"
    # markdown_input leaves letters, digits and quotes escaped as they are
    assert unescape(r"C:\Users \"x\"", markdown_input=True) == r"C:\Users \"x\""


def test_has_markdown_escape_wants_a_bracket_underscore_or_asterisk():
    assert has_markdown_escape(r"\[core.py:1\]")
    assert has_markdown_escape(r"max\_num\_seqs")
    assert not has_markdown_escape(r"C:\Users\x \n \d")


@pytest.mark.parametrize(
    "head,escaped",
    [
        (b"INFO 05-02 \\[core.py:1\\] x\n", True),
        (b"max\\_model\\_len\n", True),
        (b"<pre>Traceback\n  File &quot;/x.py&quot;, line 1\n", True),
        (b"INFO 05-02 [core.py:1] x\n", False),
        (b"C:\\Users\\x a & b\n", False),
    ],
)
def test_looks_escaped_reads_the_head(head, escaped):
    assert looks_escaped(head) is escaped


def test_an_input_learns_it_is_markdown_escaped_from_its_first_lines():
    """h004's shape: a launch command with shell continuations, escaped by an editor; the
    continuation line holds no mark of its own but is undone, the input having shown one."""
    lines = [r"INFO 05-02 10:00:01 \[api\_server.py:1\] vLLM API server version 0.9.2", r"vllm serve /m \\", "  --tp 2"]
    env = Envelopes()
    for line in lines:
        env.sniff(line)
    assert env.markdown
    assert [r.text for line in lines for r in env.unwrap("x", 1, line)][1:] == ["vllm serve /m \\", "  --tp 2"]
    plain = Envelopes()
    plain.sniff("vllm serve /m \\\\")
    assert not plain.markdown
