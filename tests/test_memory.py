"""The arithmetic behind the remedies, checked against values worked by hand from corpus logs."""

import pytest
from conftest import fixture_path

from vllm_doctor import diagnose
from vllm_doctor.memory import floor_tidy, split_processes
from vllm_doctor.units import size_to_gib, to_int


def finding(name, cls):
    v = diagnose(fixture_path(name))
    return next(f for f in v.findings if f.class_id == cls)


def flags(f):
    return {r.flag.split()[0]: r.flag.split()[1] for r in f.remedies if r.flag and " " in r.flag}


@pytest.mark.parametrize(
    "text,gib",
    [
        ("50.00 MiB", 50 / 1024),
        ("768.00 KiB", 768 / 2**20),
        ("1.27 GiB", 1.27),
        ("0 bytes", 0.0),
        ("14.9888 GB", 14.9888),
    ],
)
def test_sizes(text, gib):
    assert size_to_gib(text) == pytest.approx(gib)


def test_int_parsing():
    assert to_int("251,920") == 251920
    assert to_int("32768.0") == 32768


@pytest.mark.parametrize(
    "value,tidy",
    [
        (199552, 196608),
        (23648, 23552),
        (7344, 7168),
        (2400, 2304),
        (58496, 57344),
        (435620, 434176),
        (131072, 131072),
        (40, 32),
        (0, 0),
    ],
)
def test_floor_tidy_never_rounds_up(value, tidy):
    assert floor_tidy(value) == tidy
    assert floor_tidy(value) <= value


def test_vllm_itself_in_a_container_is_not_a_co_tenant():
    # r012: "Process 2377657 has 79.19 GiB"; PyTorch holds 67.68 + 1.47 GiB of it.
    own, others = split_processes([(2377657, 79.19)], [], 67.68 + 1.47)
    assert own == (2377657, 79.19) and others == []


def test_this_process_clause_in_the_middle_of_the_list():
    # x014: the "this process" clause sits between Process 198 and Process 344.
    procs = [(60, 0.1797), (161, 0.1797), (198, 13.57), (None, 7.79), (344, 0.1797)]
    own, others = split_processes(procs, [], 6.79 + 0.76)
    assert own == (None, 7.79)
    assert [p for p, _ in others] == [60, 161, 198, 344]


def test_known_vllm_pid_is_never_a_co_tenant():
    own, others = split_processes([(10, 5.0), (11, 20.0)], [11], None)
    assert own == (11, 20.0) and others == [(10, 5.0)]


def test_s001_kv_arithmetic():
    # 29000 tokens asked, 23648 fit; 2.89 GiB hold 23648 tokens -> 1.2221e-4 GiB/token;
    # 29000 tokens need 3.544 GiB, 0.654 GiB more: 0.9 + 0.654/23.58 = 0.9277 -> 0.93.
    f = finding("s001-llama31-8b-3090-kv-29k.log", "kv_cache_capacity")
    assert f.facts["fitting_max_model_len"] == 23552 <= 23648
    assert f.facts["kv_extra_needed_gib"] == pytest.approx(0.654, abs=0.002)
    assert flags(f) == {
        "--max-model-len": "23552",
        "--gpu-memory-utilization": "0.93",
        "--kv-cache-dtype": "fp8",
        # remedies3: no TP number: s001 (one 3090) prints no TP and shows no second GPU
    }
    assert f.facts["fp8_kv_tokens"] == 47296 and f.facts["fp8_fits_max_model_len"] is True


def test_s006_uses_vllms_estimate():
    f = finding("s006-v1-kv-1m-estimate-199552.log", "kv_cache_capacity")
    assert int(flags(f)["--max-model-len"]) == 196608 <= 199552


def test_s004_without_estimate_scales_by_available_over_needed():
    # 1048576 x 9.97 / 24.0 = 435,604 tokens -> 434176
    f = finding("s004-v1-kv-1m-context-oneline.log", "kv_cache_capacity")
    assert int(flags(f)["--max-model-len"]) == 434176
    assert f.facts["kv_extra_needed_gib"] == pytest.approx(24.0 - 9.97, abs=1e-3)


def test_negative_budget_says_do_not_lower_max_model_len():
    f = finding("x006-gptoss120b-h100-enginecore0-negative-kv.log", "kv_cache_capacity")
    assert f.facts["kv_budget_exhausted"] is True
    assert "--max-model-len" not in flags(f)
    assert any("max_model_len" in d for d in f.does_not_help)


def test_s014_utilization_that_fits_is_at_most_free_over_total():
    f = finding("s014-4gb-gpu-free-memory-0.9.log", "startup_memory_contention")
    u = float(flags(f)["--gpu-memory-utilization"])
    assert u <= 3.22 / 4.0 and u == 0.8
    assert f.facts["held_by_others_gib"] == pytest.approx(0.78)


def test_s013_held_by_others():
    f = finding("s013-docker-v091-free-memory-0.95.log", "startup_memory_contention")
    assert f.facts["held_by_others_gib"] == pytest.approx(47.38 - 31.44, abs=0.01)
    assert float(flags(f)["--gpu-memory-utilization"]) == 0.66


def test_runtime_oom_co_tenant_pids_are_reported():
    f = finding("x014-omni-ci-startup-oom-lists-other-stage-pids.log", "startup_memory_contention")
    assert f.facts["co_tenant_pids"] == [198, 60, 161, 344]  # largest first (13.57 GiB, then 0.18 GiB each)
    assert f.facts["co_tenant_total_gib"] == pytest.approx(13.57 + 3 * 184 / 1024, abs=1e-3)


def test_weight_load_estimate_from_model_name():
    # s030: Qwen3-30B-A3B-GPTQ: 30e9 params x 4 bits = 13.97 GiB on a 31.36 GiB GPU: it should fit.
    f = finding("s030-qwen3-30b-a3b-gptq-5090-v0-load-oom.log", "weight_load_oom")
    assert f.facts["weights_gib_estimate"] == pytest.approx(13.97, abs=0.01)
    assert "suspect a bug" in f.title


def test_preemption_storm_duration_and_counts():
    f = finding("x025-v0-042-kv-100-pending-768-running-shrinking.log", "preemption_storm")
    assert f.facts["saturated_intervals"] == 5 and f.facts["saturated_seconds"] == 20
    f = finding("r004-chunked-prefill-swap-preemption.log", "preemption_storm")
    assert f.facts["max_preemptions"] == 151 and f.facts["preemption_mode"] == "SWAP"
