"""An incident-ticket block: verdict first, key facts, evidence, remedies, what does not help.

Every piece of text that can come from a log is quoted so that no Markdown or HTML in it
takes effect where the ticket is rendered (GitHub, GitLab, Jira, chat):

* evidence sits in a fenced block whose fence is longer than any backtick run inside;
* source names and flags are code spans (:func:`code`), again with a delimiter longer
  than what they hold, and in table cells with ``|`` escaped (GFM splits cells on ``|``
  even inside a code span);
* everything else (titles, facts such as ``model`` and ``vllm_version``, remedies, notes)
  is escaped (:func:`prose`): Markdown punctuation with a
  backslash, ``<`` and ``&`` as HTML entities, mention (``@here``) and emoji (``:x:``)
  triggers defused, and a field that begins a list item cannot start a heading, quote,
  list or rule of its own.

The verdict reaching here is already inert (:mod:`.inert`): no control characters, no line
break inside a field.
"""

from __future__ import annotations

from typing import List

import regex

from .common import key_facts


def _longest_run(text: str, char: str = "`") -> int:
    return max((len(m) for m in regex.findall(regex.escape(char) + "+", text)), default=0)


def _fence(lines: List[str]) -> List[str]:
    """A fenced code block around ``lines`` (each already one line)."""
    body = "\n".join(lines)
    fence = "`" * max(3, _longest_run(body) + 1)
    return [fence + "text", body, fence]


def code(text: str, in_table: bool = False) -> str:
    """``text`` as an inline code span (CommonMark 6.1): literal, whatever it holds."""
    text = str(text)
    if not text:
        return ""
    ticks = "`" * (_longest_run(text) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    if in_table:
        text = text.replace("|", "\\|")
    return f"{ticks}{pad}{text}{pad}{ticks}"


# Characters escaped with a backslash wherever they are (CommonMark 2.4 allows escaping
# any ASCII punctuation): emphasis, code, links and images, tables, headings, HTML-ish,
# strikethrough, math, mentions.
_PROSE = regex.compile(
    r"[\\`*\[\]|#~$@]"
    r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"  # intraword _ (max_model_len) cannot emphasise
    r"|:(?=[A-Za-z0-9_+-]+:)"  # :emoji: shortcodes
)
# What would make a field that starts a line (a list item, a quote) a block of its own.
_BLOCK_START = regex.compile(r"^(\s*)(?:([-+>=])|([0-9]{1,9})([.)]))")


def prose(text: str, line_start: bool = False) -> str:
    """``text`` escaped for Markdown and HTML, still readable as plain text. With
    ``line_start`` (the text opens a list item or a quote) it also cannot open a block of its
    own (``- x``, ``> x``, ``1. x``)."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;")
    text = _PROSE.sub(lambda m: "\\" + m.group(), text)
    m = _BLOCK_START.match(text) if line_start else None
    if m:
        if m.group(2):
            text = m.group(1) + "\\" + text[m.end(1) :]
        else:
            text = m.group(1) + m.group(3) + "\\" + text[m.end(3) :]
    return text


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def render_markdown(verdict) -> str:
    """The verdict as a Markdown block for an incident ticket (see the module doc)."""
    p = verdict.primary
    out = [
        f"## vllm-doctor: {prose(verdict.primary_class)} ({prose(verdict.primary_code)})",
        "",
        f"**Verdict:** {prose(verdict.title)}  ",
        f"**Severity:** {prose(verdict.severity)}" + (f" · **Phase:** {prose(p.phase)}" if p else ""),
        "",
    ]
    facts = key_facts(verdict, p)
    if facts:
        out += ["| fact | value |", "|---|---|"]
        out += [f"| {prose(k)} | {prose(v)} |" for k, v in facts] + [""]
    if len(verdict.sources) > 1:
        out += ["| source | verdict | format | runs |", "|---|---|---|---|"]
        out += [
            f"| {code(s.name, in_table=True)} | {prose(s.primary_class or '')} | {prose(s.format)} | {s.runs} |"
            for s in verdict.sources
        ] + [""]
    shown = [f for f in verdict.findings if f.severity != "info"] + [
        f for f in verdict.findings if f.severity == "info"
    ]
    for f in shown:
        where = f" · {code(f.source)} run {f.run}" if len(verdict.sources) > 1 else ""
        out += [
            f"### {prose(f.code)} {prose(f.class_id)} ({prose(f.severity)}, {prose(f.phase)}{where}): {prose(f.title)}",
            "",
        ]
        if f.evidence:
            out += (
                ["Evidence:", ""]
                + _fence([f"{e.source}:{e.line}: {e.text}" + (f"   <- {e.note}" if e.note else "") for e in f.evidence])
                + [""]
            )
        if f.remedies:
            out.append("Remedies, in order:")
            out.append("")
            for r in f.remedies:
                line = f"{r.order}. {prose(r.action)}"
                if r.flag:
                    line += f" — {code(r.flag)}"
                if r.why:
                    line += f" ({prose(r.why)})"
                out.append(line)
            out.append("")
        if f.does_not_help:
            out += ["Does not help:", ""] + [f"- {prose(d, line_start=True)}" for d in f.does_not_help] + [""]
        for n in f.notes:
            out += [f"> {prose(n, line_start=True)}", ""]
    src = ", ".join(f"{code(s.name)} ({_n(s.lines, 'line')}, {_n(s.runs, 'run')})" for s in verdict.sources)
    out += ["---", f"vllm-doctor {prose(verdict.tool_version)} · schema {prose(verdict.schema_version)} · {src}", ""]
    return "\n".join(out)
