"""Startup timings and the shape of what starts: what ``vllm-doctor compare`` lines up.

Each pattern gives run facts (the ``facts`` event kind) or keeps a line whole (``marker``);
nothing here is a failure. A pattern that reads a line ``startup.py`` or ``config.py`` already
reads (the init engine, model loading, graph capture lines, the capture bar, the engine config
line) proves the same phase that one does; a line only this module reads proves none. Wordings read from the released wheels' source
(0.5.5 to 0.33.0):

* compile time: ``vllm/compilation/monitor.py`` ``end_monitoring_torch_compile``:
  ``torch.compile takes %.2f s in total`` (0.6.6-0.17), ``torch.compile took %.2f s in total``
  (0.18+; 0.32+ with a ``%s`` model-part prefix) -> ``compile_s``;
  ``Initial profiling/warmup run took %.2f s`` (``monitor_profiling_run``, 0.18+: the first
  forward pass, its compile included, is done) -> ``warmup_run_s``;
* engine start-up: ``vllm/v1/engine/core.py`` ``_initialize_kv_caches`` and V0
  ``vllm/engine/llm_engine.py``: ``init engine (profile, create kv cache, warmup model) took
  %.2f seconds`` (to 0.19), ``... took %.2f s`` (0.20+), ``... took %.2f s (compilation: %.2f
  s)`` and ``(compilation: %.2f s — language_model: ...`` (0.2x) -> ``init_engine_s`` and
  ``compile_s``;
* model load: ``vllm/v1/worker/gpu_model_runner.py`` / ``gpu/model_runner.py`` /
  V0 ``vllm/worker/model_runner.py`` ``load_model``: ``Model loading took %.4f GiB and %.6f
  seconds`` (0.8-0.10), ``Model loading took %.4f GiB memory and %.6f seconds`` (0.11+,
  ``%s GiB`` from 0.17) -> ``model_load_s`` (the GiB are ``weights_gib``, read by
  ``catalog/startup.py``);
* CUDA graphs: ``Graph capturing finished in %.0f secs, took %.2f GiB`` (V0
  ``model_runner.py``, V1 ``gpu_model_runner.py capture_model``, MRV2 ``gpu/model_runner.py``)
  -> ``graph_capture_s``; the capture progress bar (tqdm's default ``{desc}: {percentage}%|{bar}|
  {n}/{total} [...]``) with desc ``Capturing CUDA graph shapes`` (V0 0.6-0.10, V1 to 0.9),
  ``Capturing CUDA graphs ({mixed prefill-decode|decode}, {PIECEWISE|FULL})`` (V1 0.10.2+),
  ``Capturing CUDA graphs (MODE)`` / ``Capturing CUDA graphs`` (MRV2 ``gpu/cudagraph_utils.py``)
  -> ``cuda_graph_sizes`` (the bar's total: how many batch sizes are captured; the first bar
  of a run, the mixed/PIECEWISE one when both are printed); the engine config line's
  ``compilation_config`` (``VllmConfig.__str__``: ``"max_capture_size":N`` to 0.10,
  ``'max_cudagraph_capture_size': N`` from 0.11) -> ``max_cudagraph_capture_size``;
* compile cache: ``vllm/compilation/backends.py``: ``Directly load the compiled graph(s) for
  ... from the cache`` (0.7.3+) -> ``compile_cache`` ``hit``; ``Compiling a graph for ... takes
  %.2f s`` (0.6.6+) -> ``miss``;
* model runner: ``vllm/v1/worker/gpu_worker.py`` (and ``xpu_worker.py``, ``cpu_worker.py``)
  ``Using V2 Model Runner`` (0.16+) -> ``model_runner`` ``v2``; ``vllm/config/vllm.py``
  ``Model Runner V2 requires Triton; using the V1 model runner instead.`` / ``Model Runner V2
  does not yet support %s; using the V1 model runner instead.`` (0.23+) -> ``v1``;
* the argument lines, kept whole for ``compare`` to diff every flag (the config catalog reads
  only the keys rules use): ``vllm/entrypoints/utils.py`` ``non-default args: %s`` (0.10+),
  ``vllm/entrypoints/openai/api_server.py`` ``args: %s`` (an argparse ``Namespace``, to 0.9)
  -> markers ``non_default_args`` / ``args_namespace``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..events import Phase
from ..units import to_float, to_int
from .pattern import Pattern

_S = r"(\d+(?:\.\d+)?)"


def _seconds(key: str):
    def build(m, rec) -> Dict[str, Any]:
        return {key: to_float(m[1])} if m[1] else {}  # none when the line is cut before the number

    return build


def _init_engine(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"init_engine_s": to_float(m["total"])} if m["total"] else {}
    if m["compile"]:
        data["compile_s"] = to_float(m["compile"])
    return data


def _capture_bar(m, rec) -> Optional[Dict[str, Any]]:
    if not m["total"]:
        return {}  # the bar cut before its total
    total = to_int(m["total"])
    return {"cuda_graph_sizes": total} if total > 0 else None


PATTERNS = [
    Pattern(
        "torch_compile_total",
        "facts",
        ("torch.compile takes", "torch.compile took"),
        r"torch\.compile t(?:akes|ook) " + _S + r" s in total",
        "vllm/compilation/monitor.py end_monitoring_torch_compile",
        None,
        _seconds("compile_s"),
    ),
    Pattern(
        "warmup_run_seconds",
        "facts",
        ("Initial profiling/warmup run took",),
        r"Initial profiling/warmup run took " + _S + r" s",
        "vllm/compilation/monitor.py monitor_profiling_run (0.18+)",
        None,
        _seconds("warmup_run_s"),
    ),
    Pattern(
        "init_engine_seconds",
        "facts",
        ("init engine (profile, create kv cache, warmup model) took",),
        r"init engine \(profile, create kv cache, warmup model\) took (?P<total>\d+(?:\.\d+)?) s(?:econds)?"
        r"(?: \(compilation: (?P<compile>\d+(?:\.\d+)?) s)?",
        "vllm/v1/engine/core.py _initialize_kv_caches; vllm/engine/llm_engine.py (V0)",
        Phase.READY,
        _init_engine,
    ),
    Pattern(
        "model_load_seconds",
        "facts",
        ("Model loading took",),
        r"Model loading took [\d.]+ Gi?B(?: memory)? and " + _S + r" seconds",
        "vllm/v1/worker/gpu_model_runner.py load_model; vllm/worker/model_runner.py (V0)",
        Phase.WEIGHTS_LOADED,
        _seconds("model_load_s"),
    ),
    Pattern(
        "graph_capture_seconds",
        "facts",
        ("Graph capturing finished",),
        r"Graph capturing finished in " + _S + r" secs?",
        "vllm/v1/worker/gpu_model_runner.py capture_model; vllm/worker/model_runner.py (V0)",
        Phase.WARMUP,
        _seconds("graph_capture_s"),
    ),
    Pattern(
        "capture_bar_sizes",
        "facts",
        ("Capturing CUDA graph",),
        r"Capturing CUDA graph(?: shapes|s)(?: \([^)]{0,60}\))?:\s+\d{1,3}%\|[^|]{0,80}\|\s*\d+/(?P<total>\d+)(?=\s)",
        "vllm/v1/worker/gpu_model_runner.py capture_model (tqdm); vllm/v1/worker/gpu/cudagraph_utils.py; "
        "vllm/worker/model_runner.py (V0)",
        Phase.GRAPH_CAPTURE,
        _capture_bar,
    ),
    Pattern(
        "max_capture_size",
        "facts",
        ("max_capture_size", "max_cudagraph_capture_size"),
        r"""["']max_(?:cudagraph_)?capture_size["']:\s*(?P<size>\d+)(?=[,}\s])""",
        "vllm/config/compilation.py CompilationConfig (in VllmConfig.__str__, the engine config line)",
        Phase.CONFIG,
        lambda m, rec: {"max_cudagraph_capture_size": to_int(m["size"])} if m["size"] else {},
    ),
    Pattern(
        "compile_cache_hit",
        "facts",
        ("Directly load the compiled graph",),
        r"Directly load the compiled graph(?:\(s\))? for .{0,200}?from the cache",
        "vllm/compilation/backends.py CompilerManager.load",
        None,
        lambda m, rec: {"compile_cache": "hit"},
    ),
    Pattern(
        "compile_cache_miss",
        "facts",
        ("Compiling a graph for",),
        r"Compiling a graph for .{0,200}? takes \d+(?:\.\d+)? s",
        "vllm/compilation/backends.py CompilerManager.compile",
        None,
        lambda m, rec: {"compile_cache": "miss"},
    ),
    Pattern(
        "model_runner_v2",
        "facts",
        ("Using V2 Model Runner",),
        r"Using V2 Model Runner",
        "vllm/v1/worker/gpu_worker.py init_device (0.16+)",
        None,
        lambda m, rec: {"model_runner": "v2"},
    ),
    Pattern(
        "model_runner_v1_fallback",
        "facts",
        ("using the V1 model runner instead",),
        r"Model Runner V2 .{0,300}?; using the V1 model runner instead",
        "vllm/config/vllm.py VllmConfig (0.23+)",
        None,
        lambda m, rec: {"model_runner": "v1"},
    ),
    Pattern(
        "non_default_args_line",
        "marker",
        ("non-default args:",),
        r"non-default args: \{",
        "vllm/entrypoints/utils.py log_non_default_args",
        None,
        lambda m, rec: {"marker": "non_default_args"},
    ),
    Pattern(
        "args_namespace_line",
        "marker",
        ("args: Namespace(",),
        r"^args: Namespace\(",
        "vllm/entrypoints/openai/api_server.py (<= v0.9)",
        None,
        lambda m, rec: {"marker": "args_namespace"},
    ),
]
