"""Every number a remedy prints is one the log supports (hunt8 kind 2, hunt9 kind 3, hunt10 kind 4).

Run over every fixture log and every rule case (the inputs of test_plan.py), per run:

* **TP**: a tensor_parallel_size target is printed only above a TP the log prints (or a whole
  launch command that sets none: vLLM's default 1 ran) and within the GPUs the log shows
  (:meth:`~vllm_doctor.rules.plan.Constraints.devices_at_least`); never above a device list.
* **Engine**: no remedy quotes V1's defaults on a V0 run or V0's on a V1 run, and none quotes
  either engine's where the log names neither the engine nor the version.
* **vLLM's own check**: no max_num_batched_tokens below max_model_len where chunked prefill may
  be off (V0, or an engine the log does not name before 0.11): vLLM refuses to start
  (:func:`vllm_doctor.defaults.batched_tokens_floor`).
* **What the log shows**: no utilization raise where the run shows the free-memory check failing;
  no "the free memory ... is not in the log" where a failure prints it; a runtime OOM's
  utilization target from an unprinted default only with serving evidence; an OOM whose frames
  show a request's multimodal input has its bound among the first two remedies.

And each property is shown to bite: the TP, engine and batch-token checks are run on made-up
remedies that break them.
"""

from __future__ import annotations

import re

import pytest
from test_plan import inputs, judged

from vllm_doctor import defaults
from vllm_doctor.events import Phase
from vllm_doctor.rules.plan import constraints
from vllm_doctor.rules.tree import failure_phase
from vllm_doctor.verdict import Remedy

INPUTS = list(inputs())
#: A default value quoted as one engine's ("half of V0's default 256", "vLLM's V1 default 2048-8192").
_V1_DEFAULT = re.compile(r"\bV1(?:'s)? default \d")
_V0_DEFAULT = re.compile(r"\bV0(?:'s)? default \d")


def _texts(r: Remedy):
    return [r.flag or "", r.action or "", r.why or ""]


def tp_problem(c, r: Remedy):
    """Why a remedy's TP number is not supported by the run, or None."""
    if r.setting != "tensor_parallel_size" or r.value is None or r.direction != "raise":
        return None
    now = c.in_force("tensor_parallel_size")
    if not now.known and c.command_leaves_tp_default() is None:
        return f"{r.flag}: the TP in force is not printed ({now.why})"
    if now.low is not None and r.value <= now.low:
        return f"{r.flag}: not above the TP in force {now.low}"
    have, _ = c.devices_at_least()
    if r.value * int(c.run.value("pipeline_parallel_size") or 1) > have:
        return f"{r.flag}: the log shows {have} GPUs"
    visible = c.visible_devices()
    if visible is not None and r.value > visible[0]:
        return f"{r.flag}: above the {visible[0]} visible devices"
    return None


def engine_problem(c, r: Remedy):
    """Why a remedy quotes a default of the wrong engine, or None."""
    for text in _texts(r):
        if c.engine == "v0" and _V1_DEFAULT.search(text):
            return f"V1 default on a V0 run: {text}"
        if c.engine == "v1" and _V0_DEFAULT.search(text):
            return f"V0 default on a V1 run: {text}"
        if c.engine is None and c.version is None and (_V1_DEFAULT.search(text) or _V0_DEFAULT.search(text)):
            return f"an engine's default where the log names neither engine nor version: {text}"
    return None


def batch_problem(c, r: Remedy):
    """Why a max_num_batched_tokens number would make vLLM refuse to start, or None."""
    if r.setting != "max_num_batched_tokens" or r.value is None or r.direction != "lower":
        return None
    floor = defaults.batched_tokens_floor(c.version, c.engine, c.run.value("max_model_len"), c.chunked_prefill())
    if floor is None:
        return None
    least, why = floor
    if least is None or r.value < least:
        return f"{r.flag}: {why} (max_model_len {least})"
    return None


def check_numbers(run, findings):
    c = constraints(run)
    gates = [f for f in run.failures if f.kind == "free_memory" and f.data.get("gpu_free_gib") is not None]
    free_printed = any(f.data.get("gpu_free_gib") is not None for f in run.failures)
    serving = run.phase >= Phase.READY or any(failure_phase(f, run) is not None for f in run.failures)
    multimodal = any("multimodal_input" in f.all_tags for f in run.failures)
    for f in findings:
        for r in f.remedies:
            for problem in (tp_problem(c, r), engine_problem(c, r), batch_problem(c, r)):
                assert problem is None, (f.code, problem)
            if gates and r.setting == "gpu_memory_utilization" and r.direction == "raise":
                assert r.flag is None, (f.code, r.flag, "the free-memory check failed in this run")
            if free_printed:
                assert "free memory at startup is not in the log" not in (r.why or ""), (f.code, r.why)
            if f.code == "VD200" and r.setting == "gpu_memory_utilization" and r.value is not None:
                assert c.in_force("gpu_memory_utilization").known or serving, (f.code, r.flag, "no serving evidence")
        if multimodal and f.code in ("VD200", "VD101") and f.remedies:
            first_two = " ".join(r.action for r in f.remedies[:2])
            assert "limit-mm-per-prompt" in first_two or "image" in first_two, (f.code, first_two)


@pytest.mark.parametrize("name,lines", INPUTS)
def test_every_number_is_one_the_log_supports(name, lines):
    for run, findings, _ in judged(name, lines):
        check_numbers(run, findings)


# -- the checks bite ------------------------------------------------------------------------------
def _run(text: str):
    ((run, _, _),) = list(judged("x.log", text.splitlines()))[:1]
    return constraints(run)


ONE_GPU_KV = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."
V0_RECORD = "ERROR 05-06 18:20:49 [engine.py:448] CUDA out of memory. Tried to allocate 96.00 MiB."


def planned(setting, value, direction):
    """A remedy of the plan setting ``setting`` to ``value`` (``direction``: raise / lower)."""
    flag = "--" + setting.replace("_", "-")
    return Remedy(order=0, action="x", flag=f"{flag} {value}", setting=setting, value=value, direction=direction)


def tp(value):
    return planned("tensor_parallel_size", value, "raise")


@pytest.mark.parametrize(
    "log,value,bad",
    [
        (ONE_GPU_KV, 2, True),  # hunt10 w21-w25: nothing shows TP or a second GPU
        ("CUDA_VISIBLE_DEVICES=0,1 vllm serve m\n" + ONE_GPU_KV, 2, False),  # whole command, no TP: 1 ran
        ("CUDA_VISIBLE_DEVICES=0,1 vllm serve m\n" + ONE_GPU_KV, 4, True),  # above the device list
        ("CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve m \\\n" + ONE_GPU_KV, 2, True),  # cut at a continuation
        ("CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve m --tensor-parallel-size 2\n" + ONE_GPU_KV, 4, False),
        ("CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve m --tensor-parallel-size 2\n" + ONE_GPU_KV, 2, True),  # not above
        ("vllm serve m --tensor-parallel-size 2\n" + ONE_GPU_KV, 4, True),  # hunt9 v18: TP 2, no 4 GPUs shown
        ("(Worker_TP1 pid=3) INFO 01-01 00:00:00 [core.py:1] x\n" + ONE_GPU_KV, 4, True),  # a floor, not a value
        ("CUDA_VISIBLE_DEVICES=0,1 vllm serve m --pipeline-parallel-size 2\n" + ONE_GPU_KV, 2, True),  # k004: 2 x 2
    ],
)
def test_the_tp_check_bites(log, value, bad):
    assert (tp_problem(_run(log), tp(value)) is not None) is bad


@pytest.mark.parametrize(
    "log,why,bad",
    [
        (V0_RECORD, "half of vLLM's V1 default 256 for the API server", True),  # hunt9 v19
        (V0_RECORD, "half of V0's default 256", False),
        (
            "(EngineCore_DP0 pid=1) ERROR 01-01 00:00:00 [core.py:1] CUDA out of memory.",
            "half of V0's default 256",
            True,
        ),
        ("CUDA out of memory. Tried to allocate 96.00 MiB.", "half of vLLM's V1 default 256", True),  # no engine
        (
            "CUDA out of memory. Tried to allocate 96.00 MiB.",
            "half of vLLM's default 256 (V0's 256; V1's by GPU)",
            False,
        ),
    ],
)
def test_the_engine_check_bites(log, why, bad):
    r = Remedy(order=0, action="x", why=why)
    assert (engine_problem(_run(log), r) is not None) is bad


@pytest.mark.parametrize(
    "log,value,bad",
    [
        # hunt9 v02: a V0 worker's record, max_model_len not printed
        (
            "(VllmWorkerProcess pid=2) ERROR 09-27 05:20:38 multiproc_worker_utils.py:233] CUDA out of memory.",
            1024,
            True,
        ),
        ("vllm serve m --max-model-len 4096\n" + V0_RECORD, 2048, True),  # V0, below max_model_len
        ("vllm serve m --max-model-len 4096\n" + V0_RECORD, 4096, False),  # at max_model_len: starts
        ("vllm serve m --max-model-len 4096 --enable-chunked-prefill\n" + V0_RECORD, 1024, False),
        ("(EngineCore_DP0 pid=1) ERROR 01-01 00:00:00 [core.py:1] CUDA out of memory.", 1024, False),  # V1
    ],
)
def test_the_batch_token_check_bites(log, value, bad):
    r = planned("max_num_batched_tokens", value, "lower")
    assert (batch_problem(_run(log), r) is not None) is bad
