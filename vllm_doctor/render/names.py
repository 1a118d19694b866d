"""How the renderers name a source: its host, pod or process, and its file as a reader sees it.

A sub-source is ``INPUT [KEY]`` (``kubectl logs --prefix``: ``pod/NAME/CONTAINER``; journald:
``UNIT[PID]@HOST``, see :mod:`vllm_doctor.pipeline`). A ticket names the input as given on the
command line but never by an absolute local path; a line that must stay short names it by
its file name, the key (which tells pods and hosts apart) always whole.
"""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

import regex

#: The clip marker: text left out here (the full text is in JSON / Markdown).
CLIP = "\u2026"  # …

_SUBSOURCE = regex.compile(r"^(?P<input>.*?) \[(?P<key>[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]$")


def split_source(name: str) -> Tuple[str, str]:
    """``("x.log", "pod/p/c")`` for the sub-source ``x.log [pod/p/c]``; ``(name, "")`` else."""
    m = _SUBSOURCE.match(name or "")
    return (m["input"], m["key"]) if m else (name or "", "")


def where(source: str) -> List[Tuple[str, str]]:
    """Host, pod and process a sub-source name says (``kubectl logs --prefix``:
    ``pod/NAME/CONTAINER``; journald: ``UNIT[PID]@HOST``), as ``(label, value)`` rows."""
    _, key = split_source(source)
    if key.startswith("pod/"):
        _, pod, container = (key.split("/", 2) + ["", ""])[:3]
        return [("Pod", pod + (f" (container {container})" if container else ""))]
    if "@" in key:
        unit, host = key.rsplit("@", 1)
        return (
            [("Host", host + (f" (process {unit})" if unit else ""))] if host and host != "?" else [("Process", unit)]
        )
    return []


def display_source(name: str) -> str:
    """``name`` as a ticket shows it: as given on the command line, but an absolute path only
    by its file name (the operator's directories are not the reader's), sub-source kept."""
    inp, key = split_source(name)
    if os.path.isabs(inp):
        inp = os.path.basename(inp) or inp
    return f"{inp} [{key}]" if key else inp


def short_source(name: str, limit: int = 40) -> str:
    """``name`` for a line that must stay short: the file name without its directories
    (shortened in the middle past ``limit`` characters), the sub-source (which tells pods
    and hosts apart) kept whole."""
    inp, key = split_source(name)
    if inp not in ("-", "<stdin>"):
        inp = os.path.basename(inp.rstrip("/")) or inp
    if len(inp) > limit:
        keep = max(limit - 1, 8)
        inp = inp[: keep // 2] + CLIP + inp[-(keep - keep // 2) :]
    return f"{inp} [{key}]" if key else inp


#: Parentheses inside a reason the renderers put in parentheses: brackets, as typesetting
#: nests them (``(... vLLM's default 0.90-0.92 [0.92 from vLLM 0.20], not printed ...)``).
_INNER = str.maketrans("()", "[]")


def why_parts(action: str, why: Optional[str]) -> Tuple[str, Optional[str]]:
    """A remedy's action and its reason as a renderer prints them, ``action (why)``: where the
    action already ends in a parenthesis (``... with an fp8 KV cache (a precision trade-off to
    evaluate)``) the reason joins it (``(a precision trade-off to evaluate; about 47296
    tokens ...)``) rather than opening a second one; parentheses inside the reason become
    brackets, so the printed line never nests them (a reason quotes others' phrases, such as
    a version's default, that hold their own). ``(action, None)`` without a reason."""
    if not why:
        return action, None
    if action.endswith(")"):
        depth = 0
        for i in range(len(action) - 1, -1, -1):  # the parenthesis that the last one closes
            depth += {")": 1, "(": -1}.get(action[i], 0)
            if depth == 0:
                if i and action[:i].strip():
                    return action[:i].rstrip(), f"{action[i + 1 : -1]}; {why}".translate(_INNER)
                break
    return action, why.translate(_INNER)
