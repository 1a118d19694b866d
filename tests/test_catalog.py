"""Unit tests for the message catalog: one case per wording of every pattern.

Wordings come from ``shared/vllm-messages.md`` (sections 1-13) and from the real logs in
``fixtures/logs`` (cases named after the fixture they were taken from). Memory is in GiB
(floats), token counts and other counts are ints.
"""

from pathlib import Path

import pytest
from conftest import FIXTURES

from vllm_doctor.catalog import ANCHORS, PATTERNS, Catalog
from vllm_doctor.envelopes import unwrap
from vllm_doctor.events import Phase

MiB = 1 / 1024
KiB = 1 / 2**20


def fixture_line(prefix, n):
    """Line ``n`` (1-based) of ``fixtures/logs/<prefix>-*.log``, without its newline."""
    (path,) = FIXTURES.glob(f"{prefix}-*.log")
    with open(path, encoding="utf-8") as fh:
        return fh.read().split("\n")[n - 1]


def recognise(line):
    # Every record of the physical line: a line whose newlines were collapsed is split into
    # its records (vllm_doctor.envelopes.collapsed_starts; q20's case below).
    catalog = Catalog()
    return [e for rec in unwrap("t", 1, line) for e in catalog.recognise(rec)]


def only(line, pattern):
    """The single event ``pattern`` produced for ``line``."""
    hits = [e for e in recognise(line) if e.pattern == pattern]
    assert len(hits) == 1, [(e.pattern, e.data) for e in recognise(line)]
    return hits[0]


def same(actual, expected):
    """Equal values of the same type; floats compared with pytest.approx, containers item by item."""
    if isinstance(expected, float):
        return type(actual) is float and actual == pytest.approx(expected)
    if isinstance(expected, (list, tuple)):
        return (
            type(actual) is type(expected)
            and len(actual) == len(expected)
            and all(same(a, e) for a, e in zip(actual, expected))
        )
    return type(actual) is type(expected) and actual == expected


def assert_data(actual, expected):
    assert sorted(actual) == sorted(expected), f"keys: {sorted(actual)} != {sorted(expected)}"
    for key, want in expected.items():
        assert same(actual[key], want), f"{key}: {actual[key]!r} != {want!r}"


def case(pattern, kind, text, /, **data):
    return pytest.param(text, pattern, kind, data, id=f"{pattern}:{text[:50]}")


_OOM_TAIL = (
    " If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
_V1_ENGINE_LINE = (
    "(EngineCore_DP0 pid=39544) INFO 08-20 10:18:40 [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: "
    "model='Qwen/Qwen3-8B', speculative_config=None, tokenizer='Qwen/Qwen3-8B', skip_tokenizer_init=False, "
    "tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
    "max_seq_len=32768, download_dir=None, load_format=auto, tensor_parallel_size=2, pipeline_parallel_size=1, "
    "data_parallel_size=1, disable_custom_all_reduce=False, quantization=fp8, enforce_eager=False, "
    "kv_cache_dtype=auto, device_config=cuda, seed=0, served_model_name={served}, enable_prefix_caching=True, "
    "chunked_prefill_enabled=True"
)

# Ray's memory monitor kill message as ray.get re-raises it (ray docs, ray-oom-prevention).
_RAY_KILL = (
    "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
    "Memory on the node (IP: 172.17.0.2, ID: 90efe99b) where the task (task ID: a6755d17, name=allocate_memory, "
    "pid=91085, memory used=24.99GB) was running was 32.62GB / 33.28GB (0.980175), which exceeds the memory usage "
    "threshold of 0.96. Ray killed this worker (ID: a8101629) because it was the most recently scheduled task"
)
_SUMMARY_2026 = (
    "(EngineCore pid=492078) INFO 08-23 09:40:11 [gpu_worker.py:789] Free memory on device (112.26/119.63 GiB) "
    "on startup. Desired GPU memory utilization is (0.92, 110.06 GiB). Actual usage is 55.99 GiB for consumed "
    "memory (weights + non-torch), 3.78 GiB for peak activation, and 0.94 GiB for CUDAGraph memory. Replace "
    "gpu_memory_utilization config with `--kv-cache-memory=52830620611` (49.2 GiB) to fit into requested memory, "
    "or `--kv-cache-memory=55188796928` (51.4 GiB) to fully utilize gpu memory. Current kv cache memory in use is "
    "50.29 GiB."
)

CONFIG = [
    # rules7 (z18): LoRA shown in the launch command (a batch holds at most max_loras adapters)
    case(
        "launch_command",
        "config",
        "python3 -m vllm.entrypoints.openai.api_server --model /Qwen/Qwen2.5-32B-Instruct --enable-lora "
        "--max-loras 4 --max-lora-rank 64",
        model="/Qwen/Qwen2.5-32B-Instruct",
        enable_lora=True,
        max_loras=4,
        launch_command=True,
    ),
    # The operator's launch command pasted beside the log (h004, h019, h003 shapes).
    case(
        "launch_command",
        "config",
        "vllm serve /models/GLM-4-32B-0414 -tp 2 --dtype bfloat16 --max-model-len 1024 --swap-space 16 "
        "--gpu-memory-utilization 0.6 --served-model-name glm4 --port 8001",
        model="/models/GLM-4-32B-0414",
        tensor_parallel_size=2,
        dtype="bfloat16",
        max_model_len=1024,
        swap_space=16.0,
        gpu_memory_utilization=0.6,
        served_model_name="glm4",
        launch_command=True,
    ),
    case(
        "launch_command",
        "config",
        "`python -m vllm.entrypoints.openai.api_server --model /home/u/Qwen2-7B-Instruct --max-model-len=512 "
        "--dtype=float --enforce-eager`",
        model="/home/u/Qwen2-7B-Instruct",
        max_model_len=512,
        dtype="float",
        enforce_eager=True,
        launch_command=True,
    ),
    case(
        "launch_command",
        "config",
        # human_readable_int sizes (32k = 32000, 8K = 8192); a switch never eats the next word;
        # --no-enable-prefix-caching is the negated switch; unknown flags are left out
        "docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.10.1 --model Qwen/Qwen3-8B --enforce-eager "
        "--max-model-len 32k --max-num-batched-tokens 8K --no-enable-prefix-caching -q fp8 --port 8000",
        model="Qwen/Qwen3-8B",
        enforce_eager=True,
        max_model_len=32000,
        max_num_batched_tokens=8192,
        enable_prefix_caching=False,
        quantization="fp8",
        launch_command=True,
        vllm_version="0.10.1",  # the image's tag names the release
    ),
    case(  # a tag that names no release: no version
        "launch_command",
        "config",
        "docker run --gpus all vllm/vllm-openai:latest --model Qwen/Qwen3-8B",
        model="Qwen/Qwen3-8B",
        launch_command=True,
    ),
    case(
        "launch_command",
        "config",
        # a shell command joined back from its continuation lines (reassemble.shell_continued)
        "vllm serve /model/Qwen3-32B-autoround-4bit-gptq \\ --tensor-parallel-size 2 \\ --max-model-len 4000 \\ "
        "--kv-cache-dtype fp8 --max-num-seqs 8",
        model="/model/Qwen3-32B-autoround-4bit-gptq",
        tensor_parallel_size=2,
        max_model_len=4000,
        kv_cache_dtype="fp8",
        max_num_seqs=8,
        launch_command=True,
    ),
    case(
        "offline_llm_call",
        "config",
        'llm = LLM(model="Qwen/Qwen2.5-7B-Instruct", gpu_memory_utilization=0.8, max_model_len=8192, enforce_eager=True)',
        model="Qwen/Qwen2.5-7B-Instruct",
        gpu_memory_utilization=0.8,
        max_model_len=8192,
        enforce_eager=True,
        launch_command=True,
    ),
    case(
        "engine_args_repr",
        "config",
        # Ray Serve's vLLM example prints the AsyncEngineArgs it builds (a25, vllm 0.6.3)
        "Starting with engine args: AsyncEngineArgs(model='NousResearch/Meta-Llama-3-8B-Instruct', "
        "served_model_name=None, tensor_parallel_size=2, max_model_len=None, gpu_memory_utilization=0.9, "
        "max_num_seqs=256, enforce_eager=False, swap_space=4, kv_cache_dtype='auto', ",
        model="NousResearch/Meta-Llama-3-8B-Instruct",
        tensor_parallel_size=2,
        gpu_memory_utilization=0.9,
        max_num_seqs=256,
        enforce_eager=False,
        swap_space=4.0,
        kv_cache_dtype="auto",
        launch_command=True,
    ),
    case(
        "engine_args_repr",
        "config",
        # the offline dataclass, printed whole by a script: its closing parenthesis ends the last value
        "engine args: EngineArgs(model='facebook/opt-125m', max_model_len=2048, block_size=16, "
        "enable_prefix_caching=True)",
        model="facebook/opt-125m",
        max_model_len=2048,
        block_size=16,
        enable_prefix_caching=True,
        launch_command=True,
    ),
    case(
        "server_version",
        "run_start",
        # vllm 0.25+ entrypoints/serve/utils/api_utils.py log_version_and_model, logo disabled
        "(APIServer pid=1) INFO 03-02 10:00:00 [api_utils.py:330] vLLM server version 0.25.1, serving model "
        "Qwen/Qwen3-8B",
        vllm_version="0.25.1",
        model="Qwen/Qwen3-8B",
    ),
    case(
        "server_version_logo",
        "run_start",
        # the same, logo form: the message's second line after NewLineFormatter repeats the prefix
        "(APIServer pid=1) INFO 03-02 10:00:00 [api_utils.py:330]  \u2584\u2584 \u2584\u2588 \u2588     \u2588     "
        "\u2588 \u2580\u2584\u2580 \u2588  version 0.25.1",
        vllm_version="0.25.1",
    ),
    # the logo's spacing collapsed by a blog (p28), or turned into no-break spaces; in colour
    # (the 'color' formatter: ANSI codes around the letters and the version)
    case("server_version_logo", "run_start", fixture_line("p28", 12), vllm_version="0.19.0"),
    case(
        "server_version_logo",
        "run_start",
        "\u2584\u2584 \u2584\u2588 \u2588\u00a0\u00a0\u00a0 \u2588 \u2580\u2584\u2580 \u2588\u00a0 version\u00a00.19.0",
        vllm_version="0.19.0",
    ),
    case(
        "server_version_logo",
        "run_start",
        "(APIServer pid=1) INFO 03-02 10:00:00 [utils.py:285]  \x1b[93m\u2584\u2584\x1b[0m \x1b[94m\u2584\u2588\x1b[0m "
        "\x1b[97;1m\u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588\x1b[0m  version \x1b[97;1m0.19.1\x1b[0m",
        vllm_version="0.19.1",
    ),
    case("server_model_logo", "config", fixture_line("p28", 13), model="openai/gpt-oss-20b"),
    case(
        "server_model_logo",
        "config",
        "(APIServer pid=1) INFO 03-02 10:00:00 [api_utils.py:330]   \u2588\u2584\u2588\u2580 \u2588     \u2588     "
        "\u2588     \u2588  model   Qwen/Qwen3-8B",
        model="Qwen/Qwen3-8B",
    ),
    case(
        "api_server_version",
        "run_start",
        "INFO 08-17 02:59:30 [api_server.py:1805] vLLM API server version 0.10.2.dev378+g4d7fe40fc.d20250829",
        vllm_version="0.10.2.dev378+g4d7fe40fc.d20250829",
    ),
    case(
        "non_default_args",
        "config",
        "(APIServer pid=1) INFO 08-20 10:18:39 [utils.py:328] non-default args: {'model_tag': 'Qwen/Qwen3-8B', "
        "'model': 'Qwen/Qwen3-8B', 'max_model_len': 32768, 'gpu_memory_utilization': 0.95, 'tensor_parallel_size': 2, "
        "'enforce_eager': True, 'kv_cache_dtype': 'fp8', 'quantization': None}",
        model="Qwen/Qwen3-8B",
        max_model_len=32768,
        gpu_memory_utilization=0.95,
        tensor_parallel_size=2,
        enforce_eager=True,
        kv_cache_dtype="fp8",
    ),
    case(
        "args_namespace",
        "config",
        "INFO 05-10 16:00:00 api_server.py:651] args: Namespace(host='0.0.0.0', port=8000, "
        "model='meta-llama/Llama-3.1-8B', max_model_len=16384, gpu_memory_utilization=0.85, tensor_parallel_size=1, "
        "max_num_seqs=128, enable_prefix_caching=False)",
        model="meta-llama/Llama-3.1-8B",
        max_model_len=16384,
        gpu_memory_utilization=0.85,
        tensor_parallel_size=1,
        max_num_seqs=128,
        enable_prefix_caching=False,
    ),
    case(
        "engine_config",
        "run_start",
        _V1_ENGINE_LINE.format(served="qwen3-8b"),
        model="Qwen/Qwen3-8B",
        dtype="torch.bfloat16",
        max_model_len=32768,
        tensor_parallel_size=2,
        pipeline_parallel_size=1,
        data_parallel_size=1,
        quantization="fp8",
        enforce_eager=False,
        kv_cache_dtype="auto",
        enable_prefix_caching=True,
        vllm_version="0.10.1.1",
        engine="v1",
        served_model_name="qwen3-8b",
    ),
    case(
        "engine_config",
        "run_start",
        "INFO 10-01 00:00:00 [llm_engine.py:240] Initializing a V0 LLM engine (v0.8.5) with config: model='m', "
        "max_seq_len=8192, tensor_parallel_size=4, use_cached_outputs=False, ",  # as V0 0.7.3-0.10 ends it
        model="m",
        max_model_len=8192,
        tensor_parallel_size=4,
        vllm_version="0.8.5",
        engine="v0",
    ),
    case(
        "engine_config",
        "run_start",
        "INFO 10-01 00:00:00 llm_engine.py:234] Initializing an LLM engine (v0.6.3.post1) with config: "
        "model='mistralai/Ministral-8B-Instruct-2410', speculative_config=None, dtype=torch.float16, max_seq_len=4096, "
        "tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, enforce_eager=True, kv_cache_dtype=auto, "
        "quantization_param_path=None, device_config=cuda)",
        model="mistralai/Ministral-8B-Instruct-2410",
        dtype="torch.float16",
        max_model_len=4096,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        enforce_eager=True,
        kv_cache_dtype="auto",
        vllm_version="0.6.3.post1",
    ),
    case(
        "engine_config",
        "run_start",
        fixture_line("s020", 1),
        model="/model_repos/CustomLLM/Qwen-7B-QAnything",
        dtype="torch.bfloat16",
        max_model_len=4096,
        tensor_parallel_size=1,
        enforce_eager=False,
    ),
    case(
        "using_max_model_len",
        "config",
        "INFO 08-20 10:18:39 [__init__.py:1773] Using max model len 32768",
        max_model_len=32768,
    ),
    case(
        "chunked_prefill_budget",
        "config",
        "INFO 08-20 10:18:39 [scheduler.py:222] Chunked prefill is enabled with max_num_batched_tokens=2048.",
        max_num_batched_tokens=2048,
    ),
    case(
        "parallel_world",
        "config",
        fixture_line("s030", 2),
        world_size=1,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
    ),
    case("parallel_world", "config", fixture_line("x018", 2), world_size=16),  # 16 = TP x PP: TP alone unknown
    case("starting_to_load", "config", fixture_line("s030", 3), model="/models/Qwen3-30B-A3B-GPTQ"),
    case(
        "starting_to_load",
        "config",
        "(EngineCore_DP0 pid=1) INFO 04-18 01:30:29 [gpu_model_runner.py:1953] Starting to load model Qwen/Qwen3-8B...",
        model="Qwen/Qwen3-8B",
    ),
]

STARTUP = [
    # the attention backend vLLM chose (vllm/platforms/rocm.py, cuda.py): 0.13, V1 0.8-0.10, 0.33
    case(
        "attention_backend_selected",
        "config",
        "(EngineCore_DP0 pid=7) INFO 01-02 03:04:05 [rocm.py:229] Using AITER MLA backend.",
        attention_backend="AITER MLA",
    ),
    case(
        "attention_backend_selected",
        "config",
        "(VllmWorker pid=96) INFO 08-25 10:46:48 [cuda.py:285] Using Triton backend on V1 engine.",
        attention_backend="Triton",
    ),
    case(
        "attention_backend_selected",
        "config",
        "(EngineCore pid=5) INFO 03-04 05:06:07 [rocm.py:904] Using AttentionBackendEnum.ROCM_AITER_FA backend out "
        "of potential backends: ['ROCM_AITER_FA', 'TRITON_ATTN'].",
        attention_backend="ROCM_AITER_FA",
    ),
    case(
        "loading_shards",
        "facts",
        "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02,  1.01s/it]",
        shards_loaded=2,
        shards_total=4,
    ),
    case(
        "loading_shards",
        "facts",
        "Loading pt checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 40.98it/s]",
        shards_loaded=1,
        shards_total=1,
    ),
    case(
        "loading_shards",
        "facts",
        # vllm 0.10+ weight_utils.py: "(eager)" and the multi-thread loader's lower-case "loading"
        "(Worker_TP0 pid=9260) Loading safetensors checkpoint shards (eager):  25% Completed | 1/4 [00:01<00:03]",
        shards_loaded=1,
        shards_total=4,
    ),
    case(
        "loading_shards",
        "facts",
        "Multi-thread loading pt checkpoint shards: 100% Completed | 8/8 [00:09<00:00,  1.13s/it]",
        shards_loaded=8,
        shards_total=8,
    ),
    case("loading_weights_from", "phase", fixture_line("r038", 1)),
    case(
        "tpu_precompile",
        "phase",
        "INFO 05-10 16:00:00 [tpu_model_runner.py:1304] Compiling the model with different input shapes.",
    ),
    case("offline_progress", "marker", fixture_line("r004", 1).split("INFO")[0], marker="offline_batch"),
    case(
        "loading_weights_took", "phase", "INFO 08-20 14:03:52 [default_loader.py:280] Loading weights took 0.15 seconds"
    ),
    case("model_weights_took_v0", "facts", fixture_line("s001", 1), weights_gib=14.9888),
    case(
        "model_loading_took",
        "facts",
        "INFO 03-13 09:37:42 [gpu_model_runner.py:1072] Model loading took 13.1343 GiB and 28.479916 seconds",
        weights_gib=13.1343,
    ),
    case(
        "model_loading_took",
        "facts",
        "INFO 03-13 09:37:42 model_runner.py:1072] Model loading took 8.6253 GB and 7.670299 seconds",
        weights_gib=8.6253,
    ),
    case(
        "model_loading_took",
        "facts",
        "(EngineCore pid=1) INFO 03-13 09:37:42 [gpu_model_runner.py:1] Model loading took 14.37 GiB memory and "
        "13.381314 seconds",
        weights_gib=14.37,
    ),
    case(
        "profiling_results_v0",
        "facts",
        fixture_line("s001", 2),
        gpu_total_gib=23.58,
        initial_usage_gib=15.34,
        peak_torch_gib=17.98,
        non_torch_gib=0.35,
        kv_available_gib=2.89,
        gpu_memory_utilization=0.9,
    ),
    case(
        "profiling_budget_v0",
        "facts",
        "(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] the current vLLM instance can use "
        "total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB",
        gpu_total_gib=23.58,
        gpu_memory_utilization=0.99,
        requested_gib=23.35,
    ),
    case(
        "profiling_budget_v0",
        "facts",
        fixture_line("t009", 3).strip("\u2502 "),  # k9s box borders cut off by hand here
        gpu_total_gib=79.19,
        gpu_memory_utilization=0.9,
        requested_gib=71.27,
    ),
    case(
        "profiling_split_v0",
        "facts",
        "(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; "
        "non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the memory "
        "reserved for KV Cache is 1.57GiB.",
        weights_gib=21.21,
        non_torch_gib=0.2,
        activation_peak_gib=0.37,
        kv_available_gib=1.57,
    ),
    case(
        "profiling_split_v0",
        "facts",
        "INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; non_torch_memory takes -0.20GiB; PyTorch "
        "activation peak memory takes 1.37GiB; the rest of the memory reserved for KV Cache is -7.83GiB.",
        weights_gib=21.21,
        non_torch_gib=-0.2,
        activation_peak_gib=1.37,
        kv_available_gib=-7.83,
    ),
    case(
        "profiling_result_v1",
        "facts",
        # llm-d-fast-model-actuation issue 746 (vLLM at DEBUG, EngineCore)
        "(EngineCore pid=418) DEBUG 09-02 20:06:36 [v1/worker/gpu_worker.py:559] Memory profiling takes 14.06 seconds. "
        "Total non KV cache memory: 1.05GiB; torch peak memory increase: 0.24GiB; non-torch forward increase memory: "
        "0.14GiB; weights memory: 0.67GiB.",
        non_kv_cache_gib=1.05,
        activation_peak_gib=0.24,
        non_torch_gib=0.14,
        weights_gib=0.67,
    ),
    case(
        "profiling_result_v1",
        "facts",
        # vllm 0.29+ utils/mem_utils.py MemoryProfilingResult.__repr__
        "Memory profiling takes 20.11 seconds. Total non KV cache memory: 58.4GiB; torch peak memory increase: "
        "2.04GiB; total consumed (from mem_get_info): 61.49GiB; weights memory: 55.87GiB.",
        non_kv_cache_gib=58.4,
        activation_peak_gib=2.04,
        consumed_gib=61.49,
        weights_gib=55.87,
    ),
    case(
        "profiling_requested_v1",
        "facts",
        # the same issue: "Initial free memory: %s GiB; Requested memory: %f (util), %s GiB"
        "(EngineCore pid=418) DEBUG 09-02 20:06:36 [v1/worker/gpu_worker.py:548] Initial free memory: 78.66 GiB; "
        "Requested memory: 0.825000 (util), 65.32 GiB",
        gpu_free_gib=78.66,
        gpu_memory_utilization=0.825,
        requested_gib=65.32,
    ),
    case(
        "profiling_requested_v1_early",
        "facts",
        # vllm 0.9.2 v1/worker/gpu_worker.py determine_available_memory (DEBUG)
        "(VllmWorker rank=0 pid=3013) DEBUG 06-01 10:00:00 [gpu_worker.py:220] Initial free memory: 78.66 GiB, free "
        "memory: 12.10 GiB, requested GPU memory: 71.27 GiB",
        gpu_free_gib=78.66,
        requested_gib=71.27,
    ),
    case(
        "worker_requested_memory",
        "facts",
        # vllm 0.14+ v1/worker/gpu_worker.py init_device
        "(EngineCore pid=418) DEBUG 09-02 20:06:20 [v1/worker/gpu_worker.py:122] worker requested memory: 65.32GiB",
        requested_gib=65.32,
    ),
    case(
        "available_kv_memory",
        "facts",
        "(Worker_TP1_EP1 pid=2295) INFO 09-24 19:58:12 [gpu_worker.py:298] Available KV cache memory: 25.91 GiB",
        kv_available_gib=25.91,
    ),
    case("available_kv_memory", "facts", fixture_line("s031", 4), kv_available_gib=-2.77),
    # vllm-ascend's own line, in bytes (fixtures/logs m09 lines 6 and 14, its launcher's prefix left out)
    case(
        "ascend_available_memory",
        "facts",
        "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [worker_v1.py:270] Available memory: 23106324992, "
        "total memory: 65452113920",
        kv_available_gib=21.5194,
        gpu_total_gib=60.957,
    ),
    case(
        "ascend_available_memory",
        "facts",
        "(EngineCore_DP0 pid=4146) INFO 01-15 06:47:41 [worker_v1.py:270] Available memory: 0, total memory: "
        "65452113920",
        kv_available_gib=0.0,
        gpu_total_gib=60.957,
    ),
    # TPU, tpu-inference's JAX worker (fixtures/logs h024): per-device (used, limit) pairs, and the
    # worker's sums over its devices
    case("tpu_hbm_usage", "facts", fixture_line("h024", 3), gpu_total_gib=30.75, gpu_free_gib=30.75, tpu_devices=1),
    case("tpu_hbm_usage", "facts", fixture_line("h024", 8), gpu_total_gib=30.75, tpu_devices=1),
    case(
        "tpu_hbm_usage",
        "facts",
        "(EngineCore_DP0 pid=7) INFO 10-20 00:02:29 [tpu_worker.py:300] Init worker | rank=0 | is_first_rank=True | "
        "is_last_rank=True | topology_order_id=0 | is_driver_worker=True | hbm=[(0.0, 31.25), (0.25, 31.25), "
        "(0.0, 31.25), (0.0, 31.25)]GiB |self.devices=[TpuDevice(id=0)]",
        gpu_total_gib=31.25,
        gpu_free_gib=31.0,
        tpu_devices=4,
    ),
    case(
        "tpu_memory_statistics",
        "facts",
        fixture_line("h024", 9),
        hbm_total_gib=30.75,
        hbm_budget_gib=27.67,
        hbm_used_gib=1.11,
        hbm_available_gib=26.56,
        gpu_memory_utilization=0.9,
    ),
    case(
        "tpu_memory_statistics",
        "facts",
        # the TP=4 sums of a v6e-4 (tpu_worker.py with the KV headroom field)
        "INFO 05-01 10:00:00 [tpu_worker.py:380] Memory statistics | total_hbm_limit_gb=124.97GiB | "
        "total_hbm_limit_cap_gb=114.97GiB | total_hbm_used_gb=58.4GiB | kv_cache_headroom_gb=0.0GiB | "
        "total_hbm_avail_gb=56.57GiB",
        hbm_total_gib=124.97,
        hbm_budget_gib=114.97,
        hbm_used_gib=58.4,
        hbm_kv_headroom_gib=0.0,
        hbm_available_gib=56.57,
        gpu_memory_utilization=0.92,
    ),
    case(
        "startup_memory_summary_free",
        "facts",
        _SUMMARY_2026,
        gpu_free_gib=112.26,
        gpu_total_gib=119.63,
    ),
    case(
        "startup_memory_summary_desired",
        "facts",
        _SUMMARY_2026,
        gpu_memory_utilization=0.92,
        requested_gib=110.06,
    ),
    case(
        "startup_memory_summary_usage",
        "facts",
        _SUMMARY_2026,
        consumed_gib=55.99,
        activation_peak_gib=3.78,
        cuda_graph_gib=0.94,
    ),
    case("startup_memory_summary_kv", "facts", _SUMMARY_2026, kv_available_gib=50.29),
    case(
        "startup_memory_summary_free",
        "facts",
        "INFO 08-23 09:40:11 [gpu_worker.py:789] Free memory on device cuda:0 (22.45/23.99 GiB) on startup. Desired "
        "GPU memory utilization is (0.9, 21.59 GiB). Actual usage is 1.5 GiB for weight",
        device="cuda:0",
        gpu_free_gib=22.45,
        gpu_total_gib=23.99,
    ),
    # t008: the summary hand-split one sentence a line, no prefix: each half is read on its own.
    case("startup_memory_summary_free", "facts", fixture_line("t008", 1), gpu_free_gib=110.37, gpu_total_gib=121.69),
    case(
        "startup_memory_summary_desired",
        "facts",
        fixture_line("t008", 2),
        gpu_memory_utilization=0.87,
        requested_gib=105.87,
    ),
    case(
        "startup_memory_summary_usage",
        "facts",
        # rendered from vllm 0.10.2-0.26.0 gpu_worker.py compile_or_warm_up_model
        "Actual usage is 14.25 GiB for weight, 1.4 GiB for peak activation, 0.12 GiB for non-torch memory, and "
        "0.5 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=1`",
        weights_gib=14.25,
        activation_peak_gib=1.4,
        non_torch_gib=0.12,
        cuda_graph_gib=0.5,
    ),
    # vllm-ascend's NPUWorker summary: "Actual usage:", "for weights", no "and", "NPU graph memory"
    case(
        "startup_memory_summary_usage",
        "facts",
        fixture_line("z14", 3),
        weights_gib=1.14,
        activation_peak_gib=0.22,
        non_torch_gib=0.13,
        cuda_graph_gib=0.04,
    ),
    case(
        "startup_memory_summary_usage",
        "facts",
        "(Worker_DP1_TP7_EP15 pid=2653) INFO 07-08 11:54:00 [worker.py:852] Free memory on device (60.6/60.96 GiB) on "
        "startup. Desired GPU memory utilization is (0.95, 57.91 GiB). Actual usage: 39.51 GiB for weights, 1.52 GiB "
        "for peak activation, 3.15 GiB for non-torch memory, 0.0 GiB for NPU graph memory. Replace "
        "gpu_memory_utilization with `--kv-cache-memory=14584478208` (13.58 GiB) to fit into requested memory, or "
        "`--kv-cache-memory=17476561408` (16.28 GiB) to fully utilize NPU free memory. Current KV cache memory: 13.73 GiB.",
        weights_gib=39.51,
        activation_peak_gib=1.52,
        non_torch_gib=3.15,
        cuda_graph_gib=0.0,
    ),
    case(
        "startup_memory_summary_kv",
        "facts",
        "(EngineCore pid=123) INFO 07-26 15:49:29 [worker.py:1029] Actual usage: 27.54 GiB for weights, 0.26 GiB for "
        "peak activation, 0.18 GiB for non-torch memory, 0.47 GiB for NPU graph memory. Current KV cache memory: "
        "8.04 GiB.",
        kv_available_gib=8.04,
    ),
    case(
        "kv_cache_memory_bytes",
        "facts",
        "INFO 08-23 09:40:11 [gpu_worker.py:270] Initial free memory 78.50 GiB, reserved 10.00 GiB memory for KV "
        "Cache as specified by kv_cache_memory_bytes config and skipped memory profiling.",
        gpu_free_gib=78.5,
        kv_available_gib=10.0,
    ),
    case(
        "kv_cache_memory_bytes",
        "facts",
        # vllm 0.10.2 gpu_worker.py: no space before "GiB memory", "does does"
        "Initial free memory 78.5 GiB, reserved 10.00GiB memory for KV Cache as specified by kv_cache_memory_bytes "
        "config and skipped memory profiling. This does does not respect the gpu_memory_utilization config.",
        gpu_free_gib=78.5,
        kv_available_gib=10.0,
    ),
    case(
        "persisted_startup_plan",
        "facts",
        # rendered from vllm 0.26+ vllm/v1/worker/startup_plan.py
        "(EngineCore pid=7) INFO 03-02 10:00:00 [startup_plan.py:88] Applying persisted startup plan (fingerprint "
        "3fa2c1): kv_cache_memory_bytes=53687091200 (50.00 GiB), recorded free-memory baseline 78.10 GiB, current "
        "78.05 GiB. Memory profiling will be skipped.",
        kv_available_gib=50.0,
        gpu_free_gib=78.05,
    ),
    case("gpu_blocks", "facts", fixture_line("s001", 3), gpu_blocks=1478, cpu_blocks=2048),
    case("gpu_blocks", "facts", fixture_line("s020", 2), gpu_blocks=0, cpu_blocks=256),
    case(
        "gpu_blocks",
        "facts",
        "INFO 12-10 10:00:00 executor_base.py:110] # CUDA blocks: 5519, # CPU blocks: 9362",
        gpu_blocks=5519,
        cpu_blocks=9362,
    ),
    case(
        "gpu_blocks",
        "facts",
        "INFO 12-10 10:00:00 [executor_base.py:110] # cuda blocks: 41345, # CPU blocks: 21845",
        gpu_blocks=41345,
        cpu_blocks=21845,
    ),
    case(
        "gpu_blocks",
        "facts",
        "INFO 12-10 10:00:00 [executor_base.py:110] # rocm blocks: 37011, # CPU blocks: 7281",
        gpu_blocks=37011,
        cpu_blocks=7281,
    ),
    case("gpu_blocks", "facts", "INFO 12-10 10:00:00 [kv_cache_utils.py:1] # GPU blocks: 9000", gpu_blocks=9000),
    case("num_gpu_blocks_info", "facts", fixture_line("r022", 13), gpu_blocks=15745),
    case("num_gpu_blocks_info", "facts", fixture_line("r032", 9), gpu_blocks=14696),
    case("kv_cache_size_tokens", "facts", fixture_line("r022", 7), kv_tokens=251920),
    case(
        "kv_cache_size_tokens",
        "facts",
        "INFO 07-01 10:00:00 [kv_cache_utils.py:1] GPU KV cache size: 2,634,544 tokens",
        kv_tokens=2634544,
    ),
    case(
        "kv_cache_size_tokens",
        "facts",
        "INFO 07-01 10:00:00 [kv_cache_utils.py:1] GPU KV cache size: 364,688 tokens, Maximum concurrency for "
        "262,144 tokens per request: 1.39x",
        kv_tokens=364688,
    ),
    case(
        "max_concurrency",
        "facts",
        "INFO 07-01 10:00:00 [kv_cache_utils.py:1] GPU KV cache size: 364,688 tokens, Maximum concurrency for "
        "262,144 tokens per request: 1.39x",
        concurrency_tokens=262144,
        max_concurrency=1.39,
    ),
    case("max_concurrency", "facts", fixture_line("r022", 8), concurrency_tokens=40960, max_concurrency=6.15),
    case("max_concurrency", "facts", fixture_line("s001", 4), concurrency_tokens=29000, max_concurrency=0.82),
    case(
        "capturing_graphs",
        "phase",
        "INFO 10-10 10:00:00 model_runner.py:1400] Capturing cudagraphs for decoding. This may lead to unexpected "
        "consequences if the model is not static.",
    ),
    case("capturing_graphs", "phase", fixture_line("s023", 5)),  # "Capturing the model for CUDA graphs"
    case("capturing_graphs", "phase", "Capturing CUDA graph shapes: 100%|██████████| 35/35 [00:43<00:00,  1.24s/it]"),
    # vllm-ascend model_runner_v1.py: ACL graphs are the NPU's CUDA graphs (m09 without its
    # launcher prefix, and the tqdm bar)
    case(
        "capturing_graphs",
        "phase",
        "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [model_runner_v1.py:3072] Starting to capture ACL graphs for "
        "cases: [256, 248, 240, 232, 224, 216, 208, 200], mode: PIECEWISE, uniform_decode: False",
    ),
    case(
        "capturing_graphs",
        "phase",
        "Capturing ACL graphs (decode, FULL):  40%|████      | 10/25 [00:03<00:04,  3.1it/s]",
    ),
    # vllm-ascend NPUWorker.determine_available_memory: bytes. The clamped int of newer builds
    # (m09's first and second instance), the unclamped float of older ones (negative: the peak
    # is above the budget)
    case(
        "npu_available_memory_bytes",
        "facts",
        "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [worker_v1.py:270] Available memory: 23106324992, total "
        "memory: 65452113920",
        kv_available_gib=23106324992 / 2**30,
        gpu_total_gib=65452113920 / 2**30,
    ),
    case(
        "npu_available_memory_bytes",
        "facts",
        "(EngineCore_DP0 pid=4146) INFO 01-15 06:47:41 [worker_v1.py:270] Available memory: 0, total memory: "
        "65452113920",
        kv_available_gib=0.0,
        gpu_total_gib=65452113920 / 2**30,
    ),
    case(
        "npu_available_memory_bytes",
        "facts",
        "INFO 06-12 03:15:09 worker_v1.py:185] Available memory: -934281216.0, total memory: 34359738368",
        kv_available_gib=-934281216 / 2**30,
        gpu_total_gib=32.0,
    ),
    # Gaudi's HabanaMemoryProfiler summaries (HabanaAI vllm-fork, p12; vllm-gaudi)
    case(
        "hpu_weights_loaded",
        "facts",
        fixture_line("p12", 3),
        weights_gib=15.05,
        gpu_total_gib=30.15,
        hpu_used_gib=15.05,
    ),
    case(
        "hpu_weights_loaded",
        "facts",
        "INFO 09-24 17:31:39 habana_model_runner.py:640] Loading model weights took in total 512 MiB of device "
        "memory (15.55 GiB/94.62 GiB used) and 1.056 GiB of host memory (8.188 GiB/108.2 GiB used)",
        weights_gib=0.5,
        gpu_total_gib=94.62,
        hpu_used_gib=15.55,
    ),
    case(
        "hpu_step_device_memory",
        "facts",
        fixture_line("p12", 1),
        gpu_total_gib=30.15,
        hpu_used_gib=15.06,
        weights_gib=15.06,
    ),
    case(
        "hpu_step_device_memory",
        "facts",
        fixture_line("p12", 2),  # "took 0 B"
        gpu_total_gib=30.15,
        hpu_used_gib=15.05,
    ),
    # the weights' pre-load names its step: its figure is the weights (a10; vllm-fork habana_model_runner.py)
    case(
        "hpu_step_device_memory",
        "facts",
        fixture_line("a10", 6),
        gpu_total_gib=94.62,
        hpu_used_gib=14.97,
        weights_gib=14.97,
    ),
    case(
        "hpu_step_device_memory",
        "facts",
        "INFO 11-05 09:12:01 hpu_model_runner.py:612] Pre-loading model weights on hpu:3 took 7.5 GiB of device memory "
        "(8.1 GiB/94.62 GiB used) and 1.2 GiB of host memory (40 GiB/1007 GiB used)",
        gpu_total_gib=94.62,
        hpu_used_gib=8.1,
        weights_gib=7.5,
    ),
    case(
        "hpu_step_device_memory",
        "facts",
        "INFO 08-02 17:37:54 hpu_worker.py:134] Model profiling run took 504 MiB of device memory (15.46 GiB/94.62 "
        "GiB used) and 180.9 MiB of host memory (475.4 GiB/1007 GiB used)",
        gpu_total_gib=94.62,
        hpu_used_gib=15.46,
    ),
    case(
        "hpu_free_device_memory",
        "facts",
        "INFO 08-02 17:37:54 hpu_worker.py:158] Free device memory: 79.16 GiB, 39.58 GiB usable "
        "(gpu_memory_utilization=0.5), 15.83 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.4), 23.75 GiB "
        "reserved for KV cache",
        kv_available_gib=23.75,
        gpu_memory_utilization=0.5,
        hpu_graphs_reserved_gib=15.83,
    ),
    case(
        "hpu_free_device_memory",
        "facts",
        "(EngineCore_DP0 pid=812) INFO 05-20 11:02:40 [hpu_worker.py:290] Free device memory: 94.1 GiB, 84.69 GiB "
        "usable (gpu_memory_utilization=0.9), 8.469 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), "
        "512 KiB reserved for KV cache dummy block 60.51 GiB reserved for usable KV cache",
        kv_available_gib=60.51,
        gpu_memory_utilization=0.9,
        hpu_graphs_reserved_gib=8.469,
    ),
    case(
        "capturing_graphs",
        "phase",
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  57%|█████▋    | 20/35 [00:01<00:01, 12.1it/s]",
    ),
    case(
        "graph_capture_finished",
        "facts",
        "(EngineCore_DP0 pid=188893) INFO 10-21 09:12:04 [gpu_model_runner.py:3480] Graph capturing finished in "
        "7 secs, took 0.95 GiB",
        cuda_graph_gib=0.95,
    ),
    case(
        "graph_capture_finished",
        "facts",
        "INFO 10-21 09:12:04 model_runner.py:1530] Graph capturing finished in 1 sec, took -0.12 GiB",
        cuda_graph_gib=-0.12,
    ),
    case("cuda_graph_pool", "facts", fixture_line("x011", 11), cuda_graph_gib=0.04),
    case(
        "cuda_graph_estimate",
        "facts",
        # vllm 0.18+ v1/worker/gpu_model_runner.py
        "(EngineCore pid=20075) INFO 03-02 10:00:00 [gpu_model_runner.py:5000] Estimated CUDA graph memory: 1.59 GiB "
        "total",
        cuda_graph_estimated_gib=1.59,
    ),
    case("cudagraph_disabled", "phase", "INFO 10-21 09:12:04 [config.py:1] Cudagraph is disabled under eager mode"),
    case("init_engine_took", "phase", fixture_line("r022", 12)),
    case("init_engine_took", "phase", fixture_line("x011", 12)),  # "... took 163.91 s (compilation: 54.58 s)"
    case("routes", "phase", "INFO 10-21 09:12:04 [launcher.py:29] Available routes are:"),
    case("routes", "phase", fixture_line("r018", 1)),
    case(
        "starting_api_server",
        "phase",
        "INFO 10-21 09:12:04 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8888",
    ),
    case(
        "starting_api_server",
        "phase",
        "INFO 10-21 09:12:04 [api_server.py:1] Starting vLLM server on http://0.0.0.0:8000",
    ),
    case("application_startup_complete", "phase", fixture_line("r019", 3)),
]

CHECKS = [
    # vllm/config/vllm.py _get_quantization_config: the model's dtype is not an activation dtype
    # of the method (pydantic's "Value error, " in 0.10+; plain ValueError before)
    case(
        "quantization_dtype",
        "quant_error",
        "Value error, torch.bfloat16 is not supported for quantization method awq. Supported dtypes: "
        "[torch.float16] [type=value_error, input_value=ArgsKwargs((), {'model_co...'}), input_type=ArgsKwargs]",
        dtype="bfloat16",
        quantization="awq",
        supported_dtypes=["float16"],
    ),
    case(
        "quantization_dtype",
        "quant_error",
        "ValueError: torch.float32 is not supported for quantization method gptq. Supported dtypes: "
        "[torch.float16, torch.bfloat16]",
        dtype="float32",
        quantization="gptq",
        supported_dtypes=["float16", "bfloat16"],
    ),
    case(
        "tp_not_divisor_of_heads",
        "config_error",
        "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3).",
        num_attention_heads=32,
        tensor_parallel_size=3,
        variant="tp_not_divisor_of_heads",
    ),
    case(
        "model_dtype_refused",
        "quant_error",
        "Value error, The model type 'gemma3' does not support float16. Reason: Numerical instability. Please use "
        "bfloat16 or float32 instead. [type=value_error, input_value=ArgsKwargs((), {'model': ...}), input_type=ArgsKwargs",
        model_type="gemma3",
        refused_dtype="float16",
    ),
    # A range merged by hand over ranks (w18): the lower bound is gpu_free_gib, the upper kept.
    *(
        case(
            "free_memory_below_utilization",
            "free_memory",
            f"ValueError: Free memory on device{dev} ({lo}{dash}{hi}{sl}139.8 GiB) on startup is less than desired GPU "
            "memory utilization (0.25, 34.95 GiB).",
            **({"device": dev.strip()} if dev else {}),
            gpu_free_gib=float(lo),
            gpu_free_upper_gib=float(hi),
            gpu_total_gib=139.8,
            gpu_memory_utilization=0.25,
            requested_gib=34.95,
        )
        for dev, lo, dash, hi, sl in (
            ("", "34.51", "-", "34.54", " / "),
            (" cuda:0", "34.51", " - ", "34.54", "/"),
            ("", "34", "\u2013", "35.2", "/"),
            (" cuda:3", "12.38", "~", "12.9", " /"),
        )
    ),
    case(
        "free_memory_below_utilization",
        "free_memory",
        fixture_line("t003", 1),  # a ROCm TheRock build's wording
        device="cuda:0",
        gpu_free_gib=28.49,
        gpu_total_gib=124.0,
        gpu_memory_utilization=0.95,
        requested_gib=117.8,
        variant="available_below_required",
    ),
    case(
        "free_memory_below_utilization",
        "free_memory",
        # vllm 0.32+ v1/worker/utils.py request_memory, weights held by another process
        "ValueError: Free memory on device cuda:0 (20.5/79.19 GiB) on startup is less than the engine's budget after "
        "excluding external process's weights (0.9, 31.27 GiB). Decrease GPU memory utilization or reduce GPU memory "
        "used by other processes.",
        device="cuda:0",
        gpu_free_gib=20.5,
        gpu_total_gib=79.19,
        gpu_memory_utilization=0.9,
        requested_gib=31.27,
        variant="engine_budget_after_external_weights",
    ),
    case(
        "external_weights_exceed_budget",
        "free_memory",
        # vllm 0.32+ v1/worker/utils.py request_memory
        "ValueError: Externally held weights on device cuda:0 (75.0/79.19 GiB) exceed the desired GPU memory "
        "utilization (0.9, 71.27 GiB). Increase GPU memory utilization or reduce GPU memory used by other processes.",
        device="cuda:0",
        external_weights_gib=75.0,
        gpu_total_gib=79.19,
        gpu_memory_utilization=0.9,
        requested_gib=71.27,
        variant="external_weights_exceed_budget",
    ),
    case(
        "max_model_len_above_derived_allowed",
        "facts",
        # vllm 0.10-0.33 config/model.py, logger.warning when VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
        "(APIServer pid=1) WARNING 03-02 10:00:00 [model.py:1800] User-specified max_model_len (65536) is greater "
        "than the derived max_model_len (max_position_embeddings=32768 or model_max_length=None in model's "
        "config.json). VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.",
        max_model_len=65536,
        derived_key="max_position_embeddings",
        derived_max_model_len=32768,
        long_max_model_len_allowed=True,
    ),
    case(
        "free_memory_below_utilization",
        "free_memory",
        fixture_line("s012", 1),
        device="cuda:1",
        gpu_free_gib=19.77,
        gpu_total_gib=22.05,
        gpu_memory_utilization=0.9,
        requested_gib=19.84,
    ),
    case(
        "free_memory_below_utilization",
        "free_memory",
        fixture_line("s013", 1),
        gpu_free_gib=31.44,
        gpu_total_gib=47.38,
        gpu_memory_utilization=0.95,
        requested_gib=45.01,
    ),
    case(
        "free_memory_below_utilization",
        "free_memory",
        fixture_line("s014", 7),
        gpu_free_gib=3.22,
        gpu_total_gib=4.0,
        gpu_memory_utilization=0.9,
        requested_gib=3.6,
    ),
    case(
        "memory_profiling_error",
        "profiling_error",
        fixture_line("s017", 4),
        variant="free",
        initial_free_gib=30.3,
        current_free_gib=30.3,
    ),
    case(
        "memory_profiling_error",
        "profiling_error",
        "AssertionError: Error in memory profiling. Initial free memory 23003725824, current free memory "
        "23136894976. This happens when the GPU memory was not properly cleaned up before initializing the vLLM "
        "instance.",
        variant="free",
        initial_free_gib=23003725824 / 2**30,
        current_free_gib=23136894976 / 2**30,
    ),
    case(
        "memory_profiling_error",
        "profiling_error",
        "AssertionError: Error in memory profiling. Initial used memory 1073741824, currently used memory "
        "536870912. This happens when the GPU memory was not properly cleaned up before initializing the vLLM "
        "instance.",
        variant="used",
        initial_used_gib=1.0,
        current_used_gib=0.5,
    ),
    case(
        "quantization_capability",
        "quant_error",
        "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. "
        "Current capability: 86.",
        quantization="fp8",
        min_capability=89,
        current_capability=86,
    ),
    case(
        "quantization_capability",
        "quant_error",
        "(Worker_TP0 pid=3928601) ERROR 01-01 00:00:00 [multiproc_executor.py:1] RuntimeError: Quantization scheme "
        "is not supported for the current GPU. Min capability: 80. Current capability: 75.",
        min_capability=80,
        current_capability=75,
    ),
    # the platform's own list (Platform.verify_quantization): its device_name, lower-case since
    # v0.6.3, the literal "ROCm" in vllm/config.py before; a prose retelling (z22) is the same words
    case(
        "quantization_platform",
        "quant_error",
        "(APIServer pid=1) ValueError: gptq_bitblas quantization is currently not supported in rocm.",
        quantization="gptq_bitblas",
        device="ROCm",
        refused_by="platform",
    ),
    case(
        "quantization_platform",
        "quant_error",
        "ValueError: fbgemm_fp8 quantization is currently not supported in ROCm.",
        quantization="fbgemm_fp8",
        device="ROCm",
        refused_by="platform",
    ),
    case(
        "quantization_platform",
        "quant_error",
        fixture_line("z22", 12),
        quantization="fbgemm_fp8",
        device="ROCm",
        refused_by="platform",
    ),
    case(
        "quantization_platform",
        "quant_error",
        "ERROR 02-01 10:00:00 [core.py:1] ValueError: awq quantization is currently not supported in tpu.",
        quantization="awq",
        device="TPU",
        refused_by="platform",
    ),
    case(
        "quantization_platform",
        "quant_error",
        "ValueError: deepseek_v4_fp8 quantization is currently not supported in npu.",
        quantization="deepseek_v4_fp8",
        device="NPU",
        refused_by="platform",
    ),
    case(
        "quantization_platform",
        "quant_error",
        "ValueError: bitsandbytes quantization is currently not supported in xpu.",
        quantization="bitsandbytes",
        device="XPU",
        refused_by="platform",
    ),
    case(
        "quantization_platform",
        "quant_error",
        "ValueError: gptq quantization is currently not supported in neuron.",
        quantization="gptq",
        device="Neuron",
        refused_by="platform",
    ),
    case(
        "quantization_platform",
        "quant_error",
        "ValueError: awq_marlin quantization is currently not supported in hpu.",
        quantization="awq_marlin",
        device="HPU",
        refused_by="platform",
    ),
    # 0.5.5-0.28 raise it with three arguments: Python prints their tuple (fixtures/logs h036, quoted in prose)
    case("quantization_capability", "quant_error", fixture_line("h036", 1), min_capability=75, current_capability=70),
    case(
        "quantization_capability",
        "quant_error",
        "(EngineCore_DP0 pid=9) ERROR 03-01 10:00:00 [core.py:708] RuntimeError('Quantization scheme is not supported "
        "for ', 'the current GPU. Required capability: ', '90. Current capability: 89.')",
        min_capability=90,
        current_capability=89,
    ),
    case(
        "bfloat16_capability",
        "quant_error",
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
        "V100-SXM2-16GB GPU does not have a compute capability. You can use float16 instead",
        gpu_name="Tesla V100-SXM2-16GB",
    ),
    case(
        "max_model_len_above_derived",
        "config_error",
        fixture_line("s029", 1),
        max_model_len=131072,
        derived_key="max_position_embeddings",
        derived_max_model_len=32768,
        variant="max_model_len_above_derived",
    ),
    case(
        "max_model_len_above_derived",
        "config_error",
        "ValueError: User-specified max_model_len (16384) is greater than the derived max_model_len "
        "(sliding_window=4096 or model_max_length=None in model's config.json). This may lead to incorrect model "
        "outputs or CUDA errors.",
        max_model_len=16384,
        derived_key="sliding_window",
        derived_max_model_len=4096,
        variant="max_model_len_above_derived",
    ),
    case(
        "batched_tokens_below_max_model_len",
        "config_error",
        "  Value error, max_num_batched_tokens (2048) is smaller than max_model_len (131072). This effectively "
        "limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
        "[type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
        max_num_batched_tokens=2048,
        max_model_len=131072,
        variant="batched_tokens_below_max_model_len",
    ),
    case(
        "batched_tokens_below_max_num_seqs",
        "config_error",
        "ValueError: max_num_batched_tokens (64) must be greater than or equal to max_num_seqs (256).",
        max_num_batched_tokens=64,
        max_num_seqs=256,
        variant="batched_tokens_below_max_num_seqs",
    ),
    # vllm/config/compilation.py (v0.20-v0.33, one wording): a hybrid Mamba model's decode
    # sequences each need a Mamba cache block; the V1 engine core's traceback, and the
    # hard-wrapped code block of m08 (its first line holds both numbers)
    case(
        "max_num_seqs_above_mamba_blocks",
        "config_error",
        "(EngineCore_DP0 pid=2871) ERROR 05-12 08:14:02 [core.py:1012] ValueError: max_num_seqs (512) exceeds "
        "available Mamba cache blocks (384). Each decode sequence requires one Mamba cache block, so CUDA graph "
        "capture cannot proceed. Please lower max_num_seqs to at most 384 or increase gpu_memory_utilization.",
        max_num_seqs=512,
        mamba_cache_blocks=384,
        variant="max_num_seqs_above_mamba_blocks",
    ),
    case(
        "max_num_seqs_above_mamba_blocks",
        "config_error",
        fixture_line("m08", 4),
        max_num_seqs=1024,
        mamba_cache_blocks=939,
        variant="max_num_seqs_above_mamba_blocks",
    ),
    # cut inside the block count: the count is left out, never read short
    case(
        "max_num_seqs_above_mamba_blocks",
        "config_error",
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (93",
        max_num_seqs=1024,
        variant="max_num_seqs_above_mamba_blocks",
    ),
    # v0.18-v0.19 capped the capture sizes instead (warnings: facts, no failure)
    case(
        "mamba_capture_sizes_capped",
        "facts",
        "WARNING 03-14 09:12:44 [compilation.py:1238] Capping cudagraph capture sizes from max 512 to 256 to fit "
        "Mamba cache blocks (300 blocks available). This limits the maximum batch size that can use CUDA graphs. "
        "To increase this limit, reduce max_num_seqs or increase available GPU memory.",
        mamba_cache_blocks=300,
        cudagraph_max_capture_size=256,
    ),
    case(
        "mamba_capture_sizes_capped",
        "facts",
        "WARNING 03-14 09:12:44 [compilation.py:1225] No valid cudagraph capture sizes remain after capping to "
        "Mamba cache blocks (4). The smallest capture size was 8. Disabling cudagraph capture. Consider reducing "
        "max_num_seqs or increasing available GPU memory.",
        mamba_cache_blocks=4,
        cudagraph_max_capture_size=0,
    ),
]

KV_CACHE = [
    case(
        "kv_tpu_hbm_budget",
        "kv_error",
        # tpu-inference tpu_worker.py determine_available_memory (ValueError)
        "ValueError: total_hbm_used_gb=29.1GiB exceeds total_hbm_limit_cap_gb=27.67GiB by 1.43GiB. Please consider "
        "increasing --gpu-memory-utilization from 0.9 to a larger value.",
        hbm_used_gib=29.1,
        hbm_budget_gib=27.67,
        gpu_memory_utilization=0.9,
        variant="no_blocks",
    ),
    case(
        "kv_v1_one_request",
        "kv_error",
        # t011: newest wording ("model's"), hand-wrapped over three lines, no "(" before the GiB figure;
        # the reassembler's job is to join the lines, this is the joined text
        " ".join(fixture_line("t011", n) for n in (1, 2, 3)),
        max_model_len=1048576,
        kv_needed_gib=22.5,
        kv_available_gib=17.39,
        estimated_max_model_len=810208,
    ),
    case(
        "kv_v1_one_request",
        "kv_error",
        fixture_line("t012", 1),  # the "(which also controls CPU memory on the CPU backend)" aside, in ```
        max_model_len=262144,
        kv_needed_gib=1.93,
        kv_available_gib=1.88,
        estimated_max_model_len=251136,
    ),
    case(
        "kv_v1_one_request",
        "kv_error",
        # vllm 0.8.5 kv_cache_utils.py: the estimate sentence lost to a misplaced f-string (" Based on the
        # available memory,  Try increasing"), no number to read
        "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (0.71 GiB). Based on the available memory,  Try "
        "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        max_model_len=131072,
        kv_needed_gib=16.0,
        kv_available_gib=0.71,
    ),
    case(
        "kv_v1_one_request",
        "kv_error",
        # vllm 0.7.3 kv_cache_utils.py printed "GB" for GiB figures
        "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GB KV cache is "
        "needed, which is larger than the available KV cache memory (2.50 GB). Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        max_model_len=32768,
        kv_needed_gib=4.0,
        kv_available_gib=2.5,
    ),
    # a paste cut after the estimate, before its period (z03): the number is read
    case(
        "kv_v1_one_request",
        "kv_error",
        fixture_line("z03", 2),
        max_model_len=32768,
        kv_needed_gib=4.5,
        kv_available_gib=3.58,
        estimated_max_model_len=26032,
    ),
    case(
        "kv_v1_one_request",
        "kv_error",
        "(EngineCore_DP0 pid=7) ValueError: To serve at least one request with the model's max seq len (131072), "
        "(8.00 GiB KV cache is needed, which is larger than the available KV cache memory (5.20 GiB). Based on the "
        "available memory, the estimated maximum model length is 85184 [truncated]",
        max_model_len=131072,
        kv_needed_gib=8.0,
        kv_available_gib=5.2,
        estimated_max_model_len=85184,
    ),
    case("kv_v0_max_seq_len", "kv_error", fixture_line("s001", 5), max_model_len=29000, kv_tokens=23648),
    case("kv_v0_max_seq_len", "kv_error", fixture_line("x007", 3), max_model_len=131072, kv_tokens=58496),
    case(
        "kv_v1_one_request",
        "kv_error",
        fixture_line("s004", 1),  # "models's", before the estimate sentence
        max_model_len=1048576,
        kv_needed_gib=24.0,
        kv_available_gib=9.97,
    ),
    case(
        "kv_v1_one_request",
        "kv_error",
        "(EngineCore_DP0 pid=1094) ValueError: To serve at least one request with the models's max seq len "
        "(262144), (24.0 GiB KV cache is needed, which is larger than the available KV cache memory (3.18 GiB). "
        "Based on the available memory, the estimated maximum model length is 34736. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        max_model_len=262144,
        kv_needed_gib=24.0,
        kv_available_gib=3.18,
        estimated_max_model_len=34736,
    ),
    case(
        "kv_v1_one_request",
        "kv_error",
        fixture_line("s006", 1),  # newest "model's", with the estimate
        max_model_len=1048576,
        kv_needed_gib=44.25,
        kv_available_gib=8.42,
        estimated_max_model_len=199552,
    ),
    case(
        "kv_v1_one_request",
        "kv_error",
        "(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), "
        "(4.26 GiB KV cache is needed, which is larger than the available KV cache memory (-1.5 GiB). Try increasing",
        max_model_len=100000,
        kv_needed_gib=4.26,
        kv_available_gib=-1.5,
    ),
    case("kv_no_cache_blocks", "kv_error", fixture_line("s021", 1)),
    case(
        "kv_no_cache_blocks",
        "kv_error",
        "vLLM model 'qwen2-5-vl-7b-instruct-awq' failed: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.",
    ),
    case(
        "kv_cannot_auto_fit",
        "kv_error",
        "ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. "
        "Try increasing `gpu_memory_utilization`.",
    ),
]

OOM = [
    # Accelerator runtimes' allocation failures (hunt7 q08, q28, q23's family): memory, device named
    case(
        "cann_memory_allocation_failure",
        "oom",
        "[Stage-0] ERROR 01-16 10:20:16 [gpu_worker.py:226] [PID: 5393] 2026-01-16-10:20:15.729.456 "
        "Memory_Allocation_Failure(EL0004): Failed to allocate memory.",
        form="cann",
        backend="NPU",
    ),
    case(
        "cann_memory_allocation_failure",
        "oom",
        "Call rtMalloc fail, purpose: page caching, type = 2, size:402718720, device_id:0[FUNC:Alloc]"
        "[FILE:device_allocator.cc][LINE:72]",
        form="cann",
        backend="NPU",
        tried_to_allocate_gib=402718720 / 2**30,
    ),
    case(
        "cann_memory_allocation_failure",
        "oom",
        "RuntimeError: NPU function error: aclrtMalloc, error code is 207018",
        form="cann",
        backend="NPU",
    ),
    case(
        "cann_memory_allocation_failure",
        "oom",
        "EL0004: Failed to allocate memory.",  # the code alone, as CANN's newer error list prints it
        form="cann",
        backend="NPU",
    ),
    case(
        "neuron_runtime_allocation_failure",
        "oom",
        'ERROR 02-11 14:20:32 engine.py:389] RuntimeError: nrt_tensor_allocate status=4 message="Allocation Failure"',
        form="neuron-runtime",
        backend="NEURON",
        call="nrt_tensor_allocate",
        status=4,
    ),
    case(
        "neuron_runtime_allocation_failure",
        "oom",
        "RuntimeError: nrt_tensor_allocate status=4 message=Allocation Failure",  # quotes lost in a paste
        form="neuron-runtime",
        backend="NEURON",
        call="nrt_tensor_allocate",
        status=4,
    ),
    case(
        "torch_oom",
        "oom",
        fixture_line("x014", 1),  # new form, co-tenants listed around "this process"
        form="torch",
        backend="CUDA",
        tried_to_allocate_gib=320 * MiB,
        gpu_index=0,
        gpu_total_gib=22.05,
        gpu_free_gib=113.62 * MiB,
        processes=[(60, 184 * MiB), (161, 184 * MiB), (198, 13.57), (None, 7.79), (344, 184 * MiB)],
        processes_listed=True,
        pytorch_allocated_gib=6.79,
        reserved_unallocated_gib=778.05 * MiB,
    ),
    case(
        "torch_oom",
        "oom",
        fixture_line("r003", 1),
        form="torch",
        backend="CUDA",
        tried_to_allocate_gib=50 * MiB,
        gpu_index=0,
        gpu_total_gib=23.56,
        gpu_free_gib=21.75 * MiB,
        processes=[(None, 23.5)],
        processes_listed=True,
        pytorch_allocated_gib=22.88,
        private_pools_gib=24 * MiB,
        reserved_unallocated_gib=275.38 * MiB,
    ),
    case(
        "torch_oom",
        "oom",
        fixture_line("x018", 10),  # NVML reports 0 bytes
        form="torch",
        backend="CUDA",
        tried_to_allocate_gib=896 * MiB,
        gpu_index=4,
        gpu_total_gib=79.25,
        gpu_free_gib=768 * KiB,
        processes=[(None, 0.0)],
        processes_listed=True,
        pytorch_allocated_gib=77.67,
        reserved_unallocated_gib=150.52 * MiB,
    ),
    case(
        "torch_oom",
        "oom",
        fixture_line("r016", 6),  # OutOfMemoryError('Error in model execution ...
        form="torch",
        backend="CUDA",
        tried_to_allocate_gib=3.82,
        gpu_index=0,
        gpu_total_gib=79.14,
        gpu_free_gib=3.02,
        processes=[(3620138, 76.1)],
        processes_listed=True,
        pytorch_allocated_gib=75.34,
        private_pools_gib=58 * MiB,
        reserved_unallocated_gib=75.3 * MiB,
        in_model_execution=True,
    ),
    case(
        "torch_oom",
        "oom",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacty of "
        "23.65 GiB of which 12.06 MiB is free. Process 4018 has 23.63 GiB memory in use. Of the allocated memory "
        "22.83 GiB is allocated by PyTorch, and 385.21 MiB is reserved by PyTorch but unallocated.",  # torch 2.1 typo
        form="torch",
        backend="CUDA",
        tried_to_allocate_gib=50 * MiB,
        gpu_index=0,
        gpu_total_gib=23.65,
        gpu_free_gib=12.06 * MiB,
        processes=[(4018, 23.63)],
        processes_listed=True,
        pytorch_allocated_gib=22.83,
        reserved_unallocated_gib=385.21 * MiB,
    ),
    case(
        "torch_oom",
        "oom",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.35 GiB total "
        "capacity; 77.41 GiB already allocated; 3.56 MiB free; 78.01 GiB reserved in total by PyTorch) If reserved "
        "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
        form="torch-old",
        backend="CUDA",
        tried_to_allocate_gib=20 * MiB,
        gpu_index=0,
        gpu_total_gib=79.35,
        gpu_free_gib=3.56 * MiB,
        pytorch_allocated_gib=77.41,
        pytorch_reserved_gib=78.01,
    ),
    case(
        "torch_oom",
        "oom",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 15.78 GiB total capacity; 12.00 GiB "
        "already allocated; 1.50 GiB free; 8.00 GiB allowed; 13.00 GiB reserved in total by PyTorch)",
        form="torch-old",
        backend="CUDA",
        tried_to_allocate_gib=2.0,
        gpu_index=1,
        gpu_total_gib=15.78,
        gpu_free_gib=1.5,
        pytorch_allocated_gib=12.0,
        pytorch_reserved_gib=13.0,
    ),
    case(
        "torch_oom",
        "oom",
        "(EngineCore_DP0 pid=9817) torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.08 GiB. GPU 0 has "
        "a total capacity of 62.47 GiB of which 769.28 MiB is free. Of the allocated memory 61.41 GiB is allocated "
        "by PyTorch, and 138.26 MiB is reserved by PyTorch but unallocated." + _OOM_TAIL,
        form="torch",
        backend="HIP",
        tried_to_allocate_gib=1.08,
        gpu_index=0,
        gpu_total_gib=62.47,
        gpu_free_gib=769.28 * MiB,
        processes=[],
        processes_listed=False,
        pytorch_allocated_gib=61.41,
        reserved_unallocated_gib=138.26 * MiB,
    ),
    case(
        "torch_oom",
        "oom",
        "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of "
        "15.11 GiB of which 100.00 MiB is free. Of the allocated memory 14.00 GiB is allocated by PyTorch, and "
        "200.00 MiB is reserved by PyTorch but unallocated. Please use `empty_cache` to release all unoccupied "
        "cached memory.",
        form="torch",
        backend="XPU",
        tried_to_allocate_gib=0.5,
        gpu_index=0,
        gpu_total_gib=15.11,
        gpu_free_gib=100 * MiB,
        processes=[],
        processes_listed=False,
        pytorch_allocated_gib=14.0,
        reserved_unallocated_gib=200 * MiB,
    ),
    case(
        "torch_oom_allocator_warning",
        "oom",
        "[rank0]:[W910 23:40:43.144601916 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on device "
        "0 while trying to allocate 7516192768 bytes (free: 1547173888, total: 191495471104).",
        form="allocator-warning",
        backend="CUDA",
        gpu_index=0,
        tried_to_allocate_gib=7516192768 / 2**30,
        gpu_free_gib=1547173888 / 2**30,
        gpu_total_gib=191495471104 / 2**30,
        allocator_retry=True,
    ),
    case(
        "torch_oom_allocator_warning",
        "oom",
        # torch >= 2.8 with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (shared/vllm-messages.md 13d)
        "expandable_segments: memory mapping failed with OOM on device 0 while trying to map 20971520 bytes "
        "(free: 20250624, total: 51043958784)",
        form="allocator-warning",
        backend="CUDA",
        gpu_index=0,
        tried_to_allocate_gib=20971520 / 2**30,
        gpu_free_gib=20250624 / 2**30,
        gpu_total_gib=51043958784 / 2**30,
        allocator_retry=True,
    ),
    # -- the "this process" clause and the device index in other shapes (hunt6 p10, p20) --
    case(
        "torch_oom",
        "oom",
        # p10: hand-edited, the "Including non-PyTorch memory," lead and "memory" cut out
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 594.00 MiB. GPU 0 has a total capacity of "
        "22.03 GiB of which 582.00 MiB is free. Process 29529 has 796.00 MiB memory in use. ... this process has "
        "20.67 GiB in use.",
        form="torch",
        backend="CUDA",
        tried_to_allocate_gib=594 * MiB,
        gpu_index=0,
        gpu_total_gib=22.03,
        gpu_free_gib=582 * MiB,
        processes=[(29529, 796 * MiB), (None, 20.67)],
        processes_cut=True,
        processes_listed=True,
    ),
    case(
        "torch_oom",
        "oom",
        # p20: "GPU  has", no device index printed (V0 multiproc worker)
        "Exception in worker VllmWorkerProcess while processing method load_model: CUDA out of memory. Tried to "
        "allocate 32.00 MiB. GPU  has a total capacity of 23.68 GiB of which 29.81 MiB is free. Including "
        "non-PyTorch memory, this process has 23.63 GiB memory in use. Of the allocated memory 23.24 GiB is "
        "allocated by PyTorch, and 1.22 MiB is reserved by PyTorch but unallocated.",
        form="torch",
        backend="CUDA",
        tried_to_allocate_gib=32 * MiB,
        gpu_total_gib=23.68,
        gpu_free_gib=29.81 * MiB,
        processes=[(None, 23.63)],
        processes_listed=True,
        pytorch_allocated_gib=23.24,
        reserved_unallocated_gib=1.22 * MiB,
    ),
    case(
        "torch_oom_allocator_warning",
        "oom",
        # a forum's retyped copy: "[rank0]" without the time stamp, joined at its wrap without "while"
        "[rank0] memory allocation failed with OOM on device 0 trying to allocate 2097152 bytes (free: 2031616, "
        "total: 23661248512)",
        form="allocator-warning",
        backend="CUDA",
        gpu_index=0,
        tried_to_allocate_gib=2097152 / 2**30,
        gpu_free_gib=2031616 / 2**30,
        gpu_total_gib=23661248512 / 2**30,
        allocator_retry=True,
    ),
    case(
        "torch_oom",
        "oom",
        # t016 joined back from its 140-column hard wrap: the space at the wrap ("allocate|666.00") is lost
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate666.00 MiB. GPU 3 has a total capacity of "
        "95.10 GiB of which 145.94 MiB is free. Process 53397 has 94.95 GiB memory in use. Of the allocated memory "
        "92.33 GiB is allocated by PyTorch, and 32.77 MiB is reserved by PyTorch but unallocated.",
        form="torch",
        backend="CUDA",
        tried_to_allocate_gib=666 * MiB,
        gpu_index=3,
        gpu_total_gib=95.1,
        gpu_free_gib=145.94 * MiB,
        processes=[(53397, 94.95)],
        processes_listed=True,
        pytorch_allocated_gib=92.33,
        reserved_unallocated_gib=32.77 * MiB,
    ),
    case(
        "torch_oom",
        "oom",
        # torch_npu (Ascend): the old allocator form with "NPU N" and "current active" (public Ascend FAQ)
        "RuntimeError: NPU out of memory. Tried to allocate 260.00 MiB (NPU 0; 28.50 GiB total capacity; 10.24 GiB "
        "already allocated; 10.24 GiB current active; 149.57 MiB free; 10.28 GiB reserved in total by PyTorch)",
        form="torch-old",
        backend="NPU",
        tried_to_allocate_gib=260 * MiB,
        gpu_index=0,
        gpu_total_gib=28.5,
        gpu_free_gib=149.57 * MiB,
        pytorch_allocated_gib=10.24,
        pytorch_reserved_gib=10.28,
    ),
    case(
        "torch_oom",
        "oom",
        # intel-extension-for-pytorch XPU: the old form without a "free" figure
        "RuntimeError: XPU out of memory. Tried to allocate 1024.00 MiB (GPU 0; 15.11 GiB total capacity; 14.28 GiB "
        "already allocated; 14.61 GiB reserved in total by PyTorch)",
        form="torch-old",
        backend="XPU",
        tried_to_allocate_gib=1.0,
        gpu_index=0,
        gpu_total_gib=15.11,
        pytorch_allocated_gib=14.28,
        pytorch_reserved_gib=14.61,
    ),
    case("cuda_error_oom", "oom", fixture_line("x002", 13), form="cuda-error", backend="CUDA"),
    case(
        "cuda_error_oom",
        "oom",
        "torch.AcceleratorError: CUDA error: out of memory",  # torch >= 2.8 raises AcceleratorError
        form="accelerator-error",
        backend="CUDA",
    ),
    case("cuda_error_oom", "oom", fixture_line("s035", 7), form="cuda-error", backend="CUDA"),  # CUDA driver error
    case("cuda_error_oom", "oom", "RuntimeError: HIP error: out of memory", form="cuda-error", backend="HIP"),
    case("cuda_error_oom", "oom", "RuntimeError: hipErrorOutOfMemory", form="cuda-error", backend="HIP"),
    case(
        "triton_oom",
        "oom",
        # triton backends/nvidia/driver.c gpuAssert: "Triton Error [CUDA]: " + cuGetErrorString
        "(Worker_TP3 pid=1037) ERROR 08-11 04:29:42 [multiproc_executor.py:1020] RuntimeError: Triton Error [CUDA]: "
        "out of memory",
        form="triton",
        backend="CUDA",
    ),
    case(
        "triton_oom",
        "oom",
        # triton backends/amd/driver.c gpuAssert: "%s Code: %d, Messsage: %s" (sic), hipErrorOutOfMemory = 2
        "RuntimeError: Triton Error [HIP]:  Code: 2, Messsage: out of memory",
        form="triton",
        backend="HIP",
    ),
    case(
        "csrc_cuda_error_oom",
        "oom",
        # vllm csrc/cumem_allocator.cpp CUDA_CHECK: "CUDA Error: %s at %s:%d" (sleep mode wake_up)
        "(EngineCore_DP0 pid=418) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
        form="cumem",
        backend="CUDA",
        source_file="cumem_allocator.cpp",
        source_line=62,
    ),
    case(
        "nccl_cuda_oom",
        "oom",
        "host1:1234:5678 [2] enqueue.cc:43 NCCL WARN Cuda failure 'out of memory'",
        form="nccl",
        backend="CUDA",
    ),
    case(
        "nccl_cuda_oom",
        "oom",
        # newer NCCL prints the error number; c10d appends it after "Last error:"
        "host1:95:95 [0] include/alloc.h:320 (ncclCuMemAlloc) NCCL WARN Cuda failure 2 'out of memory'",
        form="nccl",
        backend="CUDA",
    ),
    case(
        "nccl_cuda_oom",
        "oom",
        "host1:95:95 [0] include/alloc.h:125 NCCL WARN Failed to CUDA calloc 6291456 bytes",
        form="nccl",
        backend="CUDA",
        tried_to_allocate_gib=6291456 / 2**30,
    ),
    case(
        "cuda_library_alloc_failed",
        "oom",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        form="cuda-library",
        backend="CUDA",
        library="cublas",
    ),
    case(
        "level_zero_oom",
        "oom",
        "RuntimeError: level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
        form="level-zero",
        backend="XPU",
    ),
    case(
        "hpu_devmem_oom",
        "oom",
        # HabanaAI/vllm-fork README (Gaudi): the model does not fit the cards
        "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::939524096 (896)MB",
        form="hpu",
        backend="HPU",
        tried_to_allocate_gib=896 / 1024,
    ),
    case(
        "xla_resource_exhausted",
        "oom",
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
        "allocate 50.00M. That was not possible. There are 27.86M free.; (0x0x0_HBM0)",
        form="xla",
        backend="TPU",
        tried_to_allocate_gib=50 * MiB,
        gpu_free_gib=27.86 * MiB,
    ),
    case(
        "xla_resource_exhausted",
        "oom",
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Error loading program 'jit_train_step': Attempting to "
        "reserve 51.43G at the bottom of memory. That was not possible. There are 46.61G free, 0B reserved, and "
        "46.61G reservable.",
        form="xla",
        # loading a program "at the bottom of memory" is the TPU runtime's (openxla/xla error docs:
        # "XLA backends: TPU"; hunt9 v04)
        backend="TPU",
        tried_to_allocate_gib=51.43,
        gpu_free_gib=46.61,
        reserve=True,
        program_load=True,
    ),
    case(
        "xla_compile_hbm_oom",
        "oom",
        "XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. "
        "Used 20.93G of 15.48G hbm. Exceeded hbm capacity by 5.45G.",
        form="xla-compile",
        backend="TPU",
        memory_space="hbm",
        required_gib=20.93,
        gpu_total_gib=15.48,
        exceeded_by_gib=5.45,
    ),
    case(
        "xla_compile_hbm_oom",
        "oom",
        # openxla/xla docs/errors/error_1000.md: the early abort when the program cannot fit
        "XlaRuntimeError: RESOURCE_EXHAUSTED: Compilation failure: Aborting compilation early because it's unlikely "
        "to have enough memory. Requires 3.84T, has 90.96G available. If more detailed logging is desired, set "
        "--xla_tpu_impure_oom_fast_exit_threshold=-1",
        form="xla-compile",
        backend="TPU",
        memory_space="hbm",
        early_abort=True,
        required_gib=3.84 * 1024,
        gpu_free_gib=90.96,
    ),
    # Not device memory: an on-chip scratch memory of the TPU core ran out while XLA compiled
    # (fixtures/logs h007; openxla/xla docs/errors/error_1001.md for vmem): a compile-time limit.
    case(
        "xla_compile_scratch_limit",
        "cuda_error",
        fixture_line("h007", 1),
        exception="XLA:TPU compile error",
        message="Ran out of memory in memory space smem. Used 1.00M of 1.00M smem. Exceeded smem capacity by 1.7K",
        form="xla-compile",
        backend="TPU",
        memory_space="smem",
        space_used_gib=1.0 / 1024,
        space_capacity_gib=1.0 / 1024,
        exceeded_by_gib=1.7 * KiB,
    ),
    case(
        "xla_compile_scratch_limit",
        "cuda_error",
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: Ran out of memory in memory "
        "space vmem while allocating on stack for %splash_mha_fwd = bf16[8,2048]{1,0} custom-call(...). Scoped "
        "allocation with size 19.85M and limit 16.00M exceeded scoped vmem limit by 3.85M.",
        exception="XLA:TPU compile error",
        message="Ran out of memory in memory space vmem while allocating on stack for %splash_mha_fwd = bf16[8,2048]{1,0} "
        "custom-call(...). Scoped allocation with size 19.85M and limit 16.00M exceeded scoped vmem limit by 3.85M",
        form="xla-compile",
        backend="TPU",
        memory_space="vmem",
        scoped=True,
        space_used_gib=19.85 * MiB,
        space_capacity_gib=16.0 * MiB,
        exceeded_by_gib=3.85 * MiB,
    ),
    case(
        "xla_compile_scratch_limit",
        "cuda_error",
        "RuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space sflag",
        exception="XLA:TPU compile error",
        message="Ran out of memory in memory space sflag",
        form="xla-compile",
        backend="TPU",
        memory_space="sflag",
    ),
    case(
        "xla_out_of_memory_bytes",
        "oom",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "17179869184 bytes.",
        form="xla",
        backend="XLA",
        tried_to_allocate_gib=16.0,
    ),
    case("sampler_warmup_oom", "sampler_oom", fixture_line("s025", 3), target="sampler", dummy_requests=256),
    case(
        "sampler_warmup_oom",
        "sampler_oom",
        "RuntimeError: CUDA out of memory occurred when warming up pooler (task='embed') with 128 dummy requests. "
        "Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
        target="pooler",
        dummy_requests=128,
    ),
    case(
        "failed_to_load_model",
        "load_oom",
        "(EngineCore pid=1) ERROR 01-01 00:00:00 [gpu_model_runner.py:1] Failed to load model - not enough GPU "
        "memory. Try lowering --gpu-memory-utilization to free memory for weights, increasing "
        "--tensor-parallel-size, or using --quantization. See "
        "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more tips. (original error: boom)",
    ),
]

HOST = [
    # LMCache inside vLLM's worker prefixes (hunt8 u10): the CPU buffer each worker pins, the engine made
    case(
        "lmcache_configuration",
        "facts",
        "(VllmWorker rank=0 pid=247) [2025-06-07 20:33:02,562] LMCache INFO: LMCache Configuration: {'chunk_size': "
        "256, 'local_cpu': True, 'max_local_cpu_size': '300.0 GB', 'local_disk': None, 'max_local_disk_size': "
        "'0.0 GB', 'remote_url': None}",
        lmcache_local_cpu_gb=300.0,
    ),
    case(
        "lmcache_configuration",
        "facts",
        "[2025-01-02 03:04:05,678] LMCache INFO: LMCache Configuration: {'chunk_size': 256, 'max_local_cpu_size': 5.0, "
        "'local_disk': None} (config.py:579:lmcache.v1.config)",
        lmcache_local_cpu_gb=5.0,
    ),
    case(
        "lmcache_engine_created",
        "facts",
        "(VllmWorker rank=3 pid=250) [2025-06-07 20:33:02,562] LMCache INFO: Creating LMCacheEngine instance "
        "vllm-instance (cache_engine.py:783:lmcache.v1.cache_engine)",
        lmcache_engine="vllm-instance",
    ),
    case("ray_memory_monitor_kill", "host_oom", _RAY_KILL.split("\n")[0], killer="ray"),
    case(
        "ray_memory_monitor_kill",
        "host_oom",
        # Ray Data / docs: the raylet's retry message
        "(raylet) Task _map_task failed due to oom. There are infinite oom retries remaining, so the task will be "
        "retried. Error: 1 worker(s) were killed due to the node running low on memory.",
        killer="ray",
        workers_killed=1,
    ),
    case(
        "ray_memory_monitor_node",
        "host_oom",
        _RAY_KILL.split("\n")[1],
        killer="ray",
        node_ip="172.17.0.2",
        pid=91085,
        process="allocate_memory",
        process_used_gib=24.99,
        host_used_gib=32.62,
        host_total_gib=33.28,
        host_usage_fraction=0.980175,
        threshold=0.96,
    ),
    case(
        "ray_memory_monitor_node",
        "host_oom",
        # newer Ray: "where the lease (lease ID: ...)"
        "Memory on the node (IP: 192.168.1.103, ID: db89) where the lease (lease ID: 0100, name=WorkerDict.__init__, "
        "pid=3048142, memory used=49.21GB) was running was 59.84GB / 62.51GB (0.957347), which exceeds the memory "
        "usage threshold of 0.95. Ray killed this worker (ID: a4f5) because it was the most recently scheduled task",
        killer="ray",
        node_ip="192.168.1.103",
        pid=3048142,
        process="WorkerDict.__init__",
        process_used_gib=49.21,
        host_used_gib=59.84,
        host_total_gib=62.51,
        host_usage_fraction=0.957347,
        threshold=0.95,
    ),
    case("ray_oom_prevention_docs", "host_oom", fixture_line("u018", 11), killer="ray"),
    case(
        "raylet_workers_killed_oom",
        "host_oom",
        "(raylet) [2025-04-24 18:22:30,123 E 1234 1250] (raylet) node_manager.cc:3069: 7 Workers (tasks / actors) "
        "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: abc, IP: "
        "192.0.2.1) over the last time period.",
        killer="ray",
        workers_killed=7,
    ),
    case(
        "kernel_oom_killer",
        "host_oom",
        "Sep 15 12:08:17 raspberrypiz2 kernel: Out of memory: Killed process 571 (python) total-vm:2071252kB, "
        "anon-rss:257104kB file-rss:1576kB",
        killer="kernel",
        pid=571,
        process="python",
        anon_rss_gib=257104 / 2**20,
    ),
    case(
        "kernel_oom_killer",
        "host_oom",
        "[18492.104] Memory cgroup out of memory: Killed process 4182 (order-worker) total-vm:812044kB, "
        "anon-rss:518420kB, file-rss:1240kB, shmem-rss:0kB",
        killer="cgroup",
        pid=4182,
        process="order-worker",
        anon_rss_gib=518420 / 2**20,
    ),
    case(
        "kernel_oom_kill_summary",
        "host_oom",
        "[ 1172.3] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=pod1,mems_allowed=0,oom_memcg=/kubepods,"
        "task_memcg=/kubepods/pod1,task=python3,pid=2295,uid=0",
        killer="cgroup",
        process="python3",
        pid=2295,
    ),
    case(
        "kernel_invoked_oom_killer",
        "host_oom",
        "[ 1172.339920] systemd invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=1",
        killer="kernel",
        invoked_by="systemd",
    ),
    case(
        "torch_cpu_allocator_oom",
        "host_oom",
        "RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried "
        "to allocate 17179869184 bytes.",
        killer="torch-cpu-allocator",
        tried_to_allocate_gib=16.0,
    ),
    case("kubernetes_oomkilled", "host_oom", "      Reason:       OOMKilled", killer="kubernetes"),
    # SIGKILL (exit code 137 = 128 + 9) as each runner reports it: memory only where the same
    # text says so (Databricks, m19); a bare kill is "signal"
    case(
        "exit_code_137",
        "host_oom",
        fixture_line("m19", 5),
        killer="job-runner",
        reporter="runner",
        exit_code=137,
        signal="SIGKILL",
    ),
    case(
        "exit_code_137",
        "host_oom",
        "vllm-1 exited with code 137",
        killer="signal",
        reporter="runner",
        exit_code=137,
        signal="SIGKILL",
    ),
    case(
        "exit_code_137",
        "host_oom",
        "command terminated with exit code 137",
        killer="signal",
        reporter="runner",
        exit_code=137,
        signal="SIGKILL",
    ),
    case(
        "exit_code_137",
        "host_oom",
        "      Exit Code:    137",
        killer="signal",
        reporter="runner",
        exit_code=137,
        signal="SIGKILL",
    ),
    case(
        "exit_code_137",
        "host_oom",
        "3f2a9c1d  vllm/vllm-openai:v0.8.2  Exited (137) 5 minutes ago",
        killer="signal",
        reporter="runner",
        exit_code=137,
        signal="SIGKILL",
    ),
    case(
        "torch_elastic_sigkill",
        "host_oom",
        "E1201 10:00:00.123000 1234 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
        "local_rank: 0 (pid: 1234) of binary: /usr/bin/python3",
        killer="signal",
        reporter="torchrun",
        exit_code=-9,
        signal="SIGKILL",
    ),
    case(
        "systemd_sigkill",
        "host_oom",
        "Dec 01 10:00:00 gpu01 systemd[1]: vllm.service: Main process exited, code=killed, status=9/KILL",
        killer="signal",
        reporter="systemd",
        signal="SIGKILL",
    ),
    case("shell_killed", "host_oom", "Killed", killer="signal", reporter="shell", signal="SIGKILL"),
    case(
        "shell_killed",
        "host_oom",
        "./serve.sh: line 3:  1234 Killed                  vllm serve Qwen/Qwen3-8B --max-model-len 8192",
        killer="signal",
        reporter="shell",
        signal="SIGKILL",
    ),
    case(
        "slurm_oom_kill",
        "host_oom",
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your processes may have been "
        "killed by the cgroup out-of-memory handler.",
        killer="cgroup",
        reporter="slurm",
    ),
    case(
        "slurm_oom_kill",
        "host_oom",
        "srun: error: gpu-node01: task 0: Out Of Memory",
        killer="cgroup",
        reporter="slurm",
        node="gpu-node01",
    ),
    case(
        "systemd_oom_kill",
        "host_oom",
        "Dec 01 10:00:00 gpu01 systemd[1]: vllm.service: A process of this unit has been killed by the OOM killer.",
        killer="kernel",
        reporter="systemd",
    ),
    case(
        "systemd_oom_kill",
        "host_oom",
        "Dec 01 10:00:00 gpu01 systemd[1]: vllm.service: Failed with result 'oom-kill'.",
        killer="kernel",
        reporter="systemd",
    ),
]

# No usable accelerator (catalog/platform.py): each wording as vLLM or PyTorch prints it.
PLATFORM = [
    case(
        "wsl_pin_memory_off",
        "marker",
        # vllm 0.2 worker/cache_engine.py (a05), 0.3-0.6 utils.py, 0.7+ platforms/interface.py
        "WARNING 09-18 10:59:09 cache_engine.py:96] Using 'pin_memory=False' as WSL is detected. "
        "This may slow down the performance.",
        marker="wsl_pin_memory_off",
    ),
    case(
        "wsl_pin_memory_off",
        "marker",
        "(EngineCore_0 pid=62) WARNING 03-19 11:13:24 [interface.py:389] Using 'pin_memory=False' as WSL is "
        "detected. This may slow down the performance.",
        marker="wsl_pin_memory_off",
    ),
    case(
        "platform_detected",
        "config",
        "INFO 09-02 06:44:03 [__init__.py:239] Automatically detected platform rocm.",
        platform="rocm",
    ),
    case(
        "no_platform_detected",
        "no_device",
        "INFO 09-02 06:44:03 [__init__.py:245] No platform detected, vLLM is running on UnspecifiedPlatform",
        form="no_platform",
        probe=True,
    ),
    case(
        "device_type_not_inferred",
        "no_device",
        "RuntimeError: Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` "
        "to turn on verbose logging to help debug the issue.",
        form="no_platform",
    ),
    case("device_type_not_inferred", "no_device", "RuntimeError: Failed to infer device type", form="no_platform"),
    case("empty_device_string", "no_device", "RuntimeError: Device string must not be empty", form="no_platform"),
    case(
        "vllm_c_without_driver",
        "no_device",
        "WARNING 09-02 06:44:03 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('libcuda.so.1: "
        "cannot open shared object file: No such file or directory')",
        form="no_driver",
        library="libcuda.so.1",
        probe=True,
    ),
    case(
        "vllm_c_without_driver",
        "no_device",
        'WARNING 11-20 10:00:00 [interface.py:201] Failed to import from vllm._C: ImportError("libnvidia-ml.so.1: '
        'cannot open shared object file: No such file or directory")',
        form="no_driver",
        library="libnvidia-ml.so.1",
        probe=True,
    ),
    case(
        "torch_no_nvidia_driver",
        "no_device",
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed "
        "a driver from http://www.nvidia.com/Download/index.aspx",
        form="no_driver",
    ),
    case(
        "nvml_not_found",
        "no_device",
        "pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found",
        form="no_driver",
        probe=True,
    ),
    case(
        "nvml_not_found",
        "no_device",
        "pynvml.NVMLError_DriverNotLoaded: Driver Not Loaded",
        form="no_driver",
        probe=True,
    ),
    case("no_gpus_available", "no_device", "RuntimeError: No CUDA GPUs are available", form="no_gpu"),
    case("no_gpus_available", "no_device", "RuntimeError: No HIP GPUs are available", form="no_gpu"),
    case(
        "no_gpus_available",
        "no_device",
        "RuntimeError: CUDA error: no CUDA-capable device is detected",
        form="no_gpu",
    ),
    case(
        "no_gpus_available",
        "no_device",
        "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
        form="no_gpu",
    ),
    case(
        "nvidia_driver_too_old",
        "no_device",
        "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). "
        "Please update your GPU driver by downloading and installing a new version from the URL: "
        "http://www.nvidia.com/Download/index.aspx",
        form="driver_too_old",
        driver_version=11040,
    ),
    case(
        "nvidia_driver_too_old",
        "no_device",
        "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
        form="driver_too_old",
    ),
    case(
        "nvidia_driver_too_old",
        "no_device",
        "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? Error 804: forward "
        "compatibility was attempted on non supported HW",
        form="driver_too_old",
    ),
    case(
        "nvidia_driver_too_old",
        "no_device",
        "Error 803: system has unsupported display driver / cuda driver combination",
        form="driver_too_old",
    ),
    case("torch_without_cuda", "no_device", "AssertionError: Torch not compiled with CUDA enabled", form="cpu_torch"),
]

SCHEDULER = [
    # V0's swap abort (vllm/core/scheduler.py _preempt_by_swap): bare, under a Ray actor prefix,
    # and in the raise's own source line's neighbour (a21 line 16)
    case("v0_swap_space_exhausted", "swap_exhausted", fixture_line("a21", 16), preemption_mode="SWAP"),
    case(
        "v0_swap_space_exhausted",
        "swap_exhausted",
        "RuntimeError: Aborted due to the lack of CPU swap space. Please increase the swap space to avoid this error.",
        preemption_mode="SWAP",
    ),
    case(
        "v0_swap_space_exhausted",
        "swap_exhausted",
        "ERROR 09-27 11:35:19 async_llm_engine.py:41] RuntimeError: Aborted due to the lack of CPU swap space. "
        "Please increase the swap space to avoid this error.",
        preemption_mode="SWAP",
    ),
    case("v0_preemption", "preemption", fixture_line("r004", 2), seq_group="165", mode="SWAP", cumulative=151),
    case("v0_preemption", "preemption", fixture_line("r001", 1), seq_group="221", mode="RECOMPUTE", cumulative=101),
    case(
        "v0_preemption",
        "preemption",
        "WARNING 05-09 00:49:33 scheduler.py:1057] Sequence group 0 is preempted by PreemptionMode.RECOMPUTE mode "
        "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
        "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
        "total_cumulative_preemption_cnt=1",
        seq_group="0",
        mode="RECOMPUTE",
        cumulative=1,
    ),
    # vLLM 0.1.0-0.1.3: the scheduler's own line, one throughput (z19)
    case(
        "v0_stats",
        "stats",
        fixture_line("z19", 2),
        generation_tps=181.6,
        running=1,
        swapped=0,
        waiting=0,
        kv_usage_pct=100.0,
        cpu_kv_usage_pct=0.0,
        engine="v0",
    ),
    case(
        "v0_stats",
        "stats",
        fixture_line("z19", 5),
        generation_tps=0.0,
        running=0,
        swapped=0,
        waiting=1,
        kv_usage_pct=0.0,
        cpu_kv_usage_pct=0.0,
        engine="v0",
    ),
    case(
        "v0_stats",
        "stats",
        "INFO 07-12 10:01:02 scheduler.py:254] Throughput: 1203.5 tokens/s, Running: 48 reqs, Swapped: 3 reqs, "
        "Pending: 17 reqs, GPU KV cache usage: 99.1%, CPU KV cache usage: 12.4%",
        generation_tps=1203.5,
        running=48,
        swapped=3,
        waiting=17,
        kv_usage_pct=99.1,
        cpu_kv_usage_pct=12.4,
        engine="v0",
    ),
    case(
        "v0_stats",
        "stats",
        fixture_line("r023", 1),
        prompt_tps=6501.4,
        generation_tps=69.1,
        running=4,
        swapped=0,
        waiting=0,
        kv_usage_pct=15.6,
        cpu_kv_usage_pct=0.0,
        engine="v0",
    ),
    case(
        "v0_stats",
        "stats",
        fixture_line("x025", 5),
        prompt_tps=0.0,
        generation_tps=2103.3,
        running=219,
        swapped=0,
        waiting=768,
        kv_usage_pct=100.0,
        cpu_kv_usage_pct=0.0,
        engine="v0",
    ),
    case(
        "v0_prefix_hit",
        "prefix_hit",
        "INFO 06-16 21:24:15 [metrics.py:486] Prefix cache hit rate: GPU: 45.12%, CPU: 0.00%",
        prefix_hit_pct=45.12,
    ),
    # Rendered from vllm/v1/metrics/loggers.py StatLoggerManager (0.10.2 to 0.33.0).
    case(
        "stats_logging_disabled",
        "marker",
        "(APIServer pid=1) WARNING 09-24 19:58:12 [loggers.py:1386] AsyncLLM created with api_server_count more "
        "than 1; disabling stats logging to avoid incomplete stats.",
        marker="stats_logging_disabled",
    ),
    case(
        "v1_stats",
        "stats",
        "INFO 03-11 06:18:48 [loggers.py:80] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 "
        "tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
        prompt_tps=0.0,
        generation_tps=0.0,
        running=0,
        waiting=0,
        kv_usage_pct=0.0,
        prefix_hit_pct=0.0,
        engine="v1",
    ),
    case(
        "v1_stats",
        "stats",
        fixture_line("r002", 5),
        engine_index=0,
        prompt_tps=0.0,
        generation_tps=1242.7,
        running=20,
        waiting=23,
        kv_usage_pct=98.4,
        prefix_hit_pct=0.0,
        engine="v1",
    ),
    case(
        "v1_stats",
        "stats",
        "(APIServer pid=1) INFO 10-01 00:00:00 [loggers.py:1] Engine 001: Avg prompt throughput: 120.5 tokens/s, "
        "Avg generation throughput: 14.6 tokens/s, Running: 30 reqs, Waiting: 12 reqs, Preemptions: 3, GPU KV cache "
        "usage: 99.5%, Prefix cache hit rate: 23.6%, MM cache hit rate: 0.0%",
        engine_index=1,
        prompt_tps=120.5,
        generation_tps=14.6,
        running=30,
        waiting=12,
        preemptions=3,
        kv_usage_pct=99.5,
        prefix_hit_pct=23.6,
        engine="v1",
    ),
    case(
        "v1_stats",
        "stats",
        "(APIServer pid=1) INFO 10-01 00:00:00 [loggers.py:1] 2 Engines Aggregated: Avg prompt throughput: 1.0 "
        "tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 4 reqs, Waiting: 5 reqs, Deferred: 2 reqs, "
        "GPU KV cache usage: 50.0%, Prefix cache hit rate: 1.0%",
        prompt_tps=1.0,
        generation_tps=2.0,
        running=4,
        waiting=5,
        deferred=2,
        kv_usage_pct=50.0,
        prefix_hit_pct=1.0,
        engine="v1",
    ),
    case(
        "v1_stats",
        "stats",
        fixture_line("r019", 7),  # cut after "GPU KV cache usage: 0.0%,"
        engine_index=0,
        prompt_tps=0.8,
        generation_tps=4.6,
        running=0,
        waiting=0,
        kv_usage_pct=0.0,
        engine="v1",
    ),
]

REQUESTS = [
    case(
        "client_length_body",
        "client",
        # a gateway's 400 body quoting the tokenizer's warning (z23); a tokenizer's own warning
        # reads the same: only a client's 4xx status line before it makes it a rejection
        '{"msg":"Token indices sequence length is longer than the specified maximum sequence length for this model!"}',
        body=True,
    ),
    case(
        "client_length_body",
        "client",
        '{"object":"error","message":"This model\'s maximum context length is 4096 tokens. However, you requested '
        '9000 tokens (10 in the messages, 8990 in the completion).","type":"BadRequestError","code":400}',
        body=True,
        max_model_len=4096,
    ),
    case(
        "too_long_output_and_prompt",
        "too_long",
        # vllm 0.18-0.31 renderers/params.py, the exact count form
        "(APIServer pid=1) ERROR 03-02 10:00:00 [serving.py:300] This model's maximum context length is 32768 tokens. "
        "However, you requested 4096 output tokens and your prompt contains 30000 input tokens, for a total of "
        "34096 tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
        max_model_len=32768,
        max_tokens=4096,
        prompt_tokens=30000,
        requested_tokens=34096,
        variant="output+prompt",
    ),
    case(
        "too_long_prompt_only",
        "too_long",
        # vllm 0.32+ renderers/params.py
        "This model's maximum context length is 32768 tokens. However, your prompt contains at least 40000 input "
        "tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt.",
        max_model_len=32768,
        prompt_tokens=40000,
        variant="prompt-alone",
    ),
    case(
        "too_long_prompt_characters",
        "too_long",
        # vllm 0.18+ renderers/params.py: rejected on its length in characters before tokenizing
        "This model's maximum context length is 32768 tokens. However, you requested 1024 output tokens and your "
        "prompt contains 900000 characters (more than 786432 characters, which is the upper bound for 31744 input "
        "tokens). Please reduce the length of the input prompt or the number of requested output tokens.",
        max_model_len=32768,
        max_tokens=1024,
        prompt_chars=900000,
        prompt_tokens_at_least=31744,
        variant="prompt-characters",
    ),
    case(
        "too_long_pooling_input",
        "too_long",
        # vllm 0.9-0.19 serving_engine.py _validate_input for embedding / score requests
        "This model's maximum context length is 512 tokens. However, you requested 600 tokens in the input for "
        "embedding generation. Please reduce the length of the input.",
        max_model_len=512,
        prompt_tokens=600,
        variant="input",
    ),
    case(
        "too_long_messages_completion",
        "too_long",
        fixture_line("r010", 1),
        max_model_len=8192,
        requested_tokens=8203,
        prompt_tokens=7691,
        max_tokens=512,
        variant="messages+completion",
    ),
    case(
        "too_long_input_only",
        "too_long",
        '{"object":"error","message":"This model\'s maximum context length is 4096 tokens. However, your request has '
        '5000 input tokens. Please reduce the length of the input messages.","type":"BadRequestError",'
        '"param":null,"code":400}',
        max_model_len=4096,
        prompt_tokens=5000,
        variant="input",
    ),
    case(
        "too_long_max_tokens",
        "too_long",
        "400 'max_tokens' or 'max_completion_tokens' is too large: 16384. This model's maximum context length is "
        "65536 tokens and your request has 52189 input tokens (16384 > 65536 - 52189). (parameter=max_tokens, "
        "value=16384)",
        max_tokens=16384,
        max_model_len=65536,
        prompt_tokens=52189,
        requested_tokens=68573,
        variant="max_tokens",
    ),
    case(
        "too_long_output_and_prompt",
        "too_long",
        fixture_line("x023", 1),
        max_model_len=262144,
        max_tokens=128000,
        prompt_tokens=134145,
        requested_tokens=262145,
        variant="output+prompt",
    ),
    case(
        "too_long_output_and_prompt",
        "too_long",
        fixture_line("r011", 8),
        max_model_len=50960,
        max_tokens=15000,
        prompt_tokens=35961,
        requested_tokens=50961,
        variant="output+prompt",
    ),
    case(
        "too_long_decoder_prompt",
        "too_long",
        "ValueError: The decoder prompt (length 40000) is longer than the maximum model length of 32768. Make sure "
        "that `max_model_len` is no smaller than the number of text tokens.",
        prompt_tokens=40000,
        max_model_len=32768,
        variant="decoder-prompt",
    ),
    case(
        "too_long_v0_scheduler",
        "too_long",
        "WARNING 01-01 00:00:00 scheduler.py:1] Input prompt (9000 tokens) is too long and exceeds limit of 8192",
        prompt_tokens=9000,
        prompt_limit=8192,
        variant="v0-scheduler",
    ),
    case("http_access_error", "access", fixture_line("r027", 1), method="POST", path="/worker_generate", status=500),
]

ERRORS = [
    case("traceback_start", "tb_start", fixture_line("r003", 3)),
    case(
        "traceback_frame",
        "tb_frame",
        fixture_line("r003", 4),
        path="/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py",
        line=655,
        func="output_handler",
    ),
    case(
        "traceback_frame",
        "tb_frame",
        '  File "/opt/conda/envs/vllm/bin/vllm", line 7, in <module>',
        path="/opt/conda/envs/vllm/bin/vllm",
        line=7,
        func="<module>",
    ),
    # IPython / Jupyter frames (phase4; hunt8 u02): JupyterLab's link form, IPython 8 plain, IPython 7
    case(
        "ipython_frame",
        "tb_frame",
        fixture_line("u02", 2),
        path="~/miniconda3/envs/qwen_env/lib/python3.11/site-packages/vllm/worker/cache_engine.py",
        line=49,
        func="__init__",
    ),
    case(
        "ipython_frame",
        "tb_frame",
        "File ~/venv/lib/python3.10/site-packages/vllm/worker/cache_engine.py:64, in "
        "CacheEngine._allocate_kv_cache(self, num_blocks, device)",
        path="~/venv/lib/python3.10/site-packages/vllm/worker/cache_engine.py",
        line=64,
        func="_allocate_kv_cache",
    ),
    case(
        "ipython_frame",
        "tb_frame",
        "/opt/conda/lib/python3.8/site-packages/vllm/worker/cache_engine.py in _allocate_kv_cache(self, num_blocks)",
        path="/opt/conda/lib/python3.8/site-packages/vllm/worker/cache_engine.py",
        line=0,
        func="_allocate_kv_cache",
    ),
    case("traceback_chain", "tb_chain", fixture_line("x022", 3)),
    case("traceback_chain", "tb_chain", "During handling of the above exception, another exception occurred:"),
    case(
        "exception_line",
        "exception",
        "ValueError: something bad happened",
        exception="ValueError",
        message="something bad happened",
    ),
    case(
        "exception_line",
        "exception",
        fixture_line("s037", 14),
        exception="RuntimeError",
        message="Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        consequence=True,  # the same line is an engine-death marker: it reports a failure elsewhere
    ),
    case("exception_line", "exception", "SystemExit: 1", exception="SystemExit", message="1", consequence=True),
    case("exception_line", "exception", "Exception", exception="Exception", message=""),
    case(
        "cuda_error",
        "cuda_error",
        fixture_line("r028", 3),
        exception="CUDA error",
        message="an illegal memory access was encountered",
    ),
    case(
        "cuda_error",
        "cuda_error",
        "RuntimeError: CUDA error: device-side assert triggered",
        exception="CUDA error",
        message="device-side assert triggered",
    ),
    # Intel Gaudi's fatal log (HlLogger), as V0's MQLLMEngine logs it first (p12) and raised
    case(
        "habana_fatal_error",
        "cuda_error",
        fixture_line("p12", 4),
        exception="HPU fatal error",
        message="MODULE:PT_LAZY Error, ValidateSyncInputTensors tensor_data is empty. Tensorid:3375 "
        "QueueStatus:ThreadPool m_tasks size: 0 irValue:id_8791_hpu__input Uniqueid: 3375",
        module="PT_LAZY",
    ),
    case(
        "habana_fatal_error",
        "cuda_error",
        "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_BRIDGE Exception in Lowering thread...",
        exception="HPU fatal error",
        message="MODULE:PT_BRIDGE Exception in Lowering thread...",
        module="PT_BRIDGE",
    ),
    case(
        "nccl_error",
        "cuda_error",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
        exception="NCCL error",
        message="unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
    ),
    case(
        "enginecore_failed_to_start",
        "engine_dead",
        fixture_line("s013", 2),
        marker="enginecore_failed_to_start",
        phase_hint="startup",
    ),
    # vllm-omni's stage engine (m21)
    case(
        "enginecore_failed_to_start",
        "engine_dead",
        fixture_line("m21", 4),
        marker="enginecore_failed_to_start",
        phase_hint="startup",
    ),
    # torch_npu's failed runtime call (p11: an aclnn copy into unmapped sleep-mode memory)
    case(
        "npu_function_error",
        "cuda_error",
        fixture_line("p11", 11),
        exception="NPU function error",
        message="call failed, error code is 50",
    ),
    case(
        "npu_function_error",
        "cuda_error",
        "RuntimeError: NPU function error: call aclnnMatmul failed, error code is 561103",
        exception="NPU function error",
        message="call aclnnMatmul failed, error code is 561103",
    ),
    case(
        "enginecore_fatal",
        "engine_dead",
        "(EngineCore_DP0 pid=1) ERROR 09-01 00:00:00 [core.py:1] EngineCore encountered a fatal error.",
        marker="enginecore_fatal",
        phase_hint="runtime",
    ),
    case(
        "engine_core_init_failed",
        "engine_dead",
        fixture_line("s037", 14),
        marker="engine_core_init_failed",
        phase_hint="startup",
    ),
    case(
        "engine_process_failed_to_start",
        "engine_dead",
        "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
        marker="engine_process_failed_to_start",
        phase_hint="startup",
    ),
    case("engine_core_proc_died", "engine_dead", fixture_line("x019", 3), marker="proc_died", who="EngineCore_DP0"),
    case(
        "engine_core_proc_died",
        "engine_dead",
        # vllm 0.20+ v1/engine/core_client.py (RuntimeError)
        "RuntimeError: Engine core process EngineCore_DP0 died unexpectedly.",
        marker="proc_died",
        who="EngineCore_DP0",
    ),
    case(
        "workerproc_init_failed",
        "engine_dead",
        fixture_line("t025", 3),
        marker="workerproc_init_failed",
        phase_hint="startup",
    ),
    case(
        "workerproc_failed_to_start",
        "engine_dead",
        "(Worker_TP1 pid=530) ERROR 10-06 18:54:30 [multiproc_executor.py:597] WorkerProc failed to start.",
        marker="workerproc_failed_to_start",
        phase_hint="startup",
    ),
    case(
        "utility_method_failed",
        "engine_dead",
        "Call to wake_up method failed: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:163",
        marker="utility_method_failed",
        method="wake_up",
    ),
    # the engine core's own logger.exception before the failure message (0.7.3-0.33; hunt8 u15)
    case(
        "utility_method_failed",
        "engine_dead",
        "(VLLMWorker pid=29988, ip=192.0.2.103) ERROR 10-10 19:15:47 [core.py:459] Invocation of collective_rpc "
        "method failed",
        marker="utility_method_failed",
        method="collective_rpc",
    ),
    case(
        "utility_method_failed",
        "engine_dead",
        "(EngineCore_DP0 pid=7) ERROR 01-02 03:04:05 [core.py:1849] Invocation of wake_up method failed",
        marker="utility_method_failed",
        method="wake_up",
    ),
    # Intel's Unified Runtime out of a device resource (fixtures n29): not said to be memory
    case(
        "level_zero_out_of_resources",
        "cuda_error",
        "(EngineCore_DP0 pid=568) ERROR 04-16 12:49:28 [core.py:936] RuntimeError: level_zero backend failed with "
        "error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)",
        exception="XPU runtime error",
        message="level_zero backend failed with error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)",
    ),
    case(
        "level_zero_out_of_resources",
        "cuda_error",
        "RuntimeError: UR_RESULT_ERROR_OUT_OF_RESOURCES",
        exception="XPU runtime error",
        message="UR_RESULT_ERROR_OUT_OF_RESOURCES",
    ),
    # ROCm's HSA runtime fault (hunt7 q27): a GPU kernel fault named by its status
    case(
        "rocm_hsa_error",
        "cuda_error",
        "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016",
        exception="ROCm HSA error",
        message="HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception.",
        status_name="HSA_STATUS_ERROR_EXCEPTION",
        hsa_code="0x1016",
    ),
    case(
        "rocm_hsa_error",
        "cuda_error",
        "HSA_STATUS_ERROR_EXCEPTION:",  # the description on the next line (q27's paste)
        exception="ROCm HSA error",
        message="HSA_STATUS_ERROR_EXCEPTION",
        status_name="HSA_STATUS_ERROR_EXCEPTION",
    ),
    case(
        "rocm_hsa_error",
        "cuda_error",
        ":0:rocdevice.cpp            :2984: 1234567890 us: [pid:42 tid:0x7f] Callback: Queue 0x7f00 aborting with "
        "error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest "
        "legal address. code: 0x29",
        exception="ROCm HSA error",
        message="HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest "
        "legal address.",
        status_name="HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
        hsa_code="0x29",
    ),
    # ROCm's runtime compiler with no target arch (z12: the two sentences in two records, and joined)
    case(
        "hip_runtime_compile_failed",
        "cuda_error",
        fixture_line("z12", 23),
        exception="HIP runtime compilation error",
        form="hiprtc",
        message="the runtime compiler (hiprtc) could not compile a kernel",
    ),
    case(
        "hip_runtime_compile_failed",
        "cuda_error",
        fixture_line("z12", 24),
        exception="HIP runtime compilation error",
        form="hiprtc",
        message="the runtime compiler (hiprtc) could not compile a kernel",
        no_target_arch=True,
    ),
    case(
        "hip_runtime_compile_failed",
        "cuda_error",
        "RuntimeError: [Compilation Error] hip runtime failed to load. Error: Please provide architecture for which "
        "code is to be generated.",
        exception="HIP runtime compilation error",
        form="hiprtc",
        message="the runtime compiler (hiprtc) could not compile a kernel",
        no_target_arch=True,
    ),
    # AWS Neuron's compiler wrapper (hunt7 q09, under SkyPilot's task prefix)
    case(
        "neuron_cc_failed",
        "cuda_error",
        "(task, pid=34615) 2024-06-21 09:33:40.000866:  38168  ERROR ||NEURON_CC_WRAPPER||: Failed compilation with "
        "['neuronx-cc', 'compile', '--target=trn1', '--framework=XLA', '/tmp/user/model.hlo_module.pb']",
        exception="Neuron compiler error",
        message="neuronx-cc failed compiling the model",
        target="trn1",
    ),
    case(
        "neuron_cc_failed",
        "cuda_error",
        "ERROR ||NEURON_CC_WRAPPER||: Failed compilation with ['neuronx-cc', 'compile', '--fram",  # cut
        exception="Neuron compiler error",
        message="neuronx-cc failed compiling the model",
    ),
    case(
        "dump_input",
        "engine_dead",
        "(EngineCore_DP0 pid=12) ERROR 11-04 10:11:12 [dump_input.py:72] Dumping input data for V1 LLM engine "
        "(v0.11.1) with config: model='Qwen/Qwen3-8B', speculative_config=None, ",
        marker="dump_input",
        phase_hint="runtime",
    ),
    case(
        "worker_failed_with_error",
        "engine_dead",
        # vllm 0.8+ v1/executor/multiproc_executor.py get_response
        "RuntimeError: Worker failed with error 'CUDA out of memory. Tried to allocate 2.00 GiB', please check the "
        "stack trace above for the root cause",
        marker="worker_failed",
    ),
    case(
        "engine_core_proc_died",
        "engine_dead",
        "ERROR 01-01 00:00:00 [multiproc_executor.py:1] Worker proc VllmWorker-0 died unexpectedly, shutting down "
        "executor.",
        marker="proc_died",
        who="VllmWorker-0",
    ),
    case("workerproc_hit_exception", "engine_dead", fixture_line("s025", 4), marker="workerproc_exception"),
    case(
        "output_handler_failed",
        "engine_dead",
        fixture_line("r003", 2),
        marker="output_handler_failed",
        phase_hint="runtime",
    ),
    case(
        "engine_dead_error",
        "engine_dead",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
        "root cause.",
        marker="engine_dead",
        phase_hint="runtime",
    ),
    case("engine_dead_error", "engine_dead", fixture_line("r012", 2), marker="engine_dead", phase_hint="runtime"),
    case(
        "engine_dead_error",
        "engine_dead",
        "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already.",
        marker="engine_dead",
        phase_hint="runtime",
    ),
    case(
        "engine_dead_error",
        "engine_dead",
        "vllm.engine.multiprocessing.MQEngineDeadError: Engine loop is not running. Inspect the stacktrace to find "
        "the original error",
        marker="engine_dead",
        phase_hint="runtime",
    ),
    case("v0_worker_died", "engine_dead", fixture_line("x007", 5), marker="worker_died", who="VllmWorkerProcess"),
    case(
        "model_execution_error",
        "engine_dead",
        fixture_line("r016", 2),
        marker="model_execution_failed",
        phase_hint="runtime",
    ),
    case("ray_worker_died", "engine_dead", fixture_line("r028", 1), marker="ray_worker_died"),
    # Ray's ActorDiedError (python/ray/exceptions.py): vLLM's engine actor (hunt10 w03) and a
    # trainer's, bare and after Ray's "Exception raised in creation task:" prefix
    case(
        "ray_actor_creation_failed",
        "engine_dead",
        fixture_line("w03", 5),
        marker="ray_actor_creation_failed",
        phase_hint="startup",
        who="AsyncVLLMInferenceEngine",
    ),
    case(
        "ray_actor_creation_failed",
        "engine_dead",
        "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, "
        "ray::RayWorkerWrapper.__init__() (pid=2757112, ip=192.0.2.2, actor_id=aa71786a87ed51cca52a281401000000, "
        "repr=<vllm.executor.ray_utils.RayWorkerWrapper object at 0xfff594ef0d00>)",
        marker="ray_actor_creation_failed",
        phase_hint="startup",
        who="RayWorkerWrapper",
    ),
    # RayTaskError(Cause): a trainer's OOM (hunt10 w02) is the application's; vLLM's actor, a
    # rollout's, or another cause is not
    case(
        "ray_task_error",
        "marker",
        fixture_line("w02", 5),
        marker="foreign_actor_oom",
        actor="FSDPPolicyWorkerBase.init_model()",
    ),
    case(
        "ray_task_error",
        "marker",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::CriticModelRayActor.fit() (pid=4121, ip=192.0.2.7)",
        marker="foreign_actor_oom",
        actor="CriticModelRayActor.fit()",
    ),
    case(
        "ray_task_error",
        "marker",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::RayWorkerWrapper.execute_method() (pid=17335, "
        "ip=192.0.2.136, repr=<vllm.executor.ray_utils.RayWorkerWrapper object at 0x71ac9e8a3fe0>)",
        marker="ray_task_error",
        actor="RayWorkerWrapper.execute_method()",
    ),
    case(
        "ray_task_error",
        "marker",
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_generate_sequences() "
        "(pid=99, ip=192.0.2.9, repr=<verl.single_controller.ray.base.WorkerDict object at 0x7f0>)",
        marker="ray_task_error",
        actor="WorkerDict.actor_rollout_generate_sequences()",
    ),
    case(
        "ray_task_error",
        "marker",
        "ray.exceptions.RayTaskError(ValueError): ray::FSDPPolicyWorkerBase.init_model() (pid=1, ip=192.0.2.1, "
        "repr=<skyrl.workers.fsdp.fsdp_worker.FSDPPolicyWorkerBase object at 0x1>)",
        marker="ray_task_error",
        actor="FSDPPolicyWorkerBase.init_model()",
    ),
    # Rendered from vllm/v1/executor/multiproc_executor.py get_response and the V1 executor.
    case(
        "worker_failed_with_error",
        "engine_dead",
        "RuntimeError: Worker failed with error 'CUDA out of memory', please check the stack trace above for the "
        "root cause",
        marker="worker_failed",
    ),
    case("executor_failed", "engine_dead", "RuntimeError: Executor failed.", marker="executor_failed"),
    # Rendered from vllm/executor/multiproc_worker_utils.py and vllm/worker/worker_base.py (0.5-0.10).
    case(
        "worker_method_error",
        "engine_dead",
        "(VllmWorkerProcess pid=2421) ERROR 10-14 12:32:47 [multiproc_worker_utils.py:233] Exception in worker "
        "VllmWorkerProcess while processing method load_model.",
        marker="worker_method_error",
        method="load_model",
        who="VllmWorkerProcess",
    ),
    case(
        "worker_method_error",
        "engine_dead",
        "ERROR 10-14 12:32:47 [worker_base.py:620] Error executing method 'determine_num_available_blocks'. This "
        "might cause deadlock in distributed execution.",
        marker="worker_method_error",
        method="determine_num_available_blocks",
    ),
    case(
        "workerproc_init_failed",
        "engine_dead",
        fixture_line("t025", 3),
        marker="workerproc_init_failed",
        phase_hint="startup",
    ),
    case(
        "see_root_cause_above",
        "engine_dead",
        fixture_line("r015", 1)[:140],
        marker="see_root_cause_above",
    ),
]

# catalog/timing.py: wordings from the wheels' source (see its docstring) and the corpus.
TIMING = [
    case("torch_compile_total", "facts", fixture_line("r022", 2), compile_s=18.4),  # "takes", a line glued on
    case(
        "torch_compile_total",
        "facts",
        "(EngineCore pid=20075) INFO 05-07 04:51:40 [monitor.py:53] [backbone] torch.compile took 54.58 s in total",
        compile_s=54.58,
    ),
    case("init_engine_seconds", "facts", fixture_line("r022", 12), init_engine_s=44.51),  # "took %.2f seconds"
    case(
        "init_engine_seconds",
        "facts",
        "INFO 12-01 10:00:00 [core.py:284] init engine (profile, create kv cache, warmup model) took 10.71 s",
        init_engine_s=10.71,
    ),
    case("init_engine_seconds", "facts", fixture_line("x011", 12), init_engine_s=163.91, compile_s=54.58),
    case(
        "init_engine_seconds",
        "facts",
        "INFO 12-01 10:00:00 [core.py:293] init engine (profile, create kv cache, warmup model) took 126.24 s "
        "(compilation: 47.09 s — language_model: 40.00 s, encoder: 7.09 s)",
        init_engine_s=126.24,
        compile_s=47.09,
    ),
    case("warmup_run_seconds", "facts", fixture_line("t015", 8), warmup_run_s=107.62),  # monitor.py, 0.18+
    case("model_load_seconds", "facts", fixture_line("x006", 2), model_load_s=12.799889),  # "GiB and"
    case(
        "model_load_seconds",
        "facts",
        "INFO 12-01 10:00:00 [gpu_model_runner.py:3339] Model loading took 15.2683 GiB memory and 5.312345 seconds",
        model_load_s=5.312345,
    ),
    case(
        "model_load_seconds",
        "facts",
        "INFO 12-01 10:00:00 [gpu_model_runner.py:5089] Model loading took 15.27 GiB memory and 5.312345 seconds",
        model_load_s=5.312345,
    ),
    case("graph_capture_seconds", "facts", fixture_line("r022", 11), graph_capture_s=14.0),
    case(
        "graph_capture_seconds",
        "facts",
        "INFO 10-21 09:12:04 model_runner.py:1530] Graph capturing finished in 1 sec, took -0.12 GiB",
        graph_capture_s=1.0,
    ),
    case("capture_bar_sizes", "facts", fixture_line("r022", 10), cuda_graph_sizes=67),  # "Capturing CUDA graphs:"
    case(
        "capture_bar_sizes",
        "facts",
        "Capturing CUDA graph shapes: 100%|██████████| 35/35 [00:43<00:00,  1.24s/it]",
        cuda_graph_sizes=35,
    ),
    case(
        "capture_bar_sizes",
        "facts",
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  57%|█████▋    | 20/35 [00:01<00:01, 12.1it/s]",
        cuda_graph_sizes=35,
    ),
    case("capture_bar_sizes", "facts", fixture_line("r037", 5), cuda_graph_sizes=51),  # "(PIECEWISE)", garbled
    case(
        "max_capture_size",
        "facts",
        'compilation_config={"level":3,"cudagraph_capture_sizes":[512,504,496],"max_capture_size":512}',
        max_cudagraph_capture_size=512,
    ),
    case(
        "max_capture_size",
        "facts",
        "compilation_config={'mode': 3, 'cudagraph_capture_sizes': [1, 2, 4, 8], 'max_cudagraph_capture_size': 8}",
        max_cudagraph_capture_size=8,
    ),
    case("compile_cache_hit", "facts", fixture_line("x006", 5), compile_cache="hit"),
    case(
        "compile_cache_hit",
        "facts",
        "INFO 01-01 00:00:00 [backends.py:115] Directly load the compiled graph for shape None from the cache",
        compile_cache="hit",
    ),
    case("compile_cache_miss", "facts", fixture_line("r022", 1), compile_cache="miss"),
    case(
        "compile_cache_miss",
        "facts",
        "INFO 12-01 10:00:00 [backends.py:279] Compiling a graph for compile range (1, 8192) takes 21.03 s",
        compile_cache="miss",
    ),
    case(
        "model_runner_v2",
        "facts",
        "(Worker pid=20075) INFO 12-01 10:00:00 [gpu_worker.py:241] Using V2 Model Runner",
        model_runner="v2",
    ),
    case(
        "model_runner_v1_fallback",
        "facts",
        "WARNING 12-01 10:00:00 [vllm.py:536] Model Runner V2 does not yet support LoRA; using the V1 model runner "
        "instead.",
        model_runner="v1",
    ),
    case(
        "model_runner_v1_fallback",
        "facts",
        "WARNING 12-01 10:00:00 [vllm.py:529] Model Runner V2 requires Triton; using the V1 model runner instead.",
        model_runner="v1",
    ),
    case(
        "non_default_args_line",
        "marker",
        "(APIServer pid=1) INFO 08-17 02:59:30 [utils.py:326] non-default args: {'model_tag': 'Qwen/Qwen3-8B', "
        "'host': '0.0.0.0', 'model': 'Qwen/Qwen3-8B', 'max_model_len': 32768}",
        marker="non_default_args",
    ),
    case(
        "args_namespace_line",
        "marker",
        "INFO 04-02 10:00:00 api_server.py:712] args: Namespace(host=None, port=8000, model='m', max_model_len=None)",
        marker="args_namespace",
    ),
]

# shm_broadcast's wait warning in every wording (catalog/stalls.py names the releases of each).
_SHM = dict(signal="shm_wait", interval_s=60, repeats=True)
_NEW = dict(_SHM, idle_prints=False, names_compilation=True)
_NCCL_TIMEOUT = (
    "[rank1]:[E1218 20:27:21.433063423 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, NumelOut=131072000, Timeout(ms)=600000) ran "
    "for 600088 milliseconds before timing out."
)
_RAY_HANG = (
    "(EngineCore_DP0 pid=4120) ERROR 06-12 10:46:34 [core.py:517] ray.exceptions.RayChannelTimeoutError: System "
    "error: If the execution is expected to take a long time, increase RAY_CGRAPH_get_timeout which is currently 300 "
    "seconds. Otherwise, this may indicate that the execution is hanging."
)

STALLS = [
    # 0.11.2 - 0.33.0 (INFO): names compilation and weight/kv cache quantization
    case("shm_broadcast_wait", "stall", fixture_line("h026", 1), **_NEW, names_quantization=True),
    # 0.11.0 (INFO): names compilation only
    case("shm_broadcast_wait", "stall", fixture_line("h025", 2), **_NEW),
    # the same, cut in the middle of its hint (the last line of a paste)
    case("shm_broadcast_wait", "stall", fixture_line("h025", 5), **_SHM, idle_prints=False),
    # 0.8 - 0.10.2 (DEBUG), printed by idle workers too; a Ray worker of a V0 server
    case(
        "shm_broadcast_wait",
        "stall",
        "(RayWorkerWrapper pid=2286, ip=10.0.0.2) DEBUG 05-14 09:12:03 [shm_broadcast.py:394] No available shared "
        "memory broadcast block found in 60 second.",
        **_SHM,
        idle_prints=True,
    ),
    # 0.8.5's writer: no space before "in"
    case(
        "shm_broadcast_wait",
        "stall",
        "DEBUG 05-02 11:00:00 [shm_broadcast.py:431] No available shared memory broadcast block foundin 30 second.",
        signal="shm_wait",
        interval_s=30,
        repeats=True,
        idle_prints=True,
    ),
    # 0.5.5 - 0.6.4 (WARNING), 0.6.6 - 0.7.3 (DEBUG): the first wording, V0's record prefix
    case(
        "shm_block_wait_old",
        "stall",
        "(VllmWorkerProcess pid=3011) WARNING 09-03 14:20:11 shm_broadcast.py:386] No available block found in 60 "
        "second. ",
        **_SHM,
        idle_prints=True,
    ),
    case(
        "shm_block_wait_old",
        "stall",
        "DEBUG 01-10 08:00:00 shm_broadcast.py:356] No available block found in 60 second. ",
        **_SHM,
        idle_prints=True,
    ),
    case(
        "engine_loop_unfinished",
        "stall",
        fixture_line("v26", 11),  # V1 0.8.4 core.py:416
        signal="loop_unfinished",
        fatal=False,
        local_unfinished=True,
        finished=False,
    ),
    case(
        "engine_loop_unfinished",
        "stall",
        "(EngineCore_1 pid=2461252) DEBUG 04-14 08:14:10 [core.py:416] EngineCore loop active - local unfinished: False",
        signal="loop_unfinished",
        fatal=False,
        local_unfinished=False,
    ),
    case("reported_hang", "marker", fixture_line("w04", 3), marker="reported_hang", prose=True),  # "stuck"
    case("reported_failure", "marker", fixture_line("v13", 1), marker="reported_failure", prose=True),  # "OOM"
    # rules7: Ray Serve's controller, three eras of its replica name (z01; Ray 2.x
    # deployment_state.py check_health: _replica_tag, then Replica(id=...)), with Ray's prefix
    case(
        "serve_health_check_missed",
        "stall",
        fixture_line("z01", 20),
        signal="health_check_missed",
        fatal=False,
        timeout_s=10.0,
    ),
    case(
        "serve_health_check_missed",
        "stall",
        "(ServeController pid=2281) WARNING 2024-03-01 10:00:00,123 controller 2281 deployment_state.py:1121 - "
        "Didn't receive health check response for replica vLLM#xKjQpa after 30.0s, marking it unhealthy.",
        signal="health_check_missed",
        fatal=False,
        timeout_s=30.0,
    ),
    case(
        "serve_health_check_missed",
        "stall",
        "INFO 2023-08-01 09:00:00,000 controller 77 deployment_state.py:640 - Didn't receive health check response "
        "for replica LLMDeployment#abcdef after 5s, marking it unhealthy.",
        signal="health_check_missed",
        fatal=False,
        timeout_s=5.0,
    ),
    # rules7: inflections, and subjects a person names the server by (no I or we)
    case("reported_failure", "marker", fixture_line("a11", 8), marker="reported_failure", prose=True),  # "it OOMs:"
    *[
        case("reported_failure", "marker", text, marker="reported_failure", prose=True)
        for text in (
            "When I raise max_model_len it OOMed right after loading.",
            "vLLM crashed after about an hour of load:",
            "The server keeps crashing with this config",
            "It then fails during CUDA graph capture:",
            "the engine OOM'd twice overnight",
            "and it crashes, here is the output",
            "My container errored out after the first request",
            "We are OOMing on the second request",
        )
    ],
    case(
        "rpc_call_timed_out",
        "stall",
        "(EngineCore_DP0 pid=812) ERROR 07-01 12:00:00 [core.py:634] TimeoutError: RPC call to execute_model timed out.",
        signal="rpc_timeout",
        fatal=True,
        method="execute_model",
    ),
    case(
        "engine_iteration_timed_out",
        "stall",
        "ERROR 11-05 10:00:00 async_llm_engine.py:903] Engine iteration timed out. This should never happen!",
        signal="iteration_timeout",
        fatal=True,
    ),
    case(
        "barrier_timed_out",
        "stall",
        "(EngineCore_DP1 pid=77) ERROR 09-09 09:09:09 [core.py:700] RuntimeError: Barrier timed out after 600.00 "
        "seconds",
        signal="barrier_timeout",
        fatal=True,
        timeout_s=600,
    ),
    case(
        "barrier_timed_out",
        "stall",
        "RuntimeError: Barrier departure timed out after 30.00 seconds",
        signal="barrier_timeout",
        fatal=True,
        timeout_s=30,
    ),
    # 0.9.2 - 0.10.2: the timeout passed as a second argument, so the tuple is printed
    case(
        "barrier_timed_out",
        "stall",
        "RuntimeError: ('Barrier timed out after %f seconds', 600.0)",
        signal="barrier_timeout",
        fatal=True,
        timeout_s=600,
    ),
    case(
        "barrier_timed_out",
        "stall",
        "RuntimeError: ('Barrier departure timed out after %f s', 30.0)",
        signal="barrier_timeout",
        fatal=True,
        timeout_s=30,
    ),
    case(
        "stack_dump_watchdog",
        "stall",
        "(EngineCore_DP0 pid=100) INFO 06-01 12:00:00 [watch_dog.py:95] [Watchdog]Dumped stack to "
        "/var/log/vllm/VLLM_STACK_DUMP_for_engine_0_100.log due to feed timeout",
        signal="watchdog_dump",
        fatal=False,
        dump_path="/var/log/vllm/VLLM_STACK_DUMP_for_engine_0_100.log",
        reason="feed timeout",
    ),
    case(
        "collective_watchdog_timeout",
        "stall",
        _NCCL_TIMEOUT,
        signal="collective_timeout",
        fatal=True,
        rank=1,
        seq=1,
        op="BROADCAST",
        backend="NCCL",
        timeout_ms=600000,
        ran_ms=600088,
    ),
    # older PyTorch prints no element counts; torch_npu's HCCL process group copies the wording
    case(
        "collective_watchdog_timeout",
        "stall",
        "[E ProcessGroupHCCL.cpp:455] [Rank 3] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=14863, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800048 milliseconds before timing out.",
        signal="collective_timeout",
        fatal=True,
        rank=3,
        seq=14863,
        op="ALLREDUCE",
        backend="HCCL",
        timeout_ms=1800000,
        ran_ms=1800048,
    ),
    case(
        "collective_watchdog_stuck",
        "stall",
        "[rank1]:[E1111 17:10:53.123456789 ProcessGroupNCCL.cpp:1445] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
        "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
        "collectives. This typically indicates a NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog",
        signal="collective_stuck",
        fatal=True,
        backend="NCCL",
        stuck_s=480,
    ),
    case("ray_channel_timeout", "stall", _RAY_HANG, signal="ray_channel_timeout", fatal=True, timeout_s=300),
    case(
        "ray_channel_timeout",
        "stall",
        "(EngineCore_DP0 pid=4120) ERROR 06-12 10:46:34 [core.py:517] ray.exceptions.RayChannelTimeoutError: System "
        "error: Timed out waiting for object available to read. ObjectID: 00fc911a7833d5d08cfd39cf6b6b31a5fbea0299",
        signal="ray_channel_timeout",
        fatal=True,
    ),
]

# vLLM's own validation errors (catalog/validation.py), as each release words them: a limit with
# its numbers, or a combination the release refuses with the flag to drop.
VALIDATION = [
    # 0.5.5-0.8 lora/worker_manager.py (q17: the bare line)
    case(
        "lora_rank_above_max",
        "config_error",
        "ValueError: LoRA rank 64 is greater than max_lora_rank 16.",
        variant="lora_rank_above_max",
        lora_rank=64,
        max_lora_rank=16,
    ),
    # 0.9-0.33 lora/peft_helper.py validate_legal, through the API server's load_lora_adapter
    case(
        "lora_rank_above_max",
        "config_error",
        "(APIServer pid=12) ERROR 05-06 07:08:09 [serving_models.py:200] ValueError: LoRA rank 128 is greater than "
        "max_lora_rank 64. Adapter bias is not supported.",
        variant="lora_rank_above_max",
        lora_rank=128,
        max_lora_rank=64,
    ),
    case(
        "lora_rank_above_max",
        "config_error",
        "ERROR 03-04 05:06:07 engine.py:135] LoRA rank 32 is greater than max_lora_rank 8.",
        variant="lora_rank_above_max",
        lora_rank=32,
        max_lora_rank=8,
    ),
    case(
        "lora_rank_above_max",
        "config_error",
        "ValueError: LoRA rank 64 is greater than max_lora_rank",  # cut before the limit
        variant="lora_rank_above_max",
        lora_rank=64,
    ),
    case(
        "lora_vocab_above_extra",
        "config_error",
        "ValueError: LoRA added vocab size 300 is greater than lora_extra_vocab_size 256.",
        variant="lora_vocab_above_extra",
        lora_added_vocab=300,
        lora_extra_vocab_size=256,
    ),
    case(
        "loras_above_slots",
        "config_error",
        "RuntimeError: Number of requested LoRAs (5) is greater than the number of GPU LoRA slots (4).",
        variant="loras_above_slots",
        requested_loras=5,
        max_loras=4,
    ),
    case(
        "max_cpu_loras_below_max_loras",
        "config_error",
        "ValueError: max_cpu_loras (2) must be >= max_loras (4)",  # 0.5.5-0.9: no full stop
        variant="max_cpu_loras_below_max_loras",
        max_cpu_loras=2,
        max_loras=4,
    ),
    case(
        "max_cpu_loras_below_max_loras",
        "config_error",
        "(APIServer pid=1)   Value error, max_cpu_loras (1) must be >= max_loras (8). [type=value_error, "
        "input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",  # 0.10+ config/lora.py under pydantic
        variant="max_cpu_loras_below_max_loras",
        max_cpu_loras=1,
        max_loras=8,
    ),
    case(
        "max_lora_rank_not_allowed",
        "config_error",
        "ValueError: max_lora_rank (48) must be one of (8, 16, 32, 64, 128, 256).",
        variant="max_lora_rank_not_allowed",
        max_lora_rank=48,
        allowed_ranks=[8, 16, 32, 64, 128, 256],
    ),
    # the CPU swap space (config/cache.py CacheConfig, 0.5.5-0.17)
    case(
        "swap_space_above_host",
        "config_error",
        "ValueError: Too large swap space. 64.00 GiB out of the 62.50 GiB total CPU memory is allocated for the swap "
        "space.",
        variant="swap_space_above_host",
        swap_total_gib=64.0,
        host_total_gib=62.5,
    ),
    case(
        "swap_space_above_host",
        "config_error",
        "(APIServer pid=1)   Value error, Too large swap space. 32.00 GiB out of the 31.25 GiB total CPU memory is "
        "allocated for the swap space. [type=value_error]",
        variant="swap_space_above_host",
        swap_total_gib=32.0,
        host_total_gib=31.25,
    ),
    # 0.11-0.14 config/speculative.py (q20: in the middle of a collapsed physical line)
    case(
        "draft_model_spec_decode_unsupported",
        "unsupported",
        "(APIServer pid=135812)     raise NotImplementedError( (APIServer pid=135812) NotImplementedError: "
        "Speculative decoding with draft model is not supported yet. Please consider using other speculative "
        "decoding methods such as ngram, medusa, eagle, or mtp.",
        variant="draft_model_spec_decode",
        exception="NotImplementedError",
        message="Speculative decoding with draft model is not supported yet. Please consider using other speculative "
        "decoding methods such as ngram, medusa, eagle, or mtp.",
    ),
    # 0.10.2 config/__init__.py: "... or deepseek_mtp."
    case(
        "draft_model_spec_decode_unsupported",
        "unsupported",
        "NotImplementedError: Speculative decoding with draft model is not supported yet. Please consider using other "
        "speculative decoding methods such as ngram, medusa, eagle, or deepseek_mtp.",
        variant="draft_model_spec_decode",
        exception="NotImplementedError",
        message="Speculative decoding with draft model is not supported yet. Please consider using other "
        "speculative decoding methods such as ngram, medusa, eagle, or deepseek_mtp.",
    ),
    case(
        "draft_model_spec_decode_unsupported",
        "unsupported",
        "NotImplementedError: Speculative decoding with draft model is not supported yet. Please cons",  # cut
        variant="draft_model_spec_decode",
        exception="NotImplementedError",
        message="Speculative decoding with draft model is not supported yet. Please cons",
    ),
    case(
        "pipeline_parallel_unsupported_model",
        "unsupported",
        "NotImplementedError: Pipeline parallelism is not supported for this model. Supported models implement the "
        "`SupportsPP` interface.",
        variant="pipeline_parallel_model",
        exception="NotImplementedError",
        message="Pipeline parallelism is not supported for this model. Supported models implement the `SupportsPP` "
        "interface.",
    ),
    case(
        "prefix_caching_sliding_window_unsupported",
        "unsupported",
        "NotImplementedError: Prefix caching is not supported with sliding window. Run with --disable-sliding-window "
        "to use prefix caching.",
        variant="prefix_caching_sliding_window",
        exception="NotImplementedError",
        message="Prefix caching is not supported with sliding window. Run with --disable-sliding-window to use "
        "prefix caching.",
    ),
    case(
        "sleep_mode_platform_unsupported",
        "unsupported",
        "ValueError: Sleep mode is not supported on current platform.",
        variant="sleep_mode_platform",
        exception="ValueError",
        message="Sleep mode is not supported on current platform.",
    ),
    case(
        "spec_tokens_without_model",
        "unsupported",
        "(APIServer pid=3)   Value error, num_speculative_tokens was provided but without speculative model. "
        "[type=value_error]",
        variant="spec_tokens_without_model",
        exception="ValueError",
        message="num_speculative_tokens was provided but without speculative model.",
    ),
]

# The launch command refused by the argument parser (catalog/arguments.py): argparse's messages
# (CPython Lib/argparse.py) after the program's name, as vLLM's parser prints them; real lines
# from bug reports where noted (fixtures/logs y01-y04).
ARGUMENTS = [
    case(
        "argparse_error",
        "cli_error",
        "vllm: error: unrecognized arguments: serve /models/GLM-4.7-Flash-AWQ-4bit",  # y01
        prog="vllm",
        message="unrecognized arguments: serve /models/GLM-4.7-Flash-AWQ-4bit",
        form="unrecognized",
        flags=[],
        arguments="serve /models/GLM-4.7-Flash-AWQ-4bit",
    ),
    case(
        "argparse_error",
        "cli_error",
        "homl-server-1  | api_server.py: error: unrecognized arguments: -u main.py",  # y03, compose prefix kept
        prog="api_server.py",
        message="unrecognized arguments: -u main.py",
        form="unrecognized",
        flags=["-u"],
        arguments="-u main.py",
    ),
    case(
        "argparse_error",
        "cli_error",
        "vllm serve: error: unrecognized arguments: --swap-space=4 --disable-log-requests",
        prog="vllm serve",
        message="unrecognized arguments: --swap-space=4 --disable-log-requests",
        form="unrecognized",
        flags=["--swap-space", "--disable-log-requests"],
        arguments="--swap-space=4 --disable-log-requests",
    ),
    # vLLM 0.33's own hint after --task (vllm/utils/argparse_utils.py FlexibleArgumentParser.error)
    case(
        "argparse_error",
        "cli_error",
        "vllm serve: error: unrecognized arguments: --task embed Hint: --task is not a vllm serve option. For "
        "embedding, reranking, or reward models, use --runner pooling.",
        prog="vllm serve",
        message="unrecognized arguments: --task embed Hint: --task is not a vllm serve option. For embedding, "
        "reranking, or reward models, use --runner pooling.",
        form="unrecognized",
        flags=["--task"],
        arguments="--task embed",
        hint="--task is not a vllm serve option. For embedding, reranking, or reward models, use --runner pooling.",
    ),
    case(
        "argparse_error",
        "cli_error",
        "vllm serve: error: argument --quantization/-q: invalid choice: 'foo' (choose from 'aqlm', 'awq', 'fp8')",
        prog="vllm serve",
        message="argument --quantization/-q: invalid choice: 'foo' (choose from 'aqlm', 'awq', 'fp8')",
        form="invalid_choice",
        argument="--quantization",
        value="foo",
        choices=["aqlm", "awq", "fp8"],
    ),
    case(
        "argparse_error",
        "cli_error",
        "vllm: error: argument subparser: invalid choice: 'server' (choose from 'chat', 'complete', 'serve', "
        "'bench', 'collect-env', 'run-batch')",
        prog="vllm",
        message="argument subparser: invalid choice: 'server' (choose from 'chat', 'complete', 'serve', 'bench', "
        "'collect-env', 'run-batch')",
        form="invalid_choice",
        argument="subparser",
        value="server",
        choices=["chat", "complete", "serve", "bench", "collect-env", "run-batch"],
    ),
    case(
        "argparse_error",
        "cli_error",
        "vllm serve: error: argument --max-model-len: invalid int value: 'lots'",
        prog="vllm serve",
        message="argument --max-model-len: invalid int value: 'lots'",
        form="invalid_value",
        argument="--max-model-len",
        value="lots",
        value_type="int",
    ),
    case(
        "argparse_error",
        "cli_error",
        "api_server.py: error: argument --gpu-memory-utilization: expected one argument",
        prog="api_server.py",
        message="argument --gpu-memory-utilization: expected one argument",
        form="missing_value",
        argument="--gpu-memory-utilization",
    ),
    case(
        "argparse_error",
        "cli_error",
        "vllm serve: error: the following arguments are required: model_tag",  # vllm issue 13150's title
        prog="vllm serve",
        message="the following arguments are required: model_tag",
        form="required",
        choices=["model_tag"],
    ),
    case(
        "argparse_error",
        "cli_error",
        "vllm serve: error: ambiguous option: --max-num could match --max-num-seqs, --max-num-batched-tokens",
        prog="vllm serve",
        message="ambiguous option: --max-num could match --max-num-seqs, --max-num-batched-tokens",
        form="ambiguous",
        argument="--max-num",
        choices=["--max-num-seqs", "--max-num-batched-tokens"],
    ),
    # glued onto the line before it (a paste that lost its newlines: breakit4 item 10)
    case(
        "argparse_error",
        "cli_error",
        "foousage: vllm serve [model_tag] [options]vllm serve: error: argument --max-num-seqs: invalid int value: 'x'",
        prog="vllm serve",
        message="argument --max-num-seqs: invalid int value: 'x'",
        form="invalid_value",
        argument="--max-num-seqs",
        value="x",
        value_type="int",
    ),
]

# catalog/environment.py: one case a form (tests/test_environment.py holds the look-alikes)
ENVIRONMENT = [
    case("env_unset", "env", "unset NCCL_P2P_DISABLE HOME", unset=["NCCL_P2P_DISABLE"], env={}, prose=True),
    case(
        "env_listing", "env", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, prose=True
    ),
    case(
        "env_command_prefix",
        "env",
        "NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=0,1 vllm serve m -tp 2",
        env={"NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1"},
        prose=True,
    ),
    case("env_keyword", "env", "export NCCL_P2P_DISABLE=1", env={"NCCL_P2P_DISABLE": "1"}, prose=True),
    case("env_yaml", "env", '  NCCL_DEBUG: "INFO"', env={"NCCL_DEBUG": "INFO"}, prose=True),
    case("env_python", "env", 'os.environ["VLLM_USE_V1"] = "0"', env={"VLLM_USE_V1": "0"}, prose=True),
    case(
        "env_nccl_set",
        "env",
        "host1:639:639 [5] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 0.",
        env={"NCCL_CUMEM_ENABLE": "0"},
        prose=True,
    ),
    case(
        "env_nccl_info",
        "env",
        "host1:639:639 [0] NCCL INFO Bootstrap : Using eth0:192.0.2.1<0>",
        env={"NCCL_DEBUG": "INFO"},
        prose=True,
        implied=True,
    ),
]

ALL_CASES = (
    CONFIG
    + STARTUP
    + CHECKS
    + KV_CACHE
    + OOM
    + HOST
    + PLATFORM
    + SCHEDULER
    + REQUESTS
    + ERRORS
    + TIMING
    + STALLS
    + VALIDATION
    + ARGUMENTS
    + ENVIRONMENT
)


@pytest.mark.parametrize("line,pattern,kind,data", ALL_CASES)
def test_pattern(line, pattern, kind, data):
    ev = only(line, pattern)
    assert ev.kind == kind
    assert_data(ev.data, data)
    assert ev.record.text and ev.record.lineno == 1


def test_every_pattern_of_every_family_has_a_case():
    covered = {p.values[1] for p in ALL_CASES}
    assert {p.name for p in PATTERNS} - covered == set()
    assert covered - {p.name for p in PATTERNS} == set()


def test_every_event_kind_is_documented_and_every_documented_kind_has_a_pattern():
    from vllm_doctor.events import KINDS

    produced = {p.kind for p in PATTERNS}
    assert produced <= set(KINDS), produced - set(KINDS)
    # "marker" is the tracker's slot for one-off lines; patterns for it arrive with their rules.
    assert set(KINDS) - produced <= {"marker", "host_oom"}


@pytest.mark.parametrize("line,pattern,kind,data", ALL_CASES)
def test_each_case_line_holds_one_of_its_patterns_anchors(line, pattern, kind, data):
    # An anchor the message never contains would keep the pattern from ever being tried.
    p = next(p for p in PATTERNS if p.name == pattern)
    assert any(a in line for a in p.anchors), (pattern, p.anchors)
    assert set(p.anchors) <= set(ANCHORS)


@pytest.mark.parametrize(
    "line,phase",
    [
        ("INFO 08-17 02:59:30 [api_server.py:1805] vLLM API server version 0.11.0", Phase.CONFIG),
        (fixture_line("s030", 3), Phase.LOADING_WEIGHTS),
        ("INFO 08-20 14:03:52 [default_loader.py:280] Loading weights took 0.15 seconds", Phase.WEIGHTS_LOADED),
        (fixture_line("r022", 6), Phase.KV_SIZING),
        (fixture_line("r022", 10), Phase.GRAPH_CAPTURE),
        (fixture_line("r022", 11), Phase.WARMUP),
        (fixture_line("r022", 12), Phase.READY),
        (fixture_line("r019", 3), Phase.READY),
    ],
)
def test_phase_markers(line, phase):
    phases = {e.phase for e in recognise(line)}
    assert phases == {phase}


# --- the catalog keeps apart what looks alike ------------------------------------------------


def kinds(line):
    return sorted(e.kind for e in recognise(line))


def test_startup_memory_summary_is_not_the_free_memory_failure():
    line = (
        "INFO 08-23 09:40:11 [gpu_worker.py:789] Free memory on device (112.26/119.63 GiB) on startup. Desired GPU "
        "memory utilization is (0.92, 110.06 GiB)."
    )
    assert kinds(line) == ["facts", "facts"]
    assert kinds(fixture_line("t008", 1)) == ["facts"] and kinds(fixture_line("t008", 2)) == ["facts"]


def test_sampler_warmup_message_is_not_a_torch_oom():
    assert kinds(fixture_line("x010", 1)) == ["exception", "sampler_oom"]


def test_cuda_oom_error_is_not_reported_as_another_cuda_error():
    assert kinds("RuntimeError: CUDA error: out of memory") == ["exception", "oom"]


def test_v0_and_v1_stats_do_not_cross():
    assert [e.pattern for e in recognise(fixture_line("r023", 1))] == ["v0_stats"]
    assert [e.pattern for e in recognise(fixture_line("r002", 1))] == ["v1_stats"]


def test_request_logging_line_quoting_an_oom_is_not_an_oom():
    line = (
        "(APIServer pid=1) INFO 08-01 00:00:00 [logger.py:43] Received request cmpl-1: prompt: 'Why did my job "
        "fail with torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total "
        "capacity of 23.56 GiB of which 512.00 MiB is free.', params: SamplingParams(n=1)"
    )
    assert kinds(line) == []


def test_success_access_lines_and_request_logging_are_not_recognised():
    # They are most of a busy log and add nothing a stats line does not: the pre-filter skips them.
    assert kinds(fixture_line("r019", 4)) == [] and kinds(fixture_line("r019", 6)) == []


@pytest.mark.parametrize(
    "line",
    [
        # another library missing is a build problem, not a missing driver (its exception names it)
        "WARNING 09-02 06:44:03 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('libcudart.so.12: "
        "cannot open shared object file: No such file or directory')",
        "WARNING 09-02 06:44:03 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('/usr/lib/"
        "python3/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')",
    ],
)
def test_what_is_not_a_missing_accelerator(line):
    assert [e.pattern for e in recognise(line) if e.kind == "no_device"] == []


@pytest.mark.parametrize(
    "line",
    [
        # another program's parser, however its name ends (breakit5 item 2)
        "fastapi_server.py: error: unrecognized arguments: --prot 8080",
        "ray_api_server.py: error: the following arguments are required: --config",
        "usage: train.py [-h]",
        "train.py: error: the following arguments are required: --data",
        "pip: error: unrecognized arguments: --foo",
        # a vLLM client, not the server refusing its command
        "vllm bench serve: error: unrecognized arguments: --num-prompt 100",
        "vllm chat: error: unrecognized arguments: --foo",
        # prose and code that quote the refusal (breakit5 item 3)
        "Our team hit vllm serve: error: unrecognized arguments: --swap-space 16 yesterday, but it was fixed.",
        'assert "vllm serve: error: unrecognized arguments: --foo" in proc.stderr',
        "if you see `vllm serve: error: unrecognized arguments: --swap-space 16`, drop the flag",
    ],
)
def test_what_is_not_the_server_refusing_its_command(line):
    assert [e.pattern for e in recognise(line) if e.kind == "cli_error"] == []


@pytest.mark.parametrize(
    "line,message",
    [
        # compose's status line glued on when the newline was lost (breakit5 item 9)
        (
            "vllm serve: error: unrecognized arguments: --max-modle-len 8192vllm-1 exited with code 2",
            "unrecognized arguments: --max-modle-len 8192",
        ),
        # a restart loop's next usage line and refusal joined onto the first
        (
            "vllm serve: error: unrecognized arguments: --max-modle-len 8192 usage: vllm serve [model_tag] [options]"
            "vllm serve: error: unrecognized arguments: --max-modle-len 8192",
            "unrecognized arguments: --max-modle-len 8192",
        ),
    ],
)
def test_a_refusal_ends_where_the_next_line_was_glued_on(line, message):
    (ev,) = [e for e in recognise(line) if e.kind == "cli_error"]
    assert ev.data["message"] == message


def test_a_refused_blob_is_no_flag_and_no_secret_is_shown_in_part():
    from vllm_doctor.catalog.arguments import MAX_FLAG_CHARS, clip_words

    (ev,) = recognise("vllm serve: error: unrecognized arguments: --" + "a" * 5000)
    assert len(ev.data["flags"][0]) == MAX_FLAG_CHARS + 1 and ev.data["flags"][0].endswith("\u2026")
    assert clip_words("x --download-dir https://u:SeCrEtPaSsWoRd@example.com/m", 30) == "x --download-dir\u2026"


def test_ray_oom_killer_boilerplate_is_not_a_gpu_oom():
    assert "(1) The process is killed by SIGKILL by OOM killer due to high memory usage." in fixture_line("r028", 1)
    assert kinds(fixture_line("r028", 1)) == ["engine_dead"]
    assert kinds("(1) The process is killed by SIGKILL by OOM killer due to high memory usage.") == []


def test_a_gaudi_device_memory_allocation_failure_is_no_named_fatal_error():
    # the same logger's PT_DEVMEM "Allocation failed" is an out-of-memory (catalog/oom.py hpu_devmem_oom)
    line = "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::939524096 (896)MB"
    assert "habana_fatal_error" not in {e.pattern for e in recognise(line)}


def test_an_npu_allocation_failure_is_not_an_npu_function_error():
    # CANN's 207018 is ACL_ERROR_RT_MEMORY_ALLOCATION: the OOM family's, not a named runtime error
    assert "npu_function_error" not in {
        e.pattern for e in recognise("NPU function error: aclrtMalloc failed, error code is 207018")
    }


@pytest.mark.parametrize(
    "line",
    [
        "Exit Code: 0",
        "    Exit Code:    1",
        "process exited with exit code 1370",
        # vLLM's own worker-death lines are consequence markers (catalog/errors.py), not the kill
        "ERROR 10-01 10:00:00 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 77 died, exit code: -9",
        "Out of memory: Killed process 1234 (python3) total-vm:1kB, anon-rss:1048576kB",  # the kernel's own line
        "INFO 10-01 10:00:00 [launcher.py:40] Killed requests: 0",
    ],
)
def test_what_is_not_a_sigkill(line):
    assert not {e.pattern for e in recognise(line)} & {"exit_code_137", "torch_elastic_sigkill", "shell_killed"}


@pytest.mark.parametrize(
    "text,patterns",
    [
        ("Error" * 20000, []),
        ("out of memory. " * 5000, []),
        ('File "' * 10000, []),
        ("(" * 65536, []),
        ("Tried to allocate 1 " * 3000, ["torch_oom"]),  # the bare second half of a wrapped OOM
        ("Waiting: Pending: blocks: " * 3000, []),
    ],
    ids=["Error", "oom-dots", "File", "parens", "tried", "stats-words"],
)
def test_catalog_on_hostile_text_finds_only_what_is_there_in_time(text, patterns):
    cat = Catalog()
    events = cat.recognise(unwrap("t", 1, text)[0])
    assert [e.pattern for e in events] == patterns
    assert cat.timeouts == 0  # no pattern needed its timeout: none backtracks on these


# --- defects: each test states what the code should do ---------------------------------------


def test_engine_config_served_model_name_with_a_slash():
    ev = only(_V1_ENGINE_LINE.format(served="Qwen/Qwen3-8B"), "engine_config")
    assert ev.data["served_model_name"] == "Qwen/Qwen3-8B"


def test_bfloat16_capability_number_without_the_full_stop():
    line = (
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU "
        "has compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, "
        "for example: --dtype=half."
    )
    assert only(line, "bfloat16_capability").data == {"gpu_name": "Tesla T4", "current_capability_text": "7.5"}


def test_keyboard_interrupt_is_an_exception_line():
    assert_data(
        only("KeyboardInterrupt", "exception_line").data,
        {"exception": "KeyboardInterrupt", "message": "", "consequence": True},
    )


def test_vllm_pynccl_error_message():
    line = "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
    assert only(line, "nccl_error").data["message"] == "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"


def test_a_timeout_exception_reports_the_stall_and_is_no_root_cause_itself():
    # "TimeoutError: RPC call to execute_model timed out." is the engine giving up on a hung worker.
    line = (
        "(EngineCore_DP0 pid=812) ERROR 07-01 12:00:00 [core.py:634] TimeoutError: RPC call to execute_model timed out."
    )
    by_kind = {e.kind: e for e in recognise(line)}
    assert sorted(by_kind) == ["exception", "stall"]
    assert by_kind["exception"].data["consequence"] is True
    # The same exception with another message stays a root-cause candidate.
    other = "(EngineCore_DP0 pid=812) ERROR 07-01 12:00:00 [core.py:634] TimeoutError: reading the tokenizer timed out."
    assert [e.kind for e in recognise(other)] == ["exception"]
    assert "consequence" not in recognise(other)[0].data


def test_failure_words_in_ordinary_log_prose_are_no_report():
    """rules7: the reporter's failure words need a person or a subject right before the verb;
    a program's line, a record with a prefix, or a word inside another never counts."""
    for line in (
        "Engine core initialization failed. See root cause above.",  # no subject a person uses
        "request failed with status 500",
        "Worker process crashed with exit code 1",
        "INFO 10-08 17:37:09 llm_engine.py:100] it failed to find the cache, building it",  # a record
        "RuntimeError: it crashed",  # an exception line
        "the crashed worker was restarted",  # no verb after a subject
        "it is not an error to leave max_model_len unset",  # a noun without a person
        "it successfully crashless restarted",  # "crash" inside a word
        "Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:02<00:00,  1.86it/s]",
        "it reuses the OOMKiller score",  # "OOM" inside a word
    ):
        assert "reported_failure" not in [e.pattern for e in recognise(line)], line


def test_look_alikes_of_the_stall_messages_are_not_stalls():
    for line in (
        # Ray Serve's proxy health check (proxy_state.py): not a replica, not the engine
        "Didn't receive health check response for proxy 5f1c after 10.0s, marking it unhealthy.",
        # a replica's health check that raised: an application failure, not a missed answer
        "Health check for replica vLLM#xKjQpa failed: RuntimeError('engine dead')",
        # V0's front end cannot reach the engine process (mostly dead first): no hang of its own.
        "ERROR 10-01 10:00:00 client.py:300] TimeoutError: RPCServer didn't reply within 10000 ms",
        "TimeoutError: MQLLMEngine didn't reply within 10000ms",
        # the KV cache capacity error shares the opening words
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.",
        # the ring buffer's handle line at startup
        "(EngineCore_DP0 pid=1) INFO 10-01 10:00:00 [shm_broadcast.py:289] vLLM message queue communication handle: "
        "Handle(local_reader_ranks=[0], buffer_handle=(1, 10485760, 10, 'psm_0c8120b1'))",
    ):
        assert "stall" not in kinds(line), line


# --- a message cut short by the end of its record ----------------------------------------------
#
# A hard wrap that was not joined back, a log store's line cap or a paste cut a message
# anywhere. Once its distinctive part is there (Pattern.cut_from, by default an anchor), the
# pattern fires on what is left, with the values printed before the cut: each equal to the
# whole line's (never a number cut mid-digits read as a smaller one).

#: Patterns that never fire cut short (they declare cut_from=NO_CUT), with the reason.
NOT_CUTTABLE = {
    **{
        name: "an environment variable's value is the fact: cut, it may be another value (NCCL_DEBUG=IN)"
        for name in (
            "env_listing",
            "env_command_prefix",
            "env_keyword",
            "env_yaml",
            "env_python",
            "env_nccl_set",
            "env_unset",
        )
    },
    "reported_hang": "a reporter's word is whole or absent: the regex needs the whole word, nothing to cut into",
    "reported_failure": "a reporter's word is whole or absent: the regex needs the whole word, nothing to cut into",
    "argparse_error": "argparse's message is free text to the end of the line: cut inside it, '(?P<msg>.*)' takes "
    "it as it is; cut before it, nothing was said",
    "lmcache_engine_created": "the instance's name is the fact: cut, it may be another name",
    "attention_backend_selected": "the backend's name is the message: cut, it may name another backend",
    "platform_detected": "the platform's name is the whole message: cut, it names no platform",
    "ascend_available_memory": "'Available memory: N' without its total is too common a phrase to read as the KV budget",
    "exception_line": "the exception name must be whole; once it is, '(?P<msg>.*)$' takes a cut message as it is",
    "traceback_frame": "a frame cut before its function name names nothing a tag could be read from",
    "ipython_frame": "a frame cut before its function name names nothing a tag could be read from",
    "startup_memory_summary_free": "cut before 'on startup.' it may be the free-memory failure, which opens with the "
    "same words and proves no warm-up",
    "hpu_free_device_memory": "the fork's message ends with 'reserved for KV cache', where vllm-gaudi's goes on "
    "('... KV cache dummy block X reserved for usable KV cache'): cut there, the dummy block would be the KV cache",
}
#: Values that end their message (or a free-text message): a cut inside one cannot be told from
#: a shorter value. A cut may give such a value short: a prefix of the whole one, or a number
#: the cut fell inside.
LAST_VALUE = {
    "api_server_version": (("vllm_version",), "'vLLM API server version %s' ends with it"),
    "server_version": (("model",), "'... serving model %s' ends with it"),
    "server_version_logo": (("vllm_version",), "the logo line ends with the version"),
    "server_model_logo": (("model",), "the logo's second line ends with the model"),
    "using_max_model_len": (("max_model_len",), "'Using max model len %s' ends with it"),
    "kv_v1_one_request": (
        ("estimated_max_model_len",),
        "a paste cut after '... estimated maximum model length is %d' ends with it (a cut number is smaller: safe)",
    ),
    "gpu_blocks": (
        ("gpu_blocks", "cpu_blocks"),
        "'# GPU blocks: %d' (0.6.4-0.7.3) and '..., # CPU blocks: %d' end with them",
    ),
    "num_gpu_blocks_info": (("gpu_blocks",), "'... num_gpu_blocks is: %d' ends with it"),
    "profiling_results_v0": (("gpu_memory_utilization",), "the V0 profiling results line ends with it"),
    "csrc_cuda_error_oom": (("source_line",), "'... out of memory at FILE:LINE' ends with the line number"),
    "v0_preemption": (("cumulative",), "'... total_num_cumulative_preemption=%d' ends with it"),
    "too_long_v0_scheduler": (("prompt_limit",), "'... exceeds limit of %d' ends with it"),
    "cuda_error": (("message",), "free text to the end of the line"),
    "nccl_error": (("message",), "free text to the end of the line"),
    "habana_fatal_error": (("message",), "free text to the end of the line"),
    "npu_function_error": (("message",), "free text to the end of the line"),
    "npu_available_memory_bytes": (("gpu_total_gib",), "'..., total memory: %s' ends with it (bytes)"),
    "xla_compile_scratch_limit": (("message",), "the message quotes the compiler's words as far as they go"),
    "level_zero_out_of_resources": (("message",), "the runtime's words as far as they go"),
    "rocm_hsa_error": (("message", "hsa_code"), "the status, its description and its code, as far as they go"),
    "draft_model_spec_decode_unsupported": (("message",), "the message as printed, as far as it goes"),
    "pipeline_parallel_unsupported_model": (("message",), "the message as printed, as far as it goes"),
    "prefix_caching_sliding_window_unsupported": (("message",), "the message as printed, as far as it goes"),
    "sleep_mode_platform_unsupported": (("message",), "the message as printed, as far as it goes"),
    "spec_tokens_without_model": (("message",), "the message as printed, as far as it goes"),
    "torch_oom": (("processes",), "a process list cut short keeps the clauses printed whole: its start"),
    "stack_dump_watchdog": (("reason",), "'... due to %s' ends with the reason"),
    "launch_command": (
        # whichever flag comes last: any value the cases read
        tuple(
            sorted({k for c in ALL_CASES if c.values[1] == "launch_command" for k in c.values[3]} - {"launch_command"})
        ),
        "a command ends with its last flag's value (or its model): cut inside it, a shorter value",
    ),
}
#: Keys only a cut gives: they say what the cut left unknown.
CUT_MARKS = {"processes_cut": "the OOM message ends inside its process list: other processes may follow"}
#: Where a cut starts to fire, for patterns whose event needs more than their distinctive part
#: (the shortest prefix of the line that this expression is found in), with the reason.
CUT_START = {
    "non_default_args": (
        r"'(?:model|max_model_len|gpu_memory_utilization|tensor_parallel_size)': [^,}]+[,}]",
        "the event is the config keys it reads: none is there before the first of them is whole",
    ),
    "args_namespace": (
        r"\b(?:model|max_model_len|gpu_memory_utilization|tensor_parallel_size)=[^,)]+[,)]",
        "the event is the config keys it reads: none is there before the first of them is whole",
    ),
}


def _cut_cases():
    return [pytest.param(*p.values, id=p.id) for p in ALL_CASES]


def _distinctive_end(p, text):
    """The shortest prefix of ``text`` that holds one of ``p``'s anchors and its distinctive
    part (``cut_from``), as the catalog reads it (tuples of arguments joined)."""
    import regex

    from vllm_doctor.catalog.normalise import join_arg_tuples

    extra = CUT_START.get(p.name, (p.cut_from, ""))[0]
    for k in range(1, len(text) + 1):
        t = join_arg_tuples(text[:k])
        if any(a in t for a in p.anchors) and (extra is None or regex.search(extra, t)):
            return k
    return None


#: Generic values a cut may give where the whole line is more specific, with the reason.
GENERIC = {
    ("killer", "'signal'"): "cut before the words that put a SIGKILL down to memory ('... caused by OOM error'), it "
    "is a bare SIGKILL",
    ("backend", "'XLA'"): "the XLA allocator names the device (';(0x0x0_HBM0)') after the sizes: cut before it, "
    "the device is not named",
}


def _short_of(value, whole, cut):
    """A value a cut may give short: a prefix of the whole text, or a number the cut fell inside."""
    if isinstance(whole, str):
        return isinstance(value, str) and whole.startswith(value)
    if isinstance(whole, list):
        return isinstance(value, list) and len(value) <= len(whole) and same(value, whole[: len(value)])
    printed = f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, float) and not cut.endswith(printed):  # a GiB figure read from printed bytes
        printed, whole = str(round(value * 2**30)), round(whole * 2**30)
    return cut.endswith(printed) and str(whole).startswith(printed)


@pytest.mark.parametrize("line,pattern,kind,data", _cut_cases())
def test_a_message_cut_after_its_distinctive_part_still_fires_with_the_values_before_the_cut(line, pattern, kind, data):
    from dataclasses import replace

    from vllm_doctor.catalog import NO_CUT

    p = next(p for p in PATTERNS if p.name == pattern)
    assert (p.cut_from == NO_CUT) == (pattern in NOT_CUTTABLE), pattern
    if pattern in NOT_CUTTABLE:
        return
    # The record of the line that holds the message (a collapsed line is several records).
    rec = next(r for r in unwrap("t", 1, line) if any(e.pattern == pattern for e in Catalog().recognise(r)))
    full = only(line, pattern).data
    k0 = _distinctive_end(p, rec.text)
    if k0 is None:  # the distinctive part ends the line: no cut after it
        assert p.compiled().search(rec.text).end() == len(rec.text), (pattern, rec.text)
        return
    last = LAST_VALUE.get(pattern, ((), ""))[0]
    for k in range(k0, len(rec.text)):
        cut = rec.text[:k]
        hits = [e for e in Catalog().recognise(replace(rec, text=cut)) if e.pattern == pattern]
        assert len(hits) == 1, (k, cut[-60:], [e.pattern for e in hits])
        got = hits[0].data
        assert set(got) - set(CUT_MARKS) <= set(full), (k, cut[-60:], set(got) - set(full))
        for key, value in got.items():
            if key in CUT_MARKS or same(value, full[key]) or (key, repr(value)) in GENERIC:
                continue
            assert key in last and _short_of(value, full[key], cut), (k, cut[-60:], key, value, full[key])


def test_every_cut_exception_names_a_pattern_and_its_values():
    names = {p.name: p for p in PATTERNS}
    for table in (NOT_CUTTABLE, LAST_VALUE, CUT_START):
        assert set(table) <= set(names), set(table) - set(names)
    for name, (keys, reason) in LAST_VALUE.items():
        assert reason and keys
        produced = {k for c in ALL_CASES if c.values[1] == name for k in c.values[3]}
        assert set(keys) <= produced, (name, set(keys) - produced)


# --- an exception raised with several arguments ------------------------------------------------


@pytest.mark.parametrize(
    "text,joined",
    [
        ("RuntimeError: ('a ', 'b 7.')", "RuntimeError: a b 7."),
        ("RuntimeError('a ', 'b 7.')", "RuntimeError('a b 7.')"),  # the repr: one argument again
        ("x.Err(\"it's \", 'a \\'q\\'')", "x.Err(\"it's a 'q'\")"),  # quotes and escapes as Python reads them
        ("Error: ('line\\n', 'two')", "Error: line\ntwo"),
        ("RuntimeError: ('a ', 'b 7", "RuntimeError: a b 7"),  # cut inside the last argument
        ("RuntimeError: ('a ', ", "RuntimeError: a "),  # cut after the first
        ("RuntimeError: ('a ', 'b\\", "RuntimeError: a b"),  # cut after a backslash
        ("f('a') and g(x, 'b')", "f('a') and g(x, 'b')"),  # one string, or not only strings: left alone
        ("shape=('a', 1)", "shape=('a', 1)"),
        ("no tuple here", "no tuple here"),
    ],
)
def test_a_tuple_of_string_arguments_is_joined_into_one_message(text, joined):
    from vllm_doctor.catalog.normalise import join_arg_tuples

    assert join_arg_tuples(text) == joined


def test_a_cut_tuple_of_arguments_still_gives_what_was_printed():
    line = "RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 75. ', 'Cur"
    ev = only(line, "quantization_capability")
    assert ev.data == {"min_capability": 75}
    assert ev.record.text == line  # the evidence is the line as printed


def test_the_tuple_form_passes_the_block_prefilter():
    from vllm_doctor import prefilter

    if not prefilter.available():
        pytest.skip("ahocorasick_rs not installed")
    assert prefilter.candidate_starts((fixture_line("h036", 1) + "\n").encode()) == [0]


# --- families judged whole: what the verdict says of each wording ---------------------------------

FIXTURES_LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"

# vLLM's own validation errors (catalog/validation.py), each as a release prints it, alone and as a
# paste that collapsed its newlines (hunt7 q20: many process-prefixed records on one physical line):
# never "nothing recognisable" (exit 3); a limit names its flag with the number, an unsupported
# combination the flag to drop.
_COLLAPSE = '(APIServer pid=135812)   File "/x/vllm/config/speculative.py", line 380, in __post_init__ (APIServer pid=135812)     raise NotImplementedError( (APIServer pid=135812) '  # noqa: E501
VALIDATION_VERDICTS = [
    # (wording, class, text the verdict's remedies must hold)
    ("ValueError: LoRA rank 64 is greater than max_lora_rank 16.", "config_limit_error", "--max-lora-rank 64"),
    ("ValueError: LoRA rank 48 is greater than max_lora_rank 32.", "config_limit_error", "--max-lora-rank 64"),
    (
        "(APIServer pid=9) ERROR 05-06 07:08:09 [serving_models.py:200] LoRA rank 128 is greater than max_lora_rank 64.",
        "config_limit_error",
        "--max-lora-rank 128",
    ),
    (
        "RuntimeError: Number of requested LoRAs (6) is greater than the number of GPU LoRA slots (4).",
        "config_limit_error",
        "--max-loras 6",
    ),
    ("ValueError: max_cpu_loras (2) must be >= max_loras (4)", "config_limit_error", "--max-cpu-loras 4"),
    (
        "ValueError: LoRA added vocab size 300 is greater than lora_extra_vocab_size 256.",
        "config_limit_error",
        "--lora-extra-vocab-size 512",
    ),
    (
        "ValueError: max_lora_rank (48) must be one of (8, 16, 32, 64, 128, 256).",
        "config_limit_error",
        "--max-lora-rank 64",
    ),
    (
        "NotImplementedError: Speculative decoding with draft model is not supported yet. Please consider using other "
        "speculative decoding methods such as ngram, medusa, eagle, or mtp.",
        "other",
        "Drop --speculative-config",
    ),
    (
        _COLLAPSE + "NotImplementedError: Speculative decoding with draft model is not supported yet. Please consider "
        "using other speculative decoding methods such as ngram, medusa, eagle, or mtp.",
        "other",
        "Drop --speculative-config",
    ),
    (
        "NotImplementedError: Speculative decoding with draft model is not supported yet. Please consider using other "
        "speculative decoding methods such as ngram, medusa, eagle, or deepseek_mtp.",
        "other",
        "ngram, eagle",
    ),
    (
        "NotImplementedError: Pipeline parallelism is not supported for this model. Supported models implement the "
        "`SupportsPP` interface.",
        "other",
        "Drop --pipeline-parallel-size",
    ),
    (
        "NotImplementedError: Prefix caching is not supported with sliding window. Run with --disable-sliding-window "
        "to use prefix caching.",
        "other",
        "Drop --enable-prefix-caching",
    ),
    ("ValueError: Sleep mode is not supported on current platform.", "other", "Drop --enable-sleep-mode"),
]


@pytest.mark.parametrize("text,cls,remedy_text", VALIDATION_VERDICTS, ids=[v[0][:60] for v in VALIDATION_VERDICTS])
def test_a_vllm_validation_error_is_named_never_nothing_recognisable(text, cls, remedy_text):
    from vllm_doctor import diagnose

    v = diagnose([text])
    assert v.exit_code == 1 and v.primary_class == cls, (v.primary_class, v.title)
    said = " | ".join(f"{r.flag or ''} {r.action}" for r in v.primary.remedies)
    assert remedy_text in said, said
    assert not any("memory_utilization" in (r.flag or "") for r in v.primary.remedies)


# Accelerator runtimes' allocation failures (hunt7 q08, q28; XPU, XLA, HIP): a memory failure, its
# device named, the class by the phase; never "this failure is not about capacity".
ALLOCATION_FAILURES = [
    # (lines, class, the device word the title holds)
    (
        [
            "[Stage-0] ERROR 01-16 10:20:16 [gpu_worker.py:226] [PID: 5393] 2026-01-16-10:20:15.729.456 "
            "Memory_Allocation_Failure(EL0004): Failed to allocate memory.",
            "[Stage-0] ERROR 01-16 10:20:16 [gpu_worker.py:226]         Call rtMalloc fail, purpose: page caching, "
            "type = 2, size:402718720, device_id:0[FUNC:Alloc][FILE:device_allocator.cc][LINE:72]",
        ],
        "runtime_oom",
        "NPU",
    ),
    (
        [
            "INFO 02-11 14:20:00 engine.py:100] Loading model weights",
            '  File "/opt/conda/lib/python3.10/site-packages/transformers_neuronx/ops.py", line 49, in parallel_to_nc',
            'ERROR 02-11 14:20:32 engine.py:389] RuntimeError: nrt_tensor_allocate status=4 message="Allocation Failure"',
        ],
        None,  # the phase decides: below
        "NeuronCore",
    ),
    (
        [
            "(EngineCore_DP0 pid=2001) ERROR 11-05 09:12:33 [core.py:708] RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"
        ],
        None,
        "XPU",
    ),
    (
        [
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
            "allocate 1.00G. That was not possible. There are 474.83M free.; (0x0x0_HBM0)"
        ],
        None,
        "TPU",
    ),
    (
        [
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total capacity of "
            "31.98 GiB of which 120.00 MiB is free. Of the allocated memory 31.20 GiB is allocated by PyTorch, and "
            "100.00 MiB is reserved by PyTorch but unallocated."
        ],
        None,
        "GPU",
    ),
]
MEMORY_CLASSES = {
    "weight_load_oom",
    "kv_cache_capacity",
    "runtime_oom",
    "startup_memory_contention",
    "cuda_graph_capture_oom",
    "sampler_warmup_oom",
}


@pytest.mark.parametrize(
    "lines,cls,device", ALLOCATION_FAILURES, ids=[a[2] + ":" + a[0][-1][-40:] for a in ALLOCATION_FAILURES]
)
def test_an_accelerator_allocation_failure_is_a_memory_failure_with_its_device(lines, cls, device):
    from vllm_doctor import diagnose

    v = diagnose(lines)
    assert v.primary_class in MEMORY_CLASSES, (v.primary_class, v.title)
    if cls:
        assert v.primary_class == cls
    assert device in v.title, v.title
    for f in v.findings:
        assert not any("not about capacity" in d for d in f.does_not_help), (f.code, f.does_not_help)


def test_an_xpu_out_of_resources_is_named_and_never_said_to_be_no_capacity():
    """n29's shape: Level Zero out of a resource it does not name (most often memory): other, the
    XPU named, the device's memory the first suspect, never "not about capacity"."""
    from vllm_doctor import diagnose

    v = diagnose(
        [
            "(EngineCore_DP0 pid=568) ERROR 04-16 12:49:28 [core.py:936] RuntimeError: level_zero backend failed "
            "with error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)"
        ]
    )
    assert v.primary_class == "other" and "XPU runtime error" in v.title, v.title
    assert "XPU runtime ran out of a device resource" in v.primary.remedies[0].action
    assert not any("not about capacity" in d for d in v.primary.does_not_help)
    assert not any("CUDA_LAUNCH_BLOCKING" in r.action for r in v.primary.remedies)


def test_a_neuron_allocation_failure_while_the_weights_load_is_a_weight_load_oom():
    """q28's shape: the sharded weights placed on the NeuronCores (parallel_to_nc, under the model's
    load) when the runtime refused the tensor."""
    from vllm_doctor import diagnose

    v = diagnose(
        FIXTURES_LOGS / "q28-neuron-v0-transformers-neuronx-parallel-to-nc-nrt-tensor-allocate-allocation-failure.log"
    )
    assert v.primary_class == "weight_load_oom", v.title
    assert not any("not about capacity" in d for f in v.findings for d in f.does_not_help)


# The platform from paths and wordings (catalog/platform.py platform_in), and the word it gives.
PLATFORM_EVIDENCE = [
    ('File "/vllm-gaudi/vllm_gaudi/v1/worker/hpu_worker.py", line 249, in compile_or_warm_up_model', "hpu"),
    ('File "/usr/local/lib/python3.10/dist-packages/habana_frameworks/torch/core/step_closure.py"', "hpu"),
    ('File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/model_runner_v1.py", line 1, in execute_model', "npu"),
    ("RuntimeError: NPU function error: call aclnnMatmul failed, error code is 561103", "npu"),
    ("HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016", "rocm"),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB.", "rocm"),
    (
        'File "/opt/conda/lib/python3.10/site-packages/transformers_neuronx/ops.py", line 49, in parallel_to_nc',
        "neuron",
    ),
    ('RuntimeError: nrt_tensor_allocate status=4 message="Allocation Failure"', "neuron"),
    ('File "/workspace/tpu_inference/tpu_inference/runner/tpu_runner.py", line 10, in _execute_model', "tpu"),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED", "tpu"),
    ("RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", "xpu"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", None),  # ROCm prints it too: no proof
    ('File "/usr/lib/python3/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3, in capture_model', None),
]


@pytest.mark.parametrize("text,platform", PLATFORM_EVIDENCE, ids=[t[0][:50] for t in PLATFORM_EVIDENCE])
def test_the_platform_is_read_from_paths_and_wordings(text, platform):
    from vllm_doctor.catalog.platform import DEVICE_WORDS, platform_in

    assert platform_in(text) == platform
    assert platform is None or platform in DEVICE_WORDS


#: Each platform's word for its graphs in a title, and the CUDA words it must never get.
PLATFORM_TITLES = [
    ("q18-gaudi-v1-worker-tp6-literal-ansi-caret-m-warmup-graphs-frames-cut.log", "HPU graphs", "CUDA"),
    ("q27-rocm-mi355x-aiter-mla-337k-prefill-hsa-exception-kv-16pct-worker-died.log", "ROCm", "CUDA_LAUNCH_BLOCKING"),
]


@pytest.mark.parametrize("name,word,never", PLATFORM_TITLES)
def test_the_device_word_follows_the_platform(name, word, never):
    from vllm_doctor import diagnose

    v = diagnose(FIXTURES_LOGS / name)
    said = v.title + " | " + " | ".join(f"{r.flag or ''} {r.action} {r.why or ''}" for r in v.primary.remedies)
    assert word in said and never not in said, said


def test_a_rocm_kernel_fault_puts_the_attention_backend_first_and_rocm_versions_in_the_look_up():
    from vllm_doctor import diagnose

    v = diagnose(
        [
            "INFO 01-02 03:04:05 [rocm.py:229] Using AITER MLA backend.",
            "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016",
            "Worker proc VllmWorker-6 died unexpectedly",
        ]
    )
    assert v.primary_class == "other" and "ROCm GPU kernel fault" in v.title, v.title
    first = v.primary.remedies[0].action
    assert "AITER MLA" in first and "VLLM_ROCM_USE_AITER=0" in first, first
    assert any("ROCm versions" in r.action for r in v.primary.remedies)
    assert not any("CUDA_LAUNCH_BLOCKING" in r.action for r in v.primary.remedies)


@pytest.mark.parametrize(
    "line,command",
    [
        # m09's typo, flags after it: the operator's command
        ("**实例1：vllm server model_path --port 8000 --gpu-memory-utilization 0.4", True),
        ("vllm server /models/Qwen2.5-7B --gpu-memory-utilization 0.4", True),
        ("vllm serve /models/Qwen2.5-7B", True),
        # prose about a server (hunt7 q05: the failing instance's log quoted after the error)
        ("Note that the 14B vllm server outputs the following log", False),
        ("The vllm server crashed again after the upgrade, see below", False),
        ("the vllm server is started by systemd -- no flags here", False),
    ],
)
def test_vllm_server_is_a_command_only_before_a_flag(line, command):
    assert ("launch_command" in [e.pattern for e in recognise(line)]) is command
