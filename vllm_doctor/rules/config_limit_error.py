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

    The CPU swap space is here too: ``--swap-space`` (GiB per GPU) x ``tensor_parallel_size``
    above 70 % of the host's RAM ("Too large swap space. 64.00 GiB out of the 62.50 GiB total CPU
    memory is allocated for the swap space.").

    LoRA limits are here too: an adapter whose rank is above ``--max-lora-rank`` ("LoRA rank
    64 is greater than max_lora_rank 16."), an added vocabulary above
    ``--lora-extra-vocab-size``, more adapters in one batch than ``--max-loras`` GPU slots,
    ``--max-cpu-loras`` below ``--max-loras``, a ``--max-lora-rank`` the release does not
    accept. They are raised where an adapter is loaded (a request naming it; ``--lora-modules``
    at startup), so the phase is the run's: while serving once the server came up.

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
    4. For the CPU swap space ("Too large swap space", V0 and V1 up to 0.17): ``--swap-space``
       (GiB per GPU) low enough that it times ``tensor_parallel_size`` stays within 70 % of the
       host's RAM (vLLM's own check).
    5. For a LoRA limit: the flag set to the number the error prints (``--max-lora-rank 64``,
       rounded up to a rank the release accepts; ``--max-loras``, ``--max-cpu-loras``,
       ``--lora-extra-vocab-size`` likewise). LoRA slots are preallocated on the GPU per
       ``max_loras`` x ``max_lora_rank``: a larger limit takes a little memory from the KV
       cache.
    6. For the head count: keep every GPU with the largest tensor-parallel size that divides
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
    --max-model-len, --max-num-batched-tokens, --max-lora-rank, --max-loras); vllm/lora/worker_manager.py,
    vllm/lora/peft_helper.py validate_legal, vllm/config/lora.py (the LoRA limits, catalog/validation.py).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..catalog.validation import (
    LORA_EXTRA_VOCAB_SIZES,
    LORA_RANKS_NEW,
    LORA_RANKS_OLD,
    SWAP_SPACE_HOST_SHARE,
    smallest_allowed,
)
from ..events import Phase
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
    "lora_rank",
    "max_lora_rank",
    "allowed_ranks",
    "lora_added_vocab",
    "lora_extra_vocab_size",
    "requested_loras",
    "max_loras",
    "max_cpu_loras",
    "swap_total_gib",
    "host_total_gib",
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


#: What a larger LoRA limit costs (vllm/lora/models.py: the adapters' slots are preallocated on the GPU).
_LORA_SLOTS = (
    "LoRA slots are preallocated on the GPU per max_loras x max_lora_rank: a little less memory for the KV cache"
)


def _lora_rank(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    """The adapter's rank above --max-lora-rank: the flag at the adapter's rank, rounded up to a
    rank the release accepts (0.5.5-0.10 8-256; 0.33 up to 512)."""
    rank, limit = _count(d.get("lora_rank")), _count(d.get("max_lora_rank"))
    title = f"The LoRA adapter's rank {rank} is above --max-lora-rank {limit}"
    target = smallest_allowed(rank, LORA_RANKS_OLD) or smallest_allowed(rank, LORA_RANKS_NEW) if rank else None
    if target is None:
        return title, [
            remedy(
                f"Serve an adapter of rank at most {max(LORA_RANKS_NEW)} (the largest max_lora_rank vLLM accepts)"
                if rank
                else "Raise --max-lora-rank to the adapter's rank (its adapter_config.json 'r')"
            )
        ]
    return title, [
        c.raise_to(
            "max_lora_rank",
            target,
            "Start the server with --max-lora-rank at the adapter's rank",
            f"the adapter's rank is {rank}"
            + (f", rounded up to {target}, a rank vLLM accepts" if target != rank else "")
            + f"; {_LORA_SLOTS}",
        ),
        remedy("Or serve a lower-rank adapter (re-train or merge it)", None, None, "client"),
    ]


def _lora_vocab(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    vocab, extra = _count(d.get("lora_added_vocab")), d.get("lora_extra_vocab_size")
    title = f"The LoRA adapter adds {vocab} tokens, above --lora-extra-vocab-size {extra}"
    target = smallest_allowed(vocab, LORA_EXTRA_VOCAB_SIZES) if vocab else None
    if target is None:
        return title, [
            remedy(
                f"Serve an adapter that adds at most {max(LORA_EXTRA_VOCAB_SIZES)} tokens, or merge it into the base "
                "model"
            )
        ]
    return title, [
        c.raise_to(
            "lora_extra_vocab_size",
            target,
            "Start the server with --lora-extra-vocab-size at least the tokens the adapter adds",
            f"the adapter adds {vocab} tokens; vLLM accepts {', '.join(map(str, LORA_EXTRA_VOCAB_SIZES))}",
        )
    ]


def _loras_above_slots(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    n, slots = _count(d.get("requested_loras")), _count(d.get("max_loras"))
    title = f"{n} LoRA adapters were asked for in one batch, above the {slots} GPU LoRA slots (--max-loras)"
    return title, [
        c.raise_to(
            "max_loras",
            n,
            "Raise --max-loras to the adapters served together",
            f"{n} adapters were active at once; {_LORA_SLOTS}",
        ),
        remedy("Or route fewer distinct adapters to this server at once", None, None, "client"),
    ]


def _cpu_loras(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    cpu, gpu = _count(d.get("max_cpu_loras")), _count(d.get("max_loras"))
    title = f"--max-cpu-loras {cpu} is below --max-loras {gpu}"
    return title, [
        c.raise_to(
            "max_cpu_loras",
            gpu,
            "Raise --max-cpu-loras to at least --max-loras (or leave it unset: it defaults to max_loras)",
            "the CPU cache of adapters must hold every adapter on the GPU",
        ),
        c.lower("max_loras", cpu, "Or lower --max-loras to --max-cpu-loras", None),
    ]


def _rank_not_allowed(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    rank = _count(d.get("max_lora_rank"))
    allowed = tuple(d.get("allowed_ranks") or LORA_RANKS_OLD)
    title = f"--max-lora-rank {rank} is not a rank this release accepts ({', '.join(map(str, allowed))})"
    target = smallest_allowed(rank, allowed) if rank else None
    if target is None:
        return title, [remedy(f"Set --max-lora-rank to one of {', '.join(map(str, allowed))}")]
    return title, [
        c.set_to(
            "max_lora_rank",
            target,
            "Set --max-lora-rank to the smallest accepted rank at or above the one asked for",
            f"vLLM accepts {', '.join(map(str, allowed))}",
            "raise",
        )
    ]


def _swap_space(c: Constraints, d: Dict[str, Any]) -> Tuple[str, list]:
    """The CPU swap space (per GPU, x tensor_parallel_size) above vLLM's share of the host's RAM:
    the per-GPU size that fits, from the size in force or the tensor-parallel size, else no
    number."""
    swap, total = d.get("swap_total_gib"), d.get("host_total_gib")
    title = f"The CPU swap space ({swap} GiB in all) is above {SWAP_SPACE_HOST_SHARE:.0%} of the host's {total} GiB RAM"
    if not (isinstance(swap, float) and isinstance(total, float) and swap > 0):
        return title, [c.lower("swap_space", None, "Lower --swap-space (GiB per GPU)", "the sizes are not in the log")]
    room = SWAP_SPACE_HOST_SHARE * total
    now, tp = c.in_force("swap_space"), c.run.value("tensor_parallel_size")
    if now.known and now.low:
        per_gpu = int(now.low * room / swap)
        because = f"{now.low:g} GiB per GPU gives {swap:g} GiB in all; {room:.1f} GiB fits"
    elif isinstance(tp, int) and tp > 0:
        per_gpu = int(room / tp)
        because = f"{room:.1f} GiB fits in all, over tensor_parallel_size {tp}"
    else:
        return title, [
            c.lower(
                "swap_space",
                None,
                "Lower --swap-space (GiB per GPU) so that it times tensor_parallel_size fits",
                f"{room:.1f} GiB fits in all; the swap space per GPU in force is not in the log",
            )
        ]
    return title, [
        c.lower("swap_space", per_gpu, "Lower --swap-space (GiB per GPU) to fit the host's RAM", because)
        if per_gpu >= 1
        else c.set_to("swap_space", 0, "Set --swap-space 0: no CPU swap space fits", because, "lower")
    ]


_VARIANTS = {
    "max_model_len_above_derived": _above_derived,
    "batched_tokens_below_max_model_len": _below_max_model_len,
    "tp_not_divisor_of_heads": _tp_not_divisor,
    "max_num_seqs_above_mamba_blocks": _above_mamba_blocks,
    "batched_tokens_below_max_num_seqs": _below_max_num_seqs,
    "lora_rank_above_max": _lora_rank,
    "lora_vocab_above_extra": _lora_vocab,
    "loras_above_slots": _loras_above_slots,
    "max_cpu_loras_below_max_loras": _cpu_loras,
    "max_lora_rank_not_allowed": _rank_not_allowed,
    "swap_space_above_host": _swap_space,
}
#: Limits checked where an adapter is loaded: a request naming it (or --lora-modules at startup).
LORA_LOAD_VARIANTS = frozenset({"lora_rank_above_max", "lora_vocab_above_extra", "loras_above_slots"})
#: Every LoRA variant: memory settings are no fix, and VLLM_ALLOW_LONG_MAX_MODEL_LEN has nothing to do with them.
LORA_VARIANTS = LORA_LOAD_VARIANTS | {"max_cpu_loras_below_max_loras", "max_lora_rank_not_allowed"}


def _phase(variant: Any, failures: Sequence[Failure], run: Run) -> str:
    """Startup, except for a limit checked where an adapter is loaded: there the run's, while
    serving unless the log shows the server still starting (a startup step past the
    configuration, nothing served). A bare line says nothing more: an adapter is loaded when a
    request names it in every release, so while serving."""
    if variant not in LORA_LOAD_VARIANTS:
        return "startup"
    f = failures[0]
    if f.phase_at >= Phase.READY:
        return "runtime"
    if Phase.CONFIG < f.phase_at < Phase.READY:
        return "startup"
    return "runtime"


def check(run: Run, failures: Sequence[Failure], phase: str = "startup") -> List[Finding]:
    if not failures:
        return []
    d = merged_data(failures)
    facts = {k: d[k] for k in _KEYS if k in d}
    variant = d.get("variant")
    build = _VARIANTS.get(variant)
    if build is None:
        return []  # a config_error this rule has no words for: never another variant's remedies
    title, rem = build(constraints(run), d)
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
    if variant in LORA_VARIANTS:
        dont = ["Memory settings: the adapter is refused by a LoRA limit, not for lack of memory"]
    elif variant == "swap_space_above_host":
        dont = ["GPU memory settings (gpu_memory_utilization, max_model_len): the swap space is host RAM"]
    elif variant != "tp_not_divisor_of_heads":
        dont.append("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: positions past the model's limit give NaNs or CUDA errors")
    where = _phase(variant, failures, run)
    return [finding(RULE, run, where, title, facts, failure_evidence(failures, "config check"), rem, dont)]


RULE = Rule(
    code="VD106",
    name="config_limit_error",
    severity="critical",
    summary="A limit refused the configuration: max_model_len, max_num_batched_tokens, tensor_parallel_size or a "
    "LoRA limit (max_lora_rank, max_loras) contradicts the model or the adapter.",
    doc=__doc__,
    check=check,
)
