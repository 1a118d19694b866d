"""Input formats: what wraps each line, detected per input (or forced with --input-format).

Detection works like pgBadger's: sniff the first lines of an input and count which outer
wrapper :func:`vllm_doctor.envelopes.unwrap` peels off; the commonest is the input's
format. Peeling itself is per line, so a mixed input (kubectl time stamps on some lines,
hard-wrapped continuations without them) still reads right; forcing a format restricts
peeling to that wrapper, for inputs where detection guesses wrong.
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, FrozenSet, Iterable, Optional

#: Format name -> the outer wrappers it allows (None: all). Markdown quotes are always peeled.
FORMATS: Dict[str, Optional[FrozenSet[str]]] = {
    "auto": None,
    "plain": frozenset({"quote"}),
    "journald": frozenset({"journald", "journald-iso", "quote"}),
    "journald-json": frozenset({"journald-json"}),
    "docker": frozenset({"timestamp", "quote"}),
    "compose": frozenset({"compose", "quote"}),
    "kubectl": frozenset({"timestamp", "quote"}),
    "kubectl-prefix": frozenset({"kubectl-prefix", "quote"}),
}

#: What auto-detection tries, for the message when nothing is recognised.
TRIED = (
    "plain vLLM output, journald (short, short-iso, short-precise, cat, json), docker logs -t, "
    "docker compose, kubectl logs --timestamps / --prefix, Ray and vLLM process prefixes"
)

_WRAPPER_FORMAT = {
    None: "plain",
    "quote": "plain",
    "journald": "journald",
    "journald-iso": "journald",
    "journald-json": "journald-json",
    "timestamp": "docker/kubectl (--timestamps)",
    "compose": "compose",
    "kubectl-prefix": "kubectl-prefix",
    "pipe-timestamp": "log viewer (time |)",
    "fastchat": "fastchat",
    "bracket-timestamp": "supervisor ([time])",
}


def detect(wrappers: Iterable[Optional[str]]) -> str:
    """The format name for the wrappers seen on an input's first lines."""
    counts = Counter(_WRAPPER_FORMAT.get(w, w) for w in wrappers)
    if not counts:
        return "empty"
    return counts.most_common(1)[0][0]


def allowed(name: str) -> Optional[FrozenSet[str]]:
    """The wrappers a forced format allows. Raises KeyError for an unknown name."""
    return FORMATS[name]


def looks_like_journald_json(head: bytes) -> bool:
    """True when an input's first bytes are ``journalctl -o json`` objects."""
    h = head.lstrip()[:65536]
    return h[:2] == b'{"' and b'"MESSAGE"' in h
