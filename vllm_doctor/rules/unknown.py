"""The server failed, but the root cause is not in this log (or nothing is vLLM output).

What it means:
    The log shows that something died ("Engine core initialization failed. See root cause
    above", "Engine core proc EngineCore_DP0 died unexpectedly", a traceback cut before its
    exception line) but not why: the root cause was printed by another process (the
    EngineCore or a worker) or outside the excerpt. Or the input holds nothing recognisable
    as vLLM output at all, or is a document that only quotes vLLM's messages (a README, a
    chat, a wiki page: long, no line with vLLM's record prefix, few of them vLLM's), and no
    finding is made (exit code 3; the headline reads "nothing judged: no vLLM output").

Why it happens:
    Only the API server's tail was copied; the engine process was killed from outside (host
    OOM killer, a segfault) so it printed nothing; the log was cut.

    Five weaker variants are warnings, not failures: they only rule out "healthy". vLLM
    logged ERROR lines that no rule explains (a wording the catalog does not know yet);
    requests were answered with HTTP 5xx while no error line says why; the log stops where
    LMCache creates its engine in each worker, which pins its CPU buffer (``max_local_cpu_size``
    per worker) in host RAM; the log stops after the startup arguments, so nothing shows how
    startup went; the text around a pasted log reports a failure (a person's "I see a
    different error (below)") that the log does not show.

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

from .. import thresholds
from ..catalog.stalls import reported_excerpt
from ..events import Phase
from ..frames import phase_of, step_tag
from ..run import Failure, Run
from ..verdict import Finding, Remedy
from .device import device_words, platform_of
from .plan import env_set
from .rule import Rule, consequence_evidence, ev, failure_evidence, finding, remedy
from .tree import cut_short, memory_class_at

#: Startup steps a cut traceback or the run's progress can name, in words.
STEP_WORDS = {
    Phase.LOADING_WEIGHTS: "loading the weights",
    Phase.WEIGHTS_LOADED: "profiling memory after the weights loaded",
    Phase.KV_SIZING: "sizing or allocating the KV cache",
    Phase.GRAPH_CAPTURE: "capturing CUDA graphs",
    Phase.WARMUP: "warming up the sampler",
}


#: Steps after startup a traceback's frames name (frames.TAG_FUNCS tags), in words.
TAG_WORDS = {
    "wake_up": "waking from sleep mode",
    "runtime": "running a model step",
    "too_long": "checking a request's length",
    "oversized_input": "computing a request's prompt logprobs",
    "multimodal_input": "encoding a request's image or video",
    "startup": "starting the engine",
    "quant_check": "checking the quantization",
}


def step_words(tags) -> str:
    """What the traceback's frames say vLLM was doing, in words ("" when they say nothing):
    the most specific step (:func:`vllm_doctor.frames.step_tag`)."""
    tag = step_tag(tags)
    if tag is None:
        return ""
    return TAG_WORDS.get(tag) or STEP_WORDS.get(phase_of({tag}), "")


def said(step: Phase, run: Run, failures: Sequence[Failure] = ()) -> str:
    """:data:`STEP_WORDS` of ``step`` in the run's platform's words: graphs are CUDA graphs
    captured on NVIDIA, HPU graphs warmed up on Gaudi, XLA programs compiled on TPU
    (rules/device.py)."""
    if step == Phase.GRAPH_CAPTURE:
        return device_words(run, failures)["capture"]
    return STEP_WORDS[step]


def _if_oom(cls: str, run: Run, failures: Sequence[Failure], because: str) -> Remedy:
    """The remedy for "if the error cut off was out of memory": the class's explain page, or on
    Gaudi the HPU graph warm-up's own levers (vllm-gaudi docs, configuration/performance_tuning:
    HPU graphs and the KV cache share the usable pool, VLLM_GRAPH_RESERVED_MEM is the graphs'
    share; VLLM_SKIP_WARMUP, unless the log shows it set: no warm-up ran), never CUDA's."""
    if (
        cls == "cuda_graph_capture_oom"
        and platform_of(run, failures) == "hpu"
        and not env_set(run, "VLLM_SKIP_WARMUP", "true")
    ):
        because += "; the bucket sizes in force are not in the log"
        return remedy(
            "If the error cut off was out of memory during the HPU graph warm-up: fewer or shorter warm-up buckets "
            "(a lower --max-model-len, --max-num-seqs), a larger share of the pool for the graphs (a higher "
            "VLLM_GRAPH_RESERVED_MEM: less for the KV cache), or VLLM_SKIP_WARMUP=true to check the rest of startup",
            None,
            because,
        )
    return remedy(
        f"If the error cut off was out of memory, this is {cls}: see `vllm-doctor explain {cls}` for its remedies",
        None,
        because,
    )


def _phase_of_consequences(run: Run) -> str:
    hints = {c.phase_hint for c in run.consequences}
    if "startup" in hints or (run.phase < Phase.READY and "runtime" not in hints):
        return "startup"
    return "runtime"


_DONT = ["Guessing a memory class: the evidence is not in this log"]


def _collect() -> Remedy:
    return remedy(
        "Collect the lines printed above by the engine and worker processes (journalctl -u UNIT, "
        "kubectl logs --all-containers, docker logs) and diagnose again",
        None,
        None,
        "host",
    )


def _died(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """Something died (a consequence marker, a traceback cut before its exception) and the
    run does not say why."""
    markers = [c.marker if c.marker != "exception" else c.exception for c in run.consequences]
    facts = {"consequence_markers": [m for m in markers if m][:6]}
    frames = [fr for f in failures for fr in f.data.get("frames", [])][-6:]
    if frames:
        facts["last_frames"] = frames
    step = next((p for p in (phase_of(f.tags) for f in failures) if p is not None), None)
    shown_by = "its traceback's frames show it failed while"
    if step is None and phase == "startup" and Phase.CONFIG < run.phase < Phase.READY:
        step, shown_by = run.phase, "the run had got as far as"
    where = f" while {said(step, run, failures)}" if step in STEP_WORDS else ""
    if step in STEP_WORDS:
        facts["step"] = step.label
    if run.consequences:  # what the log says died, rather than the cut traceback under it
        # syslog's escaped controls (#015, #033[...m) and caret codes are undone by the reader
        # (vllm_doctor.envelopes._clean), so the quoted line is vLLM's text.
        first = run.consequences[0].line.text.strip()
        if len(first) > 110:
            first = first[:107] + "..."
        title = f"{phase.capitalize()} failure{where}, root cause not in this log: {first}"
    else:
        title = (
            f"{phase.capitalize()} failure{where}: a traceback without its exception line; the root cause is not in "
            "this log"
        )
    cls = memory_class_at(step) if step in STEP_WORDS else None
    rem = [
        _collect(),
        _if_oom(cls, run, failures, f"{shown_by} {said(step, run, failures)}") if cls else None,
        remedy(
            "If the engine died without a traceback: look for the host OOM killer or a segfault "
            "(dmesg | grep -i -e oom -e segfault)",
            None,
            None,
            "host",
        ),
    ]
    evidence = consequence_evidence(run, 3) + failure_evidence(failures)
    return finding(RULE, run, phase, title, facts, evidence, rem, _DONT)


def _exception(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """An exception no rule explains ends what the log shows, and nothing after it shows the
    server went on serving (or the line is cut where it may have said "out of memory"): name
    it, and the last step vLLM's frames show."""
    f = failures[0]
    name = f.data.get("exception") or f.exception or "Exception"
    msg = str(f.data.get("message", ""))
    text = f"{name}: {msg}" if msg else name
    shown = text if len(text) <= 100 else text[:97] + "..."
    tags = f.all_tags
    doing = step_words(tags)
    if doing and doing == STEP_WORDS[Phase.GRAPH_CAPTURE]:
        doing = said(Phase.GRAPH_CAPTURE, run, failures)  # the platform's graphs (rules/device.py)
    where = f" while {doing}" if doing else ""
    cut = cut_short(f, run)
    facts = {"exception": name, "message": msg[:300]}
    frames = f.data.get("frames") or []
    if frames:
        facts["last_frames"] = frames[-6:]
    step = step_tag(tags)
    if step is not None:
        facts["step"] = step
    if cut:
        facts["cut"] = True
        title = f"{phase.capitalize()} failure{where}: the exception line is cut ('{shown}'); it may have said out of memory"
    else:
        title = f"{phase.capitalize()} failure{where}: {shown} (no rule explains this exception)"
    p = phase_of(tags)
    cls = "runtime_oom" if phase == "runtime" else memory_class_at(p) if p in STEP_WORDS else None
    if cut and step == "wake_up":
        oom = remedy(
            "If the cut text was 'out of memory': free what the co-located process (the trainer of an RL loop) "
            "holds before waking the engine, or put that one to sleep first; see `vllm-doctor explain runtime_oom`",
            None,
            "the frames show it failed while waking from sleep mode",
        )
    elif cut and cls == "cuda_graph_capture_oom" and platform_of(run, failures) == "hpu":
        oom = _if_oom(cls, run, failures, f"the frames show it failed while {doing}")
    elif cut and cls:
        oom = remedy(
            f"If the cut text was 'out of memory', this is {cls}: see `vllm-doctor explain {cls}` for its remedies",
            None,
            f"the frames show it failed while {doing}" if doing else "the line is cut where it may say out of memory",
        )
    else:
        oom = None
    rem = [
        oom,
        remedy(f"Look up '{shown}' for your vLLM, PyTorch and driver versions", None, "no rule knows this exception")
        if not cut
        else None,
        _collect(),
    ]
    evidence = failure_evidence(failures[:1], "the exception") + consequence_evidence(run, 2)
    severity = "critical" if f.data.get("vllm_frames") or cut else "warning"
    return finding(RULE, run, phase, title, facts, evidence, rem, _DONT, severity=severity)


def _unexplained_errors(run: Run) -> Finding:
    line = run.first_unexplained_error
    text = line.text.strip()
    shown = text if len(text) <= 100 else text[:97] + "..."
    title = f"vLLM logged {run.unexplained_errors} ERROR line(s) no rule explains, the first: {shown}"
    facts = {"unexplained_errors": run.unexplained_errors}
    rem = [
        remedy(f"Read the first one and the lines around it: '{shown}'", None, "an error the catalog does not know"),
        _collect(),
    ]
    phase = "startup" if run.phase < Phase.READY else "runtime"
    return finding(
        RULE, run, phase, title, facts, [ev(line, "not explained")], rem, _DONT, severity="warning", confidence="low"
    )


def _server_errors(run: Run) -> Finding:
    n = run.http.by_bucket.get("5xx", 0)
    statuses = {str(k): v for k, v in sorted(run.http.by_status.items()) if k >= 500}
    title = f"{n} requests answered with HTTP 5xx and no error line says why"
    facts = {"http_5xx": n, "http_status": statuses}
    rem = [
        _collect(),
        remedy(
            "Check the engine process's health: the API server answers 5xx when the engine is dead or wedged",
            None,
            "GET /health, and the engine's own log",
            "host",
        ),
    ]
    evidence = [ev(run.http.first_5xx, "first 5xx"), ev(run.http.last_5xx, "last 5xx")]
    return finding(RULE, run, "runtime", title, facts, evidence, rem, _DONT, severity="warning", confidence="low")


def _startup_cut(run: Run) -> Finding:
    title = "The log ends after the startup arguments: nothing in it shows how startup went"
    facts = {"phase_reached": run.phase.label}
    rem = [_collect()]
    evidence = [ev(run.phase_lines.get(Phase.CONFIG), "the last startup step in the log")]
    return finding(RULE, run, "startup", title, facts, evidence, rem, _DONT, severity="warning", confidence="low")


def _reported_failure(run: Run) -> Finding:
    """The text around the log reports a failure (catalog/stalls.py ``reported_failure``:
    prose, not vLLM's words: "I see a different error (below)") that the log does not show:
    not health, and nothing here says which failure. A warning, low confidence."""
    said = run.markers["reported_failure"]
    shown = reported_excerpt("reported_failure", said.text)
    where = f"; the log ends at {run.phase.label}" if Phase.CONFIG <= run.phase < Phase.READY else ""
    title = f"The text around the log reports a failure the log does not show ('{shown}'){where}"
    facts = {"reported_failure": True, "phase_reached": run.phase.label}
    rem = [
        remedy(
            "Find the failure the report names: the lines after the last one here (the excerpt stops before it)",
            None,
            "nothing in this log failed; the report says something did",
        ),
        _collect(),
    ]
    evidence = [ev(said, "the report's words")]
    last = run.phase_lines.get(run.phase)
    if last is not None and last.lineno != said.lineno:
        evidence.append(ev(last, "the furthest step the log shows"))
    return finding(
        RULE, run, _phase_of_consequences(run), title, facts, evidence, rem, _DONT, severity="warning", confidence="low"
    )


def _lmcache_stopped(run: Run) -> bool:
    """The log stops where LMCache creates its engine (catalog/host_memory.py): its CPU buffer
    was the last thing the workers allocated, nothing failed, nothing started after."""
    return (
        "lmcache_engine" in run.facts
        and run.phase < Phase.LOADING_WEIGHTS
        and not run.failures
        and not run.consequences
        and not run.stats.count
    )


def _lmcache_buffer(run: Run) -> Finding:
    """Each worker (TP rank) pins LMCache's CPU buffer in host RAM when its engine is created: the
    buffer times the workers is what the host must hold, and a log that stops there is most
    often a host (or pod) OOM kill (LMCache/LMCache#792)."""
    size = run.facts.get("lmcache_local_cpu_gb")
    ranks = {rank for _, rank in run.worker_procs if rank is not None}
    tp = run.value("tensor_parallel_size")
    # a worker of rank r printed: at least r + 1 workers (ranks count from 0)
    workers = max(max(ranks) + 1 if ranks else 0, tp if isinstance(tp, int) else 0, 1)
    least = "" if isinstance(tp, int) and tp >= workers else "at least "
    facts = {"lmcache_engine": run.facts["lmcache_engine"], "workers": workers}
    if isinstance(size, (int, float)):
        facts.update(lmcache_local_cpu_gb=size, lmcache_host_total_gb=size * workers)
        held = (
            f": {least}{workers} worker(s) x {size:g} GB of pinned host RAM (max_local_cpu_size) = "
            f"{least}{size * workers:g} GB"
        )
    else:
        held = ""
    title = f"The log ends while LMCache creates its engine{held}"
    rem = [
        remedy(
            "Check whether the host's OOM killer or the pod's memory limit ended the workers (dmesg -T | grep -i "
            "'killed process'; kubectl describe pod: Last State Reason OOMKilled)",
            None,
            "LMCache allocates its CPU buffer, pinned, in every worker as its engine is created",
            "host",
        ),
        remedy(
            "Lower LMCACHE_MAX_LOCAL_CPU_SIZE (max_local_cpu_size) so that it times the workers fits the host's free RAM"
            + (f" ({workers} x {size:g} GB now)" if isinstance(size, (int, float)) else ""),
            None,
            "the size is per worker: each tensor-parallel rank pins its own buffer",
            "host",
        ),
        _collect(),
    ]
    lines = [run.line_for("lmcache_local_cpu_gb"), run.line_for("lmcache_engine")]
    evidence = [ev(lines[0], "the CPU buffer per worker"), ev(lines[1], "the last step in the log")]
    return finding(
        RULE,
        run,
        "startup",
        title,
        facts,
        evidence,
        rem,
        ["GPU memory settings (gpu_memory_utilization, max_model_len): the buffer is host RAM"],
        severity="warning",
        confidence="low",
    )


def check(run: Run, failures: Sequence[Failure], phase: str = "") -> List[Finding]:
    """The variants, in order: a traceback without its exception (routed here); something
    died with no root cause in the run; ERROR lines no rule explains; requests answered 5xx
    without an error line; a log that stops after the startup arguments. The last three are
    warnings: they rule out "healthy" without claiming a failure. All give way to any finding
    that names a root cause (see :func:`vllm_doctor.rules.diagnose_run`)."""
    exceptions = [f for f in failures if f.kind == "exception"]
    if exceptions:
        return [_exception(run, exceptions, phase)]
    if failures:
        return [_died(run, failures, phase)]
    if not run.failures and any(c.marker != "ray_worker_died" for c in run.consequences):
        return [_died(run, [], _phase_of_consequences(run))]
    if run.unexplained_errors:
        return [_unexplained_errors(run)]
    if run.http.by_bucket.get("5xx", 0) >= thresholds.HTTP_5XX_FINDING:
        return [_server_errors(run)]
    if _lmcache_stopped(run):
        return [_lmcache_buffer(run)]
    if run.phase == Phase.CONFIG and not run.failures and not run.consequences and not run.stats.count:
        return [_startup_cut(run)]
    if "reported_failure" in run.markers and run.phase > Phase.NONE and not run.failures and not run.consequences:
        return [_reported_failure(run)]
    return []


RULE = Rule(
    code="VD901",
    name="unknown",
    severity="critical",
    summary="Something failed but the root cause is not in this log; or nothing is vLLM output.",
    doc=__doc__,
    check=check,
)
