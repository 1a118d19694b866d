"""Whose code a frame is, which engine it proves, and frames as IPython prints them.

Three families (hunt8 u11 and u02, hunt7 q21):

* vLLM's own entry points are vLLM's code in every install layout: the ``vllm`` console script
  (``pyproject.toml`` ``[project.scripts] vllm = "vllm.entrypoints.cli.main:main"``) in a venv,
  a conda env, ``/usr/local/bin`` (the Docker images), ``~/.local/bin`` (``pip --user``, pipx and
  uv tool links), pipx's and uv tool's own venvs, Windows ``Scripts\\vllm.exe``; ``python -m
  vllm.entrypoints.openai.api_server`` (``runpy`` frames, then vLLM's); an editable checkout;
  the platform plugins (``vllm_ascend``, ``vllm_gaudi`` ...). An OOM under them is never "raised
  outside vLLM".
* The engine from frame paths where no banner says it: ``vllm/v1/`` is V1; ``vllm/worker/``
  (not ``worker_base.py``, which V1 shares 0.8-0.10), ``vllm/engine/llm_engine.py`` outside the
  class methods V1 shares, ``vllm/engine/multiprocessing/``, ``vllm/spec_decode/`` are V0.
* IPython / Jupyter tracebacks: IPython 8's ``File PATH:LINE, in Class.func(args)`` (plain, with
  ANSI colours, as JupyterLab and VS Code render it ``File [PATH:LINE](URL), in ...``), IPython 7's
  ``PATH in func(args)``, and the ``---> N`` arrow at the line that raised.
"""

from __future__ import annotations

import pytest
from test_tracker import track

from vllm_doctor import diagnose
from vllm_doctor.frames import engine_of_frame, looks_like_code, origin_tags

# -- 1. vLLM's entry points in every install layout ---------------------------------------------
SITE = "lib/python3.11/site-packages"
CONSOLE_SCRIPTS = {
    "venv": "/srv/venv/bin/vllm",
    "conda": "/home/user/anaconda3/envs/vllmenv/bin/vllm",
    "miniforge": "/root/miniforge3/envs/vllm_infer/bin/vllm",
    "usr-local (docker image, pip as root)": "/usr/local/bin/vllm",
    "pip --user / pipx / uv tool link": "/home/user/.local/bin/vllm",
    "pipx venv": "/home/user/.local/pipx/venvs/vllm/bin/vllm",
    "uv tool venv": "/home/user/.local/share/uv/tools/vllm/bin/vllm",
    "windows venv": "C:\\Users\\user\\venv\\Scripts\\vllm.exe",
}
VLLM_FILES = {
    "cli main": f"/home/user/anaconda3/envs/vllmenv/{SITE}/vllm/entrypoints/cli/main.py",
    "cli serve": f"/usr/local/{SITE}/vllm/entrypoints/cli/serve.py",
    "api server (python -m)": f"/usr/local/{SITE}/vllm/entrypoints/openai/api_server.py",
    "dist-packages": "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py",
    "editable checkout": "/home/user/src/vllm/vllm/model_executor/model_loader/loader.py",
    "ascend plugin": f"/usr/local/{SITE}/vllm_ascend/worker/worker_v1.py",
    "gaudi plugin": f"/usr/local/{SITE}/vllm_gaudi/v1/worker/hpu_worker.py",
}
NOT_VLLM = {
    "a user's script": "/home/user/serve.py",
    "a script named like vllm": "/home/user/bin/vllm_bench.py",
    "another console script": "/home/user/venv/bin/myvllm",
    "a trainer": f"/usr/local/{SITE}/trl/trainer/grpo_trainer.py",
}


@pytest.mark.parametrize("path", CONSOLE_SCRIPTS.values(), ids=CONSOLE_SCRIPTS.keys())
def test_the_console_script_is_vllms_code(path):
    assert origin_tags(path) == {"vllm_code"}


@pytest.mark.parametrize("path", VLLM_FILES.values(), ids=VLLM_FILES.keys())
def test_vllms_files_in_every_layout_are_vllms_code(path):
    assert origin_tags(path) == {"vllm_code"}


@pytest.mark.parametrize("path", NOT_VLLM.values(), ids=NOT_VLLM.keys())
def test_other_files_are_applications(path):
    assert origin_tags(path) == {"app_code"}


# hunt8 u11: ROCm's OOM (no process list), then the CLI's traceback, cut after its second frame
HIP_OOM = (
    "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total capacity of "
    "31.98 GiB of which 136.00 MiB is free. Of the allocated memory 31.61 GiB is allocated by PyTorch, and "
    "1.21 MiB is reserved by PyTorch but unallocated."
)


def _entry_traceback(script):
    if script == "python -m":
        return [
            "Traceback (most recent call last):",
            '  File "<frozen runpy>", line 198, in _run_module_as_main',
            '  File "<frozen runpy>", line 88, in _run_code',
            f'  File "{VLLM_FILES["api server (python -m)"]}", line 1951, in <module>',
            "    uvloop.run(run_server(args))",
        ]
    return [
        "Traceback (most recent call last):",
        f'  File "{script}", line 8, in <module>',
        "    sys.exit(main())",
        "             ^^^^^^",
    ]


ENTRIES = {**CONSOLE_SCRIPTS, "python -m": "python -m"}


@pytest.mark.parametrize("script", ENTRIES.values(), ids=ENTRIES.keys())
@pytest.mark.parametrize("order", ["oom-first", "traceback-first"])
def test_an_oom_under_vllms_entry_is_not_raised_outside_vllm(script, order):
    tb = _entry_traceback(script)
    lines = ["vllm serve Qwen/Qwen3-32B --port 8000", *(([HIP_OOM] + tb) if order == "oom-first" else (tb + [HIP_OOM]))]
    v = diagnose(lines, name="u11.log")
    assert "outside vLLM" not in v.title
    # Qwen3-32B in bf16 (about 60 GiB) on a 32 GiB card: the weights do not fit
    assert v.primary_class == "weight_load_oom", v.title


# -- 2. the engine from frame paths --------------------------------------------------------------
ENGINE_FRAMES = [
    # (function, path under site-packages/vllm, engine or None)
    ("capture", "worker/model_runner.py", "v0"),  # hunt7 q21
    ("_allocate_kv_cache", "worker/cache_engine.py", "v0"),
    ("determine_num_available_blocks", "worker/worker.py", "v0"),
    ("step", "engine/llm_engine.py", "v0"),
    ("engine_step", "engine/async_llm_engine.py", "v0"),
    ("run_engine_loop", "engine/multiprocessing/engine.py", "v0"),
    ("execute_model", "spec_decode/spec_decode_worker.py", "v0"),
    ("execute_model", "v1/worker/gpu_model_runner.py", "v1"),
    ("run_busy_loop", "v1/engine/core.py", "v1"),
    ("step", "v1/engine/llm_engine.py", "v1"),
    # shared by both engines: no engine
    ("execute_method", "worker/worker_base.py", None),  # V1 workers run under it (0.8-0.10)
    ("from_engine_args", "engine/llm_engine.py", None),  # picks V1 when VLLM_USE_V1 is set
    ("<module>", "engine/llm_engine.py", None),  # from 0.11 only an alias of V1's
    ("create_engine_config", "engine/arg_utils.py", None),
    ("collective_rpc", "executor/uniproc_executor.py", None),  # V1's executors subclass V0's
    ("generate", "entrypoints/llm.py", None),
]


@pytest.mark.parametrize(("func", "rel", "engine"), ENGINE_FRAMES, ids=[f"{r}:{f}" for f, r, _ in ENGINE_FRAMES])
def test_the_engine_a_frame_proves(func, rel, engine):
    assert engine_of_frame(func, f"/usr/local/{SITE}/vllm/{rel}") == engine


def test_v0_capture_frames_give_v0s_defaults_in_the_remedies():
    # hunt7 q21: V0 frames, no banner; the max_num_seqs remedy quoted V1's default 256-1024
    lines = [
        "Traceback (most recent call last):",
        f'  File "/root/miniforge3/envs/x/{SITE}/vllm/worker/model_runner.py", line 1982, in capture',
        "    gc.collect()",
        f'  File "/root/miniforge3/envs/x/{SITE}/torch/cuda/graphs.py", line 84, in capture_end',
        "    super().capture_end()",
        "RuntimeError: CUDA error: out of memory",
    ]
    v = diagnose(lines, name="q21.log")
    assert v.primary_class == "cuda_graph_capture_oom"
    assert v.runs[0].engine == "v0"
    whys = " ".join(r.why or "" for r in v.primary.remedies)
    assert "V1" not in whys and "V0's default" in whys


# -- 3. IPython / Jupyter frames -----------------------------------------------------------------
NB = "~/miniconda3/envs/qwen_env/lib/python3.11/site-packages/vllm/worker"
URL = "http://192.0.2.10:8888/lab/tree/miniconda3/envs/qwen_env/lib/python3.11/site-packages/vllm/worker"
ESC = "\x1b"


def ipython_frame(style, path, line, qual, args):
    func = qual.rsplit(".", 1)[-1]
    return {
        "ipython8-jupyterlab-link": f"File [{NB}/{path}:{line}]({URL}/{path}#line={line - 1}), in {qual}({args})",
        "ipython8-plain": f"File {NB}/{path}:{line}, in {qual}({args})",
        "ipython8-ansi": f"{ESC}[0;32mFile {ESC}[0;32m{NB}/{path}:{line}{ESC}[0m, in {ESC}[0;36m{qual}{ESC}[0;34m({args}){ESC}[0m",
        "ipython8-absolute": f"File /opt/conda/lib/python3.10/site-packages/vllm/worker/{path}:{line}, in {qual}({args})",
        "vscode-notebook-link": f"File [{NB}/{path}:{line}](vscode-notebook-cell:/x.ipynb#X1), in {qual}({args})",
        "ipython7": f"{NB}/{path} in {func}({args})",
        "ipython7-ansi": f"{ESC}[0;32m{NB}/{path}{ESC}[0m in {ESC}[0;36m{func}{ESC}[0;34m({args}){ESC}[0m",
    }[style]


def ipython_traceback(style, oom=True):
    """hunt8 u02: V0's CacheEngine allocating the KV cache, as each IPython prints it."""
    arrow = f"{ESC}[0;32m---> 64{ESC}[0m" if "ansi" in style else "---> 64"
    return [
        ipython_frame(style, "cache_engine.py", 49, "CacheEngine.__init__", "self, cache_config, model_config"),
        "     48 # Initialize the cache.",
        '---> 49 self.gpu_cache = self._allocate_kv_cache(self.num_gpu_blocks, "cuda")',
        "",
        ipython_frame(style, "cache_engine.py", 64, "CacheEngine._allocate_kv_cache", "self, num_blocks, device"),
        "     63     kv_cache.append(",
        f"{arrow}         torch.empty(kv_cache_shape,",
        "     65                     dtype=self.dtype,",
        "",
        *(["OutOfMemoryError: CUDA out of memory. Tried to allocate 642.00 MiB. GPU"] if oom else []),
    ]


IPYTHON_STYLES = [
    "ipython8-jupyterlab-link",
    "ipython8-plain",
    "ipython8-ansi",
    "ipython8-absolute",
    "vscode-notebook-link",
    "ipython7",
    "ipython7-ansi",
]


@pytest.mark.parametrize("style", IPYTHON_STYLES)
def test_ipython_frames_are_frames(style):
    t = track(ipython_traceback(style))
    (run,) = t.runs
    (f,) = run.failures
    assert {"kv_alloc", "vllm_code"} <= f.tags, f.tags
    assert f.data["frames"] == ["__init__", "_allocate_kv_cache"]
    assert run.engine == "v0"


@pytest.mark.parametrize("style", IPYTHON_STYLES)
def test_an_ipython_traceback_places_its_oom_in_the_kv_allocation(style):
    v = diagnose(ipython_traceback(style), name="u02.log")
    assert v.primary.phase == "startup"
    assert v.primary_class in ("kv_cache_capacity", "startup_memory_contention"), v.title


@pytest.mark.parametrize("style", IPYTHON_STYLES)
def test_an_ipython_traceback_cut_before_its_exception_still_names_its_step(style):
    t = track(ipython_traceback(style, oom=False))
    (f,) = t.runs[0].failures
    assert f.kind == "traceback" and "kv_alloc" in f.tags


@pytest.mark.parametrize(
    "line",
    ["---> 64         torch.empty(kv_cache_shape,", "----> 5 llm = LLM(model='Qwen/Qwen1.5-32B-Chat-GPTQ-Int4')"],
)
def test_ipythons_arrow_line_is_code(line):
    assert looks_like_code(line)


@pytest.mark.parametrize("line", ["--> see above", "---> the OOM below", "->"])
def test_prose_arrows_are_not_code_lines(line):
    # IPython's arrow is dashes, ">" and the line number
    assert not looks_like_code(line)
