"""Is this input a vLLM log, or a document that quotes one (a README, a chat, a wiki page)?

The tracker calls an input vLLM output as soon as one record holds a message only vLLM
prints (:attr:`vllm_doctor.tracker.Tracker.vllm_seen`). A page about vLLM quotes such
messages too: this project's own README quotes ``CUDA error: out of memory`` in an example,
and was diagnosed as a critical sampler warm-up OOM with a guessed ``--max-num-seqs``
(REPORT-fresh19 P9). What tells a document from a paste of a log is the rest of it: a log
pasted by hand (every one of the corpus's, and the hold-out's: 29 lines at most without it)
is short, or carries vLLM's record prefix (``INFO 01-15 06:46:16 [file.py:12]``) or a vLLM
process prefix (``(EngineCore_DP0 pid=77)``) on the lines that matter; a document is long,
carries neither, and only a few of its lines are vLLM's. Only plain text is judged so (the
pipeline asks for it): a log store's envelopes (CloudWatch's pretty JSON, journald's) spread
one record over many lines and are logs whatever they hold.
"""

from __future__ import annotations

from typing import Optional

from . import thresholds
from .envelopes import unwrap

#: How the note on such an input starts (the CLI repeats it on standard error for JSON and
#: Markdown, as it does "nothing recognisable as vLLM output").
NOT_A_LOG = "not a vLLM log: "


def quoted_document(tracker, lines: int) -> Optional[str]:
    """The note for an input of ``lines`` physical lines that only quotes vLLM messages (no
    record with vLLM's record or process prefix, at least
    :data:`~vllm_doctor.thresholds.QUOTED_DOC_MIN_LINES` lines, fewer than
    :data:`~vllm_doctor.thresholds.QUOTED_DOC_MAX_SHARE` of them recognised), None for
    anything else (a log, a short paste). ``tracker`` is the source's finished
    :class:`~vllm_doctor.tracker.Tracker`."""
    if not tracker.vllm_seen or lines < thresholds.QUOTED_DOC_MIN_LINES:
        return None
    if any(run.prefixed_records or run.vllm_pids for run in tracker.runs):
        return None
    if tracker.recognised >= thresholds.QUOTED_DOC_MAX_SHARE * lines:
        return None
    last = max((ln.lineno for run in tracker.runs for f in run.failures for ln in f.lines), default=None)
    if last is not None and lines - last < thresholds.QUOTED_DOC_TAIL_LINES:
        return None  # the input ends in its failure: a program's output, not a page quoting it
    return (
        f"{NOT_A_LOG}{tracker.recognised} of its {lines} lines are vLLM messages, none with vLLM's"
        " record or process prefix (a document, chat or page that quotes them); not diagnosed:"
        " give the server's own log"
    )


def vllm_record(text: str) -> bool:
    """True when one of an input's first lines (:meth:`vllm_doctor.pipeline._SourceReader.sniff`:
    both reading paths offer the same head) is a record in vLLM's own logger format, its level
    and time before ``file.py:N]`` (``WARNING 09-18 10:59:09 cache_engine.py:96] ...``,
    ``(EngineCore_DP0 pid=1) INFO 01-15 06:46:16 [core.py:12] ...``), whatever its message:
    vLLM printed it, though the catalog may not know what it says."""
    if "] " not in text and not text.rstrip().endswith("]"):
        return False
    return any(rec.vllm_header and rec.level is not None and rec.time is not None for rec in unwrap("", 0, text))


def prefixed_paste(prefixed: int, head: int, lines: int) -> bool:
    """True when an input whose records no catalog pattern knows is still vLLM's output: of the
    ``head`` first non-blank lines, ``prefixed`` carry vLLM's record prefix (:func:`vllm_record`),
    and the input is a short paste (fewer than :data:`~vllm_doctor.thresholds.QUOTED_DOC_MIN_LINES`
    lines) or such records are at least :data:`~vllm_doctor.thresholds.QUOTED_DOC_MAX_SHARE` of
    its head. A document quoting one such record among pages of prose stays no log (the
    measure :func:`quoted_document` applies to catalogued messages)."""
    if prefixed <= 0:
        return False
    return lines < thresholds.QUOTED_DOC_MIN_LINES or prefixed >= thresholds.QUOTED_DOC_MAX_SHARE * max(head, 1)
