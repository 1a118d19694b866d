"""A remedy's reason reads as one plain clause (fresh-user report, finding 8): the value in
force and where it comes from in one phrase (``vLLM's default 1, not printed in the log``),
never ``1, vLLM's default, 1; not printed in the log``, and no ``(...) (...)`` pair."""

import pytest
from conftest import fixture_path

from vllm_doctor import defaults, diagnose
from vllm_doctor.render import render
from vllm_doctor.render.names import why_parts


def _whys(name):
    v = diagnose(str(fixture_path(name)))
    return v, [r.why for f in v.findings for r in f.remedies if r.why]


@pytest.mark.parametrize(
    "name, expected",
    [
        # max_num_seqs not printed: V1's default by GPU (remedies3: s001's TP step, whose "in
        # force: vLLM's default 1" this was, carries no number now: its log shows one GPU)
        (
            "r002-mtp-slow-v1-waiting.log",
            "in force: vLLM's V1 default 256-1024 for the API server on a GPU of unknown size, not printed in the log",
        ),
        # gpu_memory_utilization not printed, version unknown: 0.9, or 0.92 from 0.20
        (
            "r002-mtp-slow-v1-waiting.log",
            "0.03 above vLLM's default 0.90-0.92 (0.92 from vLLM 0.20), not printed in the log",
        ),
    ],
)
def test_the_value_in_force_is_one_phrase(name, expected):
    _, whys = _whys(name)
    assert any(expected in w for w in whys), whys
    for w in whys:
        assert "vLLM's default, " not in w and "; not printed in the log" not in w, w


def test_defaults_name_whose_default_before_the_value():
    # Each Default.why is a phrase the value completes ({value} marks where it goes).
    assert defaults.gpu_memory_utilization(None).why == "vLLM's default {value} (0.92 from vLLM 0.20)"
    assert defaults.gpu_memory_utilization(None, "v0").why == "vLLM's V0 default"
    assert defaults.gpu_memory_utilization("0.10.1").why == "vLLM 0.10.1's default"
    assert defaults.max_num_seqs(None, "v1", 79.3).why == "vLLM's V1 default {value} for the API server on a 79 GiB GPU"
    assert defaults.max_num_seqs("0.6.0", "v0", None).why == "V0's default"
    d = defaults.max_num_batched_tokens(None, "v1", None)
    assert d.why == "vLLM's V1 default {value} for the API server on a GPU of unknown size"


def test_a_reason_joins_the_parenthesis_an_action_ends_with():
    assert why_parts("Halve KV per token (a precision trade-off to evaluate)", "about 47296 tokens") == (
        "Halve KV per token",
        "a precision trade-off to evaluate; about 47296 tokens",
    )
    assert why_parts("Lower it (see (a) below)", "x") == ("Lower it", "see [a] below; x")  # never nested
    assert why_parts("Lower max_model_len", "because") == ("Lower max_model_len", "because")
    assert why_parts("(all of it)", "y") == ("(all of it)", "y")
    assert why_parts("Lower it (a)", None) == ("Lower it (a)", None)


def test_no_doubled_parentheses_in_the_text_and_markdown_views():
    v, _ = _whys("s001-llama31-8b-3090-kv-29k.log")
    text = " ".join(render(v, "text", width=100).split())
    assert "(a precision trade-off to evaluate; about 47296 tokens instead of 23648" in text
    assert "evaluate) (about" not in text
    md = render(v, "markdown")
    assert "(a precision trade-off to evaluate; about 47296 tokens instead of 23648" in md
    assert "evaluate) (about" not in md
