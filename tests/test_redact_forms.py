"""Secrets in the forms break-it found leaking: a key and its value separated by spaces alone,
and fullwidth (or other compatibility) characters, matched as NFKC reads them and printed in
the original characters with the secret replaced."""

import json
import subprocess
import sys
import unicodedata

import pytest

from vllm_doctor.redact import redact_secrets, redact_text


@pytest.mark.parametrize(
    "text,redacted",
    [
        ("HF_TOKEN hf_xxx", "HF_TOKEN <redacted>"),
        ("HF_TOKEN hf_short1 then", "HF_TOKEN <redacted> then"),
        ("HF_TOKEN= hf_xxx", "HF_TOKEN= <redacted>"),
        ("ENV HF_TOKEN abc123secret", "ENV HF_TOKEN <redacted>"),
        ("setenv OPENAI_API_KEY sk-abc", "setenv OPENAI_API_KEY <redacted>"),
        ("HUGGING_FACE_HUB_TOKEN\tQx81bb20z", "HUGGING_FACE_HUB_TOKEN\t<redacted>"),
        ("AWS_SECRET_ACCESS_KEY  wJalrXUtnFEMI/K7MDENG", "AWS_SECRET_ACCESS_KEY  <redacted>"),
        # a token with its own prefix keeps it, as without the key
        ("HF_TOKEN hf_abcdefghijklmnopqrstu", "HF_TOKEN hf_<redacted>"),
        # breakit6: a shell word's escaped space is part of the value
        ("export VLLM_API_KEY=alpha\\ bravoLEAK x", "export VLLM_API_KEY=<redacted> x"),
        ("VLLM_API_KEY=a\\ b\\ c vllm serve m", "VLLM_API_KEY=<redacted> vllm serve m"),
    ],
)
def test_a_secret_env_key_and_its_value_apart_by_spaces(text, redacted):
    assert redact_text(text) == redacted
    assert redact_secrets(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "HF_TOKEN is not set",
        "HF_TOKEN environment variable",
        "set HF_TOKEN to your token",
        "MAX TOKEN 4096",
        "TOKEN 4096",
        "NUM_TOKENS 4096",
        "max_num_batched_tokens 8192",
    ],
)
def test_prose_and_counts_after_a_key_word_stay(text):
    assert redact_text(text) == text


@pytest.mark.parametrize(
    "text,redacted",
    [
        ("ｈｆ＿abcdefghijklmnopqrstuvwx", "ｈｆ＿<redacted>"),
        ("token ｈｆ_ABCDEFGHIJKLMNOPQRS12 end", "token ｈｆ_<redacted> end"),
        ("ＨＦ_ＴＯＫＥＮ=ｓｅｃｒｅｔ１２３ rest", "ＨＦ_ＴＯＫＥＮ=<redacted> rest"),
        ("ＨＦ_ＴＯＫＥＮ ｓｅｃｒｅｔ１２３ rest", "ＨＦ_ＴＯＫＥＮ <redacted> rest"),
        ("api_key： secret123", "api_key： <redacted>"),
        ("sk－abcdefghijklmnopqrstu", "sk－<redacted>"),
        ("mail ａｌｉｃｅ＠ｅｘａｍｐｌｅ．ｃｏｍ now", "mail <email> now"),
        # characters that expand under NFKC (ﬁ -> fi, ½ -> 1⁄2) around a secret stay as they were
        ("ﬁle ½ µs ｈｆ＿abcdefghijklmnopqrstuvwx ok", "ﬁle ½ µs ｈｆ＿<redacted> ok"),
    ],
)
def test_compatibility_forms_are_matched_as_nfkc_and_printed_as_written(text, redacted):
    out = redact_text(text)
    assert out == redacted
    assert "abcdefghij" not in unicodedata.normalize("NFKC", out).lower()


@pytest.mark.parametrize("text", ["plain ｆｕｌｌｗｉｄｔｈ text", "ＧＰＵ ０ ｈａｓ 24 GiB", "ﬁ ½ ™"])
def test_compatibility_forms_without_a_secret_are_unchanged(text):
    assert redact_text(text) == text


def test_the_verdict_of_a_log_with_a_fullwidth_token_holds_no_copy_of_it(tmp_path):
    log = tmp_path / "fw.log"
    log.write_text(
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.10.0\n"
        "ERROR 01-01 00:00:01 [core.py:1] EngineCore failed to start.\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "ValueError: cannot use token ｈｆ＿abcdefghijklmnopqrstuvwx for ENV HF_TOKEN abc123secret\n",
        encoding="utf-8",
    )
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-f", "json", str(log)], capture_output=True, text=True
    )
    v = json.loads(p.stdout)
    assert v["primary_class"] == "other"
    shown = unicodedata.normalize("NFKC", json.dumps(v, ensure_ascii=False))
    assert "abcdefghij" not in shown and "abc123secret" not in shown
    assert v["title"].endswith("ValueError: cannot use token ｈｆ＿<redacted> for ENV HF_TOKEN <redacted>")
