"""No usable accelerator: the process sees no GPU, no driver, or a driver too old for its CUDA.

A container started without the GPU runtime (``docker run`` without ``--gpus``, a Kubernetes
pod without an ``nvidia.com/gpu`` limit or without the device plugin), a CPU-only PyTorch, or
a driver older than the CUDA the image was built for: vLLM fails before it loads anything,
and no memory setting changes it. Each message below becomes a ``no_device`` event whose
``form`` says which:

* ``no_platform``: vLLM found no platform at all (``vllm/platforms/__init__.py``
  ``resolve_current_platform_cls_qualname``: ``No platform detected, vLLM is running on
  UnspecifiedPlatform``, INFO up to 0.10, DEBUG from 0.11), then its device config fails
  (``vllm/config/device.py`` DeviceConfig: ``Failed to infer device type, please set the
  environment variable ...``; ``vllm/config.py`` up to 0.10: ``Failed to infer device
  type``), or torch does: ``Device string must not be empty`` (c10/core/Device.cpp, the
  empty device type of UnspecifiedPlatform).
* ``no_driver``: the NVIDIA driver is not in the process: ``Failed to import from vllm._C
  with ImportError('libcuda.so.1: cannot open shared object file ...')``
  (``vllm/_custom_ops.py``, ``vllm/platforms/interface.py``; only a missing ``libcuda`` or
  ``libnvidia-ml`` is this: another missing library is a build problem, left to the
  exception it raises), torch's ``Found no NVIDIA driver on your system``
  (``torch/cuda/__init__.py`` _check_driver), NVML's ``NVML Shared Library Not Found`` /
  ``Driver Not Loaded`` (pynvml NVMLError_LibraryNotFound / NVMLError_DriverNotLoaded).
* ``no_gpu``: a driver, but no device visible to the process: ``No CUDA GPUs are available``
  (``No HIP GPUs are available`` on ROCm; c10/cuda/CUDAFunctions.cpp
  device_count_ensure_non_zero), ``no CUDA-capable device is detected`` (cudaErrorNoDevice),
  ``CUDA driver initialization failed, you might not have a CUDA gpu``
  (c10/cuda/CUDAFunctions.cpp, cudaErrorInitializationError).
* ``driver_too_old``: ``The NVIDIA driver on your system is too old (found version N)``
  (``torch/cuda/__init__.py`` _check_driver), ``CUDA driver version is insufficient for
  CUDA runtime version`` (cudaErrorInsufficientDriver), ``Error 803: system has unsupported
  display driver / cuda driver combination`` and ``Error 804: forward compatibility was
  attempted on non supported HW`` (torch's ``CUDA initialization: Unexpected error from
  cudaGetDeviceCount()`` warning).
* ``cpu_torch``: ``Torch not compiled with CUDA enabled`` (``torch/cuda/__init__.py``
  _lazy_init): a CPU-only PyTorch build is installed.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import regex

from .pattern import NO_CUT, Pattern


def _form(form: str, probe: bool = False):
    """Build a ``no_device`` event of ``form``; ``probe`` marks a message vLLM also prints while
    it probes for platforms on a machine that has another one (NVML missing on ROCm, a CUDA
    extension without libcuda): evidence only when nothing else failed and no platform was
    detected (rules/other.py)."""

    def build(m, rec) -> Dict[str, Any]:
        data: Dict[str, Any] = {"form": form}
        if probe:
            data["probe"] = True
        groups = m.groupdict()
        if groups.get("library"):
            data["library"] = groups["library"]
        if groups.get("driver_version"):
            data["driver_version"] = int(groups["driver_version"])
        return data

    return build


PATTERNS = [
    Pattern(
        "platform_detected",
        "config",
        ("Automatically detected platform",),
        r"Automatically detected platform (?P<platform>[A-Za-z0-9_]+)\.",
        "vllm/platforms/__init__.py resolve_current_platform_cls_qualname",
        None,
        lambda m, rec: {"platform": m["platform"]},
        NO_CUT,
    ),
    Pattern(
        "no_platform_detected",
        "no_device",
        ("vLLM is running on UnspecifiedPlatform",),
        r"No platform detected, vLLM is running on UnspecifiedPlatform",
        "vllm/platforms/__init__.py resolve_current_platform_cls_qualname",
        None,
        _form("no_platform", probe=True),
    ),
    Pattern(
        "device_type_not_inferred",
        "no_device",
        ("Failed to infer device type",),
        r"Failed to infer device type",
        "vllm/config/device.py DeviceConfig.__post_init__ (vllm/config.py up to 0.10)",
        None,
        _form("no_platform"),
    ),
    Pattern(
        "empty_device_string",
        "no_device",
        ("Device string must not be empty",),
        r"Device string must not be empty",
        "pytorch c10/core/Device.cpp (the empty device_type of vLLM's UnspecifiedPlatform)",
        None,
        _form("no_platform"),
    ),
    Pattern(
        "vllm_c_without_driver",
        "no_device",
        ("Failed to import from vllm._C",),
        r"Failed to import from vllm\._C(?: with|:) \w+\(['\"](?P<library>lib(?:cuda|nvidia-ml)\.so[.\d]*): "
        r"cannot open shared object file",
        "vllm/_custom_ops.py, vllm/platforms/interface.py (logger.warning of the ImportError)",
        None,
        _form("no_driver", probe=True),
    ),
    Pattern(
        "torch_no_nvidia_driver",
        "no_device",
        ("Found no NVIDIA driver on your system",),
        r"Found no NVIDIA driver on your system",
        "pytorch torch/cuda/__init__.py _check_driver",
        None,
        _form("no_driver"),
    ),
    Pattern(
        "nvml_not_found",
        "no_device",
        ("NVML Shared Library Not Found", "NVMLError_DriverNotLoaded", "NVMLError_LibraryNotFound"),
        r"NVML Shared Library Not Found|NVMLError_(?:DriverNotLoaded|LibraryNotFound)",
        "pynvml NVMLError_LibraryNotFound / NVMLError_DriverNotLoaded (vllm/platforms/cuda.py uses NVML)",
        None,
        _form("no_driver", probe=True),
    ),
    Pattern(
        "no_gpus_available",
        "no_device",
        ("GPUs are available", "no CUDA-capable device is detected", "you might not have a CUDA gpu"),
        r"No (?:CUDA|HIP) GPUs are available|no CUDA-capable device is detected"
        r"|CUDA driver initialization failed, you might not have a CUDA gpu",
        "pytorch c10/cuda/CUDAFunctions.cpp device_count_ensure_non_zero; cudaErrorNoDevice; "
        "cudaErrorInitializationError",
        None,
        _form("no_gpu"),
    ),
    Pattern(
        "nvidia_driver_too_old",
        "no_device",
        (
            "NVIDIA driver on your system is too old",
            "driver version is insufficient for CUDA runtime",
            "unsupported display driver / cuda driver combination",
            "forward compatibility was attempted on non supported HW",
        ),
        r"The NVIDIA driver on your system is too old \(found version (?P<driver_version>\d+)\)"
        r"|CUDA driver version is insufficient for CUDA runtime version"
        r"|unsupported display driver / cuda driver combination"
        r"|forward compatibility was attempted on non supported HW",
        "pytorch torch/cuda/__init__.py _check_driver; cudaErrorInsufficientDriver; torch's cudaGetDeviceCount "
        "warning (Error 803 / 804)",
        None,
        _form("driver_too_old"),
    ),
    Pattern(
        "torch_without_cuda",
        "no_device",
        ("Torch not compiled with CUDA enabled",),
        r"Torch not compiled with CUDA enabled",
        "pytorch torch/cuda/__init__.py _lazy_init",
        None,
        _form("cpu_torch"),
    ),
    # Benign: under WSL, CUDA cannot pin host memory, so vLLM allocates the CPU swap space (and
    # host buffers) unpinned; copies between host and device are slower, nothing fails. Kept as
    # a marker no rule alarms on: a record only vLLM prints (a05: the only line of a report).
    Pattern(
        "wsl_pin_memory_off",
        "marker",
        ("pin_memory=False",),
        r"Using 'pin_memory=False' as WSL is detected",
        "vllm/worker/cache_engine.py allocate_cpu_cache (v0.2), vllm/utils.py is_pin_memory_available "
        "(v0.3-v0.6), vllm/platforms/interface.py Platform.is_pin_memory_available (v0.7+)",
        None,
        lambda m, rec: {"marker": "wsl_pin_memory_off"},
    ),
]


# -- which accelerator a log is from ----------------------------------------------------------
#: The accelerator platforms told apart by the paths and wordings of their software stacks, each
#: with the words a title and a remedy use for it. ``evidence`` is searched in a frame's path, an
#: error's message or a line (first match wins, in this order: the most specific stacks first);
#: ``names`` are the platform names vLLM's "Automatically detected platform X." prints.
#:
#: * ``hpu``: Intel Gaudi, vllm-gaudi (``vllm_gaudi/``, ``hpu_worker.py``, ``hpu_model_runner.py``)
#:   and HabanaAI's vllm-fork (``habana_model_runner.py``), ``habana_frameworks``; its graphs are
#:   HPU graphs, warmed up (``warmup_graphs``), not CUDA graphs captured;
#: * ``npu``: Ascend, vllm-ascend (``vllm_ascend/``), ``torch_npu``, CANN error codes (``EL0004``,
#:   ``ERR00100 PTA call acl api failed``, ``rtMalloc``, ``aclnn``);
#: * ``neuron``: AWS Neuron (``transformers_neuronx``, ``neuronx_distributed``, ``nrt_*`` runtime
#:   calls, ``NEURON_CC_WRAPPER`` / ``neuronx-cc``, ``vllm/worker/neuron_*``);
#: * ``tpu``: Google TPU, tpu-inference (``tpu_inference/``, ``tpu_commons``), ``jax`` / ``jaxlib``,
#:   ``torch_xla``, ``XLA:TPU``;
#: * ``xpu``: Intel GPU (``UR_RESULT_`` / ``ZE_RESULT_`` codes, ``intel_extension_for_pytorch``, ``xpu_worker``);
#: * ``rocm``: AMD (``HSA_STATUS_``, ``hipError``, ``HIP error``, ``HIP out of memory``, ``aiter``,
#:   ``ROCM_AITER``, ``rocm.py``); a ROCm PyTorch still prints "CUDA error:" (hipified), so that
#:   wording names no platform.
#: What each platform's device, graphs and software stack are called in titles and remedies.
DEVICE_WORDS: Dict[str, Dict[str, str]] = {
    "cuda": {
        "device": "GPU",
        "vendor": "NVIDIA",
        "capture": "capturing CUDA graphs",
        "graphs": "CUDA graphs",
        "versions": "vLLM, PyTorch and driver versions",
        "blocking": "CUDA_LAUNCH_BLOCKING=1",
    },
    "rocm": {
        "device": "GPU",
        "vendor": "AMD ROCm",
        "capture": "capturing HIP graphs",
        "graphs": "HIP (CUDA) graphs",
        "versions": "vLLM, PyTorch and ROCm versions",
        "blocking": "AMD_SERIALIZE_KERNEL=3 HIP_LAUNCH_BLOCKING=1",
    },
    "hpu": {
        "device": "HPU",
        "vendor": "Intel Gaudi",
        "capture": "warming up HPU graphs",
        "graphs": "HPU graphs",
        "versions": "vLLM build (vllm-gaudi), Gaudi software (SynapseAI) and driver versions",
        "blocking": "",
    },
    "npu": {
        "device": "NPU",
        "vendor": "Ascend",
        "capture": "capturing NPU (ACL) graphs",
        "graphs": "ACL graphs",
        "versions": "vllm-ascend, torch_npu and CANN versions",
        "blocking": "ASCEND_LAUNCH_BLOCKING=1",
    },
    "neuron": {
        "device": "NeuronCore",
        "vendor": "AWS Neuron",
        "capture": "compiling the model for the NeuronCores",
        "graphs": "Neuron graphs",
        "versions": "vLLM, Neuron SDK (neuronx-cc, transformers-neuronx or NxD Inference) and driver versions",
        "blocking": "",
    },
    "tpu": {
        "device": "TPU",
        "vendor": "Google TPU",
        "capture": "compiling the model with XLA",
        "graphs": "XLA programs",
        "versions": "vLLM, tpu-inference, JAX / torch_xla and libtpu versions",
        "blocking": "",
    },
    "xpu": {
        "device": "XPU",
        "vendor": "Intel GPU",
        "capture": "capturing XPU graphs",
        "graphs": "XPU graphs",
        "versions": "vLLM, PyTorch XPU (or IPEX) and oneAPI driver versions",
        "blocking": "",
    },
}
_EVIDENCE = (
    ("hpu", r"vllm_gaudi|habana_frameworks|habana_model_runner|\bhpu_(?:worker|model_runner)\b|\bHPU\b|Gaudi"),
    ("npu", r"vllm_ascend|torch_npu|\bEL\d{4}\b|PTA call acl api|rtMalloc|aclnn\w|\bNPU\b|Ascend"),
    (
        "neuron",
        r"transformers_neuronx|neuronx_distributed|\bnrt_\w+|NEURON_CC_WRAPPER|neuronx-cc|neuron_(?:worker|model_runner)",
    ),
    ("tpu", r"tpu_inference|tpu_commons|\bjax(?:lib)?\b|torch_xla|XLA:TPU|\bTPU\b|libtpu"),
    ("xpu", r"\b(?:UR|ZE)_RESULT_|level_zero|intel_extension_for_pytorch|xpu_(?:worker|model_runner)|\bXPU\b"),
    ("rocm", r"HSA_STATUS_|hipError|\bHIP (?:error|out of memory)|\baiter\b|ROCM_AITER|\bROCm\b|/rocm\.py|gfx\d{3,4}"),
)
PLATFORMS: Tuple[Tuple[str, "regex.Pattern"], ...] = tuple((name, regex.compile(rx)) for name, rx in _EVIDENCE)


def platform_in(text: str) -> Optional[str]:
    """The platform (a key of :data:`DEVICE_WORDS` other than ``cuda``) whose paths or wordings
    ``text`` holds, or None (a CUDA log names no other stack; "CUDA error:" is printed by ROCm's
    hipified PyTorch too, so it proves nothing)."""
    for name, rx in PLATFORMS:
        if rx.search(text):
            return name
    return None


def platform_named(name: Optional[str]) -> Optional[str]:
    """The :data:`DEVICE_WORDS` key of a platform name vLLM printed ("Automatically detected
    platform rocm." -> ``rocm``; ``cuda`` -> ``cuda``), or None for a name it does not know."""
    if not name:
        return None
    n = name.lower()
    if n in DEVICE_WORDS:
        return n
    return {"gaudi": "hpu", "habana": "hpu", "ascend": "npu", "neuronx": "neuron"}.get(n)


def words(platform: Optional[str]) -> Dict[str, str]:
    """The words of ``platform`` (:data:`DEVICE_WORDS`; CUDA's for None)."""
    return DEVICE_WORDS.get(platform or "cuda", DEVICE_WORDS["cuda"])
