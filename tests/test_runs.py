"""How one paste splits into server runs: by startup markers and by the engine process identity.

The family (hunt5 m09 and m21, hunt6 p27 and p28): two vLLM instances in one paste, one after
the other or interleaved, the second failing; the stages of one vllm-omni server; one
instance's many workers (TP ranks, V0 workers, Ray actors), which are never instances; bare
summary lines quoted before the banner; several engines of one job each printing V0's
per-engine preemption count. Lines are vLLM's own wordings (vllm/v1/worker/gpu_worker.py,
vllm/v1/core/kv_cache_utils.py, vllm/core/scheduler.py; vllm_ascend/worker/worker_v1.py;
vllm-omni's worker base), wrapped the way each version prefixes them.
"""

from __future__ import annotations

import pytest

from vllm_doctor import diagnose
from vllm_doctor.catalog import Catalog
from vllm_doctor.envelopes import unwrap
from vllm_doctor.tracker import SourceTracker, instance_role


def track(lines):
    t = SourceTracker("t.log")
    cat = Catalog()
    for n, line in enumerate(lines, 1):
        for rec in unwrap("t.log", n, line):
            t.feed(rec, cat.recognise(rec))
    t.finish()
    return t


# -- prefixes of one process, as each version prints them ----------------------------------
def v1(name, pid, level, text, t="10:00:00", file="gpu_worker.py:1"):
    return f"({name} pid={pid}) {level} 01-15 {t} [{file}] {text}"


def ascend(name, pid, level, text, t="10:00:00", file="worker_v1.py:270"):
    # the MinerU launcher's prefix with the colour codes pasted in caret notation (m09)
    return f"[mineru] ^[[0;36m({name} pid={pid})^[[0;0m {level} 01-15 {t} [{file}] {text}"


KV_OK = "Available KV cache memory: 21.52 GiB"
KV_SIZE = "GPU KV cache size: 1,880,320 tokens"
KV_ZERO = "Available KV cache memory: 0.0 GiB"
KV_NEG = "Available KV cache memory: -1.25 GiB"
NO_BLOCKS = (
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine."
)
FAILED = "EngineCore failed to start."


def two_instances_sequential(name, failure, pre=v1):
    """Instance 1 (pid 3052) sizes its KV cache and captures graphs; instance 2 (pid 4146)
    then finds no KV memory."""
    return [
        pre(name, 3052, "INFO", "Model loading took 14.25 GiB and 30.1 seconds", file="gpu_model_runner.py:1"),
        pre(name, 3052, "INFO", KV_OK),
        pre(name, 3052, "INFO", KV_SIZE, file="kv_cache_utils.py:1286"),
        "Second instance, same command:",
        pre(name, 4146, "INFO", "Model loading took 14.25 GiB and 29.8 seconds", "10:01:00", "gpu_model_runner.py:1"),
        pre(name, 4146, "INFO" if "Available" in failure else "ERROR", failure, "10:01:05"),
        pre(name, 4146, "ERROR", FAILED, "10:01:05", "core.py:843"),
    ]


def two_instances_interleaved(failure):
    """Both servers started together: banners, engines and steps alternate line by line."""
    return [
        v1("APIServer", 100, "INFO", "vLLM API server version 0.11.2", file="api_server.py:1"),
        v1("APIServer", 200, "INFO", "vLLM API server version 0.11.2", file="api_server.py:1"),
        v1("APIServer", 100, "INFO", "non-default args: {'model': 'Qwen/Qwen3-8B', 'gpu_memory_utilization': 0.4}"),
        v1("APIServer", 200, "INFO", "non-default args: {'model': 'Qwen/Qwen3-8B', 'gpu_memory_utilization': 0.4}"),
        v1("EngineCore_DP0", 111, "INFO", "Model loading took 15.27 GiB and 20.0 seconds", file="x.py:1"),
        v1("EngineCore_DP0", 222, "INFO", "Model loading took 15.27 GiB and 21.0 seconds", file="x.py:1"),
        v1("EngineCore_DP0", 111, "INFO", KV_OK),
        v1("EngineCore_DP0", 111, "INFO", KV_SIZE, file="kv_cache_utils.py:1286"),
        v1("EngineCore_DP0", 222, "INFO" if "Available" in failure else "ERROR", failure),
        v1("EngineCore_DP0", 222, "ERROR", FAILED, file="core.py:843"),
        v1("APIServer", 100, "INFO", "Starting vLLM API server 0 on http://0.0.0.0:8000", file="api_server.py:1"),
    ]


SECOND_INSTANCE_CASES = {
    "v1-engine-core-dp0-zero-kv": two_instances_sequential("EngineCore_DP0", KV_ZERO),
    "v1-engine-core-negative-kv": two_instances_sequential("EngineCore", KV_NEG),
    "v1-engine-core-0-no-blocks": two_instances_sequential("EngineCore_0", NO_BLOCKS),
    "ascend-bytes-zero": two_instances_sequential(
        "EngineCore_DP0", "Available memory: 0, total memory: 65452113920", pre=ascend
    ),
    "interleaved-zero-kv": two_instances_interleaved(KV_ZERO),
    "interleaved-no-blocks": two_instances_interleaved(NO_BLOCKS),
}


@pytest.mark.parametrize("lines", SECOND_INSTANCE_CASES.values(), ids=SECOND_INSTANCE_CASES.keys())
def test_a_second_instance_is_its_own_run_with_its_own_facts(lines):
    t = track(lines)
    assert len(t.runs) == 2
    first, second = t.runs
    # the first instance's KV cache stays with it; the failing one holds its own lines only
    assert first.facts["kv_tokens"] == 1880320 and first.facts["kv_available_gib"] == 21.52
    assert "kv_tokens" not in second.facts
    assert not first.failures
    assert {line.pid for f in second.failures for line in f.lines} <= {222, 4146}
    assert [n.index for n in second.neighbours] == [1] and not first.neighbours


@pytest.mark.parametrize("lines", SECOND_INSTANCE_CASES.values(), ids=SECOND_INSTANCE_CASES.keys())
def test_no_kv_memory_beside_another_instance_is_contention_never_a_lower(lines):
    v = diagnose(lines, name="two.log")
    assert v.primary_class == "startup_memory_contention", v.title
    f = v.primary
    assert f.run == 2 and f.facts["co_tenant_instance_run"] == 1
    assert "another vLLM instance" in f.title
    assert f.facts.get("kv_tokens") is None  # not the other instance's 1,880,320
    assert not any(r.flag and r.flag.startswith("--gpu-memory-utilization") and "lower" in r.action for r in f.remedies)
    assert any("Lowering this instance's gpu_memory_utilization" in d for d in f.does_not_help)
    assert any("--kv-cache-memory-bytes" in r.action for r in f.remedies)


def test_both_utilizations_printed_give_the_sum_the_second_needs():
    args = "non-default args: {'model': 'Qwen/Qwen3-8B', 'gpu_memory_utilization': 0.4}"
    first, second = (
        two_instances_sequential("EngineCore_DP0", KV_ZERO)[:3],
        two_instances_sequential("EngineCore_DP0", KV_ZERO)[4:],
    )
    lines = [v1("APIServer", 100, "INFO", args), *first, v1("APIServer", 200, "INFO", args), *second]
    assert len(track(lines).runs) == 2
    f = diagnose(lines, name="two.log").primary
    assert f.remedies[0].flag == "--gpu-memory-utilization 0.80"  # 0.4 + the other's 0.4


def test_the_second_instance_alone_is_plain_kv_capacity():
    # the same failing lines without the first instance: no co-tenant is shown
    lines = two_instances_sequential("EngineCore_DP0", KV_NEG)[4:]
    v = diagnose(lines, name="one.log")
    assert v.primary_class == "kv_cache_capacity"


def test_an_earlier_instance_that_failed_first_is_no_co_tenant():
    lines = two_instances_sequential("EngineCore_DP0", KV_NEG)
    lines.insert(3, v1("EngineCore_DP0", 3052, "ERROR", "RuntimeError: CUDA error: an illegal memory access"))
    t = track(lines)
    assert len(t.runs) == 2 and t.runs[1].neighbours == []


# -- stages of one vllm-omni server ----------------------------------------------------------
OMNI_STAGE = [
    "(Worker pid=34506) INFO 04-16 09:13:25 [base.py:150] Available KV cache memory: 0.0 GiB (profiling fallback)",
    "(StageEngineCoreProc pid=33984) ERROR 04-16 09:13:25 [stage_engine_core_proc.py:98] StageEngineCoreProc "
    "failed to start.",
    "(StageEngineCoreProc pid=33984) ERROR 04-16 09:13:25 [stage_engine_core_proc.py:98] Traceback (most recent "
    "call last):",
]


@pytest.mark.parametrize(
    "lines",
    [
        OMNI_STAGE,
        [OMNI_STAGE[0].replace("(profiling fallback)", "(process-scoped)"), *OMNI_STAGE[1:]],
        [
            "(DiffusionWorker pid=2604) INFO 04-16 09:13:20 [diffusion_model_runner.py:133] Model loading took "
            "26.47 GiB and 13.2 seconds",
            *OMNI_STAGE,
        ],
    ],
    ids=["profiling-fallback", "process-scoped", "diffusion-worker-beside"],
)
def test_a_vllm_omni_stage_without_kv_memory_is_contention_with_no_raise_from_zero(lines):
    v = diagnose(lines, name="omni.log")
    assert v.primary_class == "startup_memory_contention", v.title
    f = v.primary
    assert "stage" in f.title
    assert not any(r.flag and r.flag.startswith("--gpu-memory-utilization") for r in f.remedies)
    assert "Start the stages one after another" in f.remedies[0].action
    assert len(track(lines).runs) == 1  # stages of one server are one run


# -- one instance's many processes are never instances ---------------------------------------
ONE_INSTANCE_CASES = {
    "v1-tp-workers": [
        v1(f"Worker_TP{r}", 500 + r, "INFO", "Model loading took 7.1 GiB and 10.0 seconds", file="x.py:1")
        for r in range(4)
    ]
    + [v1("EngineCore_DP0", 499, "INFO", KV_OK), v1("EngineCore_DP0", 499, "INFO", KV_SIZE)],
    "v1-workers-before-their-groups": [
        v1("Worker", 500 + r, "INFO", "Model loading took 7.1 GiB and 10.0 seconds", file="x.py:1") for r in range(4)
    ]
    + [v1("Worker_TP0", 500, "INFO", KV_OK), v1("Worker_TP1", 501, "INFO", KV_OK)],
    "v1-vllm-worker-ranks": [
        f"(VllmWorker rank={r} pid={600 + r}) INFO 01-15 10:00:00 [gpu_worker.py:1] {KV_OK}" for r in range(2)
    ],
    "v1-data-parallel-engines": [
        v1("EngineCore_DP0", 700, "INFO", KV_OK),
        v1("EngineCore_DP1", 701, "INFO", KV_OK),
        v1("EngineCore_DP0", 700, "INFO", KV_SIZE),
        v1("EngineCore_DP1", 701, "INFO", KV_SIZE),
    ],
    "v0-multiproc-workers": [
        "INFO 01-15 10:00:00 [api_server.py:1] vLLM API server version 0.6.6",
        *(
            f"(VllmWorkerProcess pid={800 + r}) INFO 01-15 10:00:01 [model_runner.py:1] Loading model weights took "
            "6.4 GiB"
            for r in range(3)
        ),
        "INFO 01-15 10:00:05 [executor_base.py:1] # GPU blocks: 4000, # CPU blocks: 512",
    ],
    "ray-worker-actors": [
        f"(RayWorkerWrapper pid={900 + r}, ip=192.0.2.{r + 1}) INFO 01-15 10:00:01 [model_runner.py:1] Loading model "
        "weights took 6.4 GiB"
        for r in range(3)
    ]
    + ["INFO 01-15 10:00:05 [executor_base.py:1] # GPU blocks: 4000, # CPU blocks: 512"],
    "ray-dp-engine-actors": [
        f"(DPEngineCoreActor pid={950 + r}) INFO 01-15 10:00:01 [gpu_worker.py:1] {KV_OK}" for r in range(2)
    ],
}


@pytest.mark.parametrize("lines", ONE_INSTANCE_CASES.values(), ids=ONE_INSTANCE_CASES.keys())
def test_one_instances_workers_stay_one_run(lines):
    t = track(lines)
    assert len(t.runs) == 1, [r.start_line for r in t.runs]


def test_instance_roles_are_the_one_per_instance_names():
    assert [instance_role(n, None) for n in ("EngineCore", "EngineCore_DP3", "EngineCore_0", "APIServer")] == [
        "EngineCore",
        "EngineCore_DP3",
        "EngineCore_0",
        "APIServer",
    ]
    assert instance_role("Worker_TP1_EP1", None) == "Worker_TP1_EP1"
    assert instance_role("VllmWorker", 2) == "VllmWorker rank=2"
    for shared in ("Worker", "VllmWorkerProcess", "RayWorkerWrapper", "WorkerDict", "StageEngineCoreProc", None):
        assert instance_role(shared, None) is None


def test_a_restart_reusing_pids_starts_a_new_run_that_keeps_its_lines():
    # docker restarts the container: the same pids print a second startup
    start = [
        v1("APIServer", 1, "INFO", "vLLM API server version 0.11.2", file="api_server.py:1"),
        v1("EngineCore_DP0", 170, "INFO", "Initializing a V1 LLM engine (v0.11.2) with config: model='m'"),
        v1("EngineCore_DP0", 170, "INFO", "Model loading took 15.27 GiB and 20.0 seconds", file="x.py:1"),
        v1("EngineCore_DP0", 170, "INFO", KV_OK),
        "(APIServer pid=1) INFO:     Application startup complete.",
    ]
    t = track(start + start + [v1("EngineCore_DP0", 170, "ERROR", NO_BLOCKS)])
    assert len(t.runs) == 2, [(r.start_line, r.opened_by) for r in t.runs]
    assert not t.runs[0].failures and len(t.runs[1].failures) == 1
    assert t.runs[1].facts["kv_available_gib"] == 21.52


# -- bare summary lines quoted before the banner (p28) ---------------------------------------
BANNER = [
    "(APIServer pid=6539) INFO 04-18 20:22:57 [utils.py:299] version 0.19.0",
    "(APIServer pid=6539) INFO 04-18 20:22:57 [utils.py:233] non-default args: {'model_tag': 'openai/gpt-oss-20b', "
    "'model': 'openai/gpt-oss-20b', 'max_model_len': 131072, 'gpu_memory_utilization': 0.65}",
]
QUOTED = ["Model loading took 13.72 GiB memory and 62.336108 seconds", "Available KV cache memory: 36.56 GiB"]


@pytest.mark.parametrize(
    "before",
    [
        QUOTED,
        ["vllm serve openai/gpt-oss-20b --max-model-len 131072 --gpu-memory-utilization 0.65", *QUOTED],
        ["> " + q for q in QUOTED],
    ],
    ids=["bare", "after-the-command", "markdown-quoted"],
)
def test_summary_lines_quoted_before_the_banner_are_that_startups(before):
    t = track(before + BANNER)
    assert len(t.runs) == 1
    run = t.runs[0]
    assert run.facts["kv_available_gib"] == 36.56 and run.config["max_model_len"] == 131072
    assert diagnose(before + BANNER, name="p.log").primary_class in ("healthy", "unknown")


def test_quoted_lines_of_another_model_or_a_prefixed_run_still_split():
    other = ["vllm serve meta-llama/Llama-3.1-8B --max-model-len 8192", *QUOTED]
    assert len(track(other + BANNER).runs) == 2
    prefixed = [v1("EngineCore", 12, "INFO", "Model loading took 13.72 GiB and 62.3 seconds", file="x.py:1"), *QUOTED]
    assert len(track(prefixed + BANNER).runs) == 2


# -- several engines of one job each counting their own preemptions (p27) ----------------------
PREEMPT = (
    "({who}) WARNING 04-14 20:0{m}:53 scheduler.py:1484] Sequence group 63 is preempted by PreemptionMode.RECOMPUTE "
    "mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
    "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
    "total_num_cumulative_preemption={n}{rep}"
)


def test_v0_preemption_counts_are_kept_per_engine():
    lines = [
        PREEMPT.format(who="WorkerDict pid=25295, ip=192.0.2.2", m=4, n=1, rep=""),
        PREEMPT.format(who="WorkerDict pid=25017, ip=192.0.2.4", m=6, n=1, rep=" [repeated 2x across cluster]"),
        PREEMPT.format(who="WorkerDict pid=25295, ip=192.0.2.2", m=8, n=51, rep=""),
    ]
    t = track(lines)
    assert len(t.runs) == 1
    p = t.runs[0].preemption
    assert p.by_process == {"WorkerDict pid 25295": 51, "WorkerDict pid 25017": 1}
    assert p.warnings == 3 and p.messages == 4  # Ray folded two alike messages into one line
    facts = diagnose(lines, name="p27.log").runs[0].facts
    assert facts["preempting_engines"] == 2 and facts["preemption_messages"] == 4


def test_a_failure_or_consequence_under_another_pid_stays_with_the_incident():
    # Snippets of one incident pasted together (the API server of the startup excerpt and the
    # one of the crash excerpt under other pids): no process starts up, so no second instance.
    from vllm_doctor import diagnose

    lines = [
        "(APIServer pid=90458) INFO 02-13 11:33:30 [api_server.py:1805] vLLM API server version 0.11.0",
        "(APIServer pid=90458) INFO 02-13 11:33:39 [loggers.py:257] Engine 000: Avg prompt throughput: 0.8 tokens/s, "
        "Avg generation throughput: 4.6 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, "
        "Prefix cache hit rate: 0.0%",
        "(EngineCore pid=112) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 50.00 MiB. GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free. Including "
        "non-PyTorch memory, this process has 23.50 GiB memory in use.",
        "(APIServer pid=1) ERROR 05-01 14:39:06 [async_llm.py:699] AsyncLLM output_handler failed.",
    ]
    v = diagnose(lines, name="glued.log")
    assert len(v.runs) == 1 and v.primary_class == "runtime_oom"
