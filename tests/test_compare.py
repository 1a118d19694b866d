"""`vllm-doctor compare`: pairs of real corpus logs, each with the difference that must lead.

Pairs come from ``fixtures/logs`` as they are, or under a journald wrapper
(``fixtures/compare``, rebuilt and checked line for line below). Where a case needs what the
excerpts do not print (a version, an args line), the test adds it in vLLM's own wording
(``vLLM API server version %s``, ``non-default args: %s``, ``args: Namespace(...)``) before the
real body, as ``tests/test_formats.py`` does; the thresholds are pinned with lines in vLLM's
wording whose numbers sit either side of each constant. Every output is validated against
``compare.schema.json``.
"""

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from conftest import fixture_path, load_manifest

from vllm_doctor import thresholds
from vllm_doctor.cli import cli as main
from vllm_doctor.compare import CompareError, compare_runs, parse_args, pick_run, redact_comparison
from vllm_doctor.pipeline import diagnose_input, diagnose_source
from vllm_doctor.render.compare import render_compare
from vllm_doctor.run import Line
from vllm_doctor.sources import open_input

SCHEMA = json.loads(resources.files("vllm_doctor").joinpath("compare.schema.json").read_text())
COMPARE = Path(__file__).resolve().parent.parent / "fixtures" / "compare"


def results_of(path):
    src = open_input(str(path))
    try:
        return diagnose_input(src)
    finally:
        src.stream.close()


def results_of_lines(name, lines):
    return diagnose_source(name, enumerate(lines, 1))


def valid(comparison):
    """The comparison, after its JSON (and the other formats) rendered and validated."""
    d = json.loads(render_compare(comparison, "json"))
    jsonschema.validate(d, SCHEMA)
    assert render_compare(comparison, "text") and render_compare(comparison, "markdown")
    return comparison


def pair(old, new, runs=(None, None)):
    a = results_of(fixture_path(old)) if isinstance(old, str) else old
    b = results_of(fixture_path(new)) if isinstance(new, str) else new
    return valid(compare_runs(pick_run(a, "old", runs[0]), pick_run(b, "new", runs[1])))


def body(name):
    return fixture_path(name).read_text(encoding="utf-8").splitlines()


def header(version=None, args=None, namespace=None):
    """Start lines in vLLM's wording (api_server.py, entrypoints/utils.py)."""
    out = []
    if version:
        out.append(f"INFO 06-22 02:50:00 [api_server.py:1895] vLLM API server version {version}")
    if args is not None:
        out.append(f"INFO 06-22 02:50:00 [utils.py:326] non-default args: {args!r}")
    if namespace is not None:
        out.append(f"INFO 12-18 21:40:00 api_server.py:727] args: Namespace({namespace})")
    return out


def lead(c):
    assert c.differences, c.notes
    return c.differences[0]


def sides(d):
    return {e.side for e in d.evidence}


# -- pairs of real logs, each with its leading difference -------------------------------------
def test_version_pair_kv_tokens_lead_when_nothing_failed():
    # r032 (0.9.0, its report) and r022: the same 40960-token Qwen3-style start-up, healthy both.
    c = pair("r032-docker-ui-ts-pipe-v1-startup.log", "r022-v1-startup-sm120-healthy.log")
    d = lead(c)
    assert (d.category, d.key, d.old, d.new) == ("capacity", "kv_tokens", 235136, 251920)
    assert d.title == "KV cache tokens 235136 -> 251920 (+7 %)" and d.change_pct == 7.1
    assert "graph memory 0.74 -> 0.84 GiB" in d.implies
    assert [(e.side, e.line) for e in d.evidence[:2]] == [("old", 5), ("new", 7)]
    assert not c.regressed and c.exit_code == 0  # more KV cache is no regression


def test_kv_capacity_lost_is_a_regression():
    c = pair("r022-v1-startup-sm120-healthy.log", "r032-docker-ui-ts-pipe-v1-startup.log")
    d = lead(c)
    assert (d.key, d.regression, d.change_pct) == ("kv_tokens", True, -6.7)
    assert c.regressed and c.exit_code == 1


def test_the_issue_example_same_args_between_two_versions():
    # The same args on two versions: the version changed what is reserved, graph memory named.
    args = {"model_tag": "MODEL", "model": "MODEL", "max_model_len": 40960}
    old = results_of_lines("old.log", header("0.10.1", args) + body("r022-v1-startup-sm120-healthy.log"))
    new = results_of_lines("new.log", header("0.11.0", args) + body("r032-docker-ui-ts-pipe-v1-startup.log"))
    d = lead(pair(old, new))
    assert d.title == "KV cache tokens 251920 -> 235136 (-7 %)"
    assert d.implies.startswith("same args, between 0.10.1 and 0.11.0: the version changed what is reserved")
    assert "graph memory 0.84 -> 0.74 GiB" in d.implies
    assert sides(d) == {"old", "new"}
    assert [x.key for x in pair(old, new).differences if x.category == "config"] == ["vllm_version"]


def test_healthy_then_failed_names_the_changed_flag_the_error_names():
    c = pair("r022-v1-startup-sm120-healthy.log", "s006-v1-kv-1m-estimate-199552.log")
    d = lead(c)
    assert d.category == "outcome" and d.regression
    assert d.title == "The new run failed in KV cache sizing (kv_cache_capacity, VD101) where the old one passed it"
    assert "likely cause: max_model_len 40960 -> 1048576 (the failure's lines name max_model_len)" in d.implies
    old_lines = [e for e in d.evidence if e.side == "old"]
    new_lines = [e for e in d.evidence if e.side == "new"]
    assert old_lines[0].line == 10 and old_lines[0].note == "got past KV cache sizing"  # the capture bar
    assert new_lines[0].line == 1 and "max seq len (1048576)" in new_lines[0].text
    assert any(e.note == "max_model_len = 40960" for e in old_lines)
    assert c.new.outcome == "failed" and c.old.outcome == "healthy" and c.exit_code == 1
    assert c.new.verdict.first_remedy.flag == "--max-model-len 196608"


def test_graph_capture_failure_where_the_old_one_passed():
    c = pair("r022-v1-startup-sm120-healthy.log", "s023-qwen72b-ray-8x4090-cudagraph-oom.log")
    d = lead(c)
    assert (
        d.title
        == "The new run failed in CUDA graph capture (cuda_graph_capture_oom, VD103) where the old one passed it"
    )
    old_line = next(e for e in d.evidence if e.side == "old")
    assert (old_line.line, old_line.note) == (11, "got past CUDA graph capture")
    assert "Graph capturing finished" in old_line.text
    assert c.exit_code == 1


def test_fixed_run_is_no_regression():
    c = pair("s006-v1-kv-1m-estimate-199552.log", "r022-v1-startup-sm120-healthy.log")
    d = lead(c)
    assert d.category == "outcome" and not d.regression
    assert d.title.startswith("The new run got through where the old one failed in KV cache sizing (kv_cache_capacity")
    assert c.exit_code == 0


def test_one_model_two_failures_the_earlier_one_is_the_regression():
    # gpt-oss-120b on an 80 GB H100 both times: a sampler warm-up OOM, then a negative KV budget.
    c = pair("x004-gptoss120b-h100-dummy-sampler-oom.log", "x006-gptoss120b-h100-enginecore0-negative-kv.log")
    d = lead(c)
    assert d.title == (
        "Both failed, differently: the old run in warm-up (sampler_warmup_oom), "
        "the new one in KV cache sizing (kv_cache_capacity), earlier"
    )
    assert d.regression and sides(d) == {"old", "new"}
    assert any("Available KV cache memory: -2.14 GiB" in e.text for e in d.evidence)
    back = pair("x006-gptoss120b-h100-enginecore0-negative-kv.log", "x004-gptoss120b-h100-dummy-sampler-oom.log")
    assert lead(back).title.endswith(", later") and not back.regressed


def test_flag_the_sampler_error_names_is_the_likely_cause():
    old = results_of_lines(
        "old.log", header("0.8.5", {"model": "MODEL", "max_num_seqs": 128}) + body("r022-v1-startup-sm120-healthy.log")
    )
    new = results_of_lines(
        "new.log",
        header("0.8.5", {"model": "MODEL", "max_num_seqs": 256}) + body("s025-v08-tp2-sampler-warmup-256.log"),
    )
    c = pair(old, new)
    d = lead(c)
    assert d.title == "The new run failed in warm-up (sampler_warmup_oom, VD104) where the old one passed it"
    assert "likely cause: max_num_seqs 128 -> 256 (the failure's lines name max_num_seqs)" in d.implies
    assert {(e.side, e.note) for e in d.evidence} >= {("old", "max_num_seqs = 128"), ("new", "max_num_seqs = 256")}
    config = [x for x in c.differences if x.category == "config"]
    assert [x.key for x in config] == ["max_num_seqs"]


def test_a_flag_set_only_in_the_new_run_was_the_default_before():
    old = results_of_lines("old.log", header("0.8.5", {"model": "MODEL"}) + body("r022-v1-startup-sm120-healthy.log"))
    new = results_of_lines(
        "new.log",
        header("0.8.5", {"model": "MODEL", "max_num_seqs": 512}) + body("s025-v08-tp2-sampler-warmup-256.log"),
    )
    assert "likely cause: max_num_seqs (default) -> 512" in lead(pair(old, new)).implies


def test_eager_mode_dropped_before_a_capture_oom_in_namespace_args():
    ns = "host=None, port=8000, model='MODEL', tensor_parallel_size=4, enforce_eager={}, max_num_seqs=256"
    old = results_of_lines(
        "old.log", header(namespace=ns.format(True)) + body("r045-qwen25vl-72b-tp4-eager-startup-healthy.log")
    )
    new = results_of_lines(
        "new.log", header(namespace=ns.format(False)) + body("s023-qwen72b-ray-8x4090-cudagraph-oom.log")
    )
    d = lead(pair(old, new))
    assert d.title.startswith("The new run failed in CUDA graph capture")
    assert "likely cause: enforce_eager True -> False (the failure's lines name enforce_eager)" in d.implies


def test_both_failing_the_same_way_is_a_note_not_a_difference():
    c = pair("s006-v1-kv-1m-estimate-199552.log", "s004-v1-kv-1m-context-oneline.log")
    assert all(d.category != "outcome" for d in c.differences)
    assert any("Both runs end the same way: kv_cache_capacity" in n for n in c.notes)
    assert lead(c).key == "kv_available_gib"  # 8.42 -> 9.97 GiB


def test_stats_medians_compare_throughput_per_running_request():
    c = pair("u019-ascend-minimax-ray-pp-slow-kv83-nothing-waiting.log", "r002-mtp-slow-v1-waiting.log")
    t = next(d for d in c.differences if d.category == "throughput")
    assert t.old == pytest.approx(5.4) and t.new == pytest.approx(1055.3)
    assert "per running request 1.35 -> 58.63 tokens/s" in t.implies and "median waiting 0 -> 33" in t.implies
    assert any("bounded stats series" in n for n in c.notes)
    rows = {r.key: r for r in c.rows}
    assert rows["median_running"].old.value == 4 and rows["median_running"].new.value == 18
    assert rows["peak_kv_usage_pct"].new.value == 98.4 and rows["peak_kv_usage_pct"].new.line == 5


# -- two runs of one log: --runs ----------------------------------------------------------------
def journald(i, pid, line):
    return f"Nov 30 03:{i // 60 % 60:02d}:{i % 60:02d} gpu-node-3 vllm[{pid}]: {line}"


def built_restart():
    """A systemd restart: r022 under one PID, then s006 under a new one (journald short)."""
    first = body("r022-v1-startup-sm120-healthy.log")
    lines = [journald(i, 100, x) for i, x in enumerate(first)]
    lines += [journald(len(first) + i, 200, x) for i, x in enumerate(body("s006-v1-kv-1m-estimate-199552.log"))]
    return lines


def built_one_process():
    """One process printing two starts (a restart loop in the unit's script), each after an args line."""
    args = "INFO 06-22 02:50:00 [utils.py:326] non-default args: {'model': 'MODEL', 'max_model_len': 40960}"
    lines = []
    for name in ("r032-docker-ui-ts-pipe-v1-startup.log", "r022-v1-startup-sm120-healthy.log"):
        lines += [args] + body(name)
    return [journald(i, 4127, x) for i, x in enumerate(lines)]


@pytest.mark.parametrize(
    "name,build",
    [
        ("journald-restart-r022-then-s006.log", built_restart),
        ("journald-one-process-r032-then-r022.log", built_one_process),
    ],
)
def test_compare_fixtures_are_the_corpus_logs_wrapped(name, build):
    assert COMPARE.joinpath(name).read_text(encoding="utf-8").splitlines() == build()


def test_runs_of_a_journald_restart_are_its_two_processes():
    results = results_of(COMPARE / "journald-restart-r022-then-s006.log")
    assert len(results) == 2  # a new PID is a new source, as in diagnose
    c = valid(compare_runs(pick_run(results, "j.log", 1), pick_run(results, "j.log", 2)))
    assert c.old.source.endswith("[vllm[100]@gpu-node-3]") and c.new.source.endswith("[vllm[200]@gpu-node-3]")
    assert (c.old.run, c.new.run, c.old.number, c.new.number, c.new.runs) == (1, 1, 1, 2, 2)
    d = lead(c)
    assert d.title == "The new run failed in KV cache sizing (kv_cache_capacity, VD101) where the old one passed it"
    assert {e.source for e in d.evidence} == {c.old.source, c.new.source}


def test_runs_of_one_process_are_numbered_as_the_verdict_numbers_them():
    results = results_of(COMPARE / "journald-one-process-r032-then-r022.log")
    assert len(results) == 1 and [r.index for r in results[0].tracker.runs] == [1, 2]
    c = valid(compare_runs(pick_run(results, "j.log", 1), pick_run(results, "j.log", 2)))
    d = lead(c)
    assert (d.key, d.old, d.new) == ("kv_tokens", 235136, 251920)
    assert d.implies.startswith("same args; the versions are not both in the log")
    assert [(e.side, e.line) for e in d.evidence[:2]] == [("old", 6), ("new", 18)]
    assert any("holds 2 runs: this is run 2" in n for n in c.notes)


def test_fewer_runs_than_asked_is_said_clearly():
    results = results_of(fixture_path("r022-v1-startup-sm120-healthy.log"))
    with pytest.raises(CompareError, match=r"^r\.log holds 1 server run, so it has no run 2: a new run starts"):
        pick_run(results, "r.log", 2)
    restart = results_of(COMPARE / "journald-restart-r022-then-s006.log")
    with pytest.raises(CompareError, match=r"holds 2 server runs \(1 = .*\[vllm\[100\]@gpu-node-3\] run 1; 2 = "):
        pick_run(restart, "j.log", 3)


def test_the_same_run_twice_is_refused():
    results = results_of(fixture_path("r022-v1-startup-sm120-healthy.log"))
    with pytest.raises(CompareError, match="same run"):
        compare_runs(pick_run(results, "r.log", 1), pick_run(results, "r.log", 1))


def test_an_input_that_is_not_vllm_output_is_refused():
    with pytest.raises(CompareError, match="nothing recognisable as vLLM output"):
        pick_run(results_of_lines("x.log", ["hello", "world"]), "x.log", None)


# -- the judgement numbers, each pinned on both sides -------------------------------------------
def kv_log(tokens):
    return [
        f"INFO 06-22 02:54:47 [kv_cache_utils.py:716] GPU KV cache size: {tokens:,} tokens",
        "INFO 06-22 02:55:02 [core.py:172] init engine (profile, create kv cache, warmup model) took 44.51 seconds",
    ]


def keys(old_lines, new_lines, category=None):
    c = pair(results_of_lines("old.log", old_lines), results_of_lines("new.log", new_lines))
    return [d.key for d in c.differences if category is None or d.category == category], c


@pytest.mark.parametrize("tokens,counted", [(96500, False), (94000, True)])
def test_capacity_change_threshold(tokens, counted):
    # COMPARE_CAPACITY_PCT (5 %): -3.5 % is the profiler's noise, -6 % is capacity lost.
    found, c = keys(kv_log(100000), kv_log(tokens))
    assert ("kv_tokens" in found) is counted
    assert c.regressed is counted


def graph_log(gib):
    return kv_log(100000)[:1] + [
        f"INFO 06-22 02:55:02 [gpu_model_runner.py:2196] Graph capturing finished in 10 secs, took {gib:.2f} GiB"
    ]


@pytest.mark.parametrize("gib,counted", [(2.15, False), (2.30, True)])
def test_memory_change_needs_a_quarter_gib(gib, counted):
    # COMPARE_MIN_GIB (0.25): +0.15 GiB (+7.5 %) is noise, +0.30 GiB (+15 %) takes KV cache.
    found, _ = keys(graph_log(2.0), graph_log(gib), "capacity")
    assert ("cuda_graph_gib" in found) is counted


def stats_log(tps, intervals=3, running=10):
    return [
        f"INFO 06-22 03:00:{10 * i:02d} [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        f"Avg generation throughput: {tps:.1f} tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
        "GPU KV cache usage: 20.0%, Prefix cache hit rate: 0.0%"
        for i in range(intervals)
    ]


@pytest.mark.parametrize("tps,counted", [(86.0, False), (73.0, True)])
def test_throughput_change_threshold(tps, counted):
    # COMPARE_THROUGHPUT_PCT (20 %): -14 % is a different load, -27 % per request is slower.
    found, c = keys(stats_log(100.0), stats_log(tps), "throughput")
    assert found == (["median_generation_tps"] if counted else [])
    assert c.regressed is counted


@pytest.mark.parametrize("intervals,compared", [(2, False), (3, True)])
def test_medians_need_three_intervals_each(intervals, compared):
    found, c = keys(stats_log(100.0, intervals), stats_log(50.0, intervals), "throughput")
    assert bool(found) is compared
    assert any("Stats medians are not compared" in n for n in c.notes) is not compared


def init_log(seconds):
    return [
        f"INFO 06-22 02:55:02 [core.py:172] init engine (profile, create kv cache, warmup model) took {seconds:.2f} seconds"
    ]


@pytest.mark.parametrize(
    "old,new,counted",
    [
        (20.0, 34.0, True),  # +70 %, +14 s
        (4.0, 9.0, False),  # +125 % but 5 s: COMPARE_TIMING_MIN_S
        (30.0, 42.0, False),  # +12 s but +40 %: COMPARE_TIMING_PCT
    ],
)
def test_timing_thresholds(old, new, counted):
    found, c = keys(init_log(old), init_log(new), "timing")
    assert found == (["init_engine_s"] if counted else [])
    assert not c.regressed  # a slower start is a difference, not a failure


def test_thresholds_are_read_at_call_time(monkeypatch):
    monkeypatch.setattr(thresholds, "COMPARE_CAPACITY_PCT", 1.0)
    found, _ = keys(kv_log(100000), kv_log(98000))
    assert "kv_tokens" in found


# -- ranking ------------------------------------------------------------------------------------
def test_ranking_is_outcome_capacity_throughput_config_timing():
    old = results_of_lines(
        "old.log",
        header("0.10.1", {"model": "MODEL", "max_num_seqs": 128})
        + kv_log(100000)[:1]
        + init_log(20.0)
        + stats_log(100.0),
    )
    new = results_of_lines(
        "new.log",
        header("0.11.0", {"model": "MODEL", "max_num_seqs": 256})
        + kv_log(80000)[:1]
        + init_log(60.0)
        + stats_log(50.0),
    )
    c = pair(old, new)
    assert [(d.rank, d.category, d.key) for d in c.differences] == [
        (1, "capacity", "kv_tokens"),
        (2, "throughput", "median_generation_tps"),
        (3, "config", "vllm_version"),
        (4, "config", "max_num_seqs"),
        (5, "timing", "init_engine_s"),
    ]
    assert c.differences[0].implies.startswith("the settings changed it: max_num_seqs 128 -> 256")
    assert c.differences[0].implies.endswith("the version changed too (0.10.1 -> 0.11.0): either may have done it")


# -- the args lines ----------------------------------------------------------------------------
def line(text):
    return Line("s", 1, text)


def test_non_default_args_are_parsed_whole():
    kind, args = parse_args(
        line(
            "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'max_model_len': 32768, 'enforce_eager': True, "
            "'compilation_config': {'level': 3, 'cudagraph_capture_sizes': [1, 2, 4]}, 'served_model_name': ['a, b']}"
        )
    )
    assert kind == "non-default"
    assert args == {
        "model_tag": "'Qwen/Qwen3-8B'",
        "max_model_len": "32768",
        "enforce_eager": "True",
        "compilation_config": "{'level': 3, 'cudagraph_capture_sizes': [1, 2, 4]}",
        "served_model_name": "['a, b']",
    }


def test_namespace_args_and_a_clipped_line():
    kind, args = parse_args(
        line("args: Namespace(host=None, port=8000, model='m', max_model_len=None, lora_modules=[(")
    )
    assert kind == "all" and args == {"host": "None", "port": "8000", "model": "'m'", "max_model_len": "None"}
    assert parse_args(None) == (None, {})


# -- the command --------------------------------------------------------------------------------
def run(*args, input=None):
    return CliRunner().invoke(main, ["compare", *args], input=input, catch_exceptions=False)


def test_cli_exit_codes_and_json_schema():
    a, b = (
        str(fixture_path("r022-v1-startup-sm120-healthy.log")),
        str(fixture_path("s006-v1-kv-1m-estimate-199552.log")),
    )
    r = run(a, b, "--format", "json")
    assert r.exit_code == 1
    d = json.loads(r.output)
    jsonschema.validate(d, SCHEMA)
    assert d["differences"][0]["category"] == "outcome" and d["regressed"] is True and d["exit_code"] == 1
    assert run(b, a).exit_code == 0


def test_cli_runs_on_stdin():
    data = (COMPARE / "journald-restart-r022-then-s006.log").read_bytes()
    r = run("-", "--runs", "1,2", "--format", "json", input=data)
    assert r.exit_code == 1
    d = json.loads(r.output)
    assert d["old"]["input"] == "<stdin>" and d["new"]["source"] == "<stdin> [vllm[200]@<host-1>]"


def test_cli_new_log_on_stdin_against_a_file():
    old = str(fixture_path("r022-v1-startup-sm120-healthy.log"))
    r = run(old, "-", input=fixture_path("s023-qwen72b-ray-8x4090-cudagraph-oom.log").read_bytes())
    assert r.exit_code == 1 and "The new run failed in CUDA graph capture" in r.output


@pytest.mark.parametrize(
    "args,message",
    [
        ((), "give OLD and NEW"),
        (("a.log",), "one log compares two of its runs: add --runs A,B"),
        (("a.log", "b.log", "c.log"), "give OLD and NEW"),
        (("-", "-"), "cannot both be standard input"),
        (("a.log", "--runs", "1"), "give two run numbers"),
        (("a.log", "--runs", "0,1"), "give two run numbers"),
        (("a.log", "--runs", "x,y"), "give two run numbers"),
    ],
)
def test_cli_usage_errors_exit_2(args, message):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "vllm_doctor", "compare", *args], capture_output=True, text=True)
    assert p.returncode == 2 and message in p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_cli_fewer_runs_exit_2_and_the_message_is_redacted():
    path = str(COMPARE / "journald-restart-r022-then-s006.log")
    r = run(path, "--runs", "1,3")
    assert r.exit_code == 2
    assert "holds 2 server runs" in r.output and "gpu-node-3" not in r.output and "<host-1>" in r.output
    assert run(path, "--runs", "1,3", "--no-redact").output.count("gpu-node-3") == 2


def test_cli_missing_file_exit_2():
    r = run("/nonexistent/a.log", str(fixture_path("r022-v1-startup-sm120-healthy.log")))
    assert r.exit_code == 2 and "no such file" in r.output


def test_help_teaches_with_examples():
    r = CliRunner().invoke(main, ["compare", "--help"])
    assert r.exit_code == 0
    for text in ("--runs 1,2", "journalctl -u vllm", "--format markdown", "Exit codes:", "loses KV cache capacity"):
        assert text in r.output
    assert "compare old.log new.log" in CliRunner().invoke(main, ["--help"]).output


def test_markdown_quotes_log_text_and_keeps_evidence_in_fences():
    from markdown_it import MarkdownIt

    hostile = header(args={"model": "<img src=x onerror=alert(1)> **bold** @here"}) + body(
        "s006-v1-kv-1m-estimate-199552.log"
    )
    old = results_of_lines("old.log", header(args={"model": "MODEL"}) + body("r022-v1-startup-sm120-healthy.log"))
    c = pair(old, results_of_lines("new `x` |y|.log", hostile))
    md = render_compare(c, "markdown")
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<img" not in html and "<strong>bold</strong>" not in html
    assert "<pre><code" in html and "max seq len (1048576)" in html
    assert html.count("<table>") == 1


def test_text_view_is_inert():
    new = results_of_lines(
        "new.log", ["\x1b]8;;http://evil\x07ValueError: \x1b[2J" + body("s006-v1-kv-1m-estimate-199552.log")[0]]
    )
    c = pair("r022-v1-startup-sm120-healthy.log", new)
    for fmt in ("text", "markdown", "json"):
        out = render_compare(c, fmt)
        assert "\x1b" not in out and "\x07" not in out


def test_redaction_covers_every_field():
    secret = "hf_abcdefghijklmnopqrstuvwxyz012345"
    new = results_of_lines(
        "new.log",
        header(args={"model": "/home/alice/models/m", "hf_token": secret}) + body("s006-v1-kv-1m-estimate-199552.log"),
    )
    old = results_of_lines(
        "old.log", header(args={"model": "/home/alice/models/m"}) + body("r022-v1-startup-sm120-healthy.log")
    )
    c = compare_runs(pick_run(old, "old.log", None), pick_run(new, "new.log", None))
    raw = render_compare(c, "json")
    assert secret in raw and "/home/alice/" in raw  # the comparison itself holds what the log holds
    out = render_compare(redact_comparison(c), "json")
    assert secret not in out and "/home/alice/" not in out and "<user-1>" in out
    jsonschema.validate(json.loads(out), SCHEMA)


def test_every_flag_that_differs_is_listed_with_its_line():
    old = results_of_lines(
        "old.log", header(args={"model": "MODEL", "enable_expert_parallel": True, "port": 8000}) + kv_log(100000)
    )
    new = results_of_lines(
        "new.log", header(args={"model": "MODEL", "port": 8001, "async_scheduling": True}) + kv_log(100000)
    )
    c = pair(old, new)
    config = [(d.key, d.old, d.new) for d in c.differences if d.category == "config"]
    assert config == [
        ("async_scheduling", "(default)", True),
        ("enable_expert_parallel", True, "(default)"),
        ("port", 8000, 8001),
    ]
    rows = {r.key: r for r in c.rows}
    assert rows["port"].group == "args" and (rows["port"].old.line, rows["port"].new.line) == (1, 1)
    assert all(d.evidence and sides(d) == {"old", "new"} for d in c.differences)


def test_model_runner_and_tensor_parallel_changes():
    engine = (
        "INFO 12-01 10:00:00 [core.py:74] Initializing a V1 LLM engine (v0.23.0) with config: model='MODEL', "
        "max_seq_len=32768, tensor_parallel_size={tp}, pipeline_parallel_size=1, quantization=None, enforce_eager=False"
    )
    v1 = "WARNING 12-01 10:00:01 [vllm.py:536] Model Runner V2 does not yet support LoRA; using the V1 model runner instead."
    v2 = "(Worker pid=7) INFO 12-01 10:00:01 [gpu_worker.py:303] Using V2 Model Runner"
    old = results_of_lines("old.log", [engine.format(tp=1), v1] + kv_log(100000))
    new = results_of_lines("new.log", [engine.format(tp=2), v2] + kv_log(180000))
    c = pair(old, new)
    d = lead(c)
    assert d.key == "kv_tokens" and d.implies.startswith("the settings changed it: tensor_parallel_size 1 -> 2")
    config = [(x.key, x.old, x.new) for x in c.differences if x.category == "config"]
    assert config == [("model_runner", "v1", "v2"), ("tensor_parallel_size", 1, 2)]
    rows = {r.key: r for r in c.rows}
    assert (rows["gpu_count"].old.value, rows["gpu_count"].new.value) == (1, 2)
    assert rows["vllm_version"].old.value == rows["vllm_version"].new.value == "0.23.0"


def test_a_different_gpu_explains_a_kv_change_when_no_setting_moved():
    def log(total, tokens):
        return [
            f"INFO 12-01 10:00:00 [gpu_worker.py:300] Free memory on device (70.0/{total} GiB) on startup. "
            f"Desired GPU memory utilization is (0.9, {total * 0.9:.2f} GiB)."
        ] + kv_log(tokens)

    d = lead(pair(results_of_lines("o", log(79.19, 200000)), results_of_lines("n", log(93.1, 300000))))
    assert d.key == "kv_tokens" and "on a different GPU (79.19 -> 93.1 GiB)" in d.implies


def test_start_up_time_from_the_log_s_own_time_stamps():
    def log(ready):
        return [
            "INFO 06-22 02:50:00 [api_server.py:1895] vLLM API server version 0.10.1",
            f"INFO 06-22 {ready} [core.py:172] init engine (profile, create kv cache, warmup model) took 40.00 seconds",
        ]

    c = pair(results_of_lines("o", log("02:51:00")), results_of_lines("n", log("02:53:00")))
    d = lead(c)
    assert (d.key, d.old, d.new, d.category) == ("startup_s", 60.0, 180.0, "timing")
    assert [(e.side, e.line) for e in d.evidence] == [("old", 2), ("new", 2)]


def test_library_compare_logs_and_runs_across_two_files():
    from vllm_doctor.compare import compare_logs

    both = COMPARE / "journald-one-process-r032-then-r022.log"
    c = valid(compare_logs(both, runs=(1, 2)))
    assert lead(c).key == "kv_tokens" and c.old.run == 1 and c.new.run == 2
    c = valid(compare_logs(both, fixture_path("r022-v1-startup-sm120-healthy.log"), runs=(1, 1)))
    assert (c.old.run, c.old.runs, c.new.run) == (1, 2, 1) and lead(c).key == "kv_tokens"
    with pytest.raises(CompareError, match="give runs"):
        compare_logs(both)
    red = compare_logs(COMPARE / "journald-restart-r022-then-s006.log", runs=(1, 2), redact=True)
    assert red.new.source.endswith("[vllm[200]@<host-1>]")


def test_a_setting_quoted_as_config_evidence_is_not_named_by_the_failure(tmp_path):
    # The benchmark log's runtime OOM finding quotes the non-default args line as evidence; the
    # OOM message itself names no setting, so no max_model_len change is called its fix.
    import subprocess
    import sys

    busy = tmp_path / "busy.log"
    bench = fixture_path("").parents[1] / "bench" / "generate.py"
    subprocess.run([sys.executable, str(bench), str(busy), "2"], check=True, capture_output=True)
    c = pair(results_of(busy), "r022-v1-startup-sm120-healthy.log")
    d = lead(c)
    assert d.title.startswith("The new run got through where the old one failed while serving (runtime_oom")
    assert "likely" not in d.implies and "max_model_len" not in d.implies


@pytest.mark.parametrize("case", load_manifest(), ids=lambda c: c["file"])
def test_every_corpus_log_against_a_healthy_and_a_failed_start(case):
    # Whatever the new log holds, the comparison validates; a run that fails where the healthy
    # one did not leads with that outcome and is a regression; against a failed start (s006,
    # KV sizing) a run that fails earlier is one and a run that gets further is not.
    results = results_of(fixture_path(case["file"]))
    if not any(r.summary.vllm_output for r in results):
        pytest.skip("not vLLM output")
    c = pair("r022-v1-startup-sm120-healthy.log", results)
    if c.new.outcome == "failed":
        d = lead(c)
        assert d.category == "outcome" and d.regression and c.exit_code == 1
        assert sides(d) == {"old", "new"}
    for d in c.differences:
        assert d.evidence, d.title
        assert all(e.line >= 1 for e in d.evidence)
    c = pair("s006-v1-kv-1m-estimate-199552.log", results)
    outcome = [d for d in c.differences if d.category == "outcome"]
    if c.new.outcome == "healthy":
        assert outcome and not outcome[0].regression and "got through" in outcome[0].title
    if outcome and outcome[0].title.endswith(", earlier"):
        assert outcome[0].regression and c.exit_code == 1


def test_config_differences_keep_the_tuning_order():
    c = pair("s013-docker-v091-free-memory-0.95.log", "s012-pytorch211-ci-free-memory-less-than-util.log")
    assert [(d.rank, d.key, d.old, d.new) for d in c.differences] == [
        (1, "gpu_total_gib", 47.38, 22.05),
        (2, "gpu_memory_utilization", 0.95, 0.9),
    ]


def test_an_engine_change_quotes_the_lines_that_show_each_engine():
    c = pair("r023-bracket-ts-wrapper-v0-stats-healthy.log", "r019-v1-serving-one-request-healthy.log")
    d = next(x for x in c.differences if x.key == "engine")
    assert (d.old, d.new) == ("v0", "v1") and sides(d) == {"old", "new"}


def test_a_secret_flag_that_differs_is_redacted_in_every_format(tmp_path):
    """break-it: api_key / hf_token values changed between the runs were printed in the
    differences and the table (the evidence lines were redacted, the diff values not)."""
    base = fixture_path("r022-v1-startup-sm120-healthy.log").read_text(encoding="utf-8")
    args = "(APIServer pid=1) INFO 06-19 15:35:00 [api_utils.py:273] non-default args: {{'port': 3456, {}}}\n"
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    old.write_text(args.format("'api_key': 'OLD_SECRET_KEY', 'hf_token': ['PLAINOLD']") + base, encoding="utf-8")
    new.write_text(args.format("'api_key': 'NEW_SECRET_KEY', 'hf_token': ['PLAINNEW']") + base, encoding="utf-8")
    for fmt in ("text", "markdown", "json"):
        out = run(str(old), str(new), "-f", fmt).output
        assert "api_key" in out and "<redacted>" in out
        for secret in ("OLD_SECRET_KEY", "NEW_SECRET_KEY", "PLAINOLD", "PLAINNEW"):
            assert secret not in out, (fmt, secret)
    raw = run(str(old), str(new), "-f", "json", "--no-redact").output
    assert "OLD_SECRET_KEY" in raw  # --no-redact keeps them, as diagnose does


def test_names_secret_reads_key_names_alone():
    from vllm_doctor.redact import names_secret

    assert all(names_secret(k) for k in ("api_key", "hf_token", "--api-key", "ssl_keyfile_password", "API-KEY"))
    assert not any(names_secret(k) for k in ("max_model_len", "tokenizer", "max_num_batched_tokens", "port"))
