"""Which names name a secret (``api_key``, ``--hf-token``, ``ssl_keyfile_password``): shared by
the redactor (vllm_doctor/redact.py), which hides their values, and the rules, which never write
such a value into a remedy. No dependency on the rest of the package, so every layer may use it."""

from __future__ import annotations

import regex

#: The words a key that names a secret is made of (its value is then a secret).
SECRET_WORDS = (
    r"api[_-]?key|apikey|token|secret|password|passwd|credentials?|private[_-]?key|access[_-]?key"
    r"|secret[_-]?key|session[_-]?key|client[_-]?secret|cookie|signature"
)
#: A configuration key that names a secret, alone (``api_key``, ``hf_token``): the value of
#: such a key is a secret wherever it is shown without its key (a diff, a table cell).
_SECRET_NAME = regex.compile(r"(?i)(?:[a-z0-9]+[_-])*(?:" + SECRET_WORDS + r"|auth[_-]?token)")


def names_secret(key: str) -> bool:
    """True when the configuration key ``key`` names a secret (``api_key``, ``hf_token``,
    ``--api-key``, ``ssl_keyfile_password``); its value is then redacted wherever it is shown."""
    return _SECRET_NAME.fullmatch(key.lstrip("-")) is not None
