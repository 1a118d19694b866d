"""Length or batch limits that contradict each other or the model.

What it means:
    vLLM validates its configuration before loading anything: ``--max-model-len`` above
    what the model supports ("User-specified max_model_len (131072) is greater than the
    derived max_model_len (max_position_embeddings=32768 ...)"), or
    ``max_num_batched_tokens`` below ``max_model_len`` with chunked prefill off, or below
    ``max_num_seqs``; or a ``--tensor-parallel-size`` that does not divide the model's
    attention heads ("Total number of attention heads (32) must be divisible by tensor
    parallel size (3)."). Newer versions wrap these in a pydantic "Value error, ...".

    A hybrid Mamba model (Qwen3-Next, Nemotron-H, Jamba ...) with full decode CUDA graphs needs
    one Mamba cache block per decode sequence: "max_num_seqs (1024) exceeds available Mamba
    cache blocks (939)" (v0.20+) stops the start once the KV cache is sized, before capture.

Why it happens:
    A length copied from another model or from the model card's extended-context recipe
    (RoPE scaling) without the matching config; batch limits set by hand; a tensor-parallel
    size set to the number of GPUs on a host whose count (3, 6) divides no head count.

Remedies, in order:
    1. Set ``--max-model-len`` at or below the model's derived limit (or configure the
       model's RoPE scaling if it supports a longer context).
    2. Make ``--max-num-batched-tokens`` at least ``max_model_len`` (or enable chunked
       prefill), and at least ``max_num_seqs``.
    3. For the Mamba cache blocks: ``--max-num-seqs`` at or below the blocks the error
       prints; or piecewise CUDA graphs only (``--compilation-config '{"cudagraph_mode":
       "PIECEWISE"}'``), which the check does not apply to, at some decode speed. A higher
       ``gpu_memory_utilization`` adds blocks only in proportion to the KV cache memory, and
       often too few (the reports of a BF16 hybrid model on one 96 GB GPU).
    4. For the head count: keep every GPU with the largest tensor-parallel size that divides
       both the heads and the GPU count, times a pipeline-parallel size (``--tensor-parallel-
       size 1 --pipeline-parallel-size 3`` for 32 heads on 3 GPUs), or use fewer GPUs with
       the largest divisor of the heads below the size in force.

What does not help:
    Memory settings; ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (positions beyond the model's limit
    give NaNs or out-of-bounds errors).

Sources:
    vllm/config/model.py _get_and_verify_max_len and ModelConfig.verify_with_parallel_config;
    vllm/config/scheduler.py SchedulerConfig._verify_args; vllm/config/compilation.py (the
    Mamba cache blocks check, v0.20-v0.33; vllm-project/vllm#34094); docs.vllm.ai "Parallelism and
    Scaling" (serving/parallelism_scaling: pipeline parallelism when TP cannot split a model); "Engine Arguments" (configuration/engine_args:
    --max-model-len, --max-num-batched-tokens).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..run import Failure, Run
from ..verdict import Finding, Remedy
from .plan import Constraints, constraints
from .rule import Rule, failure_evidence, finding, merged_data, remedy

_KEYS = (
    "max_model_len",
    "derived_max_model_len",
    "derived_key",
    "max_num_batched_tokens",
    "max_num_seqs",
    "mamba_cache_blocks",
    "num_attention_heads",
    "tensor_parallel_size",
    "variant",
)


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


def _above_mamba_blocks(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    """One Mamba cache block per decode sequence: max_num_seqs at or below the blocks first;
    piecewise graphs (no full decode graphs, so no check) second; more memory last, with the
    growth the KV cache would need (the blocks grow in proportion to it)."""
    seqs, blocks = _count(d.get("max_num_seqs")), d.get("mamba_cache_blocks")
    if blocks is None:
        title = f"max_num_seqs {seqs} exceeds the available Mamba cache blocks (one per decode sequence)"
    else:
        title = f"max_num_seqs {seqs} exceeds the {blocks} available Mamba cache blocks (one per decode sequence)"
    grow = (
        f": {seqs} blocks need {seqs / blocks - 1:.0%} more KV cache memory than the {blocks} had"
        if seqs and blocks
        else ""
    )
    return title, [
        c.lower(
            "max_num_seqs",
            blocks if blocks else None,
            "Lower max_num_seqs to at most the Mamba cache blocks",
            "each decode sequence holds one Mamba cache block"
            + (
                f"; {blocks} blocks fit"
                if blocks
                else "; the block count is not in the log (the error is cut inside it)"
            ),
        ),
        Remedy(
            order=0,
            action="Or capture only piecewise CUDA graphs, which this check does not apply to; decode runs somewhat "
            "slower without full graphs",
            flag="""--compilation-config '{"cudagraph_mode": "PIECEWISE"}'""",
            why="the check runs only with full decode CUDA graphs",
            setting="compilation_config",
            value='{"cudagraph_mode": "PIECEWISE"}',
            direction="set",
        ),
        c.unset(
            "gpu_memory_utilization",
            "raise",
            "Raising gpu_memory_utilization adds Mamba blocks only in proportion to the KV cache memory",
            "often too few to reach max_num_seqs" + grow + "; the utilization that gives them cannot be worked out "
            "from the error",
        ),
    ]


def _count(v: Any) -> Optional[int]:
    """A positive count, or None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _largest_divisor(n: int, limit: int) -> int:
    """The largest divisor of ``n`` at or below ``limit`` (1 at least)."""
    return max(d for d in range(1, max(1, min(n, limit)) + 1) if n % d == 0)


def _tp_not_divisor(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    heads, tp = _count(d.get("num_attention_heads")), _count(d.get("tensor_parallel_size"))
    title = f"tensor_parallel_size {tp} does not divide the model's {heads} attention heads"
    if heads is None or tp is None or tp < 2:
        return title, [remedy(f"Use a tensor_parallel_size that divides the model's {heads} attention heads")]
    # Every GPU kept: TP a divisor of both the heads and the GPU count, PP the rest of it.
    keep = _largest_divisor(heads, tp)
    while tp % keep:
        keep = _largest_divisor(heads, keep - 1)
    fewer = _largest_divisor(heads, tp - 1)
    pp = tp // keep
    tp_flag, pp_flag = c.flag("tensor_parallel_size", keep), c.flag("pipeline_parallel_size", pp)
    split = "the layers split" if keep == 1 else f"the heads split {keep} ways and the layers"
    rem = [
        # One remedy sets both sizes; the plan tracks it by the new one (the other is an
        # alternative to the lower tensor_parallel_size below, not a second step).
        Remedy(
            order=0,
            action=f"Keep all {tp} GPUs with pipeline parallelism: {split} {pp} ways",
            flag=f"{tp_flag} {pp_flag}",
            why="pipeline parallelism needs a model that supports it (vLLM says so at startup when it does not)",
            setting="pipeline_parallel_size",
            value=pp,
            direction="raise",
        ),
        c.lower(
            "tensor_parallel_size",
            fewer,
            f"Or use {fewer} GPU{'s' if fewer > 1 else ''}, the largest tensor_parallel_size below {tp} "
            f"that divides {heads}",
            "the weights and KV cache must then fit on fewer GPUs",
        ),
    ]
    return title, rem


_VARIANTS = {
    "max_model_len_above_derived": _above_derived,
    "batched_tokens_below_max_model_len": _below_max_model_len,
    "tp_not_divisor_of_heads": _tp_not_divisor,
    "max_num_seqs_above_mamba_blocks": _above_mamba_blocks,
}


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    d = merged_data(failures)
    facts = {k: d[k] for k in _KEYS if k in d}
    title, rem = _VARIANTS.get(d.get("variant"), _below_max_num_seqs)(constraints(run), d)
    variant = d.get("variant")
    if variant == "max_num_seqs_above_mamba_blocks":
        why = "fewer Mamba cache blocks"
        return [
            finding(
                RULE,
                run,
                "startup",
                title,
                facts,
                failure_evidence(failures, "config check"),
                rem,
                [f"Lowering gpu_memory_utilization: {why}"],
                forbids=[("gpu_memory_utilization", "lower", why)],
            )
        ]
    dont = ["Memory settings: this is a configuration contradiction"]
    if variant != "tp_not_divisor_of_heads":
        dont.append("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: positions past the model's limit give NaNs or CUDA errors")
    return [finding(RULE, run, "startup", title, facts, failure_evidence(failures, "config check"), rem, dont)]


RULE = Rule(
    code="VD106",
    name="config_limit_error",
    severity="critical",
    summary="Startup failed: max_model_len, max_num_batched_tokens or tensor_parallel_size contradict the model.",
    doc=__doc__,
    check=check,
)
