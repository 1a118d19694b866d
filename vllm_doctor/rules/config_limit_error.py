"""Length or batch limits that contradict each other or the model.

What it means:
    vLLM validates its configuration before loading anything: ``--max-model-len`` above
    what the model supports ("User-specified max_model_len (131072) is greater than the
    derived max_model_len (max_position_embeddings=32768 ...)"), or
    ``max_num_batched_tokens`` below ``max_model_len`` with chunked prefill off, or below
    ``max_num_seqs``. Newer versions wrap these in a pydantic "Value error, ...".

Why it happens:
    A length copied from another model or from the model card's extended-context recipe
    (RoPE scaling) without the matching config; batch limits set by hand.

Remedies, in order:
    1. Set ``--max-model-len`` at or below the model's derived limit (or configure the
       model's RoPE scaling if it supports a longer context).
    2. Make ``--max-num-batched-tokens`` at least ``max_model_len`` (or enable chunked
       prefill), and at least ``max_num_seqs``.

What does not help:
    Memory settings; ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (positions beyond the model's limit
    give NaNs or out-of-bounds errors).

Sources:
    vllm/config/model.py _get_and_verify_max_len; vllm/config/scheduler.py
    SchedulerConfig._verify_args; docs.vllm.ai "Engine Arguments" (configuration/engine_args:
    --max-model-len, --max-num-batched-tokens).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from ..run import Failure, Run
from ..verdict import Finding
from .plan import Constraints, constraints
from .rule import Rule, failure_evidence, finding, merged_data, remedy

_KEYS = ("max_model_len", "derived_max_model_len", "derived_key", "max_num_batched_tokens", "max_num_seqs", "variant")


def _above_derived(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    title = (
        f"max_model_len {d.get('max_model_len')} is above the model's limit "
        f"{d.get('derived_max_model_len')} ({d.get('derived_key')})"
    )
    return title, [
        c.lower(
            "max_model_len",
            d.get("derived_max_model_len"),
            "Set max_model_len at or below the model's own limit",
            f"{d.get('derived_key')}={d.get('derived_max_model_len')} in the model's config.json",
        ),
        remedy(
            "Or, if the model supports a longer context through RoPE scaling (e.g. YaRN), configure it in the "
            "model's config (--hf-overrides) instead of forcing the length"
        ),
    ]


def _below_max_model_len(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    title = (
        f"max_num_batched_tokens {d.get('max_num_batched_tokens')} is below max_model_len "
        f"{d.get('max_model_len')} with chunked prefill off"
    )
    return title, [
        c.raise_to(
            "max_num_batched_tokens",
            d.get("max_model_len"),
            "Raise max_num_batched_tokens to at least max_model_len, or enable chunked prefill",
            None,
        ),
        c.lower(
            "max_model_len",
            d.get("max_num_batched_tokens"),
            "Or lower max_model_len to the batch budget",
            None,
        ),
    ]


def _below_max_num_seqs(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    title = f"max_num_batched_tokens {d.get('max_num_batched_tokens')} is below max_num_seqs {d.get('max_num_seqs')}"
    return title, [
        c.raise_to(
            "max_num_batched_tokens",
            d.get("max_num_seqs"),
            "Raise max_num_batched_tokens to at least max_num_seqs, or lower max_num_seqs",
            None,
        )
    ]


_VARIANTS = {
    "max_model_len_above_derived": _above_derived,
    "batched_tokens_below_max_model_len": _below_max_model_len,
}


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    d = merged_data(failures)
    facts = {k: d[k] for k in _KEYS if k in d}
    title, rem = _VARIANTS.get(d.get("variant"), _below_max_num_seqs)(constraints(run), d)
    dont = [
        "Memory settings: this is a configuration contradiction",
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: positions past the model's limit give NaNs or CUDA errors",
    ]
    return [finding(RULE, run, "startup", title, facts, failure_evidence(failures, "config check"), rem, dont)]


RULE = Rule(
    code="VD106",
    name="config_limit_error",
    severity="critical",
    summary="Startup failed: max_model_len / max_num_batched_tokens contradict each other or the model.",
    doc=__doc__,
    check=check,
)
