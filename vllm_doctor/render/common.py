"""Pieces the human renderers (text, Markdown, the follow summary, the chart) share.

* :func:`fact_rows` - the key facts of a finding as ``(label, value)`` rows in words a person
  reads (``GPU 0``, ``23.56 GiB total, 21.75 MiB free``), never internal names with mixed units;
  configuration keeps vLLM's own names (``max_model_len``), as the flags do.
* :func:`evidence_rows` and :func:`clip` - evidence in line order, one row per line, clipped to
  the clauses that matter (the full line stays in JSON and in the ticket's details).
* :func:`incident_times`, :func:`finding_time` - when it happened, in the log's own time.
* :func:`where`, :func:`display_source` - host, pod and file as a ticket names them.
* :func:`episode` and :func:`sparkline` - the stats series of a runtime finding as a picture.
* :func:`symptom_title` - a ticket title that says what happened, where and when.

Everything here takes an already inert verdict (:mod:`.inert`) and returns plain strings;
quoting for a format is the renderer's business.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import regex

#: The clip marker: text of the log line left out here (the full line is in JSON / Markdown).
CLIP = "\u2026"  # …

# -- facts ------------------------------------------------------------------------------


def size(gib: Any) -> Optional[str]:
    """A memory size given in GiB as vLLM and PyTorch print it: ``21.75 MiB`` below 1 GiB,
    ``23.56 GiB`` above; None for a missing or non-numeric value."""
    if isinstance(gib, bool) or not isinstance(gib, (int, float)):
        return None
    return f"{gib * 1024:.2f} MiB" if abs(gib) < 1 else f"{gib:.2f} GiB"


def number(value: Any) -> str:
    """A plain number the way a flag takes it (``29000``, ``0.9``); other values as text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "none"
    return str(value)


def fmt_value(key: str, value: Any) -> str:
    """One fact value with its unit, by the suffix of its name (``_gib`` a size, ``_pct`` a
    percentage, ``_seconds`` seconds); anything else as :func:`number` gives it."""
    if key.endswith("_gib") and size(value):
        return size(value)
    if key.endswith("_pct") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.1f}%"
    if key.endswith("_seconds") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g} s"
    return number(value)


def _join(*parts: Optional[str], sep: str = ", ") -> Optional[str]:
    kept = [p for p in parts if p]
    return sep.join(kept) if kept else None


def _gpu(p: Dict[str, Any]) -> Optional[str]:
    total, free = size(p.get("gpu_total_gib")), size(p.get("gpu_free_gib"))
    return _join(
        p.get("gpu_name") and str(p["gpu_name"]),
        p.get("device") and f"device {p['device']}",
        total and f"{total} total",
        free and f"{free} free",
    )


def _gpu_label(p: Dict[str, Any]) -> str:
    return f"GPU {p['gpu_index']}" if isinstance(p.get("gpu_index"), int) else "GPU"


def _co_tenants(p: Dict[str, Any]) -> Optional[str]:
    pids = p.get("co_tenant_pids")
    if pids is None:
        return None
    if not pids:
        return "none listed (vLLM's own process only)"
    held = p.get("co_tenant_gib") or {}
    return ", ".join(
        f"PID {pid}" + (f" ({size(held.get(str(pid)))})" if size(held.get(str(pid))) else "") for pid in pids
    )


def _kv(p: Dict[str, Any]) -> Optional[str]:
    tokens = p.get("kv_tokens")
    conc = p.get("max_concurrency")
    return _join(
        size(p.get("kv_available_gib")),
        f"{tokens} tokens" if isinstance(tokens, int) else None,
        f"{conc:g}x concurrency at max_model_len" if isinstance(conc, (int, float)) else None,
    )


def _request(p: Dict[str, Any]) -> Optional[str]:
    prompt, mx, total = p.get("prompt_tokens"), p.get("max_tokens"), p.get("requested_tokens")
    if prompt is None and total is None:
        return None
    parts = [f"{prompt} prompt tokens" if prompt is not None else None, f"max_tokens {mx}" if mx is not None else None]
    return _join(*parts, f"{total} in all" if total is not None else None)


def _stats(p: Dict[str, Any]) -> Optional[str]:
    kv, run, wait = p.get("peak_kv_usage_pct"), p.get("max_running"), p.get("max_waiting")
    secs = p.get("saturated_seconds")
    return _join(
        f"KV cache up to {kv:.1f}%" if isinstance(kv, (int, float)) else None,
        f"up to {run} running" if run is not None else None,
        f"up to {wait} waiting" if wait is not None else None,
        f"saturated for {secs:g} s" if isinstance(secs, (int, float)) and secs else None,
    )


def _preemptions(p: Dict[str, Any]) -> Optional[str]:
    n = p.get("max_preemptions")
    if n is None:
        return None
    mode = p.get("preemption_mode")
    return f"{n} (cumulative)" + (f", mode {mode}" if mode else "")


def _exception(p: Dict[str, Any]) -> Optional[str]:
    exc, msg = p.get("exception"), p.get("message")
    if not exc:
        return None
    return f"{exc}: {msg}" if msg and str(msg) not in str(exc) else str(exc)


def _fits_len(p: Dict[str, Any]) -> Optional[str]:
    if p.get("fitting_max_model_len") is not None:
        return str(p["fitting_max_model_len"])
    if p.get("estimated_max_model_len") is not None:
        return f"{p['estimated_max_model_len']} (vLLM's estimate)"
    return None


def _util_fits(p: Dict[str, Any]) -> Optional[str]:
    for key in ("gpu_memory_utilization_needed", "gpu_memory_utilization_that_fits"):
        if isinstance(p.get(key), (int, float)):
            return f"{p[key]:g}"
    return None


def _plain(key: str) -> Callable[[Dict[str, Any]], Optional[str]]:
    return lambda p: fmt_value(key, p[key]) if p.get(key) is not None else None


#: The key-fact rows, in reading order: (label, value from the pool of facts, or None).
#: Configuration keeps vLLM's own names (as the flags do); measured values are named in words.
FACT_ROWS: Tuple[Tuple[Any, Callable[[Dict[str, Any]], Optional[str]]], ...] = (
    ("Exception", _exception),
    (_gpu_label, _gpu),
    ("Failed allocation", lambda p: size(p.get("tried_to_allocate_gib"))),
    ("Held by vLLM", lambda p: size(p.get("vllm_process_gib"))),
    ("Other processes", _co_tenants),
    ("Held by others", lambda p: size(p.get("held_by_others_gib")) if p.get("co_tenant_pids") is None else None),
    ("Requested at startup", lambda p: size(p.get("requested_gib"))),
    (
        "Fragmentation",
        lambda p: (
            _join(size(p.get("reserved_unallocated_gib")), "reserved but unallocated", sep=" ")
            if isinstance(p.get("reserved_unallocated_gib"), (int, float)) and p["reserved_unallocated_gib"] >= 1
            else None
        ),
    ),
    ("max_model_len", _plain("max_model_len")),
    ("gpu_memory_utilization", _plain("gpu_memory_utilization")),
    ("tensor_parallel_size", _plain("tensor_parallel_size")),
    ("kv_cache_dtype", _plain("kv_cache_dtype")),
    ("max_num_seqs", _plain("max_num_seqs")),
    ("max_num_batched_tokens", _plain("max_num_batched_tokens")),
    ("Weights", lambda p: size(p.get("weights_gib"))),
    ("KV cache", _kv),
    (
        "KV cache needed",
        lambda p: (
            _join(size(p.get("kv_needed_gib")), "for one max_model_len request", sep=" ")
            if size(p.get("kv_needed_gib"))
            else None
        ),
    ),
    ("max_model_len that fits", _fits_len),
    (lambda p: "Utilization needed" if "gpu_memory_utilization_needed" in p else "Utilization that fits", _util_fits),
    ("Model's own limit", lambda p: str(p["derived_max_model_len"]) if p.get("derived_max_model_len") else None),
    ("Request", _request),
    ("Sampler warm-up", lambda p: f"{p['dummy_requests']} dummy requests" if p.get("dummy_requests") else None),
    ("Preemptions", _preemptions),
    ("Stats lines", _stats),
)


def fact_pool(verdict, finding) -> Dict[str, Any]:
    """What is known about ``finding``'s run: its configuration and startup facts, then the
    finding's own facts over them (for ``finding`` None: the newest run's)."""
    pool: Dict[str, Any] = {}
    run = run_of(verdict, finding)
    if run is not None:
        pool.update(run.facts)
        pool.update(run.config)
    if finding is not None:
        pool.update(finding.facts)
    return {k: v for k, v in pool.items() if v is not None}


def fact_rows(verdict, finding) -> List[Tuple[str, str]]:
    """The key facts of ``finding`` (or of the newest run when None) as ``(label, value)``
    rows (see :data:`FACT_ROWS`); ``vLLM``, ``model`` and host are :func:`context_rows`."""
    pool = fact_pool(verdict, finding)
    rows = []
    for label, get in FACT_ROWS:
        value = get(pool)
        if value is not None:
            rows.append((label(pool) if callable(label) else label, value))
    return rows


def context_rows(verdict, finding) -> List[Tuple[str, str]]:
    """Where it ran: ``vLLM`` (version, engine), ``model``, host / pod / process."""
    pool = fact_pool(verdict, finding)
    rows = []
    if "vllm_version" in pool or "engine" in pool:
        version = str(pool.get("vllm_version", ""))
        engine = f"engine {pool['engine']}" if "engine" in pool else ""
        rows.append(("vLLM", f"{version}, {engine}" if version and engine else version or engine))
    if "model" in pool:
        rows.append(("Model", str(pool["model"])))
    if finding is not None:
        rows += [(k, v) for k, v in where(finding.source)]
    return rows


def run_of(verdict, finding):
    """The :class:`~vllm_doctor.verdict.RunSummary` of ``finding`` (None finding: the newest
    run of the first source; None when there is none)."""
    for run in verdict.runs:
        if finding is None or (run.source == finding.source and run.index == finding.run):
            return run
    return None


# -- sources ----------------------------------------------------------------------------

_SUBSOURCE = regex.compile(r"^(?P<input>.*?) \[(?P<key>[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*)\]$")


def split_source(name: str) -> Tuple[str, str]:
    """``("x.log", "pod/p/c")`` for the sub-source ``x.log [pod/p/c]``; ``(name, "")`` else."""
    m = _SUBSOURCE.match(name or "")
    return (m["input"], m["key"]) if m else (name or "", "")


def where(source: str) -> List[Tuple[str, str]]:
    """Host, pod and process a sub-source name says (``kubectl logs --prefix``:
    ``pod/NAME/CONTAINER``; journald: ``UNIT[PID]@HOST``), as ``(label, value)`` rows."""
    _, key = split_source(source)
    if key.startswith("pod/"):
        _, pod, container = (key.split("/", 2) + ["", ""])[:3]
        return [("Pod", pod + (f" (container {container})" if container else ""))]
    if "@" in key:
        unit, host = key.rsplit("@", 1)
        return (
            [("Host", host + (f" (process {unit})" if unit else ""))] if host and host != "?" else [("Process", unit)]
        )
    return []


def display_source(name: str) -> str:
    """``name`` as a ticket shows it: as given on the command line, but an absolute path only
    by its file name (the operator's directories are not the reader's), sub-source kept."""
    inp, key = split_source(name)
    if os.path.isabs(inp):
        inp = os.path.basename(inp) or inp
    return f"{inp} [{key}]" if key else inp


def short_source(name: str, limit: int = 40) -> str:
    """``name`` for a line that must stay short: the file name without its directories
    (shortened in the middle past ``limit`` characters), the sub-source (which tells pods
    and hosts apart) kept whole."""
    inp, key = split_source(name)
    if inp not in ("-", "<stdin>"):
        inp = os.path.basename(inp.rstrip("/")) or inp
    if len(inp) > limit:
        keep = max(limit - 1, 8)
        inp = inp[: keep // 2] + CLIP + inp[-(keep - keep // 2) :]
    return f"{inp} [{key}]" if key else inp


# -- evidence -----------------------------------------------------------------------------

# Where a clause ends: after . ; , : followed by a space, or before an opening parenthesis.
_CLAUSE_END = regex.compile(r"(?<=[.;,:!?])\s+|\s+(?=\()")
# A note that names a configuration value or fact ("max_model_len = 29000", "weights_gib"):
# context for the incident, not the incident itself.
_CONTEXT_NOTE = regex.compile(r"^(?:[a-z][a-z0-9_]*(?: = .*)?|phase: .*)$")


def is_context(note: Optional[str]) -> bool:
    """True for evidence that shows a setting or a startup fact (its note names the key),
    False for the lines of the incident itself (the error, a consequence, a stats line)."""
    return bool(note) and bool(_CONTEXT_NOTE.match(note))


#: The facts whose numbers mark the clauses of an incident's line worth keeping, most
#: important first (the failed allocation and what was free before the totals).
ANCHOR_FACTS = (
    "tried_to_allocate_gib",
    "gpu_free_gib",
    "gpu_total_gib",
    "max_model_len",
    "kv_available_gib",
    "kv_needed_gib",
    "estimated_max_model_len",
    "kv_tokens",
    "requested_gib",
    "initial_free_gib",
    "current_free_gib",
    "dummy_requests",
    "requested_tokens",
    "prompt_tokens",
    "max_tokens",
    "derived_max_model_len",
    "max_preemptions",
)


def anchors_for(note: Optional[str], facts: Optional[Dict[str, Any]] = None) -> List[str]:
    """Text a clipped line must keep: for a setting's line, the key its note names
    (``gpu_memory_utilization = 0.9`` keeps ``gpu_memory_utilization``) and the value; for an
    incident's line, the numbers the finding reads from the log (``9.97``, ``434176``: the
    clauses that carry them are the ones that matter) and co-tenant processes (``Process 4242``)."""
    out: List[str] = []
    if note and is_context(note):
        key, _, value = note.partition(" = ")
        out += [key, key.replace("_gib", "").replace("_", " ")]
        if len(value) >= 3:
            out.append(value)
        return [a for a in out if a]
    # Co-tenant processes first: on a crowded GPU the process list is what matters most.
    out += [f"Process {pid} " for pid in (facts or {}).get("co_tenant_pids") or []]
    for key in ANCHOR_FACTS:
        value = (facts or {}).get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if key.endswith("_gib"):  # as PyTorch and vLLM print a size: MiB below 1 GiB
            out.append(size(value))
        elif isinstance(value, int) and abs(value) >= 100:
            out += [str(value), f"{value:,}"]
        elif isinstance(value, float) and abs(value) >= 1:
            out += [f"{value:.2f}", f"{value:g}"]
    return [a for a in dict.fromkeys(out) if a]


def clip(text: str, budget: int, anchors: Sequence[str] = ()) -> Tuple[str, bool]:
    """``text`` cut to at most ``budget`` characters at clause boundaries: the opening clause
    (it says which message this is), the clauses holding one of ``anchors`` (most important
    first, as many as fit), then as much of the rest in order as fits, preferring to stop at
    the end of a sentence. Each gap is marked with :data:`CLIP`. Returns ``(text, clipped)``."""
    text = text.strip()
    budget = max(budget, 20)
    if len(text) <= budget:
        return text, False
    spans, pos = [], 0
    for m in _CLAUSE_END.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    # A clause longer than half the budget (key=value lists, one long sentence) is split
    # into words, so a window around what matters can still be kept.
    fine = []
    for a, b in spans:
        if b - a <= budget // 2:
            fine.append((a, b))
            continue
        for w in regex.finditer(r"\S+", text[a:b]):
            fine.append((a + w.start(), a + w.end()))
    spans = fine
    low = text.lower()
    n = len(spans)

    def cost(i: int) -> int:  # the clause and the separator before it
        return spans[i][1] - (spans[i - 1][1] if i else spans[i][0])

    # Clauses holding an anchor, in the anchors' order of importance.
    must: List[int] = []
    for x in anchors:
        x = x.lower().strip()
        must += [i for i, (a, b) in enumerate(spans) if i and i not in must and x and x in low[a:b]]
    chosen = {0}
    used = cost(0)
    for i in must:
        if used + cost(i) + 3 <= budget:
            chosen.add(i)
            used += cost(i) + 3
    # Then the opening run, in order, as far as it fits (a sentence end preferred).
    end = 0
    for i in range(1, n):
        if i in chosen:
            end = i
            continue
        if used + cost(i) > budget:
            break
        chosen.add(i)
        used += cost(i)
        end = i
    if end < n - 1 and text[spans[end][1] - 1] not in ".;!?":
        for j in range(end - 1, 0, -1):
            if j not in must and text[spans[j][1] - 1] in ".;!?" and spans[j][1] - spans[0][0] >= budget // 2:
                chosen = {c for c in chosen if c <= j or c in must}
                break
    out: List[str] = []
    prev = None
    for i in sorted(chosen):
        if prev is not None and i == prev + 1:
            out.append(text[spans[prev][1] : spans[i][1]])
        else:
            if prev is not None:
                out.append(f" {CLIP} ")
            out.append(text[spans[i][0] : spans[i][1]])
        prev = i
    result = "".join(out)
    if len(result) > budget:  # the opening clause alone is longer than the budget
        cut = result.rfind(" ", 0, budget - 2)
        result = result[: cut if cut > budget // 2 else budget - 2].rstrip()
        prev = -1
    if prev != n - 1:
        result += f" {CLIP}"
    return result, True


@dataclass
class EvidenceRow:
    """One evidence line as shown: ``line`` and ``time`` of its first appearance, the full
    ``text``, the ``notes`` of every entry for that line, and ``also`` the later lines that
    printed the same text (TP ranks, re-raises)."""

    source: str
    line: int
    time: Optional[str]
    text: str
    notes: List[str] = field(default_factory=list)
    also: List[int] = field(default_factory=list)
    kind: str = "log"  # "metric": ``line`` is a scrape's number, ``time`` its ISO 8601 time

    @property
    def where(self) -> str:
        """``:12`` for a log line, ``scrape 3`` for a metrics scrape."""
        return f"scrape {self.line}" if self.kind == "metric" else str(self.line)

    @property
    def note(self) -> str:
        return "; ".join(self.notes)


def evidence_rows(finding) -> List[EvidenceRow]:
    """``finding``'s evidence in line order, one row per line (the notes of one line merged)
    and a text printed again on later lines shown once, with those lines in ``also``."""
    rows: Dict[Tuple[str, int], EvidenceRow] = {}
    for e in finding.evidence:
        row = rows.get((e.source, e.line))
        if row is None:
            row = rows[(e.source, e.line)] = EvidenceRow(
                e.source, e.line, e.time, e.text, kind=getattr(e, "kind", "log")
            )
        if e.note and e.note not in row.notes:
            row.notes.append(e.note)
    by_text: Dict[Tuple[str, str], EvidenceRow] = {}
    out = []
    for row in sorted(rows.values(), key=lambda r: (r.source != finding.source, r.source, r.line)):
        first = by_text.get((row.source, row.text))
        if first is not None:
            first.also.append(row.line)
            first.notes += [n for n in row.notes if n not in first.notes]
            continue
        by_text[(row.source, row.text)] = row
        out.append(row)
    return out


# -- time -------------------------------------------------------------------------------


def incident_times(finding) -> Tuple[Optional[str], Optional[str]]:
    """First and last log time (``MM-DD HH:MM:SS``) of the lines that show the incident itself
    (not the settings it quotes); ``(None, None)`` when none of them carries a time."""
    times = sorted(e.time for e in finding.evidence if e.time and not is_context(e.note))
    if not times:
        return None, None
    return times[0], times[-1]


def finding_time(finding) -> Optional[str]:
    """When ``finding`` happened in the log's own time: the first incident line's time."""
    return incident_times(finding)[0]


def verdict_times(verdict) -> Tuple[Optional[str], Optional[str]]:
    """First and last incident time of the headline's own finding (see
    :func:`incident_times`); ``(None, None)`` without one."""
    return incident_times(verdict.primary) if verdict.primary is not None else (None, None)


# -- the picture ----------------------------------------------------------------------------

BARS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"  # ▁▂▃▄▅▆▇█

#: The series a sparkline shows: (point key, label, unit, fixed top of the scale or None).
SERIES = (
    ("kv_usage_pct", "KV cache", "%", 100.0),
    ("running", "running", "", None),
    ("waiting", "waiting", "", None),
    ("generation_tps", "tokens/s", "", None),
)


def _bucket(values: Sequence[Optional[float]], width: int) -> List[Optional[float]]:
    """``values`` reduced to at most ``width`` buckets, each the maximum of what it covers."""
    if len(values) <= width:
        return list(values)
    out = []
    for i in range(width):
        chunk = [v for v in values[i * len(values) // width : (i + 1) * len(values) // width] if v is not None]
        out.append(max(chunk) if chunk else None)
    return out


def sparkline(values: Sequence[Optional[float]], width: int = 40, top: Optional[float] = None) -> str:
    """Values as block characters, lowest ``▁`` to ``█`` at ``top`` (the maximum when None);
    a missing value is a space, a zero the lowest block. At most ``width`` characters."""
    vals = _bucket(values, max(width, 1))
    known = [v for v in vals if v is not None]
    hi = top if top is not None else (max(known) if known else 0)
    out = []
    for v in vals:
        if v is None:
            out.append(" ")
        elif hi <= 0:
            out.append(BARS[0])
        else:
            out.append(BARS[min(len(BARS) - 1, max(0, round(v / hi * (len(BARS) - 1))))])
    return "".join(out)


def _point(p, key):
    return p.get(key) if isinstance(p, dict) else getattr(p, key, None)


def episode(verdict, finding, context: int = 4, lookback: int = 48) -> List[Any]:
    """The stats points of ``finding``'s run around its incident (``runs[].series``): when
    the incident lines are stats lines (a saturation), from ``context`` points before the
    first to ``context`` after the last; when they are not (an OOM, a stall), the last
    ``lookback`` points up to it. Empty for a startup finding or fewer than two points."""
    run = run_of(verdict, finding)
    series = list(getattr(run, "series", None) or [])
    if finding is None or finding.phase != "runtime" or len(series) < 2:
        return []
    lines = [e.line for e in finding.evidence if not is_context(e.note)]
    if not lines:
        return series[-lookback:]
    lo, hi = min(lines), max(lines)
    idx = [i for i, p in enumerate(series) if lo <= (_point(p, "line") or 0) <= hi]
    if idx:
        a, b = max(0, idx[0] - context), min(len(series) - 1, idx[-1] + context)
    else:
        before = [i for i, p in enumerate(series) if (_point(p, "line") or 0) <= hi]
        b = before[-1] if before else len(series) - 1
        a = max(0, b - lookback + 1)
    picked = series[a : b + 1]
    return picked if len(picked) >= 2 else []


def point_unit(finding) -> str:
    """What the series points of ``finding``'s run are numbered by: ``scrapes`` for metrics,
    ``lines`` for a log."""
    metric = finding is not None and any(getattr(e, "kind", "log") == "metric" for e in finding.evidence)
    return "scrapes" if metric else "lines"


def series_rows(points: Sequence[Any], width: int = 40) -> List[Tuple[str, str, str]]:
    """``(label, sparkline, range)`` for each series the points carry (KV cache usage,
    running, waiting, generation tokens/s), e.g. ``("KV cache", "▂▅██", "max 98.4%")``."""
    rows = []
    for key, label, unit, top in SERIES:
        vals = [_point(p, key) for p in points]
        known = [v for v in vals if v is not None]
        if not known:
            continue
        hi = max(known)
        text = f"{hi:.1f}{unit}" if unit == "%" else f"{hi:g}"
        rows.append((label, sparkline(vals, width, top), f"max {text}"))
    return rows


def episode_span(points: Sequence[Any], unit: str = "lines") -> str:
    """``12 intervals, 18:01:10 to 18:06:20, lines 40-220`` for the points of an episode
    (``unit`` ``scrapes`` when the points are metrics scrapes)."""
    n = sum(_point(p, "intervals") or 1 for p in points)
    t0, t1 = _point(points[0], "time"), _point(points[-1], "time")
    if t0 and t1 and t0.split(" ")[0] == t1.split(" ")[0] and " " in t1:
        t1 = t1.split(" ", 1)[1]
    l0, l1 = _point(points[0], "line"), _point(points[-1], "line")
    return _join(
        f"{n} interval{'s' if n != 1 else ''}",
        f"{t0} to {t1}" if t0 and t1 else None,
        f"{unit} {l0}-{l1}" if l0 and l1 else None,
    )


# -- titles -----------------------------------------------------------------------------

#: What a ticket title calls each class.
SYMPTOM = {
    "weight_load_oom": "Out of memory loading the weights",
    "kv_cache_capacity": "KV cache too small for max_model_len",
    "startup_memory_contention": "GPU memory taken by another process at startup",
    "cuda_graph_capture_oom": "Out of memory capturing CUDA graphs",
    "sampler_warmup_oom": "Out of memory in the sampler warm-up",
    "quantization_unsupported": "Quantization not supported on this GPU",
    "config_limit_error": "Configuration rejected at startup",
    "runtime_oom": "Runtime OOM",
    "preemption_storm": "KV cache saturated, requests waiting or preempted",
    "request_too_long": "Requests rejected as longer than max_model_len",
    "engine_stall": "Engine stalled",
    "other": "Server failure",
    "unknown": "Server failure, root cause not in the log",
    "healthy": "vLLM server healthy",
}


def symptom_title(verdict) -> str:
    """The ticket's title: what happened, on which GPU, where and when, e.g. ``Runtime OOM on
    GPU 0 (79.33 GiB) at 02-10 18:06:30`` (parts the log does not give are left out)."""
    p = verdict.primary
    if p is None:
        if verdict.primary_class == "unknown" and not any(s.vllm_output for s in verdict.sources):
            return "Nothing recognisable as vLLM output"
        return SYMPTOM.get(verdict.primary_class, verdict.title)
    pool = fact_pool(verdict, p)
    title = SYMPTOM.get(p.class_id, p.class_id.replace("_", " ").capitalize())
    if p.class_id == "kv_cache_capacity" and pool.get("max_model_len"):
        title += f" {pool['max_model_len']}"
    if p.class_id == "other" and pool.get("exception"):
        title += f": {pool['exception']}"
    total = size(pool.get("gpu_total_gib"))
    if total and p.class_id in (
        "weight_load_oom",
        "startup_memory_contention",
        "cuda_graph_capture_oom",
        "sampler_warmup_oom",
        "runtime_oom",
        "kv_cache_capacity",
    ):
        title += f" on {_gpu_label(pool)} ({total})"
    host = [v.split(" (", 1)[0] for k, v in where(p.source) if k in ("Host", "Pod")]
    if host:
        title += f" on {host[0]}"
    first, _ = verdict_times(verdict)
    if first:
        title += f" at {first}"
    return title


# -- pages ------------------------------------------------------------------------------

_ITEM = regex.compile(r"^(?:[*-]|[0-9]{1,2}[.)])\s+")


def rewrap(page: str, width: int) -> str:
    """A rule's documentation page (``explain``) re-wrapped to ``width`` columns without
    breaking a word: paragraphs and list items (``*``, ``-``, ``1.``) are joined and filled
    again, each continuation line indented under its item's text; headings, blank lines and
    indentation stay."""
    import textwrap

    blocks: List[Tuple[str, str, List[str]]] = []  # (first indent, later indent, words)
    for line in page.splitlines():
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if not stripped:
            blocks.append(("", "", []))
            continue
        item = _ITEM.match(stripped)
        last = blocks[-1] if blocks else None
        continues = (
            last is not None
            and last[2]
            and not item
            and indent  # a heading at column 0 starts its own block
            and len(indent) >= len(last[0])
            and not last[2][-1].endswith(":")
        )
        if continues:
            last[2].append(stripped)
        else:
            later = indent + " " * (item.end() if item else 0)
            blocks.append((indent, later, [stripped]))
    out = []
    for first, later, words in blocks:
        if not words:
            out.append("")
            continue
        out.append(
            textwrap.fill(
                " ".join(words),
                width,
                initial_indent=first,
                subsequent_indent=later,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(out)
