"""Secrets and personal data never reach a verdict; what the diagnosis needs stays."""

import json

import pytest
from click.testing import CliRunner

from vllm_doctor.cli import cli as main
from vllm_doctor.redact import redact_text

SECRETS = [
    (
        "non-default args: {'model': 'm', 'api_key': 'sk-abcdefghijklmnop1234'}",
        "sk-abcdefghijklmnop1234",
        "'api_key': '<redacted>'",
    ),
    (
        "args: Namespace(hf_token='hf_AbCdEfGhIjKlMnOpQrStUv', port=8000)",
        "hf_AbCdEfGhIjKlMnOpQrStUv",
        "hf_token='<redacted>'",
    ),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9", "Bearer <redacted>"),
    ("token hf_ZZZZZZZZZZZZZZZZZZZZZZ in env", "hf_ZZZZZZZZZZZZZZZZZZZZZZ", "hf_<redacted>"),
    ("vllm serve m --api-key s3cr3t-value", "s3cr3t-value", "--api-key <redacted>"),
    ("contact alice.smith+ops@example.com now", "alice.smith+ops@example.com", "<email>"),
    ('INFO:     203.0.113.45:51408 - "POST /v1/chat/completions HTTP/1.1" 200 OK', "203.0.113.45", "<ip>:51408"),
    ("peer 2001:db8:85a3::8a2e:370:7334 connected", "2001:db8:85a3::8a2e:370:7334", "<ip>"),
    ('File "/home/alice/venv/lib/python3.12/site-packages/vllm/x.py", line 3', "alice", "/home/<user>/venv"),
    ("C:\\Users\\bob\\models\\x", "bob", "C:\\Users\\<user>\\models"),
    (
        "Received request 1a2b: prompt: 'my SSN is 123-45-6789, Tried to allocate', params: x",
        "123-45-6789",
        "prompt: '<prompt redacted>'",
    ),
]


@pytest.mark.parametrize("text,secret,expected", SECRETS)
def test_secret_removed(text, secret, expected):
    out = redact_text(text)
    assert secret not in out
    assert expected in out


@pytest.mark.parametrize(
    "text",
    [
        "vLLM API server version 0.10.2.dev378+g4d7fe40fc.d20250829",
        "Initializing a V1 LLM engine (v0.10.1.1) with config: model='Qwen/Qwen2.5-7B'",
        "CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free.",
        "INFO 08-20 10:18:39 [gpu_worker.py:298] Available KV cache memory: 25.91 GiB",
        "Free memory on device cuda:1 (19.77/22.05 GiB) on startup",
        "12:41:43.884747188 ProcessGroupNCCL.cpp:1553",
    ],
)
def test_diagnostic_text_kept(text):
    assert redact_text(text) == text


def test_verdicts_hold_no_secret_and_keep_the_diagnosis(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(
        "(APIServer pid=1) INFO 08-20 10:00:00 [utils.py:328] non-default args: {'model': '/home/alice/models/Llama-3.1-8B', "
        "'api_key': 'sk-live-0123456789abcdef', 'hf_token': 'hf_abcdefghijklmnopqrstu', 'max_model_len': 131072}\n"
        "(APIServer pid=1) INFO 08-20 10:00:01 [logger.py:49] Received request chatcmpl-1: prompt: 'Email me at bob@corp.example', params: x\n"
        '(APIServer pid=1) INFO:     198.51.100.7:40000 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        "(APIServer pid=1) INFO 08-20 10:00:02 [api.py:1] Authorization: Bearer abcdefghijklmnop.qrstuvwx\n"
        "(EngineCore_DP0 pid=5) ERROR 08-20 10:00:03 [core.py:700] ValueError: To serve at least one request with the model's "
        "max seq len (131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache memory (2.0 GiB). "
        "Based on the available memory, the estimated maximum model length is 16384. Try increasing\n"
    )
    secrets = [
        "sk-live-0123456789abcdef",
        "hf_abcdefghijklmnopqrstu",
        "alice",
        "bob@corp.example",
        "198.51.100.7",
        "abcdefghijklmnop.qrstuvwx",
        "Email me",
    ]
    for fmt in ("text", "markdown", "json"):
        r = CliRunner().invoke(main, ["diagnose", "-f", fmt, str(log)])
        assert r.exit_code == 1
        for s in secrets:
            assert s not in r.output, (fmt, s)
        assert "kv_cache_capacity" in r.output
    d = json.loads(CliRunner().invoke(main, ["diagnose", "-f", "json", str(log)]).output)
    assert d["primary_class"] == "kv_cache_capacity"
    assert "--max-model-len 16384" in [r["flag"] for f in d["findings"] for r in f["remedies"]]
    raw = CliRunner().invoke(main, ["diagnose", "-f", "json", "--no-redact", str(log)]).output
    assert "sk-live-0123456789abcdef" in raw
