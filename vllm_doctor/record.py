"""One log record, freed of its wrappers: what every step after the envelopes reads.

Kept apart from :mod:`vllm_doctor.envelopes` (which makes records) so the modules that only
read them (the catalog, the tracker, the fleet formats) import no envelope machinery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class Record:
    """One log record, freed of its wrappers.

    ``text`` is the message (what vLLM passed to its logger, or a raw stderr line);
    ``lineno`` the 1-based physical line it started on in ``source``. The remaining
    fields keep what the envelopes said: ``level`` and ``time`` (``MM-DD HH:MM:SS``,
    vLLM prints no year), the vLLM ``file`` that logged it, the innermost process
    ``proc``/``pid``/``rank``, ``pids`` of every process prefix, the journald, compose,
    pod or stream ``host``/``unit``, the wrapper ``wrapper`` that was peeled,
    ``vllm_header`` when vLLM's own record prefix was present, and Ray's ``repeated``
    count. ``cell`` marks a record read from a cell of a Markdown table row
    (:func:`vllm_doctor.envelopes.table_cells`).
    """

    source: str
    lineno: int
    text: str
    raw: str = ""
    level: Optional[str] = None
    time: Optional[str] = None
    file: Optional[str] = None
    proc: Optional[str] = None
    pid: Optional[int] = None
    rank: Optional[int] = None
    pids: List[int] = field(default_factory=list)
    host: Optional[str] = None
    unit: Optional[str] = None
    wrapper: Optional[str] = None
    vllm_header: bool = False
    repeated: int = 1
    continued: int = 0  # physical lines joined onto this record (hard-wrapped pastes)
    line_len: int = 0  # length of the (last) physical line, for spotting hard wraps
    trailing_space: bool = False  # that physical line ended in white space
    at_width: bool = False  # that physical line filled the width the input was wrapped at
    cell: bool = False  # a cell of a table row: never the rest of a line, never continued
    #: The first cell of the table row a later cell's record came from (the row's label: a
    #: model, a setting), None elsewhere: rows of different labels are different series.
    row: Optional[str] = None

    @property
    def inner_bare(self) -> bool:
        """True when nothing inside the outer wrapper (journald, docker ...) was found: no
        process prefix, no record prefix. A hard-wrapped continuation looks like this."""
        return self.proc is None and not self.vllm_header and self.level is None and self.rank is None

    @property
    def stream(self) -> str:
        """The key of the process this record came from, for keeping tracebacks apart."""
        if self.pid is not None:
            return f"pid:{self.pid}"
        if self.proc:
            return f"proc:{self.proc}"
        if self.rank is not None:
            return f"rank:{self.rank}"
        return "-"
