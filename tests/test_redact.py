"""Secrets and personal data never reach a verdict; what the diagnosis needs stays.

The table below holds every kind of secret issue 16 found leaking, each planted where a log
puts it (an exception message that becomes the title, the evidence and the first remedy; the
model path; a source name), and runs it through every format, batch and ``--follow``, with
``--no-redact`` as the control: there, each secret must show.
"""

import html
import json
import os
import subprocess
import sys

import pytest
import regex
from click.testing import CliRunner

from vllm_doctor.cli import cli as main
from vllm_doctor.redact import Redactor, redact_text, redact_verdict
from vllm_doctor.render import render
from vllm_doctor.verdict import Evidence, Finding, SourceSummary, Verdict

PAD = "request failed while the engine was handling a batch of incoming work, details follow: "  # 86 chars

#: kind -> (message of a startup failure, secrets that must not show)
MESSAGE_KINDS = {
    "aws access key id": (f"{PAD}AKIAIOSFODNN7EXAMPLE rejected", ["IOSFODNN7EXAMPLE"]),
    "aws secret access key": (
        "bad credentials aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ["wJalrXUtnFEMI/K7MDENG"],
    ),
    "aws secret in env form": (
        "AWS_SECRET_ACCESS_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEZ'",
        ["bPxRfiCYEXAMPLEKEZ"],
    ),
    "github ghp": (f"{PAD}ghp_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa01 used", ["Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2"]),
    "github fine-grained pat": (
        "clone with github_pat_11ABCDEFG0aBcDeFgHiJkLmNoPqRsTuVwXyZ_0123456789abcdefghijklmnopqrstuvwxyzABCDE failed",
        ["0aBcDeFgHiJkLmNoPqRsTuVwXyZ"],
    ),
    "jwt without bearer": (
        "bad session eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJxN2Z6In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ["eyJzdWIiOiJxN2Z6In0", "dozjgNryP4J3jVmNHl0w5N"],
    ),
    "pem private key": (
        "cannot load key '-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSj\\n-----END PRIVATE KEY-----'",
        ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"],
    ),
    "s3 presigned url": (
        "GET https://b.s3.amazonaws.com/w.bin?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAQ7EXAMPLE0000000"
        "%2F20250101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Security-Token=FwoGZXIvYXdzEXAMPLETOKEN"
        "&X-Amz-Signature=9f1e2d3c4b5a69788796a5b4c3d2e1f0 403",
        ["9f1e2d3c4b5a69788796a5b4c3d2e1f0", "FwoGZXIvYXdzEXAMPLETOKEN", "Q7EXAMPLE0000000"],
    ),
    "gcs signed url": (
        "GET https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=5a6b7c8d9e0f1a2b3c4d",
        ["5a6b7c8d9e0f1a2b3c4d"],
    ),
    "azure sas": (
        "GET https://acct.blob.core.windows.net/c/m.bin?sv=2022-11-02&sp=r&sig=Zm9vYmFyYmF6cXV4%2Bq%3D 403",
        ["Zm9vYmFyYmF6cXV4"],
    ),
    "slack token": (
        "notify with xoxb-1234567890-0987654321-QwErTyUiOpAsDfGhJkLzXcVb failed",
        ["QwErTyUiOpAsDfGhJkLzXcVb"],
    ),
    "slack webhook": (
        "POST https://hooks.slack.com/services/T0ABCDEF1/B0GHIJKL2/zYxWvUtSrQpOnMlKjIhGfEdC",
        ["zYxWvUtSrQpOnMlKjIhG"],
    ),
    "stripe key": ("billing with sk_live_51HqLyjWDarjtT1zdp7dcQwErTy failed", ["51HqLyjWDarjtT1zdp7dc"]),
    "google api key": ("maps key AIzaSyB-1a2b3c4d5e6f7g8h9i0jKlMnOpQrStUvW failed", ["1a2b3c4d5e6f7g8h9i0jKlMn"]),
    "openai key": (f"{PAD}sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123 refused", ["AbCdEfGhIjKlMnOpQrStUvWx"]),
    "hugging face token": (f"{PAD}hf_QwErTyUiOpAsDfGhJkLzXcVbNm123 refused", ["QwErTyUiOpAsDfGhJkLzXcVbNm"]),
    "token query parameter": ("GET /v1/models?token=q7Zk9Xp2Lm4Nv8Rt&verbose=1 401", ["q7Zk9Xp2Lm4Nv8Rt"]),
    "access_token query parameter": ("GET /cb?state=1&access_token=Rt8Nv4Lm2Xp9Zk7q 401", ["Rt8Nv4Lm2Xp9Zk7q"]),
    "url user and password": ("cannot reach postgres://admin:Hunt3rPassw0rd@db.internal:5432/x", ["Hunt3rPassw0rd"]),
    "redis password only": ("cannot reach redis://:R3disS3cret@cache:6379/0", ["R3disS3cret"]),
    # an AWS secret key is base64: "/" in the password (breakit5 item 1)
    "url password with slashes": (
        "'model': 's3://AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY@bucket/llama'",
        ["wJalrXUtnFEMI", "K7MDENG", "bPxRfiCYEXAMPLEKEY", "AKIAIOSFODNN7EXAMPLE"],
    ),
    "https password with a slash": ("OSError: could not fetch https://bob:hunter2/secret@example.com/m", ["hunter2"]),
    "authorization basic": ("401 for Authorization: Basic dXNlcjpTM2NyZXRQYXNz", ["dXNlcjpTM2NyZXRQYXNz"]),
    "authorization token": ("401 for Authorization: Token 9c8b7a6f5e4d3c2b1a", ["9c8b7a6f5e4d3c2b1a"]),
    "authorization bearer in headers dict": (
        "headers={'authorization': 'Bearer Qm9vb1ZhbHVlMTIz', 'x': 1}",
        ["Qm9vb1ZhbHVlMTIz"],
    ),
    "x-api-key header": ("401 with x-api-key: k9-Pq7Rs5Tu3Vw1 sent", ["k9-Pq7Rs5Tu3Vw1"]),
    "short bearer token": ("401 for Bearer q7Z9k from client", ["q7Z9k"]),
    "hugging face env var": ("env HUGGING_FACE_HUB_TOKEN=Pl4inT0kenValue was refused", ["Pl4inT0kenValue"]),
    "password key value": ("connect failed: password='Tr0ub4dor&3x' for user", ["Tr0ub4dor"]),
    "api key list value": (
        "bad config {'api_key': ['Kx1-First-Secret', 'Kx2-Second-Secret'], 'port': 8000}",
        ["Kx1-First-Secret", "Kx2-Second-Secret"],
    ),
    "cli flag value": ("launched as vllm serve m --api-key Fl4gS3cretV4lue --port 8000", ["Fl4gS3cretV4lue"]),
    "json api key": ('payload {"api_key": "J5onS3cretV4lue", "n": 1}', ["J5onS3cretV4lue"]),
    "prompt in an exception message": (
        "could not tokenize prompt: Tell me about Project Nightingale and its budget",
        ["Project Nightingale"],
    ),
    "messages repr": (
        "bad request messages=[{'role': 'user', 'content': 'Project Bluebird launch details'}]",
        ["Project Bluebird"],
    ),
    "json prompt field": (
        'invalid body {"model": "m", "prompt": "Project Redwood plans", "max_tokens": 5}',
        ["Project Redwood"],
    ),
    "json input field": ('invalid body {"model": "m", "input": "Project Sequoia memo"}', ["Project Sequoia"]),
    "pydantic input dict": (
        "1 validation error [{'type': 'missing', 'loc': ('body',), 'input': {'messages': [{'content': 'Project Elm'}]}}]",
        ["Project Elm"],
    ),
    "control character inside a token": (
        f"{PAD}hf_QwErTyUi\x00OpAsDfGhJkLzXcVbNm456 refused",
        ["QwErTyUiOpAsDfGhJkLz"],
    ),
    "zero width character inside a token": ("key sk-AbCdEfGh\u200bIjKlMnOpQrStUvWx9876 refused", ["AbCdEfGhIjKlMnOp"]),
    "token glued after %3D": ("GET /login?next=%2Fcb%3Fcode%3Dhf_Zz9Yy8Xx7Ww6Vv5Uu4Tt3 302", ["Zz9Yy8Xx7Ww6Vv5Uu4"]),
    "token glued after underscore": ("cache key model_hf_Aa1Bb2Cc3Dd4Ee5Ff6Gg7 missing", ["Aa1Bb2Cc3Dd4Ee5Ff6"]),
    "email address": ("mail alice_smith+ops@example.com failed", ["alice_smith+ops@example.com"]),
    "client ip address": ("connection from 203.0.113.45 reset", ["203.0.113.45"]),
    "home directory user": ("cannot open /home/zyxwuser/models/m.bin", ["zyxwuser"]),
}

#: kind -> (log text, secrets that must not show, a marker the redacted output must show)
WRAPPED_KINDS = {}


def startup_failure(message: str, wrap=lambda i, line: line) -> str:
    lines = [
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.10.1",
        "ERROR 01-01 00:00:01 [core.py:1] EngineCore failed to start.",
        "ERROR 01-01 00:00:01 [core.py:1] Traceback (most recent call last):",
        'ERROR 01-01 00:00:01 [core.py:1]   File "/x/vllm/v1/engine/core.py", line 1, in run',
        f"ERROR 01-01 00:00:01 [core.py:1] ValueError: {message}",
    ]
    return "\n".join(wrap(i, line) for i, line in enumerate(lines)) + "\n"


WRAPPED_KINDS["wrapped bearer joined to its jwt"] = (
    startup_failure("request rejected by the upstream proxy with header Authorization: Bearer")
    + "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ3cmFwIn0.c2lnbmF0dXJlLXdyYXBwZWQ\n",
    ["eyJzdWIiOiJ3cmFwIn0", "c2lnbmF0dXJlLXdyYXBwZWQ"],
    "<redacted>",
)
WRAPPED_KINDS["presigned url as the model path"] = (
    "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'model': 'https://b.s3.amazonaws.com/m?X-Amz-Signature="
    "7e6d5c4b3a29181706f5e4d3c2b1a0ff&X-Amz-Credential=AKIAZZEXAMPLE1234567%2F2025', 'max_model_len': 4096}\n"
    + startup_failure("weights could not be fetched"),
    ["7e6d5c4b3a29181706f5e4d3c2b1a0ff", "ZZEXAMPLE1234567"],
    "X-Amz-Signature=<redacted>",
)
WRAPPED_KINDS["journald host with pid"] = (
    startup_failure("boom", lambda i, line: f"Jan 01 00:00:0{i} gpu-node-zz17 vllm[4127]: {line}"),
    ["gpu-node-zz17"],
    "vllm[4127]@<host-1>",
)
WRAPPED_KINDS["journald host without pid"] = (
    startup_failure("boom", lambda i, line: f"Jan 01 00:00:0{i} gpu-node-yy18 vllm: {line}"),
    ["gpu-node-yy18"],
    "vllm@<host-1>",
)
WRAPPED_KINDS["journald json identifier with a space"] = (
    startup_failure(
        "boom",
        lambda i, line: json.dumps(
            {"_HOSTNAME": "gpu-node-xx19", "SYSLOG_IDENTIFIER": "my vllm", "MESSAGE": line, "__REALTIME_TIMESTAMP": "1"}
        ),
    ),
    ["gpu-node-xx19"],
    "<host-1>",
)
WRAPPED_KINDS["kubectl pod"] = (
    startup_failure("boom", lambda i, line: f"[pod/vllm-7d9f8c-qz4x1/vllm] {line}"),
    ["vllm-7d9f8c-qz4x1"],
    "pod/<pod-1>/vllm",
)

KINDS = {
    **{k: (startup_failure(m), secrets, None) for k, (m, secrets) in MESSAGE_KINDS.items()},
    **WRAPPED_KINDS,
}
FORMATS = ["text", "markdown", "json"]


def views(fmt: str, out: str):
    """The texts a reader of ``out`` sees: Markdown also with its escapes undone, JSON also
    as the strings it holds (JSON Lines in follow mode)."""
    texts = [out]
    if fmt == "markdown":
        texts.append(html.unescape(regex.sub(r"\\([!-/:-@\[-`{-~])", r"\1", out)))
    if fmt == "json":
        strings = []

        def walk(x):
            if isinstance(x, str):
                strings.append(x)
            elif isinstance(x, dict):
                for k, v in x.items():
                    walk(k), walk(v)
            elif isinstance(x, list):
                list(map(walk, x))

        for line in out.splitlines() if out.lstrip().startswith('{"type"') else [out]:
            if line.strip():
                walk(json.loads(line))
        texts.append("\n".join(strings))
    return texts


#: Columns at which the text view clips no evidence line (the rules keep at most 600
#: characters of one; the text view gives an incident's line three screen lines).
WIDE = 400


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("kinds")
    paths = {}
    for i, (kind, (text, _, _)) in enumerate(KINDS.items()):
        paths[kind] = d / f"k{i}.log"
        paths[kind].write_text(text, encoding="utf-8")
    return paths


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_is_redacted_in_every_format_and_shows_without_redaction(logs, kind, fmt):
    _, secrets, marker = KINDS[kind]
    # A terminal wide enough that the text view clips no evidence line: every token is shown.
    wide = {"COLUMNS": str(WIDE)}
    redacted = CliRunner().invoke(main, ["diagnose", "-f", fmt, str(logs[kind])], env=wide)
    control = CliRunner().invoke(main, ["diagnose", "-f", fmt, "--no-redact", str(logs[kind])], env=wide)
    assert redacted.exit_code == control.exit_code == 1, (redacted.output, redacted.exception)
    for secret in secrets:
        for seen in views(fmt, redacted.stdout):
            assert secret not in seen, (kind, fmt, secret)
        assert any(secret in seen for seen in views(fmt, control.stdout)), (kind, fmt, secret, control.stdout)
    if marker:
        assert any(marker in seen for seen in views(fmt, redacted.stdout)), (kind, fmt, marker)
    assert "other" in redacted.stdout  # the diagnosis is kept


@pytest.fixture(scope="module")
def followed(tmp_path_factory):
    """Every kind in one stream (one server run each), through --follow in every format,
    redacted and not: {(fmt, redact): stdout}."""
    stream = "".join(text for text, _, _ in KINDS.values())
    out = {}
    for fmt in FORMATS:
        for redact in (True, False):
            args = [sys.executable, "-m", "vllm_doctor", "diagnose", "-F", "-f", fmt, "-"]
            p = subprocess.run(
                args + ([] if redact else ["--no-redact"]),
                input=stream,
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "COLUMNS": str(WIDE)},
            )
            assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
            out[fmt, redact] = p.stdout
    return out


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_follow_mode_redacts_every_kind(followed, kind, fmt):
    for secret in KINDS[kind][1]:
        for seen in views(fmt, followed[fmt, True]):
            assert secret not in seen, (kind, fmt, secret)
        if kind == "presigned url as the model path" and fmt != "json":
            continue  # the human summary shows the primary run's facts only; JSON has every run's config
        assert any(secret in seen for seen in views(fmt, followed[fmt, False])), (kind, fmt, secret)


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
    ('File "/home/alice/venv/lib/python3.12/site-packages/vllm/x.py", line 3', "alice", "/home/<user-1>/venv"),
    ("C:\\Users\\bob\\models\\x", "bob", "C:\\Users\\<user-1>\\models"),
    (
        "Received request 1a2b: prompt: 'my SSN is 123-45-6789, Tried to allocate', params: x",
        "123-45-6789",
        "prompt: '<prompt redacted>'",
    ),
    ("Received request 1a2b: prompt: 'cut short by the log line limit", "cut short", "prompt: '<prompt redacted>"),
    ("prompt_token_ids: [128000, 9906, 1917]", "9906", "prompt_token_ids: [<redacted>]"),
    ("Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/2025", "IOSFODNN7", "Authorization: AWS4"),
    ("Cookie: session=Qx7SessionValue; theme=dark", "Qx7SessionValue", "Cookie: <redacted>"),
    ("glpat-AbCdEfGhIjKlMnOpQrSt01 and npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "AbCdEfGhIjKlMnOpQrSt01", "glpat-"),
    ("https://hooks.slack.com/workflows/T1/A2/3/abcDEF", "abcDEF", "hooks.slack.com/workflows/<redacted>"),
    # a hard-wrapped line re-joined onto the end of a token (found by tests/test_fuzz.py)
    ("terminating server process AKIAFZEXAMPLE7777777phs), and 1.47 GiB", "FZEXAMPLE7777777", "AKIA<redacted>phs)"),
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
        "max_num_batched_tokens=8192, max_model_len=4096, eos_token_id=2, tokenizer=foo, token_ids=[1, 2]",
        "Processed prompts: 100%|█| 12032/12032 [20:54<00:00,  9.59it/s, est. speed input: 15218.54 toks/s",
        "Invalid input: 'Input prompt (8193 tokens) is too long'",
        "ValueError: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
        "missing Bearer token in the request",
        "Process 4127 has 21.50 GiB memory in use. PID 99 uses 1.2 GiB",
        "non-default args: {'api_key': None, 'hf_token': None}",
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
    r = CliRunner().invoke(main, ["diagnose", "-f", "json", str(log)])
    d = json.loads(r.stdout)
    # the user name became a pseudonym: standard error says how to see it (fresh22 item 3)
    assert r.stderr.strip() == "note: user names are shown as <user-N>; --no-redact shows them as logged"
    assert d["primary_class"] == "kv_cache_capacity"
    assert "--max-model-len 16384" in [r["flag"] for f in d["findings"] for r in f["remedies"]]
    assert d["runs"][0]["config"]["max_model_len"] == 131072
    raw = CliRunner().invoke(main, ["diagnose", "-f", "json", "--no-redact", str(log)]).output
    assert "sk-live-0123456789abcdef" in raw


def _two_hosts_log():
    kv = (
        "ERROR 01-01 00:00:03 [core.py:1] ValueError: To serve at least one request with the model's max seq len "
        "(131072), (16.0 GiB KV cache is needed, which is larger than the available KV cache memory (2.0 GiB). "
        "Based on the available memory, the estimated maximum model length is 16384. Try increasing"
    )
    start = "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.10.1"
    lines = []
    for host, pid in (("gpu-node-a1", 11), ("gpu-node-b2", 22), ("gpu-node-a1", 33)):
        lines += [f"Jan 01 00:00:00 {host} vllm[{pid}]: {start}", f"Jan 01 00:00:01 {host} vllm[{pid}]: {kv}"]
    lines.append("Jan 01 00:00:02 gpu-node-b2 vllm: " + start)  # the same host, no PID
    return "\n".join(lines) + "\n"


def test_two_hosts_stay_apart_after_redaction_with_stable_pseudonyms(tmp_path):
    log = tmp_path / "journal.log"
    log.write_text(_two_hosts_log())
    d = json.loads(CliRunner().invoke(main, ["diagnose", "-f", "json", str(log)]).stdout)
    names = [s["name"] for s in d["sources"]]
    assert names == [
        f"{log} [vllm[11]@<host-1>]",
        f"{log} [vllm[22]@<host-2>]",
        f"{log} [vllm[33]@<host-1>]",
        f"{log} [vllm@<host-2>]",
    ]
    everywhere = {f["source"] for f in d["findings"]} | {e["source"] for f in d["findings"] for e in f["evidence"]}
    everywhere |= {r["source"] for r in d["runs"]}
    assert everywhere <= set(names) and len(everywhere) >= 3
    for fmt in ("text", "markdown"):
        out = CliRunner().invoke(main, ["diagnose", "-f", fmt, str(log)]).stdout
        assert "gpu-node" not in out and "<host-1>" in out and "<host-2>" in out


def test_pseudonyms_are_stable_across_findings_of_one_follow_session():
    r = Redactor()
    f1 = Finding("other", "VD900", "critical", "startup", "t", source="x [vllm[1]@alpha]")
    f2 = Finding("other", "VD900", "critical", "startup", "t", source="x [vllm[2]@beta]")
    f3 = Finding("other", "VD900", "critical", "startup", "t", source="x [vllm[3]@alpha]")
    assert [redact_verdict(f, r).source for f in (f1, f2, f3)] == [
        "x [vllm[1]@<host-1>]",
        "x [vllm[2]@<host-2>]",
        "x [vllm[3]@<host-1>]",
    ]


def test_source_names_with_brackets_spaces_and_newlines_keep_their_pseudonyms():
    r = Redactor()
    assert r.source_name("in [a].log [my app[7]@h\nost]", "in [a].log") == "in [a].log [my app[7]@<host-1>]"
    assert r.source_name("in.log [@h2]") == "in.log [@<host-2>]"
    assert r.source_name("in.log [unit[1]@?]") == "in.log [unit[1]@?]"
    assert r.source_name("/home/carol/x.log [pod/p-1/c]") == "/home/<user-1>/x.log [pod/<pod-1>/c]"


def test_a_title_that_cuts_a_token_short_is_scrubbed():
    token = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm123"
    f = Finding(
        "other",
        "VD900",
        "critical",
        "startup",
        f"Startup failure: ValueError: {token[:9]}",
        source="x",
        evidence=[Evidence("x", 1, f"ValueError: {token}")],
    )
    f.remedies = []
    v = Verdict("other", "VD900", "critical", f.title, findings=[f], sources=[SourceSummary("x", "x")])
    out = render(redact_verdict(v), "json")
    assert token[3:9] not in out and "hf_<redacted>" in json.loads(out)["title"]


def test_a_line_too_complex_for_the_rules_is_withheld_not_printed(monkeypatch):
    import vllm_doctor.redact as redact

    class Slow:
        def sub(self, *a, **k):
            raise TimeoutError("regex timed out")

    monkeypatch.setattr(redact, "_EMAIL", Slow())
    assert redact_text("user@example.com") == redact.WITHHELD
    monkeypatch.setattr(
        redact, "_EMAIL", type("C", (), {"sub": lambda *a, **k: (_ for _ in ()).throw(TimeoutError())})()
    )
    with pytest.raises(TimeoutError):  # not the regex module's: not ours to swallow
        redact_text("user@example.com")


# -- break-it 4 and 15: bytes reprs, more token families, passphrases, the tool's own words ----


@pytest.mark.parametrize(
    "text,expected",
    [
        ("{'api_key': b'SECRET1'}", "{'api_key': b'<redacted>'}"),
        ('password=b"SECRET2" more', 'password=b"<redacted>" more'),
        ("{'token': rb'SECRET3', 'x': 1}", "{'token': rb'<redacted>', 'x': 1}"),
        ("headers={'authorization': b'Bearer SECRET4'}", "headers={'authorization': b'Bearer <redacted>'}"),
    ],
)
def test_a_python_bytes_repr_after_a_secret_key_is_masked_whole(text, expected):
    assert redact_text(text) == expected


def test_bytes_reprs_are_masked_in_every_format():
    line = (
        "(WorkerDict pid=93663) WARNING 02-21 04:32:47 model_runner_base.py:143] Failed to pickle inputs of failed "
        "execution: CUDA error: headers={'authorization': b'Bearer BYTESSECRET1'}, {'api_key': b'BYTESSECRET2'}, "
        "password=b'BYTESSECRET3'\n"
    )
    for fmt in ("text", "markdown", "json"):
        out = CliRunner().invoke(main, ["diagnose", "-", "-f", fmt], input=line).output
        assert "BYTESSECRET" not in out, fmt
        assert "b'<redacted>'" in out.replace("\\'", "'"), fmt


@pytest.mark.parametrize(
    "token,kept",
    [
        ("dckr_pat_" + "Ab3" * 9, "dckr_pat_"),
        ("r8_" + "Xy7" * 13, "r8_"),
        ("gsk_" + "Qw9" * 17, "gsk_"),
    ],
)
def test_docker_replicate_and_groq_tokens(token, kept):
    assert redact_text(f"login with {token} failed") == f"login with {kept}<redacted> failed"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("PASSWORD=pass word", "PASSWORD=<redacted>"),
        ("PASSWORD=pass word user=bob", "PASSWORD=<redacted> user=bob"),
        ("password: correct horse battery, next", "password: <redacted>, next"),
        ("Driver={x};Server=db;Uid=sa;Pwd=hunter2;", "Driver={x};Server=db;Uid=sa;Pwd=<redacted>;"),
        ("pwd=hunter2", "pwd=<redacted>"),
        ("PWD=/srv/vllm", "PWD=/srv/vllm"),  # the shell's working directory is no password
        ("token=abc def", "token=<redacted> def"),  # a token has no spaces: only a passphrase runs on
    ],
)
def test_passwords_run_to_the_end_of_the_value_and_pwd_is_a_password(text, expected):
    assert redact_text(text) == expected


def test_prompt_token_ids_are_one_placeholder():
    assert redact_text("prompt_token_ids: [1, 2, 3], lora") == "prompt_token_ids: [<redacted>], lora"
    assert redact_text("prompt_token_ids=[1, 2, 3]") == "prompt_token_ids=[<redacted>]"


def test_a_key_word_in_a_path_names_a_file_not_a_secret():
    """The tool's own message about /etc/passwd lost its words to the passwd rule."""
    from vllm_doctor.redact import redact_secrets

    msg = "/etc/passwd: nothing recognisable as vLLM output"
    assert redact_text(msg) == redact_secrets(msg) == msg
    assert redact_text("C:\\keys\\token: nothing here") == "C:\\keys\\token: nothing here"
    assert redact_text("passwd: hunter2") == "passwd: <redacted>"


def test_compare_names_an_unrecognised_input_without_losing_its_words(tmp_path):
    log = tmp_path / "passwd"
    log.write_text("root:x:0:0:root:/root:/bin/bash\n")
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "compare", str(log), str(log)], capture_output=True, text=True
    )
    assert p.returncode == 2
    assert p.stderr.endswith("/passwd: nothing recognisable as vLLM output\n"), p.stderr


def test_redact_secrets_leaves_what_the_operator_typed():
    from vllm_doctor.redact import redact_secrets

    assert redact_secrets("http://127.0.0.1:9/metrics: connection refused") == (
        "http://127.0.0.1:9/metrics: connection refused"
    )
    assert redact_secrets("/home/alice/x.log: no such file") == "/home/alice/x.log: no such file"
    assert redact_secrets("http://u:pw@h/m?token=T0K: HTTP 500 Boom hf_abcdefghijklmnopqrstu") == (
        "http://<redacted>@h/m?token=<redacted>: HTTP 500 Boom hf_<redacted>"
    )


def test_a_verdict_redacted_once_per_distinct_string_equals_every_string_redacted(monkeypatch, tmp_path):
    # Redactor._string reuses the redaction of a string seen before while no token was added
    # since; the same text seen again after a new token is redacted again. Both ways must
    # print the same verdict, on a log whose strings repeat with tokens learned late.
    import vllm_doctor.redact as redact

    token = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm123"
    early = f"Startup failure: ValueError: {token[:9]}"  # a cut copy, before the token is seen
    f = Finding("other", "VD900", "critical", "startup", early, source="x [vllm[1]@alpha]")
    f.evidence = [
        Evidence("x [vllm[1]@alpha]", n, text) for n, text in enumerate([early, f"ValueError: {token}", early])
    ]
    f.notes = [early, "10.0.0.7:40001", "10.0.0.7:40001", "/home/alice/x", "/home/alice/x"]
    f.remedies = []
    v = Verdict("other", "VD900", "critical", early, findings=[f], sources=[SourceSummary("x [vllm[1]@alpha]", "x")])
    memo = render(redact_verdict(v), "json")
    log = tmp_path / "busy.log"
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "generate.py")
    subprocess.run([sys.executable, bench, str(log), "2"], check=True)
    busy = CliRunner().invoke(main, ["diagnose", "-f", "json", str(log)]).stdout
    monkeypatch.setattr(redact.Redactor, "_string", lambda self, text: self._names.get(text) or self.text(text))
    assert render(redact_verdict(v), "json") == memo
    assert token[3:9] not in memo and "<user-1>" in memo and "10.0.0.7" not in memo
    assert CliRunner().invoke(main, ["diagnose", "-f", "json", str(log)]).stdout == busy
