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
from typing import Iterable, Union

__version__ = "0.1.0"

from .verdict import Evidence, Finding, Remedy, RunSummary, Verdict  # noqa: E402

__all__ = ["diagnose", "Verdict", "Finding", "Evidence", "Remedy", "RunSummary", "__version__"]


def diagnose(log: Union[str, "os.PathLike[str]", Iterable[Union[str, bytes]]], name: str = "<lines>") -> Verdict:
    """Diagnose one log and return its :class:`Verdict` (unredacted: see
    :func:`vllm_doctor.redact.redact_verdict` for the copy the CLI prints).

    ``log`` is a path (``str`` or ``PathLike``; compressed files are read too) or an
    iterable of lines (``str`` or ``bytes``, with or without newlines: an open file, a
    list, ``text.splitlines()``). ``name`` is what evidence calls the source when lines are
    given.

    Raises :class:`TypeError` for anything else - ``bytes`` or a ``str`` holding line breaks
    (a whole log in memory: pass ``text.splitlines()``; a path with a line break in its
    name can still be given as a ``pathlib.Path``), a number, ``None``, or an iterable that
    yields something other than ``str``/``bytes`` - and
    :class:`vllm_doctor.sources.InputError` (a one-line message) when a path cannot be read.
    """
    from .pipeline import build_verdict, diagnose_input, diagnose_source
    from .render.inert import one_line
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
    if isinstance(log, (str, os.PathLike)):
        try:
            src = open_input(os.fspath(log))
            try:
                results = diagnose_input(src)
            finally:
                src.stream.close()
        except InputError as exc:
            raise InputError(one_line(str(exc))[:2000]) from None
        return build_verdict(results)
    if not hasattr(log, "__iter__"):
        raise TypeError(
            f"diagnose() takes a path (str or os.PathLike) or an iterable of lines, not {type(log).__name__}"
        )
    return build_verdict(diagnose_source(name, iter_text_lines(_checked_lines(log))))


def _checked_lines(lines: Iterable[Union[str, bytes]]):
    """The caller's lines, each checked to be ``str`` or ``bytes`` (TypeError otherwise)."""
    for n, line in enumerate(lines, 1):
        if isinstance(line, (bytearray, memoryview)):
            line = bytes(line)
        elif not isinstance(line, (str, bytes)):
            raise TypeError(f"diagnose(): line {n} of the iterable is {type(line).__name__}, not str or bytes")
        yield line
