"""Prefix-cache hit rate collapsed: per-request values at the start of shared prompts.

What it means:
    The stats lines show the prefix-cache hit rate high at first and then near zero. Prefix
    caching reuses the KV cache of identical leading tokens; when every prompt starts with
    something different, nothing is reused and every request pays its full prefill.

Why it happens:
    Prompt design: a timestamp, a request id or a user name at the *start* of a shared
    system prompt; a changed prompt template.

Remedies, in order:
    1. Keep per-request values out of the start of shared prompts (put them after the shared
       part). No flag fixes it.

What does not help:
    Memory or batch settings: the cache works, the prompts defeat it.

Sources:
    vllm/v1/core/kv_cache_manager.py (prefix caching); vllm/v1/metrics/loggers.py
    ("Prefix cache hit rate"); docs.vllm.ai "Automatic Prefix Caching"
    (design/prefix_caching, features/automatic_prefix_caching).
"""

from __future__ import annotations

from typing import List, Sequence

from .. import thresholds
from ..run import Failure, Run
from ..verdict import Finding
from .rule import Rule, ev, finding, remedy


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    s = run.stats
    worked = (s.prefix_hit_max or 0) >= thresholds.PREFIX_HIT_WORKED_PCT
    if not worked or s.prefix_hit_last is None or s.prefix_hit_last >= thresholds.PREFIX_HIT_COLLAPSED_PCT:
        return []
    title = f"Prefix-cache hit rate fell from {s.prefix_hit_max:.1f}% to {s.prefix_hit_last:.1f}%"
    facts = {"prefix_hit_max_pct": s.prefix_hit_max, "prefix_hit_last_pct": s.prefix_hit_last}
    rem = [
        remedy(
            "Keep per-request values (timestamps, ids) out of the start of shared prompts",
            None,
            "prefix caching reuses only identical leading tokens",
            "client",
        )
    ]
    return [finding(RULE, run, "runtime", title, facts, [ev(s.last, "latest stats")], rem, confidence="low")]


RULE = Rule(
    code="VD304",
    name="low_prefix_cache_hit",
    severity="info",
    summary="Prefix-cache hit rate collapsed: per-request values at the start of prompts.",
    doc=__doc__,
    check=check,
)
