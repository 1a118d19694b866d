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
    iterable of lines (``str`` or ``bytes``, with or without newlines). The options are the
    command line's, keyword-only: ``name`` is what evidence calls the source when lines are
    given; ``select`` runs only the rules named (codes, class ids or code prefixes:
    ``["VD101", "preemption_storm", "VD3"]``, as ``--select``); ``input_format`` forces what
    wraps each line (``--input-format``); ``redact`` returns the redacted verdict every CLI
    output is made from (default: as logged). Raises
    :class:`vllm_doctor.sources.InputError` when a path cannot be read, KeyError (naming
    the nearest rules) for a ``select`` entry that names no rule, KeyError for an unknown
    ``input_format``.
    """
    from .formats import allowed
    from .pipeline import build_verdict, diagnose_input, diagnose_source
    from .rules import select_rules
    from .sources import iter_text_lines, open_input

    allowed(input_format)  # KeyError for an unknown format, before anything is read
    chosen = select_rules(select)
    if isinstance(log, (str, os.PathLike)):
        src = open_input(os.fspath(log))
        try:
            results = diagnose_input(src, input_format=input_format, select=chosen)
        finally:
            src.stream.close()
        verdict = build_verdict(results, select=chosen)
    else:
        verdict = build_verdict(diagnose_source(name, iter_text_lines(log), input_format, chosen), select=chosen)
    if redact:
        from .redact import redact_verdict

        verdict = redact_verdict(verdict)
    return verdict
