"""Workers killed for HOST memory (RAM), which is not a GPU out-of-memory.

A vLLM worker can die because the machine ran out of RAM: sleep mode offloading weights to
CPU, many engines on one node, a large ``swap_space`` / ``cpu_offload_gb``. The killer is
then Ray's memory monitor, the kernel's OOM killer or the container runtime, and the remedy
is about host memory, never ``gpu_memory_utilization``. Each message below becomes a
``host_oom`` event whose data names the ``killer`` (``ray``, ``kernel``, ``cgroup``,
``kubernetes``; ``torch-cpu-allocator`` when an allocation was refused rather than a process killed) and, where printed, the ``pid`` and ``process`` killed and the host memory
(``host_used_gib``, ``host_total_gib``, ``host_usage_fraction``, ``threshold``,
``process_used_gib``, ``anon_rss_gib``).

Sources:

* Ray raylet memory monitor (``src/ray/raylet/node_manager.cc``, worker killing policy),
  raised to the caller as ``ray.exceptions.OutOfMemoryError``: ``Task was killed due to the
  node running low on memory.`` / ``N worker(s) were killed due to the node running low on
  memory.``, then ``Memory on the node (IP: X, ID: Y) where the task (task ID: ..., name=N,
  pid=P, memory used=U GB) was running was A GB / B GB (F), which exceeds the memory usage
  threshold of T.`` (newer Ray: ``where the lease (lease ID: ...``), a ``Top 10 memory users``
  table and ``Refer to the documentation on how to address the out of memory issue:
  https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html``; the raylet's
  periodic ``N Workers (tasks / actors) killed due to memory pressure (OOM)``. Ray prints
  "GB" for values that match the node's MemTotal in GiB (a 64 GiB node shows ``62.51GB``
  total): they are read as GiB.
* Linux ``mm/oom_kill.c``: ``Out of memory: Killed process P (comm) total-vm:..kB,
  anon-rss:..kB, ...`` (``Memory cgroup out of memory: ...`` when a cgroup limit was hit; old
  kernels ``Out of memory: Kill process P (comm) score S or sacrifice child``), the
  ``oom-kill:constraint=...,task=comm,pid=P,uid=U`` summary and ``invoked oom-killer:``.
* PyTorch's CPU allocator refusing an allocation (``c10/core/impl/alloc_cpu.cpp``): ``DefaultCPUAllocator:
  not enough memory: you tried to allocate N bytes.`` (older ``can't allocate memory: you tried to
  allocate N bytes. Error code 12 (Cannot allocate memory)``): ``killer`` ``torch-cpu-allocator``;
* Kubernetes container status ``OOMKilled`` (``kubectl describe pod``, ``kubectl get pod -o
  json``): the container exceeded its memory limit.

* A process killed by SIGKILL, as the job runner or the container runtime reports it: exit code
  137 (128 + 9) or -9 (Python's ``Popen.returncode`` / ``multiprocessing`` exitcode for a
  signal), or signal 9 by name. Databricks: ``The Python process exited with exit code 137
  (SIGKILL). This may have been cause by OOM error.``; Docker: ``docker compose`` ``vllm-1
  exited with code 137``, ``docker ps`` ``Exited (137)``; Kubernetes: ``kubectl describe pod``
  ``Exit Code:    137``, ``kubectl exec`` ``command terminated with exit code 137``; torch
  elastic (torchrun): ``failed (exitcode: -9) local_rank: 0 (pid: N) of binary: ...``; systemd:
  ``vllm.service: Main process exited, code=killed, status=9/KILL``; a shell: ``Killed`` alone,
  or ``script.sh: line 3:  1234 Killed   vllm serve ...``. SIGKILL is what the OOM killer sends,
  but also ``docker stop`` after its grace period, a scheduler's time limit or an operator: the
  event is ``killer`` ``signal`` unless the same text says it was memory (Databricks' "may have
  been cause[d] by OOM error": ``job-runner``), with ``exit_code`` and ``reporter``.
* Memory limits by name: Slurm's ``slurmstepd: error: Detected 1 oom-kill event(s) in StepId=N.0.
  Some of your processes may have been killed by the cgroup out-of-memory handler.`` and ``srun:
  error: node01: task 0: Out Of Memory`` (``cgroup``); systemd's ``vllm.service: A process of
  this unit has been killed by the OOM killer.`` and ``vllm.service: Failed with result
  'oom-kill'.`` (``kernel``).

Ray's generic ``A worker died or was killed while executing a task`` boilerplate lists the OOM
killer only as one possible cause: it is an ``engine_dead`` marker (``catalog/errors.py``),
not evidence of a host OOM.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import regex

from .pattern import NO_CUT, Pattern

_WHO = regex.compile(r"pid=(?P<pid>\d+)|memory used=(?P<used>\d+(?:\.\d+)?) ?GB|name=(?P<name>[^,)]+)")


def _ray_kill(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"killer": "ray"}
    if m["n"]:
        data["workers_killed"] = int(m["n"])
    return data


def _ray_node(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"killer": "ray"}
    for key, group in (
        ("host_used_gib", "used"),
        ("host_total_gib", "total"),
        ("host_usage_fraction", "frac"),
        ("threshold", "thr"),
    ):
        if m[group]:
            data[key] = float(m[group])
    for w in _WHO.finditer(m["who"] or ""):
        if w["pid"]:
            data["pid"] = int(w["pid"])
        elif w["used"]:
            data["process_used_gib"] = float(w["used"])
        elif w["name"]:
            data["process"] = w["name"].strip()
    if m["ip"]:
        data["node_ip"] = m["ip"]
    return data


def _raylet_summary(m, rec) -> Dict[str, Any]:
    return {"killer": "ray", "workers_killed": int(m["n"])}


def _kernel(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"killer": "cgroup" if m["scope"].startswith("Memory cgroup") else "kernel"}
    if m["pid"]:
        data["pid"] = int(m["pid"])
    if m["comm"] is not None:
        data["process"] = m["comm"]
    if m["anon"]:
        data["anon_rss_gib"] = int(m["anon"]) / 2**20
    return data


def _oom_kill_summary(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {}
    if m["constraint"]:  # which limit was hit; unknown when the text ends inside its name
        data["killer"] = "cgroup" if m["constraint"] == "CONSTRAINT_MEMCG" else "kernel"
    if m["comm"]:
        data["process"] = m["comm"]
    if m["pid"]:
        data["pid"] = int(m["pid"])
    return data


#: Words in the same record that say a kill was for memory.
_SAYS_OOM = regex.compile(r"\b(?:OOM|[Oo]ut of memory|OOMKilled|oom-kill)\b")


def _killed(reporter: str):
    """A SIGKILL as ``reporter`` prints it: ``signal`` unless the record itself says memory."""

    def build(m, rec) -> Dict[str, Any]:
        says_oom = bool(_SAYS_OOM.search(m.string, m.end()))
        data: Dict[str, Any] = {"killer": "job-runner" if says_oom else "signal", "reporter": reporter}
        code = m.groupdict().get("code")
        if code:
            data["exit_code"] = int(code)
        data["signal"] = "SIGKILL"
        return data

    return build


def _lmcache_config(m, rec) -> Optional[Dict[str, Any]]:
    """LMCache's configuration: the CPU buffer each worker (each TP rank) pins in host RAM, in
    LMCache's GB (``max_local_cpu_size``, LMCACHE_MAX_LOCAL_CPU_SIZE), where ``local_cpu`` is on."""
    if m["local_cpu"] == "False":
        return None  # no CPU backend: no buffer
    return {"lmcache_local_cpu_gb": float(m["size"])}


PATTERNS = [
    # LMCache (its own logger inside vLLM's worker prefixes, LMCacheConnectorV1): the CPU buffer
    # size from its configuration, then the engine's creation, which allocates it (pinned) per worker.
    Pattern(
        "lmcache_configuration",
        "facts",
        ("LMCache Configuration:",),
        r"LMCache Configuration: \{(?:[^{}]*?'local_cpu': (?P<local_cpu>True|False),)?[^{}]*?'max_local_cpu_size': "
        r"'?(?P<size>\d+(?:\.\d+)?)\s*(?:GB)?'?[,}]",
        "LMCache lmcache/v1/config.py (LMCacheEngineConfig logged at start: 'LMCache Configuration: {..., "
        "'max_local_cpu_size': '300.0 GB', ...}'), via vLLM's LMCacheConnectorV1",
        None,
        _lmcache_config,
        cut_from=r"'max_local_cpu_size': '?\d+(?:\.\d+)?\s*(?:GB)?'?[,}]",  # the size whole
    ),
    Pattern(
        "lmcache_engine_created",
        "facts",
        ("LMCacheEngine instance",),
        r"Creating LMCacheEngine instance (?P<instance>[\w.-]+)",
        "LMCache lmcache/v1/cache_engine.py LMCacheEngineBuilder.get_or_create ('Creating LMCacheEngine instance "
        "%s'): the engine and its CPU buffer are allocated next",
        None,
        lambda m, rec: {"lmcache_engine": m["instance"]},
        NO_CUT,
    ),
    Pattern(
        "ray_memory_monitor_kill",
        "host_oom",
        ("killed due to the node running low on memory",),
        r"(?:Task was|(?P<n>\d+) worker\(s\) were) killed due to the node running low on memory",
        "ray raylet node_manager.cc memory monitor (ray.exceptions.OutOfMemoryError)",
        None,
        _ray_kill,
    ),
    Pattern(
        "ray_memory_monitor_node",
        "host_oom",
        ("which exceeds the memory usage threshold",),
        r"Memory on the node(?: \((?:IP: (?P<ip>[^,)\s]+))?[^)]*\))?"
        r"(?: where the (?:task|lease|actor)(?: \((?P<who>[^)]*)\))? was running)? was "
        r"(?P<used>\d+(?:\.\d+)?) ?GB / (?P<total>\d+(?:\.\d+)?) ?GB \((?P<frac>\d+(?:\.\d+)?)\),? which exceeds "
        r"the memory usage threshold of (?P<thr>\d+(?:\.\d+)?)(?=\.\s)",  # ". Ray killed this worker ..."
        "ray raylet node_manager.cc memory monitor (kill message detail)",
        None,
        _ray_node,
    ),
    Pattern(
        "ray_oom_prevention_docs",
        "host_oom",
        ("ray-oom-prevention",),
        r"how to address the out of memory issue: https://docs\.ray\.io/\S*ray-oom-prevention",
        "ray raylet memory monitor kill message (its closing sentence)",
        None,
        lambda m, rec: {"killer": "ray"},
    ),
    Pattern(
        "raylet_workers_killed_oom",
        "host_oom",
        ("killed due to memory pressure (OOM)",),
        r"(?P<n>\d+) Workers \(tasks / actors\) killed due to memory pressure \(OOM\)",
        "ray raylet node_manager.cc periodic worker-failure summary",
        None,
        _raylet_summary,
    ),
    Pattern(
        "kernel_oom_killer",
        "host_oom",
        ("Out of memory: Kill", "out of memory: Kill"),
        r"(?P<scope>Memory cgroup out of memory|Out of memory): Kill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]*)\)"
        r"(?:[^\n]*?anon-rss:(?P<anon>\d+)kB)?",
        "linux mm/oom_kill.c __oom_kill_process (dmesg / journalctl -k)",
        None,
        _kernel,
    ),
    Pattern(
        "kernel_oom_kill_summary",
        "host_oom",
        ("oom-kill:constraint=",),
        r"oom-kill:constraint=(?P<constraint>\w+)(?=[,\s])(?:[^\n]*?,task=(?P<comm>[^,\s]+),pid=(?P<pid>\d+)(?=\D))?",
        "linux mm/oom_kill.c dump_oom_summary",
        None,
        _oom_kill_summary,
    ),
    Pattern(
        "kernel_invoked_oom_killer",
        "host_oom",
        ("invoked oom-killer:",),
        r"(?P<comm>\S+) invoked oom-killer: gfp_mask",
        "linux mm/oom_kill.c dump_header",
        None,
        lambda m, rec: {"killer": "kernel", "invoked_by": m["comm"]},
    ),
    Pattern(
        "torch_cpu_allocator_oom",
        "host_oom",
        ("DefaultCPUAllocator:",),
        r"DefaultCPUAllocator: (?:not enough memory|can't allocate memory): you tried to allocate (?P<bytes>\d+) bytes",
        "pytorch c10/core/impl/alloc_cpu.cpp alloc_cpu",
        None,
        lambda m, rec: (
            {"killer": "torch-cpu-allocator", "tried_to_allocate_gib": int(m["bytes"]) / 2**30}
            if m["bytes"]
            else {"killer": "torch-cpu-allocator"}
        ),
    ),
    Pattern(
        "kubernetes_oomkilled",
        "host_oom",
        ("OOMKilled",),
        r"\bOOMKilled\b",
        "Kubernetes container state reason (kubectl describe pod / get pod -o json)",
        None,
        lambda m, rec: {"killer": "kubernetes"},
    ),
    Pattern(
        "exit_code_137",
        "host_oom",
        ("exit code 137", "exited with code 137", "exit status 137", "Exit Code:", "Exited (137)"),
        r"(?:\bexit(?:ed)?(?: with)?(?: exit)? (?:code|status)|Exit Code:|\bExited \()\s*(?P<code>137)\b",
        "Databricks job runner; docker compose / docker ps; kubectl describe pod / kubectl exec (128 + SIGKILL)",
        None,
        _killed("runner"),
        cut_from=r"137(?!\d)",  # the code whole: "Exit Code: 1" cut short is no 137
    ),
    Pattern(
        "torch_elastic_sigkill",
        "host_oom",
        ("exitcode: -9",),
        r"failed \(exitcode: (?P<code>-9)\)",
        "torch/distributed/elastic/multiprocessing/api.py (torchrun: a child's exitcode -9 is SIGKILL)",
        None,
        _killed("torchrun"),
        cut_from=r"exitcode: -9\)",
    ),
    Pattern(
        "systemd_sigkill",
        "host_oom",
        ("status=9/KILL",),
        r"Main process exited, code=killed, status=9/KILL",
        "systemd (service manager: the unit's main process was killed by signal 9)",
        None,
        _killed("systemd"),
    ),
    Pattern(
        "shell_killed",
        "host_oom",
        ("Killed",),
        r"^\s*Killed\s*$|: line \d+:\s+\d+\s+Killed\b|^\[\d+\][+-]?\s+Killed\b",
        "bash / sh job status of a child killed by SIGKILL ('Killed')",
        None,
        _killed("shell"),
    ),
    Pattern(
        "slurm_oom_kill",
        "host_oom",
        ("oom-kill event", "oom_kill event", ": Out Of Memory"),
        r"Detected (?P<n>\d+) oom[-_]kill events?(?:\(s\))?|srun: error: (?P<node>[^:\s]+): tasks? [\d,-]+: Out Of Memory",
        "slurm slurmstepd (task/cgroup: 'Detected %u oom-kill event(s) in %ps'); srun's task exit summary",
        None,
        lambda m, rec: {"killer": "cgroup", "reporter": "slurm", **({"node": m["node"]} if m["node"] else {})},
    ),
    Pattern(
        "systemd_oom_kill",
        "host_oom",
        ("killed by the OOM killer", "result 'oom-kill'"),
        r"A process of this unit has been killed by the OOM killer|Failed with result 'oom-kill'",
        "systemd (unit_log_failure / the kernel OOM killer's kill reported per unit)",
        None,
        lambda m, rec: {"killer": "kernel", "reporter": "systemd"},
    ),
]
