"""Metrics judged by the rules (issue 13): the scrape sequences of fixtures/metrics/seq give the
verdicts their shapes call for, the old and new metric names give the same verdict, and logs
and metrics together let the log give phase and config and the metrics the stats."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_doctor.metrics import read_metrics
from vllm_doctor.pipeline import build_verdict, diagnose_source, metrics_results

SEQ = Path(__file__).resolve().parent.parent / "fixtures" / "metrics" / "seq"
REAL = SEQ.parent / "real"


def verdict_of(*dirs, logs=()):
    series = [s for d in dirs for s in read_metrics(str(d))]
    results = list(logs)
    results += metrics_results(series, results)
    return build_verdict(results)


def test_sustained_preemptions_with_kv_full_and_requests_waiting_are_a_storm_with_the_rate_as_evidence():
    v = verdict_of(SEQ / "storm-v1")
    f = v.primary
    assert v.primary_class == "preemption_storm" and f.confidence == "low"
    assert f.facts["preemptions_in_stats"] == 101 and f.facts["saturated_intervals"] == 6
    assert f.facts["peak_kv_usage_pct"] == 99.0 and f.facts["max_waiting"] == 15
    assert all(e.kind == "metric" for e in f.evidence)
    first = f.evidence[0]
    assert "6.0 preemptions over 10 s" in first.text and first.time == "2026-09-11T00:45:10Z"
    assert first.metric["series"]["preemptions"] == "vllm:num_preemptions_total"
    assert first.metric["t0"] == "2026-09-11T00:45:00Z" and first.metric["t1"] == "2026-09-11T00:45:10Z"
    assert "101 preemptions in 6 intervals" in f.title


def test_kv_cache_at_95_percent_with_nothing_waiting_is_no_finding():
    v = verdict_of(SEQ / "hot-idle-v1")
    assert v.primary_class == "healthy" and v.findings == []
    assert v.runs[0].facts["peak_kv_usage_pct"] >= 94.0


def test_running_requests_with_flat_generation_are_an_engine_stall():
    v = verdict_of(SEQ / "wedge-v1")
    assert v.primary_class == "engine_stall"
    assert v.primary.facts == {"running_at_stall": 3, "wedged_intervals": 4}


def test_old_and_new_metric_names_give_the_same_verdict():
    def shape(v):
        d = v.to_dict()
        for f in d["findings"]:
            f.pop("source")
            for e in f["evidence"]:
                e.pop("source"), e.pop("text"), e["metric"].pop("series"), e["metric"].pop("origin")
        return d["primary_class"], d["title"].replace("-oldnames", ""), d["findings"]

    new, old = verdict_of(SEQ / "storm-v1"), verdict_of(SEQ / "storm-v1-oldnames")
    assert shape(new) == shape(old)


def test_one_scrape_alone_makes_no_finding_from_its_cumulative_counters():
    v = verdict_of(REAL / "v1-0.28-qwen3-0.6b.prom")
    assert v.primary_class == "healthy" and v.findings == []


def test_a_log_without_stats_lines_gets_its_stats_from_the_metrics_of_its_model():
    log = [
        "(APIServer pid=1) INFO 09-11 00:44:00 [utils.py:326] non-default args: {'model': 'Qwen/Qwen3-0.6B', "
        "'gpu_memory_utilization': 0.05, 'api_server_count': 2}",
        "(APIServer pid=1) WARNING 09-11 00:44:12 [loggers.py:1386] AsyncLLM created with api_server_count more "
        "than 1; disabling stats logging to avoid incomplete stats.",
        "(APIServer pid=1) INFO:     Application startup complete.",
    ]
    logs = diagnose_source("server.log", enumerate(log, 1))
    v = verdict_of(SEQ / "storm-v1", logs=logs)
    assert [s.name for s in v.sources] == ["server.log"]  # one source: the series filled the log's run
    assert v.sources[0].metrics == ["{} [Qwen3-0.6B]".format(str(SEQ / "storm-v1") + "/")]
    f = v.primary
    assert v.primary_class == "preemption_storm" and f.source == "server.log"
    assert f.facts["gpu_memory_utilization"] == 0.05  # from the log's own config line
    assert {e.kind for e in f.evidence} == {"metric"}
    # with stats arriving, the "no stats lines" note has nothing left to say
    assert "stats_logging_disabled" not in [x.class_id for x in v.findings]


def test_without_the_metrics_that_log_says_its_stats_are_missing():
    log = [
        "(APIServer pid=1) WARNING 09-11 00:44:12 [loggers.py:1386] AsyncLLM created with api_server_count more "
        "than 1; disabling stats logging to avoid incomplete stats.",
        "(APIServer pid=1) INFO:     Application startup complete.",
    ]
    v = build_verdict(diagnose_source("server.log", enumerate(log, 1)))
    assert v.primary_class == "healthy" and [f.class_id for f in v.findings] == ["stats_logging_disabled"]


@pytest.mark.parametrize("fmt", ["json"])
def test_the_cli_judges_a_directory_of_scrapes(fmt):
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "--no-redact", "-f", fmt, str(SEQ / "storm-v1")],
        capture_output=True,
        text=True,
    )
    v = json.loads(p.stdout)
    assert p.returncode == 1 and v["primary_class"] == "preemption_storm"
    assert v["sources"][0]["format"] == "prometheus"
