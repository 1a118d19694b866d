"""A comparison (:class:`vllm_doctor.compare.Comparison`) as text, Markdown or JSON.

The same guards as the verdict's renderers (:mod:`.inert`): the comparison is made inert
first (no control, escape, bidi or invisible character, no line break inside a field, JSON-safe
numbers), the terminal view is built from rich ``Text`` parts (never markup), the Markdown view
puts log lines in fences and names in code spans (:func:`.markdown.code`) and escapes every
other field (:func:`.markdown.prose`), and each output passes :func:`.inert.clean_output`.
"""

from __future__ import annotations

import io
from typing import List

from .inert import clean_output, map_strings, one_line

FORMATS = ("text", "markdown", "json")

_OUTCOME_STYLE = {"failed": "bold red", "degraded": "bold yellow", "healthy": "bold green"}


def render_compare(comparison, fmt: str, color: bool = False) -> str:
    """Render ``comparison`` as ``text`` (rich; ANSI colours when ``color``), ``markdown`` (an
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
    return clean_output(_text(safe, color), sgr=color)


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


def _side_line(side) -> str:
    v = side.verdict
    what = "healthy" if side.outcome == "healthy" else f"{side.outcome}: {v.class_id} ({v.code})"
    of = f" of {side.runs}" if side.runs > 1 else ""
    return f"{side.source} run {side.run}{of}, {_reached(side)}, {what}"


def _version(comparison, role: str) -> str:
    row = next((r for r in comparison.rows if r.key == "vllm_version"), None)
    cell = getattr(row, role) if row is not None else None
    return f"vLLM {cell.value}" if cell is not None else "vLLM version not in the log"


# -- text -------------------------------------------------------------------------------------
def _text(c, color: bool) -> str:
    import shutil

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    con = Console(
        file=buf,
        force_terminal=color,
        no_color=not color,
        width=shutil.get_terminal_size().columns if color else 200,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=not color,
    )
    verdict = ("regression", "bold red") if c.regressed else ("no regression", "bold green")
    con.print(Text.assemble(verdict, " ", c.headline))
    for role in ("old", "new"):
        side = getattr(c, role)
        con.print(
            Text.assemble(
                (f"{role}: ", "dim"),
                (_side_line(side), _OUTCOME_STYLE.get(side.outcome, "")),
                (f" ({_version(c, role)})", "dim"),
            )
        )
    con.print()
    if c.differences:
        con.print(Text("What changed, what matters first:", style="bold"))
        for d in c.differences:
            con.print(
                Text.assemble(
                    f"{d.rank:>2}. ",
                    (f"[{d.category}] ", "dim"),
                    (d.title, "bold red" if d.regression else "bold"),
                )
            )
            if d.implies:
                con.print(Text.assemble("    ", d.implies))
            for e in d.evidence:
                line = Text.assemble("    ", (f"{e.side:<3} {e.source}:{e.line}", "dim"), " ", e.text)
                if e.note:
                    line.append(f" <- {e.note}", style="dim")
                con.print(line)
    else:
        con.print(Text("No difference that matters (thresholds: vllm_doctor/thresholds.py COMPARE_*).", style="dim"))
    con.print()
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
    con.print(table)
    con.print(Text("(:N is the line that printed the value)", style="dim"))
    con.print()
    for role in ("old", "new"):
        v = getattr(c, role).verdict
        con.print(
            Text.assemble(
                (f"{role} verdict: ", "dim"), (f"{v.class_id} ({v.code}, {v.severity})", "bold"), " ", v.title
            )
        )
        if v.first_remedy is not None:
            line = Text.assemble("    first remedy: ", v.first_remedy.action)
            if v.first_remedy.flag:
                line.append(" ")
                line.append(v.first_remedy.flag, style="bold")
            con.print(line)
    for n in c.notes:
        con.print(Text(f"note: {n}", style="italic"))
    return buf.getvalue()


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
        of = f" of {s.runs}" if s.runs > 1 else ""
        out.append(
            f"**{role.capitalize()}:** {code(s.source)} run {s.run}{of} · {prose(_version(c, role))} · "
            f"{prose(_reached(s))} · {prose(what)}  "
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
