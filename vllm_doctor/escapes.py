"""Logs pasted through something that escaped them: Markdown editors and HTML pages.

A log reaches us through whatever its reporter pasted it into. Two kinds of paste change
the characters of every line, not only what wraps it:

* **Markdown escaping.** A rich-text editor that saves Markdown (Discourse's composer,
  HTML-to-Markdown converters such as Turndown, chat exports) puts a backslash before
  characters Markdown would read: ``\\[core.py:708\\]``, ``max\\_model\\_len``, ``\\*\\*``.
  CommonMark lets any ASCII punctuation be escaped that way (spec section 2.4, "Backslash
  escapes"); vLLM's messages are full of ``[``, ``_`` and ``*``.
* **HTML escaping.** A log copied from a page's source, a ``<pre>`` block or an HTML
  report carries entities: ``&lt;frozen importlib._bootstrap&gt;``, ``&quot;``, ``&#39;``.

Both are undone per line before anything else reads it (:func:`unescape`), and an input
whose first lines show either is read line by line, never through the pre-filter
(:func:`looks_escaped`): the pre-filter's literals (``max_num_seqs``) are not in the
escaped bytes (``max\\_num\\_seqs``).

What is never touched: a backslash before a letter, digit, space or quote (Windows
paths, ``\\n`` in a repr, JSON's ``\\"``), so an unescaped log reads as it did; lines
without an escape marker are returned as they are. A doubled backslash is undone only in an
input known to be Markdown-escaped (one of its first lines holds a mark:
:func:`has_markdown_escape`), where a shell continuation ``\\`` was saved as ``\\\\``.
"""

from __future__ import annotations

import html

import regex

#: A Markdown escape that real log text does not hold: a backslash before a bracket, an
#: underscore, an asterisk (the characters of vLLM's record prefix and setting names) or a
#: backtick (a code fence saved as ``\\`\\`\\```, m01), or before a heading's, list's or
#: quote's mark at the start of a line (``\\## Current Error``, ``\\--max-model-len``).
_MARKDOWN_MARK = regex.compile(r"\\[\[\]_*`]|^[ \t]*\\[#>+-]")
#: Every backslash escape CommonMark defines, but for the double quote and the backslash
#: (JSON and Python reprs inside a log use ``\"`` and ``\\``; a Markdown editor leaves both).
_PUNCTUATION = r"!#$%&'()*+,\-./:;<=>?@\[\]^_`{|}~"
_MARKDOWN_ESCAPE = regex.compile(r"\\([" + _PUNCTUATION + r"])")
#: The same in an input known to be Markdown-escaped: a doubled backslash too.
_MARKDOWN_ESCAPE_ALL = regex.compile(r"\\([" + _PUNCTUATION + r"\\])")
#: An HTML character reference: the named ones a log's text needs, or a numeric one.
_HTML_ENTITY = regex.compile(r"&(?:lt|gt|amp|quot|apos|nbsp|#[0-9]{1,6}|#[xX][0-9a-fA-F]{1,5});")

#: Bytes in an input's first lines that say it was escaped (see :func:`looks_escaped`).
_HEAD_MARKS = (
    b"\\[",
    b"\\]",
    b"\\_",
    b"\\`",
    b"\n\\#",
    b"\n\\-",
    b"&lt;",
    b"&gt;",
    b"&quot;",
    b"&#39;",
    b"&#x27;",
    b"&amp;",
)


def has_markdown_escape(s: str) -> bool:
    """True when ``s`` holds one of :data:`_MARKDOWN_MARK`'s escapes (a backslash before a
    bracket, an underscore, an asterisk or a backtick; before ``#``, ``>``, ``+``, ``-`` first
    on the line)."""
    return "\\" in s and _MARKDOWN_MARK.search(s) is not None


def unescape(s: str, markdown_input: bool = False) -> str:
    """``s`` with Markdown backslash escapes and HTML character references undone, when it
    holds one (:data:`_MARKDOWN_MARK`, :data:`_HTML_ENTITY`); otherwise ``s`` itself. With
    ``markdown_input`` (the input is known to be Markdown-escaped) every line is undone,
    doubled backslashes included.

    ``"\\[core.py:708\\] max\\_model\\_len"`` -> ``"[core.py:708] max_model_len"``;
    ``"&lt;frozen runpy&gt;"`` -> ``"<frozen runpy>"``. HTML is undone once (``&amp;lt;``
    becomes ``&lt;``), by :func:`html.unescape`."""
    if markdown_input:
        if "\\" in s:
            s = _MARKDOWN_ESCAPE_ALL.sub(r"\1", s)
    elif "\\" in s and _MARKDOWN_MARK.search(s):
        s = _MARKDOWN_ESCAPE.sub(r"\1", s)
    if "&" in s and _HTML_ENTITY.search(s):
        s = html.unescape(s)
    return s


def looks_escaped(head: bytes) -> bool:
    """True when an input's first bytes (``head``, a few KiB) hold a Markdown escape or an
    HTML character reference of :data:`_HEAD_MARKS`: the input is then read line by line
    (see the module docstring)."""
    return any(m in head for m in _HEAD_MARKS)
