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

from typing import Any, Dict

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
]
