"""The engine-stall family end to end: every wording of vLLM's no-progress messages, in the log
prefix of the release that prints it, inside the wrappers operators pipe logs through, once or
repeated; and the queue that is never admitted, with different counts and KV levels.

Each log is put through the whole pipeline (:func:`vllm_doctor.diagnose`), and the expectation
is the rule's own reasoning, not a recorded answer: a wait is a stall when one process waited
at least ``thresholds.STALL_MIN_WAIT_S`` (its warnings x the interval they name) with nothing
after that shows progress, in a release whose idle workers do not print it (fewer, still the
last word of the log, are a possible stall of low confidence: never health); a timeout that
ends the engine is a stall at once; a queue is never admitted when ``QUEUE_BLOCKED_MIN_INTERVALS``
intervals in a row admit nothing while others decode below saturation.

Record prefixes come from ``fixtures/wordings/log_formats.json`` (read from each release's
``vllm/logger.py``); the wordings and their releases from ``vllm_doctor/catalog/stalls.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Dict, List

import pytest

from vllm_doctor import diagnose, thresholds

FORMATS = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "wordings" / "log_formats.json").read_text(encoding="utf-8")
)

#: (release whose record format prints it, level, message with {n} for the interval, idle workers print it too)
WORDINGS = {
    "0.5.5": ("0.5.5", "warning", "No available block found in {n} second. ", True),
    "0.7.3": ("0.7.3", "debug", "No available block found in {n} second. ", True),
    "0.8.5-writer": ("0.8.5.post1", "debug", "No available shared memory broadcast block foundin {n} second.", True),
    "0.10.2": ("0.10.2", "debug", "No available shared memory broadcast block found in {n} second.", True),
    "0.11.0": (
        "0.11.2",
        "info",
        "No available shared memory broadcast block found in {n} seconds. This typically happens when some "
        "processes are hanging or doing some time-consuming work (e.g. compilation).",
        False,
    ),
    "0.33.0": (
        "0.33.0",
        "info",
        "No available shared memory broadcast block found in {n} seconds. This typically happens when some "
        "processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).",
        False,
    ),
}


def record(version: str, level: str, file: str, minute: int, message: str, proc: str = "") -> str:
    """One line as ``version`` logs it: the record prefix of its logger format, the message, and
    the process that printed it (``proc``, as ``(NAME pid=N) ``): before the record where vLLM's
    output decoration of that era put it, inside the format from 0.10.2 where the format names
    the process (a Ray actor's own ``(NAME pid=N, ip=...)`` stays outside)."""
    fmt = FORMATS[version]["format"]
    name, pid, outside = "EngineCore_DP0", 1454, proc
    if proc and "vllm_process_name" in fmt:
        name, rest = proc.strip("() ").split(" pid=")
        pid = int(rest.split(",")[0])
        outside = proc if ", ip=" in proc else ""
    head = fmt % {
        "levelname": level.upper(),
        "asctime": f"05-28 14:{minute % 60:02d}:28",
        "filename": file,
        "fileinfo": file,
        "lineno": 466,
        "process": pid,
        "vllm_process_name": name,
        "message": "\x00",
    }
    return outside + head.split("\x00")[0] + message


#: How operators hand the log over: as printed, through docker logs -t, journald, kubectl --prefix.
WRAPPERS: Dict[str, Callable[[int, str], str]] = {
    "plain": lambda i, line: line,
    "docker-t": lambda i, line: f"2025-05-28T14:{i % 60:02d}:28.{i:06d}123Z {line}",
    "journald": lambda i, line: f"May 28 14:{i % 60:02d}:28 gpu-node-3 vllm[1454]: {line}",
    "kubectl-prefix": lambda i, line: f"[pod/vllm-7d9f8c4b5-x2k4p/vllm] {line}",
}

#: Who prints it in each era: V0 TP workers (multiprocessing or Ray), V1's engine core (one or DP).
PROCS = {
    "v0-worker": "(VllmWorkerProcess pid=3011) ",
    "ray-worker": "(RayWorkerWrapper pid=2286, ip=10.0.0.2) ",
    "v1-engine": "(EngineCore pid=127) ",
    "v1-dp-engine": "(EngineCore_DP1 pid=1455) ",
}


def vkey(version: str) -> tuple:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


def startup(version: str) -> List[str]:
    """A server that started and served: the version line, a stats line with tokens processed
    (V0's stats shape before 0.8, V1's from it)."""
    if vkey(version) < (0, 8):
        stats = (
            "Avg prompt throughput: 310.2 tokens/s, Avg generation throughput: 55.0 tokens/s, Running: 2 reqs, "
            "Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.2%, CPU KV cache usage: 0.0%."
        )
        stats_file = "metrics.py"
    else:
        stats = (
            "Engine 000: Avg prompt throughput: 310.2 tokens/s, Avg generation throughput: 55.0 tokens/s, "
            "Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%"
        )
        stats_file = "loggers.py"
    api = "(APIServer pid=1) " if FORMATS[version]["process_prefix_on_output"] and vkey(version) >= (0, 10, 2) else ""
    return [
        record(version, "info", "api_server.py", 0, f"vLLM API server version {version}", api),
        record(version, "info", stats_file, 1, stats, api),
    ]


def waits(wording: str, count: int, interval: int, proc: str, wrapper: str, then: List[str] = ()) -> List[str]:
    version, level, message, _ = WORDINGS[wording]
    lines = startup(version)
    lines += [record(version, level, "shm_broadcast.py", 2 + i, message.format(n=interval), proc) for i in range(count)]
    lines += list(then)
    return [WRAPPERS[wrapper](i, line) for i, line in enumerate(lines)]


def is_stall(wording: str, count: int, interval: int) -> bool:
    """The rule's reading of ``count`` warnings in a row from one process, nothing after them."""
    return not WORDINGS[wording][3] and count * interval >= thresholds.STALL_MIN_WAIT_S


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("count,interval", [(1, 60), (2, 60), (3, 60), (5, 60), (12, 60), (5, 30), (6, 30), (2, 120)])
@pytest.mark.parametrize("wording", sorted(WORDINGS))
def test_shm_wait_warnings_in_every_wording_wrapper_and_count(wording, count, interval, wrapper):
    proc = PROCS["v1-engine"] if not WORDINGS[wording][3] else PROCS["v0-worker"]
    verdict = diagnose(waits(wording, count, interval, proc, wrapper), name="stall.log")
    stalls = [f for f in verdict.findings if f.class_id == "engine_stall"]
    if is_stall(wording, count, interval):
        assert verdict.primary_class == "engine_stall", verdict.title
        f = stalls[0]
        assert f.facts["stall_wait_s"] == count * interval and f.facts["stall_warnings"] == count
        wait = count * interval
        shown = f"{wait} s" if wait < 600 else f"{wait // 60} min"
        assert f"no progress for at least {shown}," in f.title, f.title
        assert f.remedies[0].action.startswith("Find the stuck process")
        assert not any(r.setting == "gpu_memory_utilization" for r in f.remedies)
        assert [e.line for e in f.evidence[:2]] == [3, 2 + count]  # the first and the last warning
    elif not WORDINGS[wording][3]:
        # fewer than make a stall, the last word of the log: a possible stall, never health
        assert verdict.primary_class == "engine_stall", verdict.title
        f = stalls[0]
        assert f.confidence == "low" and f.title.startswith("Possible stall: the log ends while a process waits")
        assert f.facts["stall_wait_s"] == count * interval and f.facts["log_ends_waiting"] is True
        assert f.remedies[0].action.startswith("Find the stuck process")
    else:
        assert not stalls, [f.title for f in stalls]
        assert verdict.primary_class == "healthy", verdict.title


@pytest.mark.parametrize("wording", sorted(WORDINGS))
@pytest.mark.parametrize(
    "progress",
    [
        "init engine (profile, create kv cache, warmup model) took 124.16 seconds",
        "Initial profiling/warmup run took 107.62 s",
        "Engine 000: Avg prompt throughput: 310.2 tokens/s, Avg generation throughput: 55.0 tokens/s, "
        "Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%",
    ],
)
def test_a_short_wait_that_ends_in_progress_stays_healthy(wording, progress):
    version = WORDINGS[wording][0]
    then = [record(version, "info", "core.py", 9, progress, PROCS["v1-engine"])]
    verdict = diagnose(waits(wording, 2, 60, PROCS["v1-engine"], "plain", then), name="stall.log")
    assert verdict.primary_class == "healthy", verdict.title


@pytest.mark.parametrize("proc", sorted(PROCS))
def test_who_prints_it_does_not_change_the_reading_only_the_title(proc):
    verdict = diagnose(waits("0.33.0", 4, 60, PROCS[proc], "plain"), name="stall.log")
    assert verdict.primary_class == "engine_stall"
    name = PROCS[proc].strip("() ").split(" pid=")[0]
    assert name in verdict.primary.title


@pytest.mark.parametrize("rounds,progress_after", [(2, None), (3, None), (4, 1), (5, 1), (6, 2)])
def test_waits_of_two_dp_engines_count_per_engine_and_start_again_after_progress(rounds, progress_after):
    version, level, message, _ = WORDINGS["0.33.0"]
    lines = startup(version)
    for i in range(rounds):  # DP0 and DP1 interleaved: one warning each per round
        for p in ("(EngineCore_DP0 pid=1454) ", "(EngineCore_DP1 pid=1455) "):
            lines.append(record(version, level, "shm_broadcast.py", 2 + i, message.format(n=60), p))
        if i == progress_after:
            lines.append(startup(version)[1])  # a stats line with tokens processed
    verdict = diagnose(lines, name="stall.log")
    per_engine = rounds - (progress_after + 1 if progress_after is not None else 0)
    if per_engine * 60 >= thresholds.STALL_MIN_WAIT_S:
        assert verdict.primary_class == "engine_stall", verdict.title
        assert verdict.primary.facts["stall_wait_s"] == per_engine * 60  # not the two engines' sum
        assert verdict.primary.facts["waiting_processes"] == 2
        assert "Possible stall" not in verdict.primary.title
    else:  # the log still ends on the waits: a possible stall, never health
        assert verdict.primary_class == "engine_stall", verdict.title
        assert verdict.primary.confidence == "low" and verdict.primary.title.startswith("Possible stall")
        assert verdict.primary.facts["stall_wait_s"] == per_engine * 60


@pytest.mark.parametrize("wording", ["0.5.5", "0.10.2"])
def test_old_wordings_join_a_wedge_as_evidence_but_never_decide_alone(wording):
    version, level, message, _ = WORDINGS[wording]
    wedged = startup(version)[1].replace("310.2 tokens/s", "0.0 tokens/s").replace("55.0 tokens/s", "0.0 tokens/s")
    warn = [
        record(version, level, "shm_broadcast.py", 9 + i, message.format(n=60), PROCS["v0-worker"]) for i in range(3)
    ]
    health = ['INFO:     10.0.0.9:50000 - "GET /health HTTP/1.1" 200 OK'] * 3
    alone = diagnose(startup(version) + warn + health, name="stall.log")
    assert alone.primary_class == "healthy", alone.title
    verdict = diagnose(startup(version) + [wedged, wedged] + warn + health, name="stall.log")
    assert verdict.primary_class == "engine_stall" and "wedged" in verdict.primary.title
    assert any("shm_broadcast" in (e.note or "") for e in verdict.primary.evidence)


FATAL = {
    "rpc_timeout": "(EngineCore_DP0 pid=1454) ERROR 05-28 14:50:28 [core.py:700] TimeoutError: RPC call to execute_model "
    "timed out.",
    "iteration_timeout": "ERROR 05-28 14:50:28 async_llm_engine.py:865] Engine iteration timed out. This should never "
    "happen!",
    "collective_timeout": "[rank0]:[E528 14:50:28.100000001 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=88, OpType=ALLGATHER, NumelIn=1, NumelOut=4, Timeout(ms)=600000) "
    "ran for 600031 milliseconds before timing out.",
    "ray_channel_timeout": "(EngineCore_DP0 pid=1454) ERROR 05-28 14:50:28 [core.py:710] "
    "ray.exceptions.RayChannelTimeoutError: System error: Timed out waiting for object available to read. ObjectID: "
    "00fc911a7833d5d0",
    "barrier_timeout": "(EngineCore_DP1 pid=21) ERROR 05-28 14:50:28 [core.py:700] RuntimeError: Barrier timed out "
    "after 600.00 seconds",
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("signal", sorted(FATAL))
@pytest.mark.parametrize("after_waits", [0, 2])
def test_a_timeout_that_ends_the_engine_is_a_stall_at_once(signal, wrapper, after_waits):
    lines = waits("0.33.0", after_waits, 60, PROCS["v1-engine"], "plain", then=[FATAL[signal]])
    lines = [WRAPPERS[wrapper](i, line) for i, line in enumerate(lines)]
    verdict = diagnose(lines, name="stall.log")
    assert verdict.primary_class == "engine_stall", verdict.title
    f = verdict.primary
    assert f.severity == "critical" and f.facts["stall_signal"] == signal
    assert not any(x.class_id == "other" for x in verdict.findings)  # the exception is the stall's, not a cause
    if after_waits:
        assert any("shm_broadcast" in (e.note or "") for e in f.evidence)


# -- the queue that is never admitted ------------------------------------------------------------

V1_STATS = (
    "(APIServer pid=851) INFO 04-28 22:{m:02d}:32 [loggers.py:257] Engine 000: Avg prompt throughput: {p} tokens/s, "
    "Avg generation throughput: {g} tokens/s, Running: {r} reqs, Waiting: {w} reqs, GPU KV cache usage: {kv}%, "
    "Prefix cache hit rate: 92.0%"
)
V0_STATS = (
    "INFO 04-28 22:{m:02d}:32 metrics.py:351] Avg prompt throughput: {p} tokens/s, Avg generation throughput: {g} "
    "tokens/s, Running: {r} reqs, Swapped: 0 reqs, Pending: {w} reqs, GPU KV cache usage: {kv}%, CPU KV cache usage: "
    "0.0%."
)


@pytest.mark.parametrize("fmt", [V1_STATS, V0_STATS], ids=["v1", "v0"])
@pytest.mark.parametrize("intervals", [2, 3, 8])
@pytest.mark.parametrize(
    "running,waiting,kv",
    [(1, 14, 76.5), (1, 3, 60.0), (2, 9, 70.0), (3, 1, 80.0), (4, 1, 70.8), (8, 40, 40.0), (1, 14, 88.0)],
)
def test_a_queue_never_admitted_while_others_decode(fmt, intervals, running, waiting, kv):
    lines = [
        fmt.format(m=i, p="0.0", g=f"{5.0 * running:.1f}", r=running, w=waiting, kv=f"{kv + 0.1 * i:.1f}")
        for i in range(intervals)
    ]
    verdict = diagnose(lines, name="queue.log")
    mine = [f for f in verdict.findings if f.class_id == "engine_stall"]
    peak = kv + 0.1 * (intervals - 1)
    saturated = peak >= thresholds.SATURATED_KV_PCT
    if intervals < thresholds.QUEUE_BLOCKED_MIN_INTERVALS or saturated:
        assert not mine, [f.title for f in mine]
        return
    (f,) = mine
    assert f.facts["queued_intervals"] == intervals and f.facts["max_waiting"] == waiting
    assert f.facts["running_while_queued"] == running
    no_room = 100 - peak < peak / running  # less free than one running request holds
    if no_room:
        assert f.severity == "warning" and verdict.primary_class == "engine_stall", verdict.title
        assert f.title.startswith("Queue never admitted")
    else:
        assert f.severity == "info" and verdict.primary_class != "engine_stall", verdict.title
        assert "max_num_seqs" in f.remedies[0].action


def test_a_queue_that_admits_now_and_then_is_no_block():
    lines = []
    for i in range(12):
        p = "900.0" if i % 3 == 2 else "0.0"  # a request admitted every third interval
        lines.append(V1_STATS.format(m=i, p=p, g="5.4", r=1, w=14, kv="76.5"))
    verdict = diagnose(lines, name="queue.log")
    assert not any(f.class_id == "engine_stall" for f in verdict.findings)


#: A reporter's words of a hang, each wording the catalog reads (catalog/stalls.py REPORTED_WORDS).
HANG_WORDS = ["stuck", "got stuck", "is stuck"]
V0_STATS = (
    "INFO 11-12 22:04:23 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 103.0 "
    "tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 11.0%, CPU KV cache usage: 0.0%."
)


@pytest.mark.parametrize("quoted", [V0_STATS, f"`{V0_STATS}`"], ids=["bare", "backticks"])
@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("word", HANG_WORDS)
def test_a_hang_the_report_names_is_never_health(word, where, quoted):
    said = f"During the rollout the engine {word} and prints nothing more."
    lines = [said, "", quoted] if where == "before" else [quoted, "", said]
    verdict = diagnose(lines, name="report.log")
    assert verdict.primary_class == "engine_stall", verdict.title
    assert verdict.primary.confidence == "low" and verdict.primary.title.startswith("Reported hang")
    assert verdict.exit_code == 1


@pytest.mark.parametrize("word", HANG_WORDS)
def test_a_hang_word_inside_a_vllm_record_is_not_the_reporter_s(word):
    record = f"(APIServer pid=1) INFO 05-10 16:00:00 [api_server.py:1885] model {word}-7b is served"
    verdict = diagnose([record, V0_STATS], name="report.log")
    assert verdict.primary_class == "healthy", verdict.title


@pytest.mark.parametrize("word", ["error", "errors", "OOM", "failed"])
def test_a_failure_the_report_names_and_the_log_does_not_show_is_never_health(word):
    capture = (
        "INFO 10-24 18:12:41 model_runner.py:1395] Capturing the model for CUDA graphs. This may lead to unexpected "
        "consequences if the model is not static."
    )
    verdict = diagnose([f"With max-num-seqs I see a different {word} (below)", "", capture], name="report.log")
    assert verdict.primary_class == "unknown" and verdict.primary.severity == "warning", verdict.title
    assert verdict.primary.facts["phase_reached"] == "CUDA graph capture"
    assert diagnose([capture], name="report.log").primary_class == "healthy"  # the corpus's mid-startup convention
