"""The terminal view (rich): the answer in the first lines, then the proof.

Layout, for an operator reading an 80x24 terminal at 3 a.m.:

1. the verdict: code, class, severity and confidence, the one-line title, the source
   (at most two lines: a title that would need more is shortened here and printed whole
   under its finding);
2. ``do this first``: the first remedy's flag and value (or its action when it has no flag),
   whole; a healthy server says what it runs with instead (KV cache tokens, concurrency,
   model);
3. the key facts, in words and units (``GPU 0  23.56 GiB total, 21.75 MiB free``);
4. each finding, primary first: its file named once, the stats of a runtime episode as
   sparklines, evidence in line order (each line clipped to the clauses that matter, marked
   ``…``; the full line is in JSON and Markdown), remedies in order, what does not help;
5. one line per source, and a recap when the output is longer than the screen: one line
   (``CODE class (severity) · do this first: ACTION · source``; the source, then the
   severity give way), wrapped at words when the first thing to do is longer than that.

Everything is wrapped to the width given (the terminal's, also in a pipe; 100 columns with no
terminal at all, see :func:`terminal_size`) with
hanging indents, and no line ends in spaces. Styled text is built from parts (rich ``Text``),
never by putting log text into markup: the console has markup, emoji codes and highlighting
off, so a log line prints exactly as the (already inert, see :mod:`.inert`) verdict holds it.
"""

from __future__ import annotations

import io
import os
from typing import List, Optional, Tuple

from ..limits import MAX_EVIDENCE_CHARS
from .evidence import anchors_for, clip, evidence_rows, finding_time, is_context
from .facts import concurrency, context_rows, fact_pool, fact_rows
from .names import CLIP, short_source, why_parts
from .series import episode, episode_span, point_unit, series_rows

_STYLE = {
    "critical": "bold red",
    "warning": "bold yellow",
    "info": "cyan",
    "ok": "bold green",
    "unknown": "bold magenta",
}
#: Columns of a piped or redirected text view (no terminal to ask).
PIPE_WIDTH = 100
#: Screen height assumed when there is no terminal to ask (the recap's threshold).
PIPE_HEIGHT = 24
#: Columns below which the view does not shrink further (rich folds what is longer).
MIN_WIDTH = 40
#: Physical lines the verdict line and the "do this first" line may take at most.
HEAD_LINES = 2
#: Characters of the source name the verdict line keeps before it shortens the title.
HEAD_SOURCE_MIN = 24
#: Screen lines an incident's evidence line may take (clipped past that), and a setting's.
EVIDENCE_LINES = 3
CONTEXT_LINES = 2
#: Width of the stats sparklines, at most.
SPARK_WIDTH = 48


def terminal_size(is_tty: bool) -> Tuple[int, int]:
    """``(columns, lines)`` for the text view. ``COLUMNS`` / ``LINES`` when set (an explicit
    choice, and what keeps a script's output the same everywhere); else the size of the
    terminal the operator reads: standard output's when ``is_tty``, else (``| less``, ``| head``,
    ``> file``) standard error's or the controlling terminal's (``/dev/tty``), which bash does
    not export as COLUMNS; else, with no terminal at all (cron, CI, a service),
    :data:`PIPE_WIDTH` x :data:`PIPE_HEIGHT`."""
    cols, lines = PIPE_WIDTH, PIPE_HEIGHT
    size = _reader_terminal(is_tty)
    if size is not None:
        cols, lines = size.columns or cols, size.lines or lines
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            if name == "COLUMNS":
                cols = int(value)
            else:
                lines = int(value)
    return cols, lines


def _reader_terminal(is_tty: bool) -> Optional[os.terminal_size]:
    """The size of the terminal the output is read on: standard output's when it is one,
    else standard error's, else the controlling terminal's; None without one (or when each
    says 0 columns, as a terminal not yet sized does)."""
    fds = [1, 2] if is_tty else [2]
    for fd in fds:
        try:
            size = os.get_terminal_size(fd)
        except (OSError, ValueError):
            continue
        if size.columns > 0:
            return size
    if is_tty:
        return None
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_NOCTTY", 0))
    except OSError:  # no controlling terminal (cron, CI, a service): the pipe's default
        return None
    try:
        size = os.get_terminal_size(fd)
        return size if size.columns > 0 else None
    except OSError:
        return None
    finally:
        os.close(fd)


class _View:
    """Collects styled lines already wrapped to ``width``."""

    def __init__(self, width: int, color: bool) -> None:
        from rich.console import Console

        self.width = max(width, MIN_WIDTH)
        self.buf = io.StringIO()
        term = os.environ.get("TERM", "")
        # --color forces colour even where rich would detect none (a pipe, TERM=dumb).
        system = "truecolor" if os.environ.get("COLORTERM") in ("truecolor", "24bit") else "256"
        if "256" not in term and system != "truecolor":
            system = "standard"
        self.con = Console(
            file=self.buf,
            force_terminal=color,
            no_color=not color,
            color_system=system if color else None,
            width=self.width,
            highlight=False,
            markup=False,
            emoji=False,
            soft_wrap=True,
        )
        self.lines: List = []

    def blank(self) -> None:
        """One empty line, never two in a row, none at the top."""
        if self.lines and self.lines[-1].plain:
            self.add_line(self._text(""))

    @staticmethod
    def _text(s="", style=""):
        from rich.text import Text

        return Text(s, style=style)

    def add_line(self, text) -> None:
        """Append one styled line (already narrower than the width), trailing spaces dropped."""
        text.rstrip()
        self.lines.append(text)

    def hang(
        self, body, indent: int = 2, prefix=None, lead: int = 0, max_lines: Optional[int] = None, tail=None
    ) -> bool:
        """Wrap ``body`` so continuation lines start at column ``indent``; the first line
        starts at column ``lead`` with ``prefix``, which is padded to ``indent`` when it fits
        there (a numbered list) and runs into the text when it does not (a label); ``tail``
        (a note) is kept whole, at the end of the last line or on a line of its own. Returns
        True when ``max_lines`` cut it (the last line kept ends in ``…``)."""
        from rich.text import Text

        aligned = prefix is not None and lead + prefix.cell_len + 1 <= indent
        if prefix is not None and not aligned:
            body = Text.assemble(prefix, " ", body)
        avail = max(self.width - (indent if aligned else max(indent, lead)), 10)
        wrapped = list(body.wrap(self.con, avail))
        cut = False
        if max_lines is not None and len(wrapped) > max_lines:
            wrapped = wrapped[:max_lines]
            last = wrapped[-1]
            last.rstrip()
            if last.cell_len > avail - 2:
                last.truncate(avail - 2)
                last.rstrip()
            last.append(" " + CLIP, style="dim")
            cut = True
        if not wrapped:
            wrapped = [Text("")]
        if tail is not None:
            if wrapped[-1].cell_len + 1 + tail.cell_len <= avail:
                wrapped[-1].append(" ")
                wrapped[-1].append_text(tail)
            else:
                wrapped.extend(tail.wrap(self.con, avail))
        for i, line in enumerate(wrapped):
            if i == 0:
                head = Text(" " * lead)
                if aligned:
                    head.append_text(prefix)
                    head.append(" " * (indent - head.cell_len))
                head.append_text(line)
                self.add_line(head)
            else:
                self.add_line(Text(" " * indent).append_text(line))
        return cut

    def render(self) -> str:
        """The lines as text (ANSI styles when colour is on), no line ending in spaces."""
        for line in self.lines:
            self.con.print(line)
        out = self.buf.getvalue()
        return "\n".join(_rstrip_styled(x) for x in out.split("\n"))


def _rstrip_styled(line: str) -> str:
    """A line without trailing spaces, also when they sit inside colour codes."""
    import regex

    stripped = regex.sub(r"(?:[ \t]|\x1b\[[0-9;]*m)+$", lambda m: "".join(regex.findall(r"\x1b\[[0-9;]*m", m[0])), line)
    return stripped


#: What the headline says in place of severity and confidence when no finding was judged
#: (nothing recognisable as vLLM output: VD901 without a finding, exit 3).
NOTHING_JUDGED = "nothing judged: no vLLM output"
#: The same for vLLM's output of which no message is known (pipeline.UNJUDGED).
NOTHING_KNOWN = "nothing judged: no known message"


def headline_meta(verdict) -> str:
    """The headline's parenthesis, in one shape for every verdict: ``critical, medium
    confidence`` for a finding (VD901 ``unknown`` included), ``ok`` for a healthy server,
    :data:`NOTHING_JUDGED` for an input with no vLLM output (never ``unknown`` twice)."""
    p = verdict.primary
    if p is not None:
        return f"{verdict.severity}, {p.confidence} confidence"
    if verdict.primary_class == "unknown":
        return NOTHING_KNOWN if any(s.vllm_output for s in verdict.sources) else NOTHING_JUDGED
    return verdict.severity


def _headline(v: _View, verdict) -> bool:
    """Line 1: the verdict. Returns True when its title had to be shortened."""
    from rich.text import Text

    p = verdict.primary
    style = _STYLE.get(verdict.severity, "bold")
    meta = headline_meta(verdict)
    source = p.source if p is not None else (verdict.sources[0].name if len(verdict.sources) == 1 else "")
    # "... found in the log. · x.log": the source follows the title, not a new sentence.
    title = verdict.title.rstrip(".") if source and not verdict.title.endswith("...") else verdict.title
    words = title.split(" ")
    shortened = False
    limit = 40  # the source's characters; down to HEAD_SOURCE_MIN before the title gives way
    while True:
        text = Text.assemble(
            (f"{verdict.primary_code} {verdict.primary_class}", style), (f" ({meta})", "dim"), ": ", title
        )
        if source:
            text.append(f" \u00b7 {short_source(source, limit)}", style="dim")
        if len(text.wrap(v.con, v.width - 2)) <= HEAD_LINES or len(words) <= 3:
            break
        if source and limit > HEAD_SOURCE_MIN:
            limit = HEAD_SOURCE_MIN
            continue
        words.pop()
        title = " ".join(words).rstrip(" ,;:(") + " " + CLIP
        shortened = True
    v.hang(text, indent=2, max_lines=HEAD_LINES)
    return shortened


def _remedy_text(r, action: Optional[str] = None):
    """``--flag — action`` (``action`` replaces the remedy's own when given)."""
    from rich.text import Text

    t = Text()
    if r.flag:
        t.append(r.flag, style="bold")
        t.append(" \u2014 ")
    t.append(r.action if action is None else action)
    return t


def _do_first(v: _View, verdict) -> None:
    """Line 2: the first remedy of the primary finding, or what a healthy server runs with."""
    from rich.text import Text

    p = verdict.primary
    if p is not None and p.remedies:
        # the action whole, over the lines it needs (its reason is under the finding): a cut
        # action is another instruction
        v.hang(_remedy_text(p.remedies[0]), indent=2, prefix=Text("do this first:", style="bold"))
        return
    if p is not None:
        v.hang(Text("no remedy: the log does not show the cause (see the evidence below)"), indent=2)
        return
    summary = healthy_summary(verdict) if verdict.primary_class == "healthy" else None
    if summary:
        v.hang(Text(summary), indent=2, prefix=Text("running:", style="bold"), max_lines=HEAD_LINES)


def healthy_summary(verdict) -> Optional[str]:
    """What a server without a problem runs with, in one sentence: model, vLLM version,
    KV cache tokens and concurrency at max_model_len, the load its stats lines showed, the
    phase reached (None when none of it is known)."""
    pool = fact_pool(verdict, None)
    run = verdict.runs[0] if verdict.runs else None
    parts = []
    if pool.get("model"):
        parts.append(str(pool["model"]))
    ver = pool.get("vllm_version")
    eng = pool.get("engine") or (run.engine if run else None)
    if ver or eng:
        parts.append(" ".join(x for x in (f"vLLM {ver}" if ver else None, f"engine {eng}" if eng else None) if x))
    if pool.get("kv_tokens"):
        kv = f"KV cache {pool['kv_tokens']} tokens"
        if pool.get("max_concurrency") and pool.get("max_model_len"):
            kv += f", {concurrency(pool['max_concurrency'])} concurrency at max_model_len {pool['max_model_len']}"
        parts.append(kv)
    elif pool.get("max_model_len"):
        parts.append(f"max_model_len {pool['max_model_len']}")
    if isinstance(pool.get("peak_kv_usage_pct"), (int, float)):
        parts.append(
            f"load: KV cache up to {pool['peak_kv_usage_pct']:.1f}%, up to {pool.get('max_running', 0)} running"
            f" and {pool.get('max_waiting', 0)} waiting"
        )
    if run is not None and run.phase_reached and run.phase_reached != "unknown":
        parts.append(f"phase reached: {run.phase_reached}")
    return "; ".join(parts) or None


def _facts(v: _View, rows: List[Tuple[str, str]]) -> None:
    from rich.text import Text

    if not rows:
        return
    width = min(max(len(k) for k, _ in rows), 24) + 2
    for k, val in rows:
        v.hang(Text(val), indent=2 + width, prefix=Text(k, style="dim"), lead=2)


def _sparklines(v: _View, verdict, f) -> bool:
    from rich.text import Text

    points = episode(verdict, f)
    if not points:
        return False
    spark = min(SPARK_WIDTH, v.width - 30)
    rows = series_rows(points, max(spark, 8))
    if not rows:
        return False
    v.hang(Text(f"stats: {episode_span(points, point_unit(f))}", style="dim"), indent=4, lead=2)
    label_w = max(len(r[0]) for r in rows) + 1
    for label, line, rng in rows:
        v.add_line(Text.assemble("    ", (label.ljust(label_w), "dim"), line, " ", (rng, "dim")))
    return True


def _evidence(v: _View, f) -> bool:
    """The evidence rows of ``f``; True when any line was clipped."""
    from rich.text import Text

    rows = evidence_rows(f)
    if not rows:
        return False
    v.add_line(Text("  evidence" + (", by scrape:" if rows[0].kind == "metric" else ", by line:"), style="dim"))
    num_w = max(len(r.where) for r in rows)
    # A log line's time (HH:MM:SS) in a column; a scrape's text says its own time.
    timed = any(r.time and r.kind == "log" for r in rows)
    clipped_any = False
    for r in rows:
        prefix = Text(r.where.rjust(num_w), style="dim")
        if timed:
            prefix.append("  " + (r.time.split(" ")[-1] if r.time and r.kind == "log" else " " * 8), style="dim")
        indent = 4 + prefix.cell_len + 2
        note = r.note
        also = f"also line{'s' if len(r.also) > 1 else ''} {', '.join(map(str, r.also[:6]))}" if r.also else ""
        tail = " \u2190 " + "; ".join(x for x in (note, also) if x) if (note or also) else ""
        # The incident's own lines get up to three lines of the screen, a setting's one.
        budget = (CONTEXT_LINES if is_context(note) else EVIDENCE_LINES) * (v.width - indent) - len(tail) - 2
        text, cut = clip(r.text, budget, anchors_for(r.notes[0] if r.notes else None, f.facts, r.text))
        clipped_any |= cut
        body = Text(text)
        if r.source != f.source:
            body = Text.assemble((f"{short_source(r.source)}: ", "dim"), body)
        mark = None
        if tail:
            mark = Text(tail.strip(), style="bold" if "error" in note or "out of memory" in note else "dim")
        v.hang(body, indent=indent, prefix=prefix, lead=4, tail=mark)
    return clipped_any


def _remedies(v: _View, f) -> None:
    from rich.text import Text

    from ..superseded import superseded_line

    instead = superseded_line(f)
    if instead is not None:  # acted on: its remedies (and their old numbers) are no to-do
        v.hang(Text(instead, style="italic"), indent=4, lead=2)
        for n in f.notes:
            v.hang(Text(n, style="italic"), indent=8, prefix=Text("note:", style="dim"), lead=2)
        return
    if f.remedies:
        v.add_line(Text("  remedies, in order:", style="dim"))
    for r in f.remedies:
        action, why = why_parts(r.action, r.why)
        body = _remedy_text(r, action)
        if why:
            body.append(f" ({why})", style="dim")
        v.hang(body, indent=7, prefix=Text(f"{r.order}."), lead=4)
    if f.does_not_help:
        v.add_line(Text("  does not help:", style="dim"))
        for d in f.does_not_help:
            v.hang(Text(d), indent=6, prefix=Text("-", style="dim"), lead=4)
    for n in f.notes:
        v.hang(Text(n, style="italic"), indent=8, prefix=Text("note:", style="dim"), lead=2)


def break_path(name: str, width: int) -> List[str]:
    """``name`` (a path, maybe with its sub-source: ``x.log [pod/p/c]``) in lines of at most
    ``width`` characters, broken after a path separator (``/``) or a space, else, in a file name longer than the line, after a ``-``, ``_`` or
    ``.`` inside it, and only past that at any character: joined again, the lines are the
    name, and a line never ends in the middle of a word of it."""
    import regex

    width = max(width, 10)
    pieces: List[str] = []
    for part in regex.findall(r"[^/ ]*[/ ]+|[^/ ]+$", name) or [name]:
        if len(part) <= width:
            pieces.append(part)
            continue
        for word in regex.findall(r"[^-_.]*[-_.]+|[^-_.]+$", part):
            pieces += [word[i : i + width] for i in range(0, len(word), width)]
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return lines


def _name_lines(v: _View, name: str, indent: int, style: str = "", tail: str = "") -> None:
    """``name`` on lines of its own at ``indent``, broken only where :func:`break_path`
    breaks it (a file name copied from the screen stays whole), ``tail`` after it."""
    from rich.text import Text

    lines = break_path(name + tail, v.width - indent)
    for line in lines:
        v.add_line(Text(" " * indent + line, style=style))


def _finding(v: _View, verdict, f, primary: bool, full_title: bool, sparks_done: set) -> bool:
    """One finding section; True when an evidence line was clipped."""
    from rich.text import Text

    v.blank()
    when = finding_time(f, verdict)
    head = Text.assemble((f"{f.code} {f.class_id}", _STYLE.get(f.severity, "bold")))
    if not primary:
        head.append(f" ({f.severity}, {f.phase}, {f.confidence} confidence)", style="dim")
    if f.superseded:
        head.append(f" superseded by run {f.superseded['run']}", style="dim")
    if when:
        head.append(f" \u00b7 {when}", style="dim")
    runs = sum(1 for r in verdict.runs if r.source == f.source)
    run = f" run {f.run}" if runs > 1 else ""
    # The file is named whole: on the header's line when it fits there, else on lines of its
    # own, broken at path separators only (never in the middle of a name to be copied).
    if head.cell_len + 3 + len(f.source) + len(run) <= v.width:
        head.append(f" \u00b7 {f.source}{run}")
        v.hang(head, indent=2)
    else:
        head.append(" \u00b7")
        v.hang(head, indent=2)
        _name_lines(v, f.source, 2, tail=run)
    if not primary or full_title:
        v.hang(Text(f.title), indent=2, lead=2)
    key = (f.source, f.run)
    if f.severity != "info" and key not in sparks_done and _sparklines(v, verdict, f):
        sparks_done.add(key)
    cut = _evidence(v, f)
    _remedies(v, f)
    return cut


def _sources(v: _View, verdict, clipped: bool) -> None:
    from rich.text import Text

    v.blank()
    many = len(verdict.sources) > 1
    for s in verdict.sources:
        if s.error:
            v.hang(Text(f"{s.name}: not read: {s.error}", style="dim"), indent=2)
            continue
        runs = f", {s.runs} run" + ("" if s.runs == 1 else "s") if s.vllm_output else ""
        lines = f"{s.lines} line{'' if s.lines == 1 else 's'}"
        if s.input and s.input != s.name:
            lines = f"part of {s.input} ({lines})"
        wrappers = f", wrappers: {', '.join(s.wrappers)}" if s.wrappers else ""
        verdict_of = f", verdict {s.primary_class}" if many else ""
        about = f"{lines}, {s.recognised} recognised{runs}{verdict_of}{wrappers}"
        if len(s.name) + 2 + len(about.split(" ")[0]) <= v.width:
            v.hang(Text(f"{s.name}: {about}", style="dim"), indent=2)
        else:  # the name whole on lines of its own (broken at separators only), then the rest
            _name_lines(v, s.name, 0, style="dim", tail=":")
            v.hang(Text(about, style="dim"), indent=2, lead=2)
        for note in s.notes:
            v.hang(Text(f"note: {note}", style="dim"), indent=4)
    if clipped:
        v.hang(
            Text(
                f"{CLIP} = text left out of a long line (--format json or markdown has it,"
                f" whole up to {MAX_EVIDENCE_CHARS} characters)",
                style="dim",
            ),
            indent=2,
        )


#: How a remedy's flag starts (``--max-model-len 8192``, ``LLM(max_model_len=8192)``).
_FLAG_STARTS = ("--", "LLM(")
#: Characters of a first remedy in words the recap repeats whole (about two lines at 80
#: columns); a longer one is repeated as its instruction, the words before its first ": "
#: (the details follow there, printed whole above), with "(remedy 1 above)". A display bound.
RECAP_ACTION_CHARS = 160


def recap_action(action: str) -> str:
    """A first remedy in words as the recap repeats it: whole up to :data:`RECAP_ACTION_CHARS`;
    longer, the instruction before its first ": " and "(remedy 1 above)", where that
    instruction is at least three words (``Find who sent the SIGKILL``) and outside brackets
    and backquotes; else whole."""
    if len(action) <= RECAP_ACTION_CHARS:
        return action
    depth, quoted = 0, False
    for i, ch in enumerate(action[:RECAP_ACTION_CHARS]):
        if ch == "`":
            quoted = not quoted
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ":" and action[i + 1 : i + 2] == " " and depth == 0 and not quoted:
            lead = action[:i]
            return f"{lead} (remedy 1 above)" if len(lead.split()) >= 3 else action
    return action


def recap(verdict, width: int = 0) -> str:
    """The verdict in one line of at most ``width`` characters (0: no limit), always in the
    same shape: ``CODE class (severity) · do this first: ACTION · source`` (a long ACTION in
    words as :func:`recap_action` shortens it). What gives way,
    in order: the source, then the severity (with several sources the source is never
    dropped, only shortened after the severity went: it says which of them the line is
    about); when even the shortest does not fit, the severity stays (dropping it would not
    save the line). The code, the class and the first thing to do are never cut (a cut flag is another command, a cut action
    another instruction): when they do not fit ``width`` the line returned is longer, and
    the text view wraps it at words over the lines it needs."""
    p = verdict.primary
    head = f"{verdict.primary_code} {verdict.primary_class}"
    todo = ""
    if p is not None and p.remedies:
        r = p.remedies[0]
        todo = f"do this first: {r.flag or recap_action(r.action)}"
    source = short_source(p.source, 32) if p is not None else ""
    tries = [
        [f"{head} ({verdict.severity})", todo, source],
        [f"{head} ({verdict.severity})", todo],
        [head, todo],
    ]
    # what is returned when nothing fits (the view wraps it): dropping the severity would
    # not save the line then, so it stays
    wrapped = [f"{head} ({verdict.severity})", todo]
    if len(verdict.sources) > 1 and source:  # which of the sources: never dropped
        brief = short_source(p.source, 20)
        tries = [tries[0], [head, todo, source], [head, todo, brief]]
        wrapped.append(brief)
    for parts in tries:
        line = " \u00b7 ".join(x for x in parts if x)
        if not width or len(line) <= width:
            return line
    return " \u00b7 ".join(x for x in wrapped if x)


def _recap(v: _View, verdict) -> None:
    """The recap at the end of a long view: :func:`recap` on one line when it fits; else its
    action in words wrapped at words under it, and a flag (never split: ``--max-model-len``
    and its value on two lines are no command to copy) on a line of its own."""
    from rich.text import Text

    style = _STYLE.get(verdict.severity, "bold")
    line = recap(verdict, v.width - len("recap: "))
    if len("recap: ") + len(line) <= v.width:
        v.add_line(Text.assemble(("recap: ", "dim"), (line, style)))
        return
    p = verdict.primary
    head, sep, rest = line.partition(" \u00b7 do this first: ")
    if sep and p is not None and p.remedies and p.remedies[0].flag:
        v.add_line(Text.assemble(("recap: ", "dim"), (head + " \u00b7", style)))
        v.hang(Text("do this first: " + rest, style=style), indent=4, lead=2)
        return
    v.hang(Text(line, style=style), indent=2, prefix=Text("recap:", style="dim"))


def render_text(verdict, color: bool = False, width: int = 0, height: int = 0) -> str:
    """Render for a terminal ``width`` columns wide (0: :data:`PIPE_WIDTH`), ``color`` adds
    styles; a recap line ends an output longer than ``height`` lines (0: :data:`PIPE_HEIGHT`)."""
    from rich.text import Text

    v = _View(width or PIPE_WIDTH, color)
    shortened = _headline(v, verdict)
    p = verdict.primary
    if shortened and p is None:  # no finding below to print it whole under
        v.hang(Text(verdict.title), indent=2, lead=2)
    _do_first(v, verdict)
    # nothing judged (no vLLM output): no facts either (a document's quoted numbers are none)
    judged = p is not None or verdict.primary_class != "unknown"
    rows = fact_rows(verdict, p) + context_rows(verdict, p) if judged else []
    if rows:
        v.blank()
        _facts(v, rows)
    clipped = False
    sparks_done: set = set()
    if p is None and verdict.runs:
        run_like = [f for f in verdict.findings if f.phase == "runtime"]
        if run_like:
            v.blank()
            _sparklines(v, verdict, run_like[0])
    for f in verdict.findings:
        clipped |= _finding(v, verdict, f, f is p, shortened, sparks_done)
    _sources(v, verdict, clipped)
    if len(v.lines) > (height or PIPE_HEIGHT):
        v.blank()
        _recap(v, verdict)
    return v.render()


def render_live(finding, color: bool = False, width: int = 0) -> str:
    """One finding as ``--follow`` prints it the moment it is certain: the log's time, the
    finding's verdict line, ``do this first``, its evidence and remedies."""
    from rich.text import Text

    v = _View(width or PIPE_WIDTH, color)
    when = finding_time(finding)
    head = Text()
    if when:
        head.append(f"[{when}] ", style="bold")
    head.append_text(
        Text.assemble(
            (f"{finding.code} {finding.class_id}", _STYLE.get(finding.severity, "bold")),
            (f" ({finding.severity}, {finding.confidence} confidence)", "dim"),
            ": ",
            finding.title,
            (f" \u00b7 {short_source(finding.source)}", "dim"),
        )
    )
    v.hang(head, indent=2)
    if finding.remedies:
        v.hang(_remedy_text(finding.remedies[0]), indent=2, prefix=Text("do this first:", style="bold"))
    _evidence(v, finding)
    _remedies(v, finding)
    return v.render()


def _table(v: _View, header: List[str], rows: List[List[str]], indent: int = 2) -> None:
    """Columns padded to their widest cell; the last column takes what is left. A last cell
    that holds a flag is never clipped (a cut flag is a different command): when it does not
    fit, it goes on a line of its own below the row."""
    from rich.text import Text

    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    for n, r in enumerate([header] + rows):
        line = " " * indent + "  ".join(c.ljust(w) for c, w in zip(r[:-1], widths[:-1])) + "  " + r[-1]
        style = "dim" if n == 0 else ""
        if len(line) > v.width and n and r[-1].startswith(_FLAG_STARTS):
            v.add_line(Text(line[: len(line) - len(r[-1])].rstrip(), style=style))
            line = " " * (indent + 4) + r[-1]
        if len(line) > v.width:
            line = line[: v.width - 2].rstrip() + " " + CLIP
        v.add_line(Text(line, style=style))


def render_follow_summary(verdict, color: bool = False, width: int = 0, lines: int = 0) -> str:
    """What ``--follow`` prints when it ends (Ctrl-C, end of input): the verdict line, what to
    do first, and one table row per finding (time, code, class, source, first remedy); the
    findings themselves were printed as they came."""
    from rich.text import Text

    v = _View(width or PIPE_WIDTH, color)
    v.add_line(Text(f"summary ({lines} line{'s' if lines != 1 else ''} read)", style="bold"))
    _headline(v, verdict)
    _do_first(v, verdict)
    shown = [f for f in verdict.findings if f.severity != "info"]
    notes = len(verdict.findings) - len(shown)
    if shown:
        rows = []
        for f in shown:
            r = f.remedies[0] if f.remedies else None
            todo = (r.flag or r.action) if r else "-"
            rows.append(
                [
                    finding_time(f, verdict) or "-",
                    f.code,
                    f.class_id,
                    short_source(f.source, 28),
                    f"nothing: superseded by run {f.superseded['run']}" if f.superseded else todo,
                ]
            )
        v.blank()
        _table(v, ["time", "code", "class", "source", "do this first"], rows)
    if notes:
        v.hang(Text(f"and {notes} note{'s' if notes != 1 else ''} (severity info): see the full verdict", style="dim"))
    return v.render()
