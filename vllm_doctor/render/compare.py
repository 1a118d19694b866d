"""A comparison (:class:`vllm_doctor.compare.Comparison`) as text, Markdown or JSON.

The same guards as the verdict's renderers (:mod:`.inert`): the comparison is made inert
first (no control, escape, bidi or invisible character, no line break inside a field, JSON-safe
numbers), the terminal view is built from rich ``Text`` parts (never markup), the Markdown view
puts log lines in fences and names in code spans (:func:`.markdown.code`) and escapes every
other field (:func:`.markdown.prose`), and each output passes :func:`.inert.clean_output`.
"""

from __future__ import annotations

from typing import List, Tuple

from ..limits import MAX_EVIDENCE_CHARS
from .inert import clean_output, map_strings, one_line

FORMATS = ("text", "markdown", "json")

_OUTCOME_STYLE = {"failed": "bold red", "degraded": "bold yellow", "healthy": "bold green"}


def render_compare(comparison, fmt: str, color: bool = False, width: int = 0) -> str:
    """Render ``comparison`` as ``text`` (rich; ANSI colours when ``color``; wrapped to ``width``
    columns, 0 for a pipe's 100), ``markdown`` (an
    incident ticket) or ``json`` (``compare.schema.json``). Raises ValueError for another
    ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; one of {', '.join(FORMATS)}")
    safe = map_strings(comparison, one_line)
    if fmt == "json":
        from .json import dumps

        return clean_output(dumps(safe.to_dict(), indent=2) + "\n")
    if fmt == "markdown":
        return clean_output(_markdown(safe))
    return clean_output(_text(safe, color, width), sgr=color)


def _cell(cell, unit: str) -> str:
    from ..units import show

    if cell is None:
        return "-"
    return show(cell.value, unit)


def _change(row) -> str:
    if row.change_pct is not None and row.change_pct != 0:
        return f"{row.change_pct:+.0f} %"
    if row.differs:
        return "changed"
    return ""


def _reached(side) -> str:
    return "no phase marker in the log" if side.phase_reached == "unknown" else f"reached {side.phase_reached}"


def _version(comparison, role: str) -> str:
    row = next((r for r in comparison.rows if r.key == "vllm_version"), None)
    cell = getattr(row, role) if row is not None else None
    return f"vLLM {cell.value}" if cell is not None else "vLLM version not in the log"


# -- text -------------------------------------------------------------------------------------
#: Screen lines a compared log line may take the first time it is quoted (clipped past that).
EVIDENCE_LINES = 3


def _side_parts(side) -> Tuple[str, str, str]:
    """Which run of which input a side is, as ``--runs`` counts them, in three parts (before,
    the source's name, after): ``run 2 of 2 in`` ``x.log [vllm[200]@<host-1>]`` (the key names
    the pod or journald process), or the name and ``(its only run)``."""
    if side.runs > 1:
        return f"run {side.number} of {side.runs} in", side.source, ""
    return "", side.source, "(its only run)"


def _side_label(side) -> str:
    """:func:`_side_parts` as one string: ``run 2 of 2 in x.log [vllm[200]@<host-1>]``."""
    return " ".join(x for x in _side_parts(side) if x)


def _side_line(side) -> str:
    v = side.verdict
    what = "healthy" if side.outcome == "healthy" else f"{side.outcome}: {v.class_id} ({v.code})"
    return f"{_side_label(side)}, {_reached(side)}, {what}"


def _anchors(d, e) -> List[str]:
    """What a clipped line must keep: the setting its note names, else the values compared."""
    from .evidence import anchors_for, is_context

    if is_context(e.note):
        return anchors_for(e.note)
    out = []
    for value in (d.old, d.new):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        out += [f"{value:.2f}", f"{value:g}"] if isinstance(value, float) else [str(value), f"{value:,}"]
    return out


def _where(e, sides) -> str:
    """``:14`` for a line of the side's own source (named in its ``old:`` / ``new:`` line),
    ``x.log [pod/b/c]:14`` for a line of another source."""
    from .names import short_source

    side = sides.get(e.side)
    return f":{e.line}" if side is not None and e.source == side.source else f"{short_source(e.source)}:{e.line}"


def _text(c, color: bool, width: int) -> str:
    """The comparison for a terminal ``width`` columns wide, wrapped with hanging indents as
    ``diagnose``'s view is (:class:`.text._View`): a log line quoted the first time clipped to
    the clauses that matter (:func:`.evidence.clip`, :data:`.names.CLIP` marking each gap),
    and named by side and line number only where it comes again."""
    from rich.table import Table
    from rich.text import Text

    from .evidence import clip
    from .names import CLIP
    from .text import PIPE_WIDTH, _View

    v = _View(width or PIPE_WIDTH, color)
    verdict = ("regression", "bold red") if c.regressed else ("no regression", "bold green")
    v.hang(Text.assemble(verdict, ": ", c.headline), indent=2)
    sides = {}
    for role in ("old", "new"):
        side = getattr(c, role)
        sides[role] = side
        v.hang(
            Text.assemble((_side_line(side), _OUTCOME_STYLE.get(side.outcome, "")), (f" ({_version(c, role)})", "dim")),
            indent=5,
            prefix=Text(f"{role}:", style="dim"),
        )
    v.blank()
    clipped = False
    if c.differences:
        v.add_line(Text("What changed, what matters first:", style="bold"))
        quoted = {}  # (side, source, line) -> the rank of the difference that quoted it
        num_w = max((len(_where(e, sides)) for d in c.differences for e in d.evidence), default=0)
        for d in c.differences:
            title = Text.assemble((f"[{d.category}] ", "dim"), (d.title, "bold red" if d.regression else "bold"))
            v.hang(title, indent=4, prefix=Text(f"{d.rank:>2}."), lead=0)
            if d.implies:
                v.hang(Text(d.implies), indent=4, lead=4)
            for e in d.evidence:
                prefix = Text(f"{e.side:<3} {_where(e, sides).rjust(num_w)}", style="dim")
                indent = 4 + prefix.cell_len + 1
                tail = Text(f"\u2190 {e.note}", style="dim") if e.note else None
                key = (e.side, e.source, e.line)
                if key in quoted:
                    body = Text(f"(the line quoted under {quoted[key]}.)", style="dim")
                else:
                    quoted[key] = d.rank
                    avail = max(v.width - indent, 10)
                    budget = EVIDENCE_LINES * avail - (tail.cell_len + 1 if tail is not None else 0) - 2
                    text, cut = clip(e.text, budget, _anchors(d, e))
                    clipped |= cut
                    body = Text(text)
                v.hang(body, indent=indent, prefix=prefix, lead=4, tail=tail)
    else:
        v.hang(Text("No difference that matters (thresholds: vllm_doctor/thresholds.py COMPARE_*).", style="dim"))
    v.blank()
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    table.add_column("side by side")
    table.add_column("old")
    table.add_column("new")
    table.add_column("change")
    for r in c.rows:
        cells = []
        for cell in (r.old, r.new):
            t = Text(_cell(cell, r.unit))
            if cell is not None and cell.line is not None:
                t.append(f" :{cell.line}", style="dim")
            cells.append(t)
        style = "bold" if r.differs else ""
        table.add_row(Text(r.label, style="dim" if not r.differs else ""), *cells, Text(_change(r), style=style))
    for segments in v.con.render_lines(table, v.con.options.update(width=v.width), pad=False):
        v.add_line(Text.assemble(*((s.text, s.style) for s in segments if not s.control)))
    v.hang(Text("(:N is the line that printed the value)", style="dim"))
    v.blank()
    for role in ("old", "new"):
        sv = getattr(c, role).verdict
        v.hang(
            Text.assemble((f"{sv.class_id} ({sv.code}, {sv.severity})", "bold"), ": ", sv.title),
            indent=4,
            prefix=Text(f"{role} verdict:", style="dim"),
        )
        r = sv.first_remedy
        if r is not None:
            body = Text()
            if r.flag:
                body.append(r.flag, style="bold")
                body.append(" \u2014 ")
            body.append(r.action)
            v.hang(body, indent=6, prefix=Text("first remedy:", style="dim"), lead=4)
    for n in c.notes:
        v.hang(Text(n, style="italic"), indent=6, prefix=Text("note:", style="dim"))
    if clipped:
        v.hang(
            Text(
                f"{CLIP} = text left out of a long line (--format json or markdown has it,"
                f" whole up to {MAX_EVIDENCE_CHARS} characters)",
                style="dim",
            ),
            indent=2,
        )
    return v.render() + "\n"


# -- markdown ---------------------------------------------------------------------------------
def _fence(lines: List[str]) -> List[str]:
    """A fenced block around ``lines``: the fence is longer than any backtick run inside."""
    body = "\n".join(lines)
    run, best = 0, 0
    for ch in body:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    fence = "`" * max(3, best + 1)
    return [fence + "text", body, fence]


def _markdown(c) -> str:
    from .markdown import code, prose

    regress = "**Regression:** yes (exit 1)" if c.regressed else "**Regression:** no (exit 0)"
    out: List[str] = [f"## vllm-doctor compare: {prose(c.headline)}", ""]
    for role in ("old", "new"):
        s = getattr(c, role)
        v = s.verdict
        what = "healthy" if s.outcome == "healthy" else f"{s.outcome}: {v.class_id} ({v.code})"
        before, name, after = _side_parts(s)
        label = " ".join(x for x in (prose(before), code(name), prose(after)) if x)
        out.append(
            f"**{role.capitalize()}:** {label} · {prose(_version(c, role))} · {prose(_reached(s))} · {prose(what)}  "
        )
    out += [regress, ""]
    if c.differences:
        out += ["### What changed, what matters first", ""]
        for d in c.differences:
            head = f"{d.rank}. **{prose(d.title)}** ({prose(d.category)})"
            if d.implies:
                head += f" — {prose(d.implies)}"
            out.append(head)
            if d.evidence:
                lines = [
                    f"{e.side:<3} {e.source}:{e.line}: {e.text}" + (f"   <- {e.note}" if e.note else "")
                    for e in d.evidence
                ]
                pad = " " * len(f"{d.rank}. ")  # the list item's content column
                out += [""] + [pad + x for block in _fence(lines) for x in block.split("\n")]
            out.append("")
    else:
        out += ["No difference that matters.", ""]
    out += ["### Side by side", "", "| | old | new | change |", "|---|---|---|---|"]
    for r in c.rows:
        cells = []
        for cell in (r.old, r.new):
            text = prose(_cell(cell, r.unit))
            if cell is not None and cell.line is not None:
                text += f" (line {cell.line})"
            cells.append(text)
        label = f"**{prose(r.label)}**" if r.differs else prose(r.label)
        out.append(f"| {label} | {cells[0]} | {cells[1]} | {prose(_change(r))} |")
    out += ["", "### Verdicts", ""]
    for role in ("old", "new"):
        v = getattr(c, role).verdict
        line = (
            f"- **{role.capitalize()}:** {prose(v.class_id)} ({prose(v.code)}, {prose(v.severity)}): {prose(v.title)}"
        )
        if v.first_remedy is not None:
            line += f" — first remedy: {prose(v.first_remedy.action)}"
            if v.first_remedy.flag:
                line += f" — {code(v.first_remedy.flag)}"
        out.append(line)
    out.append("")
    for n in c.notes:
        out += [f"> {prose(n, line_start=True)}", ""]
    out += ["---", f"vllm-doctor {prose(c.tool_version)} · compare schema {prose(c.schema_version)}", ""]
    return "\n".join(out)
