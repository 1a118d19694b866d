"""Requests rejected (HTTP 400) because prompt + max_tokens exceed the context length.

What it means:
    The server is fine; clients send requests longer than ``max_model_len``: "This model's
    maximum context length is 8192 tokens. However, you requested 8203 tokens (7691 in the
    messages, 512 in the completion)" and its later wordings ("... you requested 15000
    output tokens and your prompt contains at least 35961 input tokens ...").

Why it happens:
    Clients (agents, eval harnesses) ask for a large ``max_tokens`` by default, or send
    conversations that have grown past the context.

Remedies, in order:
    1. Client side first: cap ``max_tokens`` at ``max_model_len - prompt tokens``, trim or
       summarise long conversations.
    2. Server side, only where KV capacity allows: a longer ``--max-model-len`` (check the
       startup "GPU KV cache size" / "Maximum concurrency" lines first).

What does not help:
    Memory settings or restarts: nothing failed on the server.

Sources:
    vllm/entrypoints/openai/serving_engine.py _validate_input; vllm/renderers/params.py
    _token_len_check; vllm/v1/engine/processor.py.
"""

from __future__ import annotations

from typing import List, Sequence

from ..run import Failure, Run
from ..verdict import Finding, Remedy
from .plan import constraints
from .rule import Rule, failure_evidence, finding, merged_data, remedy


def _raise_length(run: Run, d, kv_tokens) -> Remedy:
    """Raise max_model_len to the longest request seen, only where the KV cache holds it."""
    action = "Only if the KV cache has room: raise max_model_len on the server"
    asked = d.get("requested_tokens")
    if not kv_tokens:
        return remedy(
            action, None, "the KV cache capacity is not in the log: check 'GPU KV cache size' at startup first"
        )
    if not asked:
        return remedy(action, None, f"the KV cache holds {kv_tokens} tokens; the request's length is not in the log")
    target = min(kv_tokens, -(-asked // 1024) * 1024)
    if target < asked:
        return remedy(
            action, None, f"no: the {asked}-token request is more than the {kv_tokens} tokens the KV cache holds"
        )
    why = f"the longest request asked for {asked} tokens and the KV cache holds {kv_tokens}"
    return constraints(run).raise_to("max_model_len", target, action, why)


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    if not failures:
        return []
    d = merged_data(failures)
    facts = {k: d[k] for k in ("max_model_len", "requested_tokens", "prompt_tokens", "max_tokens") if k in d}
    facts["rejected_requests"] = sum(f.repeats for f in failures)
    L, P = d.get("max_model_len"), d.get("prompt_tokens")
    if L and P is not None:
        facts["max_tokens_that_fit"] = max(0, L - P)
    if L:
        title = f"Requests over the {L}-token context rejected"
        if d.get("requested_tokens"):
            title += f" ({d['requested_tokens']} tokens asked)"
    else:
        title = "Requests rejected by the length check (_validate_input; the error text is not in the log)"
    kv_tokens = run.value("kv_tokens")
    rem = [
        remedy(
            "Cap max_tokens in the client at max_model_len minus the prompt length",
            None,
            f"this request could ask for at most {L - P} output tokens ({L} - {P})" if L and P is not None else None,
            "client",
        ),
        remedy("Trim or summarise long conversations in the client", None, None, "client"),
        _raise_length(run, d, kv_tokens),
    ]
    dont = ["Memory settings or restarting the server: nothing failed on the server"]
    return [finding(RULE, run, "runtime", title, facts, failure_evidence(failures, "rejected request"), rem, dont)]


RULE = Rule(
    code="VD202",
    name="request_too_long",
    severity="warning",
    summary="Requests rejected: prompt + max_tokens exceed max_model_len (client-side fix first).",
    doc=__doc__,
    check=check,
)
