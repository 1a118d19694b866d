"""Wrapper invariance for whole families of wrappers (round 3, kind F of the hunt report).

Each test takes one kind of damage or wrapper and checks it over several wrappers and
several corpus logs, never one: a per-line source is honoured by the wrap join, learned
prefixes are found under any outer wrapper, and wrappers stack.
"""

import pytest
from conftest import FIXTURES

from vllm_doctor.envelopes import Envelopes, source_key
from vllm_doctor.reassemble import Reassembler

#: A stats line cut by a hard wrap, and its rest (the join these tests are about).
CUT = (
    "INFO 07-03 23:23:42 [metrics.py:536] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
    "616.1 tokens/s, Running: 32 r"
)
REST = "eqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 17.6%, CPU KV cache usage: 0.0%."


def fixture_text(prefix):
    (path,) = FIXTURES.glob(f"{prefix}-*.log")
    return path.read_text(encoding="utf-8").splitlines()


def read(lines):
    """Records of ``lines`` read as the pipeline reads one input: sniffed first, then
    unwrapped and reassembled."""
    env = Envelopes()
    for line in lines[:200]:
        env.sniff(line)
    r = Reassembler()
    out = []
    for n, line in enumerate(lines, 1):
        out.extend(r.feed(env.unwrap("t", n, line)))
    return out + r.flush()


# Wrappers that name the source of every line: (name, wrap(source, line)).
PER_LINE_SOURCES = [
    ("kubectl-prefix", lambda src, line: f"[pod/vllm-{src}-7d9f/vllm] {line}"),
    (
        "kubectl-prefix-timestamps",
        lambda src, line: f"[pod/vllm-{src}-7d9f/vllm] 2026-11-30T03:08:00.000000000Z {line}",
    ),
    ("journald", lambda src, line: f"Nov 30 03:08:00 gpu-node-3 vllm[{100 + ord(src)}]: {line}"),
    ("journald-iso", lambda src, line: f"2026-11-30T03:08:00+0000 gpu-node-{src} vllm[4127]: {line}"),
    ("stern", lambda src, line: f"vllm-{src}-7d9f8c4b5-x2k4p vllm {line}"),
    ("loki-text", lambda src, line: f'2026-11-30T03:08:00+01:00 {{container="vllm", pod="vllm-{src}"}}   {line}'),
]


def _filler(wrap, n=6):
    """Lines that let a learned wrapper be learned (stern) before the cut line."""
    return [wrap("a" if i % 2 else "b", f"INFO 07-03 23:23:{i:02d} [api_server.py:1] line {i}") for i in range(n)]


@pytest.mark.parametrize("name,wrap", PER_LINE_SOURCES, ids=[n for n, _ in PER_LINE_SOURCES])
def test_a_continuation_from_another_source_is_not_joined(name, wrap):
    lines = _filler(wrap) + [wrap("a", CUT), wrap("b", REST)]
    recs = read(lines)
    cut = next(r for r in recs if r.text.endswith("Running: 32 r") or "Running: 32 r" in r.text)
    assert cut.continued == 0 and cut.text.endswith("Running: 32 r"), cut.text
    rest = next(r for r in recs if r.text.startswith("eqs, Swapped"))
    assert source_key(rest) != source_key(cut) != ""


@pytest.mark.parametrize("name,wrap", PER_LINE_SOURCES, ids=[n for n, _ in PER_LINE_SOURCES])
def test_a_continuation_from_the_same_source_is_joined_without_its_wrapper(name, wrap):
    lines = _filler(wrap) + [wrap("a", CUT), wrap("a", REST)]
    recs = read(lines)
    (cut,) = [r for r in recs if "Running: 32 r" in r.text]
    assert cut.continued == 1
    assert cut.text == CUT.split("] ", 1)[1] + REST  # nothing of the wrapper glued in


@pytest.mark.parametrize("name,wrap", PER_LINE_SOURCES, ids=[n for n, _ in PER_LINE_SOURCES])
@pytest.mark.parametrize("log", ["h032", "t016", "r014"])
def test_frame_names_keep_no_wrapper_text(name, wrap, log):
    """h032 under stern glued the pod name into frame names (``execute_methodvllm-...``): under
    every per-line source wrapper, each record's text is the bare log's."""
    bare = fixture_text(log)
    want = [r.text for r in read(bare)]
    got = [r.text for r in read([wrap("a", line) for line in bare])]
    assert got == want


# --- learned prefixes under any outer wrapper, known wrappers under learned ones ----------

#: Outer wrappers a log store or a tool puts around every line: (name, wrap(i, line)).
OUTER = [
    ("none", lambda i, line: line),
    ("stern", lambda i, line: f"vllm-7d9f8c4b5-x2k4p vllm {line}"),
    ("stern-timestamps", lambda i, line: f"vllm-7d9f8c4b5-x2k4p vllm 2026-11-30T03:08:{i % 60:02d}.{i:09d}Z {line}"),
    ("kubectl-timestamps", lambda i, line: f"2026-11-30T03:08:{i % 60:02d}.{i:09d}Z {line}"),
    ("kubectl-prefix", lambda i, line: f"[pod/vllm-0/vllm] {line}"),
    ("journald", lambda i, line: f"Nov 30 03:08:{i % 60:02d} gpu-node-3 vllm[4127]: {line}"),
    ("compose", lambda i, line: f"vllm-1  | {line}"),
    ("cloudwatch-tail", lambda i, line: f"2026-11-30T03:08:{i % 60:02d}.{i:06d}+00:00 vllm/vllm/0f3c9a7e {line}"),
    ("launcher", lambda i, line: f"job-42/step {i % 7} | {line}"),
]

#: Prefixes no rule names, put right before the log's own lines (learned per input).
INNER = [
    ("job-tag", lambda i, line: f"[job 42] {line}"),
    ("worker-pipe", lambda i, line: f"worker-{i % 3} | {line}"),
    ("time-then-tag", lambda i, line: f"2026-11-30 03:08:{i % 60:02d} <vllm> {line}"),
]

LOGS = ["s014", "h032", "x008", "r014"]


def texts(lines):
    return [r.text for r in read(lines)]


@pytest.mark.parametrize("log", LOGS)
@pytest.mark.parametrize("inner_name,inner", INNER, ids=[n for n, _ in INNER])
@pytest.mark.parametrize("outer_name,outer", OUTER, ids=[n for n, _ in OUTER])
def test_an_unknown_prefix_is_peeled_under_any_outer_wrapper(outer_name, outer, inner_name, inner, log):
    bare = fixture_text(log)
    got = texts([outer(i, inner(i, line)) for i, line in enumerate(bare)])
    assert got == texts(bare)


#: Known wrappers that sit under another one: a time stamp and an application's own record
#: prefix (lm-eval, a launcher's Python logging), ``docker logs -t``'s stamp.
UNDER = [
    ("harness", lambda i, line: f"2024-05-01 10:00:{i % 60:02d},123 - lm_eval.models.vllm - INFO - {line}"),
    ("docker-t", lambda i, line: f"2026-11-30T03:08:{i % 60:02d}.{i:09d}Z {line}"),
    ("bracket-time", lambda i, line: f"[2026-11-30 03:08:{i % 60:02d}] {line}"),
    (
        "lemonade",
        lambda i, line: f"2026-05-08 11:50:{i % 60:02d}.752 [{'Error' if i % 2 else 'Info'}] (Process) {line}",
    ),
]


@pytest.mark.parametrize("log", ["s014", "h032", "r019"])
@pytest.mark.parametrize("under_name,under", UNDER, ids=[n for n, _ in UNDER])
@pytest.mark.parametrize("outer_name,outer", OUTER, ids=[n for n, _ in OUTER])
def test_known_wrappers_stack(outer_name, outer, under_name, under, log):
    bare = fixture_text(log)
    got = texts([outer(i, under(i, line)) for i, line in enumerate(bare)])
    assert got == texts(bare)


@pytest.mark.parametrize(
    "line,wrapper,text",
    [
        # docker logs -t / kubectl --timestamps (nanoseconds, Z) before a tqdm label: no journald.
        (
            "2026-11-30T03:08:00.000000000Z Processed prompts:   0%|  | 0/10",
            "timestamp",
            "Processed prompts:   0%|  | 0/10",
        ),
        ("2026-11-30T03:08:00Z Loading weights: took 3 s", "timestamp", "Loading weights: took 3 s"),
        # journalctl -o short-iso-precise of a process with no PID in its identifier.
        ("2026-11-30T03:08:00.123456+0000 gpu-node-3 kernel: NVRM: Xid 79", "journald-iso", "NVRM: Xid 79"),
        ("2026-11-30T03:08:00+00:00 gpu-node-3 vllm[4127]: up", "journald-iso", "up"),
    ],
)
def test_journald_short_iso_without_a_pid_needs_journald_time(line, wrapper, text):
    (rec,) = Envelopes().unwrap("t", 1, line)
    assert (rec.wrapper, rec.text) == (wrapper, text)


# --- an application's layout inside vLLM's process prefix keeps the record's level ---------

#: Formatters a vLLM process's logger may be given (``VLLM_LOGGING_CONFIG_PATH``, a harness
#: that installs its own handler), vLLM's process prefix still outside: (name, format).
IN_PROCESS = [
    ("python-asctime-pid-file", lambda proc, lvl, f, msg: f"{proc} 2024-12-19 10:29:13 {lvl} 56542 [{f}] {msg}"),
    ("rich", lambda proc, lvl, f, msg: f"{proc} [05/01/24 10:29:13] {lvl:<8} {msg:<90}   {f}"),
    ("loguru", lambda proc, lvl, f, msg: f"{proc} 2024-12-19 10:29:13.123 | {lvl:<8} | vllm.x:f:1 - {msg}"),
    ("python-classic", lambda proc, lvl, f, msg: f"{proc} 2024-12-19 10:29:13,123 - vllm.x - {lvl} - {msg}"),
]

#: Cut ERROR records nothing in the catalog explains, each from another vLLM process.
CUT_ERRORS = [
    ("(RayWorkerWrapper pid=206994, ip=192.0.2.25)", "worker_base.py:620", "Error executing metho"),
    ("(EngineCore_DP0 pid=77)", "core.py:700", "EngineCore failed to sta"),
    ("(VllmWorker rank=1 pid=9)", "multiproc_executor.py:470", "WorkerProc hit an excep"),
]


@pytest.mark.parametrize("proc,file,msg", CUT_ERRORS, ids=[c[2] for c in CUT_ERRORS])
@pytest.mark.parametrize("name,fmt", IN_PROCESS, ids=[n for n, _ in IN_PROCESS])
def test_a_cut_error_record_stays_an_error_in_any_layout(name, fmt, proc, file, msg):
    import io

    from vllm_doctor.pipeline import build_verdict, diagnose_input
    from vllm_doctor.sources import Source

    healthy = fixture_text("r019")

    def verdict(last):
        data = "\n".join(healthy + [last]) + "\n"
        v = build_verdict(diagnose_input(Source("x.log", io.BytesIO(data.encode()))))
        return v.primary_class, [f.facts.get("unexplained_errors") for f in v.findings if f.class_id == "unknown"]

    bare = verdict(f"{proc} ERROR 03-27 10:29:13 [{file}] {msg}")
    assert bare == ("unknown", [1])
    assert verdict(fmt(proc, "ERROR", file, msg)) == bare


# --- records glued after padding (a terminal copy that lost its newlines) ------------------


def glued(lines, width=None):
    """``lines`` as a terminal copy gives them: each padded to the pane's width (at least 8
    spaces after the longest), no newline between them."""
    width = width or max(len(line) for line in lines) + 8
    return "".join(line.ljust(width) for line in lines).rstrip()


#: Lines padding cannot tell apart from the line before (a caret marker, a bare label).
_NOT_A_START = ("^", "Process ")


def startable(lines):
    return [line for line in lines if line.strip() and not line.lstrip().startswith(_NOT_A_START)]


@pytest.mark.parametrize("log", ["s002", "x007", "t020"])
@pytest.mark.parametrize("outer_name,outer", OUTER, ids=[n for n, _ in OUTER])
def test_records_glued_after_padding_are_split(outer_name, outer, log):
    lines = startable(fixture_text(log))
    head = [outer(i, line) for i, line in enumerate(fixture_text("r019")[:12])]  # a learned wrapper is learned
    n = len(head)
    want = texts(head + [outer(n + i, line) for i, line in enumerate(lines)])
    assert texts(head + [outer(n, glued(lines))]) == want


def test_h003_terminal_copy_splits_into_its_three_records():
    line = fixture_text("h003")[4]
    recs = Envelopes().unwrap("t", 5, line)
    assert [(r.level, r.text[:40]) for r in recs] == [
        (None, "HIP out of memory. Tried to allocate 64."),
        ("ERROR", "Traceback (most recent call last):"),
        ("ERROR", '  File "/opt/torchenv/lib/python3.12/sit'),
    ]
    assert recs[0].text.endswith("#environment-variables)") and recs[0].trailing_space


@pytest.mark.parametrize("log", ["s002", "x007"])
def test_a_padded_terminal_copy_gets_the_verdict_of_its_lines(log):
    import io

    from vllm_doctor.pipeline import build_verdict, diagnose_input
    from vllm_doctor.sources import Source

    def verdict(text):
        v = build_verdict(diagnose_input(Source("x.log", io.BytesIO(text.encode()))))
        return v.primary_class, sorted((f.class_id, sorted(f.facts.items())) for f in v.findings)

    lines = startable(fixture_text(log))
    assert verdict(glued(lines) + "\n") == verdict("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "line",
    [
        # Padding inside a message, or before what starts no record, splits nothing.
        "sudo docker run -it --shm-size=4g --device=/dev/kfd     --group-add video         -p 8000:8000",
        "Loading safetensors checkpoint shards: 100% Completed |          | 1/1 [00:00<00:00]",
        "[05/01/24 10:00:07] INFO     Loading weights took 0.15 seconds                      default_loader.py:280",
        "        INFO     indented rich line                                  x.py:1",
    ],
)
def test_padding_alone_splits_nothing(line):
    assert len(Envelopes().unwrap("t", 1, line)) == 1


# --- the pre-filtered path reads stacked wrappers as reading every line does -------------


def _wrapper_names():
    import test_formats

    return [w.__name__ for w in test_formats.WRAPPERS]


@pytest.mark.parametrize("wrapper", _wrapper_names())
def test_the_fast_path_reads_wrapped_logs_as_the_plain_path(wrapper):
    """Every corpus log under every wrapper of test_formats: the pre-filtered path and the
    plain one give the same verdict (s030 under rich_handler / app_logging joined an
    application's next record onto the one before on the plain path only; h019 under aws
    logs tail glued the stream name into the command)."""
    import io

    import test_formats
    from conftest import fixture_path, load_manifest

    from vllm_doctor.pipeline import build_verdict, diagnose_input, diagnose_source
    from vllm_doctor.sources import Source, read_lines

    def comparable(results):
        d = build_verdict(results).to_dict()
        for s in d["sources"]:
            s.pop("records"), s.pop("joined")  # fewer records examined on the fast path, by design
        return d

    wrap = getattr(test_formats, wrapper)
    differ = []
    for case in load_manifest():
        data = test_formats.wrapped(fixture_path(case["file"]), wrap)
        fast = comparable(diagnose_input(Source("x.log", io.BytesIO(data))))
        slow = comparable(diagnose_source("x.log", read_lines(Source("x.log", io.BytesIO(data)))))
        if fast != slow:
            differ.append(case["file"])
    assert differ == []


# --- what the wrap join must not take -------------------------------------------------------

LONG_APP = "Using FlashInfer backend, with a message long enough to look cut by a terminal at width"


@pytest.mark.parametrize(
    "fmt",
    [
        lambda msg, f: f"2024-12-19 14:03:40 INFO 56542 [{f}] {msg}",
        lambda msg, f: f"[05/01/24 14:03:40] INFO     {msg:<100}   {f}",
        lambda msg, f: f"2024-12-19 14:03:40.123 | INFO     | vllm.x:f:1 - {msg}",
    ],
    ids=["asctime-pid-file", "rich", "loguru"],
)
def test_an_application_record_naming_its_call_site_is_no_continuation(fmt):
    recs = read(
        [fmt(LONG_APP, "cuda.py:225"), fmt("rank 0 in world size 1 is assigned as DP rank 0", "parallel_state.py:957")]
    )
    assert [r.continued for r in recs] == [0, 0]


def test_a_launcher_relaying_lines_without_a_call_site_still_joins_a_cut_line():
    # lm-eval's "- name - LEVEL - " carries no call site: a cut line under it is still joined.
    recs = read(
        [
            f"2024-05-01 10:00:00,123 - lm_eval.models.vllm - INFO - {CUT}",
            f"2024-05-01 10:00:00,123 - lm_eval.models.vllm - INFO - {REST}",
        ]
    )
    assert [r.continued for r in recs] == [1]


@pytest.mark.parametrize("prefix", ["vllm/vllm/0f3c9a7e2b1d4e5f ", "worker-node-7 ", "gpu-node-3.example.org "])
def test_a_line_with_the_unknown_prefix_of_its_record_is_no_continuation(prefix):
    # Too few lines to learn the prefix: a line that begins as its record began is a line of
    # its own, not the rest of a cut one.
    first = prefix + "`python -m vllm.entrypoints.openai.api_server --model /m --max-model-len=512 --dtype=float`"
    recs = read([first, prefix + "errors: "])
    assert [r.continued for r in recs] == [0, 0]
    assert [r.continued for r in read([first, "errors: and the rest of it"])] == [1]


def test_aws_logs_tail_of_a_quoted_paste_is_read_as_cloudwatch():
    bare = fixture_text("h019")
    lines = [f"2026-11-30T03:08:0{i}.000000+00:00 vllm/vllm/0f3c9a7e {line}".rstrip() for i, line in enumerate(bare)]
    recs = read(lines)
    assert {(r.wrapper, r.unit) for r in recs} == {("cloudwatch", "vllm/vllm/0f3c9a7e")}
    assert len(recs) == len(read(bare)) and not any("0f3c9a7e" in r.text for r in recs)  # no stream glued in


# --- the limits, pinned --------------------------------------------------------------------


def test_padding_min_is_where_a_glued_record_starts():
    from vllm_doctor.envelopes import PADDING_MIN

    record = "ERROR 07-04 14:53:23 [engine.py:458] Traceback (most recent call last):"
    head = "HIP out of memory. Tried to allocate 64.00 MiB."
    assert PADDING_MIN == 8
    assert len(Envelopes().unwrap("t", 1, head + " " * PADDING_MIN + "Traceback (most recent call last):")) == 2
    assert len(Envelopes().unwrap("t", 1, head + " " * (PADDING_MIN - 1) + "Traceback (most recent call last):")) == 1
    assert len(Envelopes().unwrap("t", 1, head + " " + record)) == 2  # vLLM's record prefix: any glue


def test_max_layers_bounds_the_stack():
    from vllm_doctor.envelopes import MAX_LAYERS

    assert MAX_LAYERS == 4
    rec_line = "(EngineCore_DP0 pid=7) INFO 11-30 03:08:00 [core.py:1] Waiting for init message"

    # A time stamp > "vllm/job/0f3c " (learned) > "worker-3 | " (compose) > "[time] " > "time "
    # > the record: the layers beneath the outer wrapper are peeled; past MAX_LAYERS the rest
    # stays in the text (the glued-record split still finds vLLM's record after it).
    def lines(extra):
        return [
            f"2026-11-30T03:08:0{i}.000000+00:00 vllm/job/0f3c worker-3 | [2026-11-30 03:08:0{i}] "
            f"2026-11-30 03:08:0{i} {extra}{rec_line}"
            for i in range(4)
        ]

    assert {r.text for r in read(lines(""))} == {"Waiting for init message"}
    deep = "2026-11-30T03:08:00Z " * (MAX_LAYERS + 1)
    assert any(r.text.startswith("2026-11-30T03:08:00Z") for r in read(lines(deep)))


def test_same_lead_min_is_the_shortest_shared_prefix_word():
    from vllm_doctor.reassemble import SAME_LEAD_MIN

    assert SAME_LEAD_MIN == 8
    tail = " `python -m vllm.entrypoints.openai.api_server --model /m --max-model-len=512 --dtype=float`"
    short, long_ = "a" * (SAME_LEAD_MIN - 1), "a" * SAME_LEAD_MIN
    assert [r.continued for r in read([short + tail, short + " rest"])] == [1]  # a word, not a prefix
    assert [r.continued for r in read([long_ + tail, long_ + " rest"])] == [0, 0]


def test_max_anchor_bounds_how_far_past_max_prefix_an_anchor_may_end():
    from vllm_doctor.signatures import MAX_ANCHOR, MAX_PREFIX, find_prefix

    assert (MAX_PREFIX, MAX_ANCHOR) == (64, 256)
    prefix = "p" * (MAX_PREFIX - 1) + " "

    def header(n):  # a vLLM record prefix of n characters
        return "INFO 11-30 03:08:00 [" + "d/" * ((n - 28) // 2) + "x.py:1] "

    assert find_prefix(prefix + header(MAX_ANCHOR - 8) + "m") == (prefix, True)
    assert find_prefix(prefix + header(MAX_ANCHOR + 8) + "m") is None
