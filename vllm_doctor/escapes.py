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

* **HTML rendering.** A log that reached us as a rendered page (GitHub's API ``body_html``, a
  mail client's HTML part, a web page's source) holds its lines inside tags:
  ``<pre><code class="language-text">torch.OutOfMemoryError``, ``</code></pre><hr><h1>...``,
  ``<p>...</p><p>...</p>`` on one line. When an input's first lines show such tags
  (:func:`has_html_tags`), each line is cut at its block tags into the lines they stand for
  and its other tags are dropped (:func:`html_lines`), before the entities are undone.

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
    b"<pre",
    b"</pre>",
    b"<code",
    b"</p>",
    b"<br>",
    b"<br/>",
)

#: Tags that only an HTML rendering holds, one of which on a first line makes the input one
#: (:func:`has_html_tags`): a plain log never prints them (a prompt a request log quotes is
#: cut short and its angle brackets are the prompt's; a traceback's ``<module>`` is none).
_HTML_MARK = regex.compile(
    r"</?(?:pre|code|p|br|hr|div|h[1-6]|li|ul|ol|blockquote|table|tr|td)\b[^<>]{0,200}>", regex.I
)
#: A tag that ends a line of the rendered text (a block's edge, a line break), or starts one.
_HTML_BLOCK = regex.compile(
    r"</?(?:pre|p|br|hr|div|h[1-6]|li|ul|ol|blockquote|table|thead|tbody|tr|td|th|details|summary)\b[^<>]{0,200}>",
    regex.I,
)
#: Block tags that end a line, not a paragraph: a ``<br>``, a mail client's ``<div>`` per line,
#: a list item, a table row or cell.
_HTML_LINE_TAG = regex.compile(r"</?(?:br|div|li|tr|td|th)\b", regex.I)
_HTML_BLOCK_SPLIT = regex.compile("(" + _HTML_BLOCK.pattern + ")", regex.I)
#: Any other tag (inline: ``<code>``, ``<span class=...>``, ``<a href=...>``), and a comment.
_HTML_TAG = regex.compile(r"</?[A-Za-z][\w-]{0,20}(?:\s[^<>]{0,400})?/?>|<!--.{0,400}?-->", regex.S)


def has_html_tags(s: str) -> bool:
    """True when ``s`` holds one of :data:`_HTML_MARK`'s tags (``<pre>``, ``</p>``, ``<br>``...)."""
    return "<" in s and _HTML_MARK.search(s) is not None


def html_lines(s: str) -> list:
    """The lines an HTML rendering's line ``s`` stands for: a ``<br>`` ends a line (a ``<br>``
    alone is a blank one), as a ``<div>``, a list item or a table row does; any other block tag (``</pre>``, ``<hr>``, ``<h1>``, ``</p>``) ends a
    paragraph, so a blank line stands between the text before it and the text after it, as the
    rendering shows (a block the line ends in leaves one after it: the code block a message was
    in is over); every other tag is dropped; entities are left for :func:`unescape`
    (``&lt;module&gt;`` is text, not a tag). A line with no tag is ``[s]``.

    ``'</code></pre><hr><h1>Initial</h1><p>With the runtime</p>'`` -> ``['Initial', '', 'With the
    runtime', '']``; ``'<pre><code class="language-text">torch.OutOfMemoryError'`` ->
    ``['torch.OutOfMemoryError']``; ``'line<br>'`` -> ``['line']``."""
    if "<" not in s:
        return [s]
    tokens = _HTML_BLOCK_SPLIT.split(s)
    if len(tokens) == 1:
        return [_HTML_TAG.sub("", s)]
    out: list = []
    cur, paragraph = "", False
    for i, token in enumerate(tokens):
        if i % 2 == 0:  # text between two block tags
            text = _HTML_TAG.sub("", token)
            if text.strip() and paragraph and out:
                out.append("")
            if text.strip():
                paragraph = False
            cur += text
        elif _HTML_LINE_TAG.match(token):  # a line's end, not a paragraph's
            if cur.strip() or token[1:3].lower() == "br":
                out.append(cur)  # a <br> alone is a blank line
            cur = ""
        elif cur.strip():
            out.append(cur)
            cur, paragraph = "", True
        else:
            cur, paragraph = "", paragraph or bool(out)
    if cur.strip() or not out:
        out.append(cur)
    elif paragraph and out[-1] != "":
        out.append("")
    return out


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
