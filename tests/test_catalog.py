"""Unit tests for the message catalog: one case per wording of every pattern.

Wordings come from ``shared/vllm-messages.md`` (sections 1-13) and from the real logs in
``fixtures/logs`` (cases named after the fixture they were taken from). Memory is in GiB
(floats), token counts and other counts are ints.
"""

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
    return Catalog().recognise(unwrap("t", 1, line)[0])


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

CONFIG = [
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
        "max_seq_len=8192, tensor_parallel_size=4",
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
        "tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, enforce_eager=True, kv_cache_dtype=auto",
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
    case("loading_weights_from", "phase", fixture_line("r038", 1)),
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
        budget_gib=23.35,
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
        "available_kv_memory",
        "facts",
        "(Worker_TP1_EP1 pid=2295) INFO 09-24 19:58:12 [gpu_worker.py:298] Available KV cache memory: 25.91 GiB",
        kv_available_gib=25.91,
    ),
    case("available_kv_memory", "facts", fixture_line("s031", 4), kv_available_gib=-2.77),
    case(
        "startup_memory_summary",
        "facts",
        "(EngineCore pid=492078) INFO 08-23 09:40:11 [gpu_worker.py:789] Free memory on device (112.26/119.63 GiB) "
        "on startup. Desired GPU memory utilization is (0.92, 110.06 GiB). Actual usage is 55.99 GiB for consumed "
        "memory (weights + non-torch), 3.78 GiB for peak activation, and 0.94 GiB for CUDAGraph memory.",
        gpu_startup_free_gib=112.26,
        gpu_total_gib=119.63,
        gpu_memory_utilization=0.92,
        requested_gib=110.06,
    ),
    case(
        "startup_memory_summary",
        "facts",
        "INFO 08-23 09:40:11 [gpu_worker.py:789] Free memory on device cuda:0 (22.45/23.99 GiB) on startup. Desired "
        "GPU memory utilization is (0.9, 21.59 GiB). Actual usage is 1.5 GiB for weight",
        gpu_startup_free_gib=22.45,
        gpu_total_gib=23.99,
        gpu_memory_utilization=0.9,
        requested_gib=21.59,
    ),
    case(
        "kv_cache_memory_bytes",
        "facts",
        "INFO 08-23 09:40:11 [gpu_worker.py:270] Initial free memory 78.50 GiB, reserved 10.00 GiB memory for KV "
        "Cache as specified by kv_cache_memory_bytes config and skipped memory profiling.",
        kv_available_gib=10.0,
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
]

KV_CACHE = [
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
        gpu_index=0,
        tried_to_allocate_gib=7516192768 / 2**30,
        gpu_free_gib=1547173888 / 2**30,
        gpu_total_gib=191495471104 / 2**30,
        warning_only=True,
    ),
    case("cuda_error_oom", "oom", fixture_line("x002", 13), form="cuda-error"),  # RuntimeError: CUDA error: ...
    case("cuda_error_oom", "oom", "torch.AcceleratorError: CUDA error: out of memory", form="cuda-error"),
    case("cuda_error_oom", "oom", fixture_line("s035", 7), form="cuda-error"),  # CUDA driver error
    case(
        "nccl_cuda_oom", "oom", "host1:1234:5678 [2] enqueue.cc:43 NCCL WARN Cuda failure 'out of memory'", form="nccl"
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

SCHEDULER = [
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
        max_model_len=8192,
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

ALL_CASES = CONFIG + STARTUP + CHECKS + KV_CACHE + OOM + SCHEDULER + REQUESTS + ERRORS


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
    assert kinds(line) == ["facts"]


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


def test_ray_oom_killer_boilerplate_is_not_a_gpu_oom():
    assert "(1) The process is killed by SIGKILL by OOM killer due to high memory usage." in fixture_line("r028", 1)
    assert kinds(fixture_line("r028", 1)) == ["engine_dead"]
    assert kinds("(1) The process is killed by SIGKILL by OOM killer due to high memory usage.") == []


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
