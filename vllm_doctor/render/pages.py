"""A rule's documentation page (``vllm-doctor explain``) re-wrapped to the terminal."""

from __future__ import annotations

from typing import List, Tuple

import regex

_ITEM = regex.compile(r"^(?:[*-]|[0-9]{1,2}[.)])\s+")
# A word cut at a hyphen at the end of a source line (``out-of-``), not a dash (`` - ``).
_HYPHENATED = regex.compile(r"\p{L}-$")


def rewrap(page: str, width: int) -> str:
    """A rule's documentation page (``explain``) re-wrapped to ``width`` columns without
    breaking a word: paragraphs and list items (``*``, ``-``, ``1.``) are joined and filled
    again, each continuation line indented under its item's text; headings, blank lines and
    indentation stay. A source line continues the block above only at that block's
    continuation column (a line back at the list's own column is a new paragraph); a line
    ending in ``:`` ends its block only as a heading (column 0) or before a command in
    backquotes; a word hyphenated across two source lines (``out-of-`` / ``memory``) is
    joined whole."""
    import textwrap

    blocks: List[Tuple[str, str, List[str]]] = []  # (first indent, later indent, words)
    for line in page.splitlines():
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if not stripped:
            blocks.append(("", "", []))
            continue
        item = _ITEM.match(stripped)
        last = blocks[-1] if blocks else None
        continues = (
            last is not None
            and last[2]
            and not item
            and indent  # a heading at column 0 starts its own block
            and last[0]  # and so does the line below a heading
            and len(indent) == len(last[1])
            and not (last[2][-1].endswith(":") and stripped.startswith("`"))
        )
        if continues and _HYPHENATED.search(last[2][-1]) and stripped[:1].isalpha():
            last[2][-1] += stripped.split(" ", 1)[0]
            rest = stripped.split(" ", 1)[1:]
            last[2].extend(rest)
        elif continues:
            last[2].append(stripped)
        else:
            later = indent + " " * (item.end() if item else 0)
            blocks.append((indent, later, [stripped]))
    out = []
    for first, later, words in blocks:
        if not words:
            out.append("")
            continue
        out.append(
            textwrap.fill(
                " ".join(words),
                width,
                initial_indent=first,
                subsequent_indent=later,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(out)
