"""Finding and ranking the differences that matter (see :mod:`vllm_doctor.compare`)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from .. import thresholds
from ..catalog.config import CONFIG_KEYS
from ..events import Phase
from ..pipeline import primary_finding
from ..rules import BY_NAME
from ..rules.rule import ev
from ..run import Line, Run
from ..verdict import SEVERITY_RANK, Finding
from .model import CATEGORIES, Cell, Comparison, Difference, Evidence, Remedy, Row, Side, SideVerdict
from .runs import CompareError, RunRef
from .settings import (
    CAPACITY_SETTINGS,
    CONFIG_ORDER,
    EFFECTS,
    ENVIRONMENT,
    NAMED_AS,
    RELATED,
    Setting,
    change_text,
    differing_settings,
)
from .values import ROWS, SHOWN_ELSEWHERE, Value, arrow, is_num, pct_change, show, side_values, with_change

#: Evidence lines one difference quotes at most (both sides together).
MAX_EVIDENCE = 6
LABELS = {key: label for key, label, _, _ in ROWS}
UNITS = {key: unit for key, _, unit, _ in ROWS}

#: The start-up phase each failure class happens in, for a run whose excerpt shows no phase
#: marker (the order of vllm/v1/engine/core.py EngineCore.__init__ and gpu_worker.py: the free
#: memory check in init_device, load_model, determine_available_memory and the KV cache,
#: compile_or_warm_up_model: CUDA graph capture, then the sampler warm-up).
CLASS_PHASE = {
    "startup_memory_contention": Phase.CONFIG,
    "config_limit_error": Phase.CONFIG,
    "quantization_unsupported": Phase.LOADING_WEIGHTS,
    "weight_load_oom": Phase.LOADING_WEIGHTS,
    "kv_cache_capacity": Phase.KV_SIZING,
    "cuda_graph_capture_oom": Phase.GRAPH_CAPTURE,
    "sampler_warmup_oom": Phase.WARMUP,
}


def _verdict_of(ref: RunRef) -> Tuple[str, Optional[Finding], SideVerdict]:
    findings = [f for f in ref.result.findings if f.run == ref.run.index]
    p = primary_finding(findings)
    if p is None:
        h = BY_NAME["healthy"]
        return "healthy", None, SideVerdict("healthy", h.code, "ok", h.summary)
    r = p.remedies[0] if p.remedies else None
    first = Remedy(r.action, r.flag, r.why) if r is not None else None
    outcome = "failed" if SEVERITY_RANK[p.severity] >= SEVERITY_RANK["critical"] else "degraded"
    return outcome, p, SideVerdict(p.class_id, p.code, p.severity, p.title, p.phase, first)


def _side(role: str, ref: RunRef) -> Tuple[Side, Optional[Finding]]:
    outcome, primary, verdict = _verdict_of(ref)
    run = ref.run
    side = Side(
        role=role,
        input=ref.input,
        source=run.source,
        run=run.index,
        number=ref.number,
        runs=ref.of,
        start_line=run.start_line,
        end_line=run.end_line,
        phase_reached=run.phase.label,
        outcome=outcome,
        verdict=verdict,
    )
    return side, primary


def _evidence(role: str, line: Optional[Line], note: Optional[str] = None) -> Optional[Evidence]:
    e = ev(line, note)
    if e is None:
        return None
    return Evidence(role, e.source, e.line, e.text, e.note, e.time)


def _evidence_list(items) -> List[Evidence]:
    out: List[Evidence] = []
    seen = set()
    for e in items:
        if e is None or (e.side, e.source, e.line) in seen:
            continue
        seen.add((e.side, e.source, e.line))
        out.append(e)
    return out[:MAX_EVIDENCE]


class _Builder:
    def __init__(self, old: RunRef, new: RunRef) -> None:
        self.oref, self.nref = old, new
        self.old, self.oprimary = _side("old", old)
        self.new, self.nprimary = _side("new", new)
        self.ov, self.nv = side_values(old.run), side_values(new.run)
        self.settings, self.args_known = differing_settings(old.run, new.run, self.ov, self.nv)
        self.differences: List[Difference] = []
        self.notes: List[str] = []

    # -- helpers ------------------------------------------------------------------------------
    def both(self, key: str) -> Tuple[Any, Any]:
        o, n = self.ov.get(key), self.nv.get(key)
        return (o.value if o else None), (n.value if n else None)

    def lines(self, key: str, note: Optional[str] = None) -> List[Optional[Evidence]]:
        o, n = self.ov.get(key), self.nv.get(key)
        return [
            _evidence("old", o.line if o else None, note),
            _evidence("new", n.line if n else None, note),
        ]

    def add(self, category: str, key: str, title: str, implies: str, within: Tuple, **kw) -> Difference:
        """Record a difference; ``within`` orders it inside its category (CATEGORIES orders those)."""
        d = Difference(category, key, title, implies, order=(CATEGORIES.index(category), *within), **kw)
        self.differences.append(d)
        return d

    def setting_causes(self, keys: Sequence[str]) -> List[Setting]:
        return [s for s in self.settings if s.key in keys]

    def reason_without_settings(self) -> str:
        """Why a value moved when no setting that sizes it did: the version, the GPU, or what
        is around it."""
        ver_a, ver_b = self.both("vllm_version")
        gpu_a, gpu_b = self.both("gpu_total_gib")
        if not self.settings:
            same = (
                "same args" if self.args_known else "no printed setting changed (the args lines are not in both logs)"
            )
        else:
            same = "no setting that sizes it changed"
        if ver_a and ver_b and ver_a != ver_b:
            return f"{same}, between {ver_a} and {ver_b}: the version changed what is reserved"
        if gpu_a is not None and gpu_b is not None and gpu_a != gpu_b:
            return f"{same}, on a different GPU ({arrow(gpu_a, gpu_b, 'GiB')})"
        if ver_a is None or ver_b is None:
            return f"{same}; the versions are not both in the log: an upgrade, another GPU or a co-tenant can do this"
        return f"{same}, same version {ver_a}: something outside vLLM changed (the GPU, the driver, a co-tenant)"

    # -- 1. outcome ---------------------------------------------------------------------------
    @staticmethod
    def fail_phase(run: Run, primary: Optional[Finding]) -> Optional[Phase]:
        """Where a run failed: the furthest phase it reached, or the phase its failure class
        happens in when the excerpt shows less (:data:`CLASS_PHASE`); SERVING for a runtime
        failure; None when it did not fail."""
        if primary is None:
            return None
        if primary.phase == "runtime":
            return Phase.SERVING
        return max(run.phase, CLASS_PHASE.get(primary.class_id, Phase.NONE))

    @staticmethod
    def where(phase: Optional[Phase], run: Run) -> str:
        if phase is None:
            return f"reached {run.phase.label}"
        if phase == Phase.SERVING:
            return "while serving"
        return f"in {phase.label}" if phase > Phase.NONE else "at start-up"

    def named_in_failure(self, run: Run, primary: Optional[Finding]) -> set:
        """The settings the failure's lines name: the finding's evidence (the error, and vLLM's
        advice printed with it such as the CUDA graph capture line's ``enforce_eager``), never
        the config and args lines a finding also quotes; without a finding, the run's failure
        lines."""
        failing = {line.lineno for f in run.failures for line in f.lines}  # an error may print a setting too
        config = {line.lineno for line in [*run.config_lines.values(), *run.markers.values()]} - failing
        if primary is not None:
            texts = [e.text for e in primary.evidence if e.line not in config]
        else:
            texts = [line.text for f in run.failures for line in f.lines]
        blob = " ".join(texts).lower()
        return {key for key, names in NAMED_AS.items() if any(n in blob for n in names)}

    def likely_cause(
        self, class_id: str, run: Run, primary: Optional[Finding], fixed: bool = False
    ) -> Tuple[str, List[Setting]]:
        """The changed settings behind a changed outcome: those the failure's own lines name
        (vLLM's messages name the flags that fix them), else those the failure class bears on
        (:data:`RELATED`); ``fixed`` when the failure is the old run's (a fix, not a cause)."""
        named = self.named_in_failure(run, primary)
        by_log = [s for s in self.settings if s.key in named]
        if by_log:
            keys = ", ".join(s.key for s in by_log)
            what = "likely fix" if fixed else "likely cause"
            return (
                f"{what}: {'; '.join(change_text(s) for s in by_log)} (the failure's lines name {keys})",
                by_log,
            )
        related = self.setting_causes(RELATED.get(class_id, ()))
        if related:
            return (
                f"changed and bearing on it: {'; '.join(change_text(s) + ' (' + EFFECTS.get(s.key, 'a setting') + ')' for s in related)}",
                related,
            )
        if not self.settings:
            ver_a, ver_b = self.both("vllm_version")
            if ver_a and ver_b and ver_a != ver_b:
                return f"no setting changed; the version did ({ver_a} -> {ver_b})", []
        return "", []

    def outcome(self) -> None:
        o, n = self.old, self.new
        orun, nrun = self.oref.run, self.nref.run
        orank = SEVERITY_RANK.get(self.oprimary.severity, 0) if self.oprimary else 0
        nrank = SEVERITY_RANK.get(self.nprimary.severity, 0) if self.nprimary else 0
        ocls, ncls = o.verdict.class_id, n.verdict.class_id
        ophase, nphase = self.fail_phase(orun, self.oprimary), self.fail_phase(nrun, self.nprimary)
        if ocls == ncls and o.outcome == n.outcome and ophase == nphase:
            if o.outcome != "healthy":
                self.notes.append(
                    f"Both runs end the same way: {ncls} ({n.verdict.code}); the differences below say what else moved."
                )
            return
        owhere, nwhere = self.where(ophase, orun), self.where(nphase, nrun)
        if nrank > orank:
            verb = "failed" if n.outcome == "failed" else "degraded"
            if o.outcome == "healthy":
                passed = nphase is not None and orun.phase > nphase and nphase < Phase.SERVING
                then = "the old one passed it" if passed else f"the old one {owhere}"
            else:
                then = f"the old one only {o.outcome} ({ocls}, {owhere})"
            title = f"The new run {verb} {nwhere} ({ncls}, {n.verdict.code}) where {then}"
            regression = True
        elif nrank < orank:
            now = "got through" if n.outcome == "healthy" else f"only {n.outcome} ({ncls}, {nwhere})"
            title = f"The new run {now} where the old one {o.outcome} {owhere} ({ocls}, {o.verdict.code})"
            regression = False
        else:
            earlier = ophase is not None and nphase is not None and nphase < ophase
            later = ophase is not None and nphase is not None and nphase > ophase
            title = f"Both {n.outcome}, differently: the old run {owhere} ({ocls}), the new one {nwhere} ({ncls})"
            if earlier or later:
                title += ", earlier" if earlier else ", later"
            regression = earlier
        fixed = nrank < orank
        cause, settings = self.likely_cause(
            ocls if fixed else ncls,
            orun if fixed else nrun,
            self.oprimary if fixed else self.nprimary,
            fixed,
        )
        implies = n.verdict.title if self.nprimary is not None else o.verdict.title
        if cause:
            implies = f"{implies}; {cause}"
        evidence: List[Optional[Evidence]] = []
        evidence += self._outcome_lines("old", orun, self.oprimary, nphase)
        evidence += self._outcome_lines("new", nrun, self.nprimary, ophase)
        for st in settings[:1]:
            evidence += [
                _evidence("old", st.old_line, f"{st.key} = {show(st.old)}"),
                _evidence("new", st.new_line, f"{st.key} = {show(st.new)}"),
            ]
        self.add(
            "outcome",
            "outcome",
            title,
            implies,
            (),
            regression=regression,
            old=ocls,
            new=ncls,
            evidence=_evidence_list(evidence),
        )

    @staticmethod
    def _outcome_lines(role: str, run: Run, primary: Optional[Finding], other_phase: Optional[Phase]) -> List:
        """A failed run's first failure lines; a run that did not fail there, the line proving
        it got past where the other one failed (else its furthest phase line)."""
        if primary is not None:
            lines = [Evidence(role, e.source, e.line, e.text, e.note, e.time) for e in primary.evidence[:2]]
            if lines:
                return lines
        if other_phase is not None and other_phase < Phase.SERVING:
            later = sorted(p for p in run.phase_lines if p > other_phase)
            if later:
                return [_evidence(role, run.phase_lines[later[0]], f"got past {other_phase.label}")]
        return [_evidence(role, run.phase_lines.get(run.phase), f"reached {run.phase.label}")]

    # -- 2. capacity ----------------------------------------------------------------------------
    def capacity(self) -> None:
        pct_floor = thresholds.COMPARE_CAPACITY_PCT
        kv_key = next(
            (
                k
                for k in ("kv_tokens", "kv_available_gib", "max_concurrency", "gpu_blocks")
                if all(map(is_num, self.both(k)))
            ),
            None,
        )
        if kv_key is not None:
            a, b = self.both(kv_key)
            pct = pct_change(a, b)
            if (
                pct is not None
                and abs(pct) >= pct_floor
                and (not kv_key.endswith("_gib") or abs(b - a) >= thresholds.COMPARE_MIN_GIB)
            ):
                label = LABELS[kv_key]
                unit = UNITS[kv_key]
                reason = self._capacity_reason(kv_key)
                companions = self._companions(kv_key)
                implies = "; ".join(x for x in [reason, companions] if x)
                evidence = self.lines(kv_key) + self._companion_lines(kv_key)
                self.add(
                    "capacity",
                    kv_key,
                    f"{label} {with_change(a, b, unit)}",
                    implies,
                    (-abs(pct),),
                    regression=b < a,
                    old=a,
                    new=b,
                    change_pct=round(pct, 1),
                    evidence=_evidence_list(evidence),
                )
        for key in ("weights_gib", "cuda_graph_gib", "activation_peak_gib", "non_torch_gib"):
            a, b = self.both(key)
            pct = pct_change(a, b)
            if pct is None or abs(pct) < pct_floor or abs(b - a) < thresholds.COMPARE_MIN_GIB:
                continue
            label = LABELS[key]
            more = "takes more" if b > a else "takes less"
            reason = self._consumer_reason(key)
            implies = f"{more} of the GPU, which the KV cache {'loses' if b > a else 'gains'}" + (
                f"; {reason}" if reason else ""
            )
            self.add(
                "capacity",
                key,
                f"{label} {with_change(a, b, 'GiB')}",
                implies,
                (-abs(pct),),
                old=a,
                new=b,
                change_pct=round(pct, 1),
                evidence=_evidence_list(self.lines(key)),
            )

    def _capacity_reason(self, lead: str) -> str:
        """What moved the KV cache: the settings that size it, else the version or the GPU.
        max_model_len sizes only the concurrency (tokens / max_model_len), not the cache."""
        keys = CAPACITY_SETTINGS + (("max_model_len",) if lead == "max_concurrency" else ())
        causes = self.setting_causes(keys)
        if causes:
            text = "the settings changed it: " + "; ".join(
                f"{change_text(s)} ({EFFECTS.get(s.key, 'a setting')})" for s in causes
            )
            ver_a, ver_b = self.both("vllm_version")
            if ver_a and ver_b and ver_a != ver_b:
                text += f"; the version changed too ({ver_a} -> {ver_b}): either may have done it"
            return text
        return self.reason_without_settings()

    def _consumer_reason(self, key: str) -> str:
        related = {
            "weights_gib": (
                "quantization",
                "dtype",
                "tensor_parallel_size",
                "pipeline_parallel_size",
                "cpu_offload_gb",
            ),
            "cuda_graph_gib": ("enforce_eager", "max_num_seqs", "compilation_config", "gpu_memory_utilization"),
            "activation_peak_gib": ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "limit_mm_per_prompt"),
            "non_torch_gib": ("tensor_parallel_size", "pipeline_parallel_size"),
        }[key]
        causes = self.setting_causes(related)
        if causes:
            return "; ".join(change_text(s) for s in causes)
        if key == "cuda_graph_gib":
            a, b = self.both("cuda_graph_sizes")
            if a and b and a != b:
                return f"CUDA graph sizes captured {a} -> {b}"
        return self.reason_without_settings()

    def _companions(self, lead: str) -> str:
        """The other memory values that moved with a KV change (what took the memory)."""
        parts = []
        for key, label in (
            ("kv_available_gib", "KV cache memory"),
            ("weights_gib", "weights"),
            ("cuda_graph_gib", "graph memory"),
            ("activation_peak_gib", "activation peak"),
            ("non_torch_gib", "non-torch memory"),
            ("cuda_graph_sizes", "graph sizes"),
        ):
            if key == lead:
                continue
            a, b = self.both(key)
            if is_num(a) and is_num(b) and a != b:
                parts.append(f"{label} {arrow(a, b, 'GiB' if key.endswith('_gib') else '')}")
        return "; ".join(parts)

    def _companion_lines(self, lead: str) -> List[Optional[Evidence]]:
        out = []
        for key in ("cuda_graph_gib", "weights_gib", "kv_available_gib"):
            a, b = self.both(key)
            if key != lead and is_num(a) and is_num(b) and a != b:
                out += self.lines(key)
        return out

    # -- 3. throughput --------------------------------------------------------------------------
    def throughput(self) -> None:
        need = thresholds.COMPARE_MIN_STATS_INTERVALS
        oc, nc = self.both("stats_intervals")
        if not oc and not nc:
            return
        if (oc or 0) < need or (nc or 0) < need:
            self.notes.append(
                f"Stats medians are not compared: the old run has {oc or 0} stats interval(s), the new {nc or 0} "
                f"(at least {need:g} each are needed)."
            )
            return
        self.notes.append(
            "Stats medians are over each run's bounded stats series (up to 256 points; on longer runs "
            "each point is the maximum of the intervals it covers, so medians lean high)."
        )
        a, b = self.both("median_generation_tps")
        pct = pct_change(a, b)
        if pct is None or abs(pct) < thresholds.COMPARE_THROUGHPUT_PCT:
            return
        ra, rb = self.both("median_running")
        per_pct = None
        implies = ""
        if is_num(ra) and is_num(rb) and ra > 0 and rb > 0:
            pa, pb = a / ra, b / rb
            per_pct = pct_change(pa, pb)
            implies = f"per running request {arrow(pa, pb, 'tokens/s')}"
            if per_pct is not None and abs(per_pct) < thresholds.COMPARE_THROUGHPUT_PCT:
                implies += (
                    f": the load changed (median running {show(ra)} -> {show(rb)}), not the speed of each request"
                )
            else:
                implies += ": each request is decoded at a different speed"
        wa, wb = self.both("median_waiting")
        if is_num(wa) and is_num(wb) and wa != wb:
            implies += f"; median waiting {show(wa)} -> {show(wb)}"
        basis = per_pct if per_pct is not None else pct
        self.add(
            "throughput",
            "median_generation_tps",
            f"median generation throughput {with_change(a, b, 'tokens/s')}",
            implies.lstrip("; "),
            (-abs(pct),),
            regression=basis <= -thresholds.COMPARE_THROUGHPUT_PCT,
            old=a,
            new=b,
            change_pct=round(pct, 1),
            evidence=_evidence_list(
                [
                    _evidence("old", self.oref.run.stats.first, "first stats line"),
                    _evidence("new", self.nref.run.stats.first, "first stats line"),
                ]
            ),
        )

    # -- 4. config --------------------------------------------------------------------------------
    def config(self) -> None:
        for key in ENVIRONMENT:
            a, b = self.both(key)
            if a is None or b is None or a == b:
                continue
            label = LABELS[key]
            unit = "GiB" if key == "gpu_total_gib" else ""
            implies = {
                "vllm_version": "a new release: its defaults, kernels and memory accounting may differ",
                "engine": "a different engine: V1 schedules, profiles and reserves memory differently from V0",
                "model_runner": "a different model runner: it captures graphs and reserves memory its own way",
                "gpu_total_gib": "a different GPU: every memory number scales with it",
                "model": "a different model: weights, KV per token and defaults all change",
            }[key]
            evidence = _evidence_list(self.lines(key))
            if key == "engine" and len(evidence) < 2:
                implies += " (told by process names and traceback paths where no line says it)"
            self.add(
                "config",
                key,
                f"{label} {arrow(a, b, unit)}",
                implies,
                (CONFIG_ORDER.index(key), key),
                old=a,
                new=b,
                evidence=evidence,
            )
        for s in self.settings:
            pos = CONFIG_ORDER.index(s.key) if s.key in CONFIG_ORDER else len(CONFIG_ORDER)
            self.add(
                "config",
                s.key,
                change_text(s),
                EFFECTS.get(s.key, "a flag set differently"),
                (pos, s.key),
                old=s.old,
                new=s.new,
                evidence=_evidence_list(
                    [
                        _evidence("old", s.old_line, f"{s.key} = {show(s.old)}"),
                        _evidence("new", s.new_line, f"{s.key} = {show(s.new)}"),
                    ]
                ),
            )

    # -- 5. timing --------------------------------------------------------------------------------
    def timing(self) -> None:
        for key in ("startup_s", "init_engine_s", "compile_s", "model_load_s", "graph_capture_s"):
            a, b = self.both(key)
            pct = pct_change(a, b)
            if pct is None or abs(pct) < thresholds.COMPARE_TIMING_PCT or abs(b - a) < thresholds.COMPARE_TIMING_MIN_S:
                continue
            label = LABELS[key]
            self.add(
                "timing",
                key,
                f"{label} {with_change(a, b, 's')}",
                self._timing_reason(key, a, b),
                (-abs(b - a),),
                old=a,
                new=b,
                change_pct=round(pct, 1),
                evidence=_evidence_list(self.lines(key) + self._cache_lines(key)),
            )

    def _timing_reason(self, key: str, a: float, b: float) -> str:
        ca, cb = self.both("compile_cache")
        slower = b > a
        if key in ("compile_s", "init_engine_s", "startup_s") and ca and cb and ca != cb:
            if cb == "miss":
                return "the new run compiled its graphs where the old one loaded them from the compile cache (the log says so); the next start reuses the cache"
            return "the new run loaded its graphs from the compile cache where the old one compiled them"
        if key in ("init_engine_s", "startup_s"):
            parts = []
            for sub, label in (
                ("compile_s", "torch.compile"),
                ("graph_capture_s", "graph capture"),
                ("model_load_s", "model load"),
            ):
                sa, sb = self.both(sub)
                if is_num(sa) and is_num(sb) and sa != sb:
                    parts.append(f"{label} {arrow(sa, sb, 's')}")
            if parts:
                return "of which " + "; ".join(parts)
        if key == "model_load_s":
            return "reading the weights took " + (
                "longer: a colder page cache, a slower disk or a download" if slower else "less time"
            )
        if key == "graph_capture_s":
            sa, sb = self.both("cuda_graph_sizes")
            if sa and sb and sa != sb:
                return f"CUDA graph sizes captured {sa} -> {sb}"
        return "slower to start" if slower else "faster to start"

    def _cache_lines(self, key: str) -> List[Optional[Evidence]]:
        if key in ("compile_s", "init_engine_s", "startup_s"):
            ca, cb = self.both("compile_cache")
            if ca and cb and ca != cb:
                return self.lines("compile_cache")
        return []

    # -- the table --------------------------------------------------------------------------------
    def rows(self) -> List[Row]:
        out: List[Row] = []
        diff_keys = {d.key for d in self.differences}
        spec = list(ROWS)
        config_keys = [k for k in CONFIG_KEYS if k not in SHOWN_ELSEWHERE and (k in self.ov or k in self.nv)]
        at = next(i for i, r in enumerate(spec) if r[0] == "weights_gib")
        spec[at:at] = [(k, k, "", "config") for k in config_keys]
        shown = {r[0] for r in spec}
        settings = {s.key: s for s in self.settings}
        spec[at + len(config_keys) : at + len(config_keys)] = [(k, k, "", "args") for k in settings if k not in shown]
        for key, label, unit, group in spec:
            o, n = self.ov.get(key), self.nv.get(key)
            if key in settings and (group == "args" or o is None or n is None):
                s = settings[key]  # a flag one run set and the other left at its default
                o, n = o or Value(s.old, s.old_line), n or Value(s.new, s.new_line)
            if o is None and n is None:
                continue
            a, b = (o.value if o else None), (n.value if n else None)
            differs = key in diff_keys or key in settings or (a is not None and b is not None and a != b)
            pct = pct_change(a, b)
            out.append(
                Row(
                    key,
                    label,
                    unit,
                    group,
                    Cell(_json_value(a), o.line.lineno if o and o.line else None) if o else None,
                    Cell(_json_value(b), n.line.lineno if n and n.line else None) if n else None,
                    round(pct, 1) if pct is not None else None,
                    differs,
                )
            )
        return out

    def build(self) -> Comparison:
        self.outcome()
        self.capacity()
        self.throughput()
        self.config()
        self.timing()
        self.differences.sort(key=lambda d: d.order)
        for i, d in enumerate(self.differences, 1):
            d.rank = i
        for side, ref in (("OLD", self.oref), ("NEW", self.nref)):
            if ref.of > 1:
                self.notes.append(f"{side} ({ref.input}) holds {ref.of} runs: this is run {ref.number}.")
        regressed = any(d.regression for d in self.differences)
        return Comparison(self.old, self.new, self.rows(), self.differences, self.notes, regressed)


def _json_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def compare_runs(old: RunRef, new: RunRef) -> Comparison:
    """Compare two picked runs (see :func:`pick_run`). Raises :class:`CompareError` when they
    are the same run."""
    if old.run is new.run:
        raise CompareError(f"OLD and NEW are the same run ({old.run.source} run {old.run.index})")
    return _Builder(old, new).build()
