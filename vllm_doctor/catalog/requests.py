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
* a client's transcript of a rejected request (kind ``client``; the tracker puts them together,
  :meth:`vllm_doctor.tracker.SourceTracker._on_client`): the status line an HTTP client prints
  for a 4xx response (``curl -v``'s ``< HTTP/1.1 400 Bad Request``, httpie's ``HTTP/1.1 400 Bad
  Request``, python requests' ``<Response [400]>``), the body naming a length limit that follows
  it (vLLM's ``maximum context length is N tokens``, a tokenizer's ``Token indices sequence
  length is longer than the specified maximum sequence length`` that a gateway returned, a
  ``max_tokens`` complaint), and the ``max_tokens`` the request asked for (``"max_tokens":
  32769`` in ``curl -d``'s JSON, httpie's ``max_tokens:=32769``);
* uvicorn access lines for error responses ``INFO:     host:port - "POST /v1/... HTTP/1.1" 500
  Internal Server Error`` (request logging ``Received request ...`` is deliberately not
  recognised: it prints prompts, see :meth:`vllm_doctor.catalog.Catalog.recognise`).
"""

from __future__ import annotations

from typing import Any, Dict, List

import regex

from ..events import Event
from ..record import Record
from .pattern import Pattern, default_build

#: Lines that show an input is an HTTP client's transcript (``curl -v``: ``* Connected to``,
#: ``> POST``, ``< HTTP/1.1``; httpie's ``http POST :8000/...`` command; python requests' repr): its status and request lines are then
#: read (:func:`client_events`), on every line of it (:func:`vllm_doctor.formats.reads_every_line`:
#: the pre-filter's literals are not in them, so both paths read such an input line by line).
_TRANSCRIPT_LINE = regex.compile(
    r"(?:\* Connected to |\* +Trying |< HTTP/[12]|> (?:POST|GET) /)|.*<Response \[\d{3}\]>"
    r"|https? (?:--?[\w-]+(?:=\S+)? )*(?:POST |GET |PUT )?(?::\d|[\w.-]+:\d|https?://)"  # httpie's command
)
# a 4xx status line (curl -v marks received headers "< "; httpie prints it bare), python requests' repr
_CLIENT_STATUS = regex.compile(
    r"(?:< ?)?HTTP/(?:1\.[01]|2(?:\.0)?) (?P<status>4\d\d)(?: [A-Z][\w ]{0,40})?\s*$|.*?<Response \[(?P<status2>4\d\d)\]>"
)
# the max_tokens the request asked for: curl -d's JSON or python's json=, httpie's key:=value
_CLIENT_MAX_TOKENS = regex.compile(r"[\"']max_tokens[\"']\s*:\s*(?P<n>\d{1,9})\b|\bmax_tokens:=(?P<n2>\d{1,9})\b")


def transcript_line(text: str) -> bool:
    """True when ``text`` (one of an input's first lines) is a line only an HTTP client's
    transcript holds (``curl -v``'s ``* Connected to``, ``< HTTP/1.1 400``, ``> POST /``; a
    python requests ``<Response [400]>``)."""
    return _TRANSCRIPT_LINE.match(text.lstrip("$# ")) is not None


def client_events(rec: Record) -> List[Event]:
    """The client transcript's events of one record (kind ``client``): a 4xx status line
    ``{status}``, the request's ``{request_max_tokens}``. Read only in an input whose first
    lines are such a transcript (:func:`transcript_line`): elsewhere "HTTP/1.1 400" is prose."""
    text = rec.text
    if "HTTP/" in text or "<Response [" in text:
        m = _CLIENT_STATUS.match(text.strip())
        if m:
            return [Event("client", rec, {"status": int(m["status"] or m["status2"])}, pattern="client_status_line")]
    if "max_tokens" in text:
        m = _CLIENT_MAX_TOKENS.search(text)
        if m:
            n = int(m["n"] or m["n2"])
            return [Event("client", rec, {"request_max_tokens": n}, pattern="client_request_max_tokens")]
    return []


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
    Pattern(
        "client_length_body",
        "client",
        ("aximum sequence length", "maximum context length is"),
        r"Token indices sequence length is longer than the specified maximum sequence length"
        r"|maximum context length is (?P<max_model_len>\d+) tokens",
        "transformers tokenization_utils_base.py (the warning, returned as a body by a gateway); "
        "vllm/entrypoints/openai/serving_engine.py, vllm/renderers/params.py (the error body)",
        None,
        lambda m, rec: {"body": True, **({"max_model_len": int(m["max_model_len"])} if m["max_model_len"] else {})},
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
