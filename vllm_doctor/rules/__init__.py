"""The rules: one module per code, a registry, and how a run is judged.

Each module holds one :class:`~vllm_doctor.rules.rule.Rule` (code, class id, severity,
summary, its documentation, ``check``); :data:`RULES` lists them in the diagnosis order
(startup classes first, then runtime, then notes), which is the order ``vllm-doctor rules``
prints and the tie-break between findings of one severity.

:func:`diagnose_run` judges one run: the decision tree (:mod:`~vllm_doctor.rules.tree`)
routes each failure to the rule that explains it; each rule checks the run with the failures
routed to it (rules that judge the whole run, like ``preemption_storm``, check it with none);
"root cause not in the log" gives way when another finding names a root cause.
"""

from __future__ import annotations

import difflib
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..run import Failure, Run
from ..verdict import Finding
from . import (
    colocation,
    config_limit_error,
    cuda_graph_capture_oom,
    engine_stall,
    healthy,
    high_gpu_memory_utilization,
    kv_cache_capacity,
    kv_pressure,
    long_default_max_model_len,
    low_prefix_cache_hit,
    other,
    preemption_storm,
    quantization_unsupported,
    queue_backlog,
    request_too_long,
    runtime_oom,
    sampler_warmup_oom,
    slow_not_memory,
    startup_memory_contention,
    stats_logging_disabled,
    tp1_multi_gpu,
    unknown,
    weight_load_oom,
)
from .plan import reconcile
from .rule import CONFIDENCE, Rule, ev
from .tree import route

#: Every rule, in the diagnosis order.
RULES: Tuple[Rule, ...] = tuple(
    m.RULE
    for m in (
        weight_load_oom,
        kv_cache_capacity,
        startup_memory_contention,
        cuda_graph_capture_oom,
        sampler_warmup_oom,
        quantization_unsupported,
        config_limit_error,
        runtime_oom,
        preemption_storm,
        request_too_long,
        engine_stall,
        kv_pressure,
        queue_backlog,
        high_gpu_memory_utilization,
        low_prefix_cache_hit,
        long_default_max_model_len,
        tp1_multi_gpu,
        slow_not_memory,
        stats_logging_disabled,
        other,
        unknown,
        healthy,
    )
)
BY_NAME: Dict[str, Rule] = {r.name: r for r in RULES}
BY_CODE: Dict[str, Rule] = {r.code: r for r in RULES}
ORDER: Dict[str, int] = {r.name: i for i, r in enumerate(RULES)}
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2, "ok": 3}


def _key(text: str) -> str:
    return text.strip().lower().replace("-", "_")


class UnknownRule(KeyError):
    """A name that is neither a class id nor a code. ``matches`` holds the rules it may have
    meant (in the diagnosis order), ``args[0]`` the one-line message that lists them by code,
    as ``vllm-doctor rules`` prints codes (``VD301``) and class ids (``kv_pressure``);
    ``listed`` is False when the message lists none (no match, or too many to list)."""

    def __init__(self, message: str, matches: Tuple[Rule, ...], listed: bool) -> None:
        super().__init__(message)
        self.matches = matches
        self.listed = listed


#: At most this many matches are listed (``VD3``: 8 codes); more (``VD``: 22) are counted.
_LISTED = 10


def _matches(key: str) -> Tuple[Rule, ...]:
    """The rules a ``_key``-ed name may have meant: codes it begins (``vd3`` -> every VD3xx),
    class ids that hold it (``kv`` -> kv_cache_capacity, kv_pressure), else the nearest by
    spelling (difflib ratio >= 0.5, at most 3: ``vd309`` -> VD308...)."""
    found = [r for r in RULES if r.code.lower().startswith(key) or (len(key) >= 2 and key in r.name)]
    if found:
        return tuple(found)
    names = {r.code.lower(): r for r in RULES}
    names.update((r.name, r) for r in RULES)
    near = difflib.get_close_matches(key, list(names), n=3, cutoff=0.5)
    seen: List[Rule] = []
    for n in near:
        if names[n] not in seen:
            seen.append(names[n])
    return tuple(sorted(seen, key=lambda r: ORDER[r.name]))


def lookup(name: str) -> Rule:
    """The rule named by a class id or code, in any case, with ``-`` or ``_``
    (``VD303``, ``vd303``, ``high-gpu-memory-utilization``).

    Raises :class:`UnknownRule` (a KeyError) when there is none: its message is one line
    that lists the codes it may have meant (``'VD3' is not a code; the codes that begin with it: VD301, ...``;
    ``'kv-cache' is not a class id or code; did you mean VD101 kv_cache_capacity?``)."""
    key = _key(name)
    for r in RULES:
        if key in (r.code.lower(), r.name):
            return r
    matches = _matches(key) if key else ()
    what = "a code" if key.startswith("vd") and key[2:].isdigit() else "a class id or code"
    message = f"{name.strip()!r} is not {what}"
    prefix = len(matches) > 1 and all(r.code.lower().startswith(key) for r in matches)
    if len(matches) > _LISTED:
        message += f"; {len(matches)} {'codes begin with it' if prefix else 'classes hold it'}"
        raise UnknownRule(message, matches, listed=False)
    if prefix:
        message += f"; the codes that begin with it: {', '.join(r.code for r in matches)}"
    elif len(matches) > 3:
        message += f"; the classes that hold it: {', '.join(f'{r.code} {r.name}' for r in matches)}"
    elif matches:
        named = [f"{r.code} {r.name}" for r in matches]
        message += f"; did you mean {' or '.join([', '.join(named[:-1]), named[-1]] if len(named) > 1 else named)}?"
    raise UnknownRule(message, matches, listed=bool(matches))


def select_rules(select: Optional[Iterable[str]]) -> Optional[frozenset]:
    """Class ids of the rules a ``select`` list names: codes, class ids, or code prefixes
    (``VD1`` for every startup rule, as ruff selects by prefix). None selects all. Raises
    :class:`UnknownRule` (a KeyError listing what it may have meant) for an entry that names
    nothing."""
    if select is None:
        return None
    chosen = set()
    for item in select:
        key = _key(item)
        if not key:
            continue
        by_prefix = [r.name for r in RULES if r.code.lower().startswith(key) and key.startswith("vd")]
        chosen.update(by_prefix or [lookup(item).name])
    return frozenset(chosen)


def new_observers() -> Dict[str, Any]:
    """A fresh stats observer of every rule that declares one, for one run (see
    :mod:`vllm_doctor.run`), keyed by the rule's class id."""
    return {r.name: r.observer() for r in RULES if r.observer is not None}


def _note_placement(found: Finding, run: Run, why: str) -> None:
    """A startup step placed by the memory numbers alone says so: the reasoning as the fact
    ``step_placed_by_memory`` and the launch command (nothing served after it) as evidence."""
    found.facts["step_placed_by_memory"] = why
    line = run.markers.get("launch_command")
    if line is not None and all(e.line != line.lineno or e.source != line.source for e in found.evidence):
        found.evidence.append(ev(line, "the launch command; nothing served after it"))


def diagnose_run(
    run: Run,
    select: Optional[frozenset] = None,
    errors: Optional[List[Tuple[str, BaseException]]] = None,
    plan_changes: Optional[List[Dict[str, Any]]] = None,
) -> List[Finding]:
    """All findings of one run, most severe first (ties: the diagnosis order).

    ``select`` (from :func:`select_rules`) keeps only the named rules' findings; the tree
    still routes every failure, so a failure routed to an unselected rule is not re-judged
    by another. With ``errors`` given, a rule that raises is isolated: ``(code, exception)``
    is appended there and the other rules still run; without it the exception propagates.
    ``plan_changes`` receives what the run's plan had to adjust (:func:`~.plan.reconcile`).
    """
    groups: Dict[Tuple[str, str], List[Failure]] = {}
    confidence: Dict[Tuple[str, str], str] = {}
    placed: Dict[Tuple[str, str], str] = {}
    for f in run.failures:
        r = route(f, run)
        if r.name is None:
            continue
        key = (r.name, r.phase)
        groups.setdefault(key, []).append(f)
        if r.placed is not None:
            placed.setdefault(key, r.placed)
        best = confidence.get(key)
        if best is None or CONFIDENCE.index(r.confidence) < CONFIDENCE.index(best):
            confidence[key] = r.confidence
    findings: List[Finding] = []
    for rule in RULES:
        if select is not None and rule.name not in select:
            continue
        routed = [(phase, fs) for (name, phase), fs in groups.items() if name == rule.name]
        for phase, failures in routed or [("", [])]:
            try:
                found_here = rule.check(run, failures, phase)
            except Exception as exc:  # noqa: BLE001 - isolated and reported when the caller asks
                if errors is None:
                    raise
                errors.append((rule.code, exc))
                continue
            for found in found_here:
                if failures:
                    found.confidence = confidence[(rule.name, phase)]
                    why = placed.get((rule.name, phase))
                    if why is not None:
                        _note_placement(found, run, why)
                findings.append(found)
    if any(f.class_id != "unknown" and f.severity in ("critical", "warning") for f in findings):
        findings = [f for f in findings if f.class_id != "unknown"]
    findings.sort(key=lambda f: (SEVERITY_ORDER.get(f.severity, 9), ORDER.get(f.class_id, 99)))
    colocation.apply(findings, run)
    changed = reconcile(findings, run)
    if plan_changes is not None:
        plan_changes.extend(changed)
    return findings


__all__ = [
    "RULES",
    "BY_NAME",
    "BY_CODE",
    "Rule",
    "UnknownRule",
    "lookup",
    "select_rules",
    "new_observers",
    "diagnose_run",
]
