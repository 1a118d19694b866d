"""Which step a failure happened in when no startup line says it: from the memory vLLM held,
the frames of a request's own path, an offline batch's progress bar glued into the message, and
never from a wrapper or a pasted command alone (hunt8 u07, u06; hunt7 q07, q12).

* torch's OOM message names memory "allocated in private pools (e.g., CUDA Graphs)" only when
  there is some: vLLM's CUDA graphs were captured, after the KV cache, at the end of startup; with
  no startup line or marker, the OOM is serving. What vLLM's process held is no evidence: without
  a co-tenant an OOM always finds it holding about total - free.
* ``vllm/entrypoints/llm.py`` ``_run_engine``'s tqdm bar (``est. speed input: N toks/s, output:
  N toks/s``) glued into an error's message shows generation running; the tail is cut off the
  message.
* A request's own path (the multimodal encoder, prompt logprobs) with no startup step in the
  log is serving; under ``profile_run`` or after startup lines it is startup.
* ``LLM.generate`` & co. and the API server's request handlers are serving.
* vLLM's "Worker failed with error '...'" wrapper (``v1/executor/multiproc_executor.py``, 0.10.2
  :244, 0.11.2 :342, 0.13.0 :343) runs at init and at runtime alike: alone it sets no phase.
"""

from __future__ import annotations

import pytest
from test_tracker import track

from vllm_doctor import diagnose
from vllm_doctor.catalog import Catalog
from vllm_doctor.envelopes import unwrap
from vllm_doctor.events import Phase
from vllm_doctor.rules.tree import failure_phase
from vllm_doctor.tracker import strip_progress_tail

# -- 1. CUDA graphs' private pools in the OOM message --------------------------------------------
MODEL = "/data/models/Qwen/Qwen2.5-VL-32B-Instruct"


def pools_oom(pools, form="listed"):
    """hunt8 u07's OOM on a 23.64 GiB 4090; torch prints the private-pools clause only when
    it is not zero (c10/cuda/CUDACachingAllocator.cpp)."""
    who = (
        "Process 16557 has 23.30 GiB memory in use."
        if form == "listed"
        else "Including non-PyTorch memory, this process has 23.30 GiB memory in use."
    )
    clause = f", with {pools} allocated in private pools (e.g., CUDA Graphs)," if pools else ","
    return (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 450.00 MiB. GPU 0 has a total capacity of "
        f"23.64 GiB of which 337.69 MiB is free. {who} Of the allocated memory 20.08 GiB is allocated by "
        f"PyTorch{clause} and 600.17 MiB is reserved by PyTorch but unallocated."
    )


BEFORE = {
    "nohup-command-in-prose": "启动命令：nohup vllm serve {m} --tensor-parallel-size 4 --gpu-memory-utilization 0.95 &",
    "python-m": "python -m vllm.entrypoints.openai.api_server --model {m} -tp 4 --gpu-memory-utilization 0.95",
    "offline-call": "llm = LLM(model='{m}', tensor_parallel_size=4, gpu_memory_utilization=0.95)",
    "v1-non-default-args": "(APIServer pid=11) INFO 05-10 16:00:00 [utils.py:326] non-default args: "
    "{{'model': '{m}', 'tensor_parallel_size': 4, 'gpu_memory_utilization': 0.95}}",
    "nothing": "",
}
# (the private-pools clause, the phase)
POOLS = [("57.88 MiB", "runtime"), ("1.20 GiB", "runtime"), (None, "startup")]


@pytest.mark.parametrize("form", ["listed", "this-process"])
@pytest.mark.parametrize("before", BEFORE.values(), ids=BEFORE.keys())
@pytest.mark.parametrize(("pools", "phase"), POOLS, ids=[str(p) for p, _ in POOLS])
def test_captured_graphs_place_a_bare_oom_after_startup(before, form, pools, phase):
    lines = [before.format(m=MODEL), "", "after 10 images in a row:", pools_oom(pools, form)]
    v = diagnose(lines, name="u07.log")
    if phase == "startup" and not before:
        phase = "runtime"  # no command, no pools: nothing says startup (the default)
    assert v.primary.phase == phase, v.title
    if phase == "runtime":
        assert v.primary_class == "runtime_oom"


def test_what_vllm_held_is_no_evidence_of_the_step():
    # Without a co-tenant the failing process holds about total - free at any OOM: 23.30 of
    # 23.64 GiB past 0.95 x 23.64 = 22.46 says nothing when no graph pool is printed
    lines = [BEFORE["python-m"].format(m=MODEL), pools_oom(None)]
    assert diagnose(lines, name="u07.log").primary.phase == "startup"


def test_a_startup_failure_marker_keeps_a_graph_holding_oom_in_startup():
    lines = [
        BEFORE["v1-non-default-args"].format(m=MODEL),
        f"(EngineCore_DP0 pid=20) ERROR 05-10 16:01:00 [core.py:700] {pools_oom('57.88 MiB')}",
        "(EngineCore_DP0 pid=20) ERROR 05-10 16:01:00 [core.py:843] EngineCore failed to start.",
    ]
    assert diagnose(lines, name="cap.log").primary.phase == "startup"


# -- 2. an offline batch's progress bar glued into the message -----------------------------------
TAILS = {
    "rate-cut": "/s, output: 240.71 toks/s]",  # hunt7 q12
    "whole-postfix": ", 9.51it/s, est. speed input: 1234.56 toks/s, output: 240.71 toks/s]",
    "from-input": "input: 1234.56 toks/s, output: 240.71 toks/s]",
    "seconds-per-item": " 1.20s/it, est. speed input: 12.00 toks/s, output: 3.40 toks/s]",
}
MESSAGES = {
    "nccl-watchdog": "rank0]:[E811 01:10:50.482336908 ProcessGroupNCCL.cpp:1515] [PG 3 Rank 0] Process group "
    "watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered{}",
    "runtime-error": "RuntimeError: CUDA error: an illegal memory access was encountered{}",
}


@pytest.mark.parametrize("tail", TAILS.values(), ids=TAILS.keys())
@pytest.mark.parametrize("message", MESSAGES.values(), ids=MESSAGES.keys())
def test_a_glued_progress_tail_shows_generation_and_leaves_the_message(message, tail):
    lines = [
        "self.llm = LLM(model=model_path, enforce_eager=True, tensor_parallel_size=2)",
        "",
        message.format(tail),
    ]
    v = diagnose(lines, name="q12.log")
    assert v.primary.phase == "runtime", v.title
    assert v.title.endswith("encountered"), v.title
    assert "model" not in v.runs[0].config  # a Python variable, not a model


@pytest.mark.parametrize(
    ("message", "cut"),
    [
        ("CUDA error: an illegal memory access was encountered/s, output: 240.71 toks/s]", "was encountered"),
        ("bad thing in process/s, output: 1.00 toks/s]", "bad thing in process"),
        ("NCCL timeout 9.5it/s, est. speed input: 1.00 toks/s, output: 2.00 toks/s]", "NCCL timeout"),
    ],
)
def test_the_tail_is_cut_at_its_start_and_no_further(message, cut):
    got = strip_progress_tail({"message": message})
    assert got["message"].endswith(cut) and got["generation_progress"] is True


@pytest.mark.parametrize(
    "message",
    ["output: 240.71 toks/s]", "throughput 240.71 toks/s", "CUDA error: an illegal memory access was encountered"],
)
def test_no_glued_tail_leaves_the_message_alone(message):
    data = {"message": message}
    assert strip_progress_tail(data) is data


@pytest.mark.parametrize(
    ("call", "model"),
    [
        ("LLM(model=model_path, enforce_eager=True)", None),
        ("LLM(model=args.model, gpu_memory_utilization=0.8)", None),
        ("LLM(model=MODEL, max_model_len=4096)", None),
        ("LLM(model='Qwen/Qwen2-7B-Instruct', max_model_len=4096)", "Qwen/Qwen2-7B-Instruct"),
        ('LLM(model="/models/llama", gpu_memory_utilization=0.8)', "/models/llama"),
    ],
)
def test_a_python_name_is_not_a_model(call, model):
    (rec,) = unwrap("x.py", 1, call)
    (ev,) = [e for e in Catalog().recognise(rec) if e.pattern == "offline_llm_call"]
    assert ev.data.get("model") == model


# -- 3. a request's own path and the offline entry's methods -------------------------------------
SITE = "/usr/local/lib/python3.12/dist-packages/vllm"
REQUEST_PATHS = {
    "v1-mm-encoder": [
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 1400, in _execute_mm_encoder',
        "    curr_group_outputs = model.embed_multimodal(**mm_kwargs_group)",
    ],
    "tpu-inference-jit": ["    return maybe_jit_embed_multimodal_func("],  # hunt7 q07, frames cut
    "prompt-logprobs": [
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 4308, in _get_prompt_logprobs_dict',
        "    logprobs = self.sampler.compute_logprobs(logits)",
    ],
    "offline-generate": [
        '  File "/home/user/eval.py", line 40, in <module>',
        "    outputs = llm.generate(prompts, sampling_params)",
        f'  File "{SITE}/entrypoints/llm.py", line 465, in generate',
        "    outputs = self._run_engine(use_tqdm=use_tqdm)",
    ],
    "api-handler": [
        f'  File "{SITE}/entrypoints/openai/serving_chat.py", line 321, in create_chat_completion',
        "    async for res in result_generator:",
    ],
}
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.71 GiB. GPU 0 has a total capacity of "
    "79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB memory in use."
)
XLA = [
    "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:",
    "Ran out of memory in memory space vmem while allocating on stack for %flash_attention.27 = bf16[1,2,37888,72]",
]
COMMAND = "vllm serve Qwen/Qwen3.5-35B-A3B --tensor-parallel-size=8 --max-model-len=8192"


@pytest.mark.parametrize("frames", REQUEST_PATHS.values(), ids=REQUEST_PATHS.keys())
@pytest.mark.parametrize("error", [[OOM], XLA], ids=["torch-oom", "xla-vmem-two-lines"])
def test_a_requests_path_with_no_startup_step_is_serving(frames, error):
    lines = [COMMAND, "", "Traceback (most recent call last):", *frames, *error]
    v = diagnose(lines, name="q07.log")
    assert all(f.phase == "runtime" for f in v.findings if f.severity == "critical"), [
        (f.code, f.phase, f.title) for f in v.findings
    ]


def test_the_encoder_under_profile_run_is_startup():
    frames = [
        f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 2900, in profile_run',
        "    dummy_encoder_outputs = self.model.embed_multimodal(**batched_dummy_mm_inputs)",
        *REQUEST_PATHS["v1-mm-encoder"],
    ]
    v = diagnose([COMMAND, "Traceback (most recent call last):", *frames, OOM], name="mm.log")
    assert v.primary.phase == "startup"


def test_the_encoder_after_startup_lines_is_that_startup_step():
    lines = [
        "(EngineCore_DP0 pid=20) INFO 05-10 16:00:10 [gpu_model_runner.py:2653] Model loading took 66.20 GiB and "
        "30.0 seconds",
        "(EngineCore_DP0 pid=20) ERROR 05-10 16:00:20 [core.py:700] Traceback (most recent call last):",
        *[f"(EngineCore_DP0 pid=20) ERROR 05-10 16:00:20 [core.py:700] {x}" for x in REQUEST_PATHS["v1-mm-encoder"]],
        f"(EngineCore_DP0 pid=20) ERROR 05-10 16:00:20 [core.py:700] {OOM}",
    ]
    assert diagnose(lines, name="mm.log").primary.phase == "startup"


# -- 4. a wrapper alone sets no phase ---------------------------------------------------------------
WRAPPED = (
    "Worker failed with error 'CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.33 GiB of which 50.72 GiB is free. Process 2555617 has 28.60 GiB memory in use.', please check the stack "
    "trace above for the root cause"
)


@pytest.mark.parametrize(
    "line",
    [WRAPPED, f"RuntimeError: {WRAPPED}", f"(EngineCore_DP0 pid=1) ERROR 05-10 17:00:00 [core.py:700] {WRAPPED}"],
    ids=["bare", "runtime-error", "engine-core"],
)
def test_the_worker_failed_wrapper_alone_sets_no_phase(line):
    t = track([line])
    (run,) = t.runs
    (f,) = [f for f in run.failures if f.kinds & {"oom"}]
    assert failure_phase(f, run) is None


def test_the_wrapper_after_startup_lines_takes_their_step():
    lines = [
        "(EngineCore_DP0 pid=1) INFO 05-10 16:59:00 [gpu_model_runner.py:2653] Model loading took 66.20 GiB and "
        "30.0 seconds",
        f"(EngineCore_DP0 pid=1) ERROR 05-10 17:00:00 [core.py:700] {WRAPPED}",
    ]
    t = track(lines)
    run = t.runs[0]
    (f,) = [f for f in run.failures if f.kinds & {"oom"}]
    assert failure_phase(f, run) == Phase.WEIGHTS_LOADED
