"""Which run a verdict is about: an earlier failure that the newest run of its source got past.

A source often holds several starts of one server: the one that failed, then the operator's
fix (``--max-model-len 8192`` after a KV capacity error), or an automatic restart (systemd,
Kubernetes, a supervisor) with nothing changed. When the source's NEWEST run reached serving
(:attr:`~vllm_doctor.events.Phase.READY` or later) with no finding of warning or critical
severity, each earlier failing run is set beside it (breakit4 item 3):

* its configuration differs from the newest run's in a setting that can fix the failure
  (:data:`SETTINGS`, or one the failure's own remedies name), both printed (or one run's
  ``non-default args`` line names it and the other's does not: vLLM's default, ``was`` or
  ``now`` None): the failure is
  **superseded**. Every finding of that run gets ``superseded`` =
  ``{"run": N, "changes": [{"setting", "was", "now"}]}``; it never heads the verdict nor
  drives the exit code (:func:`vllm_doctor.pipeline.primary_finding` skips it), and the views
  print no remedy of it (they were acted on; the numbers were the old run's);
* every setting both runs print is the same: the server came back as it was (an automatic
  restart), the failure stands, with a note that it will likely recur;
* no setting is printed by both: the failure stands, with a note that the log does not show
  whether anything changed;
* the failed run is a command line the argument parser refused (nothing ran): any later start
  that serves was given another command, so the refusal is superseded
  (:data:`REFUSED_THEN_ACCEPTED`).

When the newest run has not stopped but the log ends before it serves (a restart cut during
startup) and it changed such a setting, the failure stands (nothing shows the change worked),
says so in a note, and a remedy the newest run already carries out loses its number: "lower
max_model_len to 12288" is no advice where 8192 already runs.

A run of another instance (up while the newest started: :attr:`Run.neighbours`), or of
another server compared in a table's rows, is no restart of it: it is left alone. This
module judges nothing about the failure itself; it only places it in time.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import defaults
from .events import Phase
from .run import Run, same_value
from .verdict import SEVERITY_RANK, Finding, Remedy

#: Settings whose change between two starts of a server can make a failure go away: the
#: memory and parallelism knobs of shared/domain.md's tuning order, the model and how it is
#: stored. A change elsewhere (the port, the API key, logging) fixes no memory failure.
SETTINGS = (
    "model",
    "quantization",
    "dtype",
    "max_model_len",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enforce_eager",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "kv_cache_dtype",
    "cpu_offload_gb",
    "swap_space",
    "block_size",
    "enable_chunked_prefill",
    "limit_mm_per_prompt",
)

#: Run openers that make a run another server, not a restart of the one before it: a row of a
#: Markdown table comparing servers. (A run opened by another instance's process is a restart
#: when the earlier one had stopped before it started; one still up then is its neighbour.)
OTHER_SERVER = ("row",)


#: The change a refused command line's run shows against a later one that serves.
REFUSED_THEN_ACCEPTED = {"setting": "the command line", "was": "refused by the parser", "now": "accepted"}


def refused_command_only(run: Run) -> bool:
    """Every failure of ``run`` is the argument parser refusing its command line
    (catalog/arguments.py ``cli_error``): the server never started, so any later start of it
    that serves was given another command."""
    return bool(run.failures) and all(f.kind == "cli_error" for f in run.failures)


def failing(f: Finding) -> bool:
    """A finding of warning or critical severity (what heads a verdict and makes exit 1)."""
    return SEVERITY_RANK.get(f.severity, 0) >= 2


def compare(failed: Run, newest: Run, findings: Sequence[Finding]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """``(changes, same)`` between the failed run's configuration and the newest run's:
    ``changes`` one ``{"setting", "was", "now"}`` per setting of :data:`SETTINGS` (or named by
    a remedy of ``findings``) that both runs print with different values, ``same`` the
    settings both print alike. A setting only one run prints is neither (not known)."""
    named = [r.setting for f in findings for r in f.remedies if r.setting and r.setting not in SETTINGS]
    changes: List[Dict[str, Any]] = []
    same: List[str] = []
    for key in dict.fromkeys((*SETTINGS, *named)):
        was, now = failed.config.get(key), newest.config.get(key)
        at_default, printed = (failed, newest) if was is None else (newest, failed)
        if (was is None) != (now is None) and _at_default(at_default, key, printed):
            # one run's non-default args name it, the other's do not: that one ran vLLM's
            # default, a change unless the value printed may be that default itself
            if not _may_be_default(key, printed.config[key], at_default):
                changes.append({"setting": key, "was": was, "now": now})
            continue
        if was is None or now is None:
            continue
        if same_value(was, now):
            same.append(key)
        else:
            changes.append({"setting": key, "was": was, "now": now})
    return changes, same


def _at_default(run: Run, key: str, other: Run) -> bool:
    """``run`` printed vLLM's ``non-default args`` line (vllm/entrypoints/utils.py
    log_non_default_args: every argument that differs from its default) without ``key``, and
    ``other`` has ``key`` from its own such line: ``run`` ran vLLM's default for it."""
    mine, theirs = run.markers.get("non_default_args"), other.markers.get("non_default_args")
    line = other.config_lines.get(key)
    return mine is not None and theirs is not None and line is not None and line.lineno == theirs.lineno


def _may_be_default(key: str, value: Any, run: Run) -> bool:
    """``value`` is within vLLM's default for ``key`` in ``run`` (:mod:`vllm_doctor.defaults`,
    by the run's version and engine; the GPU size where the log prints it): a ``non-default
    args`` line that names it anyway changes nothing against a run that does not."""
    if key == "gpu_memory_utilization":
        d = defaults.gpu_memory_utilization(run.facts.get("vllm_version"), run.engine)
    elif key == "max_num_seqs":
        d = defaults.max_num_seqs(run.facts.get("vllm_version"), run.engine, run.value("gpu_total_gib"))
    else:
        return False
    try:
        return d.low <= float(value) <= d.high
    except (TypeError, ValueError):
        return False


def describe(changes: Sequence[Dict[str, Any]]) -> str:
    """``max_model_len 32768 -> 8192, quantization default -> awq`` (None: vLLM's default,
    which a ``non-default args`` line leaves out)."""
    word = lambda v: "default" if v is None else v  # noqa: E731
    return ", ".join(f"{c['setting']} {word(c['was'])} -> {word(c['now'])}" for c in changes)


def _newest(runs: Sequence[Run], findings: Sequence[Finding]) -> Optional[Tuple[Run, bool]]:
    """``(newest run, True)`` when the source's newest run reached serving with no failing
    finding; ``(newest run, False)`` when it has not stopped (no failure, no "engine died"
    marker) but the log ends before it serves (a restart cut during startup); else None."""
    if len(runs) < 2:
        return None
    newest = runs[-1]
    if newest.opened_by in OTHER_SERVER:
        return None
    own = [f for f in findings if f.run == newest.index and failing(f)]
    if newest.phase >= Phase.READY:
        return None if own else (newest, True)
    if newest.failures or newest.consequences or newest.phase < Phase.CONFIG:
        return None
    # VD901's "the log ends after the startup arguments" is no failure of the run: it says
    # nothing shows how its startup went, which is what this case is
    if any(f.class_id != "unknown" or f.facts.get("phase_reached") != Phase.CONFIG.label for f in own):
        return None
    return newest, False


def _add_note(f: Finding, note: str) -> None:
    if note not in f.notes:
        f.notes.append(note)


def _done(r: Remedy, now: Any) -> bool:
    """The remedy's change is what ``now`` already is, or beyond it in its direction (a
    "lower to 12288" where 8192 runs)."""
    if r.value is None:
        return False
    if r.direction == "set":
        return same_value(r.value, now)
    try:
        a, b = float(now), float(r.value)
    except (TypeError, ValueError):
        return False
    return (r.direction == "lower" and a <= b) or (r.direction == "raise" and a >= b)


def _read_against(newest: Run, mine: Sequence[Finding], changes: Sequence[Dict[str, Any]]) -> None:
    """The newest run started with ``changes`` and the log ends before it serves: the failure
    stands, and says so; a remedy the newest run already carries out (its setting changed to
    the remedy's value or beyond) loses its number: its flag would undo the change."""
    note = (
        f"A later start (run {newest.index}) changed {describe(changes)}, and the log ends before it serves "
        f"(it reached {newest.phase.label}): whether the change fixed this is not shown; the remedies are this "
        "run's, read against its own settings"
    )
    now = {c["setting"]: c["now"] for c in changes}
    for f in mine:
        if not failing(f):
            continue
        _add_note(f, note)
        for r in f.remedies:
            if r.flag and r.setting in now and now[r.setting] is not None and _done(r, now[r.setting]):
                done = f"run {newest.index} already runs {r.setting} {now[r.setting]}"
                r.why = f"{done}; {r.why}" if r.why else done
                r.flag, r.value = None, None


def place_failures(runs: Sequence[Run], findings: Sequence[Finding]) -> None:
    """Mark or annotate, in place, the findings of ``runs`` (one source's, oldest first) that
    the newest run got past (see the module's doc). Idempotent: a second call changes
    nothing."""
    found = _newest(runs, findings)
    if found is None:
        return
    newest, serves = found
    neighbours = {n.index for n in newest.neighbours}
    served = newest.phase_lines.get(Phase.SERVING) or newest.phase_lines.get(Phase.READY)
    where = f"run {newest.index}" + (f", line {served.lineno}" if served is not None else "")
    for run in runs[:-1]:
        if run.index in neighbours or run.opened_by in OTHER_SERVER:
            continue
        mine = [f for f in findings if f.run == run.index]
        if not any(failing(f) for f in mine):
            continue
        if serves and refused_command_only(run):
            # the parser refused that command line and nothing ran; the newest run's command was
            # accepted and serves: what failed was the command, and it changed (breakit5 item 4)
            for f in mine:
                f.superseded = {"run": newest.index, "changes": [dict(REFUSED_THEN_ACCEPTED)]}
            continue
        changes, same = compare(run, newest, [f for f in mine if failing(f)])
        if not serves:
            if changes:
                _read_against(newest, mine, changes)
            continue
        if changes:
            for f in mine:
                f.superseded = {"run": newest.index, "changes": [dict(c) for c in changes]}
            continue
        if same:
            note = (
                f"The server came back ({where}) with the same configuration as far as the log prints it "
                f"({', '.join(same)}) and reached serving: an automatic restart (systemd, Kubernetes, a "
                "supervisor) changes nothing, so this failure will likely recur"
            )
        else:
            note = (
                f"The server came back ({where}) and reached serving, but the log prints none of the settings "
                "of both runs: whether anything was changed (and this failure fixed) is not known"
            )
        for f in mine:
            if failing(f):
                _add_note(f, note)


def serving_title(findings: Sequence[Finding]) -> Optional[str]:
    """A clean verdict's headline when a failure was superseded: ``Serving now (run 2,
    max_model_len 32768 -> 8192); an earlier run failed: VD101 kv_cache_capacity <title>
    (superseded by the change)``; None when none was."""
    old = next((f for f in findings if f.superseded and failing(f)), None)
    if old is None:
        return None
    s = old.superseded
    return (
        f"Serving now (run {s['run']}, {describe(s['changes'])}); an earlier run failed: "
        f"{old.code} {old.class_id} {old.title} (superseded by the change)"
    )


def superseded_line(f: Finding) -> Optional[str]:
    """What a view prints instead of a superseded finding's remedies; None for any other."""
    s = f.superseded
    if not s:
        return None
    return (
        f"superseded: run {s['run']} serves with {describe(s['changes'])}; "
        "this run's remedies are not repeated (the change was made, and their numbers were this run's)"
    )
