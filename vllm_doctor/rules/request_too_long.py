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


#: Message variants (vllm_doctor.catalog.requests) whose context is max_model_len itself and
#: whose prompt count is the prompt alone, so a prompt at or over it fits no max_tokens: "...
#: your prompt contains N input tokens, which exceeds this limit even without any output
#: tokens" (v0.32+), "The decoder prompt (length N) ... is longer than the maximum model length
#: of M", and the ones that print the prompt beside the output asked for: "(N in the messages,
#: M in the completion)" (v0.5-v0.9), "you requested M output tokens and your prompt contains N
#: input tokens", "'max_tokens' ... is too large" (breakit4 item 5: "at most -2616 output
#: tokens" was advised). Not "input" (v0.15: its context is max_model_len - max_tokens, u011).
PROMPT_ALONE_VARIANTS = frozenset(
    {"prompt-alone", "decoder-prompt", "messages+completion", "output+prompt", "max_tokens"}
)


def _prompt_limit(run: Run, d, facts, failures) -> Finding:
    """V0's scheduler refused a prompt over its prompt limit, min(max_model_len,
    max_num_batched_tokens) without chunked prefill (vllm/core/scheduler.py
    _get_prompt_limit): the prompt alone is too long, so no max_tokens cap helps; when
    max_model_len is above the limit, the limit is max_num_batched_tokens."""
    limit, prompt = d["prompt_limit"], d.get("prompt_tokens")
    c = constraints(run)
    mml = c.in_force("max_model_len")
    title = f"Prompts over the scheduler's {limit}-token prompt limit ignored"
    if prompt:
        title += f" ({prompt} tokens)"
    by_batch = mml.known and mml.value is not None and mml.value > limit
    need = -(-max(prompt or 0, limit + 1) // 1024) * 1024  # the next multiple of 1024 above both
    if mml.known and mml.value is not None:
        need = min(need, int(mml.value))
    rem = [
        # set, not raise_to: the limit the message prints is the value in force when it is the
        # batch budget, whatever a version's default says
        c.set_to(
            "max_num_batched_tokens",
            need,
            "Set max_num_batched_tokens to at least the prompt (or enable chunked prefill)",
            f"the limit is the smaller of max_model_len and max_num_batched_tokens; max_model_len is {mml.why}, so the limit is "
            "max_num_batched_tokens"
            if by_batch
            else "the limit is the smaller of max_model_len and max_num_batched_tokens without chunked prefill",
        ),
        remedy(
            f"If max_model_len is what limits (it is at least {limit}), raise it only as far as the model supports "
            "and the KV cache holds",
            None,
            "the model's own context limit and the KV cache capacity are not in the log",
        )
        if not by_batch
        else None,
        remedy(
            "Or shorten the prompts in the client: the prompt alone is over the limit, so capping max_tokens "
            "does not help",
            None,
            f"{prompt} prompt tokens > {limit}" if prompt else None,
            "client",
        ),
    ]
    dont = ["Memory settings: nothing ran out of memory", "Capping max_tokens: the prompt alone is over the limit"]
    return finding(RULE, run, "runtime", title, facts, failure_evidence(failures, "ignored prompt"), rem, dont)


def check(run: Run, failures: Sequence[Failure], phase: str = "runtime") -> List[Finding]:
    if not failures:
        return []
    d = merged_data(failures)
    keys = ("max_model_len", "prompt_limit", "requested_tokens", "prompt_tokens", "max_tokens")
    facts = {k: d[k] for k in keys if k in d}
    facts["rejected_requests"] = sum(f.repeats for f in failures)
    if "prompt_limit" in d:
        return [_prompt_limit(run, d, facts, failures)]
    L, P = d.get("max_model_len"), d.get("prompt_tokens")
    if L and P is not None:
        facts["max_tokens_that_fit"] = max(0, L - P)
    if d.get("seen_from") == "client":
        # a client's transcript: the response's status and body, no server line
        title = f"A request rejected as too long (HTTP {d.get('status', 400)}, seen from the client"
        title += f"; it asked for max_tokens={d['max_tokens']})" if d.get("max_tokens") else ")"
    elif L:
        title = f"Requests over the {L}-token context rejected"
        if d.get("requested_tokens"):
            title += f" ({d['requested_tokens']} tokens asked)"
    else:
        title = "Requests rejected by the length check (_validate_input; the error text is not in the log)"
    kv_tokens = run.value("kv_tokens")
    # The prompt alone over the context, where the message measures it against max_model_len
    # itself: no max_tokens fits. (vLLM 0.15's "context length is 3 tokens ... your request has
    # 8 input tokens" printed max_model_len - max_tokens as the context: u011.)
    over = d.get("variant") in PROMPT_ALONE_VARIANTS and bool(L and P is not None and P >= L)
    rem = [
        remedy(
            f"Shorten the prompt in the client: it alone ({P} tokens) is over the {L}-token context, so no "
            "max_tokens cap helps",
            None,
            None,
            "client",
        )
        if over
        else remedy(
            "Cap max_tokens in the client at max_model_len minus the prompt length",
            None,
            f"this request could ask for at most {L - P} output tokens ({L} - {P})"
            if L and P is not None and L > P
            else None,
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
