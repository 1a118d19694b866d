"""Exceptions, tracebacks, fatal CUDA errors and the "engine died" consequence markers.

Sources (``shared/vllm-messages.md`` section 10):

* Python tracebacks: ``Traceback (most recent call last):``, ``File "...", line N, in f``,
  ``The above exception was the direct cause of the following exception:``, ``During
  handling of the above exception, another exception occurred:``, the final
  ``Name: message`` line; ``multiprocessing`` prints ``Process EngineCore_DP0:`` first;
* ``vllm/v1/engine/core.py run_engine_core``: ``EngineCore failed to start.`` (startup)
  and ``EngineCore encountered a fatal error.`` (while serving);
* ``vllm/v1/engine/utils.py wait_for_engine_startup``: ``Engine core initialization
  failed. See root cause above.``; ``vllm/v1/engine/core_client.py``: ``Engine core proc
  %s died unexpectedly, shutting down client.``; ``vllm/v1/executor/multiproc_executor.py``:
  ``Worker proc %s died unexpectedly``, ``WorkerProc hit an exception.``, ``Worker failed
  with error``; ``vllm/v1/engine/async_llm.py``: ``AsyncLLM output_handler failed.``;
  ``vllm/v1/engine/exceptions.py`` ``EngineDeadError``; V0
  ``vllm/engine/multiprocessing`` ``MQEngineDeadError`` / ``MQLLMEngine is already dead``,
  ``vllm/engine/async_llm_engine.py`` ``AsyncEngineDeadError`` / ``Background loop has
  errored already``, ``multiproc_worker_utils.py`` ``Worker %s pid %d died, exit code``;
  ``vllm/entrypoints/openai/api_server.py`` ``Engine process failed to start``;
* CUDA errors other than out-of-memory (``CUDA error: an illegal memory access was
  encountered``, ``device-side assert triggered`` ...) via torch; NCCL ``NCCL error``;
* Ascend (torch_npu, through vllm-ascend): ``NPU function error: call aclnnX failed, error code is
  N`` (the CANN runtime's failure; an allocation failure, code 207018, is an out-of-memory);
* Intel Gaudi's software stack (the PyTorch bridge's HlLogger, through HabanaAI vllm-fork and
  vllm-gaudi): ``[Rank:N] FATAL ERROR :: MODULE:<module> <message>`` (``PT_LAZY``,
  ``PT_BRIDGE``, ``PT_EAGER`` ...), often raised as a RuntimeError and logged first by V0's
  MQLLMEngine; a device-memory allocation failure (``MODULE:PT_DEVMEM`` / ``DEVMEM``
  ``Allocation failed for size::N (M)MB``) is an out-of-memory and left to the OOM family;
* ROCm's HSA runtime (``hsa_status_t`` names, printed by the HIP runtime before it aborts):
  ``HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code:
  0x1016``, ``HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION`` ...: a GPU kernel fault, named by its
  status (``HSA_STATUS_ERROR_OUT_OF_RESOURCES`` is an allocation failure: left to the OOM family
  where torch says so, here otherwise);
* Intel's Unified Runtime out of a device resource (torch xpu / IPEX: ``RuntimeError: level_zero
  backend failed with error: 40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)``): most often the device's
  memory, but the code does not say which resource (fixtures n29), so it is not read as an
  out-of-memory (``UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY`` is: catalog/oom.py);
* AWS Neuron's compiler wrapper (torch-neuronx / libneuronxla ``neuron_cc_wrapper``): ``ERROR
  ||NEURON_CC_WRAPPER||: Failed compilation with ['neuronx-cc', 'compile', ...``: neuronx-cc
  failed on the graph vLLM's Neuron worker compiles while it loads the model (the reason is in
  neuronx-cc's own log);
* ROCm's runtime compiler (hiprtc / comgr, under a kernel PyTorch or a model compiles at run time,
  e.g. torch's jiterator): ``hip runtime failed to load.`` then ``Error: Please provide
  architecture for which code is to be generated.`` -- no GPU architecture the runtime compiler
  could target: the GPU's gfx arch is not one the ROCm / PyTorch build knows (fixtures z12:
  gfx1151, Strix Halo);
* Ray raylet's worker-death boilerplate (it mentions the host OOM killer as one possible
  cause among three; it is not a GPU out-of-memory).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..events import Phase
from ..processes import vllm_actor
from .pattern import NO_CUT, Pattern

_STARTUP, _RUNTIME = "startup", "runtime"

#: Exceptions that report a failure elsewhere (the engine died, a request was cancelled, the
#: process was stopped) instead of being one: vllm/v1/engine/exceptions.py (EngineDeadError,
#: EngineGenerateError), vllm/engine/multiprocessing (MQEngineDeadError),
#: vllm/engine/async_llm_engine.py (AsyncEngineDeadError), asyncio and the interpreter.
CONSEQUENCE_EXCEPTIONS = frozenset(
    {
        "EngineDeadError",
        "MQEngineDeadError",
        "AsyncEngineDeadError",
        "EngineGenerateError",
        "CancelledError",
        "KeyboardInterrupt",
        "SystemExit",
        "BrokenPipeError",
        "ConnectionResetError",
    }
)


def _exception(m, rec) -> Optional[Dict[str, Any]]:  # never cut (NO_CUT): "(?P<msg>.*)$" takes a cut message
    name = m["exc"]
    msg = (m["msg"] or "").strip()
    if msg[:1] in "'\"" and msg.endswith((msg[:1] + ")", msg[:1] + ").")):  # Name('message') repr
        msg = msg[1:].rstrip(".").rstrip(")")[:-1]
    data: Dict[str, Any] = {"exception": name, "message": msg[:500]}
    if name.rsplit(".", 1)[-1] in CONSEQUENCE_EXCEPTIONS:
        data["consequence"] = True
    return data


def _dead(marker: str, phase: Optional[str]):
    def build(m, rec) -> Dict[str, Any]:
        data: Dict[str, Any] = {"marker": marker}
        if phase:
            data["phase_hint"] = phase
        gd = m.groupdict()
        if gd.get("who"):
            data["who"] = gd["who"]
        return data

    return build


#: A Ray task's exception as Ray prints it (python/ray/exceptions.py ``RayTaskError``: the
#: class is made per cause, ``RayTaskError(OutOfMemoryError)``, and its text is
#: ``ray::Class.method() (pid=N, ip=A, actor_id=H, repr=<module.Class object at 0x..>)``).
RAY_TASK = (
    r"RayTaskError\((?P<cause>[\w.]+)\): ray::(?P<cls>[A-Za-z_]\w*)\.(?P<method>[A-Za-z_]\w*)\(\)"
    r"(?:[^\n<]*?\brepr=<(?P<module>[A-Za-z_][\w.]*?)\.[A-Za-z_]\w* object)?"
)


def _ray_task(m, rec) -> Dict[str, Any]:
    """A Ray task failed: ``foreign_actor_oom`` when its cause is an out-of-memory error and the
    actor is an application's (:func:`vllm_doctor.processes.vllm_actor` False: a trainer's
    ``FSDPPolicyWorkerBase.init_model()``), else ``ray_task_error``."""
    oom = m["cause"].rsplit(".", 1)[-1] in ("OutOfMemoryError", "OOMError")
    foreign = vllm_actor(m["cls"], m["method"], m["module"] or "") is False
    data: Dict[str, Any] = {"marker": "foreign_actor_oom" if oom and foreign else "ray_task_error"}
    data["actor"] = f"{m['cls']}.{m['method']}()"
    return data


def _frame(m, rec) -> Dict[str, Any]:  # never cut (NO_CUT): a frame cut before its function names nothing
    return {"path": m["path"], "line": int(m["line"] or 0), "func": m["func"]}


#: What follows "CUDA error: " in an out-of-memory (catalog/oom.py reads those).
_OOM_WHAT = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUSOLVER_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED")


def _cuda_error(m, rec) -> Optional[Dict[str, Any]]:
    what = (m["what"] or "").strip().rstrip(".")
    if what.startswith("out of memory") or "_STATUS_ALLOC_FAILED" in what:
        return None  # an out-of-memory: catalog/oom.py
    if m.end() == len(m.string) and any(oom.startswith(what) for oom in _OOM_WHAT):
        return None  # cut short where it may still be an out-of-memory ("CUDA error: out of mem")
    return {"exception": "CUDA error", "message": what}


def _nccl_error(m, rec) -> Dict[str, Any]:
    what = (m["what"] or "").strip()
    if m.end() == len(m.string) and " in: ".startswith(m.string[m.start() + len("NCCL error") :]):
        what = ""  # cut inside " in: FILE:LINE," before the message
    return {"exception": "NCCL error", "message": what[:300]}


#: CANN's code for a device-memory allocation failure (ACL_ERROR_RT_MEMORY_ALLOCATION): an
#: out-of-memory, for the OOM family (NPU out of memory), not this one.
_NPU_ALLOC_CODES = ("207018",)


def _npu_error(m, rec) -> Optional[Dict[str, Any]]:
    """An Ascend runtime call that failed; None for a memory-allocation failure."""
    what = (m["what"] or "").strip()
    if any(code in what for code in _NPU_ALLOC_CODES) or "out of memory" in what.lower():
        return None
    return {"exception": "NPU function error", "message": what[:300]}


def _habana_fatal(m, rec) -> Optional[Dict[str, Any]]:
    """A Gaudi software-stack fatal error, named by its module; None for a device-memory
    allocation failure (an out-of-memory, not this family)."""
    module, what = m["module"], (m["what"] or "").strip()
    if module.endswith("DEVMEM") and what.startswith("Allocation failed"):
        return None
    return {"exception": "HPU fatal error", "message": f"MODULE:{module} {what}"[:300], "module": module}


def _hsa(m, rec) -> Dict[str, Any]:
    """A ROCm HSA runtime status: the kernel fault it names, and the description and code where
    the record holds them."""
    status = m["status"]
    msg = status + (f": {m['what'].strip()}" if m["what"] and m["what"].strip() else "")
    data: Dict[str, Any] = {"exception": "ROCm HSA error", "message": msg[:300], "status_name": status}
    if m["code"]:
        data["hsa_code"] = m["code"]
    return data


def _ur_resources(m, rec) -> Dict[str, Any]:
    """Intel's Unified Runtime ran out of a device resource (which one, it does not say)."""
    what = (m["what"] or "").strip()
    return {"exception": "XPU runtime error", "message": (what or "UR_RESULT_ERROR_OUT_OF_RESOURCES")[:300]}


def _hip_rtc(m, rec) -> Dict[str, Any]:
    """ROCm's runtime compiler could not compile a kernel (either of the two sentences it prints,
    in one record or two); ``no_target_arch`` where the record says why."""
    data: Dict[str, Any] = {
        "exception": "HIP runtime compilation error",
        "form": "hiprtc",
        "message": "the runtime compiler (hiprtc) could not compile a kernel",
    }
    if m["arch"]:
        data["no_target_arch"] = True
    return data


def _neuron_cc(m, rec) -> Dict[str, Any]:
    """neuronx-cc failed compiling a graph; the target (``--target=trn1``) where printed."""
    data: Dict[str, Any] = {"exception": "Neuron compiler error", "message": "neuronx-cc failed compiling the model"}
    if m["target"]:
        data["target"] = m["target"]
    return data


PATTERNS = [
    Pattern(
        "traceback_start",
        "tb_start",
        ("Traceback (most recent call last)",),
        r"Traceback \(most recent call last\)",
        "CPython traceback",
    ),
    Pattern(
        "traceback_frame",
        "tb_frame",
        ('File "',),
        r"^\s*File \"(?P<path>[^\"]+)\", line (?P<line>\d+), in (?P<func>\S+)",
        "CPython traceback",
        None,
        _frame,
        cut_from=NO_CUT,
    ),
    # IPython / Jupyter (phase4, hunt8 u02): IPython 8's ``File PATH:LINE, in Class.func(args)``,
    # as JupyterLab / VS Code render it ``File [PATH:LINE](URL), in ...``; IPython 7's
    # ``PATH in func(args)`` (its ``---> N`` arrow line gives the line). The function is the
    # last name before the arguments (IPython 8.x prints the qualified name); a cell
    # (``Cell In[3], line 5``) names no file and is left out.
    Pattern(
        "ipython_frame",
        "tb_frame",
        ("File [", "File ~", "File /", ".py in "),
        r"^\s*(?:File \[?(?P<path>[^\[\]()\s,][^\[\](),]*?\.py):(?P<line>\d+)\]?(?:\([^)\s]*\))?, in "
        r"(?:[\w<>]+\.)*(?P<func>[\w<>]+)"
        r"|(?P<path>[~/][^\s()]*\.py) in (?:[\w<>]+\.)*(?P<func>[\w<>]+)\()",
        "IPython ultratb (8.x ``File PATH:LINE, in``; 7.x ``PATH in func(``)",
        None,
        _frame,
        cut_from=NO_CUT,
    ),
    Pattern(
        "traceback_chain",
        "tb_chain",
        ("The above exception was the direct cause", "During handling of the above exception"),
        r"The above exception was the direct cause|During handling of the above exception",
        "CPython traceback",
    ),
    Pattern(
        "exception_line",
        "exception",
        ("Error:", "Exception:", "Error(", "Error", "Exception", "Exit", "Interrupt"),
        r"^(?P<exc>(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)|Exception))"
        r"(?:(?::\s*|\((?=['\"]))(?P<msg>.*))?$",
        "CPython traceback (final line)",
        None,
        _exception,
        cut_from=NO_CUT,
    ),
    Pattern(
        "cuda_error",
        "cuda_error",
        ("CUDA error: ",),
        r"CUDA error: (?P<what>[^\n]+)",
        "torch CUDA runtime checks (c10/cuda/CUDAException)",
        None,
        _cuda_error,
        # as long as the longest out-of-memory spelling: a shorter cut may still be one (catalog/oom.py)
        cut_from=r"CUDA error: [^\n]{26}",
    ),
    Pattern(
        "nccl_error",
        "cuda_error",
        ("NCCL error",),
        r"NCCL error(?: in: \S+)?[,:]? ?(?P<what>[^\n]*)",
        "vllm/distributed/device_communicators/pynccl_wrapper.py; torch c10d",
        None,
        _nccl_error,
    ),
    Pattern(
        "npu_function_error",
        "cuda_error",
        ("NPU function error:",),
        r"NPU function error: (?P<what>[^\n]+)",
        "torch_npu NPU_CHECK_ERROR (Ascend CANN runtime / aclnn call failures, through vllm-ascend)",
        None,
        _npu_error,
        # as long as the allocation-failure spellings it must not take: a shorter cut may be one
        cut_from=r"NPU function error: [^\n]{12}",
    ),
    Pattern(
        "habana_fatal_error",
        "cuda_error",
        ("FATAL ERROR :: MODULE:",),
        r"FATAL ERROR :: MODULE:(?P<module>\w+)(?:\s+(?P<what>[^\n]*))?",
        "Intel Gaudi PyTorch bridge (HlLogger fatal log, 'FATAL ERROR :: MODULE:'), via HabanaAI vllm-fork / vllm-gaudi",
        None,
        _habana_fatal,
        # the message after the module is free text; the module must be whole, and a cut before
        # the message could still be a device-memory allocation failure
        cut_from=r"FATAL ERROR :: MODULE:\w+\s+(?!A(?:l(?:l(?:o(?:c(?:a(?:t(?:i(?:on?)?)?)?)?)?)?)?)?$)\S",
    ),
    Pattern(
        "rocm_hsa_error",
        "cuda_error",
        ("HSA_STATUS_ERROR_",),
        r"(?P<status>HSA_STATUS_ERROR_[A-Z_]+)(?=[:\s.,])(?::?\s*(?P<what>[A-Z][^\n]*?\.)"
        r"(?:\s*code:\s*(?P<code>0x[0-9a-fA-F]+)(?![0-9a-fA-F]))?)?",
        "ROCm HSA runtime status (hsa_status_t; printed by the HIP runtime / ROCr on a GPU kernel fault)",
        None,
        _hsa,
        cut_from=r"HSA_STATUS_ERROR_[A-Z_]+[:\s.,]",  # the status name whole
    ),
    Pattern(
        "level_zero_out_of_resources",
        "cuda_error",
        ("UR_RESULT_ERROR_OUT_OF_RESOURCES",),
        r"(?P<what>(?:level_zero backend failed with error: \d+ \()?UR_RESULT_ERROR_OUT_OF_RESOURCES\)?)",
        "Intel Unified Runtime result code through torch xpu / IPEX ('level_zero backend failed with error: 40 "
        "(UR_RESULT_ERROR_OUT_OF_RESOURCES)')",
        None,
        _ur_resources,
    ),
    Pattern(
        "hip_runtime_compile_failed",
        "cuda_error",
        # the second anchor holds the gate's "rror" ("Error: Please provide ...")
        ("hip runtime failed to load", "rror: Please provide architecture for which code"),
        r"hip runtime failed to load\.?(?:\s*(?:Error:\s*)?(?P<arch>Please provide architecture for which code is to "
        r"be generated))?|(?P<arch>Please provide architecture for which code is to be generated)",
        "ROCm hiprtc / comgr (amd_comgr's 'hip runtime failed to load' and 'Please provide architecture for which code "
        "is to be generated': a kernel compiled at run time with no target gfx arch)",
        None,
        _hip_rtc,
        cut_from=r"hip runtime failed to load|Please provide architecture for which",
    ),
    Pattern(
        "neuron_cc_failed",
        "cuda_error",
        ("||NEURON_CC_WRAPPER||",),
        r"\|\|NEURON_CC_WRAPPER\|\|:\s*Failed compilation(?: with \[[^\n]*?--target=(?P<target>\w+)['\"])?",
        "AWS Neuron compiler wrapper (torch-neuronx / libneuronxla neuron_cc_wrapper: 'ERROR ||NEURON_CC_WRAPPER||: "
        "Failed compilation with [neuronx-cc, compile, ...]')",
        Phase.LOADING_WEIGHTS,
        _neuron_cc,
    ),
    Pattern(
        "enginecore_failed_to_start",
        "engine_dead",
        ("EngineCore failed to start", "EngineCoreProc failed to start"),
        r"(?:Stage)?EngineCore(?:Proc)? failed to start",
        "vllm/v1/engine/core.py run_engine_core; vllm-omni stage_engine_core_proc.py ('StageEngineCoreProc "
        "failed to start.')",
        None,
        _dead("enginecore_failed_to_start", _STARTUP),
    ),
    Pattern(
        "enginecore_fatal",
        "engine_dead",
        ("EngineCore encountered a fatal error",),
        r"EngineCore encountered a fatal error",
        "vllm/v1/engine/core.py run_engine_core",
        None,
        _dead("enginecore_fatal", _RUNTIME),
    ),
    Pattern(
        "engine_core_init_failed",
        "engine_dead",
        ("Engine core initialization failed",),
        r"Engine core initialization failed",
        "vllm/v1/engine/utils.py wait_for_engine_startup",
        None,
        _dead("engine_core_init_failed", _STARTUP),
    ),
    Pattern(
        "engine_process_failed_to_start",
        "engine_dead",
        ("Engine process failed to start",),
        r"Engine process failed to start",
        "vllm/entrypoints/openai/api_server.py (V0 MQLLMEngine)",
        None,
        _dead("engine_process_failed_to_start", _STARTUP),
    ),
    Pattern(
        "engine_core_proc_died",
        "engine_dead",
        ("died unexpectedly",),
        r"(?:(?:Engine core|Worker) proc(?:ess)?|RayWorkerProc) (?P<who>\S+) died unexpectedly",
        "vllm/v1/engine/core_client.py ('Engine core proc X', v0.20+ 'Engine core process X'); "
        "vllm/v1/executor/multiproc_executor.py ('Worker proc X', v0.26+ '(exit code: N)'); ray executor "
        "('RayWorkerProc rank=N')",
        None,
        _dead("proc_died", None),
    ),
    Pattern(
        "workerproc_hit_exception",
        "engine_dead",
        ("WorkerProc hit an exception",),
        r"WorkerProc hit an exception",
        "vllm/v1/executor/multiproc_executor.py",
        None,
        _dead("workerproc_exception", None),
    ),
    Pattern(
        "workerproc_init_failed",
        "engine_dead",
        ("WorkerProc initialization failed",),
        r"WorkerProc initialization failed due to an exception in a\s*background process",
        "vllm/v1/executor/multiproc_executor.py WorkerProc.wait_for_ready (the root cause is in the worker's "
        "own lines)",
        None,
        _dead("workerproc_init_failed", _STARTUP),
    ),
    Pattern(
        "workerproc_failed_to_start",
        "engine_dead",
        ("WorkerProc failed to start",),
        r"WorkerProc failed to start\.",
        "vllm/v1/executor/multiproc_executor.py worker_main (logger.exception, v0.8+: the worker's traceback "
        "under it holds the root cause)",
        None,
        _dead("workerproc_failed_to_start", _STARTUP),
    ),
    Pattern(
        "dump_input",
        "engine_dead",
        ("Dumping input data for V1 LLM engine",),
        r"Dumping input data for V1 LLM engine",
        "vllm/logging_utils/dump_input.py dump_engine_exception (v0.10+), called by EngineCore.log_error_detail "
        "around execute_model only: the engine crashed while serving",
        None,
        _dead("dump_input", _RUNTIME),
    ),
    Pattern(
        "worker_failed_with_error",
        "engine_dead",
        ("please check the stack trace above for the root cause",),
        r"Worker failed with error '.*?', please check the stack trace above for the root cause",
        "vllm/v1/executor/multiproc_executor.py get_response (RuntimeError)",
        None,
        _dead("worker_failed", None),
    ),
    Pattern(
        "output_handler_failed",
        "engine_dead",
        ("output_handler failed",),
        r"output_handler failed",
        "vllm/v1/engine/async_llm.py output_handler",
        None,
        _dead("output_handler_failed", _RUNTIME),
    ),
    Pattern(
        "engine_dead_error",
        "engine_dead",
        (
            "EngineDeadError",
            "Engine loop is not running",
            "MQLLMEngine is already dead",
            "Background loop has errored already",
            "EngineCore encountered an issue",
        ),
        r"EngineDeadError|Engine loop is not running|MQLLMEngine is already dead|Background loop has errored already"
        r"|EngineCore encountered an issue",
        "vllm/v1/engine/exceptions.py; vllm/engine/multiprocessing; vllm/engine/async_llm_engine.py",
        None,
        _dead("engine_dead", _RUNTIME),
    ),
    Pattern(
        "v0_worker_died",
        "engine_dead",
        (" died, exit code",),
        r"Worker (?P<who>\S+) pid \d+ died, exit code",
        "vllm/executor/multiproc_worker_utils.py (V0)",
        None,
        _dead("worker_died", None),
    ),
    Pattern(
        "model_execution_error",
        "engine_dead",
        ("Error in model execution", "input of failed execution"),
        r"Error in model execution|input of failed execution",
        "vllm/worker/model_runner_base.py _wrapper (V0)",
        None,
        _dead("model_execution_failed", _RUNTIME),
    ),
    Pattern(
        "worker_method_error",
        "engine_dead",
        ("while processing method", "Error executing method"),
        r"Exception in worker (?P<who>\S+) while processing method (?P<method>\w+)(?=\W)"
        r"|Error executing method '?(?P<method2>\w+)'?\. This might cause deadlock",
        "vllm/executor/multiproc_worker_utils.py _run_worker_process; vllm/worker/worker_base.py execute_method",
        None,
        lambda m, rec: {
            "marker": "worker_method_error",
            **({"method": m["method"] or m["method2"]} if m["method"] or m["method2"] else {}),
            **({"who": m["who"]} if m["who"] else {}),
        },
    ),
    Pattern(
        "utility_method_failed",
        "engine_dead",
        ("method failed: ", " method failed"),
        r"Call to (?P<method>\w+) method failed: |Invocation of (?P<method2>\w+) method failed",
        "vllm/v1/engine/core.py EngineCore utility calls (v0.10+: collective_rpc, sleep, wake_up, "
        "add_lora ...; 0.11.2 core.py:920, 0.33.0 core.py:1850): the method names the step; the engine "
        "core's own logger.exception before it ('Invocation of %s method failed', 0.7.3-0.33: 0.9.2 "
        "core.py:654, 0.10.2 :790, 0.11.2 :918)",
        None,
        lambda m, rec: {"marker": "utility_method_failed", "method": m["method"] or m["method2"]},
    ),
    Pattern(
        "executor_failed",
        "engine_dead",
        ("Executor failed",),
        r"\bExecutor failed\.",
        "vllm/v1/executor (RuntimeError: Executor failed.)",
        None,
        _dead("executor_failed", None),
    ),
    Pattern(
        "see_root_cause_above",
        "engine_dead",
        ("root cause above", "Inspect the stacktrace"),
        r"[Ss]ee root cause above|Inspect the stacktrace",
        "vllm/v1/engine/utils.py wait_for_engine_startup; vllm/engine/multiprocessing (MQEngineDeadError)",
        None,
        _dead("see_root_cause_above", None),
    ),
    Pattern(
        "ray_actor_creation_failed",
        "engine_dead",
        ("died because of an error raised in its creation task",),
        r"died because of an error raised in its creation task, ray::(?P<who>[A-Za-z_]\w*)\.__init__\(\)",
        "ray python/ray/exceptions.py ActorDiedError ('The actor died because of an error raised in its creation "
        "task, ray::Class.__init__() (pid=...)'): the actor's constructor failed, a startup",
        None,
        _dead("ray_actor_creation_failed", _STARTUP),
    ),
    Pattern(
        "ray_task_error",
        "marker",
        ("RayTaskError(",),
        RAY_TASK,
        "ray python/ray/exceptions.py RayTaskError (its class named after the cause: 'RayTaskError(OutOfMemoryError): "
        "ray::Class.method() (pid=..., repr=<module.Class object at 0x..>)')",
        None,
        _ray_task,
        # cut before the actor's name and method, it names no actor to judge
        cut_from=r"RayTaskError\([\w.]+\): ray::[A-Za-z_]\w*\.[A-Za-z_]\w*\(\)",
    ),
    Pattern(
        "ray_worker_died",
        "engine_dead",
        ("A worker died or was killed while executing a task",),
        r"A worker died or was killed while executing a task",
        "ray raylet (boilerplate lists possible causes)",
        None,
        _dead("ray_worker_died", None),
    ),
]
