"""The message catalog: every vLLM (and PyTorch) message vllm-doctor recognises.

Each family module (``config``, ``startup``, ``checks``, ``kv_cache``, ``oom``,
``host_memory``, ``platform``, ``scheduler``, ``requests``, ``errors``, ``timing``, ``stalls``,
``validation``, ``environment``) holds a table of :class:`Pattern` objects. A pattern
names the vLLM source file that prints its message (see ``shared/vllm-messages.md``
for the wording by version), one or more *anchor* literals that must occur in the
message before its regular expression is tried, and how to turn a match into an
:class:`~vllm_doctor.events.Event`.

:func:`recognise` finds the anchors present in a record with one scan, then runs
only those patterns, each under a timeout (the ``regex`` module's), so no line can
make matching hang. It reads the record as :func:`~vllm_doctor.catalog.normalise.join_arg_tuples`
gives it (an exception raised with several arguments prints their tuple repr: joined back into
one message), and a message the end of the record cut short still counts once its distinctive
part is there (:meth:`Pattern.cut_match`), with the values printed before the cut. The periodic
stats line, the bulk of a busy log's candidates, is read by one anchored expression when its
anchors select the two stats patterns alone (:mod:`vllm_doctor.catalog.fast`: the same events). :data:`ANCHORS` is the full literal set: anything the tool can
recognise contains one of them, which is what a block pre-filter may rely on.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Sequence, Tuple

from ..events import Event
from ..record import Record
from . import (
    arguments,
    checks,
    config,
    environment,
    errors,
    fast,
    host_memory,
    kv_cache,
    oom,
    platform,
    requests,
    scheduler,
    stalls,
    startup,
    timing,
    validation,
)
from .normalise import join_arg_tuples
from .pattern import (  # noqa: F401 - the catalog's public names
    FLOAT_FIELDS,
    FLOAT_RANGES,
    INT_FIELDS,
    NO_CUT,
    TIMEOUT,
    Pattern,
    convert,
    default_build,
    regex_timed_out,
)


def _collect() -> List[Pattern]:
    pats: List[Pattern] = []
    for mod in (
        config,
        startup,
        checks,
        kv_cache,
        oom,
        host_memory,
        platform,
        scheduler,
        requests,
        errors,
        timing,
        stalls,
        validation,
        arguments,
        environment,
    ):
        pats.extend(mod.PATTERNS)
    names = [p.name for p in pats]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise RuntimeError(f"duplicate pattern names: {sorted(dupes)}")
    return pats


PATTERNS: Sequence[Pattern] = _collect()
ANCHORS: Tuple[str, ...] = tuple(sorted({a for p in PATTERNS for a in p.anchors}))
_BY_ANCHOR: Dict[str, List[Tuple[int, Pattern]]] = {}
for _i, _p in enumerate(PATTERNS):
    for _a in _p.anchors:
        _BY_ANCHOR.setdefault(_a, []).append((_i, _p))
_ANCHOR_LIST: Tuple[str, ...] = tuple(sorted(ANCHORS))
#: For each anchor of _ANCHOR_LIST (by index), the catalog indexes of the patterns it selects.
_PATTERNS_OF: Tuple[Tuple[int, ...], ...] = tuple(tuple(i for i, _ in _BY_ANCHOR[a]) for a in _ANCHOR_LIST)

try:  # a wheel on all major platforms (the pre-filter's dependency); without it, one test per anchor
    import ahocorasick_rs as _ac
except ImportError:  # pragma: no cover - exercised only where the wheel is missing
    _ac = None
#: Every occurrence of every anchor in one pass (standard semantics, overlapping matches: an
#: anchor inside another, or overlapping it, is found too), over the UTF-8 bytes of the text.
#: A valid UTF-8 pattern matches UTF-8 bytes only at character boundaries, so the anchors
#: found are exactly those ``anchor in text`` finds (``tests/test_catalog_speed.py``).
_AUTOMATON = _ac.BytesAhoCorasick([a.encode("utf-8") for a in _ANCHOR_LIST]) if _ac is not None else None
#: Patterns (catalog order) for each set of anchors seen: the catalog's own structure, never
#: a result. Bounded: past this many distinct sets, new ones are computed each time.
_SELECTED: Dict[FrozenSet[int], Tuple[Tuple[int, Pattern], ...]] = {}
MAX_SELECTED = 4096


def _select(found: FrozenSet[int]) -> Sequence[Tuple[int, Pattern]]:
    """The patterns selected by the anchors of ``_ANCHOR_LIST`` indexed by ``found``, in
    catalog order (each once)."""
    chosen = _SELECTED.get(found)
    if chosen is None:
        chosen = tuple((i, PATTERNS[i]) for i in sorted({i for a in found for i in _PATTERNS_OF[a]}))
        if len(_SELECTED) < MAX_SELECTED:
            _SELECTED[found] = chosen
    return chosen


def _anchors_in_loop(text: str) -> Sequence[Tuple[int, Pattern]]:
    """:func:`_anchors_in` by one substring test per anchor (no ``ahocorasick_rs``)."""
    return _select(frozenset(k for k, a in enumerate(_ANCHOR_LIST) if a in text))


def _anchors_in(text: str) -> Sequence[Tuple[int, Pattern]]:
    """The patterns whose anchors occur in ``text``, in catalog order: ``(catalog index,
    pattern)`` pairs, each pattern once.

    One Aho-Corasick pass over the text (``ahocorasick_rs``, in Rust) finds every anchor
    present, where a substring test per anchor cost about 200 ``in`` tests a line
    (measured on the stats lines of bench/generate.py's busy log: 19 us against 2-3 us).
    """
    if _AUTOMATON is None:
        return _anchors_in_loop(text)
    hits = _AUTOMATON.find_matches_as_indexes(text.encode("utf-8", "surrogatepass"), overlapping=True)
    if not hits:
        return ()
    return _select(frozenset([k for k, _, _ in hits]))


#: Event kinds that are a failure on their own: one whose number cannot be read (an over-long
#: max seq len in a KV cache error) keeps its identity and leaves the value out. Every other
#: kind is its numbers (a stats line, a preemption count, a startup fact, a setting: read
#: without them it would say 0, or prove a phase it never showed): it is counted as unread
#: instead (:meth:`Catalog.notes`).
FAILURES = frozenset(
    {
        "kv_error",
        "oom",
        "host_oom",
        "no_device",
        "sampler_oom",
        "load_oom",
        "free_memory",
        "profiling_error",
        "quant_error",
        "config_error",
        "unsupported",
        "cli_error",
        "too_long",
        "exception",
        "cuda_error",
        "engine_dead",
        "stall",
    }
)
#: Line numbers kept per kind of unread message, for the note.
MAX_UNREAD_LINES = 3


class _Without:
    """A match with some groups read as not taken (None): what a build gets to read a message
    without the values that cannot be converted."""

    def __init__(self, m, drop) -> None:
        self._m, self._drop = m, frozenset(drop)

    def groupdict(self, default=None):
        return {k: (default if k in self._drop else v) for k, v in self._m.groupdict(default).items()}

    def group(self, *names):
        if len(names) > 1:
            return tuple(self.group(n) for n in names)
        name = names[0] if names else 0
        return None if name in self._drop else self._m.group(name)

    def __getitem__(self, name):
        return self.group(name)

    def __getattr__(self, name):
        return getattr(self._m, name)


def _unconvertible(m) -> List[str]:
    """The named groups of ``m`` whose text :func:`convert` refuses (a 20-digit count ...)."""
    bad = []
    for k, v in m.groupdict().items():
        if v is None:
            continue
        try:
            convert(k, v)
        except (ValueError, OverflowError):
            bad.append(k)
    return bad


class Catalog:
    """Recognises records; counts patterns abandoned on timeout in ``timeouts`` and messages
    read without a value, or not at all, because a number in them cannot be read in
    ``unread`` (see :meth:`notes`)."""

    def __init__(self) -> None:
        self.timeouts = 0
        #: (kind, kept: read without the values / dropped) -> [count, first line numbers, fields]
        self.unread: Dict[Tuple[str, bool], list] = {}

    def _count_unread(self, kind: str, kept: bool, rec: Record, fields: List[str]) -> None:
        entry = self.unread.setdefault((kind, kept), [0, [], set()])
        entry[0] += 1
        if len(entry[1]) < MAX_UNREAD_LINES:
            entry[1].append(rec.lineno)
        entry[2].update(fields)

    def _without_unreadable(self, p: Pattern, m, rec: Record):
        """The data of ``p``'s match once its build refused a value, or None (counted)."""
        bad = _unconvertible(m)
        if not bad:
            return None  # the build's own check refused the match: not a number problem
        if p.kind in FAILURES:
            try:
                data = p.build(_Without(m, bad), rec)
            except (ValueError, TypeError, KeyError, IndexError, OverflowError):
                data = None
            if data is not None:
                self._count_unread(p.kind, True, rec, bad)
                return data
        self._count_unread(p.kind, False, rec, bad)
        return None

    def notes(self) -> List[str]:
        """One line for each kind of message a number could not be read in (too long, out
        of range): ``2 stats lines not read: a number in them cannot be read (waiting; lines
        4, 9)``, or ``1 kv_error message read without max_model_len: its number cannot be
        read (line 3)``."""
        out = []
        for (kind, kept), (n, lines, fields) in sorted(self.unread.items()):
            where = ", ".join(map(str, lines)) + (", ..." if n > len(lines) else "")
            plural = "s" if n > 1 else ""
            names = ", ".join(sorted(fields))
            if kept:
                out.append(
                    f"{n} {kind} message{plural} read without {names}: the number printed cannot be read "
                    f"(line{'s' if len(lines) > 1 else ''} {where})"
                )
            else:
                out.append(
                    f"{n} {kind} line{plural} not read: a number in {'them' if n > 1 else 'it'} cannot be read "
                    f"({names}; line{'s' if len(lines) > 1 else ''} {where})"
                )
        return out

    def recognise(self, rec: Record) -> List[Event]:
        """All events in one record, in catalog order. Never raises."""
        text = rec.text
        events: List[Event] = []
        if not text:
            return events
        if "Received request " in text[:200]:
            # Request logging prints whole prompts: nothing inside them is a server message.
            return events
        text = join_arg_tuples(text)  # an exception raised with several arguments: one message
        selected = _anchors_in(text)
        if len(selected) == 2:
            stats = fast.read(text, rec, selected)  # the periodic stats line: one anchored match
            if stats is not None:
                return [stats]
        for _, p in selected:
            try:
                m = p.compiled().search(text, timeout=TIMEOUT)
                if m is None:
                    m = p.cut_match(text)  # the message cut short by the end of the record
                if m is None:
                    continue
                try:
                    data = p.build(m, rec)
                except (ValueError, OverflowError):
                    # a number that cannot be read (20 digits, out of range): the message is
                    # kept without it, or counted as unread; never silently gone
                    data = self._without_unreadable(p, m, rec)
            except TimeoutError as exc:
                if not regex_timed_out(exc):
                    raise  # a caller's timeout (a signal handler, a socket) is not ours to swallow
                self.timeouts += 1
                continue
            except (ValueError, TypeError, KeyError, IndexError, OverflowError):
                continue
            if data is None:
                continue
            events.append(Event(kind=p.kind, record=rec, data=data, phase=p.phase, pattern=p.name))
        if len(events) > 1 and any(e.kind == "engine_dead" or e.data.get("fatal") for e in events):
            # "RuntimeError: Engine core initialization failed. See root cause above." is an
            # exception line that reports a failure elsewhere: it is no root cause itself. So is
            # "TimeoutError: RPC call to execute_model timed out.": the hang it reports is the
            # stall (catalog/stalls.py), judged by the engine-stall rule.
            for e in events:
                if e.kind == "exception":
                    e.data["consequence"] = True
        return events
