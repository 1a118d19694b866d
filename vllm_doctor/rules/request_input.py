"""The request before the server: when the frames show one input drove the allocation.

An out-of-memory failure whose traceback runs through the path that processes one request's
input is about that input first, whatever else the message shows: the prompt-logprobs
log-softmax (``_get_prompt_logprobs_dict``: float32 over every prompt token x the vocabulary,
vllm/v1/worker/gpu_model_runner.py) or a multimodal encoder (``embed_multimodal``,
``_process_image_input``, ``_execute_mm_encoder``: the image's patches set the shapes). The
first remedy then bounds that input; server settings come after it, and a setting the input
does not depend on (``max_model_len`` for an image's patches) is no remedy at all.

The frames' tags are :data:`vllm_doctor.frames.TAG_FUNCS` ``oversized_input`` and
``multimodal_input``. Sources: vllm/v1/worker/gpu_model_runner.py (``_get_prompt_logprobs_dict``,
``_execute_mm_encoder``); docs.vllm.ai "Conserving Memory" (``limit_mm_per_prompt``,
``mm_processor_kwargs``); fixtures/logs q25 (1.71 GiB of prompt logprobs) and q07 (37,888
vision patches of one image on a TPU).
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..run import Failure, Run
from ..verdict import Remedy
from .rule import remedy

#: What a request-path tag names, for titles and facts.
KINDS = {"multimodal_input": "multimodal input", "oversized_input": "prompt logprobs"}


def request_path(failures: Sequence[Failure]) -> Optional[str]:
    """``multimodal_input`` or ``oversized_input`` when the failures' frames (their own or a
    chained traceback's) run through one request's input processing, else None."""
    tags = set().union(*(f.all_tags for f in failures)) if failures else set()
    for tag in ("multimodal_input", "oversized_input"):
        if tag in tags:
            return tag
    return None


def bound_remedy(tag: str, run: Run) -> Remedy:
    """The first remedy for an allocation a request's input drove (``tag`` from
    :func:`request_path`): client-side, no number (the input's size is the client's)."""
    if tag == "multimodal_input":
        edge = run.value("mm_processor_kwargs")
        shown = f" (the launch command sets {edge})" if edge is not None else ""
        return remedy(
            "Bound the image/video size first: a smaller max_pixels / longest_edge in --mm-processor-kwargs"
            f"{shown}, fewer images per prompt (--limit-mm-per-prompt), or resize images before sending",
            None,
            "the encoder's shapes grow with one image's patches, not with max_model_len or the batch",
        )
    return remedy(
        "Bound the request first: send prompt_logprobs only with short prompts (or without it), since it "
        "computes a float32 log-softmax over every prompt token x the vocabulary",
        None,
        "the frames show the allocation in _get_prompt_logprobs_dict: one request's size, not the server's load",
    )
