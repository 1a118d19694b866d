"""Cycles of repeated lines counted instead of read give the verdict of reading every line
(issue 15's "no slow shapes"; vllm_doctor.repeats)."""

import dataclasses
import enum
import io
import os
import re
import subprocess
import sys
from collections import deque

import pytest
from conftest import comparable, fixture_path, load_manifest, serial

from vllm_doctor import chunks, prefilter, repeats
from vllm_doctor.envelopes import Envelopes
from vllm_doctor.pipeline import _read_candidates, diagnose_input
from vllm_doctor.sources import Source
from vllm_doctor.tracker import FOLDABLE_KINDS, RUN_FOLDABLE_KINDS, SourceTracker

CASES = load_manifest()
BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "generate.py")
#: Repetitions that make a cycle fold: settled, folded for a while, replayed.
REPS = repeats.SETTLE + repeats.REPLAY + 12


def dump(obj, depth=0):
    """Everything a result holds, as plain values (dataclasses, containers, rule observers):
    two paths that read the same input must agree on all of it, not only on the verdict."""
    if depth > 12:
        return "..."
    if isinstance(obj, enum.Enum):
        return repr(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: dump(getattr(obj, f.name), depth + 1) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {repr(k): dump(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, deque)):
        return [dump(v, depth + 1) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(repr(v) for v in obj)
    if isinstance(obj, (str, int, float, bool, type(None))):
        return obj
    if hasattr(obj, "__dict__"):
        return {k: dump(v, depth + 1) for k, v in vars(obj).items() if not callable(v)}
    return repr(obj)


def state(results):
    """Each source's tracker (runs, counters, traceback streams) and summary (but the
    headline class, which building a verdict sets)."""
    out = []
    for r in results:
        t = r.tracker
        summary = dump(r.summary)
        summary.pop("primary_class")
        out.append(
            {
                "runs": dump(t.runs),
                "counters": (t.records, t.recognised, t.seq, t.dropped_runs, t.vllm_seen),
                "streams": dump(list(t.streams.items())),
                "summary": summary,
                "findings": dump(r.findings),
            }
        )
    return out


def read(path, fold=True, block_size=prefilter.BLOCK_SIZE):
    """The pre-filtered path over ``path`` in windows of ``block_size``; the scanner too."""
    with open(path, "rb") as fh:
        scanner = prefilter.BlockScanner(Source(str(path), fh), block_size)
        results = _read_candidates(str(path), "auto", scanner, fold=fold)
    return results, scanner


def verdict(path):
    """:func:`comparable` of the command line's reading of ``path`` (:func:`diagnose_input`,
    the fold on): the pre-filtered path where it applies, else every line (JSON envelopes,
    Markdown escapes, a terminal's hard wrap)."""
    with open(path, "rb") as fh:
        return comparable(diagnose_input(Source(str(path), fh)))


def chunked(path, chunk):
    """The chunk scanner over chunks of ``chunk`` bytes, each read here (dense chunks)."""
    path = str(path)
    ranges = chunks.plan(path, os.path.getsize(path), chunk)
    scanner = chunks.ChunkScanner(path, ((None, r) for r in ranges))
    return _read_candidates(path, "auto", scanner), scanner


_STAMP = re.compile(r"(?<![0-9])([0-9]{2}):([0-9]{2}):([0-9]{2})(?![0-9])")


def vary(line: str, k: int) -> str:
    """``line`` as its ``k``-th repetition prints it: time stamps ``k`` seconds later, an
    access line's client address and port changed (digits of other lengths too)."""
    line = _STAMP.sub(lambda m: f"{m[1]}:{(int(m[2]) + k // 60) % 60:02d}:{(int(m[3]) + k) % 60:02d}", line)
    return repeats._CLIENT.sub(lambda m: f'10.{k % 256}.{k % 7}.{(k * 37) % 100}:{1024 + k * 13} - "', line)


def cycle_log(tmp_path, lines, reps=REPS, head=(), tail=()):
    log = tmp_path / "cycle.log"
    out = list(head)
    for k in range(reps):
        out.extend(vary(line, k) for line in lines)
    out.extend(tail)
    log.write_text("".join(line + "\n" for line in out), encoding="utf-8")
    return log


def generated(tmp_path, shape, mib):
    log = tmp_path / f"{shape}.log"
    subprocess.run([sys.executable, BENCH, str(log), str(mib), "--shape", shape], check=True)
    return log


# -- the generated shapes of issue 15 ------------------------------------------------------


@pytest.mark.parametrize("shape", ["storm", "restarts", "traceback"])
def test_generated_shapes_fold_to_the_verdict_of_reading_every_line(tmp_path, shape):
    log = generated(tmp_path, shape, 2)
    want = serial(log)
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert comparable(got) == want
    assert state(got) == state(plain)  # every counter and run, not only the verdict
    lines = scanner.lines
    assert scanner.fold.folded > 0.85 * lines  # the fast path did the reading (not the settling, the replay)
    small, scanner = read(log, block_size=4096)  # folds that go on across many windows
    assert state(small) == state(plain) and scanner.fold.folded > 0.8 * lines
    dense, scanner = chunked(log, 256 * 1024)  # the chunk path reading dense chunks itself
    assert state(dense) == state(plain) and scanner.fold.folded > 0.8 * lines


def test_a_restart_loop_keeps_its_newest_runs_numbered_as_read(tmp_path):
    log = generated(tmp_path, "restarts", 1)
    got, scanner = read(log)
    tracker = got[0].tracker
    assert scanner.fold.folded > 0
    assert len(tracker.runs) == SourceTracker.MAX_RUNS
    total = len(tracker.runs) + tracker.dropped_runs
    assert [r.index for r in tracker.runs] == list(range(total - SourceTracker.MAX_RUNS + 1, total + 1))
    # The last run's evidence is the last lines' (the very last, "Shutting down", is no candidate).
    assert tracker.runs[-1].end_line == scanner.lines - 1


def test_gzip_windows_planned_elsewhere_fold_the_same(tmp_path):
    log = generated(tmp_path, "storm", 1)
    data = log.read_bytes()
    plain, _ = read(log, fold=False)
    src = Source(str(log), io.BytesIO(data))
    blocks = chunks.planned_windows(src, _Here(), 3, size=64 * 1024)
    scanner = prefilter.BlockScanner(src, blocks=blocks)
    got = _read_candidates(str(log), "auto", scanner)
    assert state(got) == state(plain) and scanner.fold.folded > 0


class _Here:
    def submit(self, fn, *args):
        from concurrent.futures import Future

        f = Future()
        f.set_result(fn(*args))
        return f


# -- cycles made of the corpus's own lines -------------------------------------------------


def _corpus_lines(case):
    text = fixture_path(case["file"]).read_text(encoding="utf-8", errors="replace")
    return [line for line in text.split("\n") if line.strip()]


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_each_corpus_line_repeated_gives_the_verdict_of_reading_every_line(tmp_path, case):
    # Every line of the log printed again and again, with its time stamps moving on: a
    # period-1 cycle of every message, envelope and event kind the corpus holds.
    lines = _corpus_lines(case)[:12]
    log = tmp_path / "stutter.log"
    log.write_text("".join(vary(line, k) + "\n" for line in lines for k in range(REPS)), encoding="utf-8")
    plain, _ = read(log, fold=False)
    got, _ = read(log)
    assert state(got) == state(plain)
    if case["file"] in NOT_THE_FOLD:
        assert verdict(log) != serial(log)  # strict: once fixed, take it off the list
    else:
        assert verdict(log) == serial(log)


#: Stuttered corpus logs whose command-line verdict differs from reading every line for a
#: reason outside the fold (strict). Empty since a wrap width is learned from the first
#: 8 KiB only (envelopes.WRAP_HEAD_BYTES, what the pre-filter's choice sees) and a repeated
#: line is no rest of the one before (k028, 142 copies of a 156-character line).
NOT_THE_FOLD: set = set()


@pytest.mark.parametrize("case", CASES[::3], ids=[c["file"] for c in CASES[::3]])
def test_each_corpus_excerpt_repeated_gives_the_verdict_of_reading_every_line(tmp_path, case):
    # The log's first lines as one cycle (a crash loop printing the same startup and traceback).
    log = cycle_log(tmp_path, _corpus_lines(case)[:9])
    plain, _ = read(log, fold=False)
    got, _ = read(log)
    assert state(got) == state(plain)
    assert verdict(log) == serial(log)


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_each_corpus_logs_foldable_lines_as_one_cycle_give_the_verdict_of_reading_every_line(tmp_path, case):
    # The log's lines that have a shape, as one cycle: failures, frames, configs and facts of
    # every corpus log folded together (most of them fold).
    env = Envelopes()
    lines = [line for line in _corpus_lines(case) if repeats.shape(env, line) is not None][:9]
    log = cycle_log(tmp_path, lines)
    plain, _ = read(log, fold=False)
    got, _ = read(log)
    assert state(got) == state(plain)
    assert verdict(log) == serial(log)


# -- cycles that end, change or break ------------------------------------------------------

ACCESS = '(APIServer pid=1) INFO:     10.0.0.7:40001 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error'
FRAME = (
    '(EngineCore_DP0 pid=77) ERROR 11-30 10:00:00 [core.py:710]   File "/x/vllm/v1/engine/core.py", line 701, in run'
)
CODE = "(EngineCore_DP0 pid=77) ERROR 11-30 10:00:00 [core.py:710]     engine_core.run_busy_loop()"
OOM = (
    "(EngineCore_DP0 pid=77) ERROR 11-30 10:00:09 [core.py:710] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 1.25 GiB. GPU 0 has a total capacity of 23.56 GiB of which 412.00 MiB is free. "
    "Process 4242 has 2.50 GiB memory in use."
)


STARTUP = [
    "(APIServer pid=1) INFO 11-30 10:00:00 [api_server.py:1885] vLLM API server version 0.11.0",
    "(APIServer pid=1) INFO 11-30 10:00:00 [utils.py:328] non-default args: {'model': 'm', 'max_model_len': 32768}",
    "(APIServer pid=1) INFO:     Application startup complete.",
]
TRACEBACK = "(EngineCore_DP0 pid=77) ERROR 11-30 10:00:00 [core.py:710] Traceback (most recent call last):"


def test_a_storm_broken_by_other_lines_folds_again_and_stays_exact(tmp_path):
    middle = [ACCESS.replace("500 Internal", "503 Service")] * 3 + [OOM]
    lines = STARTUP[:]
    for k in range(3 * REPS):
        lines.append(vary(ACCESS, k))
        if k in (REPS, 2 * REPS + 5):
            lines.extend(middle)
    log = tmp_path / "storm.log"
    log.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert state(got) == state(plain) and comparable(got) == serial(log)
    assert scanner.fold.folds >= 2
    http = got[0].tracker.runs[-1].http
    assert http.by_status == {500: 3 * REPS, 503: 6} and http.last_5xx.lineno == len(lines)


def test_an_endless_traceback_ends_in_its_exception_line(tmp_path):
    log = cycle_log(tmp_path, [FRAME, CODE], head=STARTUP + [TRACEBACK], tail=[OOM])
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert state(got) == state(plain) and comparable(got) == serial(log)
    assert scanner.fold.folded > 0
    failure = got[0].tracker.runs[-1].failures[0]
    assert failure.kind == "oom" and failure.lines[0].lineno == len(STARTUP) + 2 * REPS + 2


def test_the_end_of_input_in_the_middle_of_a_cycle(tmp_path):
    lines = [FRAME, CODE, ACCESS]
    log = cycle_log(tmp_path, lines, tail=[vary(FRAME, 7)])  # one line of a cycle begun
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert state(got) == state(plain) and scanner.fold.folded > 0


def test_a_line_that_breaks_a_stage_is_counted_in_every_cycle(tmp_path, monkeypatch):
    # One malformed line never stops the rest: raised on each repetition, counted each time.
    from vllm_doctor.catalog import Catalog

    real = Catalog.recognise

    def recognise(self, rec):
        if "BOOM" in rec.text:
            raise ValueError("malformed")
        return real(self, rec)

    monkeypatch.setattr(Catalog, "recognise", recognise)
    log = cycle_log(tmp_path, [ACCESS, "(APIServer pid=1) ERROR 11-30 10:00:00 [x.py:1] BOOM"])
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert state(got) == state(plain)
    assert got[0].summary.internal_errors == REPS and scanner.fold.folded > 0


def test_pods_interleaved_are_not_folded_across_their_trackers(tmp_path):
    a = "[pod/a/vllm] " + ACCESS
    b = "[pod/b/vllm] " + ACCESS.replace("500 Internal", "502 Bad")
    log = cycle_log(tmp_path, [a, b])
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert state(got) == state(plain) and comparable(got) == serial(log)
    assert scanner.fold.folded == 0


def test_stats_lines_are_never_folded_within_a_run(tmp_path):
    stats = (
        "(APIServer pid=1) INFO 11-30 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 0.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%, "
        "Prefix cache hit rate: 0.0%"
    )
    log = cycle_log(tmp_path, [stats])
    got, scanner = read(log)
    assert scanner.fold.folded == 0 and got[0].tracker.runs[-1].stats.count == REPS
    assert "stats" not in FOLDABLE_KINDS and "stats" in RUN_FOLDABLE_KINDS


# -- shapes --------------------------------------------------------------------------------


def test_a_shape_masks_time_stamps_and_the_client_address_only():
    env = Envelopes()
    s = repeats.shape(env, ACCESS)
    assert s.client == "10.0.0.7:40001"
    assert [ACCESS[a:b] for a, b, _ in s.masks] == ["10", "0", "0", "7", "40001"]
    f = repeats.shape(env, FRAME)
    assert [FRAME[a:b] for a, b, _ in f.masks] == ["11", "30", "10", "00", "00"]  # not pid 77, nor line 701
    rx = re.compile(f.pattern())
    assert rx.fullmatch((vary(FRAME, 3) + "\n").encode())
    assert not rx.fullmatch((FRAME.replace("line 701", "line 702") + "\n").encode())
    assert not rx.fullmatch((FRAME.replace("pid=77", "pid=78") + "\n").encode())
    wide = re.compile(s.pattern())
    assert wide.fullmatch((vary(ACCESS, 300) + "\n").encode())
    assert not wide.fullmatch((ACCESS.replace("500", "503") + "\n").encode())


def test_lines_that_cannot_be_shaped():
    env = Envelopes()
    assert repeats.shape(env, "  a bare continuation line 10:00:00") is None  # no prefix: could continue
    assert repeats.shape(env, "\x1b[0;36m" + FRAME) is None
    assert repeats.shape(env, FRAME + "\r") is None
    assert repeats.shape(env, FRAME + " " + "x" * repeats.LINE_CHARS) is None


def test_a_literal_over_a_masked_digit_makes_the_mask_unsafe():
    text = 'INFO 10:00:00 GET HTTP/1.1" 500'
    digits = [(m.start(), m.end(), 0) for m in re.finditer("[0-9]+", text)]
    assert repeats.masks_safe(text, digits[:3])  # the time
    assert not repeats.masks_safe(text, digits[3:4])  # the "1" of HTTP/1.1: a catalog anchor's digit
    assert not repeats.masks_safe(text, digits[-1:])  # the status: 'HTTP/1.1" 5'


@pytest.mark.parametrize(
    "client", ["127.0.0.1:1", "0.0.0.0:0", "10.0.0.1:8000", "192.168.100.200:65535", "255.255.255.255:5", "1.2.3.4:44"]
)
def test_no_catalog_pattern_reads_an_access_lines_client(client):
    # The fold treats the client address of an access line as inert: the whole catalog must
    # recognise the same events whoever the client is (a pattern that read it fails here).
    from vllm_doctor.catalog import Catalog

    env = Envelopes()
    base = repeats._events_of(env, Catalog(), ACCESS)
    for status in ("500 Internal Server Error", "404 Not Found", "200 OK", "503 Service Unavailable"):
        line = ACCESS.replace("500 Internal Server Error", status)
        want = repeats._events_of(env, Catalog(), line)
        assert repeats._events_of(env, Catalog(), line.replace("10.0.0.7:40001", client)) == want
    assert base and base[0][0] == "access"


def test_the_fold_keeps_its_memory_bounded(tmp_path):
    log = generated(tmp_path, "restarts", 1)
    _, scanner = read(log)
    f = scanner.fold
    assert f.history.maxlen == 2 * repeats.PERIOD_MAX
    assert repeats.SETTLE > SourceTracker.MAX_RUNS and repeats.REPLAY > SourceTracker.MAX_RUNS
    assert (repeats.REPLAY + 1) * repeats.CYCLE_CHARS <= 2 * 2**20


def test_the_command_line_folds_by_default(tmp_path):
    log = generated(tmp_path, "storm", 1)
    with open(log, "rb") as fh:
        assert comparable(diagnose_input(Source(str(log), fh))) == serial(log)


# -- every way a cycle can break, at every position of it --------------------------------


def _generator():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_generate", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()
SHUTDOWN = "(APIServer pid=1) INFO {} [launcher.py:99] Shutting down FastAPI HTTP server."


def restart_cycle(k):
    """The generator's restart loop: one startup and its shutdown, ``k`` x 7 s later."""
    t = 7 * (k + 1)
    return list(GEN.startup(t)) + [SHUTDOWN.format(GEN.stamp(t))]


def traceback_cycle(k):
    """The generator's endless traceback: a frame and its source line (time stamps moving)."""
    return [vary(FRAME, k), vary(CODE, k)]


def storm_cycle(k):
    """The generator's HTTP 500 storm: one access line, its client changing."""
    return [vary(ACCESS, k)]


#: A record with nothing after its prefix, bare (no process: breakit4 item 11's gzip bomb of
#: 100 MB of it took 78 s) and from an engine core.
EMPTY = "ERROR 05-01 10:00:12 [core.py:700] "
EMPTY_ENGINE = "(EngineCore_DP0 pid=77) ERROR 11-30 10:00:00 [core.py:700] "


def empty_cycle(k):
    """One empty ERROR record again and again (no tracker ever opens: no event, no tag)."""
    return [vary(EMPTY, k)]


def empty_engine_cycle(k):
    """An engine core's empty ERROR record again and again, after a startup (a tracker is open)."""
    return [vary(EMPTY_ENGINE, k)]


CYCLES = {
    "restarts": restart_cycle,
    "traceback": traceback_cycle,
    "storm": storm_cycle,
    "empty": empty_cycle,
    "empty-engine": empty_engine_cycle,
}
HEADS = {
    "restarts": [],
    "traceback": STARTUP + [TRACEBACK],
    "storm": STARTUP,
    "empty": [],
    "empty-engine": STARTUP,
}
#: The cycles of one line.
PERIOD_ONE = {"storm", "empty", "empty-engine"}
#: Cycles before the break (settled, folded, replayed) and after it (folded again).
BEFORE = repeats.SETTLE + repeats.REPLAY + 9
AFTER = repeats.SETTLE + repeats.REPLAY + 7


def message_digit_changed(line: str) -> str:
    """``line`` with one digit of its message changed (not of its envelope, no time stamp,
    nor of an access line's client, which the fold reads as inert); a message without such
    digits gets one letter changed instead."""
    rec = Envelopes().unwrap("", 1, line)[0]
    cut = len(line) - len(rec.text)
    masked = {i for a, b, _ in repeats.shape(Envelopes(), line).masks for i in range(a, b)}
    digits = [i for i in range(cut, len(line)) if line[i].isdigit() and i not in masked]
    if digits:
        i = digits[len(digits) // 2]
        return line[:i] + str((int(line[i]) + 1) % 10) + line[i + 1 :]
    letters = [i for i in range(cut, len(line)) if line[i].isalpha()]
    if not letters:  # an empty message: one gets a word
        return line + "x"
    i = letters[-1]
    return line[:i] + ("b" if line[i] != "b" else "c") + line[i + 1 :]


BREAKS = {
    "digit": lambda cyc, i: cyc[:i] + [message_digit_changed(cyc[i])] + cyc[i + 1 :],
    "dropped": lambda cyc, i: cyc[:i] + cyc[i + 1 :],
    "oom-before": lambda cyc, i: cyc[:i] + [OOM] + cyc[i:],
    "plain-before": lambda cyc, i: cyc[:i] + ["a line no catalog literal is in"] + cyc[i:],
    "continuation-after": lambda cyc, i: cyc[: i + 1] + ["tail of the line above, cut by a wrap"] + cyc[i + 1 :],
}


def broken_log(tmp_path, shape, position, how, end=False):
    """``BEFORE`` cycles of ``shape``, then one broken at ``position`` by ``how`` (or, with
    ``end``, the input ending there), then ``AFTER`` cycles and an OOM."""
    make = CYCLES[shape]
    lines = list(HEADS[shape])
    for k in range(BEFORE):
        lines.extend(make(k))
    if end:
        lines.extend(make(BEFORE)[:position])
    else:
        lines.extend(BREAKS[how](make(BEFORE), position))
        for k in range(BEFORE + 1, BEFORE + 1 + AFTER):
            lines.extend(make(k))
        lines.append(OOM)
    log = tmp_path / f"{shape}-{how}-{position}.log"
    log.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return log


POSITIONS = [(shape, i) for shape, make in CYCLES.items() for i in range(len(make(0)))]


@pytest.mark.parametrize("how", sorted(BREAKS))
@pytest.mark.parametrize("shape,position", POSITIONS, ids=[f"{s}-{i}" for s, i in POSITIONS])
def test_a_cycle_broken_at_each_position_folds_to_the_state_of_reading_every_line(tmp_path, shape, position, how):
    log = broken_log(tmp_path, shape, position, how)
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert state(got) == state(plain)
    no_break = shape in PERIOD_ONE and how == "dropped"  # a cycle of one line, one fewer: no break
    assert scanner.fold.folded > 0 and (scanner.fold.folds >= 2 or no_break)  # before the break and after
    small, _ = read(log, block_size=4096)
    assert state(small) == state(plain)


@pytest.mark.parametrize("shape,position", POSITIONS, ids=[f"{s}-{i}" for s, i in POSITIONS])
def test_the_input_ending_at_each_position_of_a_cycle(tmp_path, shape, position):
    log = broken_log(tmp_path, shape, position, None, end=True)
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert state(got) == state(plain) and scanner.fold.folded > 0
    assert comparable(got) == serial(log)


@pytest.mark.parametrize("shape", sorted(CYCLES))
def test_a_digit_changed_mid_fold_is_seen_where_it_is(tmp_path, shape):
    # The broken line is read in full, at its own line number: its events are not the cycle's.
    position = len(CYCLES[shape](0)) - 1
    log = broken_log(tmp_path, shape, position, "digit")
    got, _ = read(log)
    assert comparable(got) == serial(log)


# -- under wrappers, compressed, in chunks -------------------------------------------------


def _clock(k: int) -> str:
    return f"{10 + k // 3600 % 10:02d}:{k // 60 % 60:02d}:{k % 60:02d}"


WRAPPERS = {
    "journald": lambda k: f"Nov 30 {_clock(k)} gpu-host vllm[4127]: ",
    "journald-padded-day": lambda k: f"Nov  3 {_clock(k)} gpu-host python3[77]: ",
    # kubectl --timestamps / docker logs -t: fractions of varying length (docker trims zeros)
    "kubectl-timestamps": lambda k: f"2025-11-30T{_clock(k)}.{(k * 7919) % 10 ** (1 + k % 9)}Z ",
    "docker-offset": lambda k: f"2025-11-30T{_clock(k)}.{k % 1000:03d}+02:00 ",
    "compose": lambda k: "vllm-1  | ",
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("shape", sorted(CYCLES))
def test_wrapped_cycles_fold_to_the_state_of_reading_every_line(tmp_path, shape, wrapper):
    bare = broken_log(tmp_path, shape, 0, "digit")
    _, unwrapped = read(bare)
    prefix = WRAPPERS[wrapper]
    log = tmp_path / "wrapped.log"
    lines = bare.read_text(encoding="utf-8").splitlines()
    log.write_text("".join(prefix(k) + line + "\n" for k, line in enumerate(lines)), encoding="utf-8")
    plain, _ = read(log, fold=False)
    got, scanner = read(log)
    assert state(got) == state(plain)
    # The wrapper's time stamps are masked: it folds as much as the bare log.
    assert scanner.fold.folded == unwrapped.fold.folded > 0
    assert comparable(got) == serial(log)


@pytest.mark.parametrize("shape", sorted(CYCLES))
def test_gzip_input_folds_to_the_state_of_reading_every_line(tmp_path, shape):
    import gzip

    log = broken_log(tmp_path, shape, 0, "oom-before")
    gz = tmp_path / "log.gz"
    gz.write_bytes(gzip.compress(log.read_bytes()))
    results = {}
    for fold in (False, True):
        with open(gz, "rb") as fh:
            results[fold] = diagnose_input(Source(str(gz), fh), fold=fold)
    assert state(results[True]) == state(results[False])
    assert comparable(results[True]) == comparable(results[False])


def _mixed_chunks(path, cut):
    """The chunk scanner over [0, cut) read here (a dense chunk) and [cut, end) scanned as a
    worker scans it (its hits handed over): a fold that reaches the end of a dense chunk is
    followed by a chunk the fold never sees."""
    path = str(path)
    size = os.path.getsize(path)
    results = [(None, (0, cut)), (chunks.scan(path, cut, size), (cut, size))]
    scanner = chunks.ChunkScanner(path, iter(results))
    return _read_candidates(path, "auto", scanner), scanner


@pytest.mark.parametrize("phase", [0, 1])
def test_a_fold_ending_with_a_dense_chunk_hands_on_what_the_next_line_needs(tmp_path, phase):
    # A cycle of a candidate and a line that is none (read as the line after it): the fold
    # reaches the chunk's end after either; the next chunk starts with the rest of a wrapped
    # line, which joins the record before it only when that record is the candidate.
    other = "(APIServer pid=1) INFO 11-30 10:00:00 [x.py:1] nothing the catalog knows of"
    lines = list(STARTUP)
    for k in range(BEFORE):
        lines.extend([vary(ACCESS, k), other])
    lines.extend([vary(ACCESS, BEFORE)] if phase else [])
    head = "".join(line + "\n" for line in lines).encode()
    tail = ["tail of the line above, cut by a wrap"] + ["plain words"] * 50 + [OOM]
    log = tmp_path / "mixed.log"
    log.write_bytes(head + "".join(line + "\n" for line in tail).encode())
    plain, _ = read(log, fold=False)
    got, scanner = _mixed_chunks(log, len(head))
    assert scanner.fold.folded > 0
    assert state(got) == state(plain)


# -- the corpus as it is, the switch, follow mode ----------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_each_corpus_log_reads_the_same_with_the_fold_and_without(case):
    path = fixture_path(case["file"])
    plain, off = read(path, fold=False)
    got, _ = read(path)
    assert off.fold is None  # the switch: no fold at all
    assert state(got) == state(plain)


def test_follow_mode_never_folds(tmp_path, monkeypatch):
    # -F reads every line through the reader (vllm_doctor.follow.Follower): no scanner, so
    # no fold. Proved by making a fold impossible to build, and by the verdict of a storm.
    from vllm_doctor import follow

    def no_fold(*a, **kw):
        raise AssertionError("follow mode built a Fold")

    monkeypatch.setattr(repeats, "Fold", no_fold)
    log = broken_log(tmp_path, "storm", 0, "oom-before")
    f = follow.Follower(str(log), "auto", emit=lambda finding: None)
    for line in log.read_text(encoding="utf-8").splitlines():
        f.line(line)
    verdict = f.finish().to_dict()
    for s in verdict["sources"]:
        s.pop("records"), s.pop("joined")
    assert verdict == serial(log)


#: Every field of the tracker's state, as reviewed for the fold: each is in
#: ``SourceTracker.fold_state`` (a counter, or the steady state compared at three cycle ends),
#: or set by the lines replayed (last lines, line numbers) or never by a foldable record
#: (stats series within a run). A field added to any of these classes fails this test until
#: it is reviewed there: a state the fold does not compare could change from cycle to cycle.
REVIEWED_FIELDS = {
    "Run": "command_keys config config_lines consequences dropped_failures end_line engine_hints errors_seen "
    "fact_lines facts failures first_error first_unexplained_error http index markers phase phase_lines "
    "preemption recognised records sibling_tags source stalls start_line start_patterns stats "
    "trainer trainer_line unexplained_errors vllm_pids worker_procs roles process_names prefixed_records opened_by "
    # import_records: a counter, as prefixed_records (fold_state's run counts)
    "import_records "
    # record_engine_hints: a set the first cycle's records fill; a repeated record's file names
    # the same engine again, so a folded cycle would add nothing (remedies3)
    "record_engine_hints "
    # env, env_lines: filled only by env events, a kind not in FOLDABLE_KINDS (fed every cycle)
    "env env_lines "
    "neighbours",
    "Failure": "context_tags data exception kind kinds last_seq lines patterns phase_at repeats seq served_after stream tags "
    "text_hashes",
    "StatsSeries": "access_after_last count engine first intervals_with_preemptions last lines_after_last "
    "max_generation_tps max_running max_swapped max_waiting max_waiting_line observers peak_kv_usage_pct "
    "peak_line preemptions_total prefix_hit_first prefix_hit_last prefix_hit_max recent records_after_last "
    "series series_stride",
    "HttpSummary": "by_bucket by_status first_5xx last_5xx",
    "PreemptionSummary": "first last max_cumulative modes warnings by_process messages",
    "StallLog": "episode longest_resolved signals unfinished",  # unfinished: fold_state steady["stalls"]
    "_Stream": "chained fresh frames last_failure lines logged logged_open open",
}


def test_every_field_of_the_tracker_state_was_reviewed_for_the_fold():
    from vllm_doctor import run, tracker

    classes = [run.Run, run.Failure, run.StatsSeries, run.HttpSummary, run.PreemptionSummary, run.StallLog]
    for cls in classes + [tracker._Stream]:
        got = sorted(f.name for f in dataclasses.fields(cls))
        assert got == sorted(REVIEWED_FIELDS[cls.__name__].split()), cls.__name__
    # The reader's and the catalog's state (compared in Fold._snapshot, steady["reader"]).
    from vllm_doctor.catalog import Catalog
    from vllm_doctor.pipeline import _SourceReader

    assert sorted(vars(Catalog())) == ["timeouts", "unread"]
    assert sorted(vars(_SourceReader("x"))) == sorted(
        # live: set once when following, read only at the end (no fold state)
        # head_prefixed, client, _head_no, _head_client: learned from the head only, before any fold
        "allowed budget catalog current env evicted_sources forced live name orphan_errors reasm select sniffed "
        "summaries trackers head_prefixed client _head_no _head_client".split()
    )
    attrs = sorted(vars(SourceTracker("x")))
    assert attrs == sorted(
        "budget dropped_runs folded_runs observers recognised records runs seq source streams vllm_seen "
        # pending_command: in fold_state's steady; row_labels: grows only as runs open (steady's run count)
        # _client_status, _client_request: set from the head's transcript lines only (pipeline._client_before)
        "owner routed_back _target pending_command row_labels _client_status _client_request pending_env".split()
    )


def test_a_cycle_with_a_number_that_cannot_be_read_is_counted_in_every_cycle(tmp_path):
    # The catalog notes messages whose number it cannot read (Catalog.unread), with a count:
    # a cycle holding one is not folded, so the note counts every repetition.
    fact = (
        "(EngineCore_DP0 pid=77) INFO 11-30 10:00:00 [kv_cache_utils.py:1087] GPU KV cache size: "
        + "9" * 400
        + " tokens"
    )
    log = cycle_log(tmp_path, [ACCESS, fact], head=STARTUP)
    plain, _ = read(log, fold=False)
    got, _ = read(log)
    assert state(got) == state(plain)
    notes = got[0].summary.notes
    assert any(note.startswith(f"{REPS} facts lines not read") for note in notes), notes
