"""A failure that is not a memory or slowdown problem (named by its exception).

What it means:
    The server failed, and the root cause is in the log, but it is not one of the memory
    classes: a CUDA error such as "an illegal memory access was encountered", an NCCL error,
    a missing module, a bad argument. The finding names the exception and quotes it.

    An on-chip scratch memory of a TPU core running out while XLA compiles the model ("Ran out
    of memory in memory space smem", vmem, sflag: not the device memory, hbm) is here too: the
    compiled shapes are too large for the core; shorter sequences (``max_model_len``) and fewer
    tokens per step (``max_num_batched_tokens``) fit it, ``gpu_memory_utilization`` does not.

    No usable accelerator is here too, as a finding of its own: no platform detected, no
    driver in the container (``libcuda.so.1`` missing), no GPU visible, a driver older than the
    CUDA the image was built for, or a CPU-only PyTorch (catalog/platform.py). vLLM stops before
    it loads anything: the fix is the container's GPU access or the driver, never a memory
    setting.

    A fatal error of Intel Gaudi's software stack (``FATAL ERROR :: MODULE:PT_LAZY ...``: the
    PyTorch bridge, its lazy-mode graphs, the SynapseAI release) is here too: it names the
    module, and says how much device memory was in use where the log shows it.

    A launch command vLLM's argument parser refused is here too (catalog/arguments.py,
    rules/launch_rejected.py): ``vllm serve: error: unrecognized arguments: ...`` and argparse's
    other messages. Nothing ran; the fix is the command: the flag meant by a misspelt one, a flag
    the release removed or does not have yet (by release, from vLLM's own parsers), a flag glued
    to its value, the image's entrypoint given ``vllm serve`` again.

    A feature combination the release refuses is here too (catalog/validation.py): speculative
    decoding with a draft model before vLLM 0.15, pipeline parallelism for a model without
    ``SupportsPP``, prefix caching with a sliding window, sleep mode on a platform without it.
    vLLM stops while it validates the configuration: the fix is to drop the flag, or use what
    the message offers instead.

    Accelerator runtime faults are here, in their platform's words (rules/device.py): a ROCm
    kernel fault (``HSA_STATUS_ERROR_EXCEPTION``: most often an attention kernel, AITER's;
    another attention backend first, ``AMD_SERIALIZE_KERNEL=3`` to find the kernel, look-ups with
    the ROCm versions), the Neuron compiler failing (``NEURON_CC_WRAPPER``: its own log, the
    Neuron SDK's versions, smaller graphs), an XPU runtime out of a resource it does not name
    (most often memory). An allocation failure is never said to be "not about capacity".

    Host RAM running out is here too, as a finding of its own: Ray's memory monitor, the
    kernel's OOM killer or the container runtime killing a worker for host memory ("Task was
    killed due to the node running low on memory", "Out of memory: Killed process N",
    OOMKilled) is not a GPU out-of-memory; GPU settings do not change it. A bare SIGKILL (exit
    code 137 from a job runner, Docker, Kubernetes, torchrun, systemd or a shell) is its own
    finding: most often the OOM killer, but the log must say so before the remedies are about
    RAM; the first step is to find who sent it.

Why it happens:
    Kernel or driver bugs, hardware faults, version mismatches, configuration mistakes.

Remedies, in order:
    No accelerator: give the container the GPUs (``docker run --gpus all`` with the NVIDIA
    Container Toolkit; a Kubernetes ``nvidia.com/gpu`` limit with the device plugin) and check
    ``CUDA_VISIBLE_DEVICES``; a driver too old: a newer driver, or an image built for the CUDA
    the driver supports; a CPU-only PyTorch: the CUDA build vLLM pins.
    Otherwise:
    1. Read the quoted exception; search the vLLM issue tracker for it with your vLLM and
       driver versions (the platform's own stack: ROCm, CANN, Neuron SDK, SynapseAI, oneAPI).
    2. For CUDA errors: rerun with ``CUDA_LAUNCH_BLOCKING=1`` to get the real failing call;
       try ``--enforce-eager`` to rule out CUDA graphs.
    An unsupported combination: drop the flag the finding names, or use what it offers instead.
    Host RAM: more RAM or fewer engines per node; less host memory per engine (a smaller
    ``--swap-space`` on V0, less ``--cpu-offload-gb``, sleep level 2); under Ray, memory
    requirements on the actors.

What does not help:
    Memory tuning (``gpu_memory_utilization``, ``max_model_len``): the failure is not about
    GPU capacity. Ray's "killed by SIGKILL by OOM killer" is generic boilerplate listing possible
    causes, not evidence of a GPU OOM.

Sources:
    vllm/v1/engine/core.py run_engine_core; pytorch c10/cuda/CUDAException.h (CUDA error
    checks); PyTorch docs "CUDA semantics" (notes/cuda: CUDA_LAUNCH_BLOCKING for a precise
    stack).
"""

from __future__ import annotations

from typing import List, Sequence

import regex

from ..catalog.validation import UNSUPPORTED
from ..events import Phase
from ..run import Failure, Run
from ..tracker import MEMORY_KINDS
from ..verdict import Finding
from . import launch_rejected, oom_provenance, request_input, unified_memory
from .device import device_words
from .plan import constraints, env_set, env_todo
from .rule import Rule, consequence_evidence, failure_evidence, finding, merged_data, remedy

#: Who killed a process for host RAM, as an operator names it.
KILLERS = {
    "ray": "Ray's memory monitor",
    "kernel": "the kernel's OOM killer",
    "cgroup": "the container's memory limit (cgroup OOM killer)",
    "kubernetes": "Kubernetes (OOMKilled: the pod's memory limit)",
    "torch-cpu-allocator": "a refused CPU allocation",
    "job-runner": "the job runner (it puts the SIGKILL down to an out-of-memory)",
}
#: Who reported a SIGKILL, for the title (catalog/host_memory.py ``reporter``).
REPORTERS = {
    "runner": "the job runner or container runtime",
    "torchrun": "torchrun",
    "systemd": "systemd",
    "shell": "the shell",
}


def _killed_by_signal(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """A SIGKILL (exit code 137 / -9, ``killer`` ``signal``) that no line puts down to memory:
    the host's OOM killer sends it, but so do ``docker stop`` after its grace period, a
    scheduler's limit and an operator. The finding says how to tell which, and gives the
    host-memory levers only for the case that it was the OOM killer; no GPU setting."""
    d = merged_data(failures)
    facts = {k: d[k] for k in ("signal", "exit_code", "reporter") if k in d}
    code = f", exit code {d['exit_code']}" if "exit_code" in d else ""
    who = REPORTERS.get(d.get("reporter"), "the runner")
    title = (
        f"{phase.capitalize()}: the process was killed by SIGKILL ({who}{code}); most often the host's OOM "
        "killer, but no line here says it was memory"
    )
    rem = [
        remedy(
            "Find who sent the SIGKILL: the kernel's OOM killer (dmesg -T | grep -i -e 'out of memory' -e 'killed "
            "process', or journalctl -k), a container memory limit (docker inspect --format '{{.State.OOMKilled}}' "
            "CONTAINER; kubectl describe pod: Last State Reason OOMKilled), a scheduler's time or memory limit, or a "
            "stop that outlasted its grace period",
            None,
            "exit code 137 is 128 + 9: SIGKILL, which a process cannot catch, so vLLM prints nothing of its own",
            "host",
        ),
        remedy(
            "If it was the OOM killer: give the host or container more RAM, or hold less per engine (fewer engines "
            "per node, less --cpu-offload-gb or --swap-space, sleep level 2)",
            None,
            "each engine process holds host RAM: weight loading, CPU KV swap, sleep-mode offload",
            "host",
        ),
    ]
    why = "a SIGKILL comes from outside the GPU"
    dont = [f"GPU memory settings (gpu_memory_utilization, max_model_len, max_num_seqs): {why}"]
    # remedies2: after KV sizing, on unified memory the GPU settings are the host's RAM
    rem, dont, forbids = unified_memory.amend(run, rem, dont, [("gpu_memory_utilization", "lower", why)])
    return _finding(run, failures, phase, title, facts, "the kill", rem, dont, confidence="medium", forbids=forbids)


def _finding(
    run: Run, failures: Sequence[Failure], phase: str, title: str, facts, note: str, rem, dont, **kw
) -> Finding:
    """A VD900 finding: the failures' first lines as evidence (the first noted ``note``), then up
    to two consequences; ``kw`` as :func:`~.rule.finding` takes them (``forbids``, ``confidence``)."""
    evidence = failure_evidence(failures, note) + consequence_evidence(run, 2)
    return finding(RULE, run, phase, title, facts, evidence, rem, dont, **kw)


def _host_memory(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """Host RAM ran out: a worker was killed (Ray's memory monitor, the kernel or the
    container runtime) or a CPU allocation refused. Not a GPU OOM: the GPU settings do not
    change it; what the engine holds in host memory does."""
    d = merged_data(failures)
    killer = KILLERS.get(d.get("killer"), "something")
    facts = {
        k: d[k]
        for k in (
            "killer",
            "pid",
            "process",
            "host_used_gib",
            "host_total_gib",
            "process_used_gib",
            "anon_rss_gib",
            "workers_killed",
            "tried_to_allocate_gib",
            "exit_code",
            "signal",
            "reporter",
        )
        if k in d
    }
    used = (
        f" ({d['host_used_gib']:.1f} of {d['host_total_gib']:.1f} GiB used)"
        if d.get("host_used_gib") and d.get("host_total_gib")
        else ""
    )
    title = f"Host RAM ran out: {killer} killed a worker{used}; not a GPU OOM"
    c = constraints(run)
    swap = run.value("swap_space")
    rem = [
        remedy(
            "Give the node more RAM, or run fewer engines / workers per node",
            None,
            "each engine process holds host RAM: weight loading, CPU KV swap, sleep-mode offload",
            "host",
        ),
        c.lower(
            "swap_space",
            swap / 2 if swap else None,
            "Hold less host memory per engine: a smaller CPU swap space (V0)",
            f"half of the {swap} GiB per GPU in force"
            if swap
            else "the swap space in force is not in the log: V0 reserves 4 GiB per GPU by default",
        )
        if run.engine == "v0"
        else remedy(
            "Hold less host memory per engine: less --cpu-offload-gb, or sleep level 2, which discards the weights "
            "instead of keeping them in RAM, where reloading them is acceptable"
        ),
        remedy(
            "Under Ray: give the actors a memory requirement so Ray places fewer per node",
            None,
            "the memory monitor kills the newest tasks once the node passes its threshold",
            "host",
        )
        if d.get("killer") == "ray"
        else None,
    ]
    dont = ["GPU memory settings (gpu_memory_utilization, max_model_len): the GPU is not what ran out"]
    forbids = [("gpu_memory_utilization", "lower", "the GPU is not what ran out")]
    rem, dont, forbids = unified_memory.amend(run, rem, dont, forbids)  # remedies2
    return _finding(run, failures, phase, title, facts, "host memory", rem, dont, forbids=forbids)


#: What each form of ``no_device`` (catalog/platform.py) says, for the title.
NO_DEVICE_FORMS = {
    "no_platform": "vLLM detected no GPU platform",
    "no_driver": "the NVIDIA driver is not visible in the process",
    "no_gpu": "no GPU is visible to the process",
    "driver_too_old": "the NVIDIA driver is too old for this build's CUDA",
    "cpu_torch": "the installed PyTorch is a CPU-only build",
}


def _no_device(run: Run, failures: Sequence[Failure]) -> Finding:
    """No usable accelerator (``no_device`` events, catalog/platform.py): the container's GPU
    access, the driver or the PyTorch build, never a memory setting. The most telling form
    printed names it (a missing driver explains "no platform detected")."""
    forms = [f.data.get("form") for f in failures]
    order = ("driver_too_old", "cpu_torch", "no_driver", "no_gpu", "no_platform")
    form = next((x for x in order if x in forms), "no_platform")
    d = merged_data([f for f in failures if f.data.get("form") == form] + list(failures))
    facts = {"form": form, **{k: d[k] for k in ("library", "driver_version") if k in d}}
    what = NO_DEVICE_FORMS[form]
    if d.get("library") and form in ("no_driver", "no_platform"):
        what += f" ({d['library']} missing)"
    elif d.get("library"):
        what += f"; {d['library']} missing"
    title = f"Startup failed: {what}: not a memory problem"
    access = remedy(
        "Give the container the GPUs: docker run --gpus all (NVIDIA Container Toolkit), or a Kubernetes "
        "nvidia.com/gpu limit with the NVIDIA device plugin; nvidia-smi inside the container must list them",
        None,
        "without the driver and the devices mounted in, vLLM finds no GPU",
        "host",
    )
    visible = remedy(
        "Check CUDA_VISIBLE_DEVICES (and NVIDIA_VISIBLE_DEVICES): an empty or wrong value hides every GPU",
        None,
        None,
        "host",
    )
    if form == "driver_too_old":
        rem = [
            remedy(
                "Update the NVIDIA driver to one that supports this build's CUDA, or run a vLLM build for the CUDA "
                "the driver supports (nvidia-smi prints it)",
                None,
                "the driver is older than the CUDA runtime vLLM and PyTorch were built with",
                "host",
            )
        ]
    elif form == "cpu_torch":
        rem = [
            remedy(
                "Install the CUDA build of PyTorch that vLLM pins (pip install vllm brings it; a later pip install "
                "torch from the CPU index replaces it)",
                None,
                None,
                "host",
            )
        ]
    else:
        rem = [
            access,
            visible,
            remedy(
                "On a machine without an NVIDIA GPU, install the vLLM build for its accelerator (ROCm, XPU, TPU, "
                "CPU): the CUDA build finds no platform there",
                None,
                None,
                "host",
            )
            if form == "no_platform"
            else None,
        ]
    why = "vLLM never reached a GPU"
    return _finding(
        run,
        failures,
        "startup",
        title,
        facts,
        "no accelerator",
        rem,
        [f"Memory settings (gpu_memory_utilization, max_model_len): {why}"],
        forbids=[("gpu_memory_utilization", "lower", why), ("max_model_len", "lower", why)],
    )


def _compile_limit(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """An on-chip scratch memory of the accelerator core (XLA:TPU ``smem``, ``vmem``, ``sflag``)
    ran out while XLA compiled the model for its shapes (catalog/oom.py
    ``xla_compile_scratch_limit``; openxla/xla docs/errors/error_1001.md). Its capacity is fixed
    by the chip: smaller shapes fit it (shorter sequences, fewer tokens per step), the device
    memory settings do not change it."""
    d = merged_data(failures)
    space = d.get("memory_space", "scratch")
    facts = {k: d[k] for k in ("memory_space", "space_used_gib", "space_capacity_gib", "exceeded_by_gib") if k in d}
    c = constraints(run)
    rem = [
        # A kernel's scoped vmem limit is a constant of the kernel (Pallas' vmem_limit_bytes),
        # raised release by release where a model needed more (tpu-inference PR 508: ragged
        # paged attention): the first thing to try, before shrinking what is served.
        remedy(
            "Upgrade vLLM's TPU backend (tpu-inference): a kernel's scoped vmem limit is set in the release and "
            "raised where models needed more",
            None,
            None,
        )
        if space == "vmem"
        else None,
        c.halve(
            "max_model_len",
            "Compile for shorter sequences: lower max_model_len",
            "the compiled shapes grow with the sequence length",
            printed_only=True,
        ),
        # only from a printed value: a guessed default may be below max_model_len, which V0
        # without chunked prefill refuses
        c.halve(
            "max_num_batched_tokens",
            "Compile smaller steps: lower max_num_batched_tokens",
            "fewer tokens per step, smaller shapes",
            printed_only=True,
        ),
    ]
    dont = []
    if request_input.request_path(run.failures) == "multimodal_input":
        # remedies2: the frames are the multimodal encoder's (q07: one image's 37,888 patches):
        # the image's size sets the compiled shapes, max_model_len does not (rules/request_input.py)
        rem = [request_input.bound_remedy("multimodal_input", run), rem[0], rem[2]]
        dont.append("Lowering max_model_len: one image's patches, not the sequence length, set the encoder's shapes")
    why = f"it sizes the device memory (HBM), not the core's {space}"
    title = f"{phase.capitalize()} failure: XLA ran out of {space} (on-chip scratch memory) compiling the model"
    return _finding(
        run,
        failures,
        phase,
        title,
        facts,
        "the error",
        rem,
        [f"gpu_memory_utilization: {why}", *dont],
        forbids=[("gpu_memory_utilization", "lower", why), ("gpu_memory_utilization", "raise", why)]
        + [("max_model_len", "lower", "one image's patches set the encoder's shapes")] * bool(dont),
    )


def _hpu_fatal(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """A fatal error of Intel Gaudi's software stack (catalog/errors.py ``habana_fatal_error``:
    ``FATAL ERROR :: MODULE:PT_LAZY ...``): the PyTorch bridge, its lazy-mode graphs or the
    SynapseAI release, not the memory (a device-memory allocation failure is the OOM family).
    Where the log gives the device memory in use (HabanaMemoryProfiler's "(U/T used)"), the
    finding says how much was free."""
    d = merged_data(failures)
    module, msg = d.get("module", "?"), d.get("message", "")
    used, total = run.facts.get("hpu_used_gib"), run.value("gpu_total_gib")
    facts = {"exception": "HPU fatal error", "module": module, "message": msg[:300]}
    held = ""
    if isinstance(used, (int, float)) and isinstance(total, (int, float)) and total > 0:
        facts.update(hpu_used_gib=used, gpu_total_gib=total)
        held = f"{used:.2f} of {total:.2f} GiB of device memory was in use before it"
    rem = [
        remedy(
            "Check that the Intel Gaudi software release (driver, SynapseAI, its PyTorch bridge) and the Gaudi "
            "generation are ones this vLLM build supports (its README's support matrix)",
            None,
            f"MODULE:{module} is Gaudi's own software stack",
            "host",
        ),
        remedy(f"Look up '{msg[:80]}' with your vLLM build, Gaudi software and device"),
        constraints(run).set_unless_done(
            "enforce_eager",
            True,
            "Rerun with --enforce-eager to rule out HPU graphs",
            "PT_LAZY is the bridge's lazy-mode graph execution",
            None,
        )
        if module.endswith("LAZY")
        else None,
    ]
    why = held or "the failure is not an allocation"
    title = f"{phase.capitalize()} failure: Gaudi software stack fatal error ({module}): {msg[len(module) + 8 :][:90]}"
    return _finding(
        run,
        failures,
        phase,
        title,
        facts,
        "the error",
        rem,
        [f"Memory tuning (gpu_memory_utilization, max_model_len, quantization): {why}"],
        forbids=[("gpu_memory_utilization", "lower", why), ("max_model_len", "lower", why)],
    )


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    if not failures:
        return []
    device = [f for f in failures if f.kind == "no_device"]
    sure = [f for f in device if not f.data.get("probe")]
    if not sure and (run.value("platform") or any(f.kind not in ("no_device", "traceback") for f in run.failures)):
        # a platform was found, or something else failed with its own message: the probe's
        # words were no failure (a traceback cut before its exception names nothing else)
        device = []
    if device and run.phase < Phase.READY:
        return [_no_device(run, sure or device)]
    # A server that came up had its accelerator: a warning about one (a process that needs
    # no GPU) is no failure of it.
    failures = [f for f in failures if f.kind != "no_device"]
    if not failures:
        return []
    # An OOM that is no shortage or was raised outside vLLM (rules/oom_provenance.py).
    provenance = oom_provenance.findings(RULE, run, [f for f in failures if f.kinds & MEMORY_KINDS], phase)
    if provenance:
        return provenance
    host = [f for f in failures if f.kind == "host_oom"]
    if host:
        memory = [f for f in host if f.data.get("killer") != "signal"]
        # a bare SIGKILL is memory only where another line of the run says so
        return [_host_memory(run, memory, phase) if memory else _killed_by_signal(run, host, phase)]
    hpu = [f for f in failures if f.data.get("exception") == "HPU fatal error"]
    if hpu and hpu[0] is failures[0]:
        return [_hpu_fatal(run, hpu, phase)]
    scratch = [f for f in failures if f.data.get("form") == "xla-compile" and f.data.get("memory_space")]
    if scratch:
        return [_compile_limit(run, scratch, phase)]
    refused = [f for f in failures if f.kind == "cli_error"]
    if refused and refused[0] is failures[0]:
        return [_launch_rejected(run, refused)]
    unsupported = [f for f in failures if f.kind == "unsupported"]
    if unsupported and unsupported[0] is failures[0]:
        return [_unsupported(run, unsupported, phase)]
    f = failures[0]
    if f.data.get("exception") == "ROCm HSA error":
        return [_rocm_fault(run, failures, phase)]
    if f.data.get("exception") == "Neuron compiler error":
        return [_neuron_compile(run, failures, phase)]
    if f.data.get("exception") == "HIP runtime compilation error":
        return [_hip_rtc(run, failures, phase)]
    name = f.data.get("exception") or f.exception or "error"
    msg = f.data.get("message", "")
    facts = {"exception": name, "message": msg[:300]}
    if nccl_setup_error(name, msg):
        return [_nccl(run, failures, phase, facts)]
    words = device_words(run, failures)
    cuda = name in ("CUDA error", "NCCL error") and bool(words["blocking"])
    blocking, synced = env_todo(run, words["blocking"])
    graphs = words["graphs"]
    find = (
        f"Rerun with {blocking} to find the failing kernel"
        if blocking
        else f"Read the failing kernel off the traceback: it ran synchronously ({'; '.join(synced)})"
    )
    rem = [
        remedy(f"Look up '{name}: {msg[:80]}' for your {words['versions']}"),
        constraints(run).set_unless_done(
            "enforce_eager",
            True,
            f"{find}; try --enforce-eager to rule out {graphs}",
            None,
            f"{find} ({graphs} are already ruled out)",
        )
        if cuda
        else None,
    ]
    title = f"{phase.capitalize()} failure: {name}" + (f": {msg[:100]}" if msg else "")
    allocation = allocation_words(f"{name}: {msg}")
    if allocation:
        # an allocation the runtime refused without saying it was memory (XPU OUT_OF_RESOURCES)
        rem.insert(
            0,
            remedy(
                f"The {words['device']} runtime ran out of a device resource, most often its memory: check what the "
                f"device holds, then try a smaller context or batch, or a smaller model",
                None,
                "the error does not say which resource ran out",
            ),
        )
    dont = [] if allocation else ["Memory tuning: this failure is not about capacity"]
    return [_finding(run, failures, phase, title, facts, "the error", rem, dont)]


#: NCCL's own failures outside CUDA (``ncclGetErrorString``, nccl src/init.cc): ``ncclSystemError``
#: "unhandled system error" (a system call: sockets, shared memory, /dev/shm), ``ncclRemoteError``
#: "remote process exited or there was a network error", ``ncclInternalError`` "internal error",
#: ``ncclInvalidUsage`` / ``ncclInvalidArgument`` "invalid usage" / "invalid argument". Not
#: ``ncclUnhandledCudaError`` ("unhandled cuda error"): a CUDA failure under NCCL, for the CUDA
#: remedies.
_NCCL_SETUP = regex.compile(
    r"(?i)unhandled system error|remote process exited|network error|internal error|invalid (?:usage|argument)"
    r"|ncclSystemError|ncclRemoteError|ncclInternalError|ncclInvalid"
)


def nccl_setup_error(name: str, msg: str) -> bool:
    """True when exception ``name: msg`` is NCCL failing outside CUDA (:data:`_NCCL_SETUP`): a
    communicator's system calls, network or usage, whose fixes are NCCL's environment, not CUDA
    graphs or memory."""
    text = f"{name}: {msg}"
    return "NCCL" in text and _NCCL_SETUP.search(text) is not None


def _nccl(run: Run, failures: Sequence[Failure], phase: str, facts) -> Finding:
    """NCCL failed in a system call, the network or its use (:func:`nccl_setup_error`), most
    often while the tensor-parallel communicators are built at startup. Remedies from NCCL's own
    docs (environment variables, troubleshooting: shared memory in containers, interfaces, P2P
    and InfiniBand) and vLLM's distributed troubleshooting (``NCCL_DEBUG=INFO``)."""
    msg = facts["message"]
    title = (
        f"{phase.capitalize()} failure: NCCL error: {msg[:100]}" if msg else f"{phase.capitalize()} failure: NCCL error"
    )
    nccl_debug = env_set(run, "NCCL_DEBUG", "INFO")
    paths, off = env_todo(run, "NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1")
    rem = [
        remedy(
            "Read the NCCL INFO lines before the error for the system call or connection that failed",
            None,
            f"the log ran with {nccl_debug}",
            "host",
        )
        if nccl_debug
        else remedy(
            "Rerun with NCCL_DEBUG=INFO in the environment of every process (the engine and its workers): NCCL "
            "then prints the system call or connection that failed",
            None,
            "NCCL says only that a system call, the network or its use failed",
            "host",
        ),
        remedy(
            "In a container, give NCCL enough shared memory: docker run --ipc=host (or a larger --shm-size); on "
            "Kubernetes mount an emptyDir with medium: Memory at /dev/shm",
            None,
            "the default 64 MiB /dev/shm is too small for NCCL's buffers between GPUs of one host",
            "host",
        ),
        remedy(
            "Across hosts, name the network interface NCCL should use: NCCL_SOCKET_IFNAME=<interface> (the one "
            "the hosts reach each other on; also GLOO_SOCKET_IFNAME)",
            None,
            f"the log sets {env_set(run, 'NCCL_SOCKET_IFNAME')}: check it is that interface"
            if env_set(run, "NCCL_SOCKET_IFNAME")
            else None,
            "host",
        ),
        remedy(
            "To rule out the GPU-to-GPU paths, try once with " + ", then ".join(paths.split()) + " (slower; a "
            "diagnosis, not the fix)",
            None,
            f"already off: {'; '.join(off)}" if off else None,
            "host",
        )
        if paths
        else None,
    ]
    why = "NCCL failed outside the GPU's memory and kernels"
    dont = [
        f"Memory tuning (gpu_memory_utilization, max_model_len): {why}",
        f"--enforce-eager or CUDA_LAUNCH_BLOCKING=1: {why}",
    ]
    if off and not paths:
        dont.append(f"Turning off the GPU-to-GPU paths: already off ({'; '.join(off)})")
    forbids = [(s, "lower", why) for s in ("gpu_memory_utilization", "max_model_len", "max_num_seqs")]
    return _finding(run, failures, phase, title, facts, "the error", rem, dont, forbids=forbids)


#: Words of an allocation that failed: a message holding one is never said to be "not about
#: capacity" (the accelerator runtimes' out-of-memory wordings, catalog/oom.py, reach here only
#: where a wording is not yet known or its provenance sent it here).
_ALLOCATION = regex.compile(
    r"(?i)out of (?:device )?memory|\bOOM\b|allocat(?:e|ion|ing)\b.{0,40}\b(?:fail|not possible)|failed to allocate"
    r"|Allocation Failure|OUT_OF_(?:DEVICE_MEMORY|RESOURCES)|RESOURCE_EXHAUSTED|rtMalloc|EL0004|memory_allocation"
)


def allocation_words(text: str) -> bool:
    """True when ``text`` says an allocation failed (any accelerator's wording)."""
    return bool(_ALLOCATION.search(text))


def _launch_rejected(run: Run, failures: Sequence[Failure]) -> Finding:
    """The launch command refused by the argument parser (rules/launch_rejected.py): the
    command's fix, no memory setting."""
    why = "the server stopped at its command line, before it allocated anything"
    return _finding(
        run,
        failures,
        "startup",
        launch_rejected.title(failures),
        launch_rejected.facts(failures),
        "the refusal",
        launch_rejected.remedies(run, failures),
        [f"Memory settings (gpu_memory_utilization, max_model_len): {why}"],
        forbids=[("gpu_memory_utilization", "lower", why), ("max_model_len", "lower", why)],
    )


def _unsupported(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """A feature combination the release refuses (catalog/validation.py ``unsupported``): drop
    the flag that asks for it, or use what the message offers instead; no memory setting."""
    d = merged_data(failures)
    facts = {k: d[k] for k in ("variant", "exception", "message") if k in d}
    feature, flag, instead = UNSUPPORTED.get(d.get("variant"), ("this feature", "the flag that asks for it", ""))
    title = f"Startup failed: {feature} is not supported by this release: drop {flag}"
    rem = [
        remedy(f"Drop {flag} from the launch command", None, f"vLLM refuses {feature} with this configuration"),
        remedy(f"Or use {instead}", None, "what this release supports instead; the sizes in force are not in the log")
        if instead
        else None,
    ]
    why = "vLLM refused the configuration before it allocated anything"
    return _finding(
        run,
        failures,
        "startup",
        title,
        facts,
        "the refusal",
        rem,
        [f"Memory settings (gpu_memory_utilization, max_model_len): {why}"],
        forbids=[("gpu_memory_utilization", "lower", why), ("max_model_len", "lower", why)],
    )


#: The attention backends a ROCm log may show in force, with the switch that turns each off
#: (vllm/envs.py VLLM_ROCM_USE_AITER*; vllm/platforms/rocm.py; --attention-backend in 0.11+,
#: VLLM_ATTENTION_BACKEND before).
_ROCM_BACKENDS = regex.compile(r"\b(?P<b>ROCM_AITER_\w+|AITER\w*|ROCM_FLASH|TRITON_MLA|ROCM_ATTN)\b")


def _rocm_fault(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """A GPU kernel fault on ROCm (catalog/errors.py ``rocm_hsa_error``: HSA_STATUS_ERROR_*): the
    kernel, most often an attention kernel (AITER's), not the memory. First another attention
    backend (the AITER switch where the log shows AITER in force), then the failing kernel found
    with ROCm's serialised launches, then look-ups with the ROCm versions."""
    d = merged_data(failures)
    status = d.get("status_name", "HSA_STATUS_ERROR")
    facts = {k: d[k] for k in ("exception", "message", "status_name", "hsa_code") if k in d}
    backend = run.value("attention_backend")
    shown = str(backend) if backend else None
    if shown is None:
        shown = next(
            (m["b"] for line in run_lines(run, failures) for m in [_ROCM_BACKENDS.search(line)] if m is not None), None
        )
    if shown:
        facts["attention_backend"] = shown
    aiter_off = env_set(run, "VLLM_ROCM_USE_AITER", "0")
    if aiter_off:
        first = remedy(
            "Try another attention backend: --attention-backend TRITON_ATTN (TRITON_MLA for an MLA model)"
            + (
                f"; the log shows {shown}: check that the AITER switch reaches the engine's environment"
                if shown and "AITER" in shown.upper()
                else ""
            ),
            None,
            f"AITER is already off ({aiter_off}); a hardware exception in a kernel is most often the attention "
            "kernel on long or unusual shapes",
        )
    elif shown and "AITER" in shown.upper():
        first = remedy(
            f"Switch off the AITER kernels the log shows ({shown}): VLLM_ROCM_USE_AITER=0, or another attention "
            "backend (--attention-backend TRITON_MLA for an MLA model, TRITON_ATTN otherwise)",
            None,
            "a hardware exception in a kernel is most often the attention kernel on long or unusual shapes",
        )
    else:
        first = remedy(
            "Try another attention backend: VLLM_ROCM_USE_AITER=0 if AITER is on (vLLM's ROCm default in "
            "recent releases), or --attention-backend TRITON_ATTN (TRITON_MLA for an MLA model)",
            None,
            "a hardware exception in a kernel is most often the attention kernel on long or unusual shapes",
        )
    serial, serialised = env_todo(run, "AMD_SERIALIZE_KERNEL=3 HIP_LAUNCH_BLOCKING=1")
    rem = [
        first,
        remedy(
            (
                f"Rerun with {serial} to find the failing kernel"
                if serial
                else "Read the failing kernel off the traceback"
            )
            + "; cap --max-model-len below the request length that crashed if it only happens on long prompts",
            None,
            "the length that crashed is not in the log's error lines"
            + (f"; the kernels already ran serialised ({'; '.join(serialised)})" if serialised else ""),
        ),
        remedy(f"Look up '{status}' with your vLLM, PyTorch and ROCm versions (and the AITER commit)"),
    ]
    title = f"{phase.capitalize()} failure: ROCm GPU kernel fault ({status}): not an out-of-memory"
    why = "a kernel fault, not a lack of memory"
    return _finding(
        run,
        failures,
        phase,
        title,
        facts,
        "the error",
        rem,
        [f"Memory tuning (gpu_memory_utilization, max_num_seqs): {why}"],
        forbids=[("gpu_memory_utilization", "lower", why)],
    )


def _hip_rtc(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """ROCm's runtime compiler found no GPU architecture to compile a kernel for (catalog/errors.py
    ``hip_runtime_compile_failed``): the GPU's gfx arch is not one the ROCm / PyTorch build
    targets; a kernel only some models use (compiled at run time) is the first to need it. The
    arch the build targets first (a matching image or wheel, PYTORCH_ROCM_ARCH when building),
    then HSA_OVERRIDE_GFX_VERSION for a close supported arch, then a look-up."""
    d = merged_data(failures)
    facts = {k: d[k] for k in ("exception", "message") if k in d}
    override = env_set(run, "HSA_OVERRIDE_GFX_VERSION")
    arch = env_set(run, "PYTORCH_ROCM_ARCH")
    rem = [
        remedy(
            "Run a ROCm / PyTorch / vLLM build that targets this GPU's architecture: compare the gfx arch "
            "`rocminfo` names with torch.cuda.get_arch_list, and use an image or wheels built for it; "
            "PYTORCH_ROCM_ARCH=gfxNNNN when building PyTorch or vLLM from source"
            + (f"; the log shows {arch}: check it names this GPU's arch" if arch else ""),
            None,
            "the runtime compiler had no architecture to generate code for: the build does not know this GPU",
            "host",
        ),
        None
        if override
        else remedy(
            "Or, for a GPU close to one the build supports, HSA_OVERRIDE_GFX_VERSION set to that arch, e.g. 11.0.0 "
            "for an RDNA3 gfx11 part: it runs the other arch's code on this GPU, so test the output",
            None,
            None,
            "host",
        ),
        remedy(
            "Look up 'hip runtime failed to load' with your ROCm, PyTorch and vLLM versions and the model: the kernel "
            "compiled at run time is one only some models use"
            + (f" (the log shows {override}: that override does not reach this kernel)" if override else ""),
        ),
    ]
    title = (
        f"{phase.capitalize()} failure: ROCm's runtime compiler found no GPU architecture to compile for (the "
        "GPU's gfx arch is not one the ROCm / PyTorch build targets): not an out-of-memory"
    )
    why = "a compiler failure, not a lack of memory"
    return _finding(
        run,
        failures,
        phase,
        title,
        facts,
        "the error",
        rem,
        [f"Memory tuning (gpu_memory_utilization, max_model_len): {why}"],
        forbids=[("gpu_memory_utilization", "lower", why), ("max_model_len", "lower", why)],
    )


def _neuron_compile(run: Run, failures: Sequence[Failure], phase: str) -> Finding:
    """neuronx-cc failed compiling the model for the NeuronCores (catalog/errors.py
    ``neuron_cc_failed``): its own log holds the reason; the compiled shapes follow
    max_model_len, max_num_seqs and the cores the model is split over."""
    d = merged_data(failures)
    facts = {k: d[k] for k in ("exception", "message", "target") if k in d}
    c = constraints(run)
    rem = [
        remedy(
            "Read neuronx-cc's own log for the reason (log-neuron-cc.txt in the compile work directory the "
            "command names, under /tmp/<user>/neuroncc_compile_workdir/)",
            None,
            "the wrapper prints only that the compilation failed",
            "host",
        ),
        remedy(
            "Check that neuronx-cc, the Neuron runtime and the model library (transformers-neuronx or NxD "
            "Inference) are from one Neuron SDK release that this vLLM build supports",
            None,
            None,
            "host",
        ),
        c.halve(
            "max_model_len",
            "Compile smaller graphs: lower max_model_len (and max_num_seqs)",
            "the Neuron graphs are compiled for max_model_len x max_num_seqs",
            printed_only=True,
        ),
    ]
    title = f"{phase.capitalize()} failure: the Neuron compiler (neuronx-cc) failed compiling the model"
    why = "the Neuron loader does not use it"
    return _finding(
        run,
        failures,
        phase,
        title,
        facts,
        "the error",
        rem,
        [f"gpu_memory_utilization: {why}"],
        forbids=[("gpu_memory_utilization", "lower", why), ("gpu_memory_utilization", "raise", why)],
    )


def run_lines(run: Run, failures: Sequence[Failure]):
    """The texts of the failures' lines and of the run's configuration lines (bounded)."""
    for f in failures:
        for line in f.lines:
            yield line.text
    for line in list(run.config_lines.values())[:64]:
        yield line.text


RULE = Rule(
    code="VD900",
    name="other",
    severity="critical",
    summary="A failure that is not a memory or slowdown problem; the exception is named.",
    doc=__doc__,
    check=check,
)
