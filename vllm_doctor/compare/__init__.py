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
The result is a :class:`Comparison`: plain data that ``render/compare.py`` prints as text,
Markdown or JSON (``compare.schema.json``). Nothing here reads the log again: it reads the
trackers' runs and the rules' findings (:func:`vllm_doctor.pipeline.diagnose_input`).
"""

from __future__ import annotations

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
    from ..redact import Redactor
    from ..render.inert import map_strings

    r = Redactor()
    names = {s.name: r.source_name(s.name, s.input) for s in comparison.sources}
    return map_strings(map_strings(comparison, lambda t: names.get(t) or r.text(t)), r.scrub)
