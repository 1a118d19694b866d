"""Numbers as vLLM and PyTorch print them, turned into plain Python values.

Memory is always returned in GiB (binary, 2**30 bytes), because that is the unit
vLLM and PyTorch print (`format_size` in `c10/cuda/CUDACachingAllocator.cpp`,
`format_gib` in `vllm/utils/mem_utils.py`). Old V0 builds wrote ``GB`` for what
were GiB values (`Loading model weights took 14.9888 GB`): ``GB`` is read as GiB.

Every parser here reads ASCII digits only (``str.isdigit`` and ``float`` also take
``²`` or Arabic-Indic digits, which no log prints and which a damaged line can carry),
refuses a number text longer than :data:`MAX_NUMBER_CHARS`, and never returns an
infinity or a NaN: a bad value is a ValueError at parse time, so the pattern that met it
is dropped and nothing downstream has to guard its arithmetic.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import regex

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

#: Longest number text read (a 48-digit byte count is already beyond any real GPU).
MAX_NUMBER_CHARS = 48
#: Largest count :func:`to_int` returns (no real count is that large; a damaged line must
#: not overflow the arithmetic downstream).
MAX_COUNT = 10**18
#: Largest memory size, in GiB, :func:`to_gib` returns (about an exabyte).
MAX_GIB = 1e9

# ASCII only (the regex module's \d is Unicode): a sign, digits (V1 prints "447,088"),
# an optional fraction, an optional short exponent.
_FLOAT = regex.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
_COUNT = regex.compile(r"[+-]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.0*)?")


def to_float(text: str) -> float:
    """A finite decimal number as printed (``"0.90"``, ``"-2.77"``, ``"1e-3"``).

    Raises ValueError for anything else: non-ASCII digits, ``inf``/``nan``, ``1_000``,
    more than :data:`MAX_NUMBER_CHARS` characters, or a value that overflows a float."""
    t = text.strip()
    if len(t) > MAX_NUMBER_CHARS:
        raise ValueError(f"not a number: {text[:40]!r}")
    # The common case first, without the regex: ASCII digits with at most one point
    # ("2148.9", "55"), all of which _FLOAT matches; anything else goes through it.
    if not (t.isascii() and t.replace(".", "", 1).isdigit()) and not _FLOAT.fullmatch(t):
        raise ValueError(f"not a number: {text[:40]!r}")
    number = float(t)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {text[:40]!r}")
    return number


def to_gib(value: str, unit: str = "GiB") -> float:
    """Return a memory size in GiB.

    ``value`` is the number as printed (``"50.00"``, ``"-2.77"``); ``unit`` one of
    bytes, KiB, MiB, GiB, TiB (or the GB/MB spellings old builds used for binary
    units). Raises ValueError on an unknown unit, a non-number (see :func:`to_float`) or
    a size beyond :data:`MAX_GIB`.
    """
    try:
        factor = _UNIT_GIB[unit]
    except KeyError:
        raise ValueError(f"unknown memory unit {unit[:20]!r}") from None
    number = to_float(value) * factor
    if not math.isfinite(number) or abs(number) > MAX_GIB:
        raise ValueError(f"not a memory size: {value[:40]!r}")
    return number


def size_to_gib(text: str) -> float:
    """``"50.00 MiB"`` -> 0.048828125. Raises ValueError when not ``<number> <unit>``."""
    number, _, unit = text.strip().partition(" ")
    return to_gib(number, unit.strip() or "GiB")


def to_int(text: str) -> int:
    """An integer as vLLM prints it: ``"447,088"`` (V1 separators), ``"32768.0"``.

    Raises ValueError for a non-number, non-ASCII digits, a fraction that is not zero,
    more than :data:`MAX_NUMBER_CHARS` characters, or a value past :data:`MAX_COUNT`."""
    t = text.strip()
    if len(t) > MAX_NUMBER_CHARS:
        raise ValueError(f"not a count: {text[:40]!r}")
    if t.isascii() and t.isdigit():  # the common case ("32"), which _COUNT matches, without the regex
        value = int(t)
    elif not _COUNT.fullmatch(t):
        raise ValueError(f"not a count: {text[:40]!r}")
    else:
        value = int(t.partition(".")[0].replace(",", ""))
    if abs(value) > MAX_COUNT:
        raise ValueError(f"not a count: {text[:40]!r}")
    return value


def tidy(value: float, digits: int = 6) -> float:
    """Round a computed float for output, so JSON stays readable and stable."""
    return round(float(value), digits)


# Back to text, as vllm-doctor prints values (the comparison and its renderers).


def is_num(v: Any) -> bool:
    """A number (int or float), not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def pct_change(old: Any, new: Any) -> Optional[float]:
    """``(new - old) / |old|`` in percent; None unless both are numbers and old is not 0."""
    if not (is_num(old) and is_num(new)) or old == 0:
        return None
    return (new - old) / abs(old) * 100.0


def show(value: Any, unit: str = "") -> str:
    """A value as the comparison prints it: numbers with up to two decimals, then the unit
    (``x`` glued on: ``6.15x``); text as it is; None as not in the log."""
    if value is None:
        return "(not in the log)"
    if isinstance(value, bool) or not is_num(value):
        return str(value)
    text = f"{value:.2f}".rstrip("0").rstrip(".") if isinstance(value, float) and abs(value) < 1e6 else f"{value:.0f}"
    if not unit or unit in ("tokens", "reqs", "blocks"):
        return text
    return f"{text}{unit}" if unit == "x" else f"{text} {unit}"


def arrow(old: Any, new: Any, unit: str = "") -> str:
    """``old -> new unit``: the unit once, after both numbers."""
    if is_num(old) and is_num(new):
        return f"{show(old)} -> {show(new, unit)}"
    return f"{show(old, unit)} -> {show(new, unit)}"


def with_change(old: Any, new: Any, unit: str = "") -> str:
    """``old -> new unit (+N %)``, the percentage where it can be computed."""
    pct = pct_change(old, new)
    text = arrow(old, new, unit)
    return f"{text} ({pct:+.0f} %)" if pct is not None else text
