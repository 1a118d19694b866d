"""Renderers: a verdict in, text out. ``json`` never imports rich (fast start for scripts)."""

from __future__ import annotations

FORMATS = ("text", "markdown", "json")


def render(verdict, fmt: str, color: bool = False) -> str:
    """Render ``verdict`` as ``text`` (rich), ``markdown`` or ``json``."""
    if fmt == "json":
        from .json import render_json

        return render_json(verdict)
    if fmt == "markdown":
        from .markdown import render_markdown

        return render_markdown(verdict)
    from .text import render_text

    return render_text(verdict, color=color)
