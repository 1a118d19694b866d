"""Redaction: keep secrets and personal data out of verdicts pasted into tickets.

Applied to every string of a verdict (evidence lines, titles, facts) before it is
rendered, unless ``--no-redact``. What goes, and what it becomes:

* API keys and tokens: ``hf_...`` -> ``hf_<redacted>``, ``sk-...`` -> ``sk-<redacted>``,
  ``Bearer ...`` -> ``Bearer <redacted>``, and the value of ``api_key``, ``hf_token``,
  ``token``, ``password``, ``secret`` ... keys in ``non-default args`` dicts, ``args:
  Namespace(...)`` and ``key=value`` text -> ``<redacted>``;
* e-mail addresses -> ``<email>``;
* IPv4 and IPv6 client addresses -> ``<ip>`` (the port stays); version strings that look
  like addresses (``v1.2.3.4``, ``0.10.2.dev378``) stay;
* journald host names in source names (``[vllm[4127]@gpu-node-3]`` -> ``@<host>``);
* user names in home paths: ``/home/alice/`` -> ``/home/<user>/`` (also ``/Users/``,
  ``C:\\Users\\``);
* prompt text of request-logging lines (``Received request ...: prompt: '...'``) ->
  ``'<prompt redacted>'``, and prompt token ids.

Numbers, model names and versions - what the diagnosis needs - are kept.
"""

from __future__ import annotations

import copy
from typing import Any

import regex

_RULES = [
    # prompts first: they may contain anything, including text the rules below would half-redact
    (regex.compile(r"(prompt: )(['\"])(?:\\.|(?!\2).)*+\2", regex.S), r"\1'<prompt redacted>'"),
    (regex.compile(r"(prompt: )(['\"]).*$", regex.S), r"\1'<prompt redacted>'"),
    (regex.compile(r"(prompt_token_ids: )\[[^\]]*+\]?"), r"\1[<redacted>]"),
    (
        regex.compile(
            r"(['\"]?(?:api[_-]?key|hf[_-]?token|token|access[_-]?token|auth[_-]?token|password|passwd|secret"
            r"|secret[_-]?key|aws_secret_access_key|authorization)['\"]?\s*[:=]\s*)(['\"])[^'\"]*+\2",
            regex.I,
        ),
        r"\1\2<redacted>\2",
    ),
    (
        regex.compile(
            r"((?:--)?(?:api[_-]?key|hf[_-]?token|access[_-]?token|password|secret)[= ])(?!<redacted>)[^\s,'\")]+",
            regex.I,
        ),
        r"\1<redacted>",
    ),
    (regex.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}"), "Bearer <redacted>"),
    (regex.compile(r"\bhf_[A-Za-z0-9]{16,}"), "hf_<redacted>"),
    (regex.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), "sk-<redacted>"),
    (regex.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"), "<email>"),
    (
        regex.compile(
            r"(?<![\w.])(?<!v)(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.]*\d)(?!\.\w)"
        ),
        "<ip>",
    ),
    (regex.compile(r"(?<![\w:])(?=[0-9A-Fa-f:]*[A-Fa-f])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])"), "<ip>"),
    (
        regex.compile(
            r"(?<![\w:])[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4})*::(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4})*)?"
            r"(?:%\w+)?(?![\w:])"
        ),
        "<ip>",
    ),
    (regex.compile(r"(/home/|/Users/)(?!<user>)[^/\s'\"]+"), r"\1<user>"),
    # journald host names, as kept in sub-source names "INPUT [unit[pid]@host]"
    (regex.compile(r"(\[[^\]\s]*\[\d+\]@)(?!<host>)[^\]\s]+(\])"), r"\1<host>\2"),
    (regex.compile(r"([A-Za-z]:\\Users\\)[^\\\s'\"]+"), r"\1<user>"),
]


def redact_text(text: str) -> str:
    """Return ``text`` with secrets and personal data replaced (see the module doc)."""
    if not text:
        return text
    for rx, repl in _RULES:
        try:
            text = rx.sub(repl, text, timeout=0.5)
        except TimeoutError:
            return "<line withheld: too complex to redact safely>"
    return text


def _walk(obj: Any) -> Any:
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, list):
        return [_walk(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _walk(v) for k, v in obj.items()}
    if hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            setattr(obj, name, _walk(getattr(obj, name)))
        return obj
    return obj


def redact_verdict(verdict):
    """A redacted deep copy of a :class:`~vllm_doctor.verdict.Verdict`."""
    return _walk(copy.deepcopy(verdict))
