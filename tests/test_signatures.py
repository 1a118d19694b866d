"""Prefixes learned per input (:mod:`vllm_doctor.signatures`): a new wrapper needs no code,
and a plain log's message text is never eaten."""

import io

import pytest
from conftest import fixture_path, load_manifest, marked_known

from vllm_doctor.envelopes import Envelopes
from vllm_doctor.pipeline import build_verdict, diagnose_input
from vllm_doctor.signatures import Learner, find_prefix
from vllm_doctor.sources import Source

ALL = load_manifest()


def learned(lines):
    env = Envelopes()
    for line in lines:
        env.sniff(line)
    return env


def verdict_of(lines):
    return build_verdict(diagnose_input(Source("x.log", io.BytesIO(("\n".join(lines) + "\n").encode()))))


#: New real logs whose wrapper has no named format yet, so it is learned (issue 10 probe).
#: Empty since the Lemonade launcher's "YYYY-MM-DD HH:MM:SS.mmm [Error] (Process) " (h002)
#: became an application record prefix (envelopes ``app-log``). Strict, as the others.
KNOWN_LEARNED: set = {
    # GKE Cloud Logging's export ("INFO <RFC3339> [resource.labels.containerName: vllm] ") and
    # KServe's "kserve-container " (hunt4 h01, h11): learned as prefixes, read right; no rule
    # names them yet.
    "n01-gke-cloudlogging-v1-lora-sampler-warmup-oom-79gib.log",
    "n11-kserve-container-prefix-unspecified-platform-libcuda-missing.log",
    # MinerU's launcher tags every relayed line "[mineru] " (hunt5 m09): learned, read right.
    "m09-ascend-pod-prefix-literal-ansi-two-instances-available-memory-0.log",
    # A Markdown list: "- " before every line (hunt5 m12): learned, read right.
    "m12-dash-bullet-prefixed-v1-startup-kv-772736-graphs-0p54-healthy.log",
    # -- hunt11 and hunt12: learned, each read as its label wants --
    # LMCache's own "LMCache " logger prefix on every line (z07).
    "z07-lmcache-cpu-ssd-failed-to-allocate-memory-for-kv-cache-warnings-not-stored.log",
    # A Markdown list again ("- " before quoted RFC3339 lines, a02).
    "a02-quoted-markdown-list-rfc3339-ms-prefix-v0-asyncenginedead-engine-step-traceback-cut.log",
    # A Jupyter proxy turned tqdm's "0/5" into a link on every bar line (a11).
    "a11-jupyter-proxy-links-mangled-tqdm-mllama-11b-shards-loading-oom-not-shown.log",
}


@pytest.mark.parametrize("case", marked_known(ALL, KNOWN_LEARNED, "wrapper without a named format"))
def test_no_corpus_log_learns_a_prefix(case):
    # Every wrapper of the corpus has a rule; so on the corpus, learning must find nothing:
    # whatever it learned would be message text eaten.
    lines = fixture_path(case["file"]).read_text(encoding="utf-8", errors="replace").split("\n")[:200]
    env = learned(lines)
    assert [s.text for s in env.signatures()] == [] and not env.cloudwatch and env.pretty is None


STERN = [
    "vllm-0 vllm (APIServer pid=1) INFO 11-30 00:00:00 [api_server.py:1885] vLLM API server version 0.11.0",
    "vllm-0 vllm (EngineCore_DP0 pid=77) INFO 11-30 00:00:05 [gpu_worker.py:298] Available KV cache memory: 2.5 GiB",
    "vllm-0 vllm (EngineCore_DP0 pid=77) ERROR 11-30 00:00:06 [core.py:700] EngineCore failed to start.",
    "vllm-0 vllm (EngineCore_DP0 pid=77) Traceback (most recent call last):",
    'vllm-0 vllm (EngineCore_DP0 pid=77)   File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
    "vllm-0 vllm (EngineCore_DP0 pid=77)     self.run()",
]


def test_stern_prefix_is_learned_and_names_the_pod():
    env = learned(STERN)
    (sig,) = env.signatures()
    assert sig.text == "vllm-0 vllm " and sig.key_groups
    recs = [env.unwrap("x", n, line)[0] for n, line in enumerate(STERN, 1)]
    assert {(r.wrapper, r.host) for r in recs} == {("learned", "vllm-0/vllm")}
    assert [r.text for r in recs[-3:]] == [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
        "    self.run()",  # the source line keeps its indentation
    ]
    assert recs[1].proc == "EngineCore_DP0" and recs[1].vllm_header


def test_stern_pods_become_sources_of_their_own():
    healthy = fixture_path("r019-v1-serving-one-request-healthy.log").read_text().splitlines()
    failing = fixture_path("s014-4gb-gpu-free-memory-0.9.log").read_text().splitlines()
    lines = []
    for i in range(max(len(healthy), len(failing))):
        if i < len(healthy):
            lines.append(f"vllm-a-7d9f vllm {healthy[i]}")
        if i < len(failing):
            lines.append(f"vllm-b-5c2e vllm {failing[i]}")
    v = verdict_of(lines)
    assert {s.name: s.primary_class for s in v.sources} == {
        "x.log [vllm-a-7d9f/vllm]": "healthy",
        "x.log [vllm-b-5c2e/vllm]": "startup_memory_contention",
    }


def test_a_prefix_with_a_level_or_a_time_names_no_source():
    lines = [
        f"2025-01-0{i} 10:00:0{i} launcher INFO (APIServer pid=1) INFO 01-01 10:00:00 [x.py:1] m{i}" for i in range(5)
    ]
    env = learned(lines)
    assert env.signatures() == [] or all(not s.key_groups for s in env.signatures())
    recs = [env.unwrap("x", n, line)[0] for n, line in enumerate(lines, 1)]
    assert [r.text for r in recs] == [f"m{i}" for i in range(5)]


@pytest.mark.parametrize(
    "record",
    [
        "ERROR 04-28 15:55:45 worker_base.py:157] Error executing method initialize_cache.",  # V0's old form (h032)
        "INFO 08-20 10:18:39 [gpu_model_runner.py:2007] Model loading took 14.99 GiB",
        "(RayWorkerWrapper pid=1463574, ip=192.0.2.60) INFO 03-27 10:29:01 [worker.py:267] Memory profiling",
    ],
)
def test_a_prefix_is_learned_when_the_anchor_after_it_runs_past_max_prefix(record):
    # The prefix must fit MAX_PREFIX; the record prefix after it need not (stern's pod names).
    lines = [f"vllm-deployment-7d9f8c4b5-x2k{i}p vllm-server {record}" for i in range(3)]
    env = learned(lines)
    assert [s.text for s in env.signatures()] == ["vllm-deployment-7d9f8c4b5-x2k0p vllm-server "]
    assert env.unwrap("x", 1, lines[1])[0].host == "vllm-deployment-7d9f8c4b5-x2k1p/vllm-server"


def test_digits_in_a_learned_prefix_generalise():
    lines = [f"worker-{i % 3} #{i} | (EngineCore_DP0 pid=7) INFO 01-01 10:00:00 [x.py:1] m{i}" for i in range(6)]
    env = learned(lines[:3])
    late = "worker-7 #1234 | Traceback (most recent call last):"
    assert env.unwrap("x", 9, late)[0].text == "Traceback (most recent call last):"


def test_a_bare_excerpt_under_an_unknown_prefix_is_learned_from_weak_anchors():
    bare = fixture_path("x008-qwen15-7b-bare-kv-32768-vs-7344.log").read_text().splitlines()
    lines = [f"[job 42] {line}" for line in bare]
    v, want = verdict_of(lines), verdict_of(bare)
    assert v.primary_class == want.primary_class == "kv_cache_capacity"
    assert [f.facts for f in v.findings] == [f.facts for f in want.findings]


@pytest.mark.parametrize(
    "line",
    [
        # A progress bar glued to a record ends in "]" right before it.
        "Processed prompts:  10%|#  | 1/10 [00:01<00:09]INFO 06-16 21:24:15 metrics.py:341] Avg prompt throughput: 1.0",
        # Too long to be a wrapper.
        "Some long sentence that happens to run on and on before a record starts, like this one: "
        "INFO 06-16 21:24:15 [metrics.py:341] x",
        # A label and its value before a literal, not a wrapper.
        "Engine 000: Avg prompt throughput: 0.0 tokens/s, Running: 1 reqs",
        # An indented line (a traceback's source line) has no prefix.
        "    (EngineCore_DP0 pid=1) INFO 06-16 21:24:15 [x.py:1] y",
        # Nothing unknown: the line starts with a record.
        "(APIServer pid=1) INFO 06-16 21:24:15 [x.py:1] z",
    ],
)
def test_not_a_prefix(line):
    assert find_prefix(line) is None


def test_one_occurrence_in_a_long_log_is_not_learned():
    learner = Learner()
    learner.observe("odd-one-out (APIServer pid=1) INFO 06-16 21:24:15 [x.py:1] z")
    for i in range(20):
        learner.observe(f"(APIServer pid=1) INFO 06-16 21:24:{i:02d} [x.py:1] line {i}")
    assert learner.signatures() == []


def test_weak_anchors_alone_need_the_prefix_on_most_lines():
    learner = Learner()
    for i in range(3):
        learner.observe(f"note {i} ValueError: bad {i}")
    for i in range(10):
        learner.observe(f"plain text line {i}")
    assert learner.signatures() == []  # 3 of 13 lines: a coincidence, not a wrapper
    for i in range(20):
        learner.observe(f"note {i} ValueError: bad {i}")
    assert [s.text for s in learner.signatures()] == ["note 0 "]
