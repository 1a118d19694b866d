"""Chunks scanned apart (in worker processes) give the serial verdict (issue 15)."""

import os

import pytest
from conftest import comparable, fixture_path, load_manifest, marked_known, serial

from vllm_doctor import chunks
from vllm_doctor.pipeline import _read_candidates, build_verdict, diagnose_input, diagnose_source
from vllm_doctor.sources import Source, read_lines

CASES = load_manifest()
#: Logs whose chunked reading differs from the serial one (being fixed, issue 15): hunt9 v10, a
#: Ray OOM-kill message hard-wrapped at 117 columns under CloudWatch's "#033[" escapes, whose
#: wrapped halves are joined only when the line before the pre-filter's hit is read too.
KNOWN_WRONG_CHUNKED = {"v10-cloudwatch-033-raylet-host-oom-killed-workers-hard-wrapped-tp4.log"}


def chunked(path, chunk, in_worker):
    """The chunk scanner over tiny chunks; each chunk scanned as a worker would
    (``in_worker``) or read here hit by hit (a dense chunk)."""
    path = str(path)
    size = os.path.getsize(path)
    ranges = chunks.plan(path, size, chunk)
    results = ((chunks.scan(path, s, e) if in_worker else None, (s, e)) for s, e in ranges)
    return comparable(_read_candidates(path, "auto", chunks.ChunkScanner(path, results)))


@pytest.mark.parametrize("case", marked_known(CASES, KNOWN_WRONG_CHUNKED))
def test_tiny_chunks_give_the_serial_verdict(case):
    path = fixture_path(case["file"])
    want = serial(path)
    assert chunked(path, 211, in_worker=True) == want
    assert chunked(path, 97, in_worker=False) == want


def test_chunks_start_at_line_starts_and_cover_the_file(tmp_path):
    log = tmp_path / "x.log"
    data = b"".join(b"line %d %s\n" % (i, b"x" * (i % 50)) for i in range(500)) + b"no newline at the end"
    log.write_bytes(data)
    ranges = chunks.plan(str(log), len(data), 333)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(data[s - 1 : s] == b"\n" for s, _ in ranges[1:])
    assert sum(chunks.scan(str(log), s, e)[0] for s, e in ranges) == 501


def test_a_dense_chunk_is_left_to_the_parent(tmp_path):
    log = tmp_path / "storm.log"
    line = b'INFO:     10.0.0.1:4000 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n'
    log.write_bytes(line * 1000)
    assert chunks.scan(str(log), 0, len(line) * 1000, budget=10_000) is None
    lines, hits = chunks.scan(str(log), 0, len(line) * 1000)
    assert lines == 1000 and len(hits) == 1000 and all(h[3] for h in hits)


def test_worker_processes_give_the_serial_verdict(tmp_path, monkeypatch):
    # A real pool over a file made of corpus logs, cut into chunks that split their records.
    parts = [fixture_path(c["file"]).read_bytes() for c in CASES[:12]]
    log = tmp_path / "many.log"
    log.write_bytes(b"".join(parts))
    monkeypatch.setattr(chunks, "MIN_BYTES", 1)
    monkeypatch.setattr(chunks, "CHUNK", 4096)
    with open(log, "rb") as fh:
        src = Source(str(log), fh)
        assert chunks.chunkable(src) == os.path.getsize(log)
        got = comparable(diagnose_input(src, chunks=True))
    assert got == serial(log)
    assert got["sources"][0]["lines"] == sum(p.count(b"\n") for p in parts)


def test_a_broken_pool_falls_back_to_reading_here(tmp_path):
    class Broken:
        def submit(self, *a):
            from concurrent.futures.process import BrokenProcessPool

            raise BrokenProcessPool("a worker died")

    path = fixture_path(CASES[0]["file"])
    size = os.path.getsize(path)
    args = [(str(path), s, e, 200 if s == 0 else 0) for s, e in chunks.plan(str(path), size, 97)]
    results = chunks._ordered(Broken(), args, 4)
    got = comparable(_read_candidates(str(path), "auto", chunks.ChunkScanner(str(path), results)))
    assert got == serial(path)


def test_the_first_chunks_are_read_here_while_the_workers_start():
    class Counting:
        def __init__(self):
            self.submitted = []

        def submit(self, fn, *args):
            from concurrent.futures import Future

            self.submitted.append(args[1])
            f = Future()
            f.set_result(fn(*args))
            return f

    path = max((fixture_path(c["file"]) for c in CASES), key=os.path.getsize)
    size = os.path.getsize(path)
    ranges = chunks.plan(str(path), size, 211)
    assert len(ranges) > 3
    ex = Counting()
    results = chunks._ordered(ex, [(str(path), s, e) for s, e in ranges], 2, here=chunks.HERE)
    first = next(results)
    # the next chunks were handed to the workers before this process reads the first one
    assert first == (None, ranges[0]) and ex.submitted == [ranges[1][0], ranges[2][0]]
    rest = list(results)
    assert [r[1] for r in rest] == ranges[1:] and all(r[0] is not None for r in rest)
    assert ranges[0][0] not in ex.submitted
    results = chunks._ordered(_Here(), [(str(path), s, e) for s, e in ranges], 2, here=chunks.HERE)
    got = comparable(_read_candidates(str(path), "auto", chunks.ChunkScanner(str(path), results)))
    assert got == serial(path)


BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "generate.py")


@pytest.mark.parametrize("shape,mib", [("busy", 3), ("storm", 0.5), ("restarts", 0.5), ("traceback", 0.5)])
def test_generated_logs_give_the_serial_verdict_on_every_path(tmp_path, shape, mib):
    import subprocess
    import sys

    log = tmp_path / f"{shape}.log"
    subprocess.run([sys.executable, BENCH, str(log), str(mib), "--shape", shape], check=True)
    want = serial(log)
    assert chunked(log, 64 * 1024, in_worker=True) == want
    with open(log, "rb") as fh:
        assert comparable(diagnose_input(Source(str(log), fh))) == want
    if shape == "busy":
        assert want["primary_class"] == "runtime_oom"


@pytest.mark.parametrize("shape,mib", [("busy", 3), ("storm", 0.5), ("empty", 0.5)])
def test_a_real_pool_over_generated_logs_gives_the_serial_verdict(tmp_path, monkeypatch, shape, mib):
    # The command line's own path: a pool of workers, the first chunk read here while they
    # start (chunks.HERE), the rest scanned by them; chunks small enough that records, the
    # fold's cycles and the saturation episode cross their edges.
    import subprocess
    import sys

    log = tmp_path / f"{shape}.log"
    subprocess.run([sys.executable, BENCH, str(log), str(mib), "--shape", shape], check=True)
    monkeypatch.setattr(chunks, "MIN_BYTES", 1)
    monkeypatch.setattr(chunks, "CHUNK", 64 * 1024)
    with open(log, "rb") as fh:
        got = comparable(diagnose_input(Source(str(log), fh), chunks=True))
    assert got == serial(log)
    assert len(chunks.plan(str(log), os.path.getsize(log), chunks.CHUNK)) > chunks.HERE + 1


class _Here:
    """An executor that runs each call at once, in this process (for the plan logic)."""

    def submit(self, fn, *args):
        from concurrent.futures import Future

        f = Future()
        f.set_result(fn(*args))
        return f


@pytest.mark.parametrize("case", marked_known(CASES, KNOWN_WRONG_CHUNKED))
def test_windows_planned_elsewhere_give_the_serial_verdict(case):
    import io

    from vllm_doctor import prefilter

    path = fixture_path(case["file"])
    data = path.read_bytes()
    src = Source(str(path), io.BytesIO(data))
    blocks = chunks.planned_windows(src, _Here(), 3, size=131)
    got = comparable(_read_candidates(str(path), "auto", prefilter.BlockScanner(src, blocks=blocks)))
    assert got == serial(path)


def test_a_gzip_log_gated_by_worker_processes_gives_the_serial_verdict(tmp_path, monkeypatch):
    import gzip

    parts = [fixture_path(c["file"]).read_bytes() for c in CASES[:12]]
    plain = tmp_path / "many.log"
    plain.write_bytes(b"".join(parts))
    gz = tmp_path / "many.log.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    from vllm_doctor import pipeline
    from vllm_doctor.sources import open_input

    monkeypatch.setattr(chunks, "COMPRESSED_MIN", 1)
    real = chunks.PooledBlocks
    monkeypatch.setattr(chunks, "PooledBlocks", lambda src, on_block=None: real(src, on_block, size=4096))
    src = open_input(str(gz))
    try:
        got = build_verdict(pipeline.diagnose_input(src, chunks=True)).to_dict()
    finally:
        src.stream.close()
    want = build_verdict(diagnose_source(str(gz), read_lines(open_input(str(gz))))).to_dict()
    for d in (got, want):
        for s in d["sources"]:
            s.pop("records"), s.pop("joined")
    assert got == want and got["sources"][0]["lines"] == sum(p.count(b"\n") for p in parts)
