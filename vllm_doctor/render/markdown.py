"""An incident ticket: what happened, where and when, what to do first, and the proof.

Layout: a symptom title (``## Runtime OOM on GPU 0 (79.33 GiB) at 02-10 18:06:30``); the
verdict line (code, class, severity, confidence, source) and its one-line title; **Do this
first**; a summary table in words and units (source, host or pod, first and last incident
time from the log, vLLM version, model, GPU, the key facts); the stats of a runtime episode
as sparklines; the evidence clipped to the clauses that matter in a fenced block of
``source:line`` rows of at most :data:`TICKET_EVIDENCE_CHARS` characters (the lines in a
collapsed block below it when any was clipped, each as the verdict keeps it: whole up to
600 characters, see :func:`full_lines_summary`);
numbered remedies with their flags; what does not help; the other findings; the notes on
the input (what was not read: sources[].notes, unreadable inputs); a footer with the tool's
name and version. Sources are named as given on the command line, an absolute
path by its file name only (:func:`~.names.display_source`).

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

The only HTML the ticket holds is its own ``<details>``/``<summary>`` around the full lines.
The verdict reaching here is already inert (:mod:`.inert`): no control characters, no line
break inside a field.
"""

from __future__ import annotations

from typing import List

import regex

from .evidence import anchors_for, clip, evidence_rows, incident_times, verdict_times
from .facts import context_rows, fact_rows
from .names import display_source, why_parts
from .series import episode, episode_span, point_unit, series_rows
from .titles import symptom_title

#: Characters of an evidence row in the ticket's fenced block (``source:line``, time, text,
#: note; the line as the verdict keeps it is in the collapsed block below)...
TICKET_EVIDENCE_CHARS = 300
#: ... of which the line's own text keeps at least this many, however long the source's name.
TICKET_EVIDENCE_MIN = 120


def full_lines_summary() -> str:
    """What the collapsed block of log lines holds, said as it is: each line as the verdict
    keeps it, whole up to :data:`~vllm_doctor.rules.rule.MAX_EVIDENCE_CHARS` characters
    (a longer one keeps its head and the message, ``...`` marking the cut)."""
    from ..limits import MAX_EVIDENCE_CHARS

    return f"The log lines (whole up to {MAX_EVIDENCE_CHARS} characters; a longer line keeps its head and its message)"


#: Width of the ticket's sparklines.
TICKET_SPARK_WIDTH = 60
#: The distribution's name, as the footer and ``--version`` give it.
TOOL_NAME = "vllm-log-doctor"


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


_LOG_TIME = regex.compile(r"^[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?$")


def _time(text: str) -> str:
    """A log time (``MM-DD HH:MM:SS``) as it reads; anything else escaped as prose."""
    return text if _LOG_TIME.match(text) else prose(text)


def _time_prose(text: str) -> str:
    """Prose in which log times (``05-19 10:13:11``) stay as they read: their colons are not
    an emoji code, and they are made only of digits, ``-``, ``:`` and spaces."""
    parts = regex.split(r"((?:[0-9]{2}-[0-9]{2} )?[0-9]{2}:[0-9]{2}:[0-9]{2})", text)
    return "".join(p if i % 2 else prose(p) for i, p in enumerate(parts))


def _cell(text: str) -> str:
    """Prose for a table cell (a ``|`` is escaped by :func:`prose` already)."""
    return prose(text)


def _summary_table(verdict) -> List[str]:
    p = verdict.primary
    rows: List[List[str]] = []
    if p is not None:
        runs = sum(1 for r in verdict.runs if r.source == p.source)
        rows.append(["Source", code(display_source(p.source), in_table=True) + (f" run {p.run}" if runs > 1 else "")])
        first, last = verdict_times(verdict)
        if first:
            rows.append(["First incident", _time(first)])
        if last and last != first:
            rows.append(["Last incident", _time(last)])
    elif len(verdict.sources) == 1:
        rows.append(["Source", code(display_source(verdict.sources[0].name), in_table=True)])
    if p is not None or verdict.primary_class != "unknown":  # nothing judged: no facts
        rows += [[prose(k), _cell(val)] for k, val in context_rows(verdict, p) + fact_rows(verdict, p)]
    if not rows:
        return []
    return ["| Summary | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows] + [""]


def _sparklines(verdict, f) -> List[str]:
    points = episode(verdict, f)
    rows = series_rows(points, TICKET_SPARK_WIDTH) if points else []
    if not rows:
        return []
    width = max(len(r[0]) for r in rows) + 1
    body = [f"{label.ljust(width)}{line} {rng}" for label, line, rng in rows]
    return [f"Stats over the episode ({_time_prose(episode_span(points, point_unit(f)))}):", ""] + _fence(body) + [""]


def _evidence(f) -> List[str]:
    rows = evidence_rows(f)
    if not rows:
        return []
    shown, full, clipped = [], [], False
    for r in rows:
        where = f"{display_source(r.source)}" + (f" scrape {r.line}" if r.kind == "metric" else f":{r.line}")
        when = f"  {r.time}" if r.time else ""
        note = r.note
        if r.also:
            note = "; ".join(
                x for x in (note, f"also line{'s' if len(r.also) > 1 else ''} {', '.join(map(str, r.also))}") if x
            )
        tail = f"   <- {note}" if note else ""
        budget = max(TICKET_EVIDENCE_CHARS - len(where) - len(when) - 2 - len(tail), TICKET_EVIDENCE_MIN)
        text, cut = clip(r.text, budget, anchors_for(r.note, f.facts, r.text))
        clipped |= cut
        shown.append(f"{where}{when}  {text}{tail}")
        full.append(f"{where}  {r.text}")
    out = ["Evidence:", ""] + _fence(shown) + [""]
    if clipped:
        out += [f"<details><summary>{full_lines_summary()}</summary>", ""] + _fence(full) + ["", "</details>", ""]
    return out


def _remedies(f, numbered_title: str = "Remedies, in order:") -> List[str]:
    from ..superseded import superseded_line

    out: List[str] = []
    instead = superseded_line(f)
    if instead is not None:  # acted on: its remedies (and their old numbers) are no to-do
        return [f"> {prose(instead, line_start=True)}", ""] + [
            line for n in f.notes for line in (f"> {prose(n, line_start=True)}", "")
        ]
    if f.remedies:
        out += [numbered_title, ""]
        for r in f.remedies:
            line = f"{r.order}. "
            if r.flag:
                line += f"{code(r.flag)}: "
            action, why = why_parts(r.action, r.why)
            line += prose(action)
            if why:
                line += f" ({prose(why)})"
            out.append(line)
        out.append("")
    if f.does_not_help:
        out += ["Does not help:", ""] + [f"- {prose(d, line_start=True)}" for d in f.does_not_help] + [""]
    for n in f.notes:
        out += [f"> {prose(n, line_start=True)}", ""]
    return out


def _finding(verdict, f) -> List[str]:
    first, _ = incident_times(f, verdict)
    when = f" at {_time(first)}" if first else ""
    out = [
        f"### {prose(f.code)} {prose(f.class_id)} ({prose(f.severity)}, {prose(f.phase)}{when}): {prose(f.title)}",
        "",
        f"{prose(f.confidence).capitalize()} confidence · {code(display_source(f.source))} run {f.run}"
        + (f" · superseded by run {f.superseded['run']}" if f.superseded else ""),
        "",
    ]
    return out + _sparklines(verdict, f) + _evidence(f) + _remedies(f)


def _source_notes(verdict) -> List[str]:
    """What of the input was not read, as the text view's sources block says it: an input
    that could not be read (its error) and every source's notes (skipped scrape files,
    failed or interrupted scrapes, ignored samples, lines whose numbers cannot be read,
    the formats tried), one list item each, named by source."""
    items = [f"- {code(display_source(s.name))}: not read: {prose(s.error)}" for s in verdict.sources if s.error]
    items += [f"- {code(display_source(s.name))}: {prose(n)}" for s in verdict.sources for n in s.notes]
    return ["Notes on the input:", ""] + items + [""] if items else []


def render_markdown(verdict) -> str:
    """The verdict as a Markdown incident ticket (see the module doc)."""
    p = verdict.primary
    out = [f"## {_time_prose(symptom_title(verdict))}", ""]
    if p is not None:
        out += [
            f"**{prose(p.code)} {prose(p.class_id)}** ({prose(p.severity)}, {prose(p.confidence)} confidence, "
            f"{prose(p.phase)}): {prose(verdict.title)} · {code(display_source(p.source))}",
            "",
        ]
        if p.remedies:
            r = p.remedies[0]
            first = (f"{code(r.flag)}: " if r.flag else "") + prose(r.action)
            out += [f"**Do this first:** {first}", ""]
    else:
        from .text import headline_meta

        out += [
            f"**{prose(verdict.primary_code)} {prose(verdict.primary_class)}** ({prose(headline_meta(verdict))}): "
            f"{prose(verdict.title)}",
            "",
        ]
    out += _summary_table(verdict)
    if len(verdict.sources) > 1:
        out += ["| Source | Verdict | Format | Runs |", "|---|---|---|---|"]
        out += [
            f"| {code(display_source(s.name), in_table=True)} | {prose(s.primary_class or '')} | {prose(s.format)} | {s.runs} |"
            for s in verdict.sources
        ] + [""]
    if p is not None:
        out += _sparklines(verdict, p) + _evidence(p) + _remedies(p)
    others = [f for f in verdict.findings if f is not p]
    others = sorted(others, key=lambda f: (f.superseded is not None, f.severity == "info"))
    for f in others:
        out += _finding(verdict, f)
    out += _source_notes(verdict)
    src = ", ".join(
        f"{code(display_source(s.name))} ({_n(s.lines, 'line')}, {_n(s.runs, 'run')})" for s in verdict.sources
    )
    out += [
        "---",
        f"{TOOL_NAME} {prose(verdict.tool_version)} (`vllm-doctor diagnose`) · schema {prose(verdict.schema_version)} · {src}",
        "",
    ]
    return "\n".join(out)


def render_live(finding) -> str:
    """One finding as ``--follow --format markdown`` prints it when it is certain."""
    first, _ = incident_times(finding)
    when = f"{_time(first)} " if first else ""
    out = [
        f"### {when}{prose(finding.code)} {prose(finding.class_id)} ({prose(finding.severity)}, "
        f"{prose(finding.confidence)} confidence): {prose(finding.title)}",
        "",
        f"Source: {code(display_source(finding.source))} run {finding.run}",
        "",
    ]
    return "\n".join(out + _evidence(finding) + _remedies(finding))


def render_follow_summary(verdict, lines: int = 0) -> str:
    """The end of ``--follow --format markdown``: the symptom title, the verdict line and a
    table of the findings (time, code, class, source, first remedy)."""
    p = verdict.primary
    out = [f"## {_time_prose(symptom_title(verdict))}", ""]
    head = f"**{prose(verdict.primary_code)} {prose(verdict.primary_class)}** ({prose(verdict.severity)}): "
    out += [head + prose(verdict.title) + (f" · {code(display_source(p.source))}" if p else ""), ""]
    shown = [f for f in verdict.findings if f.severity != "info"]
    if shown:
        out += ["| Time | Code | Class | Source | Do this first |", "|---|---|---|---|---|"]
        for f in shown:
            t, _ = incident_times(f, verdict)
            r = f.remedies[0] if f.remedies else None
            first = (code(r.flag, in_table=True) if r.flag else prose(r.action)) if r else ""
            if f.superseded:
                first = prose(f"nothing: superseded by run {f.superseded['run']}")
            out.append(
                f"| {_time(t) if t else ''} | {prose(f.code)} | {prose(f.class_id)} | "
                f"{code(display_source(f.source), in_table=True)} | {first} |"
            )
        out.append("")
    out += ["---", f"{TOOL_NAME} {prose(verdict.tool_version)} · followed {lines} lines", ""]
    return "\n".join(out)
