"""The terminal view (rich): the verdict, the evidence with source:line, remedies in order."""

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
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    buf = io.StringIO()
    # On a terminal rich wraps to its width; in a pipe or file lines stay whole for pasting.
    import shutil

    con = Console(
        file=buf,
        force_terminal=color,
        no_color=not color,
        width=width or (shutil.get_terminal_size().columns if color else 200),
        highlight=False,
        soft_wrap=not color,
    )
    style = _STYLE.get(verdict.severity, "bold")
    con.print(
        f"[{style}]{escape(verdict.primary_class)} ({verdict.primary_code}, {verdict.severity})[/] "
        f"{escape(verdict.title)}"
    )
    p = verdict.primary
    facts = key_facts(verdict, p)
    if facts:
        t = Table(show_header=False, box=None, padding=(0, 1))
        for k, v in facts:
            t.add_row(f"[dim]{k}[/]", escape(v))
        con.print(t)
    for f in verdict.findings:
        con.print()
        con.print(
            f"[{_STYLE.get(f.severity, 'bold')}]{f.code} {escape(f.class_id)}[/] [dim]({f.severity}, {f.phase}, "
            f"{escape(f.source)} run {f.run})[/] {escape(f.title)}"
        )
        for e in f.evidence:
            note = f" [dim]<- {escape(e.note)}[/]" if e.note else ""
            con.print(f"  [dim]{escape(e.source)}:{e.line}[/] {escape(e.text)}{note}")
        for r in f.remedies:
            flag = f" [bold]{escape(r.flag)}[/]" if r.flag else ""
            why = f" [dim]({escape(r.why)})[/]" if r.why else ""
            con.print(f"  {r.order}. {escape(r.action)}{flag}{why}")
        for d in f.does_not_help:
            con.print(f"  [dim]does not help:[/] {escape(d)}")
        for n in f.notes:
            con.print(f"  [italic]{escape(n)}[/]")
    con.print()
    for s in verdict.sources:
        if s.error:
            con.print(f"[dim]{escape(s.name)}: not read: {escape(s.error)}[/]")
            continue
        runs = f", {s.runs} server run" + ("" if s.runs == 1 else "s") if s.vllm_output else ""
        lines = f"{s.lines} line{'' if s.lines == 1 else 's'}"
        if s.input and s.input != s.name:
            lines = f"part of {s.input} ({lines})"
        con.print(
            f"[dim]{escape(s.name)}: {escape(lines)}, {s.recognised} recognised"
            f"{runs}, verdict {s.primary_class}"
            + (f", wrappers: {', '.join(s.wrappers)}" if s.wrappers else "")
            + "[/]"
        )
    return buf.getvalue()
