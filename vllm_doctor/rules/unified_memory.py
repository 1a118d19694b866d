"""Unified memory: devices whose "GPU memory" is the host's RAM, where a host kill is a GPU setting.

On an integrated GPU the accelerator and the CPU share one pool of DRAM: NVIDIA Jetson (Orin,
Xavier: the Tegra SoCs), NVIDIA GB10 (DGX Spark: 128 GB of LPDDR5x shared by the Grace CPU and
the Blackwell GPU), AMD APUs (Strix Halo, gfx1151 / gfx1150: Radeon 8060S / 890M), and Apple
silicon. There ``gpu_memory_utilization`` x total is taken out of the host's RAM, and V0's
``swap_space`` CPU blocks (4 GiB per GPU by default) come out of the same pool: the kernel's
OOM killer that reaps the process after KV sizing is reaping what those two settings asked for.
Lowering both is then the fix, never "does not help" (fixtures/logs u19: a Jetson Orin NX 16G
killed right after "# GPU blocks: 11836, # CPU blocks: 4681", 946.88x the concurrency its
``max_num_seqs`` x ``max_model_len`` needs).

:data:`DEVICES` is the table; :func:`device_family` reads it over what the run keeps (a GPU
name an error printed, the platform, the launch command, a ``unified_memory`` marker a catalog
pattern may set); :func:`after_kv_sizing` tells a kill right after the KV cache was sized.

Sources: NVIDIA Jetson developer guide (Orin memory architecture: "the CPU and GPU share system
memory"); NVIDIA DGX Spark hardware overview (GB10, 128 GB unified LPDDR5x); AMD Ryzen AI Max
(Strix Halo) product pages; vllm/worker/cache_engine.py (V0 CPU blocks are pinned host memory);
vllm/config (``swap_space`` 4 GiB default, V0).
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Tuple

import regex

from ..events import Phase
from ..run import Run
from .rule import remedy

#: ``(pattern, family)``: the words a log prints for a device whose GPU memory is host RAM.
DEVICES: Tuple[Tuple[Any, str], ...] = tuple(
    (regex.compile(p, regex.IGNORECASE), name)
    for p, name in (
        (r"\bjetson\b|\bagx orin\b|\borin\b|\btegra\b|\bxavier\b|\bl4t\b|\bjetpack\b", "NVIDIA Jetson (Tegra)"),
        (r"\bgb10\b|\bdgx spark\b", "NVIDIA GB10 (DGX Spark)"),
        (r"\bgfx115[01]\b|\bstrix halo\b|\bradeon 8060s\b|\bradeon 890m\b|\bryzen ai max\b", "an AMD APU"),
        (r"\bunified memory\b|\bintegrated gpu\b", "a unified-memory device"),
    )
)


def device_family(texts: Iterable[Optional[str]]) -> Optional[str]:
    """The :data:`DEVICES` family the first matching text names, else None."""
    for t in texts:
        if not t:
            continue
        for pattern, name in DEVICES:
            if pattern.search(t):
                return name
    return None


def _texts(run: Run) -> List[Optional[str]]:
    out: List[Optional[str]] = [str(run.value(k) or "") for k in ("gpu_name", "platform", "device_name")]
    out += [str(f.data.get("gpu_name") or "") for f in run.failures]
    for key in ("unified_memory", "launch_command"):
        line = run.markers.get(key)
        if line is not None:
            out.append(line.text)
    return out


def unified_device(run: Run) -> Optional[str]:
    """The unified-memory device family the run's log names (:func:`device_family`), else None."""
    return device_family(_texts(run))


def after_kv_sizing(run: Run) -> bool:
    """The run had sized its KV cache (``# GPU blocks``, a KV capacity, the KV sizing step) and
    served nothing: what it allocated next is the cache and V0's CPU swap blocks."""
    sized = run.value("gpu_blocks") is not None or run.value("kv_tokens") is not None or run.phase >= Phase.KV_SIZING
    return sized and run.phase < Phase.READY and not run.stats.count


def kill_remedies(run: Run) -> Tuple[List[Any], Optional[str]]:
    """Remedies for a kill right after KV sizing where GPU memory may be host RAM, and the
    device family the log names (None: the remedy is conditional on the device). [] when the
    run had not sized its KV cache."""
    if not after_kv_sizing(run):
        return [], None
    family = unified_device(run)
    conc = run.value("max_concurrency")
    seqs = run.value("max_num_seqs")
    excess = f"; the KV cache was sized for {conc:g}x the concurrency of one max-length request" if conc else ""
    if seqs and conc:
        excess += f" while max_num_seqs is {seqs}"
    cpu = run.value("cpu_blocks")
    where = (
        f"on {family} the GPU's memory is the host's RAM"
        if family
        else "the device is not named in the log; on a unified-memory device (Jetson, GB10/DGX Spark, an AMD APU) the "
        "GPU's memory is the host's RAM"
    )
    lead = "" if family else "If this is a unified-memory device (Jetson, GB10/DGX Spark, an AMD APU): "
    rem = [
        remedy(
            f"{lead}{'l' if lead else 'L'}ower gpu_memory_utilization well below the default, to what the workload needs beside the OS and "
            "other processes (a small KV cache: max_num_seqs x max_model_len tokens)",
            None,
            f"{where}: the KV cache it sizes is taken out of the RAM the OOM killer watches{excess}; the total memory "
            "is not in the log, so no value can be worked out",
        ),
        remedy(
            f"{lead}{'s' if lead else 'S'}et swap_space 0 (V0's CPU swap blocks are pinned host RAM on top of it)",
            None,
            f"{cpu} CPU blocks were reserved" if cpu else "V0 reserves 4 GiB per GPU by default",
        )
        if run.engine != "v1"
        else None,
    ]
    return rem, family


def amend(run: Run, rem: List[Any], dont: List[str], forbids: List[Tuple[str, str, str]]):
    """A host-memory kill's ``(remedies, does_not_help, forbids)`` with :func:`kill_remedies`
    added when the run had sized its KV cache: first where the log names a unified-memory
    device, after the first remedy (find who killed it) otherwise; the GPU settings are then
    not "does not help" (only on a discrete GPU) and lowering them is not forbidden."""
    extra, family = kill_remedies(run)
    if not extra:
        return rem, dont, forbids
    rem = [*extra, *rem] if family else [*rem[:1], *extra, *rem[1:]]
    settings = ("gpu_memory_utilization", "swap_space")
    forbids = [f for f in forbids if f[0] not in settings]
    if family:
        dont = [d for d in dont if not d.startswith("GPU memory settings")]
    else:
        dont = [
            f"{d.split(':')[0]}: on a discrete GPU, whose memory is not the host's"
            if d.startswith("GPU memory settings")
            else d
            for d in dont
        ]
    return rem, dont, forbids
