"""The JSON contract (``verdict.schema.json``): stable keys, sorted by meaning, not by name."""

from __future__ import annotations

import json
from typing import Any

from .inert import map_strings, one_line


def dumps(obj: Any, indent=None) -> str:
    """Strict JSON for ``obj`` (a dict of plain values): every string made inert, numbers
    JSON can hold (``allow_nan=False``: ``NaN``/``Infinity`` are not JSON, and a strict
    reader such as ``JSON.parse`` rejects them), UTF-8 text rather than ``\\u`` escapes."""
    return json.dumps(map_strings(obj, one_line), indent=indent, ensure_ascii=False, allow_nan=False)


def render_json(verdict) -> str:
    """The verdict as one indented JSON document, newline-terminated."""
    return dumps(verdict.to_dict(), indent=2) + "\n"
