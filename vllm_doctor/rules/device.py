"""Which accelerator a run ran on, so titles and remedies use its words.

vLLM's "Automatically detected platform X." says it where the log holds it; otherwise the
failure itself does: the paths of its frames and the wording of its errors
(:func:`vllm_doctor.catalog.platform.platform_in`: vllm_gaudi / hpu_* -> HPU, vllm_ascend /
torch_npu / CANN codes -> NPU, HSA / HIP -> ROCm, transformers_neuronx / nrt_* -> Neuron,
tpu_inference / jax -> TPU, UR_/ZE_RESULT_ -> XPU). A log that names none of them is CUDA's.
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Sequence

from ..catalog.platform import platform_in, platform_named, words
from ..run import Failure, Run

#: The ``backend`` an out-of-memory event names (catalog/oom.py), as a platform.
_BACKENDS = {"HIP": "rocm", "HPU": "hpu", "NPU": "npu", "TPU": "tpu", "XPU": "xpu", "NEURON": "neuron", "CUDA": "cuda"}


def _texts(failures: Iterable[Failure]) -> Iterable[str]:
    for f in failures:
        for key in ("message", "exception"):
            v = f.data.get(key)
            if isinstance(v, str):
                yield v
        for line in f.lines:
            yield line.text


def platform_of(run: Run, failures: Sequence[Failure] = ()) -> str:
    """The run's platform, a key of :data:`~vllm_doctor.catalog.platform.DEVICE_WORDS`: the
    platform vLLM printed, else the first failure's backend or the one its lines' paths and
    wordings name (the run's failures when ``failures`` is empty), else ``cuda``."""
    printed = platform_named(run.value("platform"))
    if printed:
        return printed
    pool = list(failures) or list(run.failures)
    for f in pool:
        b = f.data.get("backend")
        if isinstance(b, str) and _BACKENDS.get(b.upper(), "cuda") != "cuda":
            return _BACKENDS[b.upper()]
    for text in _texts(pool):
        found = platform_in(text)
        if found:
            return found
    return "cuda"


def device_words(run: Run, failures: Sequence[Failure] = ()) -> Dict[str, str]:
    """The words of the run's platform (:func:`platform_of`) for titles and remedies."""
    return words(platform_of(run, failures))


def is_cuda(run: Run, failures: Sequence[Failure] = ()) -> bool:
    """True when nothing in the run names another platform than NVIDIA's CUDA."""
    return platform_of(run, failures) == "cuda"


def platform_name(run: Run, failures: Sequence[Failure] = ()) -> Optional[str]:
    """The platform's vendor name for a title ("AMD ROCm", "Intel Gaudi"), None for CUDA."""
    p = platform_of(run, failures)
    return None if p == "cuda" else words(p)["vendor"]
