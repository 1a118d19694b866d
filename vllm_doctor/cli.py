"""The ``vllm-doctor`` command: options in, verdict out, an exit code scripts can use."""

from __future__ import annotations

import errno
import os
import sys
from typing import List, Optional, Tuple

import click

from . import streams
from ._version import __version__
from .formats import FORMATS

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, EXIT_UNRECOGNISED = 0, 1, 2, 3
#: The distribution's name (``pip install``), which ``--version`` prints: the package index's
#: ``vllm-doctor`` is an unrelated tool that installs a command of the same name.
DIST_NAME = "vllm-log-doctor"
FORMAT_NAMES = tuple(FORMATS)  # --input-format choices: one list, in formats.py
#: The --input-format choices as help text: words a help formatter can wrap between (click
#: prints a Choice's own [a|b|...] list as one unbreakable token, wider than 80 columns).
FORMAT_CHOICES_HELP = "FORMAT is one of " + ", ".join(FORMAT_NAMES) + "."

DIAGNOSE_EXAMPLES_HELP = """\b
Examples:
  vllm-doctor diagnose server.log
  journalctl -u vllm --no-pager | vllm-doctor diagnose -
  kubectl logs deploy/vllm --timestamps | vllm-doctor diagnose - -f markdown
  vllm-doctor diagnose server.log -f json | jq '.findings[0].remedies'
  vllm-doctor diagnose -F /var/log/vllm.log
  vllm-doctor diagnose server.log --select VD1 --plot stats.svg
  vllm-doctor diagnose --metrics http://127.0.0.1:8000 --count 6"""

EXIT_CODES_HELP = """\b
Exit codes:
  0  no problem found (healthy)
  1  a problem was diagnosed
  2  usage error, an input could not be read (completely), or an output
     could not be written (standard output or error closed or full)
  3  nothing in the input is recognisable as vLLM output, or it is a
     document that only quotes vLLM messages (a README, a chat)
  130  interrupted (Ctrl-C) before there was anything to judge; Ctrl-C
       while --metrics scrapes, after the first scrape, gives the verdict
       of the scrapes taken, with its code (as -F does)"""


class _HelpFormatter(click.HelpFormatter):
    """click's help formatter, wrapping at spaces only: a hyphenated word (``journald-json``,
    ``filter-log-events``) or one longer than the line is never split across two lines."""

    def write_text(self, text: str) -> None:
        with _whole_words():
            super().write_text(text)

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        with _whole_words():
            super().write_dl(rows, col_max, col_spacing)


class _whole_words:
    """While active, click's text wrapper (``click._textwrap.TextWrapper``, which
    ``click.formatting.wrap_text`` looks up at each call) breaks neither at hyphens nor
    inside a long word. Without that module (another click), click's own wrapping stays."""

    def __enter__(self) -> None:
        try:
            from click import _textwrap
        except ImportError:  # pragma: no cover - click moved it
            self.module = None
            return
        self.module, self.original = _textwrap, _textwrap.TextWrapper

        class Whole(self.original):
            def __init__(self, *args, **kwargs) -> None:
                kwargs.update(break_on_hyphens=False, break_long_words=False)
                super().__init__(*args, **kwargs)

        _textwrap.TextWrapper = Whole

    def __exit__(self, *exc) -> None:
        if self.module is not None:
            self.module.TextWrapper = self.original


class _Context(click.Context):
    formatter_class = _HelpFormatter


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name=DIST_NAME, message="%(prog)s %(version)s")
def cli() -> None:
    """Read vLLM server logs and say why the server ran out of memory or slowed down,
    with the lines that prove it and what to change first.

    \b
    Examples:
      vllm-doctor diagnose server.log
      journalctl -u vllm --no-pager | vllm-doctor diagnose -
      kubectl logs deploy/vllm | vllm-doctor diagnose - --format markdown
      vllm-doctor compare old.log new.log
      vllm-doctor rules
      vllm-doctor explain kv_cache_capacity
    """


@cli.command(epilog=DIAGNOSE_EXAMPLES_HELP + "\n\n" + EXIT_CODES_HELP)
@click.argument("files", nargs=-1, metavar="[FILE]...")
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default=None,
    help="Output format: text (terminal), markdown (incident ticket), json (machines). Default: text.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the verdict in --format to FILE (atomically: a temporary file, then a rename; an existing "
    "FILE keeps its mode, a symlink is followed; FILE may not be one of the inputs); the terminal still "
    "gets the text view. '-' means standard output.",
)
@click.option("--color/--no-color", default=None, help="Colour the text view (default: when stdout is a terminal).")
@click.option(
    "--input-format",
    type=click.Choice(list(FORMAT_NAMES)),
    metavar="FORMAT",
    default="auto",
    show_default=True,
    help="What wraps each line. auto detects it per input (journald short/iso/precise/cat/json, docker "
    "-t / json-file, docker compose, kubectl --timestamps/--prefix, Loki logcli -o jsonl, aws logs tail / "
    "filter-log-events, vLLM JSON logging, Ray, and any prefix that repeats before vLLM's records); "
    "name one to force it. " + FORMAT_CHOICES_HELP,
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Diagnose up to N input files at once in worker processes (same verdict as one by one).",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr for large inputs and while --metrics scrapes (default: when "
    "stderr is a terminal and the format is not json).",
)
@click.option(
    "-F",
    "--follow",
    is_flag=True,
    help="Follow one growing file (surviving rotation, like tail -F) or a stdin stream; print each "
    "finding as soon as it is certain (JSON Lines with --format json); Ctrl-C prints the summary.",
)
@click.option(
    "--select",
    "select",
    metavar="CODES",
    default=None,
    help="Run only these rules: comma-separated codes, class ids or code prefixes (VD101,preemption_storm,VD3). "
    "`vllm-doctor rules` lists them. Where they find nothing, the verdict reads 'not checked' (never "
    "'healthy': the rule that explains a failure may not have run), saying so where the server never "
    "became ready; the exit code is theirs (0).",
)
@click.option(
    "--no-redact",
    is_flag=True,
    help="Show secrets and personal data as logged (API keys and tokens, credentials in URLs and headers, "
    "e-mails, IP addresses, user, host and pod names, prompts). By default they are redacted in every format "
    "(hosts, pods and users as <host-1>, <pod-1>, <user-1>, so sources stay apart).",
)
@click.option(
    "--metrics",
    "metrics_urls",
    multiple=True,
    metavar="URL",
    help="Scrape a live server's Prometheus metrics at URL (http://host:8000, /metrics is added) "
    "--count times, --interval seconds apart. A FILE that is a scrape, a directory of scrapes or a "
    "query_range JSON export is read as metrics too.",
)
@click.option(
    "--interval", type=click.FloatRange(min=0), default=10.0, show_default=True, help="Seconds between scrapes."
)
@click.option(
    "--count",
    type=click.IntRange(1, 100000),
    default=6,
    show_default=True,
    help="Scrapes of --metrics to take (rates need two or more).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE.svg|FILE.png",
    help="Also write a chart of the stats lines (KV cache usage, requests running and waiting, tokens/s) "
    "of the primary finding's run, to attach to a ticket. Needs the plot extra: "
    "pip install '.[plot]' in the checkout.",
)
def diagnose(
    files: Tuple[str, ...],
    fmt: Optional[str],
    output: Optional[str],
    color: Optional[bool],
    input_format: str,
    jobs: int,
    progress: Optional[bool],
    follow: bool,
    select: Optional[str],
    no_redact: bool,
    metrics_urls: Tuple[str, ...] = (),
    interval: float = 10.0,
    count: int = 6,
    plot_path: Optional[str] = None,
) -> None:
    """Diagnose one or more vLLM logs.

    FILE is a log file (plain, gzip, bzip2, xz; zstd with the zstandard package), or - for
    standard input; with no FILE and standard input not a terminal, standard input is read.
    A FILE holding a Prometheus scrape of vLLM's /metrics (text or OpenMetrics), a
    query_range JSON export, or a directory of scrapes (one per file, name order) is read as
    metrics; --metrics URL scrapes a live server.
    Several files are several sources, and so are the pods of `kubectl logs --prefix` and
    the hosts/processes of journald: each gets its own runs and findings.

    \b
    The verdict names the class (see `vllm-doctor rules`), the evidence lines
    (source:line), and remedies in the tuning order with the numbers from the log.

    The text view is wrapped to the terminal's width, also when piped (`| less`:
    standard error's or /dev/tty's terminal); COLUMNS sets it; with no terminal at
    all (cron, CI) it is 100 columns.
    """
    from .pipeline import build_verdict
    from .render import render

    specs: List[str] = list(files)
    if not specs and not metrics_urls:
        if sys.stdin is None or streams.isatty(sys.stdin):
            raise click.UsageError("no input: give a FILE, or pipe a log into `vllm-doctor diagnose -`")
        specs = ["-"]
    if specs.count("-") > 1:
        raise click.UsageError("standard input (-) can be read only once")
    if "-" in specs and getattr(sys.stdin, "buffer", None) is None:
        _fail("cannot read standard input: it is closed")
    _ERRORS.redact = not no_redact
    fmt = fmt or "text"
    from .rules import UnknownRule, select_rules

    if select is not None and not select.replace(",", "").strip():
        raise click.BadParameter(
            f"{select!r} names no rules: give codes, class ids or code prefixes (`vllm-doctor rules` lists them)",
            param_hint="--select",
        )
    try:
        chosen = select_rules(select.split(",")) if select else None
    except UnknownRule as exc:
        raise click.BadParameter(exc.args[0], param_hint="--select") from None
    # Metrics inputs (a scrape, a directory of scrapes, a query_range export, --metrics URL)
    # are split off the FILE arguments and read into series, judged below beside the logs.
    scrape_bar = (
        progress if progress is not None else streams.isatty(sys.stderr) and fmt != "json" and "CI" not in os.environ
    )
    series, specs, metric_errors = _metrics_inputs(specs, metrics_urls, interval, count, scrape_bar)
    if follow and (series or metric_errors):
        raise click.UsageError("--follow reads a log: metrics inputs do not apply")
    plot_fmt = "svg"
    if plot_path:
        from .render.plot import PlotError, plot_format

        try:
            plot_fmt = plot_format(plot_path)
        except PlotError as exc:
            raise click.BadParameter(str(exc).split(": ", 1)[-1], param_hint="--plot") from None
        if follow:
            raise click.UsageError("--plot draws a finished log: it does not apply to --follow")
    if follow:
        if len(specs) != 1:
            raise click.UsageError("--follow takes exactly one FILE (or - for standard input)")
        if jobs > 1:
            raise click.UsageError("--follow reads one input: -j does not apply")
        _follow(specs[0], fmt, input_format, no_redact, color, chosen)
    if progress is None:
        progress = streams.isatty(sys.stderr) and fmt != "json" and "CI" not in os.environ
    if jobs > 1 and len(specs) > 1 and "-" not in specs:
        outcomes = _diagnose_in_workers(specs, jobs, input_format, chosen)
    else:
        outcomes = [_diagnose_one(spec, progress, input_format, chosen, chunks=True) for spec in specs]
    results = [r for rs, _ in outcomes if rs for r in rs]
    errors = [e for _, errs in outcomes for e in errs] + metric_errors
    unreadable = [(spec, errs[0]) for spec, (rs, errs) in zip(specs, outcomes) if not rs and errs]
    if series:
        from .pipeline import metrics_results

        results += metrics_results(series, results, chosen)
    if not results:
        for e in errors:
            _error(e)
        sys.exit(EXIT_USAGE)
    verdict = build_verdict(results, unreadable, chosen)
    pseudonyms = None
    if not no_redact:
        from .redact import Redactor, redact_verdict

        redactor = Redactor()
        verdict = redact_verdict(verdict, redactor)
        pseudonyms = redactor.pseudonym_note()
    tty = streams.isatty(sys.stdout)
    if color is None:
        color = tty and "NO_COLOR" not in os.environ
    width, height = _screen(tty)
    plot_note = _write_plot(verdict, plot_path, plot_fmt, specs) if plot_path else None
    if output and output != "-":
        try:
            streams.write_file(output, render(verdict, fmt), specs)
        except streams.OutputError as exc:
            _fail(str(exc))
        failed = _emit(render(verdict, "text", color=color, width=width, height=height), errors)
    else:
        failed = _emit(render(verdict, fmt, color=color and fmt == "text", width=width, height=height), errors)
    if plot_note:
        streams.write_stderr(plot_note[1])
        failed = failed or plot_note[0]
    if pseudonyms:
        streams.write_stderr(pseudonyms)
    if verdict.exit_code == EXIT_UNRECOGNISED and fmt != "text" and not (output and output != "-"):
        # The text view says it in its sources block; JSON and Markdown on standard output
        # are for a program or a ticket, so the operator reads it here, once.
        from .formats import TRIED
        from .quoted import NOT_A_LOG

        quoted = [n for s in verdict.sources for n in s.notes if n.startswith(NOT_A_LOG)]
        _say(f"vllm-doctor: {quoted[0] if quoted else f'nothing recognisable as vLLM output (formats tried: {TRIED})'}")
    for s in verdict.sources:
        if s.internal_errors:
            _error(
                f"{s.name}: {s.internal_errors} internal error(s), the first: {s.first_internal_error} (please report it)",
                "warning",
            )
    sys.exit(EXIT_USAGE if errors or failed or streams.stderr_failed else verdict.exit_code)


def _screen(tty: bool) -> Tuple[int, int]:
    """Columns and lines of the text view: COLUMNS / LINES when set, else the terminal's (in a
    pipe, standard error's or /dev/tty's), else 100 x 24 (see render.text.terminal_size)."""
    from .render.text import terminal_size

    return terminal_size(tty)


def _write_plot(verdict, path: str, fmt: str, specs: List[str]) -> Optional[Tuple[bool, str]]:
    """Write the stats chart to ``path``; ``(failed, one-line message)`` to report, or None.
    No stats lines is a note (nothing to draw is not an error); a missing plotting library or
    a file that cannot be written is an error (exit 2)."""
    from .render import chart
    from .render.plot import NothingToPlot, PlotError

    try:
        streams.write_file(path, chart(verdict, fmt), specs)
    except NothingToPlot as exc:
        return False, f"vllm-doctor: note: --plot: {exc} ({path} not written)"
    except (PlotError, streams.OutputError) as exc:
        return True, f"vllm-doctor: error: {exc}"
    return None


def _metrics_inputs(specs: List[str], urls: Tuple[str, ...], interval: float, count: int, bar: bool = False):
    """Split metrics inputs off the FILE arguments and read them (METRICS-HOOK).

    Returns ``(series, log specs, one-line errors)``. A FILE that is a directory, or whose
    content is Prometheus text / OpenMetrics / a query JSON answer, is metrics; a URL given
    as FILE is a usage error with the hint to use --metrics. While a live server is scraped,
    ``bar`` shows the scrapes taken on standard error; Ctrl-C or SIGTERM after the first one
    stops scraping and the verdict covers the scrapes taken (said on standard error)."""
    from .metrics import MetricsError, ScrapingInterrupted, is_url, read_metrics, sniff_path, url_problem

    for url in urls:
        problem = url_problem(url)
        if problem:
            raise click.BadParameter(f"{url!r}: {problem} (http://host:port)", param_hint="--metrics")
    for spec in specs:
        if is_url(spec):
            raise click.UsageError(
                f"{spec}: vllm-doctor reads log files (or - for standard input), not URLs; to scrape a live "
                f"server's Prometheus metrics, give it as --metrics {spec}"
            )
    series, logs, errors = [], [], []
    todo = list(urls)
    for spec in specs:
        if spec != "-" and sniff_path(spec):
            todo.append(spec)
        else:
            logs.append(spec)
    live = [u for u in todo if is_url(u)]
    if bar and live:
        every = f"every {interval:g} s, " if count > 1 else ""
        streams.write_stderr(
            f"scraping {', '.join(map(_shown_url, live))} {every}{count} time{'s' if count != 1 else ''}: "
            "Ctrl-C for the verdict so far"
        )
    with _ScrapeProgress(bar and bool(live)) as shown:
        for spec in todo:
            try:
                series.extend(read_metrics(spec, interval=interval, count=count, progress=shown.task))
            except MetricsError as exc:
                errors.append(str(exc))
            except ScrapingInterrupted as exc:
                series.extend(exc.series)
                shown.stop()
                _say(
                    f"vllm-doctor: interrupted after {exc.scrapes} scrape{'s' if exc.scrapes != 1 else ''}: "
                    "the verdict covers the scrapes taken"
                )
                break
    return series, logs, errors


class _ErrorRedaction:
    """Whether messages on standard error are redacted (:func:`vllm_doctor.redact.redact_secrets`:
    a URL's user:password, ``?token=``, a server's reason phrase can carry secrets);
    ``--no-redact`` turns it off for the command that has it."""

    redact = True


_ERRORS = _ErrorRedaction()


def _error(text: str, level: str = "error") -> bool:
    """``vllm-doctor: LEVEL: TEXT`` on standard error, inert, secrets redacted: one line
    for a script or a log (standard error not a terminal), and on a terminal wrapped at
    words to its width (a path or URL longer than the line is never split; continuation
    lines indented two spaces), as the text view is."""
    text = str(text)
    if _ERRORS.redact:
        from .redact import redact_secrets

        text = redact_secrets(text)
    return _say(f"vllm-doctor: {level}: {text}")


def _say(line: str) -> bool:
    """``line`` on standard error: as it is for a script or a log, wrapped at words to the
    terminal's width when standard error is one (see :func:`_error`)."""
    width = _stderr_width()
    if not width or len(line) <= width:
        return streams.write_stderr(line)
    import textwrap

    ok = True
    for part in textwrap.wrap(
        streams.message(line), width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    ):
        ok = streams.write_stderr(part) and ok
    return ok


def _stderr_width() -> int:
    """Columns of the terminal standard error is (``COLUMNS`` when set), 0 when it is none."""
    try:
        if sys.stderr is None or not sys.stderr.isatty():
            return 0
    except (OSError, ValueError):
        return 0
    from .render.text import MIN_WIDTH, terminal_size

    return max(terminal_size(True)[0], MIN_WIDTH)


def _shown_url(url: str) -> str:
    """``url`` as the scraping banner shows it: scheme, host, port and path, without a user,
    password or query string (where a token would be)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class _ScrapeProgress:
    """A progress bar on standard error while live servers are scraped (``shown``: else
    nothing is drawn): one row per URL, scrapes taken of --count, the time left; SIGTERM
    stops scraping as Ctrl-C does. ``task(url)`` gives the callback for
    :func:`vllm_doctor.metrics.read_url`."""

    def __init__(self, shown: bool) -> None:
        self.bar = None
        if shown:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            self.bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                "{task.fields[note]}",
                console=Console(stderr=True),
                transient=True,
            )

    def __enter__(self) -> "_ScrapeProgress":
        import signal

        def stop(signum, frame):
            raise KeyboardInterrupt

        try:
            self.previous = signal.signal(signal.SIGTERM, stop)
        except ValueError:  # not the main thread (library use): SIGTERM keeps its meaning
            self.previous = None
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        import signal

        self.stop()
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)

    def stop(self) -> None:
        """Clear the bar (before a message or the verdict is printed)."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def task(self, url: str):
        """The ``progress(taken, count, failure)`` callback for scraping ``url``, or None."""
        if self.bar is None:
            return None
        from rich.markup import escape

        bar = self.bar
        where = _shown_url(url).split("://", 1)[-1].split("/", 1)[0]
        task = bar.add_task(escape(streams.message(f"scrapes of {where}")), total=None, note="")

        def update(taken: int, count: int, failure) -> None:
            note = escape(streams.message(failure)) if failure else ""
            bar.update(task, completed=taken, total=count, note=note)

        return update


def _fail(text: str) -> None:
    """One line on standard error, exit 2."""
    _error(text)
    sys.exit(EXIT_USAGE)


PROGRESS_MIN_BYTES = 64 * 2**20


def _follow(
    spec: str, fmt: str, input_format: str, no_redact: bool, color: Optional[bool], select: Optional[frozenset] = None
) -> None:
    import signal

    from .follow import follow
    from .redact import Redactor, redact_verdict
    from .render import render_follow_summary, render_live
    from .render.json import dumps
    from .sources import InputError, compression_of

    if spec != "-" and os.path.isdir(spec):
        _fail(f"{spec}: is a directory, not a log file")
    if spec != "-" and compression_of(spec):  # said before "following ...": nothing is followed
        _fail(f"{spec}: cannot follow a compressed file ({compression_of(spec)}); diagnose it without -F")
    tty = streams.isatty(sys.stdout)
    color = tty and "NO_COLOR" not in os.environ if color is None else color
    width, _ = _screen(tty)
    redactor = Redactor()  # one for the session: findings and the summary name hosts alike

    def stop(signum, frame):  # SIGTERM (systemd, docker stop) ends following like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    what = "standard input" if spec == "-" else spec
    ends = "the summary when it ends (or Ctrl-C)" if spec == "-" else "Ctrl-C for the summary"
    streams.write_stderr(f"following {what}: findings appear as they are certain; {ends}")
    shown = [0]

    def emit(finding) -> None:
        f = finding if no_redact else redact_verdict(finding, redactor)
        if fmt == "json":
            click.echo(dumps({"type": "finding", **f.to_dict()}))
        else:
            text = render_live(f, fmt, color=color, width=width)
            click.echo(("\n" if shown[0] else "") + text.rstrip("\n"))
        shown[0] += 1
        sys.stdout.flush()

    try:
        verdict = follow(spec, input_format, emit, select=select)
    except InputError as exc:
        _fail(str(exc))
    if not no_redact:
        verdict = redact_verdict(verdict, redactor)
    if fmt == "json":
        click.echo(dumps({"type": "verdict", **verdict.to_dict()}))
    else:
        lines = max((s.lines for s in verdict.sources), default=0)
        click.echo(("\n" if shown[0] else "") + render_follow_summary(verdict, fmt, color, width, lines), nl=False)
    sys.exit(verdict.exit_code)


def _emit(text: str, errors: List[str]) -> bool:
    """Write a command's answer to standard output, then its one-line ``errors`` to standard
    error. Returns True when standard output failed (said on standard error); a closed pipe
    (``| head``) is no failure: the reader has what it wanted, the exit code still tells."""
    failed = False
    try:
        streams.write_stdout(text)
    except streams.OutputError as exc:
        _error(exc)
        failed = True
    except BrokenPipeError:
        pass
    for e in errors:
        _error(e)
    return failed


def _diagnose_in_workers(specs: List[str], jobs: int, input_format: str, select: Optional[frozenset] = None):
    """``-j``: one input per worker process (:mod:`vllm_doctor.workers`: they die with this
    process). SIGTERM ends the command like Ctrl-C: the workers are killed, nothing waits."""
    import signal

    from . import workers

    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    ex = workers.pool(min(jobs, len(specs)))
    n = len(specs)
    try:
        # Within a worker an input is read whole (no chunk pool inside a pool).
        return list(ex.map(_diagnose_one, specs, [False] * n, [input_format] * n, [select] * n, [False] * n))
    finally:
        workers.shutdown(ex)
        signal.signal(signal.SIGTERM, previous)


def _diagnose_one(
    spec: str, progress: bool, input_format: str = "auto", select: Optional[frozenset] = None, chunks: bool = False
):
    """Open and diagnose one input: (SourceResult or None, [one-line errors]).
    Top-level so worker processes (-j) can run it."""
    from .pipeline import diagnose_input
    from .sources import InputError, open_input

    errors: List[str] = []
    try:
        src = open_input(spec)
    except InputError as exc:
        return None, [str(exc)]
    result = None
    bar = _progress_bar(src) if progress else None
    try:
        if bar is not None:
            with bar[0]:
                result = diagnose_input(src, on_block=bar[1], input_format=input_format, select=select, chunks=chunks)
        else:
            result = diagnose_input(src, input_format=input_format, select=select, chunks=chunks)
    except InputError as exc:
        errors.append(str(exc))
    except Exception as exc:  # noqa: BLE001 - never a traceback: name the input and the error
        errors.append(f"{src.name}: could not be diagnosed ({type(exc).__name__}: {str(exc)[:120]})")
    finally:
        if src.name != "<stdin>":
            src.stream.close()
    if src.truncated:
        # Diagnose what could be read, but do not let a partial read pass for a clean bill.
        errors.append(f"{src.name}: compressed data ends early or is corrupt; the verdict covers what could be read")
        for r in result or ():
            r.summary.truncated = True
    return result, errors


def _progress_bar(src):
    """A rich progress bar on stderr, or None: for a large file, plain or compressed (the
    compressed bytes read against the file's size), and for standard input (bytes read, no
    total). Returns ``(bar, on_read)``; ``on_read`` is called after each window is read."""
    size = src.size()
    if size is not None and size < (PROGRESS_MIN_BYTES if src.compression is None else PROGRESS_MIN_BYTES // 8):
        return None
    if size is None and src.name != "<stdin>":
        return None
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    from rich.markup import escape

    # the description column is rich markup: a file name is escaped and made one inert line
    label = os.path.basename(src.name) + (f" ({src.compression})" if src.compression else "")
    task = bar.add_task(escape(streams.message(label)), total=size)
    by_position = src.compression is not None or size is None  # compressed bytes, or stdin's count

    def on_read(n: int) -> None:
        if by_position:
            bar.update(task, completed=src.position())
        else:  # plain file: windows here, or chunks scanned by workers
            bar.advance(task, n)

    return bar, on_read


COMPARE_EXIT_HELP = """\b
Exit codes:
  0  the new run is no worse than the old one
  1  the new run fails, degrades, or loses KV cache capacity or throughput
     where the old one did not
  2  usage error, an input could not be read (completely), it is not vLLM
     output, it holds no such run, or an output could not be written"""


def _run_pair(value: Optional[str]) -> Optional[Tuple[int, int]]:
    if value is None:
        return None
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 2 or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise click.BadParameter(f"{value!r}: give two run numbers, A,B (e.g. 1,2)", param_hint="--runs")
    return int(parts[0]), int(parts[1])


@cli.command(epilog=COMPARE_EXIT_HELP, short_help="Compare two server runs: what changed, what matters first.")
@click.argument("logs", nargs=-1, metavar="OLD [NEW]")
@click.option(
    "--runs",
    "runs",
    metavar="A,B",
    default=None,
    help="Compare run A with run B. With one log: two runs of it (numbered as `diagnose` numbers them, 1 "
    "the first server start; where the log holds several processes, such as a journald restart under a new "
    "PID, in the order they start). With two logs: run A of OLD and run B of NEW (default: each log's newest).",
)
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="text (terminal), markdown (incident ticket), json (compare.schema.json).",
)
@click.option("--color/--no-color", default=None, help="Colour the text view (default: when stdout is a terminal).")
@click.option(
    "--input-format",
    type=click.Choice(list(FORMAT_NAMES)),
    metavar="FORMAT",
    default="auto",
    show_default=True,
    help="What wraps each line, as for diagnose. " + FORMAT_CHOICES_HELP,
)
@click.option("--no-redact", is_flag=True, help="Show secrets and personal data as logged (see diagnose --help).")
def compare(
    logs: Tuple[str, ...], runs: Optional[str], fmt: str, color: Optional[bool], input_format: str, no_redact: bool
) -> None:
    """What changed between two server runs, and which difference matters first.

    For "it broke after the upgrade": OLD is the log of the run that worked, NEW of the one
    that does not (each a file or - for standard input, not both -), or one log holding both
    starts (a journald log with a restart) with --runs A,B.

    \b
    Examples:
      vllm-doctor compare v0.10.log v0.11.log
      journalctl -u vllm --no-pager | vllm-doctor compare - --runs 1,2
      kubectl logs deploy/vllm --previous > old.log
      kubectl logs deploy/vllm | vllm-doctor compare old.log - --format markdown
      vllm-doctor compare old.log new.log --format json | jq '.differences[0]'

    Side by side: vLLM version, engine and model runner, model, GPU memory and
    count (TP/PP/DP), every setting and flag that differs, weights, KV cache GiB and
    tokens, max concurrency, CUDA graph memory and sizes, compile and start-up
    times, stats medians (throughput, KV usage, running, waiting) and each run's
    verdict with its first remedy. Then the differences, ranked: the outcome (failed
    where the other did not), capacity (by the size of the change), throughput,
    config, timings; each says what it implies, with lines from both logs
    (source:line). The thresholds are vllm_doctor/thresholds.py COMPARE_*.
    """
    from .compare import CompareError, compare_runs, pick_run, redact_comparison
    from .render.compare import render_compare

    pair = _run_pair(runs)
    if len(logs) not in (1, 2):
        raise click.UsageError("give OLD and NEW (two logs), or one log and --runs A,B")
    if len(logs) == 1 and pair is None:
        raise click.UsageError(f"one log compares two of its runs: add --runs A,B (e.g. {logs[0]} --runs 1,2)")
    if logs.count("-") > 1:
        raise click.UsageError("OLD and NEW cannot both be standard input (-)")
    if "-" in logs and getattr(sys.stdin, "buffer", None) is None:
        _fail("cannot read standard input: it is closed")
    _ERRORS.redact = not no_redact
    errors: List[str] = []
    read = []
    for spec in logs:
        results, errs = _diagnose_one(spec, False, input_format)
        if not results:
            _fail(errs[0] if errs else f"{spec}: could not be read")
        errors += errs
        read.append((results, results[0].summary.input or spec))
    try:
        if len(read) == 1:
            ((results, name),) = read
            old, new = pick_run(results, name, pair[0]), pick_run(results, name, pair[1])
        else:
            old = pick_run(read[0][0], read[0][1], pair[0] if pair else None)
            new = pick_run(read[1][0], read[1][1], pair[1] if pair else None)
        comparison = compare_runs(old, new)
    except CompareError as exc:
        for e in errors:
            _error(e)
        message = str(exc)
        if not no_redact:  # the message names sources: their hosts and pods get the same pseudonyms
            from .redact import Redactor

            redactor = Redactor()
            for results, _ in read:
                for res in results:
                    redactor.source_name(res.summary.name, res.summary.input)
            message = redactor.text(message)
        _fail(message)
    if not no_redact:
        comparison = redact_comparison(comparison)
    tty = streams.isatty(sys.stdout)
    if color is None:
        color = tty and "NO_COLOR" not in os.environ
    width, _ = _screen(tty)
    failed = _emit(render_compare(comparison, fmt, color=color and fmt == "text", width=width), errors)
    sys.exit(EXIT_USAGE if errors or failed or streams.stderr_failed else comparison.exit_code)


def _text_width() -> int:
    """Columns for ``rules`` and ``explain``: the terminal's (at most 100, so a page reads
    as a page), 100 in a pipe; COLUMNS overrides."""
    cols, _ = _screen(streams.isatty(sys.stdout))
    return max(40, min(cols, 100))


@cli.command(short_help="List every class: its code and a one-line summary.")
def rules() -> None:
    """List every class with its code and a one-line summary (`explain CODE` for its page)."""
    import textwrap

    from .rules import RULES

    width = max(len(r.name) for r in RULES)
    # One line a rule in a pipe (for grep); on a terminal, wrapped under the summary column.
    cols = _text_width() if streams.isatty(sys.stdout) or os.environ.get("COLUMNS", "").isdigit() else 0
    indent = " " * (len(RULES[0].code) + width + 4)
    out: List[str] = []
    for r in RULES:
        lead = f"{r.code}  {r.name:<{width}}  "
        if not cols:
            out.append(lead + r.summary)
            continue
        out.append(
            textwrap.fill(
                r.summary,
                cols,
                initial_indent=lead,
                subsequent_indent=indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    _answer("\n".join(out) + "\n")


def _answer(text: str) -> None:
    """Print a page (``rules``, ``explain``) as ``diagnose`` prints its verdict: exit 2 with a
    one-line error when standard output is closed or full, 0 when a reader closed the pipe."""
    if _emit(text, []) or streams.stderr_failed:
        sys.exit(EXIT_USAGE)


@cli.command()
@click.argument("name", metavar="CLASS_OR_CODE")
def explain(name: str) -> None:
    """Explain one class: meaning, causes, remedies, sources.

    CLASS_OR_CODE is a class id (kv_cache_capacity) or a code (VD101), in any case, with - or _.
    Prints what it means, why it happens, the remedies in order, what does not help, and the
    vLLM sources it rests on."""
    from .render.pages import rewrap
    from .rules import UnknownRule, lookup

    try:
        rule = lookup(name)
    except UnknownRule as exc:
        hint = "" if exc.listed else "; `vllm-doctor rules` lists them"
        raise click.BadParameter(exc.args[0] + hint, param_hint="CLASS_OR_CODE") from None
    _answer(f"{rule.code} {rule.name} ({rule.severity})\n\n" + rewrap(rule.explanation, _text_width()) + "\n")


for _command in (cli, *cli.commands.values()):
    _command.context_class = _Context  # every --help wraps at spaces only


def main() -> None:
    """Entry point: run the commands; usage errors are one line on stderr and exit 2."""
    _ERRORS.redact = True  # until a command's --no-redact says otherwise
    try:
        cli.main(prog_name="vllm-doctor", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(EXIT_USAGE)
    except click.exceptions.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        _error(f"{exc.format_message()}{hint}")
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        streams.write_stderr("vllm-doctor: interrupted")
        sys.exit(130)
    except click.ClickException as exc:
        _error(exc.format_message())
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # rules, explain, --help into a closed pipe
        streams._silence_stdout()
        sys.exit(EXIT_OK)
    except OSError as exc:
        if not write_failed(exc):
            _internal_error(exc)
        streams._silence_stdout()  # standard output full or failing under --help / --version
        _error(f"cannot write output ({exc.strerror or exc})")
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # noqa: BLE001 - the last guard: a bug is one line, not a traceback
        _internal_error(exc)
    sys.exit(EXIT_OK)


#: errno values that only a write gives: the disk or quota is full, the file too large.
_WRITE_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG") if hasattr(errno, n))


def write_failed(exc: OSError) -> bool:
    """True when ``exc``, reaching the top of the command, is standard output failing (a full
    disk, a closed or failing descriptor: standard output still cannot be flushed). Any other
    OSError (a clock value out of range, a read error) is a bug to report, never "cannot
    write output"."""
    if exc.errno in _WRITE_ERRNOS:
        return True
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        return True
    return False


def _internal_error(exc: BaseException) -> None:
    """The last guard: a bug is one line (the traceback with VLLM_DOCTOR_DEBUG=1), exit 2."""
    if os.environ.get("VLLM_DOCTOR_DEBUG"):
        raise exc
    _error(
        f"{type(exc).__name__}: {str(exc)[:200]} (a bug: please report it; VLLM_DOCTOR_DEBUG=1 shows the traceback)",
        "internal error",
    )
    sys.exit(EXIT_USAGE)


if __name__ == "__main__":  # pragma: no cover
    main()
