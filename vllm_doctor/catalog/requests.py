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

from .pattern import Pattern, default_build


def _too_long(variant: str):
    def build(m, rec) -> Dict[str, Any]:
        data = default_build(m, rec)
        if "prompt_len" in data:
            data["prompt_tokens"] = int(data.pop("prompt_len"))
        if "prompt_chars" in data:
            data["prompt_chars"] = int(data["prompt_chars"])
        if "prompt_tokens_at_least" in data:
            data["prompt_tokens_at_least"] = int(data["prompt_tokens_at_least"])
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
        r"maximum context length is (?P<max_model_len>\d+) tokens\.\s*However, you requested (?P<max_tokens>\d+) "
        r"output tokens and your prompt contains (?:at least )?(?P<prompt_tokens>\d+) input tokens, for a total of "
        r"(?:at least )?(?P<requested_tokens>\d+) tokens",
        "vllm/renderers/params.py _token_len_check (v0.18+; 'at least' on either count when the prompt was "
        "counted from a tokenizer bound)",
        None,
        _too_long("output+prompt"),
    ),
    Pattern(
        "too_long_prompt_only",
        "too_long",
        ("maximum context length is",),
        r"maximum context length is (?P<max_model_len>\d+) tokens\.\s*However, your prompt contains (?:at least )?"
        r"(?P<prompt_tokens>\d+) input tokens, which exceeds this limit even without any output tokens",
        "vllm/renderers/params.py _token_len_check (v0.32+)",
        None,
        _too_long("prompt-alone"),
    ),
    Pattern(
        "too_long_prompt_characters",
        "too_long",
        ("characters, which is the upper bound for",),
        r"maximum context length is (?P<max_model_len>\d+) tokens\.\s*However, (?:you requested "
        r"(?P<max_tokens>\d+) output tokens and )?your prompt contains (?P<prompt_chars>\d+) characters \(more than "
        r"\d+ characters, which is the upper bound for (?P<prompt_tokens_at_least>\d+) input tokens\)",
        "vllm/renderers/params.py _token_len_check (v0.18+: a prompt rejected by its length in characters)",
        None,
        _too_long("prompt-characters"),
    ),
    Pattern(
        "too_long_pooling_input",
        "too_long",
        ("maximum context length is",),
        r"maximum context length is (?P<max_model_len>\d+) tokens\.\s*However, you requested (?P<prompt_tokens>\d+) "
        r"tokens in the (?:input for [^.]+|messages)[.,]",
        "vllm/entrypoints/openai/serving_engine.py _validate_input (embedding / score / other pooling tasks; "
        "v0.5-v0.9 'in the messages,')",
        None,
        _too_long("input"),
    ),
    Pattern(
        "too_long_decoder_prompt",
        "too_long",
        ("is longer than the maximum model length",),
        r"(?:The (?:\w+ )?prompt \(length (?P<prompt_tokens>\d+)\)(?: plus the number of requested output tokens "
        r"\(at least 1\))?|Prompt length of (?P<prompt_len>\d+)) is longer than the maximum model length of "
        r"(?P<max_model_len>\d+)\.",
        "vllm/v1/engine/processor.py _validate_model_input ('The decoder prompt', v0.11+ 'The {type} prompt ... plus "
        "the number of requested output tokens'); v0.7 'Prompt length of %d'",
        None,
        _too_long("decoder-prompt"),
    ),
    Pattern(
        "too_long_v0_scheduler",
        "too_long",
        ("is too long and exceeds limit of",),
        r"Input prompt \((?P<prompt_tokens>\d+) tokens\) is too long and exceeds limit of (?P<prompt_limit>\d+)",
        "vllm/core/scheduler.py (V0) Scheduler._schedule_*: the limit is _get_prompt_limit, min(max_model_len, "
        "max_num_batched_tokens) without chunked prefill (0.7.3 scheduler.py:924-932)",
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
