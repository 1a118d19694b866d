"""Which run a verdict is about: a failure the newest run of its source got past (breakit4 item 3).

The family: one source holds a failing start, then another start of the same server that
reached serving with no finding. Set side by side:

* the operator changed a setting that can fix the failure (max_model_len after a KV capacity
  error, gpu_memory_utilization, quantization or tensor_parallel_size after a weight-load
  OOM; V1 and V0 wordings; with or without the new command pasted between): the failure is
  superseded, the verdict is healthy (exit 0), and no view prints its remedies (their
  numbers were the old run's: "lower to 12288" while 8192 is in force);
* an automatic restart with the same configuration (systemd, Kubernetes): the failure
  stands, with a note that it will likely recur; likewise a change of a setting that fixes
  no memory failure (the served name);
* nothing printed by both runs: the failure stands, and the note says so;
* the newest start did not reach serving, or failed itself: nothing is superseded.

Lines are vLLM's own wordings (vllm/entrypoints/utils.py non-default args, vllm/v1/core/
kv_cache_utils.py, vllm/v1/metrics/loggers.py; V0 vllm/engine/llm_engine.py, vllm/core/
scheduler.py), as breakit4's kv-fail-then-fixed.log strings them together.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from vllm_doctor import diagnose
from vllm_doctor.render.markdown import render_markdown
from vllm_doctor.render.text import render_follow_summary, render_text
from vllm_doctor.run import same_value

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def args(pid, **kw):
    cfg = {"model": MODEL, **kw}
    return f"(APIServer pid={pid}) INFO 05-01 10:00:01 [utils.py:326] non-default args: {cfg!r}"


def kv_fail(pid=200):
    return [
        f"(EngineCore_0 pid={pid}) INFO 05-01 10:00:10 [gpu_model_runner.py:1892] Model loading took 14.9889 GiB and 5.1 s",
        f"(EngineCore_0 pid={pid}) INFO 05-01 10:00:20 [gpu_worker.py:255] Available KV cache memory: 1.51 GiB",
        f"(EngineCore_0 pid={pid}) ERROR 05-01 10:00:20 [core.py:700] ValueError: To serve at least one request with "
        "the models's max seq len (32768), (4.00 GiB KV cache is needed, which is larger than the available KV cache "
        "memory (1.51 GiB). Based on the available memory, the estimated maximum model length is 12368. Try "
        "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    ]


def load_oom(pid=200):
    return [
        f"(EngineCore_0 pid={pid}) INFO 05-01 10:00:05 [gpu_model_runner.py:1770] Starting to load model {MODEL}...",
        f"(EngineCore_0 pid={pid}) ERROR 05-01 10:00:09 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 448.00 MiB. GPU 0 has a total capacity of 15.57 GiB of which 301.44 MiB is free. "
        "Including non-PyTorch memory, this process has 15.27 GiB memory in use.",
    ]


def runtime_oom(pid=200):
    return [
        "(APIServer pid=100) INFO:     Application startup complete.",
        *stats(100, 2),
        f"(EngineCore_0 pid={pid}) ERROR 05-01 11:00:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 50.00 MiB. GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free. "
        "Including non-PyTorch memory, this process has 23.50 GiB memory in use.",
        "(APIServer pid=100) ERROR 05-01 11:00:01 [async_llm.py:480] EngineDeadError: EngineCore encountered an issue.",
    ]


def serving(api=300, engine=400, n=2):
    return [
        f"(EngineCore_0 pid={engine}) INFO 05-01 10:05:10 [gpu_model_runner.py:1892] Model loading took 14.9889 GiB "
        "and 5.1 s",
        f"(EngineCore_0 pid={engine}) INFO 05-01 10:05:20 [gpu_worker.py:255] Available KV cache memory: 5.51 GiB",
        f"(EngineCore_0 pid={engine}) INFO 05-01 10:05:20 [kv_cache_utils.py:833] GPU KV cache size: 45,120 tokens",
        f"(APIServer pid={api}) INFO 05-01 10:05:31 [api_server.py:1818] Starting vLLM API server 0 on "
        "http://0.0.0.0:8000",
        f"(APIServer pid={api}) INFO:     Application startup complete.",
        *stats(api, n),
    ]


def stats(api, n):
    return [
        f"(APIServer pid={api}) INFO 05-01 10:06:{10 * i:02d} [loggers.py:122] Engine 000: Avg prompt throughput: "
        "120.0 tokens/s, Avg generation throughput: 400.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache "
        "usage: 30.0%, Prefix cache hit rate: 20.0%"
        for i in range(n)
    ]


def banner(pid):
    return f"(APIServer pid={pid}) INFO 05-01 10:05:01 [api_server.py:1395] vLLM API server version 0.10.1"


def v0_engine(max_seq_len, t="10:00:00"):
    return (
        f"INFO 05-01 {t} llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: model='{MODEL}', "
        f"tokenizer='{MODEL}', dtype=torch.bfloat16, max_seq_len={max_seq_len}, tensor_parallel_size=1, seed=0"
    )


V0_KV_FAIL = (
    "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in "
    "KV cache (12368). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
    "engine."
)
V0_STATS = (
    "INFO 05-01 10:06:00 metrics.py:349] Avg prompt throughput: 120.0 tokens/s, Avg generation throughput: 400.0 "
    "tokens/s, Running: 8 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 30.0%, CPU KV cache usage: 0.0%."
)

# -- the operator changed a setting that can fix the failure: superseded, healthy, exit 0 -----
FIXED = {
    "kv-then-max-model-len-with-command": (
        [
            args(100, max_model_len=32768),
            *kv_fail(),
            f"$ vllm serve {MODEL} --max-model-len 8192",
            banner(300),
            args(300, max_model_len=8192),
            *serving(),
        ],
        "kv_cache_capacity",
        [("max_model_len", 32768, 8192)],
    ),
    "kv-then-max-model-len-restarted-by-systemd": (
        [args(100, max_model_len=32768), *kv_fail(), banner(300), args(300, max_model_len=8192), *serving()],
        "kv_cache_capacity",
        [("max_model_len", 32768, 8192)],
    ),
    "kv-then-gpu-memory-utilization": (
        [
            args(100, max_model_len=32768, gpu_memory_utilization=0.8),
            *kv_fail(),
            banner(300),
            args(300, max_model_len=32768, gpu_memory_utilization=0.95),
            *serving(),
        ],
        "kv_cache_capacity",
        [("gpu_memory_utilization", 0.8, 0.95)],
    ),
    "kv-then-gpu-memory-utilization-from-the-default": (
        [
            args(100, max_model_len=32768),
            *kv_fail(),
            banner(300),
            args(300, max_model_len=32768, gpu_memory_utilization=0.95),
            *serving(),
        ],
        "kv_cache_capacity",
        [("gpu_memory_utilization", None, 0.95)],  # the first non-default args name none: the default
    ),
    "load-oom-then-quantization": (
        [args(100), *load_oom(), banner(300), args(300, quantization="awq"), *serving()],
        "weight_load_oom",
        [("quantization", None, "awq")],  # the first non-default args name none: the default
    ),
    "load-oom-then-tensor-parallel": (
        [args(100, tensor_parallel_size=1), *load_oom(), banner(300), args(300, tensor_parallel_size=2), *serving()],
        "weight_load_oom",
        [("tensor_parallel_size", 1, 2)],
    ),
    "v0-kv-then-max-seq-len": (
        [
            v0_engine(32768),
            f"ERROR 05-01 10:00:20 engine.py:366] {V0_KV_FAIL}",
            v0_engine(8192, "10:05:00"),
            "INFO 05-01 10:05:20 llm_engine.py:447] # GPU blocks: 2820, # CPU blocks: 2048",
            V0_STATS,
        ],
        "kv_cache_capacity",
        [("max_model_len", 32768, 8192)],
    ),
}


def _json(v):
    d = v.to_dict()
    schema = json.loads((Path(__file__).resolve().parents[1] / "vllm_doctor" / "verdict.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(d, default=str)), schema)
    return d


@pytest.mark.parametrize("lines,failed,changes", FIXED.values(), ids=FIXED.keys())
def test_a_fix_that_serves_supersedes_the_failure(lines, failed, changes):
    v = diagnose(lines, name="fixed.log")
    old = [f for f in v.findings if f.class_id == failed]
    if changes is None:  # the change is not one both runs print: the failure stands, with a note
        assert v.primary_class == failed and v.exit_code == 1
        assert any("whether anything was changed" in n for n in v.primary.notes), v.primary.notes
        return
    assert v.primary_class == "healthy" and v.exit_code == 0 and v.primary is None, v.title
    assert old and all(f.superseded for f in old)
    got = [(c["setting"], c["was"], c["now"]) for c in old[0].superseded["changes"]]
    assert got == changes
    newest = max(r.index for r in v.runs)
    assert old[0].superseded["run"] == newest
    what = ", ".join(f"{s} {'default' if a is None else a} -> {b}" for s, a, b in changes)
    assert v.title.startswith(f"Serving now (run {newest}, {what}); an earlier run failed: {old[0].code} {failed}")
    assert v.title.endswith("(superseded by the change)")
    d = _json(v)
    assert d["exit_code"] == 0 and d["primary_finding"] is None
    assert [f["superseded"]["run"] for f in d["findings"] if f["class"] == failed] == [newest]
    # no view prints the old run's remedies as a to-do (their numbers were the old run's)
    text = render_text(v, width=120)
    assert "do this first" not in text
    flags = [r.flag for f in old for r in f.remedies if r.flag]
    for view in (text, render_markdown(v), render_follow_summary(v, width=120)):
        assert "superseded by run" in view
        assert not any(flag in view for flag in flags), [flag for flag in flags if flag in view]
        assert "Do this first" not in view


# -- the same configuration came back: the failure stands, and will likely recur ---------------
def test_an_automatic_restart_with_the_same_configuration_leaves_the_failure_standing():
    cfg = {"max_model_len": 16384, "gpu_memory_utilization": 0.9}
    lines = [banner(100), args(100, **cfg), *runtime_oom(), banner(300), args(300, **cfg), *serving()]
    v = diagnose(lines, name="systemd.log")
    assert v.primary_class == "runtime_oom" and v.exit_code == 1 and not v.primary.superseded
    note = next(n for n in v.primary.notes if "came back" in n)
    assert "same configuration" in note and "model, max_model_len, gpu_memory_utilization" in note
    assert "will likely recur" in note
    assert v.primary.remedies  # its remedies stand: nothing was changed
    assert "will likely recur" in render_text(v, width=120) and "will likely recur" in render_markdown(v)


def test_each_earlier_failure_is_set_beside_the_newest_run():
    # a restart loop: 32768 fails, 8192 fails (another cause: the weights), then 8192 serves.
    # The first is superseded by the change; the second ran what serves now, so it stands,
    # heads the verdict and will likely recur.
    lines = [
        args(100, max_model_len=32768),
        *kv_fail(),
        banner(300),
        args(300, max_model_len=8192),
        *load_oom(400),
        banner(500),
        args(500, max_model_len=8192),
        *serving(600, 700),
    ]
    v = diagnose(lines, name="loop.log")
    by_run = {f.run: f for f in v.findings if f.severity != "info"}
    assert by_run[1].superseded == {"run": 3, "changes": [{"setting": "max_model_len", "was": 32768, "now": 8192}]}
    assert v.primary is by_run[2] and not by_run[2].superseded and v.exit_code == 1
    assert any("same configuration" in n for n in v.primary.notes)


def test_a_change_that_fixes_no_memory_failure_is_the_same_configuration():
    before = args(100, max_model_len=32768, served_model_name=["a"])
    after = args(300, max_model_len=32768, served_model_name=["b"])
    v = diagnose([before, *kv_fail(), banner(300), after, *serving()], name="renamed.log")
    assert v.primary_class == "kv_cache_capacity" and not v.primary.superseded
    assert any("same configuration" in n for n in v.primary.notes)


def test_naming_the_default_is_no_change():
    # 0.9 is vLLM's default (0.92 from 0.20): a non-default args line naming it changes nothing
    before = args(100, max_model_len=32768)
    after = args(300, max_model_len=32768, gpu_memory_utilization=0.9)
    v = diagnose([before, *kv_fail(), banner(300), after, *serving()], name="default.log")
    assert v.primary_class == "kv_cache_capacity" and not v.primary.superseded
    assert any("same configuration" in n for n in v.primary.notes)


def test_nothing_printed_by_both_runs_leaves_the_failure_standing_and_says_so():
    v = diagnose([*kv_fail(), banner(300), *serving()], name="bare.log")
    assert v.primary_class == "kv_cache_capacity" and v.exit_code == 1
    assert any("whether anything was changed" in n for n in v.primary.notes)


# -- the newest start is no proof: it did not serve, or failed too -----------------------------
NOT_SERVING = {
    "cut-during-loading": [
        banner(300),
        args(300, max_model_len=8192),
        f"(EngineCore_0 pid=400) INFO 05-01 10:05:05 [gpu_model_runner.py:1770] Starting to load model {MODEL}...",
    ],
    "failed-again": [banner(300), args(300, max_model_len=8192), *load_oom(400)],
}


@pytest.mark.parametrize("after", NOT_SERVING.values(), ids=NOT_SERVING.keys())
def test_a_newest_run_that_does_not_serve_supersedes_nothing(after):
    v = diagnose([args(100, max_model_len=32768), *kv_fail(), *after], name="retry.log")
    assert v.exit_code == 1
    assert not any(f.superseded for f in v.findings)
    assert not any("came back" in n for f in v.findings for n in f.notes)


def test_a_restart_cut_during_startup_leaves_the_failure_read_against_its_settings():
    # run 2 starts at 8192 and the log ends while it loads: VD101 of run 1 stands, but its
    # "lower max_model_len to 12288" is already done (and more) by run 2: no flag that would
    # raise 8192 back to 12288; the other remedies keep theirs
    after = NOT_SERVING["cut-during-loading"]
    v = diagnose([args(100, max_model_len=32768), *kv_fail(), *after], name="retry.log")
    assert v.primary_class == "kv_cache_capacity" and v.primary.run == 1 and v.exit_code == 1
    note = next(n for n in v.primary.notes if n.startswith("A later start (run 2)"))
    assert "max_model_len 32768 -> 8192" in note and "loading weights" in note
    first = v.primary.remedies[0]
    assert first.setting == "max_model_len" and first.flag is None
    assert first.why.startswith("run 2 already runs max_model_len 8192")
    assert any(r.flag == "--kv-cache-dtype fp8" for r in v.primary.remedies)
    assert "--max-model-len 12288" not in render_text(v, width=120)


def test_a_restart_cut_during_startup_keeps_a_remedy_it_does_not_carry_out():
    # 16384 is still above the 12288 that fits: the lowering stands, with its number
    after = [banner(300), args(300, max_model_len=16384)]
    v = diagnose([args(100, max_model_len=32768), *kv_fail(), *after], name="retry.log")
    assert v.primary.remedies[0].flag == "--max-model-len 12288"
    assert any("max_model_len 32768 -> 16384" in n for n in v.primary.notes)


def test_it_is_said_once_however_often_the_verdict_is_built():
    from vllm_doctor.pipeline import build_verdict, diagnose_source

    cfg = {"max_model_len": 16384}
    lines = [banner(100), args(100, **cfg), *runtime_oom(), banner(300), args(300, **cfg), *serving()]
    results = diagnose_source("twice.log", enumerate(lines, 1))
    build_verdict(results)
    v = build_verdict(results)
    assert sum("came back" in n for n in v.primary.notes) == 1


@pytest.mark.parametrize(
    "a,b,same",
    [
        (32768, 32768.0, True),
        (0.95, "0.95", True),
        ("FP8", "fp8", True),
        (["a"], "a", True),
        (8192, 32768, False),
        (True, False, False),
        ("awq", "gptq", False),
    ],
)
def test_settings_compare_by_value(a, b, same):
    assert same_value(a, b) is same


# -- a command line the parser refused, then a start that serves (breakit5 item 4) -------------

REFUSAL = [
    f"$ vllm serve {MODEL} --max-modle-len 16384",
    "usage: vllm serve [model_tag] [options]",
    "vllm serve: error: unrecognized arguments: --max-modle-len 16384",
]


@pytest.mark.parametrize(
    "between",
    [
        [f"$ vllm serve {MODEL} --max-model-len 16384"],  # the corrected command pasted
        [],  # no command: the next start's own lines
    ],
)
def test_a_refused_command_line_is_superseded_by_a_start_that_serves(between):
    v = diagnose([*REFUSAL, *between, banner(300), args(300, max_model_len=16384), *serving()], name="t.log")
    assert v.primary_class == "healthy" and v.exit_code == 0, v.title
    (refused,) = [f for f in v.findings if f.code == "VD900"]
    assert refused.superseded == {
        "run": 2,
        "changes": [{"setting": "the command line", "was": "refused by the parser", "now": "accepted"}],
    }


def test_a_refusal_with_nothing_served_after_it_stands():
    v = diagnose([*REFUSAL, banner(300)], name="t.log")
    assert v.primary_class == "other" and v.exit_code == 1
