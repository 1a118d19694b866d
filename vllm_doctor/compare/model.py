"""The comparison as plain data (what the renderers print and ``compare.schema.json`` describes)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .._version import __version__

SCHEMA_VERSION = "1.0"
#: The order differences are ranked in (see :mod:`vllm_doctor.compare`).
CATEGORIES = ("outcome", "capacity", "throughput", "config", "timing")


@dataclass
class Evidence:
    """A line from one side: ``side`` (``old`` / ``new``), ``source``, 1-based ``line``, ``text``
    (as printed, wrappers removed), ``note``, the log's own ``time``."""

    side: str
    source: str
    line: int
    text: str
    note: Optional[str] = None
    time: Optional[str] = None


@dataclass
class Cell:
    """One side's value in a row and the line number (in that side's source) that printed it."""

    value: Any
    line: Optional[int] = None


@dataclass
class Row:
    """One line of the side-by-side table: ``key`` (vLLM's name or a fact of the run view),
    ``label``, ``unit``, ``group`` (identity, gpu, config, args, memory, graphs, timing, stats),
    each side's :class:`Cell` (None: not in the log), ``change_pct`` (new against old, numbers
    only) and ``differs``."""

    key: str
    label: str
    unit: str
    group: str
    old: Optional[Cell]
    new: Optional[Cell]
    change_pct: Optional[float] = None
    differs: bool = False


@dataclass
class Difference:
    """One difference that matters: ``rank`` (1 = first), ``category`` (:data:`CATEGORIES`),
    ``key``, ``title`` (what changed, with the numbers), ``implies`` (what it means),
    ``regression`` (the new run is worse on it), the values, ``change_pct`` and evidence lines
    from both sides."""

    category: str
    key: str
    title: str
    implies: str
    regression: bool = False
    old: Any = None
    new: Any = None
    change_pct: Optional[float] = None
    evidence: List[Evidence] = field(default_factory=list)
    rank: int = 0
    order: Tuple[Any, ...] = field(default=(), repr=False)


@dataclass
class Remedy:
    """The first remedy of a side's verdict."""

    action: str
    flag: Optional[str] = None
    why: Optional[str] = None


@dataclass
class SideVerdict:
    """What ``diagnose`` says of this one run: its headline finding's class, code, severity,
    title and phase (``healthy`` / ``ok`` when nothing failed), and its first remedy."""

    class_id: str
    code: str
    severity: str
    title: str
    phase: Optional[str] = None
    first_remedy: Optional[Remedy] = None


@dataclass
class Side:
    """One of the two runs: ``role`` (``old`` / ``new``), the ``input`` it was read from, its
    ``source`` (the input, or ``INPUT [pod or journald process]``), ``run`` (as the verdict
    numbers it in that source), ``number`` (as ``--runs`` counts it) of ``runs`` in the input,
    its lines, ``phase_reached``, ``outcome`` (``failed`` a critical finding, ``degraded`` a
    warning, ``healthy``) and ``verdict``."""

    role: str
    input: str
    source: str
    run: int
    number: int
    runs: int
    start_line: int
    end_line: int
    phase_reached: str
    outcome: str
    verdict: SideVerdict


@dataclass
class SourceRef:
    """A source named in the comparison (for redaction: the host / pod pseudonyms)."""

    name: str
    input: str


@dataclass
class Comparison:
    """The whole answer of ``compare``: both sides, the table, the ranked differences, notes.
    ``regressed`` is True when the new run fails, degrades or loses capacity or throughput
    where the old one did not: ``exit_code`` 1, else 0."""

    old: Side
    new: Side
    rows: List[Row]
    differences: List[Difference]
    notes: List[str] = field(default_factory=list)
    regressed: bool = False
    tool_version: str = __version__
    schema_version: str = SCHEMA_VERSION

    @property
    def exit_code(self) -> int:
        return 1 if self.regressed else 0

    @property
    def headline(self) -> str:
        if not self.differences:
            return "No difference that matters between the two runs."
        d = self.differences[0]
        return f"{d.title}: {d.implies}" if d.implies else d.title

    @property
    def sources(self) -> List[SourceRef]:
        return [SourceRef(s.source, s.input) for s in (self.old, self.new)]

    def to_dict(self) -> Dict[str, Any]:
        """The JSON contract (``compare.schema.json``)."""

        def diff(d: Difference) -> Dict[str, Any]:
            out = asdict(d)
            out.pop("order")
            return {"rank": out.pop("rank"), **out}

        def side(s: Side) -> Dict[str, Any]:
            out = asdict(s)
            v = out.pop("verdict")
            out["verdict"] = {"class": v.pop("class_id"), **v}
            return out

        return {
            "schema_version": self.schema_version,
            "tool": {"name": "vllm-doctor", "version": self.tool_version},
            "headline": self.headline,
            "regressed": self.regressed,
            "exit_code": self.exit_code,
            "old": side(self.old),
            "new": side(self.new),
            "differences": [diff(d) for d in self.differences],
            "rows": [asdict(r) for r in self.rows],
            "notes": list(self.notes),
        }
