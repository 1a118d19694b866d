"""Renderers: a verdict in, text out. ``json`` never imports rich (fast start for scripts).

Whatever the format, the verdict is made inert first (:mod:`.inert`: no terminal escape,
control, bidi or invisible character, no line break inside a field, JSON-safe numbers) and
the output passes a last :func:`.inert.clean_output`; each renderer then quotes log text
the way its format needs (rich ``Text`` parts, Markdown code spans and escapes, JSON).
"""

from __future__ import annotations

from .inert import clean_output, inert_verdict

FORMATS = ("text", "markdown", "json")


def render(verdict, fmt: str, color: bool = False, width: int = 0, height: int = 0) -> str:
    """Render ``verdict`` (a :class:`~vllm_doctor.verdict.Verdict`) as ``text`` (rich; ANSI
    colours when ``color``; wrapped to ``width`` columns, 0 for a pipe's 100; a recap line
    when longer than ``height`` lines), ``markdown`` (an incident ticket) or ``json`` (the
    schema of ``verdict.schema.json``). Raises ValueError for another ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; one of {', '.join(FORMATS)}")
    safe = inert_verdict(verdict)
    if fmt == "json":
        from .json import render_json

        return clean_output(render_json(safe))
    from .titles import not_checked

    safe = not_checked(safe)  # --select that found nothing: "not checked", never "healthy"
    if fmt == "markdown":
        from .markdown import render_markdown

        return clean_output(render_markdown(safe))
    from .text import render_text

    return clean_output(render_text(safe, color=color, width=width, height=height), sgr=color)


def chart(verdict, fmt: str = "svg") -> bytes:
    """The stats chart of ``verdict`` (inert first) as ``svg`` or ``png`` bytes; see
    :mod:`.plot` (raises its ``PlotError`` / ``NothingToPlot``)."""
    from .plot import render_plot

    return render_plot(inert_verdict(verdict), fmt)


def render_live(finding, fmt: str, color: bool = False, width: int = 0) -> str:
    """One finding (a :class:`~vllm_doctor.verdict.Finding`, made inert first) as
    ``--follow`` prints it when it is certain: ``text`` or ``markdown``."""
    safe = inert_verdict(finding)
    if fmt == "markdown":
        from .markdown import render_live as md_live

        return clean_output(md_live(safe))
    from .text import render_live as text_live

    return clean_output(text_live(safe, color=color, width=width), sgr=color)


def render_follow_summary(verdict, fmt: str, color: bool = False, width: int = 0, lines: int = 0) -> str:
    """The short summary ``--follow`` ends with (``text`` or ``markdown``): the verdict line
    and a table of the findings already printed, not a repeat of them."""
    from .titles import not_checked

    safe = not_checked(inert_verdict(verdict))
    if fmt == "markdown":
        from .markdown import render_follow_summary as md_summary

        return clean_output(md_summary(safe, lines=lines))
    from .text import render_follow_summary as text_summary

    return clean_output(text_summary(safe, color=color, width=width, lines=lines), sgr=color)
