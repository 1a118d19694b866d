"""Renderers: a verdict in, text out. ``json`` never imports rich (fast start for scripts).

Whatever the format, the verdict is made inert first (:mod:`.inert`: no terminal escape,
control, bidi or invisible character, no line break inside a field, JSON-safe numbers) and
the output passes a last :func:`.inert.clean_output`; each renderer then quotes log text
the way its format needs (rich ``Text`` parts, Markdown code spans and escapes, JSON).
"""

from __future__ import annotations

from .inert import clean_output, inert_verdict

FORMATS = ("text", "markdown", "json")


def render(verdict, fmt: str, color: bool = False) -> str:
    """Render ``verdict`` (a :class:`~vllm_doctor.verdict.Verdict`) as ``text`` (rich; ANSI
    colours when ``color``), ``markdown`` (an incident ticket) or ``json`` (the schema of
    ``verdict.schema.json``). Raises ValueError for another ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown output format {fmt!r}; one of {', '.join(FORMATS)}")
    safe = inert_verdict(verdict)
    if fmt == "json":
        from .json import render_json

        return clean_output(render_json(safe))
    if fmt == "markdown":
        from .markdown import render_markdown

        return clean_output(render_markdown(safe))
    from .text import render_text

    return clean_output(render_text(safe, color=color), sgr=color)
