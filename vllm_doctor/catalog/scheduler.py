"""Preemption warnings and periodic stats lines (``shared/vllm-messages.md`` sections 7, 8).

Sources:

* V0 ``vllm/core/scheduler.py Scheduler._preempt``: ``Sequence group %s is preempted by
  %s mode because there is not enough KV cache space. ... total_num_cumulative_preemption=%d``
  (older ``total_cumulative_preemption_cnt=``), logged only for the 1st, 51st, 101st ...
  preemption. V1 prints no per-preemption line at all;
* V0 ``vllm/core/scheduler.py Scheduler._preempt_by_swap`` / ``_swap_out`` (0.1 to 0.10, the
  same words in every release): ``RuntimeError: Aborted due to the lack of CPU swap space.
  Please increase the swap space to avoid this error.`` -- SWAP-mode preemption (V0 swaps
  instead of recomputing when a sequence group holds several sequences: ``n > 1``, beam
  search) found no free block in vLLM's own CPU swap pool (``--swap-space``, GiB per GPU, 4 by
  default); the engine dies. Not the OS swap;
* V0 ``vllm/engine/metrics.py LoggingStatLogger.log``: ``Avg prompt throughput: %.1f
  tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Swapped: %d reqs,
  Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV cache usage: %.1f%%.`` and the
  separate ``Prefix cache hit rate: GPU: %.2f%%, CPU: %.2f%%``;
* vLLM 0.1.0-0.1.3 ``vllm/core/scheduler.py Scheduler._schedule`` (the first stats line, printed by
  the scheduler every 5 s): ``Throughput: %.1f tokens/s, Running: %d reqs, Swapped: %d reqs,
  Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV cache usage: %.1f%%`` -- one
  throughput, the tokens the batches processed (prompt and generated together), read as the
  generation rate (what the stall shapes look at: tokens moving or not); from 0.1.4 the
  engine prints the ``Avg prompt throughput`` line above;
* V1 ``vllm/v1/metrics/loggers.py LoggingStatLogger.log``: ``[Engine %03d: ]Avg prompt
  throughput: ..., Running: %d reqs, Waiting: %d reqs[, Deferred: %d reqs][, Preemptions:
  %d], GPU KV cache usage: %.1f%%[, Prefix cache hit rate: %.1f%%]...``; from v0.30 the KV
  cache device is a placeholder (``%s KV cache usage``: ``GPU``, ``CPU``, ``XPU``) and v0.32 adds
  ``KV fetch: N waiting to start, N in progress, N completed waiting`` after ``Deferred``.
"""

from __future__ import annotations

from typing import Any, Dict

from .pattern import Pattern, default_build


def _stats(gen: str):
    def build(m, rec) -> Dict[str, Any]:
        data = default_build(m, rec)
        data["engine"] = gen
        return data

    return build


#: Fields a build of vLLM (a fork, a release between two we cached) prints between the ones
#: read, each ``Name: number unit`` (``Max iteration time: 386.7 ms, Avg time/tok:149.4 ms``,
#: early-2024 V0 builds): skipped, so the line's known fields are still read.
EXTRA_FIELDS = (
    r"(?:, (?!Running: |Swapped: |Pending: |Waiting: |GPU KV )[A-Z][\w /.()-]{0,40}: ?[\d.]+ ?[A-Za-z/%]{0,8})*"
)

PATTERNS = [
    # The anchor holds the gate's "rror" (prefilter.PREFERRED_GATE): the sentence's start
    # ("Aborted due to ...") holds no gate literal.
    Pattern(
        "v0_swap_space_exhausted",
        "swap_exhausted",
        ("swap space to avoid this error",),
        r"Aborted due to the lack of CPU swap space\.\s*Please increase the swap space to avoid this error",
        "vllm/core/scheduler.py Scheduler._preempt_by_swap / _swap_out (V0, RuntimeError)",
        None,
        lambda m, rec: {"preemption_mode": "SWAP"},
        cut_from=r"Aborted due to the lack of CPU swap space",
    ),
    Pattern(
        "v0_preemption",
        "preemption",
        ("is preempted by PreemptionMode.",),
        r"Sequence group (?P<seq_group>\S+) is preempted by PreemptionMode\.(?P<mode>RECOMPUTE|SWAP) mode"
        r"(?:(?!total_).)*+total_(?:num_cumulative_preemption|cumulative_preemption_cnt)=(?P<cumulative>\d+)",
        "vllm/core/scheduler.py Scheduler._preempt (V0)",
    ),
    # "Avg prompt throughput" opens the line: a hard wrap cuts the line after it, so the
    # pre-filter still finds the first half and the reassembler joins the rest.
    Pattern(
        "v0_stats",
        "stats",
        ("Avg prompt throughput", "Pending: "),
        # 0.1.0-0.1.3 print one "Throughput:" (the scheduler's line): read as the generation rate
        r"(?:Avg prompt throughput: (?P<prompt_tps>[\d.]+) tokens/s, Avg generation throughput: |"
        r"(?<![A-Za-z] )Throughput: )"
        r"(?P<generation_tps>[\d.]+) tokens/s" + EXTRA_FIELDS + r", Running: (?P<running>\d+) reqs, "
        r"Swapped: (?P<swapped>\d+) reqs, Pending: (?P<waiting>\d+) reqs" + EXTRA_FIELDS + r", GPU KV cache usage: "
        r"(?P<kv_usage_pct>[\d.]+)%"
        r"(?:, CPU KV cache usage: (?P<cpu_kv_usage_pct>[\d.]+)%)?",
        "vllm/engine/metrics.py LoggingStatLogger.log (V0); vllm/core/scheduler.py Scheduler._schedule (0.1.0-0.1.3)",
        None,
        _stats("v0"),
        cut_from=r"reqs, Swapped: ",  # where V0's line parts from V1's
    ),
    Pattern(
        "v1_stats",
        "stats",
        ("Avg prompt throughput", "Waiting: "),
        r"(?:Engine (?P<engine_index>\d+): |\d+ Engines Aggregated: )?"
        r"Avg prompt throughput: (?P<prompt_tps>[\d.]+) tokens/s, Avg generation throughput: "
        r"(?P<generation_tps>[\d.]+) tokens/s" + EXTRA_FIELDS + r", Running: (?P<running>\d+) reqs, "
        r"Waiting: (?P<waiting>\d+) reqs"
        # optional fields between Waiting and the KV usage, known or not (v0.32 adds "KV fetch: ...")
        r"(?:, (?:Deferred: (?P<deferred>\d+) reqs|Preemptions: (?P<preemptions>\d+)"
        r"|(?!(?:GPU|[A-Z]{2,5}) KV cache usage)[^,%]{1,60}))*"
        r", (?:GPU|[A-Z]{2,5}) KV cache usage: (?P<kv_usage_pct>[\d.]+)%(?:, Prefix cache hit rate: "
        r"(?P<prefix_hit_pct>[\d.]+)%)?",
        "vllm/v1/metrics/loggers.py LoggingStatLogger.log (V1; v0.30+ names the KV cache device: 'GPU', 'CPU', 'XPU')",
        None,
        _stats("v1"),
        cut_from=r"reqs, Waiting: ",
    ),
    Pattern(
        "v0_prefix_hit",
        "prefix_hit",
        ("Prefix cache hit rate: GPU:",),
        r"Prefix cache hit rate: GPU: (?P<prefix_hit_pct>[\d.]+)%",
        "vllm/engine/metrics.py (V0)",
    ),
    # V1 with several API servers (api_server_count > 1, the default with data parallelism)
    # logs no stats lines at all: saturation and stalls can then be judged only from /metrics.
    Pattern(
        "stats_logging_disabled",
        "marker",
        ("disabling stats logging",),
        r"disabling stats logging",
        "vllm/v1/metrics/loggers.py StatLoggerManager (AsyncLLM created with api_server_count more than 1)",
        None,
        lambda m, rec: {"marker": "stats_logging_disabled"},
    ),
]
