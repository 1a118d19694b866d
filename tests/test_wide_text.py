"""A log in UTF-16 or UTF-32 written without a byte-order mark (Windows tools, iconv -t
UTF-16LE) is decoded, not read as NUL-laced garbage: by path, by pipe, in any chunking."""

import subprocess
import sys

import pytest
from conftest import fixture_path

from vllm_doctor.sources import Decoder, sniff_wide

WIDE = ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
LOG = "s001-llama31-8b-3090-kv-29k.log"


@pytest.mark.parametrize("enc", WIDE)
def test_sniff_names_the_codec_of_text_without_a_bom(enc):
    assert sniff_wide("INFO 01-01 00:00:00 [x.py:1] hello\n".encode(enc)) == enc


@pytest.mark.parametrize(
    "head",
    [b"INFO plain utf-8 text\n", b"\0" * 64, bytes(range(256)), "日本語のログ".encode("utf-8"), b"a\0"],
    ids=["utf8", "zeros", "binary", "cjk-utf8", "too-short"],
)
def test_sniff_leaves_other_bytes_alone(head):
    assert sniff_wide(head) is None


@pytest.mark.parametrize("enc", WIDE)
@pytest.mark.parametrize("step", [1, 3, 4096], ids=["byte-by-byte", "3-bytes", "one-block"])
def test_the_decoder_transcodes_it_whatever_the_chunks(enc, step):
    text = fixture_path(LOG).read_text(encoding="utf-8")
    data = text.encode(enc)
    dec = Decoder()
    out = b"".join(dec.feed(data[i : i + step]) for i in range(0, len(data), step)) + dec.feed(b"", final=True)
    assert dec.encoding == enc and out.decode("utf-8") == text


def test_plain_text_with_a_late_nul_stays_utf8():
    dec = Decoder()
    data = b"INFO first line\n" * 8 + b"a NUL \0 later\n"
    assert dec.feed(data) + dec.feed(b"", final=True) == data and dec.encoding == "utf-8"


@pytest.mark.parametrize("enc", WIDE)
@pytest.mark.parametrize("how", ["path", "pipe"])
def test_the_verdict_is_the_same_as_for_utf8(tmp_path, enc, how):
    wide = tmp_path / f"server.{enc}.log"
    wide.write_bytes(fixture_path(LOG).read_text(encoding="utf-8").encode(enc))
    args = [sys.executable, "-m", "vllm_doctor", "diagnose"]
    if how == "path":
        p = subprocess.run(args + [str(wide)], capture_output=True, text=True)
    else:
        p = subprocess.run(args + ["-"], input=wide.read_bytes(), capture_output=True)
        p.stdout = p.stdout.decode()
    assert p.returncode == 1
    assert p.stdout.startswith("VD101 kv_cache_capacity (critical, high confidence): KV cache too small for")
    assert "max_model_len 29000" in p.stdout
