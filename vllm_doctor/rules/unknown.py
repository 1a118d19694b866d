"""The server failed, but the root cause is not in this log (or nothing is vLLM output).

What it means:
    The log shows that something died ("Engine core initialization failed. See root cause
    above", "Engine core proc EngineCore_DP0 died unexpectedly", a traceback cut before its
    exception line) but not why: the root cause was printed by another process (the
    EngineCore or a worker) or outside the excerpt. Or the input holds nothing recognisable
    as vLLM output at all (exit code 3).

Why it happens:
    Only the API server's tail was copied; the engine process was killed from outside (host
    OOM killer, a segfault) so it printed nothing; the log was cut.

Remedies, in order:
    1. Collect the lines above: the EngineCore / worker output (``journalctl -u UNIT``,
       ``kubectl logs --all-containers``, ``docker logs`` of the whole container).
    2. For an engine killed without a traceback: check the host's kernel log for the OOM
       killer (``dmesg | grep -i oom``) and for segfaults.

What does not help:
    Guessing a memory class from the title of the report.

Sources:
    vllm/v1/engine/utils.py wait_for_engine_startup; vllm/v1/engine/core_client.py.
"""

from __future__ import annotations

from typing import List, Sequence

from ..events import Phase
from ..run import Failure, Run
from ..verdict import Finding
from .rule import Rule, consequence_evidence, failure_evidence, finding, remedy


def _phase_of_consequences(run: Run) -> str:
    hints = {c.phase_hint for c in run.consequences}
    if "startup" in hints or (run.phase < Phase.READY and "runtime" not in hints):
        return "startup"
    return "runtime"


def check(run: Run, failures: Sequence[Failure], phase: str = "") -> List[Finding]:
    if not failures:
        # Something died and nothing in the run says why.
        if run.failures or not any(c.marker != "ray_worker_died" for c in run.consequences):
            return []
        phase = _phase_of_consequences(run)
    markers = [c.marker if c.marker != "exception" else c.exception for c in run.consequences]
    facts = {"consequence_markers": [m for m in markers if m][:6]}
    frames = [fr for f in failures for fr in f.data.get("frames", [])][-6:]
    if frames:
        facts["last_frames"] = frames
    if run.consequences and not failures:
        first = run.consequences[0].line.text.strip()
        if len(first) > 110:
            first = first[:107] + "..."
        title = f"{phase.capitalize()} failure, root cause not in this log: {first}"
    else:
        title = (
            f"{phase.capitalize()} failure: a traceback without its exception line; the root cause is not in this log"
        )
    rem = [
        remedy(
            "Collect the lines printed above by the engine and worker processes (journalctl -u UNIT, "
            "kubectl logs --all-containers, docker logs) and diagnose again",
            None,
            None,
            "host",
        ),
        remedy(
            "If the engine died without a traceback: look for the host OOM killer or a segfault "
            "(dmesg | grep -i -e oom -e segfault)",
            None,
            None,
            "host",
        ),
    ]
    evidence = consequence_evidence(run, 3) + failure_evidence(failures)
    return [
        finding(
            RULE, run, phase, title, facts, evidence, rem, ["Guessing a memory class: the evidence is not in this log"]
        )
    ]


RULE = Rule(
    code="VD901",
    name="unknown",
    severity="critical",
    summary="Something failed but the root cause is not in this log; or nothing is vLLM output.",
    doc=__doc__,
    check=check,
)
