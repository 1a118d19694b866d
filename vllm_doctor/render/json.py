"""The JSON contract (``verdict.schema.json``): stable keys, sorted by meaning, not by name."""

from __future__ import annotations

import json


def render_json(verdict) -> str:
    return json.dumps(verdict.to_dict(), indent=2, ensure_ascii=False, default=str) + "\n"
