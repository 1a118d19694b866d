"""vLLM prints no stats lines here: slowdowns cannot be judged from this log.

What it means:
    With more than one API server process (``--api-server-count`` above 1, the default when
    data parallelism is above 1) vLLM warns "AsyncLLM created with api_server_count more than
    1; disabling stats logging to avoid incomplete stats." and prints no periodic stats line
    at all; ``--disable-log-stats`` does the same. Preemption storms, queue backlogs and
    engine stalls show only in those lines, so this log cannot show them.

Why it happens:
    Several API servers each see part of the traffic, so vLLM does not log per-process stats;
    or stats logging was turned off to quieten the log.

Remedies, in order:
    1. Scrape the server's Prometheus metrics and diagnose them with the log:
       ``vllm-doctor diagnose server.log --metrics http://HOST:PORT``.

What does not help:
    Reading "healthy" from this log as "not slow": the evidence is elsewhere.

Sources:
    vllm/v1/metrics/loggers.py (StatLoggerManager); vllm/engine/arg_utils.py
    (--api-server-count, --disable-log-stats).
"""

from __future__ import annotations

from typing import List, Sequence

from ..run import Failure, Run
from ..verdict import Finding
from .rule import Rule, config_evidence, ev, finding, remedy


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    marker = run.markers.get("stats_logging_disabled")
    off = run.value("disable_log_stats") is True
    if (marker is None and not off) or run.stats.count:
        return []  # no warning, or stats arrived anyway (metrics given beside the log)
    why = "api_server_count is above 1" if marker is not None else "--disable-log-stats is set"
    title = f"No stats lines in this log ({why}): saturation and stalls can only be judged from /metrics"
    rem = [
        remedy(
            "Diagnose the server's metrics with the log: vllm-doctor diagnose LOG --metrics http://HOST:PORT",
            None,
            "preemption, KV cache usage and throughput are in /metrics when the log does not print them",
            "host",
        )
    ]
    evidence = [ev(marker, "stats logging disabled")] + config_evidence(run, ("disable_log_stats", "api_server_count"))
    return [finding(RULE, run, "runtime", title, {"stats_logging": "disabled"}, evidence, rem)]


RULE = Rule(
    code="VD308",
    name="stats_logging_disabled",
    severity="info",
    summary="No stats lines (several API servers, or --disable-log-stats): slowdowns need /metrics.",
    doc=__doc__,
    check=check,
)
