"""Numbers as vLLM and PyTorch print them, turned into plain Python values.

Memory is always returned in GiB (binary, 2**30 bytes), because that is the unit
vLLM and PyTorch print (`format_size` in `c10/cuda/CUDACachingAllocator.cpp`,
`format_gib` in `vllm/utils/mem_utils.py`). Old V0 builds wrote ``GB`` for what
were GiB values (`Loading model weights took 14.9888 GB`): ``GB`` is read as GiB.
"""

from __future__ import annotations

import math

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
    number = float(value) * factor
    if not math.isfinite(number) or abs(number) > 1e9:
        raise ValueError(f"not a memory size: {value[:40]!r}")
    return number


def size_to_gib(text: str) -> float:
    """``"50.00 MiB"`` -> 0.048828125. Raises ValueError when not ``<number> <unit>``."""
    number, _, unit = text.strip().partition(" ")
    return to_gib(number, unit.strip() or "GiB")


def to_int(text: str) -> int:
    """An integer as vLLM prints it: ``"447,088"`` (V1 separators), ``"32768.0"``.

    Raises ValueError for a non-number, or one past 10**18 (no real count is that large;
    a damaged line is not allowed to overflow the arithmetic downstream)."""
    t = text.replace(",", "")
    whole, _, frac = t.partition(".")
    if len(whole.lstrip("-")) > 18 or (frac and not frac.strip("0").isdigit() and frac.strip("0")):
        raise ValueError(f"not a count: {text[:40]!r}")
    return int(whole) if whole.lstrip("-").isdigit() else int(float(t))


def tidy(value: float, digits: int = 6) -> float:
    """Round a computed float for output, so JSON stays readable and stable."""
    return round(float(value), digits)
