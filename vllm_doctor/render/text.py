"""The terminal view (rich): the verdict, the evidence with source:line, remedies in order.

Styled text is built from parts (``Text.assemble``), never by putting log text into
rich markup: the console has markup, emoji codes (``:smile:``) and highlighting off, so a
log line prints exactly as the (already inert, see :mod:`.inert`) verdict holds it.
"""

from __future__ import annotations

import io

from .common import key_facts

_STYLE = {
    "critical": "bold red",
    "warning": "bold yellow",
    "info": "cyan",
    "ok": "bold green",
    "unknown": "bold magenta",
}


def render_text(verdict, color: bool = False, width: int = 0) -> str:
    """Render for a terminal; ``color`` adds styles. Lines are not hard-wrapped, so a
    pasted verdict keeps each evidence line whole."""
    import shutil

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    # On a terminal rich wraps to its width; in a pipe or file lines stay whole for pasting.
    con = Console(
        file=buf,
        force_terminal=color,
        no_color=not color,
        width=width or (shutil.get_terminal_size().columns if color else 200),
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=not color,
    )
    style = _STYLE.get(verdict.severity, "bold")
    con.print(
        Text.assemble(
            (f"{verdict.primary_class} ({verdict.primary_code}, {verdict.severity})", style), " ", verdict.title
        )
    )
    p = verdict.primary
    facts = key_facts(verdict, p)
    if facts:
        t = Table(show_header=False, box=None, padding=(0, 1))
        for k, v in facts:
            t.add_row(Text(k, style="dim"), Text(v))
        con.print(t)
    for f in verdict.findings:
        con.print()
        con.print(
            Text.assemble(
                (f"{f.code} {f.class_id}", _STYLE.get(f.severity, "bold")),
                " ",
                (f"({f.severity}, {f.phase}, {f.source} run {f.run})", "dim"),
                " ",
                f.title,
            )
        )
        for e in f.evidence:
            line = Text.assemble("  ", (f"{e.source}:{e.line}", "dim"), " ", e.text)
            if e.note:
                line.append(" ")
                line.append(f"<- {e.note}", style="dim")
            con.print(line)
        for r in f.remedies:
            line = Text.assemble(f"  {r.order}. ", r.action)
            if r.flag:
                line.append(" ")
                line.append(r.flag, style="bold")
            if r.why:
                line.append(" ")
                line.append(f"({r.why})", style="dim")
            con.print(line)
        for d in f.does_not_help:
            con.print(Text.assemble("  ", ("does not help:", "dim"), " ", d))
        for n in f.notes:
            con.print(Text.assemble("  ", (n, "italic")))
    con.print()
    for s in verdict.sources:
        if s.error:
            con.print(Text(f"{s.name}: not read: {s.error}", style="dim"))
            continue
        runs = f", {s.runs} server run" + ("" if s.runs == 1 else "s") if s.vllm_output else ""
        lines = f"{s.lines} line{'' if s.lines == 1 else 's'}"
        if s.input and s.input != s.name:
            lines = f"part of {s.input} ({lines})"
        wrappers = f", wrappers: {', '.join(s.wrappers)}" if s.wrappers else ""
        con.print(
            Text(
                f"{s.name}: {lines}, {s.recognised} recognised{runs}, verdict {s.primary_class}{wrappers}", style="dim"
            )
        )
    return buf.getvalue()
