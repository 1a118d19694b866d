"""Numbers as vLLM and PyTorch print them, turned into plain Python values.

Memory is always returned in GiB (binary, 2**30 bytes), because that is the unit
vLLM and PyTorch print (`format_size` in `c10/cuda/CUDACachingAllocator.cpp`,
`format_gib` in `vllm/utils/mem_utils.py`). Old V0 builds wrote ``GB`` for what
were GiB values (`Loading model weights took 14.9888 GB`): ``GB`` is read as GiB.
"""
from __future__ import annotations

_UNIT_GIB = {
    "bytes": 1 / 2**30,
    "byte": 1 / 2**30,
    "B": 1 / 2**30,
    "KiB": 1 / 2**20,
    "KB": 1 / 2**20,
    "MiB": 1 / 2**10,
    "MB": 1 / 2**10,
    "GiB": 1.0,
    "GB": 1.0,
    "TiB": 1024.0,
}


def to_gib(value: str, unit: str = "GiB") -> float:
    """Return a memory size in GiB.

    ``value`` is the number as printed (``"50.00"``, ``"-2.77"``); ``unit`` one of
    bytes, KiB, MiB, GiB, TiB (or the GB/MB spellings old builds used for binary
    units). Raises ValueError on an unknown unit or a non-number.
    """
    try:
        factor = _UNIT_GIB[unit]
    except KeyError:
        raise ValueError(f"unknown memory unit {unit!r}") from None
    return float(value) * factor


def size_to_gib(text: str) -> float:
    """``"50.00 MiB"`` -> 0.048828125. Raises ValueError when not ``<number> <unit>``."""
    number, _, unit = text.strip().partition(" ")
    return to_gib(number, unit.strip() or "GiB")


def to_int(text: str) -> int:
    """An integer as vLLM prints it: ``"447,088"`` (V1 separators), ``"32768.0"``."""
    return int(float(text.replace(",", "")))


def tidy(value: float, digits: int = 6) -> float:
    """Round a computed float for output, so JSON stays readable and stable."""
    return round(float(value), digits)
