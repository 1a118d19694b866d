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
from test_tracker import track  # one tracker driver for both files

from vllm_doctor import diagnose
from vllm_doctor.tracker import instance_role


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


# -- a new run at each launch command after a failure (hunt7 q04) -------------------------------
# The first server (a multimodal model at its default image limits) dies; the operator starts it
# again, text-only; the second start's numbers must not be used for the first one's remedies.
OOM_WHOLE = (
    "(EngineCore_DP0 pid=1531) ERROR 10-29 01:56:59 [v1/engine/core.py:779] torch.OutOfMemoryError: HIP out of "
    "memory. Tried to allocate 256.00 GiB. GPU 0 has a total capacity of 15.98 GiB of which 8.07 GiB is free. Of "
    "the allocated memory 7.14 GiB is allocated by PyTorch, and 31.16 MiB is reserved by PyTorch but unallocated."
)
OOM_CUT = OOM_WHOLE[: OOM_WHOLE.index(" of which")]
OOM_BARE_V0 = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 23.64 "
    "GiB of which 11.07 GiB is free. Including non-PyTorch memory, this process has 12.55 GiB memory in use."
)
SECOND = "Qwen/Qwen3-VL-2B-Instruct"
LAUNCHES = {
    "vllm-serve-one-line": [f"vllm serve {SECOND} --max-model-len 2048 --max-num-seqs 1"],
    "vllm-serve-continued": [
        f"root@host1:/app# vllm serve {SECOND}  \\",
        '--limit-mm-per-prompt \'{"image":0,"video":0}\' \\',
        "--max-model-len 2K \\",
        "--max-num-seqs 1",
    ],
    "python-m-api-server": [f"python -m vllm.entrypoints.openai.api_server --model {SECOND} --max-num-seqs 1"],
    "docker-run": [f"docker run --gpus all vllm/vllm-openai:v0.11.0 --model {SECOND} --max-num-seqs 1"],
    "v1-non-default-args": [
        f"(APIServer pid=2199) INFO 10-29 02:14:54 [utils.py:253] non-default args: {{'model_tag': '{SECOND}', "
        f"'model': '{SECOND}', 'max_model_len': 2048, 'max_num_seqs': 1}}"
    ],
    "v0-engine-config": [
        f"INFO 10-29 02:14:54 llm_engine.py:249] Initializing an LLM engine (v0.6.4.post1) with config: "
        f"model='{SECOND}', speculative_config=None, tokenizer='{SECOND}', max_seq_len=2048, tensor_parallel_size=1"
    ],
    "offline-llm-call": [f"llm = LLM(model='{SECOND}', max_model_len=2048, max_num_seqs=1)"],
}
FIRST_FAILURES = {"v1-whole": OOM_WHOLE, "v1-cut": OOM_CUT, "bare": OOM_BARE_V0}
AFTER = [
    "(APIServer pid=2199) INFO 10-29 02:14:54 [api_server.py:1870] vLLM API server version 0.11.1rc4",
    "(APIServer pid=2199) INFO 10-29 02:14:56 [model.py:667] Resolved architecture: Qwen3VLForConditionalGeneration",
]


@pytest.mark.parametrize("launch", LAUNCHES.values(), ids=LAUNCHES.keys())
@pytest.mark.parametrize("first", FIRST_FAILURES.values(), ids=FIRST_FAILURES.keys())
def test_a_launch_after_a_failure_starts_the_next_run(first, launch):
    lines = [first, "", "When text-only, no issue", "", *launch, *AFTER]
    t = track(lines)
    assert len(t.runs) == 2, [(r.start_line, r.opened_by) for r in t.runs]
    one, two = t.runs
    assert one.failures and not two.failures
    assert "max_num_seqs" not in one.config and "model" not in one.config
    assert two.config["model"] == SECOND
    v = diagnose(lines, name="q04.log")
    assert v.primary.run == 1  # the run that failed, not the text-only retry cut after its start
    whys = " ".join(r.why or "" for r in v.primary.remedies)
    assert "as printed on line" not in whys and "as the launch command sets it" not in whys


#: The operator's own commands (vLLM's printouts of its arguments are a server starting).
COMMANDS = {k: v for k, v in LAUNCHES.items() if k not in ("v1-non-default-args", "v0-engine-config")}


@pytest.mark.parametrize("launch", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_command_quoted_below_its_error_is_that_runs_command(launch):
    # nothing follows the command: the operator says what they ran, not a second server
    t = track([OOM_BARE_V0, "my command:", *launch])
    assert len(t.runs) == 1
    (run,) = t.runs
    assert run.failures and run.config["model"] == SECOND
    assert run.markers["launch_command"].lineno == 3


def test_the_log_pasted_below_its_own_error_stays_one_run():
    # hunt7 q26: the error first, then the startup lines it ended (times before the error's)
    lines = [
        "ERROR 04-02 12:33:23 [core.py:380] ValueError: To serve at least one request with the models's max seq "
        "len (32768), (0.95 GiB KV cache is needed, which is larger than the available KV cache memory (0.93 GiB).",
        "",
        "INFO 04-02 12:32:04 [core.py:61] Initializing a V1 LLM engine (v0.8.3.dev172+g2b93162f) with config: "
        "model='/home/user/DeepSeek-V2-Lite-Chat/', max_seq_len=32768",
        "INFO 04-02 12:33:10 [gpu_model_runner.py:1176] Model loading took 29.33 GiB and 40.2 seconds",
    ]
    t = track(lines)
    assert len(t.runs) == 1 and t.runs[0].config["max_model_len"] == 32768


def test_configuration_checks_refusing_each_command_stay_one_run():
    # fixture k028: three commands, each refused by a dtype check: one run, so the rule sees
    # every dtype tried and never advises one the log shows refused
    cmd = "vllm serve gaunernst/gemma-3-27b-it-int4-awq -tp 2 --dtype {}"
    lines = [
        cmd.format("bfloat16"),
        "Value error, torch.bfloat16 is not supported for quantization method awq. Supported dtypes: [torch.float16]",
        cmd.format("half"),
        "Value error, The model type 'gemma3' does not support float16. Reason: Numerical instability. Please use "
        "bfloat16 or float32 instead.",
    ]
    assert len(track(lines).runs) == 1
    v = diagnose(lines, name="k028.log")
    assert not any(r.flag == "--dtype float16" for r in v.primary.remedies)


# -- a later attempt after a configuration check refused the first (hunt8 u08) --------------------
REFUSALS = {
    "bf16-capability": "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
    "Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` "
    "flag in CLI, for example: --dtype=half.",
    "awq-dtype": "ValueError: torch.bfloat16 is not supported for quantization method awq. Supported dtypes: "
    "[torch.float16]",
    "max-model-len": "ValueError: User-specified max_model_len (65536) is greater than the derived max_model_len "
    "(max_position_embeddings=32768 or model_max_length=None in model's config.json).",
}
T4_OOM = {
    "whole": "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 214.00 MiB. GPU 0 has a total "
    "capacty of 14.58 GiB of which 127.56 MiB is free. Including non-PyTorch memory, this process has 14.45 GiB "
    "memory in use. Of the allocated memory 14.19 GiB is allocated by PyTorch, and 1.15 MiB is reserved by PyTorch "
    "but unallocated.",
    "prose-glued": "3. then with float16 it says: orch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "214.00 MiB. GPU 0 has a total capacty of 14.58 GiB of which 127.56 MiB is free. Including non-PyTorch memory, "
    "this process has 14.45 GiB memory in use.",
}


@pytest.mark.parametrize("oom", T4_OOM.values(), ids=T4_OOM.keys())
@pytest.mark.parametrize("refusal", REFUSALS.values(), ids=REFUSALS.keys())
def test_an_oom_after_a_configuration_refusal_is_the_later_attempts(refusal, oom):
    lines = [f"1. first it said {refusal}", "2. the other steps of the tutorial ran fine", oom, "4. nothing helped"]
    t = track(lines)
    assert [r.opened_by for r in t.runs] == [None, "attempt"]
    assert [f.kind for f in t.runs[1].failures] == ["oom"]
    v = diagnose(lines, name="u08.log")
    # the later failure is the one that stands; nothing served in the attempt: startup
    assert v.primary.run == 2 and v.primary.phase == "startup"
    assert v.primary_class == "weight_load_oom", v.title


def test_a_refusal_and_its_engine_wrapper_stay_one_run():
    lines = [
        "(EngineCore_DP0 pid=20) ERROR 05-10 17:00:00 [core.py:700] " + REFUSALS["awq-dtype"],
        "(APIServer pid=11) ERROR 05-10 17:00:01 [core.py:843] EngineCore failed to start.",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    assert len(track(lines).runs) == 1


# -- a launch command that no server output follows is a note, not a run (breakit4 item 9) ------
# An issue's "How to reproduce" block repeats the command that produced the failure above it,
# then its "Environment" block: collect_env output, which imports vllm and so prints the
# platform line vLLM prints on import. No server started there: the command's values are the
# failing run's (0.95 was in force), and no phantom run gets advice of its own.
KV_FAIL = [
    "(APIServer pid=100) INFO 05-01 10:00:01 [utils.py:326] non-default args: {'model': "
    "'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 32768}",
    "(EngineCore_0 pid=200) INFO 05-01 10:00:10 [gpu_model_runner.py:1892] Model loading took 14.9889 GiB and 5.1 s",
    "(EngineCore_0 pid=200) INFO 05-01 10:00:20 [gpu_worker.py:255] Available KV cache memory: 1.51 GiB",
    "(EngineCore_0 pid=200) ERROR 05-01 10:00:20 [core.py:700] ValueError: To serve at least one request with the "
    "models's max seq len (32768), (4.00 GiB KV cache is needed, which is larger than the available KV cache memory "
    "(1.51 GiB). Based on the available memory, the estimated maximum model length is 12368. Try increasing "
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
]
REPRO = {
    "indented": [
        "",
        "### How to reproduce",
        "",
        "    vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95",
        "",
    ],
    "shell-prompt": [
        "$ vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768 --gpu-memory-utilization 0.95"
    ],
    "python-m": [
        "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B-Instruct "
        "--max-model-len 32768 --gpu-memory-utilization 0.95"
    ],
}
ENVIRONMENT = {
    "nothing": [],
    "collect-env": [
        "### Environment",
        "INFO 05-01 09:59:00 [__init__.py:244] Automatically detected platform cuda.",
        "Collecting environment information...",
        "PyTorch version: 2.7.1+cu126",
        "vLLM Version: 0.10.1",
        "GPU 0: NVIDIA GeForce RTX 4090",
    ],
    "platform-line-prefixed": [
        "(APIServer pid=300) INFO 05-01 10:05:00 [__init__.py:244] Automatically detected platform cuda."
    ],
}


@pytest.mark.parametrize("env", ENVIRONMENT.values(), ids=ENVIRONMENT.keys())
@pytest.mark.parametrize("repro", REPRO.values(), ids=REPRO.keys())
def test_the_failing_runs_command_repeated_below_it_is_that_runs_note(repro, env):
    lines = [*KV_FAIL, *repro, *env]
    t = track(lines)
    assert len(t.runs) == 1, [(r.start_line, r.opened_by) for r in t.runs]
    (run,) = t.runs
    assert run.config["gpu_memory_utilization"] == 0.95 and "gpu_memory_utilization" in run.command_keys
    assert run.config["max_model_len"] == 32768 and "max_model_len" not in run.command_keys  # vLLM printed it
    v = diagnose(lines, name="issue.log")
    assert v.primary_class == "kv_cache_capacity" and {f.run for f in v.findings} == {1}
    # the plan knows 0.95 was in force: no "0.90" advice for the same server beside the failure
    assert not any(r.flag == "--gpu-memory-utilization 0.90" for f in v.findings for r in f.remedies)


@pytest.mark.parametrize("env", ENVIRONMENT.values(), ids=ENVIRONMENT.keys())
def test_another_command_below_the_failure_with_no_output_is_no_run_and_lends_it_no_values(env):
    # the command names another max_model_len: not the failing run's, and never run here
    lines = [
        *KV_FAIL,
        "next I will try:",
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192 --gpu-memory-utilization 0.95",
        *env,
    ]
    t = track(lines)
    assert len(t.runs) == 1
    (run,) = t.runs
    assert run.config["max_model_len"] == 32768 and "gpu_memory_utilization" not in run.config
    assert "launch_command" not in run.markers and run.markers["later_command"].lineno == 6


@pytest.mark.parametrize(
    "startup",
    [
        ["(APIServer pid=300) INFO 05-01 10:05:01 [api_server.py:1395] vLLM API server version 0.10.1"],
        ["(APIServer pid=300) INFO 05-01 10:05:01 [utils.py:326] non-default args: {'max_model_len': 8192}"],
        [
            "(EngineCore_0 pid=400) INFO 05-01 10:05:10 [gpu_model_runner.py:1892] Model loading took 14.9889 GiB and 5.1 s"
        ],
    ],
    ids=["banner", "non-default-args", "engine-init"],
)
def test_a_command_that_startup_output_follows_opens_the_next_run(startup):
    lines = [
        *KV_FAIL,
        "$ vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192",
        "INFO 05-01 10:05:00 [__init__.py:244] Automatically detected platform cuda.",
        *startup,
    ]
    t = track(lines)
    assert [r.opened_by for r in t.runs] == [None, "command"]
    assert t.runs[1].config["max_model_len"] == 8192 and t.runs[0].config["max_model_len"] == 32768
