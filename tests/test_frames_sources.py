"""Where a failure happened and what it said, when the paste shows less than a whole record
(hunt9 kinds 1 and 5, hunt10 kinds 5 and 6), over whole families of inputs:

* a traceback's source lines (``raise RuntimeError(f"NCCL error: {error_str}")``, Python 3.13's
  multi-line statements) are templates, never the message or the title;
* an OOM message cut past the point where only out-of-memory fits, under a startup step's frame,
  is that step's OOM (v03), under every prefix, Python 3.10 and 3.13 frames;
* the API server's entry (``run_server``) and the executors' dispatch (``_run_worker_process``,
  ``worker_busy_loop``) name no step: with nothing served the failure is no runtime claim;
* a traceback cut in the API server's prompt tokenizing is a request rejected for its length.

Frames and source lines are vLLM's own: ``v1/worker/gpu_model_runner.py _dummy_sampler_run``
(0.8.4:1488, 0.10.2:2878, 0.13.0:4307, 0.33.0:5929), ``distributed/device_communicators/
pynccl_wrapper.py NCCL_CHECK`` (0.7.3:256, 0.10.2:272, 0.33.0:464), ``entrypoints/openai/
serving_engine.py`` (``_tokenize_prompt_input`` 0.5.5-0.9.2, ``_tokenize_prompt_input_async``
0.10-0.15, ``_normalize_prompt_text_to_input`` 0.5.5-0.15), ``entrypoints/openai/api_server.py
run_server``, ``executor/multiproc_worker_utils.py _run_worker_process`` (V0),
``v1/executor/multiproc_executor.py worker_busy_loop``.
"""

from __future__ import annotations

import pytest

from vllm_doctor import diagnose
from vllm_doctor.frames import dispatch_only, source_statement
from vllm_doctor.rules.tree import CUT_OOM_SPELLINGS, SURE_CUT_OOM

SITE = "/usr/local/lib/python3.12/dist-packages/vllm"
PREFIXES = {
    "none": "{}",
    "v1_worker": "(Worker pid=226322) ERROR 10-25 13:12:42 [multiproc_executor.py:671] {}",
    "v1_enginecore": "(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708] {}",
    "v0_worker": "(VllmWorkerProcess pid=2421) ERROR 10-14 12:32:47 multiproc_worker_utils.py:233] {}",
    "ray": "(RayWorkerWrapper pid=17335) {}",
}


def _wrap(prefix, lines):
    return [PREFIXES[prefix].format(x) for x in lines]


def _titles(v):
    return [f.title for f in v.findings]


# -- source lines are templates --------------------------------------------------------------

#: (source line under a frame, the exception line that follows, what the title must quote)
RAISES = {
    "nccl_fstring": (
        '    raise RuntimeError(f"NCCL error: {error_str}")',
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "unhandled system error",
    ),
    "value_error_fstring": (
        '    raise ValueError(f"max_num_seqs ({max_num_seqs}) exceeds available Mamba cache blocks ({n})")',
        "ValueError: max_num_seqs (1024) exceeds available Mamba cache blocks (600)",
        "1024",
    ),
    "percent_template": (
        '    raise RuntimeError("NCCL error: %s" % error_str)',
        "RuntimeError: NCCL error: remote process exited or there was a network error",
        "remote process exited",
    ),
    # Python 3.13 prints every line of the statement: the f-string literal line is a template too
    "py313_literal_line": (
        '        f"NCCL error: {error_str}"',
        "RuntimeError: NCCL error: internal error - please report this issue to the NCCL developers",
        "internal error",
    ),
}


@pytest.mark.parametrize("prefix", ["none", "v1_worker", "ray"])
@pytest.mark.parametrize("name", sorted(RAISES))
def test_a_raise_statement_is_the_template_and_the_exception_line_is_the_message(name, prefix):
    source, exc, quoted = RAISES[name]
    frame = f'  File "{SITE}/distributed/device_communicators/pynccl_wrapper.py", line 272, in NCCL_CHECK'
    v = diagnose(_wrap(prefix, ["Traceback (most recent call last):", frame, source, exc]), name="t.log")
    titles = _titles(v)
    assert titles and all("{" not in t for t in titles), titles
    assert any(quoted in t for t in titles), titles


@pytest.mark.parametrize(
    "text, template",
    [
        ('    raise RuntimeError(f"NCCL error: {error_str}")', True),
        ('raise ValueError(f"bad {x!r}")', True),
        ('        f"{num_reqs} dummy requests. Please try lowering "', True),
        ('    raise ValueError("max %d tokens" % n)', True),
        # a literal message in a raise is the message itself (h033: the KV error's text)
        ('    raise ValueError("No available memory for the cache blocks. "', False),
        ("RuntimeError: NCCL error: unhandled system error", False),
        ("ERROR 05-06 18:20:49 [engine.py:448] CUDA out of memory. Tried to allocate 96.00 MiB.", False),
    ],
)
def test_source_statement_tells_a_template_from_a_message(text, template):
    assert source_statement(text) is template


def test_a_literal_raise_line_still_names_the_kv_error():
    lines = [
        f'  File "{SITE}/v1/core/kv_cache_utils.py", line 699, in check_enough_kv_cache_memory',
        '    raise ValueError("No available memory for the cache blocks. "',
    ]
    assert diagnose(_wrap("v1_enginecore", lines), name="t.log").primary_class == "kv_cache_capacity"


# -- NCCL's own failures get NCCL's remedies ---------------------------------------------------

NCCL_MESSAGES = {
    "pynccl_system": "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "pynccl_remote": "RuntimeError: NCCL error: remote process exited or there was a network error",
    "c10d_system": (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1"
    ),
    "invalid_usage": "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)",
}


@pytest.mark.parametrize("prefix", ["none", "v1_worker", "ray"])
@pytest.mark.parametrize("name", sorted(NCCL_MESSAGES))
def test_nccl_failures_outside_cuda_get_nccl_remedies_not_cuda_ones(name, prefix):
    v = diagnose(_wrap(prefix, [NCCL_MESSAGES[name]]), name="t.log")
    (f,) = [f for f in v.findings if f.class_id == "other"]
    actions = " ".join(r.action for r in f.remedies)
    assert "NCCL_DEBUG=INFO" in f.remedies[0].action
    for knob in ("NCCL_SOCKET_IFNAME", "shm", "NCCL_P2P_DISABLE"):
        assert knob in actions
    assert "CUDA_LAUNCH_BLOCKING" not in actions and not any(r.flag == "--enforce-eager" for r in f.remedies)


def test_an_nccl_cuda_failure_keeps_the_cuda_remedies():
    v = diagnose(["RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"], name="t")
    (f,) = [f for f in v.findings if f.class_id == "other"]
    assert any("CUDA_LAUNCH_BLOCKING" in r.action for r in f.remedies)


@pytest.mark.parametrize(
    "line",
    [
        # SkyRL's engine actor (hunt10 w03), Ray's "Exception raised in creation task:" prefix
        "(AsyncVLLMInferenceEngine pid=31036) Exception raised in creation task: The actor died because of an error "
        "raised in its creation task, ray::AsyncVLLMInferenceEngine.__init__() (pid=31036, ip=192.0.2.136)",
        # vLLM's own Ray worker, as ray.get re-raises it
        "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, "
        "ray::RayWorkerWrapper.__init__() (pid=2757112, ip=192.0.2.2)",
    ],
)
def test_a_ray_actor_that_died_in_its_creation_task_failed_at_startup(line):
    v = diagnose([NCCL_MESSAGES["pynccl_system"], line], name="t.log")
    (f,) = [f for f in v.findings if f.class_id == "other"]
    assert f.phase == "startup" and f.title.startswith("Startup failure")


def test_without_the_creation_task_line_the_same_error_is_not_placed_at_startup():
    v = diagnose([NCCL_MESSAGES["pynccl_system"]], name="t.log")
    (f,) = [f for f in v.findings if f.class_id == "other"]
    assert f.phase != "startup"


# -- a cut OOM message under a startup step's frame --------------------------------------------

#: The frames of each startup step (innermost last) and the class of an OOM there.
STEPS = {
    "sampler_py313": (
        [
            f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 3221, in _dummy_sampler_run',
            "    raise RuntimeError(",
            "    ...<3 lines>...",
            '        "initializing the engine.") from e',
        ],
        "sampler_warmup_oom",
    ),
    "sampler_py310": (
        [
            f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 2878, in _dummy_sampler_run',
            "    raise RuntimeError(",
        ],
        "sampler_warmup_oom",
    ),
    "capture": (
        [
            f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 2400, in capture_model',
            "    self._capture_cudagraphs(",
        ],
        "cuda_graph_capture_oom",
    ),
    "load": (
        [f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 1800, in load_model', "    self.model = get_model("],
        "weight_load_oom",
    ),
}
#: Cuts of the exception line that can only be an out-of-memory, and cuts that may be another error.
SURE_CUTS = ["RuntimeError: CUDA out of", "RuntimeError: CUDA out", "torch.OutOfMemoryError: CUDA out of m"]
UNSURE_CUTS = ["RuntimeError: CUDA o", "RuntimeError: CUDA error: o", "RuntimeError: CUDA error:"]


@pytest.mark.parametrize("prefix", ["none", "v1_worker", "v1_enginecore"])
@pytest.mark.parametrize("cut", SURE_CUTS)
@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_cut_oom_under_a_startup_frame_is_that_steps_oom(step, cut, prefix):
    frames, cls = STEPS[step]
    v = diagnose(_wrap(prefix, ["Traceback (most recent call last):", *frames, cut]), name="t.log")
    assert v.primary_class == cls
    f = next(f for f in v.findings if f.class_id == cls)
    assert f.phase == "startup" and f.confidence == "medium"


@pytest.mark.parametrize("cut", UNSURE_CUTS)
@pytest.mark.parametrize("step", sorted(STEPS))
def test_a_cut_that_may_be_another_error_stays_unknown(step, cut):
    frames, _ = STEPS[step]
    v = diagnose(["Traceback (most recent call last):", *frames, cut], name="t.log")
    assert v.primary_class == "unknown"


def test_a_sure_cut_oom_with_no_startup_frame_is_not_promoted():
    frames = [f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 1500, in execute_model', "    x = self.model("]
    v = diagnose(["Traceback (most recent call last):", *frames, "RuntimeError: CUDA out of"], name="t.log")
    assert v.primary_class == "unknown"


def test_every_sure_cut_is_at_least_the_shortest_cut():
    for whole, shortest in CUT_OOM_SPELLINGS:
        assert shortest <= SURE_CUT_OOM[whole] < len(whole)
        assert "out" in whole[: SURE_CUT_OOM[whole]]


# -- the API server's entry and the executors' dispatch name no step ---------------------------

_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.88 GiB. GPU 3 has a total capacity of 21.96 GiB "
    "of which 1.29 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in use. Of the "
    "allocated memory 19.02 GiB is allocated by PyTorch, and 1.32 GiB is reserved by PyTorch but unallocated."
)
_STATS = (
    "INFO 10-14 12:30:00 metrics.py:406] Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 50.0 "
    "tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 11.0%, CPU KV cache usage: 0.0%."
)
DISPATCH = {
    "v0_worker": [
        f'  File "{SITE}/executor/multiproc_worker_utils.py", line 226, in _run_worker_process',
        "    output = executo",
    ],
    "v1_worker": [
        f'  File "{SITE}/v1/executor/multiproc_executor.py", line 1012, in worker_busy_loop',
        "    output = func(",
    ],
}


@pytest.mark.parametrize("prefix", sorted(DISPATCH))
def test_a_worker_oom_with_only_the_dispatch_frame_and_nothing_served_makes_no_runtime_claim(prefix):
    lines = [_OOM, "", "The above exception was the direct cause of the following exception:", ""]
    lines += ["Traceback (most recent call last):", *DISPATCH[prefix]]
    v = diagnose(_wrap(prefix, lines), name="t.log")
    assert v.primary_class != "runtime_oom"
    assert all("while serving" not in t and "oversized request" not in t for t in _titles(v))
    # the verdict says why it places the OOM at startup, and that the step is a guess
    assert "the method cut" in v.findings[0].facts.get("step_placed_by_memory", "")


@pytest.mark.parametrize("prefix", sorted(DISPATCH))
def test_the_same_oom_after_a_stats_line_is_serving(prefix):
    lines = [_OOM, "", "The above exception was the direct cause of the following exception:", ""]
    lines += ["Traceback (most recent call last):", *DISPATCH[prefix]]
    v = diagnose([_STATS] + _wrap(prefix, lines), name="t.log")
    assert v.primary_class == "runtime_oom"


def test_dispatch_only_is_true_for_dispatch_frames_alone():
    assert dispatch_only(["_run_worker_process"]) and dispatch_only(["worker_busy_loop", "execute_method"])
    assert not dispatch_only([]) and not dispatch_only(["worker_busy_loop", "execute_model"])


_RUN_SERVER = [
    "Traceback (most recent call last):",
    '  File "/home/user/venv/bin/vllm", line 8, in <module>',
    "    sys.exit(main())",
    f'  File "{SITE}/entrypoints/cli/serve.py", line 27, in cmd',
    "    uvloop.run(run_server(args))",
    f'  File "{SITE}/entrypoints/openai/api_server.py", line 1078, in run_server',
    "    async with",
]


def test_an_oom_under_run_server_with_nothing_served_is_startup():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.00 GiB is free."
    v = diagnose([oom] + _RUN_SERVER, name="t.log")
    assert v.primary_class != "runtime_oom"
    assert all(f.phase == "startup" for f in v.findings if f.severity == "critical")


# -- a traceback cut in the API server's tokenizing --------------------------------------------

_PRE = "ERROR 07-03 03:19:15 [serving_chat.py:200] "
TOKENIZE = {
    # 0.9.2 (hunt9 v14): the async wrapper named in the source line, the frame cut
    "v092": [
        f'  File "{SITE}/entrypoints/openai/serving_chat.py", line 183, in create_chat_completion',
        "    ) = await self._preprocess_chat(",
        f'  File "{SITE}/entrypoints/openai/serving_engine.py", line 835, in _preprocess_chat',
        "    prompt_inputs = await self._tokenize_prompt_input_async(",
        '  File "/usr/lib/python3.10/concurrent/futures/thread.py", line 52, in run',
        f'  File "{SITE}/entrypoints/openai/serving_engine.py", line 590, in _tokenize_promp',
    ],
    # 0.6-0.8: the sync helpers' frames
    "v06": [
        f'  File "{SITE}/entrypoints/openai/serving_completion.py", line 110, in create_completion',
        f'  File "{SITE}/entrypoints/openai/serving_engine.py", line 420, in _tokenize_prompt_input',
        f'  File "{SITE}/entrypoints/openai/serving_engine.py", line 380, in _normalize_prompt_text_to_input',
    ],
    # 0.10-0.15: the async generators (hunt r014, u010)
    "v010": [
        f'  File "{SITE}/entrypoints/openai/serving_engine.py", line 704, in _tokenize_prompt_input_async',
        "    async for result in self._tokenize_prompt_inputs_async(",
    ],
}


@pytest.mark.parametrize("era", sorted(TOKENIZE))
def test_a_traceback_cut_in_prompt_tokenizing_is_a_rejected_request(era):
    lines = [_PRE + "Error in preprocessing prompt inputs", _PRE + "Traceback (most recent call last):"]
    lines += [_PRE + x for x in TOKENIZE[era]]
    v = diagnose(lines, name="t.log")
    assert v.primary_class == "request_too_long"
    (f,) = [f for f in v.findings if f.class_id == "request_too_long"]
    assert not any("dmesg" in r.action or "gpu_memory_utilization" in r.action for r in f.remedies)


def test_the_whole_length_error_under_the_same_frames_is_read_whole():
    lines = [_PRE + "Error in preprocessing prompt inputs", _PRE + "Traceback (most recent call last):"]
    lines += [_PRE + x for x in TOKENIZE["v06"]]
    lines.append(
        _PRE + "ValueError: This model's maximum context length is 16384 tokens. However, you requested 122946 tokens "
        "(112946 in the messages, 10000 in the completion). Please reduce the length of the messages or completion."
    )
    v = diagnose(lines, name="t.log")
    (f,) = [f for f in v.findings if f.class_id == "request_too_long"]
    assert f.confidence == "high"


def test_a_tokenizer_error_with_its_exception_line_is_not_called_too_long():
    lines = [_PRE + "Error in preprocessing prompt inputs", _PRE + "Traceback (most recent call last):"]
    lines += [_PRE + x for x in TOKENIZE["v06"]]
    lines.append(
        _PRE + "TypeError: TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]"
    )
    assert diagnose(lines, name="t.log").primary_class != "request_too_long"
