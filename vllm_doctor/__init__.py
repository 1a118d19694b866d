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

from ._version import __version__  # noqa: E402
from .verdict import Evidence, Finding, Remedy, RunSummary, Verdict  # noqa: E402

__all__ = ["diagnose", "Verdict", "Finding", "Evidence", "Remedy", "RunSummary", "__version__"]


def diagnose(log: Union[str, "os.PathLike[str]", Iterable[Union[str, bytes]]], name: str = "<lines>") -> Verdict:
    """Diagnose one log and return its :class:`Verdict`.

    ``log`` is a path (``str`` or ``PathLike``; compressed files are read too) or an
    iterable of lines (``str`` or ``bytes``, with or without newlines). ``name`` is what
    evidence calls the source when lines are given. Raises
    :class:`vllm_doctor.sources.InputError` when a path cannot be read.
    """
    from .pipeline import build_verdict, diagnose_input, diagnose_source
    from .sources import iter_text_lines, open_input

    if isinstance(log, (str, os.PathLike)):
        src = open_input(os.fspath(log))
        try:
            results = diagnose_input(src)
        finally:
            src.stream.close()
        return build_verdict(results)
    return build_verdict(diagnose_source(name, iter_text_lines(log)))
