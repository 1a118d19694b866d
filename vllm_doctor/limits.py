"""Display bounds shared by the rules and the views (render must not import rules):
how many co-tenant processes are named, how many characters of a line the evidence keeps."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

#: Characters of a line an evidence entry keeps (the renderers clip further for a terminal).
MAX_EVIDENCE_CHARS = 600

#: Co-tenant processes a title, a remedy or a view names at most (the largest holders
#: first, then ``+N more``): an OOM message on a shared GPU can list thousands (breakit3 7),
#: and an instruction that names them all is never read. A display bound, not a judgement.
MAX_NAMED_PROCESSES = 5

#: Flags a refused launch command gets a remedy each for (rules/launch_rejected.py); the rest
#: are named together in one line. A display bound, not a judgement.
MAX_FLAG_REMEDIES = 3


def largest_pids(facts: Dict[str, Any], limit: int = MAX_NAMED_PROCESSES) -> Tuple[List[Any], int]:
    """The ``co_tenant_pids`` of ``facts`` to name, at most ``limit`` (in the message's order
    when they all fit, else the largest holders of ``co_tenant_gib`` first), and how many
    more there are."""
    pids = list(facts.get("co_tenant_pids") or [])
    if len(pids) <= limit:
        return pids, 0
    held = facts.get("co_tenant_gib") or {}

    def gib(pid: Any) -> float:
        value = held.get(str(pid))
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0

    return sorted(pids, key=lambda pid: -gib(pid))[:limit], len(pids) - limit
