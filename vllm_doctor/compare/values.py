"""The values lined up side by side: one run's config, facts, timings and stats medians, each
with the line that printed it, the argument lines parsed whole, and how numbers print."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple

from ..catalog.config import CONFIG_KEYS
from ..engines import engine_of_record
from ..events import Phase
from ..processes import engine_of_process
from ..run import Line, Run
from ..units import arrow, is_num, pct_change, show, with_change  # noqa: F401 - re-exported

#: Characters of an argument's value shown (a compilation config can be a paragraph).
MAX_ARG_CHARS = 120
#: Arguments compared at most per side (the Namespace of old versions holds about 150).
MAX_ARGS = 256


@dataclass
class Value:
    """One value of one run and the line that printed it (None when derived or unlocated)."""

    value: Any
    line: Optional[Line] = None


def _lookup(run: Run, key: str) -> Optional[Value]:
    """A config value or fact, else the first failure that printed it (an error message)."""
    if run.value(key) is not None:
        return Value(run.value(key), run.line_for(key))
    for f in run.failures:
        if f.data.get(key) is not None:
            return Value(f.data[key], f.lines[0] if f.lines else None)
    return None


def _median(values: List[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _time(line: Optional[Line]) -> Optional[datetime]:
    if line is None or not line.time:
        return None
    try:
        return datetime.strptime(f"2000-{line.time}", "%Y-%m-%d %H:%M:%S")  # 2000: 02-29 parses
    except ValueError:
        return None


def _startup_seconds(run: Run) -> Optional[Value]:
    """Seconds from the run's first configuration line to its first ready line, by the log's
    own time stamps (vLLM prints ``MM-DD HH:MM:SS``: no year, whole seconds)."""
    start, ready = _time(run.phase_lines.get(Phase.CONFIG)), _time(run.phase_lines.get(Phase.READY))
    if start is None or ready is None or ready < start:
        return None
    return Value(float((ready - start).total_seconds()), run.phase_lines[Phase.READY])


def args_line(run: Run) -> Optional[Line]:
    """The run's ``non-default args`` line, else its ``args: Namespace(...)`` line (markers
    kept by ``catalog/timing.py``), else None."""
    return run.markers.get("non_default_args") or run.markers.get("args_namespace")


def _split_top(body: str) -> List[str]:
    """``body`` (what follows the opening brace / parenthesis) split at its top-level commas,
    quotes and brackets respected, up to the closing one; when the line was clipped (an
    unbalanced end) its last, partial item is left out."""
    items, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(body):
        c = body[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return items + ([body[start:i]] if body[start:i].strip() else [])
        elif c == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
        i += 1
    if quote or depth:
        return items  # the line was clipped: its last item is not whole
    return items + ([body[start:]] if body[start:].strip() else [])


def parse_args(line: Optional[Line]) -> Tuple[Optional[str], Dict[str, str]]:
    """The arguments of a ``non-default args: {...}`` line (kind ``non-default``: only what
    the user set) or an ``args: Namespace(...)`` line (kind ``all``: every argument), as
    ``(kind, {name: value as printed})``; ``(None, {})`` without such a line. Values keep
    vLLM's repr (``'fp8'``, ``True``, ``{'level': 3}``), clipped to :data:`MAX_ARG_CHARS`."""
    if line is None:
        return None, {}
    text = line.text
    out: Dict[str, str] = {}
    if "non-default args: {" in text:
        kind, body = "non-default", text.split("non-default args: {", 1)[1]
        sep = ":"
    elif "args: Namespace(" in text:
        kind, body = "all", text.split("args: Namespace(", 1)[1]
        sep = "="
    else:
        return None, {}
    for item in _split_top(body):
        key, found, value = item.partition(sep)
        key = key.strip().strip("'\"")
        if not found or not key.replace("_", "").isalnum() or len(out) >= MAX_ARGS:
            continue
        value = value.strip()
        out[key] = value if len(value) <= MAX_ARG_CHARS else value[: MAX_ARG_CHARS - 3] + "..."
    return kind, out


def plain(raw: Optional[str]) -> Any:
    """An argument's printed value as a plain value where it is one (quotes off, True/False,
    numbers), else the text as printed."""
    if raw is None:
        return None
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    if raw in ("True", "False"):
        return raw == "True"
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


#: (key, label, unit, group) of every row, in the order the table shows them.
ROWS: Tuple[Tuple[str, str, str, str], ...] = (
    ("vllm_version", "vLLM version", "", "identity"),
    ("engine", "engine", "", "identity"),
    ("model_runner", "model runner", "", "identity"),
    ("model", "model", "", "identity"),
    ("gpu_total_gib", "GPU memory", "GiB", "gpu"),
    ("gpu_count", "GPUs (TP x PP x DP)", "", "gpu"),
    ("tensor_parallel_size", "tensor_parallel_size", "", "gpu"),
    ("pipeline_parallel_size", "pipeline_parallel_size", "", "gpu"),
    ("data_parallel_size", "data_parallel_size", "", "gpu"),
    ("world_size", "world size", "", "gpu"),
    ("weights_gib", "weights", "GiB", "memory"),
    ("activation_peak_gib", "activation peak", "GiB", "memory"),
    ("non_torch_gib", "non-torch memory", "GiB", "memory"),
    ("kv_available_gib", "KV cache memory", "GiB", "memory"),
    ("kv_tokens", "KV cache tokens", "tokens", "memory"),
    ("gpu_blocks", "KV cache blocks", "blocks", "memory"),
    ("max_concurrency", "max concurrency", "x", "memory"),
    ("cuda_graph_gib", "CUDA graph memory", "GiB", "graphs"),
    ("cuda_graph_sizes", "CUDA graph sizes captured", "", "graphs"),
    ("max_cudagraph_capture_size", "largest CUDA graph size", "", "graphs"),
    ("model_load_s", "model load", "s", "timing"),
    ("compile_s", "torch.compile", "s", "timing"),
    ("compile_cache", "compile cache", "", "timing"),
    ("graph_capture_s", "graph capture", "s", "timing"),
    ("init_engine_s", "engine init (profile, KV cache, warm-up)", "s", "timing"),
    ("startup_s", "start-up, first config line to ready", "s", "timing"),
    ("stats_intervals", "stats intervals", "", "stats"),
    ("median_generation_tps", "median generation throughput", "tokens/s", "stats"),
    ("median_kv_usage_pct", "median KV cache usage", "%", "stats"),
    ("median_running", "median running", "reqs", "stats"),
    ("median_waiting", "median waiting", "reqs", "stats"),
    ("peak_kv_usage_pct", "peak KV cache usage", "%", "stats"),
    ("max_running", "max running", "reqs", "stats"),
    ("max_waiting", "max waiting", "reqs", "stats"),
    ("preemptions", "preemptions", "", "stats"),
)
_ROW_KEYS = {r[0] for r in ROWS}
#: Config keys shown as rows of their own above (not again as config rows).
SHOWN_ELSEWHERE = {
    "model",
    "served_model_name",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
}


def _engine_line(run: Run) -> Optional[Line]:
    """A kept line that shows the run's engine (:attr:`Run.engine` is told by many hints, none
    kept with its line): the ``Initializing a V1 LLM engine`` line, the first stats line (V0 and
    V1 print different ones), else a line of a process whose name, or a traceback frame whose
    path, tells the engine (:func:`vllm_doctor.processes.engine_of_process`, the tracker's own
    rules)."""
    for line in run.config_lines.values():
        if "LLM engine" in line.text:
            return line
    if run.stats.first is not None or run.preemption.first is not None:
        return run.stats.first or run.preemption.first
    paths = ("/vllm/v1/",) if run.engine == "v1" else ("/vllm/engine/", "/vllm/worker/worker.py")
    kept = [*run.phase_lines.values(), *run.fact_lines.values(), *(x for f in run.failures for x in f.lines)]
    kept += [c.line for c in run.consequences]
    for line in sorted(kept, key=lambda x: x.lineno):
        if (
            engine_of_process(line.proc, line.rank) == run.engine
            or engine_of_record(line.file) == run.engine  # remedies3: the record's file tells it too
            or any(p in line.text for p in paths)
        ):
            return line
    return None


def side_values(run: Run) -> Dict[str, Value]:
    """Every row's value for one run (absent keys: not in the log)."""
    vals: Dict[str, Value] = {}
    for key in _ROW_KEYS | set(CONFIG_KEYS):
        if key in ("gpu_count", "startup_s", "engine") or key.startswith(("median_", "stats_")):
            continue
        v = _lookup(run, key)
        if v is not None:
            vals[key] = v
    if "model" not in vals and run.config.get("served_model_name"):
        vals["model"] = Value(run.config["served_model_name"], run.config_lines.get("served_model_name"))
    if run.engine:
        vals["engine"] = Value(run.engine, _engine_line(run))
    tp = vals.get("tensor_parallel_size")
    if tp is not None and isinstance(tp.value, int):
        n = tp.value
        for k in ("pipeline_parallel_size", "data_parallel_size"):
            if k in vals and isinstance(vals[k].value, int):
                n *= vals[k].value
        vals["gpu_count"] = Value(n, tp.line)
    startup = _startup_seconds(run)
    if startup is not None:
        vals["startup_s"] = startup
    s = run.stats
    if s.count:
        vals["stats_intervals"] = Value(s.count, s.first)
        series = s.series
        for key, attr in (
            ("median_generation_tps", "generation_tps"),
            ("median_kv_usage_pct", "kv_usage_pct"),
            ("median_running", "running"),
            ("median_waiting", "waiting"),
        ):
            m = _median([getattr(p, attr) for p in series if getattr(p, attr) is not None])
            if m is not None:
                vals[key] = Value(m)
        if s.peak_kv_usage_pct is not None:
            vals["peak_kv_usage_pct"] = Value(s.peak_kv_usage_pct, s.peak_line)
        if s.max_running is not None:
            vals["max_running"] = Value(s.max_running)
        if s.max_waiting is not None:
            vals["max_waiting"] = Value(s.max_waiting, s.max_waiting_line)
    if run.preemption.warnings:
        vals["preemptions"] = Value(run.preemption.max_cumulative, run.preemption.last)
    elif s.preemptions_total:
        vals["preemptions"] = Value(s.preemptions_total)
    return vals
