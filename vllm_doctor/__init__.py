"""vllm-doctor: reads vLLM server logs and says why the server ran out of memory or slowed down.

Library use::

    from vllm_doctor import diagnose
    verdict = diagnose("server.log")            # a path
    verdict = diagnose(open("server.log"))      # or any iterable of str/bytes lines
    print(verdict.primary_class, verdict.exit_code)
    verdict.to_dict()                            # the JSON contract (verdict.schema.json)
"""

from __future__ import annotations

import os
from typing import Iterable, Optional, Union

from ._version import __version__  # noqa: E402
from .verdict import Evidence, Finding, Remedy, RunSummary, Verdict  # noqa: E402

__all__ = ["diagnose", "Verdict", "Finding", "Evidence", "Remedy", "RunSummary", "__version__"]


def diagnose(
    log: Union[str, "os.PathLike[str]", Iterable[Union[str, bytes]]],
    *,
    name: str = "<lines>",
    select: Optional[Iterable[str]] = None,
    input_format: str = "auto",
    redact: bool = False,
) -> Verdict:
    """Diagnose one log and return its :class:`Verdict`, as ``vllm-doctor diagnose`` does.

    ``log`` is a path (``str`` or ``PathLike``; compressed files are read too) or an
    iterable of lines (``str`` or ``bytes``, with or without newlines: an open file, a
    list, ``text.splitlines()``). The options are the command line's, keyword-only:
    ``name`` is what evidence calls the source when lines are given; ``select`` runs only
    the rules named (codes, class ids or code prefixes: ``["VD101", "preemption_storm",
    "VD3"]``, as ``--select``); ``input_format`` forces what wraps each line
    (``--input-format``); ``redact`` returns the redacted verdict every CLI output is made
    from (default: as logged; :func:`vllm_doctor.redact.redact_verdict` makes the copy).

    Raises :class:`TypeError` for anything else - ``bytes`` or a ``str`` holding line breaks
    (a whole log in memory: pass ``text.splitlines()``; a path with a line break in its
    name can still be given as a ``pathlib.Path``), a number, ``None``, or an iterable that
    yields something other than ``str``/``bytes``; :class:`vllm_doctor.sources.InputError`
    (a one-line message) when a path cannot be read; KeyError (naming the nearest rules)
    for a ``select`` entry that names no rule, or for an unknown ``input_format``.
    """
    from .formats import allowed
    from .pipeline import build_verdict, diagnose_input, diagnose_source
    from .render.inert import one_line
    from .rules import select_rules
    from .sources import InputError, iter_text_lines, open_input

    if isinstance(log, (bytes, bytearray, memoryview)):
        raise TypeError(
            "diagnose() takes a path (str or os.PathLike) or an iterable of lines, not "
            f"{type(log).__name__}; for a log in memory pass data.splitlines()"
        )
    if isinstance(log, str) and ("\n" in log or "\r" in log):
        raise TypeError(
            "diagnose() got a str holding line breaks, which is not a path; for a log in memory "
            "pass text.splitlines() (a file name with a line break can be given as a pathlib.Path)"
        )
    allowed(input_format)  # KeyError for an unknown format, before anything is read
    chosen = select_rules(select)
    if isinstance(log, (str, os.PathLike)):
        try:
            src = open_input(os.fspath(log))
            try:
                results = diagnose_input(src, input_format=input_format, select=chosen)
            finally:
                src.stream.close()
        except InputError as exc:
            raise InputError(one_line(str(exc))[:2000]) from None
        verdict = build_verdict(results, select=chosen)
    else:
        if not hasattr(log, "__iter__"):
            raise TypeError(
                f"diagnose() takes a path (str or os.PathLike) or an iterable of lines, not {type(log).__name__}"
            )
        lines = iter_text_lines(_checked_lines(log))
        verdict = build_verdict(diagnose_source(name, lines, input_format, chosen), select=chosen)
    if redact:
        from .redact import redact_verdict

        verdict = redact_verdict(verdict)
    return verdict


def _checked_lines(lines: Iterable[Union[str, bytes]]):
    """The caller's lines, each checked to be ``str`` or ``bytes`` (TypeError otherwise)."""
    for n, line in enumerate(lines, 1):
        if isinstance(line, (bytearray, memoryview)):
            line = bytes(line)
        elif not isinstance(line, (str, bytes)):
            raise TypeError(f"diagnose(): line {n} of the iterable is {type(line).__name__}, not str or bytes")
        yield line
