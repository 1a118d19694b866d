"""vllm_doctor.metrics: real scrapes parsed, sequences turned into series, rates and restarts."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest

from vllm_doctor.metrics import (
    MetricsError,
    describe,
    episodes,
    read_directory,
    read_file,
    read_metrics,
    sniff,
    sniff_path,
)
from vllm_doctor.metrics import series as series_mod
from vllm_doctor.metrics.inputs import _Reader, metrics_url, name_time
from vllm_doctor.metrics.parse import parse_text

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "metrics")
REAL = os.path.join(FIX, "real")
SEQ = os.path.join(FIX, "seq")
T0 = 1789087500


def one(path):
    [s] = read_metrics(path)
    return s


def gauges(s):
    return [(x.kv_usage_pct, x.running, x.waiting, x.swapped) for x in s.samples]


def comparable(sample):
    d = dict(vars(sample))
    d.pop("origin")
    return d


# -- real scrapes ---------------------------------------------------------------------------
def test_v1_028_scrape_new_names_values_and_config():
    s = one(os.path.join(REAL, "v1-0.28-qwen3-0.6b.prom"))
    assert s.name.endswith("v1-0.28-qwen3-0.6b.prom [Qwen3-0.6B]")
    assert (s.model, s.engine, s.format, s.malformed, s.scrapes) == ("Qwen3-0.6B", "v1", "prometheus", 0, 1)
    x = s.samples[0]
    assert (x.kv_usage_pct, x.running, x.waiting, x.swapped) == (0.0, 0, 0, None)
    assert x.waiting_by_reason == {"capacity": 0, "deferred": 0}
    assert (x.generation_tokens_total, x.prompt_tokens_total, x.requests_finished_total) == (924.0, 68.0, 4.0)
    assert x.preemptions_total == 0.0 and x.engines == 1
    # one scrape: cumulative counts only, no rate
    assert x.seconds is None and x.preemptions_per_s is None and x.generation_tps is None
    assert s.metric_names["kv_usage"] == "vllm:kv_cache_usage_perc"
    assert s.metric_names["prefix_cache_queries"] == "vllm:prefix_cache_queries_total"
    assert s.config["num_gpu_blocks"] == 540 and s.config["block_size"] == 16
    assert s.config["gpu_memory_utilization"] == 0.05 and s.config["enable_prefix_caching"] is True
    assert s.config["num_cpu_blocks"] is None and "engine" not in s.config
    assert s.facts() == {
        "gpu_blocks": 540,
        "kv_tokens": 8640,
        "max_concurrency": 1.0546875,
        "gpu_memory_utilization": 0.05,
        "kv_cache_dtype": "auto",
        "block_size": 16,
        "enable_prefix_caching": True,
    }
    assert s.summary.intervals == 0 and s.summary.preemptions == 0.0
    assert s.summary.last_totals["generation_tokens"] == 924.0


def test_v0_06_scrape_old_names_values_and_config():
    s = one(os.path.join(REAL, "v0-0.6-mymodelname.prom"))
    assert (s.model, s.engine) == ("mymodelname", "v0")
    x = s.samples[0]
    assert (x.kv_usage_pct, x.running, x.waiting, x.swapped) == (0.0, 3, 2, 0)
    assert x.prompt_tokens_total == 5453083.0 and x.generation_tokens_total == 155722.0
    assert x.requests_finished_total == 6226.0  # stop 6193 + abort 28 + length 5
    assert x.prefix_hit_pct is None  # the V0 hit-rate gauge says -1: nothing asked
    assert s.metric_names["kv_usage"] == "vllm:gpu_cache_usage_perc"
    assert s.config["swap_space_bytes"] == 4294967296 and s.config["cache_dtype"] == "fp8_e5m2"
    assert s.facts()["kv_tokens"] == 11560 * 16 and s.facts()["gpu_blocks"] == 11560


def test_v0_qwenvl_excerpt_config_without_model_label_goes_to_the_source():
    s = one(os.path.join(REAL, "v0-0.6-qwenvl-excerpt.prom"))
    assert (s.model, s.engine) == ("qwenvl", "v0")
    assert s.config["num_gpu_blocks"] == 2048 and s.config["num_gpu_blocks_override"] == 2048
    assert s.config["swap_space_bytes"] == 0.0
    assert gauges(s) == [(0.0, 0, 0, 0)]


def test_v1_08_excerpt_old_kv_name_and_cut_family():
    s = one(os.path.join(REAL, "v1-0.8-qwen25-coder-excerpt.prom"))
    assert s.model == "Qwen/Qwen2.5-Coder-32B-Instruct"
    assert s.metric_names["kv_usage"] == "vllm:gpu_cache_usage_perc"
    assert gauges(s) == [(0.0, 0, 0, None)]
    assert s.engine is None  # no engine label, no V0-only gauge: the excerpt does not say
    assert s.malformed == 0  # a HELP/TYPE without samples is no error


def test_v1_010_excerpt_both_names_prefers_new():
    s = one(os.path.join(REAL, "v1-0.10.0-glm45-excerpt.prom"))
    assert s.samples[0].kv_usage_pct == pytest.approx(9.75010481363281e-04)
    assert s.samples[0].kv_engine == "0"
    assert s.metric_names["prefix_cache_queries"] == "vllm:prefix_cache_queries_total"
    assert s.metric_names["prefix_cache_hits"] == "vllm:gpu_prefix_cache_hits_total"  # the only one shown


def test_openmetrics_rendering_reads_the_same_as_the_text():
    text = one(os.path.join(REAL, "v1-0.28-qwen3-0.6b.prom"))
    om = one(os.path.join(FIX, "openmetrics", "v1-0.28-qwen3-0.6b.om.txt"))
    assert om.format == "openmetrics" and text.format == "prometheus"
    a, b = comparable(text.samples[0]), comparable(om.samples[0])
    a.pop("t"), b.pop("t")
    assert a == b
    assert om.config == text.config


def test_both_names_in_one_scrape_count_once_and_new_wins():
    base = open(os.path.join(REAL, "v1-0.28-qwen3-0.6b.prom")).read()
    both = (
        base.replace(
            'vllm:kv_cache_usage_perc{engine="0",model_name="Qwen3-0.6B"} 0.0',
            'vllm:kv_cache_usage_perc{engine="0",model_name="Qwen3-0.6B"} 0.25',
        )
        + 'vllm:gpu_cache_usage_perc{engine="0",model_name="Qwen3-0.6B"} 0.5\n'
        + 'vllm:gpu_prefix_cache_queries_total{engine="0",model_name="Qwen3-0.6B"} 68.0\n'
    )
    r = _Reader("x")
    samples, bad = parse_text(both)
    r.scrape(samples, 1.0, "x", "prometheus", bad)
    [s] = r.finish()
    assert s.samples[0].kv_usage_pct == 25.0
    assert s.metric_names["kv_usage"] == "vllm:kv_cache_usage_perc"
    assert s.metric_names["prefix_cache_queries"] == "vllm:prefix_cache_queries_total"


# -- detection ------------------------------------------------------------------------------
def test_sniff_tells_formats_from_content():
    real = open(os.path.join(REAL, "v1-0.28-qwen3-0.6b.prom")).read()
    assert sniff(real) == "prometheus"
    assert sniff(open(os.path.join(FIX, "openmetrics", "v1-0.28-qwen3-0.6b.om.txt")).read()) == "openmetrics"
    assert sniff(open(os.path.join(FIX, "query", "two-pods-query-range.json")).read()) == "query_range"
    assert sniff('vllm:num_requests_running{model_name="m"} 1.0\n') == "prometheus"
    log = open(os.path.join(FIX, "..", "logs", "s001-llama31-8b-3090-kv-29k.log")).read()
    assert sniff(log) is None
    assert sniff("<html><body>Not Found</body></html>") is None
    assert sniff('{"detail": "Not Found"}') is None
    assert sniff("") is None and sniff("   \n") is None


def test_sniff_path_routes_directories_and_compressed_scrapes(tmp_path):
    assert sniff_path(os.path.join(SEQ, "storm-v1")) == "directory"
    assert sniff_path(str(tmp_path)) is None
    gz = tmp_path / "scrape.prom.gz"
    gz.write_bytes(gzip.compress(open(os.path.join(REAL, "v0-0.6-mymodelname.prom"), "rb").read()))
    assert sniff_path(str(gz)) == "prometheus"
    [s] = read_metrics(str(gz))
    assert s.samples[0].running == 3
    assert sniff_path(str(tmp_path / "missing")) is None


def test_a_malformed_line_is_skipped_and_the_rest_read():
    base = open(os.path.join(REAL, "v1-0.28-qwen3-0.6b.prom")).read()
    broken = base.replace(
        "# HELP vllm:num_requests_waiting Number",
        'vllm:num_requests_running{engine="0" garbage here\n# HELP vllm:num_requests_waiting Number',
    )
    samples, bad = parse_text(broken)
    assert bad == 1
    names = {s.name for s in samples}
    assert "vllm:num_requests_waiting" in names and "vllm:generation_tokens_total" in names


def test_openmetrics_cut_before_eof_is_still_read():
    om = open(os.path.join(FIX, "openmetrics", "v1-0.28-qwen3-0.6b.om.txt")).read()
    cut = om[: om.index("# HELP vllm:cache_config_info")]
    samples, bad = parse_text(cut, "openmetrics")
    assert bad == 0
    gen = [s for s in samples if s.name == "vllm_generation_tokens_total"]
    assert gen and gen[0].value == 924.0


def test_openmetrics_timestamps_are_seconds_and_text_ones_milliseconds():
    om = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 2 1789087500.5\n# EOF\n'
    [s] = parse_text(om, "openmetrics")[0]
    assert s.timestamp == pytest.approx(1789087500.5)
    txt = 'vllm:num_requests_running{model_name="m"} 2 1789087500500\n'
    [s] = parse_text(txt, "prometheus")[0]
    assert s.timestamp == pytest.approx(1789087500.5)


# -- directories ----------------------------------------------------------------------------
def test_directory_is_one_series_with_rates_from_file_name_times():
    s = one(os.path.join(SEQ, "storm-v1"))
    assert s.scrapes == 7 and len(s.samples) == 7
    assert [x.t for x in s.samples] == [T0 + 10 * i for i in range(7)]
    assert [x.preemptions_per_s for x in s.samples] == [None, 0.6, 1.5, 1.9, 2.1, 1.9, 2.1]
    assert [x.preemptions for x in s.samples] == [None, 6.0, 15.0, 19.0, 21.0, 19.0, 21.0]
    assert [x.generation_tps for x in s.samples][1:] == pytest.approx([68.6, 54.0, 48.0, 46.0, 47.0, 45.0])
    assert [x.waiting_capacity for x in s.samples] == [0, 5, 9, 12, 14, 13, 15]
    assert [x.kv_usage_pct for x in s.samples] == [41.0, 93.0, 97.0, 99.0, 98.0, 99.0, 97.0]
    assert s.samples[1].t0 == T0 and s.samples[1].seconds == 10.0
    assert s.samples[1].finished_by_reason == {
        "stop": 0.0,
        "length": 1.0,
        "abort": 0.0,
        "error": 0.0,
        "repetition": 0.0,
    }
    assert s.samples[1].prefix_hit_pct == pytest.approx(100 * 568 / 2032)
    assert s.restarts == 0
    m = s.summary
    assert (m.scrapes, m.intervals, m.peak_kv_usage_pct, m.peak_kv_t) == (7, 6, 99.0, T0 + 30)
    assert (m.max_running, m.max_waiting, m.max_waiting_t, m.max_waiting_capacity) == (7, 15, T0 + 60, 15)
    assert (m.preemptions, m.intervals_with_preemptions, m.max_preemptions_per_s) == (101.0, 6, 2.1)
    assert (m.max_preemptions_t0, m.max_preemptions_t1) == (T0 + 30, T0 + 40)
    assert m.generation_tps == pytest.approx((4010 - 924) / 60)
    ep = m.episodes["preempting"]
    assert (ep.first, ep.last, ep.t0, ep.t1, ep.intervals) == (1, 6, T0, T0 + 60, 6)
    assert (ep.preemptions, ep.peak_kv_usage_pct, ep.max_waiting, ep.max_preemptions_per_s) == (101.0, 99.0, 15, 2.1)
    assert m.episodes["flat_generation"] is None and m.episodes["blocked"] is None


def test_old_and_new_names_give_identical_series():
    new, old = one(os.path.join(SEQ, "storm-v1")), one(os.path.join(SEQ, "storm-v1-oldnames"))
    assert [comparable(x) for x in new.samples] == [comparable(x) for x in old.samples]
    assert new.summary.to_dict() == old.summary.to_dict()
    assert new.metric_names["kv_usage"] == "vllm:kv_cache_usage_perc"
    assert old.metric_names["kv_usage"] == "vllm:gpu_cache_usage_perc"
    assert old.metric_names["prefix_cache_hits"] == "vllm:gpu_prefix_cache_hits_total"


def test_kv_heat_with_nothing_waiting_has_no_episode():
    s = one(os.path.join(SEQ, "hot-idle-v1"))
    m = s.summary
    assert m.peak_kv_usage_pct == 96.0 and m.max_waiting == 0 and m.preemptions == 0.0
    assert m.intervals_with_preemptions == 0
    assert all(ep is None for ep in m.episodes.values())
    assert m.generation_tps == pytest.approx((3960 - 924) / 50)
    # a rule's own shape: KV >= 90 % with requests waiting never holds here
    assert episodes(s, lambda x: (x.kv_usage_pct or 0) >= 90 and bool(x.waiting)) == []
    assert len(episodes(s, lambda x: (x.kv_usage_pct or 0) >= 90)) == 1


def test_running_with_flat_generation_is_an_episode():
    s = one(os.path.join(SEQ, "wedge-v1"))
    ep = s.summary.episodes["flat_generation"]
    assert (ep.first, ep.last, ep.intervals, ep.t0, ep.t1) == (2, 5, 4, T0 + 10, T0 + 50)
    assert (ep.generation_tokens, ep.prompt_tokens, ep.max_running, ep.max_waiting) == (0.0, 0.0, 3, 3)
    assert s.summary.episodes["preempting"] is None


def test_blocked_shape_nothing_running_requests_waiting_no_tokens(tmp_path):
    base = open(os.path.join(SEQ, "wedge-v1", f"scrape-{T0}.prom")).read()
    run = 'vllm:num_requests_running{engine="0",model_name="Qwen3-0.6B"} 3.0'
    wait = 'vllm:num_requests_waiting{engine="0",model_name="Qwen3-0.6B"} 0.0'
    for i in range(4):
        text = base.replace(run, run.replace("3.0", "0.0")).replace(wait, wait.replace("0.0", "1.0"))
        (tmp_path / f"scrape-{T0 + 10 * i}.prom").write_text(text)
    s = one(str(tmp_path))
    ep = s.summary.episodes["blocked"]
    assert (ep.first, ep.last, ep.intervals) == (1, 3, 3)
    assert s.summary.episodes["flat_generation"] is None


def test_directory_name_order_is_natural_and_times_fall_back_to_mtime(tmp_path):
    base = open(os.path.join(REAL, "v1-0.28-qwen3-0.6b.prom")).read()
    gen = 'vllm:generation_tokens_total{engine="0",model_name="Qwen3-0.6B"} 924.0'
    for n, tokens, mtime in ((9, 1000, 100.0), (10, 1500, 110.0)):
        p = tmp_path / f"s-{n}.prom"
        p.write_text(base.replace(gen, gen.replace("924.0", f"{tokens}.0")))
        os.utime(p, (mtime, mtime))
    (tmp_path / "README").write_text("scrapes of the pod, every 10 s\n")
    s = one(str(tmp_path))
    assert [x.t for x in s.samples] == [100.0, 110.0]
    assert s.samples[1].generation_tokens == 500.0 and s.samples[1].generation_tps == 50.0
    assert "1 file skipped: not a scrape (README)" in s.warnings


def test_sample_timestamps_win_over_the_file_name(tmp_path):
    line = 'vllm:num_requests_running{model_name="m"} 1 %d\n'
    (tmp_path / f"scrape-{T0}.prom").write_text(line % ((T0 + 5) * 1000))
    [s] = read_directory(str(tmp_path))
    assert s.samples[0].t == T0 + 5


def test_times_that_do_not_increase_give_no_rate(tmp_path):
    base = 'vllm:num_requests_running{model_name="m"} 1\nvllm:num_preemptions_total{model_name="m"} %d\n'
    (tmp_path / "a.prom").write_text(base % 5)
    (tmp_path / "b.prom").write_text(base % 9)
    for name in ("a.prom", "b.prom"):
        os.utime(tmp_path / name, (50.0, 50.0))
    s = one(str(tmp_path))
    assert s.samples[1].preemptions is None and s.samples[1].seconds is None
    assert any("not later than the one before" in w for w in s.warnings)


def test_name_time_reads_seconds_and_milliseconds():
    assert name_time("scrape-1789087500.prom") == 1789087500.0
    assert name_time("/x/y/metrics.1789087500123.txt") == pytest.approx(1789087500.123)
    assert name_time("scrape-1789087500.25.prom") == pytest.approx(1789087500.25)
    assert name_time("scrape-001.prom") is None and name_time("port-8000.prom") is None


def test_directory_without_scrapes_and_non_metrics_file_are_one_line_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(MetricsError, match="no metrics scrapes in the directory"):
        read_directory(str(tmp_path))
    with pytest.raises(MetricsError, match="not Prometheus metrics"):
        read_file(str(tmp_path / "notes.txt"))
    (tmp_path / "other.prom").write_text("# TYPE up gauge\nup 1\n")
    with pytest.raises(MetricsError, match="no vllm: series"):
        read_file(str(tmp_path / "other.prom"))


# -- query_range ----------------------------------------------------------------------------
def test_query_range_two_pods_are_two_sources():
    a, b = read_metrics(os.path.join(FIX, "query", "two-pods-query-range.json"))
    assert a.name.endswith("[Qwen3-0.6B @ llm/vllm-7d9f-0]") and b.name.endswith("[Qwen3-0.6B @ llm/vllm-7d9f-1]")
    assert a.labels == {
        "model_name": "Qwen3-0.6B",
        "namespace": "llm",
        "pod": "vllm-7d9f-0",
        "instance": "192.0.2.10:8000",
        "job": "vllm",
        "container": "vllm",
    }
    assert a.format == "query_range" and a.scrapes == 6
    assert [x.t for x in a.samples] == [T0 + 10 * i for i in range(6)]
    assert [x.preemptions_per_s for x in a.samples] == [None, 0.6, 1.5, 1.9, 2.1, 1.9]
    assert a.summary.preemptions == 80.0 and b.summary.preemptions == 0.0
    assert b.summary.peak_kv_usage_pct == 96.0 and b.summary.max_waiting == 0
    assert a.config["num_gpu_blocks"] == 540 and b.facts()["kv_tokens"] == 8640
    ev = a.evidence(3, "preemptions_per_s")
    assert ev.labels["pod"] == "vllm-7d9f-0" and ev.series == "vllm:num_preemptions_total"


def test_query_answers_vector_error_and_bad_shape(tmp_path):
    vec = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {"__name__": "vllm:num_requests_waiting", "model_name": "m"}, "value": [T0, "4"]}],
        },
    }
    p = tmp_path / "q.json"
    p.write_text(json.dumps(vec))
    [s] = read_metrics(str(p))
    assert s.samples[0].waiting == 4 and s.samples[0].t == T0
    p.write_text(json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}))
    with pytest.raises(MetricsError, match="the query failed: bad_data parse error at char 5"):
        read_metrics(str(p))
    p.write_text(json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [T0, "1"]}}))
    with pytest.raises(MetricsError, match="not a Prometheus query answer"):
        read_metrics(str(p))


# -- counters: restarts, engines, sources -------------------------------------------------
def _series(*scrapes, times=None):
    r = _Reader("mem")
    for i, text in enumerate(scrapes):
        samples, bad = parse_text(text)
        r.scrape(samples, float(times[i] if times else 10 * i), f"#{i}", "prometheus", bad)
    return r.finish()


def test_counter_drop_is_a_restart_counted_from_the_new_value():
    c = 'vllm:num_preemptions_total{model_name="m"} %d\nvllm:generation_tokens_total{model_name="m"} %d\n'
    [s] = _series(c % (100, 1000), c % (150, 1600), c % (20, 300), c % (60, 900))
    assert [x.preemptions for x in s.samples] == [None, 50.0, 20.0, 40.0]
    assert [x.generation_tokens for x in s.samples] == [None, 600.0, 300.0, 600.0]
    assert [x.restart for x in s.samples] == [False, False, True, False]
    assert s.restarts == 1 and s.restart_times == [20.0]
    assert s.summary.restarts == 1 and s.summary.preemptions == 110.0


def test_new_process_start_is_a_restart_even_when_counters_grew():
    c = 'process_start_time_seconds %d\nvllm:num_preemptions_total{model_name="m"} %d\n'
    [s] = _series(c % (1000, 50), c % (1000, 70), c % (2000, 90))
    assert [x.preemptions for x in s.samples] == [None, 20.0, 90.0]
    assert s.samples[2].restart is True


def test_created_time_change_is_a_restart():
    c = 'vllm:num_preemptions_total{model_name="m"} %d\nvllm:num_preemptions_created{model_name="m"} %d\n'
    [s] = _series(c % (50, 1000), c % (70, 1000), c % (90, 2000))
    assert [x.preemptions for x in s.samples] == [None, 20.0, 90.0]
    assert [x.restart for x in s.samples] == [False, False, True]


def test_per_engine_gauges_sum_kv_takes_max_counters_difference_per_engine():
    def scrape(e0, e1):
        return (
            'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
            'vllm:num_requests_running{engine="1",model_name="m"} 4\n'
            'vllm:num_requests_waiting{engine="0",model_name="m"} 1\n'
            'vllm:num_requests_waiting{engine="1",model_name="m"} 2\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
            'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.9\n'
            f'vllm:num_preemptions_total{{engine="0",model_name="m"}} {e0}\n'
            f'vllm:num_preemptions_total{{engine="1",model_name="m"}} {e1}\n'
            'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1\n'
            'vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="1000"} 1\n'
        )

    [s] = _series(scrape(10, 20), scrape(30, 25), scrape(5, 35))
    x = s.samples[1]
    assert (x.running, x.waiting, x.kv_usage_pct, x.kv_engine, x.engines) == (7, 3, 90.0, "1", 2)
    assert (x.preemptions_total, x.preemptions) == (55.0, 25.0)
    # engine 0 restarted (30 -> 5): it counted 5; engine 1 went on (+10)
    assert s.samples[2].preemptions == 15.0 and s.samples[2].restart is True
    assert s.config == {"block_size": 16, "num_gpu_blocks": 1000} and s.engine == "v1"
    assert s.evidence(1, "kv_usage_pct").labels == {"model_name": "m", "engine": "1"}


def test_several_models_and_pods_are_several_sources():
    text = (
        'vllm:num_requests_running{model_name="a",pod="p0"} 1\n'
        'vllm:num_requests_running{model_name="a",pod="p1"} 2\n'
        'vllm:num_requests_running{model_name="b",pod="p1"} 3\n'
        'vllm:cache_config_info{block_size="16",num_gpu_blocks="7",pod="p1"} 1\n'
    )
    srcs = _series(text)
    assert [(s.model, s.location, s.samples[0].running) for s in srcs] == [
        ("a", "p0", 1),
        ("a", "p1", 2),
        ("b", "p1", 3),
    ]
    assert [s.name for s in srcs] == ["mem [a @ p0]", "mem [a @ p1]", "mem [b @ p1]"]
    assert [s.config.get("num_gpu_blocks") for s in srcs] == [None, 7, 7]


def test_instance_names_the_location_when_there_is_no_pod():
    [s] = _series('vllm:num_requests_running{instance="192.0.2.1:8000",job="vllm",model_name="a"} 1\n')
    assert s.location == "192.0.2.1:8000" and s.name == "mem [a @ 192.0.2.1:8000]"


def test_request_success_by_reason_and_new_reason_series():
    a = 'vllm:request_success_total{finished_reason="stop",model_name="m"} 10\n'
    b = a.replace("10", "12") + 'vllm:request_success_total{finished_reason="abort",model_name="m"} 3\n'
    [s] = _series(a, b)
    assert s.samples[1].finished_by_reason == {"stop": 2.0, "abort": 3.0}
    assert s.samples[1].requests_finished == 5.0 and s.samples[1].restart is False


# -- bounds, evidence, description --------------------------------------------------------------
def test_series_is_bounded_and_merging_keeps_the_counts(monkeypatch):
    monkeypatch.setattr(series_mod, "MAX_SAMPLES", 8)
    c = 'vllm:num_requests_running{model_name="m"} %d\nvllm:num_preemptions_total{model_name="m"} %d\n'
    [s] = _series(*[c % (i, 3 * i) for i in range(20)])
    assert len(s.samples) <= 8 and s.scrapes == 20 and s.summary.scrapes == 20
    assert s.samples[0].t == 0.0 and s.samples[-1].t == 190.0
    assert sum(x.preemptions or 0 for x in s.samples) == 57.0 == s.summary.preemptions
    assert sum(x.scrapes for x in s.samples) == 20
    merged = s.samples[-1]
    assert merged.preemptions_per_s == pytest.approx(merged.preemptions / merged.seconds)
    assert merged.seconds == 10.0 * merged.scrapes


def test_evidence_names_series_labels_and_window():
    s = one(os.path.join(SEQ, "storm-v1"))
    rate = s.evidence(3, "preemptions_per_s", note="sustained")
    assert (rate.kind, rate.series, rate.t0, rate.t1, rate.value, rate.unit) == (
        "metric",
        "vllm:num_preemptions_total",
        T0 + 20,
        T0 + 30,
        1.9,
        "preemptions/s",
    )
    assert rate.labels == {"model_name": "Qwen3-0.6B"} and rate.origin == f"scrape-{T0 + 30}.prom"
    assert rate.text == (
        'vllm:num_preemptions_total{model_name="Qwen3-0.6B"}: 1.9 preemptions/s over 10 s, '
        "2026-09-11T00:45:20Z to 2026-09-11T00:45:30Z"
    )
    kv = s.evidence(3, "kv_usage_pct")
    assert (kv.series, kv.t0, kv.t1, kv.value) == ("vllm:kv_cache_usage_perc", T0 + 30, T0 + 30, 99.0)
    assert kv.labels == {"model_name": "Qwen3-0.6B", "engine": "0"}
    cap = s.evidence(3, "waiting_capacity")
    assert (
        cap.series == "vllm:num_requests_waiting_by_reason" and cap.labels["reason"] == "capacity" and cap.value == 12
    )
    ep = s.summary.episodes["preempting"]
    window = s.evidence(ep.last, "preemptions", t0=ep.t0, value=ep.preemptions)
    assert (window.t0, window.t1, window.value) == (T0, T0 + 60, 101.0)
    assert set(rate.to_dict()) >= {"kind", "source", "series", "labels", "t0", "t1", "value", "unit", "text"}
    with pytest.raises(ValueError):
        s.evidence(0, "preemptions_per_s")  # the first scrape has no rate
    with pytest.raises(KeyError):
        s.evidence(1, "nonsense")


def test_describe_and_to_dict_are_plain_data():
    s = one(os.path.join(SEQ, "storm-v1"))
    line = describe(s)
    assert "7 scrapes over 60 s (v1, prometheus)" in line
    assert "KV cache peak 99%" in line and "waiting max 15" in line
    assert "preemptions 101 in 6 of 6 intervals (max 2.1/s)" in line
    d = json.loads(json.dumps(s.to_dict()))
    assert len(d["samples"]) == 7 and d["summary"]["preemptions"] == 101.0
    assert d["summary"]["episodes"]["preempting"]["intervals"] == 6
    assert "_prefix" not in d["samples"][0]
    single = describe(one(os.path.join(REAL, "v0-0.6-mymodelname.prom")))
    assert "1 scrape (v0, prometheus)" in single and "one scrape: no rates" in single


def test_metrics_url_adds_the_path_only_when_missing():
    assert metrics_url("http://h:8000") == "http://h:8000/metrics"
    assert metrics_url("http://h:8000/") == "http://h:8000/metrics"
    assert metrics_url("https://h/vllm/metrics") == "https://h/vllm/metrics"


def test_fixture_sequences_are_what_the_builder_makes(tmp_path):
    """The committed sequences are the builder's output (values changed, nothing else)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_sequences", os.path.join(FIX, "build_sequences.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = open(os.path.join(REAL, "v1-0.28-qwen3-0.6b.prom")).read()
    table = mod.SEQUENCES["wedge-v1"]
    first = mod.render(base, {k: v[2] for k, v in table.items()})
    assert first == open(os.path.join(SEQ, "wedge-v1", f"scrape-{T0 + 20}.prom")).read()
    changed = [(a, b) for a, b in zip(base.splitlines(), first.splitlines()) if a != b]
    assert changed and all(a.rpartition(" ")[0] == b.rpartition(" ")[0] for a, b in changed)
    shutil.rmtree(tmp_path)


@pytest.mark.parametrize("bad", ["+Inf", "NaN", "-Inf"])
def test_a_non_finite_sample_is_skipped_and_counted(bad):
    """break-it: one +Inf counter in one scrape ended the whole diagnosis (int(inf))."""
    text = (
        "# TYPE vllm:num_preemptions_total counter\n"
        f'vllm:num_preemptions_total{{model_name="m"}} {bad}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m"} 3\n'
    )
    samples, bad_lines = parse_text(text)
    assert [s.name for s in samples] == ["vllm:num_requests_running"]
    assert bad_lines == 1


def test_a_timestamp_out_of_range_is_dropped_not_the_sample():
    text = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m"} 3 99999999999999999999\n'
    samples, bad_lines = parse_text(text)
    assert [(s.value, s.timestamp) for s in samples] == [(3.0, None)] and bad_lines == 0


def test_a_scrape_directory_with_an_infinite_counter_still_gets_a_verdict(tmp_path):
    """The storm sequence with one scrape's preemption counter at +Inf: the storm is still
    read from the other scrapes, and nothing fails inside."""
    from pathlib import Path

    seq = sorted(Path(FIX, "seq", "storm-v1").glob("*.prom"))
    for i, path in enumerate(seq):
        text = path.read_text(encoding="utf-8")
        if i == 2:
            lines = [
                ln.rsplit(" ", 1)[0] + " +Inf" if ln.startswith("vllm:num_preemptions_total") else ln
                for ln in text.splitlines()
            ]
            assert lines != text.splitlines()
            text = "\n".join(lines) + "\n"
        (tmp_path / path.name).write_text(text, encoding="utf-8")
    from click.testing import CliRunner

    from vllm_doctor.cli import cli

    def verdict(d):
        return json.loads(CliRunner().invoke(cli, ["diagnose", str(d), "-f", "json"]).output)

    v = verdict(tmp_path)
    assert v["primary_class"] == verdict(Path(FIX, "seq", "storm-v1"))["primary_class"] == "preemption_storm"
    assert not v["sources"][0]["internal_errors"]


# -- inputs that are read only in part: skipped, counted, said (break-it 9, 11, 12) -----------


def _storm_copy(tmp_path, change=None):
    """The storm-v1 sequence copied into ``tmp_path``; ``change(i, text)`` edits scrape i."""
    for i, name in enumerate(sorted(os.listdir(os.path.join(SEQ, "storm-v1")))):
        text = open(os.path.join(SEQ, "storm-v1", name)).read()
        (tmp_path / name).write_text(change(i, text) if change else text)


def _verdict(path):
    from click.testing import CliRunner

    from vllm_doctor.cli import cli

    r = CliRunner().invoke(cli, ["diagnose", str(path), "-f", "json"])
    return r.exit_code, json.loads(r.output)


def test_files_of_a_scrape_directory_that_are_not_scrapes_are_named_in_the_verdict(tmp_path):
    """break-it 11: garbage, an empty file and a subdirectory were skipped without a word."""
    _storm_copy(tmp_path)
    (tmp_path / f"scrape-{T0 + 25}.prom").write_bytes(bytes(range(256)) * 20)
    (tmp_path / f"scrape-{T0 + 26}.prom").write_text("")
    (tmp_path / f"scrape-{T0 + 27}.prom").mkdir()
    code, v = _verdict(tmp_path)
    assert code == 1 and v["primary_class"] == "preemption_storm"
    note = f"3 files skipped: not a scrape (scrape-{T0 + 25}.prom, scrape-{T0 + 26}.prom, scrape-{T0 + 27}.prom/)"
    assert v["sources"][0]["notes"] == [note]
    from click.testing import CliRunner

    from vllm_doctor.cli import cli

    text = CliRunner().invoke(cli, ["diagnose", str(tmp_path)]).output
    assert f"note: {note}" in " ".join(text.split())


def test_a_duplicate_series_is_ignored_and_counted_the_first_read(tmp_path):
    """break-it 12: a second num_preemptions_total sample of the same series (appended to
    every scrape) overwrote the first and turned 101 preemptions into none."""
    dup = 'vllm:num_preemptions_total{engine="0",model_name="Qwen3-0.6B"} 999999\n'
    _storm_copy(tmp_path, lambda i, text: text + dup)
    code, v = _verdict(tmp_path)
    _, clean = _verdict(os.path.join(SEQ, "storm-v1"))
    assert v["title"] == clean["title"] and "101 preemptions" in v["title"]
    assert v["sources"][0]["notes"] == ["7 duplicate sample(s) ignored (the first of each series was read)"]


@pytest.mark.parametrize(
    "extra,note",
    [
        ("0 4", "7 sample time stamp(s) ignored"),
        ("0 1789087500000", "7 sample time stamp(s) ignored"),
        ("0 2 3 4", "7 sample time stamp(s) ignored"),  # prometheus_client reads "2 3 4" as a stamp
        ("0 -5", None),  # out of range: the stamp is dropped where it is read (parse._time)
    ],
)
def test_a_stray_time_stamped_sample_never_moves_the_scrape_time(tmp_path, extra, note):
    """break-it 12: one timestamped line (a time near the epoch) became every scrape's time,
    so no interval had a rate. A stamp only some samples carry is ignored and counted."""
    line = f'vllm:num_requests_running{{engine="1",model_name="Qwen3-0.6B"}} {extra}\n'
    _storm_copy(tmp_path, lambda i, text: text + line)
    s = one(str(tmp_path))
    assert [x.t for x in s.samples] == [T0 + 10 * i for i in range(7)]
    assert sum(x.preemptions or 0 for x in s.samples) == 101
    if note:
        assert any(w.startswith(note) for w in s.warnings), s.warnings


def test_a_time_stamp_on_every_sample_is_the_scrape_time(tmp_path):
    """A federation stamps every sample: then the stamps, not the file's name, give the time."""

    def stamp(i, text):
        ms = (T0 + 1000 + 10 * i) * 1000
        return "".join(ln + (f" {ms}" if ln and not ln.startswith("#") else "") + "\n" for ln in text.splitlines())

    _storm_copy(tmp_path, stamp)
    s = one(str(tmp_path))
    assert [x.t for x in s.samples] == [T0 + 1000 + 10 * i for i in range(7)] and not s.warnings


def test_malformed_query_answers_are_one_line_input_errors(tmp_path):
    """break-it 9: "metric" not an object and JSON nested past the parser's depth were
    internal errors; a point with a huge time or value is skipped and counted."""
    bad_metric = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": "x", "values": []}]}}
    (tmp_path / "metric.json").write_text(json.dumps(bad_metric))
    with pytest.raises(MetricsError, match=r'metric.json: not a Prometheus query answer \(a series\' "metric"'):
        read_file(str(tmp_path / "metric.json"))
    (tmp_path / "deep.json").write_text(
        '{"status": "success", "data": {"result": ' + "[" * 100000 + "]" * 100000 + "}}"
    )
    with pytest.raises(MetricsError, match=r"deep.json: not a Prometheus query answer \(JSON nested too deeply\)"):
        read_file(str(tmp_path / "deep.json"))
    labels = {"__name__": "vllm:num_requests_running", "model_name": "m"}
    points = [[T0, "1"], [1e300, "2"], [T0 + 10, "1e400"], [T0 + 20, 10**400], [T0 + 30, "3"]]
    good = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": labels, "values": points}]}}
    (tmp_path / "q.json").write_text(json.dumps(good))
    [s] = read_file(str(tmp_path / "q.json"))
    assert [x.running for x in s.samples] == [1, 3] and s.malformed == 3
    import subprocess
    import sys

    for name in ("metric.json", "deep.json"):
        p = subprocess.run(
            [sys.executable, "-m", "vllm_doctor", "diagnose", str(tmp_path / name)],
            capture_output=True,
            text=True,
        )
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "internal error" not in p.stderr, p.stderr
