"""Nothing is lost to one bad value: numbers are ASCII, short and finite, config values
typed, and every JSON output is strict JSON (issue 16, "Nothing is lost to one bad record")."""

import json
import math

import pytest
from click.testing import CliRunner
from conftest import fixture_path, load_manifest

from vllm_doctor import diagnose
from vllm_doctor.catalog import FLOAT_FIELDS, INT_FIELDS, Catalog, convert, regex_timed_out
from vllm_doctor.catalog.config import BOOL_KEYS, CONFIG_KEYS, COUNT_KEYS, GIB_KEYS, TEXT_KEYS, _value
from vllm_doctor.cli import cli as main
from vllm_doctor.envelopes import unwrap
from vllm_doctor.redact import redact_verdict
from vllm_doctor.render import render
from vllm_doctor.units import size_to_gib, to_float, to_gib, to_int


def strict_loads(text: str):
    """json.loads that refuses NaN and Infinity, as JSON.parse and every strict reader do."""

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "text", ["٣", "²", "1²", "9" * 400, "1.5", "1e5", "", "-", "1_000", "0x10", " 1 2", "12,34", "inf", "nan"]
)
def test_to_int_refuses_what_is_not_an_ascii_count(text):
    with pytest.raises(ValueError):
        to_int(text)


@pytest.mark.parametrize("text,value", [("447,088", 447088), ("32768.0", 32768), ("-3", -3), ("0", 0), (" 7 ", 7)])
def test_to_int_reads_counts_as_vllm_prints_them(text, value):
    assert to_int(text) == value


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "NaN", "1e400", "9" * 400, "٣.٥", "1_0.0", "0x1p3", "", "."])
def test_to_float_refuses_non_finite_non_ascii_and_overlong(text):
    with pytest.raises(ValueError):
        to_float(text)


@pytest.mark.parametrize("text", ["9" * 400 + " MiB", "inf GiB", "nan MiB", "1e308 TiB", "٣ GiB", "2.0 PiB"])
def test_memory_sizes_refuse_damage(text):
    with pytest.raises(ValueError):
        size_to_gib(text)


def test_memory_sizes_still_read():
    assert size_to_gib("50.00 MiB") == pytest.approx(50 / 1024)
    assert to_gib("-2.77") == pytest.approx(-2.77)
    assert convert("weights_gib", "14.9888GB") == pytest.approx(14.9888)


@pytest.mark.parametrize("value", ["inf", "nan", "1e308", "0", "0.0", "1.01", "-0.5", "90", "٠.٩"])
def test_gpu_memory_utilization_outside_0_1_is_refused_at_parse_time(value):
    with pytest.raises(ValueError):
        convert("gpu_memory_utilization", value)
    assert _value("gpu_memory_utilization", value) is None


@pytest.mark.parametrize("value,parsed", [("0.9", 0.9), ("1", 1.0), ("0.05", 0.05)])
def test_gpu_memory_utilization_in_range_is_kept(value, parsed):
    assert convert("gpu_memory_utilization", value) == parsed


def test_percentages_and_counts_keep_their_range():
    for bad in ("9" * 400, "100.5", "-1"):
        with pytest.raises(ValueError):
            convert("kv_usage_pct", bad)
    with pytest.raises(ValueError):
        convert("running", "-4")
    assert convert("kv_usage_pct", "100.0") == 100.0


def test_every_numeric_field_refuses_inf_and_400_digits():
    for name in sorted(INT_FIELDS | FLOAT_FIELDS):
        for bad in ("inf", "nan", "9" * 400):
            with pytest.raises(ValueError):
                convert(name, bad)


@pytest.mark.parametrize(
    "key,raw,want",
    [
        ("max_model_len", "4k", None),
        ("max_model_len", "32768", 32768),
        ("max_num_seqs", "'256'", 256),
        ("tensor_parallel_size", "1e308", None),
        ("enforce_eager", "True", True),
        ("enforce_eager", "maybe", None),
        ("swap_space", "4", 4.0),
        ("swap_space", "inf", None),
        ("cpu_offload_gb", "-2", None),
        ("max_logprobs", "20", 20),
        ("model", "'org/m-4k'", "org/m-4k"),
        ("kv_cache_dtype", "fp8", "fp8"),
        ("dtype", "None", None),
    ],
)
def test_config_values_are_typed_or_dropped(key, raw, want):
    assert _value(key, raw) == want


def test_every_config_key_has_a_type():
    typed = INT_FIELDS | FLOAT_FIELDS | BOOL_KEYS | GIB_KEYS | COUNT_KEYS | TEXT_KEYS | {"max_seq_len"}
    assert set(CONFIG_KEYS) <= typed


def _kv_log_with(tmp_path, *extra):
    """s001 (a KV-cache capacity failure) with hostile lines planted before the failure."""
    lines = fixture_path("s001-llama31-8b-3090-kv-29k.log").read_text().splitlines()
    log = tmp_path / "hostile.log"
    log.write_text("\n".join(list(extra) + lines) + "\n")
    return log


HOSTILE_LINES = [
    "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'max_model_len': '4k', 'gpu_memory_utilization': inf, "
    "'max_num_seqs': 1e308, 'enforce_eager': 'x'}",
    "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'gpu_memory_utilization': nan, 'tensor_parallel_size': '²'}",
    "Initializing a V1 LLM engine (v0.10.1) with config: model='m', max_seq_len=4k, gpu_memory_utilization=1e308",
    "INFO 01-01 00:00:01 [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: "
    + "9" * 400
    + "%, Prefix cache hit rate: 0.0%",
    "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.98GiB "
    "memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size="
    + "9" * 400
    + "GiB gpu_memory_utilization=0.90",
]


@pytest.mark.parametrize("line", HOSTILE_LINES, ids=range(len(HOSTILE_LINES)))
def test_one_hostile_value_costs_neither_the_verdict_nor_strict_json(tmp_path, line):
    log = _kv_log_with(tmp_path, line)
    verdict = diagnose(log)
    assert verdict.primary_class == "kv_cache_capacity"
    config = {k: v for run in verdict.runs for k, v in run.config.items()}
    assert config.get("max_model_len") == 29000  # from the real line, not "4k"
    assert config.get("gpu_memory_utilization", 0.9) == 0.9
    for fmt in ("json", "markdown", "text"):
        r = CliRunner().invoke(main, ["diagnose", "-f", fmt, str(log)])
        assert r.exit_code == 1, (fmt, r.output, r.exception)
    d = strict_loads(CliRunner().invoke(main, ["diagnose", "-f", "json", str(log)]).stdout)
    assert d["primary_class"] == "kv_cache_capacity"


def test_json_never_holds_nan_or_infinity_even_if_a_rule_computes_one():
    v = diagnose(fixture_path("s001-llama31-8b-3090-kv-29k.log"))
    v.findings[0].facts.update(bad=float("inf"), worse=float("nan"), huge=10**5000)
    d = strict_loads(render(v, "json"))
    assert d["findings"][0]["facts"]["bad"] is None and d["findings"][0]["facts"]["huge"] is None


CASES = load_manifest()


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_every_corpus_verdict_is_strict_json(case):
    verdict = diagnose(fixture_path(case["file"]))
    for v in (verdict, redact_verdict(verdict)):
        d = strict_loads(render(v, "json"))
        assert d["primary_class"] == verdict.primary_class

        def finite(x):
            if isinstance(x, float):
                assert math.isfinite(x)
            elif isinstance(x, dict):
                list(map(finite, x.values()))
            elif isinstance(x, list):
                list(map(finite, x))

        finite(d)


class _Boom:
    """A compiled pattern whose search raises the given exception."""

    def __init__(self, exc):
        self.exc = exc

    def search(self, text, timeout=None):
        raise self.exc


def _catalog_with(monkeypatch, exc):
    import vllm_doctor.catalog as catalog

    class P:
        name, kind, phase = "boom", "error", None

        def compiled(self):
            return _Boom(exc)

    monkeypatch.setattr(catalog, "_anchors_in", lambda text: [(0, P())])
    return Catalog()


def test_the_regex_modules_own_timeout_is_counted(monkeypatch):
    cat = _catalog_with(monkeypatch, TimeoutError("regex timed out"))
    assert cat.recognise(unwrap("x", 1, "anything")[0]) == []
    assert cat.timeouts == 1


def test_a_callers_timeout_is_not_swallowed(monkeypatch):
    # e.g. a signal.alarm handler or a socket timeout firing while a pattern runs
    cat = _catalog_with(monkeypatch, TimeoutError("the caller's deadline"))
    with pytest.raises(TimeoutError, match="caller"):
        cat.recognise(unwrap("x", 1, "anything")[0])
    assert not regex_timed_out(TimeoutError()) and regex_timed_out(TimeoutError("regex timed out"))
