"""vLLM's defaults for the settings remedies change, by release, engine and GPU.

A remedy that lowers or raises a setting the log does not print must know what ran: vLLM's
default for that version, engine, entry point and GPU. Read from the releases' own source
(wheels 0.5.5 to 0.33.0: ``vllm/engine/arg_utils.py``, ``vllm/config.py`` /
``vllm/config/cache.py`` / ``vllm/config/scheduler.py``):

* ``gpu_memory_utilization``: 0.9 (``CacheConfig``) through 0.19.x; 0.92 from 0.20.0.
* ``max_num_seqs``: V0 256 (``EngineArgs``); V1 (0.8+, and opt-in V1 before it) by usage
  context and GPU (``EngineArgs._set_default_args_v1`` / ``get_batch_defaults``): 1024 on a GPU
  of at least 70 GiB that is not an A100 (nor, from 0.33, a GB10), 256 otherwise; the CPU
  backend 128 x world size for the API server.
* ``max_num_batched_tokens``: V1 API server 8192 on such a GPU (16384 from 0.28 on GPUs of at
  least 160 GiB), 2048 otherwise; the ``LLM`` class 16384 / 8192. V0: 2048 with chunked
  prefill (``_DEFAULT_MAX_NUM_BATCHED_TOKENS``; 512 before 0.6), else ``max(max_model_len,
  2048)``.

A default is a range (:class:`Default`): where the log does not say the version or the GPU,
every value that could have run is in it, so a "lower" goes below all of them and a "raise"
above all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

#: GPUs of at least this many GiB (and not an A100) get V1's large batch defaults.
LARGE_GPU_GIB = 70.0
#: From 0.28, GPUs of at least this many GiB get the largest ones.
HUGE_GPU_GIB = 160.0
#: An "80 GB" A100 reports about 79.2 GiB, as an H100 does, yet keeps the small defaults:
#: GPUs below this size may be either tier when the log does not name the GPU.
A100_80GB_GIB = 82.0


@dataclass(frozen=True)
class Default:
    """What vLLM would have used: ``low``..``high`` (equal when the log pins it down) and
    ``why``, whose default it is (the release / engine / GPU it assumes) as a phrase the value
    completes: ``{value}`` marks where the value goes (``"vLLM's V1 default {value} for the
    API server on a 79 GiB GPU"``), else it follows the phrase (``"V0's default"`` + ``256``).
    :meth:`vllm_doctor.rules.plan.Constraints.in_force` fills it in."""

    low: float
    high: float
    why: str

    @property
    def exact(self) -> bool:
        return self.low == self.high


def parse_version(text: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """``"0.10.2.dev378+g4d7fe40fc"`` -> (0, 10, 2); None when there is no version."""
    if not text:
        return None
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    return int(m[1]), int(m[2]), int(m[3] or 0)


def gpu_memory_utilization(version: Optional[str], engine: Optional[str] = None) -> Default:
    v = parse_version(version)
    if v is None and engine == "v0":  # V0 was removed in 0.11, long before 0.92 (0.20)
        return Default(0.9, 0.9, "vLLM's V0 default")
    if v is None:
        return Default(0.9, 0.92, "vLLM's default {value} (0.92 from vLLM 0.20)")
    if v >= (0, 20, 0):
        return Default(0.92, 0.92, f"vLLM {version}'s default")
    return Default(0.9, 0.9, f"vLLM {version}'s default")


def _tier(gpu_total_gib: Optional[float], v: Optional[Tuple[int, int, int]]) -> Tuple[bool, bool]:
    """(could be a large-tier GPU, could be a small-tier GPU) given what the log tells."""
    if gpu_total_gib is None:
        return True, True
    large = gpu_total_gib >= LARGE_GPU_GIB
    return large, (not large) or gpu_total_gib < A100_80GB_GIB


def max_num_seqs(version: Optional[str], engine: Optional[str], gpu_total_gib: Optional[float]) -> Default:
    v = parse_version(version)
    if engine == "v0" or (v is not None and v < (0, 8, 0) and engine != "v1"):
        return Default(256, 256, "V0's default")
    large, small = _tier(gpu_total_gib, v)
    low = 256 if small else 1024
    high = 1024 if large else 256
    if engine is None and v is None:
        # Either engine could have run (remedies3: hunt9 v19 got "V1's default" on a V0 run):
        # V0's 256 is within V1's range, so the range holds; the wording names neither.
        low = min(low, 256)
        return Default(
            low, high, f"vLLM's default {{value}} (V0's 256; V1's by GPU) for the API server on {_gpu(gpu_total_gib)}"
        )
    return Default(low, high, f"vLLM's V1 default {{value}} for the API server on {_gpu(gpu_total_gib)}")


def max_num_batched_tokens(
    version: Optional[str], engine: Optional[str], gpu_total_gib: Optional[float], offline: bool = False
) -> Optional[Default]:
    """None where the default depends on what the log does not show: V0 without chunked
    prefill uses max(max_model_len, 2048), and a log that shows neither the engine nor the
    version may be V0's."""
    v = parse_version(version)
    if engine == "v0" or (v is not None and v < (0, 8, 0) and engine != "v1"):
        return None
    if engine is None and v is None:
        return None  # V0 could have run, whose default is max_model_len's (remedies3: hunt9 v02, hunt10 w07)
    large, small = _tier(gpu_total_gib, v)
    huge = gpu_total_gib is not None and gpu_total_gib >= HUGE_GPU_GIB and (v is None or v >= (0, 28, 0))
    if offline:
        low, high = (8192 if small else 16384), (16384 if large else 8192)
    else:
        low = 2048 if small else 8192
        high = 16384 if huge else (8192 if large else 2048)
    where = "the LLM class" if offline else "the API server"
    return Default(low, high, f"vLLM's V1 default {{value}} for {where} on {_gpu(gpu_total_gib)}")


def _gpu(gpu_total_gib: Optional[float]) -> str:
    """The GPU a default assumes, in words: ``a 79 GiB GPU``."""
    return f"a {gpu_total_gib:.0f} GiB GPU" if gpu_total_gib else "a GPU of unknown size"


def batched_tokens_floor(
    version: Optional[str], engine: Optional[str], max_model_len: Optional[int], chunked_prefill: Optional[bool]
) -> Optional[Tuple[Optional[int], str]]:
    """The smallest ``max_num_batched_tokens`` vLLM starts with, and why; None when nothing
    but the count itself bounds it.

    Without chunked prefill vLLM refuses a step budget below ``max_model_len``:
    "max_num_batched_tokens (...) is smaller than max_model_len (...)" (``SchedulerConfig``:
    vllm/config.py ``_verify_args`` from 0.5.5 to 0.9.2, e.g. 0.6.4.post1:1158;
    vllm/config/scheduler.py ``verify_max_model_len`` from 0.10.2 to 0.33.0). Chunked prefill
    is on for V1 (always in 0.8-0.10, by default after) and off by default for V0 below a 32K
    context (vllm/engine/arg_utils.py ``create_engine_config``: only ``max_model_len > 32768``
    on a text model turns it on). So the floor is ``max_model_len`` where chunked prefill is
    printed off, or V0 (or an unnamed engine of a release that had V0, before 0.11) ran without
    it printed on; ``(None, why)`` when that floor applies but ``max_model_len`` is not known.
    """
    if chunked_prefill:
        return None
    v = parse_version(version)
    if chunked_prefill is None and (engine == "v1" or (v is not None and v >= (0, 11, 0))):
        return None
    if chunked_prefill is False:
        why = "chunked prefill is off"
    elif engine == "v0":
        why = "V0 runs without chunked prefill below a 32K context unless it is enabled"
    else:
        why = "the engine is not in the log, and V0 runs without chunked prefill below a 32K context"
    why += ", and vLLM then refuses a max_num_batched_tokens below max_model_len"
    return (int(max_model_len) if max_model_len else None), why
