"""Shapes that read wrong after round 7 (wrappers5), each as a family:

* newlines collapsed into single spaces (a log viewer's export, an issue form: hunt7 q20,
  q25): one physical line holding a whole traceback, split into its records only on strong
  evidence (a process prefix that repeats within the line; two or more whole frame lines);
* Ray's driver-side relay as SkyPilot prints it, ``(task, pid=N) `` and its kin (hunt7 q09);
* CloudWatch Logs' CSV export ``<epoch ms>,<message>`` (quoted, quotes doubled) and
  rsyslog's escaped controls ``#033`` / ``#015`` (hunt8 u18).

Each is checked over several logs and wrappers, cut and whole, against the bare reading. The
whole-corpus tables for the CSV and SkyPilot wrappers are tests/test_formats.py's WRAPPERS."""

import json
import re

import pytest
from conftest import fixture_path, load_manifest
from test_formats import compose, journald_short, kubectl_ts, log_lines, stern, verdict_of

from vllm_doctor.envelopes import COLLAPSED_FRAMES_MIN, Envelopes, collapsed_starts, unwrap


def data(lines):
    return ("\n".join(lines) + "\n").encode()


def class_and_facts(v):
    return v.primary_class, sorted((f.class_id, json.dumps(f.facts, sort_keys=True, default=str)) for f in v.findings)


# --- newlines collapsed into spaces ---------------------------------------------------------

#: A process prefix and vLLM's record prefix, either or both (what a traceback line may carry).
_PRE = re.compile(
    r"(?:\([^()]* pid=\d+[^()]*\) )*"
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+:\d+\] )?"
)
_EXC = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): ")


def traceback_block(lines):
    """``(first, end)`` of the first traceback in ``lines`` (its header, its indented frame,
    source and caret lines, its exception line), or None when it holds fewer than
    :data:`COLLAPSED_FRAMES_MIN` frames."""
    first = next((k for k, line in enumerate(lines) if "Traceback (most recent call last):" in line), None)
    if first is None:
        return None
    end = first + 1
    while end < len(lines):
        body = lines[end][_PRE.match(lines[end]).end() :]
        if _EXC.match(body):
            end += 1
            break
        if not body.startswith("  "):
            break
        end += 1
    frames = sum('File "' in line and ", line " in line for line in lines[first:end])
    return (first, end) if frames >= COLLAPSED_FRAMES_MIN else None


def collapse(lines, first, end):
    """``lines[first:end]`` as one physical line, each newline a single space: a bare line
    loses its indentation, a line with a process or record prefix keeps it after the prefix."""
    joined = " ".join(line if _PRE.match(line).end() else line.strip() for line in lines[first:end])
    return lines[:first] + [joined] + lines[end:]


def _collapsible():
    for c in load_manifest():
        lines = log_lines(fixture_path(c["file"]))
        if traceback_block(lines) is not None:
            yield c["file"]


COLLAPSIBLE = sorted(_collapsible())


def test_the_corpus_has_collapsible_tracebacks_of_both_shapes():
    # The table below is only as good as its logs: bare frames and frames under a prefix.
    assert len(COLLAPSIBLE) >= 15
    shapes = set()
    for name in COLLAPSIBLE:
        lines = log_lines(fixture_path(name))
        first, _ = traceback_block(lines)
        shapes.add(bool(_PRE.match(lines[first + 1]).end()))
    assert shapes == {True, False}


def _cut(lines, first, end):
    """The log cut inside its traceback: after half of the block, and after the line under its
    second frame at least (one frame alone is no evidence of a collapse: never split)."""
    heads = [k for k in range(first, end) if 'File "' in lines[k] and ", line " in lines[k]]
    return lines[: max(first + (end - first) // 2, heads[1] + 2)]


@pytest.mark.parametrize(
    "wrap", [None, journald_short, kubectl_ts, stern, compose], ids=lambda w: getattr(w, "__name__", "none")
)
@pytest.mark.parametrize("shape", ["whole", "cut"])
@pytest.mark.parametrize("name", COLLAPSIBLE)
def test_a_traceback_with_its_newlines_collapsed_gets_the_bare_class_and_facts(name, shape, wrap):
    lines = log_lines(fixture_path(name))
    first, end = traceback_block(lines)
    if shape == "cut":
        lines = _cut(lines, first, end)
        end = len(lines)
    collapsed = collapse(lines, first, end)
    if wrap is not None:
        lines = [wrap(i, line) for i, line in enumerate(lines)]
        collapsed = [wrap(i, line) for i, line in enumerate(collapsed)]
    assert class_and_facts(verdict_of(data(collapsed))) == class_and_facts(verdict_of(data(lines)))


Q25_LINE = (
    "c prompt_logprobs_dict = self._get_prompt_logprobs_dict( ^^^^^^^^^^^ "
    'File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 4308, in '
    "_get_prompt_logprobs_dict logprobs = self.sampler.compute_logprobs(logits) ^^^^^^^^^^^^ "
    'File "/usr/local/lib/python3.12/dist-packages/vllm/v1/sample/sampler.py", line 207, in compute_logprobs '
    "return logits.log_softmax(dim=-1, dtype=torch.float32) ~~~~^^^^^^^^^^"
)


def test_collapsed_frames_are_split_with_their_indentation_back():
    assert [r.text for r in unwrap("x", 1, Q25_LINE)] == [
        "c prompt_logprobs_dict = self._get_prompt_logprobs_dict(",
        "    ^^^^^^^^^^^",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 4308, in '
        "_get_prompt_logprobs_dict",
        "    logprobs = self.sampler.compute_logprobs(logits)",
        "    ^^^^^^^^^^^^",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/sample/sampler.py", line 207, in compute_logprobs',
        "    return logits.log_softmax(dim=-1, dtype=torch.float32)",
        "    ~~~~^^^^^^^^^^",
    ]
    assert {r.lineno for r in unwrap("x", 7, Q25_LINE)} == {7}  # one physical line: its number


Q20_LINE = (
    "(APIServer pid=135812)            ^^^^^^^^^^ (APIServer pid=135812)   File "
    '"/x/site-packages/pydantic/_internal/_dataclasses.py", line 121, in __init__ (APIServer pid=135812)     '
    "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s) (APIServer pid=135812)   "
    'File "/x/site-packages/vllm/config/speculative.py", line 380, in __post_init__ (APIServer pid=135812)     '
    "raise NotImplementedError( (APIServer pid=135812) NotImplementedError: Speculative decoding with draft model "
    "is not supported yet."
)


def test_a_repeated_process_prefix_splits_a_collapsed_line():
    recs = unwrap("x", 3, Q20_LINE)
    assert [(r.proc, r.pid, r.text.strip()[:24]) for r in recs] == [
        ("APIServer", 135812, "^^^^^^^^^^"),
        ("APIServer", 135812, 'File "/x/site-packages/p'),
        ("APIServer", 135812, "s.__pydantic_validator__"),
        ("APIServer", 135812, 'File "/x/site-packages/v'),
        ("APIServer", 135812, "raise NotImplementedErro"),
        ("APIServer", 135812, "NotImplementedError: Spe"),
    ]
    assert recs[1].text.startswith("  File") and recs[2].text.startswith("    s.")  # indentation kept


@pytest.mark.parametrize(
    "line",
    [
        # a stats line: long, many numbers, no frame
        "INFO 08-20 10:18:39 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 12.3 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.1%, Prefix cache hit "
        "rate: 0.0%",
        # an OOM message naming one frame
        'torch.OutOfMemoryError: CUDA out of memory while running File "/x/model.py", line 12, in forward: '
        "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 1.02 GiB is free.",
        # a launch command with its continuations collapsed
        "vllm serve /Qwen/Qwen3-4B \\ --dtype bfloat16 \\ --tensor-parallel-size 1 \\ --host 0.0.0.0 \\ --port 8199",
        # a process prefix named once inside another's message
        "(APIServer pid=1) ERROR 01-01 00:00:00 [core.py:1] Engine process (EngineCore_DP0 pid=2) died unexpectedly",
        # two different processes named, each once
        "(EngineCore_DP0 pid=2) waiting for (VllmWorker rank=0 pid=3) and (VllmWorker rank=1 pid=4) to be ready",
        # two frames, but after padding or indentation: a terminal copy's (read by the padding rule)
        'x = 1  File "/a.py", line 1, in f',
        # one frame, its source line, and an exception-like word in prose
        'the frame File "/a.py", line 1, in f then ValueError: was raised',
    ],
)
def test_a_normal_long_line_is_never_split(line):
    assert len(unwrap("x", 1, line)) == 1
    assert collapsed_starts(line.split(") ", 1)[-1] if line.startswith("(") else line) == {}


def test_two_frames_after_one_space_each_are_the_threshold():
    one = 'a File "/a.py", line 1, in f b'
    assert collapsed_starts(one) == {}
    two = one + ' File "/b.py", line 2, in g c'
    assert sorted(collapsed_starts(two).items()) == [(2, "  "), (29, "    "), (31, "  "), (58, "    ")]
    assert COLLAPSED_FRAMES_MIN == 2


def test_q25_frames_reach_its_failure():
    v = verdict_of(
        fixture_path(
            "q25-v1-prompt-logprobs-runtime-oom-1p71gib-three-processes-newlines-collapsed-iso-ts.log"
        ).read_bytes()
    )
    (f,) = [f for f in v.findings if f.class_id == "runtime_oom"]
    assert f.facts["request_path"] == "prompt logprobs"
    assert f.remedies[0].action.startswith("Bound the request first")


# --- SkyPilot's "(task, pid=N) " and its kin ------------------------------------------------

SKY_PREFIXES = [
    ("(task, pid=34615) ", "task", 34615, None),
    ("(sky-cmd, pid=12) ", "sky-cmd", 12, None),
    ("(setup, pid=7, ip=10.0.0.3) ", "setup", 7, "10.0.0.3"),
    ("(worker1 pid=5, ip=10.0.0.1) ", "worker1", 5, "10.0.0.1"),
]


@pytest.mark.parametrize("prefix,name,pid,ip", SKY_PREFIXES, ids=[p[1] for p in SKY_PREFIXES])
@pytest.mark.parametrize(
    "inner,text,proc,level",
    [
        ("root = /opt/conda", "root = /opt/conda", None, None),
        ("", "", None, None),
        ("INFO 06-21 09:33:40 [api_server.py:1] vLLM API server", "vLLM API server", None, "INFO"),
        (
            "(EngineCore_DP0 pid=9) ERROR 06-21 09:33:41 [core.py:7] EngineCore failed",
            "EngineCore failed",
            "EngineCore_DP0",
            "ERROR",
        ),
    ],
)
def test_a_relay_prefix_with_a_comma_is_a_process_prefix(prefix, name, pid, ip, inner, text, proc, level):
    (rec,) = unwrap("x", 1, (prefix + inner).rstrip())
    assert (rec.text, rec.level) == (text, level)
    assert rec.proc == (proc or name) and pid in rec.pids


@pytest.mark.parametrize("shape", ["whole", "cut"])
@pytest.mark.parametrize("prefix", [p[0] for p in SKY_PREFIXES], ids=[p[1] for p in SKY_PREFIXES])
@pytest.mark.parametrize(
    "name",
    [
        "q09-skypilot-task-pid-inferentia-neuronx-cc-failed-compilation.log",
        "s014-4gb-gpu-free-memory-0.9.log",
        "r019-v1-serving-one-request-healthy.log",
        "x022-enginecore-dp0-runtime-oom-busy-loop-single-process.log",
    ],
)
def test_a_log_under_a_relay_prefix_gets_the_bare_verdict(name, prefix, shape):
    path = fixture_path(name)
    bare = (
        log_lines(path)
        if not name.startswith("q09")
        else [re.sub(r"^\(task, pid=\d+\) ?", "", x) for x in log_lines(path)]
    )
    if shape == "cut":
        bare = bare[: max(4, len(bare) * 2 // 3)]
    assert class_and_facts(verdict_of(data([prefix + x for x in bare]))) == class_and_facts(verdict_of(data(bare)))


# --- CloudWatch CSV and rsyslog's escapes ----------------------------------------------------


@pytest.mark.parametrize(
    "line,text,proc,level",
    [
        ("1756144009120,INFO 08-25 10:46:48 [cuda.py:285] Using Triton backend", "Using Triton backend", None, "INFO"),
        (
            "1756144011375,#033[1;36m(VllmWorker pid=96)#033[0;0m ERROR 08-25 10:46:51 [m.py:559] WorkerProc failed to start.#015",
            "WorkerProc failed to start.",
            "VllmWorker",
            "ERROR",
        ),
        (
            '1756144011375,"#033[1;36m(VllmWorker pid=96)#033[0;0m ERROR 08-25 10:46:51 [m.py:559]   File ""/a/b.py"", line 533, in worker_main#015"',
            '  File "/a/b.py", line 533, in worker_main',
            "VllmWorker",
            "ERROR",
        ),
        ('1756144011375,"a, b and ""c"""', 'a, b and "c"', None, None),
        ('1756144011375,"cut before its closing quote, ""x', 'cut before its closing quote, "x', None, None),
        ("1756144011375,", "", None, None),
    ],
)
def test_a_cloudwatch_csv_line_is_its_message(line, text, proc, level):
    (rec,) = unwrap("x", 1, line)
    assert (rec.text, rec.proc, rec.level, rec.wrapper) == (text, proc, level, "cloudwatch-csv")


def test_an_escaped_cr_inside_a_quoted_message_splits_the_progress_bar_off():
    line = '1756144011375,"#033[1;36m(VllmWorker pid=96)#033[0;0m #015Loading safetensors checkpoint shards:   0% Completed | 0/13"'
    assert [(r.proc, r.text, r.wrapper) for r in unwrap("x", 1, line)] == [
        ("VllmWorker", "", "cloudwatch-csv"),
        (None, "Loading safetensors checkpoint shards:   0% Completed | 0/13", "cloudwatch-csv"),
    ]


@pytest.mark.parametrize(
    "line,text",
    [
        ("#033[32mINFO#033[0m 01-01 00:00:00 [a.py:1] hi", "hi"),  # rsyslog's file, no CSV
        ("Jan  1 00:00:00 h vllm[1]: #033[32mINFO#033[0m 01-01 00:00:00 [a.py:1] hi#015", "hi"),
        ("a#011b", "a\tb"),
        ("issue #0123 and #015x stay text? no: a CR", None),
        ("see PR #033 for details", "see PR #033 for details"),  # no colour code after it: text
    ],
)
def test_rsyslog_escapes_are_the_controls_they_stand_for(line, text):
    recs = unwrap("x", 1, line)
    if text is None:  # "#015" before text is a CR: two pieces
        assert [r.text for r in recs] == ["issue #0123 and", "x stay text? no: a CR"]
    else:
        assert [r.text for r in recs] == [text]


def test_a_csv_export_is_a_named_format_and_learns_nothing():
    lines = log_lines(
        fixture_path("u18-sagemaker-cloudwatch-csv-epoch-escaped-ansi-workerproc-failed-to-start-cut.log")
    )
    env = Envelopes()
    wrappers = [env.sniff(line) for line in lines if line.strip()]
    assert env.signatures() == [] and wrappers.count("cloudwatch-csv") == len(wrappers) - 1  # the fence
    v = verdict_of(data(lines))
    (f,) = v.findings
    assert f.title.endswith("root cause not in this log: WorkerProc failed to start.")
    assert f.facts["last_frames"] == ["worker_main"]


# --- aws logs tail over prose (q16): one stream name with a slash on every line ---------------

_TAIL = "2026-11-30T03:08:0{i}.00000{i}+00:00 {stream} {msg}"
_PROSE = ["However, after 5-10 minutes, the server hangs", "sage: 98.7%, CPU KV cache usage: 0.0%", "", "Then x"]


@pytest.mark.parametrize(
    "stream,n,want",
    [
        ("vllm/vllm/0f3c9a7e", 3, True),
        ("vllm/vllm/0f3c9a7e", 4, True),
        ("vllm/vllm/0f3c9a7e", 2, False),  # CLOUDWATCH_STREAM_LINES - 1: no
        ("AllTraffic/i-0abc", 3, True),
        ("myhost", 4, False),  # no slash: a journald host or a word of the message
    ],
)
def test_prose_under_aws_logs_tail_is_cloudwatch_by_its_stream(stream, n, want):
    env = Envelopes()
    for i in range(n):
        env.sniff(_TAIL.format(i=i, stream=stream, msg=_PROSE[i]).rstrip())
    assert env.cloudwatch is want
    assert Envelopes.CLOUDWATCH_STREAM_LINES == 3


def test_two_stream_names_are_not_one_stream():
    env = Envelopes()
    for i, stream in enumerate(["a/b", "a/b", "c/d"]):
        env.sniff(_TAIL.format(i=i, stream=stream, msg="prose"))
    assert not env.cloudwatch


def test_a_slash_is_no_journald_host():
    (rec,) = unwrap("x", 1, "2026-11-30T03:08:01.000001+00:00 vllm/vllm/0f3c sage: 98.7%, CPU KV cache usage: 0.0%")
    assert rec.wrapper != "journald-iso" and "sage: 98.7%" in rec.text
    (rec,) = unwrap("x", 1, "2026-11-30T03:08:01.000001+00:00 gpu-node-1 vllm[7]: INFO 01-01 00:00:00 [a.py:1] hi")
    assert (rec.wrapper, rec.host, rec.text) == ("journald-iso", "gpu-node-1", "hi")
