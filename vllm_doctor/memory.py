"""The memory arithmetic diagnoses share. All sizes in GiB (binary), as vLLM prints them.

How vLLM spends GPU memory (``shared/domain.md``): at startup it claims
``gpu_memory_utilization x total``; from that budget it subtracts the weights, the
activation peak of a profiling run and non-torch memory; the rest becomes KV cache.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .units import tidy


def split_processes(
    processes: Sequence[Tuple[Optional[int], float]],
    known_vllm_pids: Iterable[int] = (),
    pytorch_reserved_gib: Optional[float] = None,
) -> Tuple[Optional[Tuple[Optional[int], float]], List[Tuple[int, float]]]:
    """Split the processes a PyTorch OOM message lists into (vLLM's own, co-tenants).

    ``processes`` is the ordered ``(pid, GiB)`` list from the message, with pid None for
    the ``Including non-PyTorch memory, this process has ...`` clause. PyTorch prints
    ``Process N`` for every other PID NVML reports (``reportProcessMemoryInfo`` in
    ``c10/cuda/CUDACachingAllocator.cpp``). Inside a container NVML reports host PIDs,
    so the failing vLLM process itself often appears as ``Process N`` with no "this
    process" clause (``shared/vllm-messages.md`` 13a). The rules:

    * a ``this process`` clause identifies vLLM's process; every other PID that the log
      does not show as vLLM's own (``known_vllm_pids``) is a co-tenant;
    * without it, vLLM's process is the listed one whose memory is at least what this
      process has reserved through PyTorch (``pytorch_reserved_gib``: allocated plus
      reserved-but-unallocated), the smallest such; failing that, the largest; the
      others are co-tenants.

    Returns ``(own, co_tenants)`` with ``own`` None when nothing is listed.
    """
    known = set(known_vllm_pids)
    if not processes:
        return None, []
    own: Optional[Tuple[Optional[int], float]] = None
    for proc in processes:
        if proc[0] is None:
            own = proc
            break
    if own is None:
        listed = [p for p in processes if p[0] is not None]
        candidates = [p for p in listed if p[0] in known]
        if not candidates and pytorch_reserved_gib is not None:
            candidates = [p for p in listed if p[1] >= pytorch_reserved_gib * 0.99]
        if candidates:
            own = min(candidates, key=lambda p: p[1])
        else:
            own = max(listed, key=lambda p: p[1])
    others = [(p[0], p[1]) for p in processes if p is not own and p[0] is not None and p[0] not in known]
    return own, others  # type: ignore[return-value]


def gib_text(gib: float) -> str:
    """A size given in GiB in the unit PyTorch's message would print it in, as the facts show
    it: ``20.00 MiB`` below 1 GiB, ``2.63 GiB`` from 1 GiB (so a title and the facts under it
    never give one number in two units)."""
    return f"{gib * 1024:.2f} MiB" if abs(gib) < 1 else f"{gib:.2f} GiB"


def foreign_gib(co_tenants: Sequence[Tuple[int, float]]) -> float:
    """Total memory the co-tenants hold."""
    return sum(g for _, g in co_tenants)


def floor_tidy(value: float) -> int:
    """Round a token count down to a tidy value a person would type.

    >= 32768: a multiple of 4096 (a power of two where the value allows); >= 4096: of
    1024; >= 1024: of 256; smaller: of 16 (the default block size). Never rounds up.
    """
    v = int(math.floor(value))
    if v <= 0:
        return 0
    power = 1 << (v.bit_length() - 1)
    if power >= 32768 and v < power * 1.25:
        return power
    for threshold, step in ((32768, 4096), (4096, 1024), (1024, 256)):
        if v >= threshold:
            return v - v % step
    return max(16, v - v % 16) if v >= 16 else v


#: vLLM dtype names of 32-bit floats (``vllm/config/model.py`` ``ModelDType``).
FP32_DTYPES = frozenset({"float", "float32", "fp32"})
_PARAMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s?[Bb](?![a-zA-Z])")
_BITS = (
    ("awq", 4),
    ("gptq", 4),
    ("int4", 4),
    ("w4a16", 4),
    ("nvfp4", 4),
    ("fp4", 4),
    ("mxfp4", 4),
    ("bnb", 4),
    ("4bit", 4),
    ("fp8", 8),
    ("int8", 8),
    ("w8a8", 8),
    ("8bit", 8),
)


def model_weights_estimate(
    model: Optional[str], quantization: Optional[str], dtype: Optional[str]
) -> Optional[Dict[str, Any]]:
    """Weights size from a model name (``Qwen3-30B-A3B-GPTQ`` -> 30e9 params at 4 bits).

    Returns ``{"params_billion", "bits", "weights_gib_estimate"}`` or None when the name
    carries no parameter count. Total parameters count (an MoE's active share is not what
    memory holds). Bits come from the quantization named in the config or the model name,
    else from ``dtype`` (vLLM's ``float`` and ``float32`` are 32 bits:
    ``vllm/config/model.py`` ``_STR_DTYPE_TO_TORCH_DTYPE``), else 16 (the dtype of an
    unquantized checkpoint).
    """
    if not model:
        return None
    name = model.rsplit("/", 1)[-1]
    m = _PARAMS.search(name)
    if not m:
        return None
    params = float(m.group(1))
    low = f"{name} {quantization or ''} {dtype or ''}".lower()
    bits = next((b for key, b in _BITS if key in low), None)
    if bits is None:
        bits = 32 if str(dtype or "").lower() in FP32_DTYPES or "float32" in low else 16
    gib = params * 1e9 * bits / 8 / 2**30
    return {"params_billion": params, "bits": bits, "weights_gib_estimate": tidy(gib, 2)}


def utilization_floor(
    total_gib: float,
    held_gib: Optional[float] = None,
    tried_gib: Optional[float] = None,
    weights_gib: Optional[float] = None,
    overhead: float = 1.0,
) -> Optional[Tuple[float, str]]:
    """The smallest share of a ``total_gib`` device a gpu_memory_utilization must give, with
    why: at least what the failing process held and asked for when it ran out (``held_gib`` +
    ``tried_gib``: it needed that much, and more), and at least the weights (``weights_gib``
    per GPU, an estimate from the model's name, times ``overhead``). None when nothing is known.
    A lowered utilization under it cannot even load the model (hunt6 p19: 0.05 x 23.53 GiB =
    1.18 GiB offered to a 6B model)."""
    if not total_gib:
        return None
    needs = []
    if held_gib is not None or tried_gib is not None:
        needed = (held_gib or 0.0) + (tried_gib or 0.0)
        if needed > 0:
            what = "held and asked for" if held_gib else "asked for"
            needs.append((needed, f"{needed:.2f} GiB the process {what} when it ran out"))
    if weights_gib:
        needs.append((weights_gib * overhead, f"the weights, about {weights_gib * overhead:.1f} GiB"))
    if not needs:
        return None
    gib, why = max(needs)
    return gib / total_gib, why
