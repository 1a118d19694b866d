"""The one line reader: same cap and decoding on every path (issues 9, 15, 16)."""

import gzip
import io
import subprocess
import sys

import pytest
from conftest import fixture_path

from vllm_doctor import sources
from vllm_doctor.pipeline import build_verdict, diagnose_input
from vllm_doctor.sources import Decoder, LineCutter, Source, read_lines, windows

KV = "s004-v1-kv-1m-context-oneline.log"
ENCODINGS = [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"), ("utf-32-le", b"\xff\xfe\x00\x00"),
             ("utf-32-be", b"\x00\x00\xfe\xff"), ("utf-8", b"\xef\xbb\xbf")]  # fmt: skip


def verdict(data, prefilter=True):
    d = build_verdict(diagnose_input(Source("x", io.BytesIO(data)), prefilter=prefilter)).to_dict()
    for s in d["sources"]:
        s.pop("records"), s.pop("joined")
    return d


@pytest.mark.parametrize("encoding,bom", ENCODINGS, ids=[e for e, _ in ENCODINGS])
def test_a_log_behind_a_byte_order_mark_reads_as_its_utf8_original(encoding, bom):
    text = fixture_path(KV).read_text(encoding="utf-8")
    want = verdict(text.encode("utf-8"))
    # PowerShell's `>` writes UTF-16LE with a BOM and CRLF line ends.
    data = bom + text.replace("\n", "\r\n").encode(encoding)
    for prefilter in (True, False):
        assert verdict(data, prefilter) == want
    assert want["primary_class"] == "kv_cache_capacity"


def test_the_cli_reads_a_powershell_log(tmp_path):
    log = tmp_path / "ps.log"
    log.write_bytes(b"\xff\xfe" + fixture_path(KV).read_text().replace("\n", "\r\n").encode("utf-16-le"))
    p = subprocess.run([sys.executable, "-m", "vllm_doctor", "diagnose", "-f", "json", str(log)], capture_output=True)
    assert p.returncode == 1 and b'"primary_class": "kv_cache_capacity"' in p.stdout


def test_the_decoder_waits_for_four_bytes_and_splits_characters_across_chunks():
    data = b"\xff\xfe\x00\x00" + "a€\n".encode("utf-32-le")
    dec = Decoder()
    out = b"".join(dec.feed(data[i : i + 1]) for i in range(len(data))) + dec.feed(b"", final=True)
    assert out == "a€\n".encode() and dec.encoding == "utf-32-le"
    assert Decoder().feed(b"ab", final=True) == b"ab"  # too short for a BOM: as it is


def test_the_cutter_keeps_the_first_limit_bytes_of_a_long_line_wherever_it_is_cut():
    line = bytes(range(65, 91)) * 10  # 260 bytes
    data = b"short\n" + line + b"\nlast"
    for size in (1, 7, 64, 1000):
        cut = LineCutter(limit=100)
        blocks = [cut.feed(data[i : i + size]) for i in range(0, len(data), size)] + [cut.end()]
        got = [ln[:100] for ln in b"".join(blocks).split(b"\n")[:-1]]
        assert got == [b"short", line[:100], b"last"], size
        assert cut.held == 0


def test_memory_stays_bounded_on_a_line_without_newlines(monkeypatch):
    monkeypatch.setattr(sources, "LINE_LIMIT", 1000)

    class Endless(io.RawIOBase):  # like /dev/zero, for 64 reads
        reads = 0

        def readable(self):
            return True

        def read1(self, n):
            self.reads += 1
            return b"\0" * n if self.reads <= 64 else b""

    src = Source("zero", Endless())
    blocks = list(windows(src, size=4096))
    assert blocks == [b"\0" * 1000 + b"\n"]  # one line, cut; the rest read past, never held


def test_every_path_cuts_a_line_the_same_way(monkeypatch):
    monkeypatch.setattr(sources, "LINE_LIMIT", 50)
    data = b"x" * 120 + b"\n" + b"ERROR 01-01 00:00:00 [a.py:1] torch.OutOfMemoryError: CUDA out of memory." + b"y" * 99
    plain = [t for _, t in read_lines(Source("x", io.BytesIO(data)))]
    assert plain == ["x" * 50, data[121:171].decode()]
    lib = [t for _, t in sources.iter_text_lines(data.split(b"\n"))]
    assert lib == plain
    assert verdict(data) == verdict(data, prefilter=False)


def test_a_cut_gzip_file_is_read_up_to_the_cut(tmp_path):
    raw = b"".join(b"INFO 01-01 00:00:00 [x.py:1] line %d\n" % i for i in range(20000))
    data = gzip.compress(raw)
    p = tmp_path / "cut.gz"
    p.write_bytes(data[: len(data) // 2])
    src = sources.open_input(str(p))
    lines = list(read_lines(src))
    assert src.truncated and len(lines) > 1000
    assert all(t == f"INFO 01-01 00:00:00 [x.py:1] line {n - 1}" for n, t in lines[:-1])


def test_progress_positions_are_compressed_bytes(tmp_path):
    p = tmp_path / "x.log.gz"
    p.write_bytes(gzip.compress(b"hello\n" * 100000))
    src = sources.open_input(str(p))
    seen = []
    for _ in windows(src, on_read=lambda n: seen.append(src.position())):
        pass
    assert src.size() == p.stat().st_size and seen and seen[-1] == src.size()


@pytest.mark.parametrize("window", [8, 50, 64, 65, 300, 4096])
def test_files_read_in_place_keep_the_same_lines_as_the_stream_reader(tmp_path, monkeypatch, window):
    # spans() reads a plain file without copies; windows() reads a stream: same lines, same cap.
    monkeypatch.setattr(sources, "LINE_LIMIT", 64)
    data = (
        b"\xef\xbb\xbfshort\n" + b"L" * 200 + b"\n\n" + b"m" * 64 + b"\n" + b"n" * 63 + b"\n"
        + b"ValueError: No available memory for the cache blocks. " + b"z" * 300 + b"\ntail without newline " + b"t" * 70
    )  # fmt: skip
    p = tmp_path / "x.log"
    p.write_bytes(data)

    def lines_of(blocks):
        out = []
        for block, end, _ in blocks:
            out.extend(sources.cap(x) for x in block[:end].split(b"\n")[:-1])
        return out

    want = lines_of((b, len(b), -1) for b in windows(Source("x", io.BytesIO(data))))
    with open(p, "rb") as fh:
        got = lines_of(sources.spans(Source(str(p), fh), size=window))
    assert got == want and len(want) == 7 and want[0] == b"short"
    with open(p, "rb") as fh:
        seen = []
        for block, end, off in sources.spans(Source(str(p), fh), size=window):
            if off >= 0:  # where an offset is given, the block is the file's bytes there
                assert data[off : off + end] == block[:end]
            seen.append(end)
    with open(p, "rb") as fh:
        assert verdict(data) == comparable_file(fh)


def comparable_file(fh):
    d = build_verdict(diagnose_input(Source(fh.name, fh))).to_dict()
    for s in d["sources"]:
        s.pop("records"), s.pop("joined")
    d["sources"][0]["name"] = d["sources"][0]["input"] = "x"
    if d.get("primary_source") is not None:
        d["primary_source"] = "x"
    for f in d["findings"]:
        f["source"] = "x"
        for e in f["evidence"]:
            e["source"] = "x"
    for r in d["runs"]:
        r["source"] = "x"
    return d
