"""A verdict read from metrics says so: no wording claims a log (or its stats lines) that
was never read. The sequences are the real scrape of fixtures/metrics/real with values changed,
as fixtures/metrics/build_sequences.py builds fixtures/metrics/seq."""

import importlib.util
import json
import re
from pathlib import Path

import pytest
from conftest import fixture_path

from vllm_doctor.metrics import read_metrics
from vllm_doctor.pipeline import build_verdict, diagnose_source, metrics_results
from vllm_doctor.render import render

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"
_spec = importlib.util.spec_from_file_location("build_sequences", FIX / "build_sequences.py")
b = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(b)

#: Wordings that say the evidence came from a log.
LOG_WORDS = re.compile(
    r"(?i)(found|printed|not) in the log|the log does not|stats lines|logs no preemption|logs only every|line \d"
)


def _storm(**changes):
    values = dict(b.SEQUENCES["storm-v1"])
    values.update(changes)
    return values


def _idle(**changes):
    values = dict(b.SEQUENCES["hot-idle-v1"])
    values.update(changes)
    return values


SEQUENCES = {
    "storm": _storm(),
    "storm-no-preemption": _storm(**{b.PRE: [0] * 7}),
    "wedge": dict(b.SEQUENCES["wedge-v1"]),
    "hot-idle": _idle(),
    "slow": _idle(**{b.KV: [0.05] * 6, b.GEN: [924, 930, 936, 942, 948, 954]}),
}


def scrapes(tmp_path, name, values, gmu=None):
    """The scrape sequence ``values`` (series -> one value per scrape) as a directory."""
    d = tmp_path / name
    d.mkdir()
    base = Path(b.BASE).read_text()
    for i in range(len(next(iter(values.values())))):
        text = b.render(base, {k: v[i] for k, v in values.items()})
        if gmu is not None:
            text = text.replace('gpu_memory_utilization="0.05"', f'gpu_memory_utilization="{gmu}"')
        (d / f"scrape-{b.T0 + i * b.STEP}.prom").write_text(text)
    return d


def verdict_of(d, logs=()):
    results = list(logs)
    results += metrics_results(read_metrics(str(d)), results)
    return build_verdict(results)


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_no_wording_of_a_metrics_verdict_claims_a_log(tmp_path, name):
    v = verdict_of(scrapes(tmp_path, name, SEQUENCES[name]))
    for fmt in ("json", "text", "markdown"):
        out = render(v, fmt, width=1000) if fmt == "text" else render(v, fmt)
        assert not LOG_WORDS.search(out), (fmt, LOG_WORDS.search(out).group(0))


def test_a_high_utilization_from_metrics_is_not_a_printed_line(tmp_path):
    v = verdict_of(scrapes(tmp_path, "gmu", SEQUENCES["hot-idle"], gmu="0.97"))
    assert [f.class_id for f in v.findings] == ["high_gpu_memory_utilization"]
    assert not LOG_WORDS.search(json.dumps(v.to_dict()))


def test_the_storm_from_metrics_names_the_scrape_and_what_the_metrics_lack(tmp_path):
    f = verdict_of(scrapes(tmp_path, "storm", SEQUENCES["storm"])).primary
    why = {r.action: r.why for r in f.remedies}
    assert why["Give the KV cache more memory"] == (
        "every extra GiB becomes KV cache blocks: 0.03 above 0.05 as /metrics reports it in scrape 1"
    )
    # 7 ran at once (MIN_SEQS_TO_HALVE): the KV cache is the limit, no halved count is advised
    assert why["Lower demand: fewer concurrent sequences"] == (
        "only 7 ran at once: the KV cache, not the batch, is the limit; more memory comes first"
    )
    assert why["Or a shorter max_model_len, if the workload allows"] == (
        "the workload's longest request decides how much shorter; it is not in the metrics"
    )


def test_a_storm_without_preemptions_in_the_metrics_says_the_metrics_counted_none(tmp_path):
    v = verdict_of(scrapes(tmp_path, "nopre", SEQUENCES["storm-no-preemption"]))
    assert v.primary.title.startswith(
        "KV cache saturated with requests waiting (the metrics count no preemption; judged from KV cache usage "
        "and requests waiting): KV cache 99.0% full"
    )


def test_a_wedge_from_metrics_says_the_metrics_showed_it(tmp_path):
    v = verdict_of(scrapes(tmp_path, "wedge", SEQUENCES["wedge"]))
    watch = v.primary.remedies[-1]
    assert watch.why == (
        "the metrics showed this one; the log goes quiet when the engine does: vLLM logs idle stats at DEBUG only"
    )
    backlog = next(f for f in v.findings if f.class_id == "queue_backlog")
    assert "(vLLM's V1 default 2048-8192 for the API server on a GPU of unknown size, not in the metrics)" in (
        backlog.remedies[0].why
    )


def test_the_stats_row_of_a_metrics_verdict_is_named_metrics(tmp_path):
    v = verdict_of(scrapes(tmp_path, "storm", SEQUENCES["storm"]))
    rows = [line.split()[0] for line in render(v, "text", width=200).splitlines()[1:12] if line.startswith("  ")]
    assert "Metrics" in rows and "Stats" not in rows


def test_a_clean_metrics_verdict_says_it_read_the_metrics(tmp_path):
    v = verdict_of(scrapes(tmp_path, "idle", SEQUENCES["hot-idle"]))
    assert v.primary_class == "healthy" and v.title == "No memory or slowdown problem found in the metrics."


def test_metrics_beside_a_log_keep_the_log_wordings_for_what_the_log_gave():
    log = [
        "(APIServer pid=1) INFO 09-11 00:44:00 [utils.py:326] non-default args: {'model': 'Qwen/Qwen3-0.6B', "
        "'gpu_memory_utilization': 0.05, 'api_server_count': 2}",
        "(APIServer pid=1) INFO:     Application startup complete.",
    ]
    logs = diagnose_source("server.log", enumerate(log, 1))
    f = verdict_of(FIX / "seq" / "storm-v1", logs=logs).primary
    why = {r.action: r.why for r in f.remedies}
    assert (
        why["Give the KV cache more memory"]
        == "every extra GiB becomes KV cache blocks: 0.03 above 0.05 as printed on line 1"
    )
    assert why["Or a shorter max_model_len, if the workload allows"].endswith("it is not in the log")


@pytest.mark.parametrize(
    "name,words",
    [
        ("r002-mtp-slow-v1-waiting.log", "(V1 logs no preemptions; judged from the stats lines)"),
        ("x025-v0-042-kv-100-pending-768-running-shrinking.log", "(V0 logs only every 50th preemption; judged from"),
    ],
)
def test_a_log_storm_without_preemption_lines_still_says_it_read_the_stats_lines(name, words):
    src = fixture_path(name)
    with open(src, "rb") as fh:
        v = build_verdict(diagnose_source(str(src), enumerate(fh.read().decode().splitlines(), 1)))
    assert words in v.primary.title
