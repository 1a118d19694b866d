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

import sys
from typing import Any, Sequence

from ..tracker import Failure, Run
from .base import R, consequence_evidence, failure_evidence, make_finding, remedies

CLASS = "unknown"
CODE = "VD901"
SEVERITY = "critical"
SUMMARY = "Something failed but the root cause is not in this log; or nothing is vLLM output."


def build(failures: Sequence[Failure], run: Run, phase: str) -> Any:
    mod = sys.modules[__name__]
    markers = [c.data.get("marker") or c.data.get("exception") for c in run.consequences]
    facts = {"consequence_markers": [m for m in markers if m][:6]}
    frames = [fr for f in failures for fr in f.data.get("frames", [])][-6:]
    if frames:
        facts["last_frames"] = frames
    if run.consequences and not failures:
        first = run.consequences[0].record.text.strip()
        if len(first) > 110:
            first = first[:107] + "..."
        title = f"{phase.capitalize()} failure, root cause not in this log: {first}"
    else:
        title = (
            f"{phase.capitalize()} failure: a traceback without its exception line; the root cause is not in this log"
        )
    rem = remedies(
        R(
            "Collect the lines printed above by the engine and worker processes (journalctl -u UNIT, "
            "kubectl logs --all-containers, docker logs) and diagnose again",
            None,
            None,
            "host",
        ),
        R(
            "If the engine died without a traceback: look for the host OOM killer or a segfault (dmesg | grep -i -e oom -e segfault)",
            None,
            None,
            "host",
        ),
    )
    return make_finding(
        mod,
        run,
        phase,
        title,
        facts,
        consequence_evidence(run, 3) + failure_evidence(failures),
        rem,
        ["Guessing a memory class: the evidence is not in this log"],
    )
