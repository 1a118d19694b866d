"""Properties over generated input: never raises, JSON always valid, both read paths agree."""

import io
import json
from importlib import resources

import jsonschema
from conftest import FIXTURES, load_manifest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_doctor.pipeline import build_verdict, diagnose_input, diagnose_source
from vllm_doctor.redact import redact_verdict
from vllm_doctor.sources import Source, read_lines

SCHEMA = json.loads(resources.files("vllm_doctor").joinpath("verdict.schema.json").read_text())
CORPUS_LINES = [line for c in load_manifest() for line in (FIXTURES / c["file"]).read_text().splitlines()]
NOISE = [
    'INFO:     10.0.0.1:5555 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "",
    "   ",
    "^^^^^^",
    "(APIServer pid=1) INFO 01-01 00:00:00 [logger.py:49] Received request x: prompt: 'out of memory.'",
]
WRAPS = [
    "",
    "Nov 30 03:08:21 host vllm[1]: ",
    "2026-11-30T03:08:21.000000000Z ",
    "vllm-1  | ",
    "> ",
    "[pod/a/vllm] ",
    "\x1b[32m",
    "\u2502 ",  # a TUI pane's border
    "^[[32m",  # ANSI pasted as caret text
    "vllm-0 vllm ",  # stern: learned
    "2025-06-12 20:49:44 ",  # Docker Desktop
    "2024-12-19 21:40:35 ERROR 56542 ",  # an application's own record prefix
    "2026-11-30T03:08:21.000000+00:00 vllm/stream ",  # aws logs tail
    '{"line": "',  # a cut Loki line: read as text
]

lines = st.lists(st.one_of(st.sampled_from(CORPUS_LINES), st.sampled_from(NOISE), st.text(max_size=80)), max_size=40)
SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("VD_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def fast(data: bytes):
    return build_verdict(diagnose_input(Source("x", io.BytesIO(data))))


def slow(data: bytes):
    return build_verdict(diagnose_source("x", read_lines(Source("x", io.BytesIO(data)))))


def comparable(v):
    d = v.to_dict()
    for s in d["sources"]:
        s.pop("records"), s.pop("joined")
    return d


@SETTINGS
@given(st.binary(max_size=4000))
def test_any_bytes_give_a_valid_verdict(data):
    verdict = fast(data)
    jsonschema.validate(json.loads(json.dumps(redact_verdict(verdict).to_dict(), default=str)), SCHEMA)
    # The exit code follows the headline, and the headline is a finding of the verdict.
    assert (verdict.exit_code == 0) == (verdict.primary_class == "healthy")
    if verdict.primary is not None:
        assert verdict.findings[0] is verdict.primary and verdict.primary.class_id == verdict.primary_class
    assert all(s.internal_errors == 0 for s in verdict.sources), verdict.sources[0].first_internal_error


@SETTINGS
@given(lines, st.sampled_from(WRAPS))
def test_fast_and_plain_paths_agree(body, wrap):
    data = "\n".join(wrap + line for line in body).encode("utf-8", "surrogatepass")
    assert comparable(fast(data)) == comparable(slow(data))
