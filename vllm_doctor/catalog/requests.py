"""Requests: too-long rejections, request logging, HTTP access lines.

Sources (``shared/vllm-messages.md`` sections 9, 12):

* ``vllm/entrypoints/openai/serving_engine.py _validate_input`` and the newer renderer
  (``vllm/renderers/params.py _token_len_check``), four wordings over time:
  ``This model's maximum context length is %d tokens. However, you requested %d tokens
  (%d in the messages, %d in the completion).``; ``... However, your request has %d input
  tokens.``; ``'max_tokens' or 'max_completion_tokens' is too large: %d. This model's
  maximum context length is %d tokens and your request has %d input tokens``; newest
  ``... However, you requested %d output tokens and your prompt contains at least %d input
  tokens, for a total of at least %d tokens.``;
* ``vllm/v1/engine/processor.py``: ``The decoder prompt (length %d) is longer than the
  maximum model length of %d``; V0 scheduler ``Input prompt (%d tokens) is too long and
  exceeds limit of %d``;
* uvicorn access lines for error responses ``INFO:     host:port - "POST /v1/... HTTP/1.1" 500
  Internal Server Error`` (request logging ``Received request ...`` is deliberately not
  recognised: it prints prompts, see :meth:`vllm_doctor.catalog.Catalog.recognise`).
"""

from __future__ import annotations

from typing import Any, Dict

from . import Pattern, default_build


def _too_long(variant: str):
    def build(m, rec) -> Dict[str, Any]:
        data = default_build(m, rec)
        data["variant"] = variant
        if "requested_tokens" not in data and "prompt_tokens" in data and "max_tokens" in data:
            data["requested_tokens"] = data["prompt_tokens"] + data["max_tokens"]
        return data

    return build


PATTERNS = [
    Pattern(
        "too_long_messages_completion",
        "too_long",
        ("maximum context length is",),
        r"maximum context length is (?P<max_model_len>\d+) tokens\. However, you requested "
        r"(?P<requested_tokens>\d+) tokens \((?P<prompt_tokens>\d+) in the messages, "
        r"(?P<max_tokens>\d+) in the completion\)",
        "vllm/entrypoints/openai/serving_engine.py _validate_input (<= v0.6)",
        None,
        _too_long("messages+completion"),
    ),
    Pattern(
        "too_long_input_only",
        "too_long",
        ("maximum context length is",),
        r"maximum context length is (?P<max_model_len>\d+) tokens\. However, your request has "
        r"(?P<prompt_tokens>\d+) input tokens",
        "vllm/entrypoints/openai/serving_engine.py _validate_input (v0.6-v0.9)",
        None,
        _too_long("input"),
    ),
    Pattern(
        "too_long_max_tokens",
        "too_long",
        ("is too large:",),
        r"'max_tokens' or 'max_completion_tokens' is too large: (?P<max_tokens>\d+)\. This model's maximum "
        r"context length is (?P<max_model_len>\d+) tokens and your request has (?P<prompt_tokens>\d+) input tokens",
        "vllm/entrypoints/openai/serving_engine.py _validate_input (v0.9+)",
        None,
        _too_long("max_tokens"),
    ),
    Pattern(
        "too_long_output_and_prompt",
        "too_long",
        ("maximum context length is",),
        r"maximum context length is (?P<max_model_len>\d+) tokens\. However, you requested (?P<max_tokens>\d+) "
        r"output tokens and your prompt contains at least (?P<prompt_tokens>\d+) input tokens, for a total of "
        r"at least (?P<requested_tokens>\d+) tokens",
        "vllm/renderers/params.py _token_len_check (2026)",
        None,
        _too_long("output+prompt"),
    ),
    Pattern(
        "too_long_decoder_prompt",
        "too_long",
        ("is longer than the maximum model length",),
        r"The decoder prompt \(length (?P<prompt_tokens>\d+)\) is longer than the maximum model length of "
        r"(?P<max_model_len>\d+)",
        "vllm/v1/engine/processor.py _validate_model_input",
        None,
        _too_long("decoder-prompt"),
    ),
    Pattern(
        "too_long_v0_scheduler",
        "too_long",
        ("is too long and exceeds limit of",),
        r"Input prompt \((?P<prompt_tokens>\d+) tokens\) is too long and exceeds limit of (?P<max_model_len>\d+)",
        "vllm/core/scheduler.py (V0)",
        None,
        _too_long("v0-scheduler"),
    ),
    # Only error responses are recognised: 2xx access lines and request logging are most of
    # a busy log and say nothing a stats line or a startup marker does not (vllm_doctor.prefilter).
    Pattern(
        "http_access_error",
        "access",
        ('HTTP/1.1" 4', 'HTTP/1.1" 5', 'HTTP/1.0" 4', 'HTTP/1.0" 5', 'HTTP/2" 5'),
        r"\"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+\" (?P<status>[45]\d\d)",
        "uvicorn access log (error responses)",
    ),
]
