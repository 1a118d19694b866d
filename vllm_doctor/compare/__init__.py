"""What changed between two server runs, and which change matters: ``vllm-doctor compare``.

"It worked on the last version": two runs (two logs, or two starts in one log) are lined up
side by side from their run views (:class:`~vllm_doctor.run.Run`: configuration and facts each
with the line that printed it, the stats series, the phase reached, the failures) and their
findings, and the differences are ranked by a small explicit order (:data:`CATEGORIES`):

1. ``outcome``: one run failed (or degraded) where the other did not, or they failed
   differently; the changed setting the failure's own lines name is given as the likely cause;
2. ``capacity``: KV cache tokens / GiB / max concurrency and what takes memory from it
   (weights, CUDA graphs, activations), by the size of the change;
3. ``throughput``: the median generation throughput while serving;
4. ``config``: the version, engine, model runner, GPU, model, then each changed setting and
   flag (the ``non-default args`` dict or the ``args: Namespace(...)`` line, diffed whole);
5. ``timing``: compile, model load, graph capture, engine init and start-up times.

Every judgement number is in :mod:`vllm_doctor.thresholds` (``COMPARE_*``), read at call time.
Library use: ``compare_logs("old.log", "new.log")`` or ``compare_logs("both.log", runs=(1, 2))``.
The result is a :class:`Comparison`: plain data that ``render/compare.py`` prints as text,
Markdown or JSON (``compare.schema.json``). Nothing here reads the log again: it reads the
trackers' runs and the rules' findings (:func:`vllm_doctor.pipeline.diagnose_input`).
"""

from __future__ import annotations

import os
from typing import Optional, Tuple, Union

from .differences import compare_runs
from .model import CATEGORIES, SCHEMA_VERSION, Comparison, Difference, Row, Side
from .runs import CompareError, RunRef, input_runs, pick_run
from .values import arrow, parse_args, show, side_values

__all__ = [
    "CATEGORIES",
    "SCHEMA_VERSION",
    "Comparison",
    "CompareError",
    "Difference",
    "Row",
    "RunRef",
    "Side",
    "arrow",
    "compare_logs",
    "compare_runs",
    "input_runs",
    "parse_args",
    "pick_run",
    "redact_comparison",
    "show",
    "side_values",
]


def redact_comparison(comparison: Comparison) -> Comparison:
    """A redacted, inert copy of ``comparison`` (see :mod:`vllm_doctor.redact`): secrets and
    personal data replaced in every field, hosts and pods of the source names pseudonymised
    the same way everywhere; the original is not changed."""
    import copy

    from ..redact import Redactor, names_secret
    from ..render.inert import map_strings

    r = Redactor()
    comparison = copy.deepcopy(comparison)
    # A secret flag's value shown without its key (a table cell, a difference's values and
    # title): masked where it stands, and remembered so that every copy is scrubbed.
    for row in comparison.rows:
        if names_secret(row.key):
            for cell in (row.old, row.new):
                if cell is not None:
                    _forget(r, cell, "value")
    for d in comparison.differences:
        if names_secret(d.key):
            _forget(r, d, "old")
            _forget(r, d, "new")
    names = {s.name: r.source_name(s.name, s.input) for s in comparison.sources}
    return map_strings(map_strings(comparison, lambda t: names.get(t) or r.text(t)), r.scrub)


def _forget(r, obj, attr: str) -> None:
    """Replace ``obj.attr`` (a secret, or a list of them) by the placeholder, remembering each
    string in redactor ``r``."""
    value = getattr(obj, attr)
    if value is None:
        return
    for v in value if isinstance(value, (list, tuple)) else [value]:
        r.secret(str(v))
    setattr(obj, attr, "<redacted>")


def compare_logs(
    old: Union[str, "os.PathLike[str]"],
    new: Union[str, "os.PathLike[str]", None] = None,
    *,
    runs: Optional[Tuple[int, int]] = None,
    input_format: str = "auto",
    redact: bool = False,
) -> Comparison:
    """Compare two logs (paths), or two runs of one log (``new`` None and ``runs=(A, B)``), as
    ``vllm-doctor compare`` does. ``runs`` with two logs picks run A of ``old`` and run B of
    ``new`` (default: each log's newest). Raises :class:`CompareError` (one-line message) when
    a log holds no such run or is not vLLM output, or for one log without ``runs``;
    :class:`vllm_doctor.sources.InputError` when a path cannot be read."""
    from ..pipeline import diagnose_input
    from ..sources import open_input

    def read(path):
        src = open_input(os.fspath(path))
        try:
            return diagnose_input(src, input_format=input_format), src.name
        finally:
            src.stream.close()

    a, a_name = read(old)
    if new is None:
        if runs is None:
            raise CompareError("one log compares two of its runs: give runs=(A, B)")
        b, b_name = a, a_name
    else:
        b, b_name = read(new)
    first, second = runs if runs is not None else (None, None)
    comparison = compare_runs(pick_run(a, a_name, first), pick_run(b, b_name, second))
    return redact_comparison(comparison) if redact else comparison
