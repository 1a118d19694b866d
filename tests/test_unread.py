"""Numbers that cannot be read (break-it 6): a 20-digit max seq len, a 24-digit waiting count.

convert() refuses such a number (vllm_doctor.units: a length cap, MAX_COUNT), so the pattern's
build raises; the catalog used to drop the whole message there, silently. Now a failure
message keeps its identity without the value, a measurement is counted as unread, and both
are said in the source's notes: one malformed line never stops the rest, and its loss shows.
"""

import json

import pytest
from click.testing import CliRunner

from vllm_doctor.catalog import Catalog
from vllm_doctor.cli import cli
from vllm_doctor.record import Record

KV = (
    "INFO 02-13 11:33:39 [worker.py:1] Loading model weights took 14.9888 GB\n"
    "ERROR 02-13 11:33:40 [engine.py:1] ValueError: The model's max seq len ({n}) is larger than the maximum number "
    "of tokens that can be stored in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine.\n"
)
STATS = (
    "(APIServer pid=1) INFO 02-13 11:33:{s:02d} [loggers.py:257] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
    "Avg generation throughput: 0.0 tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: "
    "100.0%, Prefix cache hit rate: 1%\n"
)
PREEMPT = (
    "WARNING 02-13 11:33:39 [scheduler.py:1] Sequence group 1 is preempted by PreemptionMode.RECOMPUTE mode because "
    "there is not enough KV cache space. total_num_cumulative_preemption={n}\n"
)
HUGE = "9" * 20


def diagnose(text):
    r = CliRunner().invoke(cli, ["diagnose", "-", "-f", "json"], input=text)
    return r.exit_code, json.JSONDecoder().raw_decode(r.output)[0]  # the verdict, before any stderr line


def test_a_kv_cache_error_with_an_unreadable_max_seq_len_still_classifies():
    code, v = diagnose(KV.format(n=HUGE))
    assert code == 1 and v["primary_class"] == "kv_cache_capacity"
    f = v["findings"][v["primary_finding"]]
    assert "max_model_len" not in f["facts"] and f["facts"]["kv_tokens"] == 23648  # left out, not made up
    assert v["sources"][0]["notes"] == [
        "1 kv_error message read without max_model_len: the number printed cannot be read (line 2)"
    ]
    code, v = diagnose(KV.format(n="1000000"))  # a readable one keeps its value, and no note
    assert v["findings"][v["primary_finding"]]["facts"]["max_model_len"] == 1000000 and not v["sources"][0]["notes"]


@pytest.mark.parametrize("field", ["running", "waiting"])
def test_stats_lines_with_an_unreadable_count_are_counted_never_shown_as_0(field):
    values = {"running": 3, "waiting": 2, field: "184467440737095516160000"}
    code, v = diagnose("".join(STATS.format(s=s, **values) for s in range(4)))
    assert code != 0  # never a healthy exit 0 on lines it could not read
    assert v["sources"][0]["recognised"] == 0 and all(not r["series"] for r in v["runs"])
    assert v["sources"][0]["notes"] == [
        f"4 stats lines not read: a number in them cannot be read ({field}; lines 1, 2, 3, ...)"
    ]


def test_preemption_lines_with_an_unreadable_count_are_counted():
    code, v = diagnose(PREEMPT.format(n=HUGE + "1") * 2 + PREEMPT.format(n="51"))
    assert v["sources"][0]["notes"] == [
        "2 preemption lines not read: a number in them cannot be read (cumulative; lines 1, 2)"
    ]


def test_a_stats_line_no_pattern_reads_is_not_a_stats_line_of_zeros():
    """A stats line whose every number is damaged (1e308, NaN, 20 digits) matched only as an
    empty "cut short" match at its end, and was read as 0 running, 0 waiting."""
    line = (
        "Engine 000: Avg prompt throughput: 1e308 tokens/s, Avg generation throughput: NaN tokens/s, Running: "
        f"{HUGE} reqs, Waiting: -5 reqs, GPU KV cache usage: 1e309%, Prefix cache hit rate: inf%"
    )
    assert Catalog().recognise(Record("x", 1, line)) == []
    good = line.replace("1e308", "1.0").replace("NaN", "2.0").replace(HUGE, "3").replace("-5", "4")
    good = good.replace("1e309", "50.0").replace("inf%", "10.0%")
    [e] = Catalog().recognise(Record("x", 1, good))
    assert (e.kind, e.data["running"], e.data["waiting"]) == ("stats", 3, 4)
    # cut short after its distinctive part, it still reads (the values before the cut)
    [e] = Catalog().recognise(Record("x", 1, good[: good.index("GPU KV") - 2]))
    assert (e.kind, e.data["running"], e.data["waiting"]) == ("stats", 3, 4)
