"""Where and whether a failure happened, read from its traceback's frames, for whole families of
inputs: the step vLLM's frames name, under every wrapper, with and without the traceback header,
the exception whole or cut; and "survived" decided from what follows the failure, never from what
is missing.

The frames are vLLM's own (hunt6 p01: V0 sleep mode, ``executor_base.wake_up`` ->
``worker.py wake_up`` -> ``device_allocator/cumem.py wake_up`` -> ``create_and_map``, 0.7.3
``cumem.py:200-207``; V1 serving, ``v1/engine/core.py run_busy_loop`` -> ``step`` ->
``v1/worker/gpu_model_runner.py execute_model``, 0.11.2).
"""

import pytest
from test_tracker import track

from vllm_doctor import diagnose
from vllm_doctor.rules.tree import cut_short, route

SITE = "/usr/local/lib/python3.10/dist-packages/vllm"
WAKE_UP = [
    f'  File "{SITE}/executor/executor_base.py", line 216, in wake_up',
    '    self.collective_rpc("wake_up")',
    f'  File "{SITE}/executor/uniproc_executor.py", line 56, in collective_rpc',
    "    answer = run_method(self.driver_worker, method, args, kwargs)",
    f'  File "{SITE}/worker/worker.py", line 140, in wake_up',
    "    allocator.wake_up()",
    f'  File "{SITE}/device_allocator/cumem.py", line 207, in wake_up',
    "    create_and_map(handle)",
    f'  File "{SITE}/device_allocator/cumem.py", line 75, in create_and_map',
    "    python_create_and_map(*allocation_handle)",
]
MODEL_STEP = [
    f'  File "{SITE}/v1/engine/core.py", line 701, in run_busy_loop',
    "    self._process_engine_step()",
    f'  File "{SITE}/v1/engine/core.py", line 275, in step',
    "    model_output = self.execute_model_with_error_logging(",
    f'  File "{SITE}/v1/worker/gpu_model_runner.py", line 1500, in execute_model',
    "    hidden_states = self.model(",
]
STEPS = {"wake_up": (WAKE_UP, "waking from sleep mode"), "model_step": (MODEL_STEP, "running a model step")}
WRAPPERS = {
    "none": "{}",
    "ray": "(ActorModelRayActor pid=348952) {}",
    "compose": "vllm-server  | {}",
    "kubectl": "[pod/vllm-0/vllm] {}",
}
EXCEPTIONS = {
    "unknown": "ValueError: something unexpected happened",
    "cumem_whole": "RuntimeError: CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:119",
    "cut": "RuntimeError: CUDA Error: o",
    "cut_in_head": "RuntimeError: CUDA Error:",
}
HEADER = "Traceback (most recent call last):"


def _log(step, wrapper, header, exception):
    frames, _ = STEPS[step]
    lines = ([HEADER] if header else []) + frames + [EXCEPTIONS[exception]]
    return [WRAPPERS[wrapper].format(line) for line in lines]


@pytest.mark.parametrize("exception", sorted(EXCEPTIONS))
@pytest.mark.parametrize("header", [True, False], ids=["header", "no_header"])
@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("step", sorted(STEPS))
def test_an_exception_no_rule_explains_after_vllm_frames_is_never_healthy(step, wrapper, header, exception):
    v = diagnose(_log(step, wrapper, header, exception))
    assert v.primary_class == "unknown", v.title
    assert v.severity == "critical"
    assert STEPS[step][1] in v.title, v.title  # the last vLLM step the frames show
    finding = v.findings[0]
    if exception.startswith("cut"):
        assert "cut" in v.title and finding.facts["cut"] is True
        assert "out of memory" in finding.remedies[0].action
    else:
        assert EXCEPTIONS[exception] in v.title
        assert "cut" not in finding.facts
    assert finding.facts["last_frames"][-1] == ("create_and_map" if step == "wake_up" else "execute_model")


STATS = (
    "INFO 05-19 10:13:20 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 10.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: "
    "1.0%, Prefix cache hit rate: 0.0%"
)
SERVED = {
    "stats": STATS,
    "preemption": (
        "WARNING 05-19 10:13:21 scheduler.py:1057 Sequence group 7 is preempted by PreemptionMode.RECOMPUTE mode "
        "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
        "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
        "total_num_cumulative_preemption=1"
    ),
}
NOT_SERVED = {
    "answered_500": 'INFO:     10.0.0.1:40001 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
    "answered_200_unrecognised": 'INFO:     10.0.0.1:40001 - "POST /v1/chat/completions HTTP/1.1" 200 OK',  # not recognised
    "nothing": None,
}


@pytest.mark.parametrize("after", sorted(SERVED))
@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
def test_a_request_error_the_server_went_on_serving_after_stays_non_fatal(after, wrapper):
    lines = _log("model_step", "none", True, "unknown") + [SERVED[after]]
    lines = [WRAPPERS[wrapper].format(line) for line in lines]
    t = track(lines)
    (f,) = t.run.failures
    assert f.served_after is not None and f.served_after.lineno == len(lines)
    assert route(f, t.run).name is None
    assert diagnose(lines).primary_class == "healthy"


@pytest.mark.parametrize("after", sorted(NOT_SERVED))
def test_what_does_not_show_serving_does_not_make_a_failure_survived(after):
    lines = _log("model_step", "none", True, "unknown") + ([NOT_SERVED[after]] if NOT_SERVED[after] else [])
    t = track(lines)
    (f,) = t.run.failures
    assert f.served_after is None
    assert diagnose(lines).primary_class == "unknown"


def test_serving_before_a_failure_is_not_serving_after_it():
    lines = [STATS] + _log("model_step", "none", True, "unknown")
    t = track(lines)
    assert t.run.failures[0].served_after is None
    assert diagnose(lines).primary_class == "unknown"


def test_the_same_error_again_after_serving_must_be_survived_again():
    once = _log("model_step", "none", True, "unknown")
    t = track(once + [STATS] + once)
    (f,) = t.run.failures
    assert f.served_after is None  # its last occurrence has nothing after it
    t = track(once + [STATS] + once + [STATS])
    assert t.run.failures[0].served_after.lineno == 2 * len(once) + 2


def test_a_bare_exception_line_without_vllm_frames_is_not_judged():
    # a client's or a script's error pasted beside a log: nothing says it was vLLM's
    v = diagnose(["INFO:     Application startup complete.", "ValueError: something unexpected happened"])
    assert v.primary_class == "healthy"


@pytest.mark.parametrize(
    "message, cut",
    [
        ("CUDA Error: o", True),
        ("CUDA Error: out of mem", True),
        ("CUDA error:", True),
        ("HIP error: ou", True),
        ("XPU o", True),
        ("Tried to get XPU out of m", True),
        ("CUDA Error: invalid argument at cumem_allocator.cpp:119", False),
        ("something unexpected happened", False),
        ("device cuda", False),  # a device name alone ends many messages
        ("index out of", False),  # "out of range" is no out-of-memory
        ("bad value foo", False),  # the "o" must start a word
    ],
)
def test_a_cut_exception_is_one_that_stops_inside_an_out_of_memory_wording(message, cut):
    t = track(WAKE_UP + [f"RuntimeError: {message}"])
    assert cut_short(t.run.failures[0], t.run) is cut


def test_an_exception_followed_by_more_of_the_log_is_not_cut():
    t = track(WAKE_UP + ["RuntimeError: CUDA Error: o", "INFO 05-19 10:13:20 [loader.py:1] Loading weights took 1.0 s"])
    assert not cut_short(t.run.failures[0], t.run)


# -- the sampler's frames and torch's module moves: a startup step only before anything served --
TORCH = "/usr/local/lib/python3.10/dist-packages/torch"
SAMPLER_FRAMES = {
    # 0.8.0-0.8.5 (hunt5 m13): forward_native -> apply_top_k_top_p -> logits.sort
    "0.8.5_top_k_top_p": [
        f'  File "{TORCH}/nn/modules/module.py", line 1750, in _call_impl',
        "    return forward_call(*args, **kwargs)",
        f'  File "{SITE}/v1/sample/ops/topk_topp_sampler.py", line 79, in forward_native',
        "    logits = apply_top_k_top_p(logits, k, p)",
        f'  File "{SITE}/v1/sample/ops/topk_topp_sampler.py", line 111, in apply_top_k_top_p',
        "    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)",
    ],
    # 0.20.2: forward_native -> apply_top_k_top_p_pytorch
    "0.20.2_pytorch": [
        f'  File "{SITE}/v1/sample/ops/topk_topp_sampler.py", line 154, in forward_native',
        "    logits = apply_top_k_top_p_pytorch(logits, k, p, allow_cpu_sync=True)",
        f'  File "{SITE}/v1/sample/ops/topk_topp_sampler.py", line 270, in apply_top_k_top_p_pytorch',
        "    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)",
    ],
    # 0.33's new model runner: v1/worker/gpu/sample/sampler.py
    "0.33_gpu_sampler": [
        f'  File "{SITE}/v1/worker/gpu/sample/sampler.py", line 278, in sample',
        "    logits = logits.to(torch.float32)",
    ],
    # a shipper stripped the indentation and cut the frames: only the code line names the step
    "unindented_code_line": ["logits = apply_top_k_top_p(logits, k, p)"],
}
MOVE_FRAMES = {
    # ipex-llm on an Arc XPU (hunt6 p13): Module.to -> _apply -> convert -> t.to(device)
    "convert": [
        f'  File "{TORCH}/nn/modules/module.py", line 1158, in convert',
        "    return t.to(device, dtype if t.is_floating_point() or t.is_complex() else None, non_blocking)",
    ],
    "to_apply": [
        f'  File "{TORCH}/nn/modules/module.py", line 1160, in to',
        "    return self._apply(convert)",
        f'  File "{TORCH}/nn/modules/module.py", line 810, in _apply',
        "    module._apply(fn)",
    ],
}
TORCH_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.74 GiB. GPU 1 has a total capacity of 23.69 GiB "
    "of which 1.07 GiB is free. Process 922108 has 22.61 GiB memory in use. Of the allocated memory"
)
XPU_OOM = (
    "RuntimeError: XPU out of memory. Tried to allocate 1.02 GiB (GPU 0; 15.56 GiB total capacity; 0 bytes already "
    "allocated; 0 bytes reserved in total by PyTorch)"
)
WORKER = "(VllmWorker rank=1 pid=572) ERROR 03-20 02:29:07 [multiproc_executor.py:375] {}"


@pytest.mark.parametrize("wrapper", ["none", "worker"])
@pytest.mark.parametrize("frames", sorted(SAMPLER_FRAMES))
def test_sampler_frames_before_anything_served_are_the_sampler_warm_up(frames, wrapper):
    lines = SAMPLER_FRAMES[frames] + [TORCH_OOM]
    if wrapper == "worker":
        lines = [WORKER.format(line) for line in lines]
    v = diagnose(lines)
    assert v.primary_class == "sampler_warmup_oom", v.title
    assert v.findings[0].phase == "startup"


@pytest.mark.parametrize("frames", sorted(SAMPLER_FRAMES))
def test_sampler_frames_after_serving_are_a_runtime_step(frames):
    v = diagnose([STATS] + SAMPLER_FRAMES[frames] + [TORCH_OOM])
    assert v.primary_class == "runtime_oom", v.title


@pytest.mark.parametrize("wrapper", ["none", "compose"])
@pytest.mark.parametrize("frames", sorted(MOVE_FRAMES))
def test_torch_module_moves_before_anything_served_are_the_weights_loading(frames, wrapper):
    lines = ["```"] + [WRAPPERS[wrapper].format(line) for line in MOVE_FRAMES[frames] + [XPU_OOM]] + ["```"]
    v = diagnose(lines)
    assert v.primary_class in ("weight_load_oom", "startup_memory_contention"), v.title
    assert v.findings[0].phase == "startup"


@pytest.mark.parametrize("frames", sorted(MOVE_FRAMES))
def test_torch_module_moves_after_serving_are_not_placed_at_load(frames):
    v = diagnose([STATS] + MOVE_FRAMES[frames] + [XPU_OOM])
    assert v.primary_class == "runtime_oom", v.title


def test_the_forward_path_of_a_module_is_no_weight_move():
    # module.py _call_impl is every forward pass, not a move of the weights
    lines = [f'  File "{TORCH}/nn/modules/module.py", line 1750, in _call_impl', XPU_OOM]
    t = track(lines)
    assert "weight_move" not in t.run.failures[0].all_tags


# -- logger.exception(e): the message first, then its traceback, as one record (V0 MQLLMEngine) --
V0_SITES = {
    # the HabanaAI fork (hunt6 p12), 0.7.3 (engine.py:400), 0.8-style bracketed site with a pid prefix
    "hpu_fork": "ERROR 02-04 12:35:23 engine.py:387] {}",
    "0.7.3": "ERROR 03-01 09:00:01 engine.py:400] {}",
    "bracketed": "(pid=812) ERROR 05-02 10:00:01 [engine.py:448] {}",
}
# A message no catalog pattern knows (p12's own Gaudi message is now a named failure of its
# own, catalog/errors.py habana_fatal_error): the family is any message logged this way.
MESSAGE = "[Rank:0] engine state machine entered an invalid transition: WAITING -> FINISHED_ABORTED."
V0_STARTUP_FRAMES = [
    '  File "/home/user/vllm/vllm/engine/multiprocessing/engine.py", line 378, in run_mp_engine',
    "    engine = MQLLMEngine.from_engine_args(engine_args=engine_args,",
    '  File "/home/user/vllm/vllm/engine/multiprocessing/engine.py", line 121, in from_engine_args',
    "    return cls(ipc_path=ipc_path,",
]


@pytest.mark.parametrize("site", sorted(V0_SITES))
def test_the_message_logged_before_a_cut_traceback_is_its_exception(site):
    lines = [V0_SITES[site].format(x) for x in [MESSAGE, HEADER] + V0_STARTUP_FRAMES + [""]]
    t = track(lines)
    (f,) = t.run.failures
    assert f.kind == "exception" and f.data["message"] == MESSAGE and f.lines[0].lineno == 1
    assert f.data["frames"] == ["run_mp_engine", "from_engine_args"] and f.data["vllm_frames"] is True
    v = diagnose(lines)
    assert v.primary_class == "other" and MESSAGE[:60] in v.title, v.title
    assert v.findings[0].phase == "startup"


@pytest.mark.parametrize("site", sorted(V0_SITES))
def test_a_traceback_with_its_own_exception_line_is_named_by_that_line(site):
    lines = [V0_SITES[site].format(x) for x in [MESSAGE, HEADER] + V0_STARTUP_FRAMES + ["ValueError: bad config"]]
    (f,) = track(lines).run.failures
    assert (f.kind, f.data["message"]) == ("exception", "bad config")


@pytest.mark.parametrize(
    "between, message_site",
    [
        # another record between them (one the catalog knows: an unknown line is invisible on the
        # pre-filtered path, so the logger site and time decide alone)
        (
            "INFO 02-04 12:35:23 model_runner.py:1072] Loading model weights took 15.0500 GB",
            "ERROR 02-04 12:35:23 engine.py:387] {}",
        ),
        # another time: another record
        (None, "ERROR 02-04 12:35:21 engine.py:387] {}"),
    ],
)
def test_a_message_not_of_the_same_record_stays_apart(between, message_site):
    tb = [V0_SITES["hpu_fork"].format(x) for x in [HEADER] + V0_STARTUP_FRAMES]
    lines = [message_site.format(MESSAGE)] + ([between] if between else []) + tb
    (f,) = track(lines).run.failures
    assert f.kind == "traceback"


# -- no cue, no guess: a startup OOM nothing places, beside another process on the GPU --
UNPLACED_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 594.00 MiB. GPU 0 has a total capacity of 22.03 "
    "GiB of which 582.00 MiB is free. Process 29529 has 796.00 MiB memory in use. Including non-PyTorch memory, this "
    "process has 20.67 GiB memory in use. Of the allocated memory 20.10 GiB is allocated by PyTorch, and 90.00 MiB "
    "is reserved by PyTorch but unallocated."
)
ENGINE_INIT_FAILED = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
LOAD_MARKER = "INFO 08-20 10:00:02 [gpu_model_runner.py:1] Starting to load model Qwen/Qwen3-8B..."


@pytest.mark.parametrize("order", ["oom_first", "consequence_first"])
def test_an_unplaced_startup_oom_beside_another_process_leads_with_that_process(order):
    lines = [UNPLACED_OOM, ENGINE_INIT_FAILED] if order == "oom_first" else [ENGINE_INIT_FAILED, UNPLACED_OOM]
    v = diagnose(lines)
    assert v.primary_class == "startup_memory_contention", v.title
    assert "29529" in v.title


def test_a_startup_step_shown_still_places_it():
    v = diagnose([LOAD_MARKER, UNPLACED_OOM, ENGINE_INIT_FAILED])
    assert v.primary_class == "weight_load_oom", v.title


def test_an_unplaced_startup_oom_of_vllm_alone_is_not_contention():
    alone = UNPLACED_OOM.replace("Process 29529 has 796.00 MiB memory in use. ", "")
    v = diagnose([alone, ENGINE_INIT_FAILED])
    assert v.primary_class != "startup_memory_contention", v.title
