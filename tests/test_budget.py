"""Memory is bounded by one budget per input, not by caps that multiply, and pods are never
merged: past the cap the least recently active ones go, each keeping its own runs (issue 16)."""

from vllm_doctor.pipeline import MAX_SUBSOURCES, build_verdict, diagnose_source
from vllm_doctor.tracker import RUN_BUDGET

KV = (
    "[pod/{pod}/vllm] ERROR 04-05 01:12:55 [core.py:390] ValueError: To serve at least one request with the "
    "model's max seq len ({L}), (24.00 GiB KV cache is needed, which is larger than the available KV cache memory "
    "(9.97 GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
)
START = "{p}INFO 04-05 01:12:{s:02d} [api_server.py:1885] vLLM API server version 0.9.2"
LOAD = "{p}INFO 04-05 01:12:{s:02d} [gpu_model_runner.py:1] Starting to load model Qwen/Qwen3-8B..."


def test_pods_past_the_cap_are_evicted_never_merged():
    n = MAX_SUBSOURCES + 44
    lines = [KV.format(pod=f"vllm-{i}", L=10000 + i) for i in range(n)]
    results = diagnose_source("pods.log", enumerate(lines, 1))
    assert len(results) == MAX_SUBSOURCES
    assert results[0].summary.evicted_sources == 44
    v = build_verdict(results)
    # every pod's finding carries its own max_model_len: nothing of another pod leaked in
    for f in v.findings:
        i = int(f.source.split("vllm-")[1].split("/")[0])
        assert f.facts["max_model_len"] == 10000 + i
    kept = sorted(int(r.summary.name.split("vllm-")[1].split("/")[0]) for r in results)
    assert kept == list(range(44, n))  # the least recently active went first


def test_runs_over_all_sources_share_one_budget_and_failures_are_kept_first():
    lines = []
    for pod in range(8):
        p = f"[pod/vllm-{pod}/vllm] "
        for r in range(60):  # 8 x 60 = 480 runs, more than the budget
            lines.append(START.format(p=p, s=r % 60))
            lines.append(LOAD.format(p=p, s=r % 60))
            if r == 5:
                lines.append(KV.format(pod=f"vllm-{pod}", L=77777).replace(f"[pod/vllm-{pod}/vllm] ", p))
    results = diagnose_source("restarts.log", enumerate(lines, 1))
    kept = sum(len(r.tracker.runs) for r in results)
    assert kept <= RUN_BUDGET
    assert sum(r.tracker.dropped_runs for r in results) == 480 - kept
    # the old failing run of each pod survived the evictions of healthy runs around it
    for r in results:
        assert any(run.failures for run in r.tracker.runs), r.summary.name


def test_repeated_findings_fold_into_a_count_so_a_ticket_stays_small():
    from vllm_doctor.pipeline import MAX_SHOWN_PER_CLASS
    from vllm_doctor.render import render

    lines = [KV.format(pod=f"vllm-{i}", L=10000 + i) for i in range(40)]
    v = build_verdict(diagnose_source("pods.log", enumerate(lines, 1)))
    assert len(v.findings) == MAX_SHOWN_PER_CLASS and v.omitted_findings == {"kv_cache_capacity": 37}
    assert "The same finding in 37 more run(s) or source(s) (first at 04-05 01:12:55" in v.findings[0].notes[-1]
    assert v.primary is v.findings[0]
    ticket = render(v, "markdown")
    assert len(ticket) < 20_000
