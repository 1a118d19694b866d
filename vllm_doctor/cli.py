"""The ``vllm-doctor`` command: options in, verdict out, an exit code scripts can use."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import List, Optional, Tuple

import click

from . import __version__

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, EXIT_UNRECOGNISED = 0, 1, 2, 3
FORMAT_NAMES = ("auto", "plain", "journald", "journald-json", "docker", "compose", "kubectl", "kubectl-prefix")

EXIT_CODES_HELP = """\b
Exit codes:
  0  no problem found (healthy)
  1  a problem was diagnosed
  2  usage error, or an input could not be read (completely)
  3  nothing in the input is recognisable as vLLM output"""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="vllm-doctor")
def cli() -> None:
    """Read vLLM server logs and say why the server ran out of memory or slowed down,
    with the lines that prove it and what to change first.

    \b
    Examples:
      vllm-doctor diagnose server.log
      journalctl -u vllm --no-pager | vllm-doctor diagnose -
      kubectl logs deploy/vllm | vllm-doctor diagnose - --format markdown
      vllm-doctor rules
      vllm-doctor explain kv_cache_capacity
    """


@cli.command(epilog=EXIT_CODES_HELP)
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
    help="Write the verdict in --format to FILE (atomically: a temporary file, then a rename); "
    "the terminal still gets the text view. '-' means standard output.",
)
@click.option("--color/--no-color", default=None, help="Colour the text view (default: when stdout is a terminal).")
@click.option(
    "--input-format",
    type=click.Choice(list(FORMAT_NAMES)),
    default="auto",
    show_default=True,
    help="What wraps each line. auto detects it per input (journald short/iso/precise/cat/json, docker "
    "-t, docker compose, kubectl --timestamps/--prefix, Ray); name one to force it.",
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
    help="Show a progress bar on stderr for large inputs (default: when stderr is a terminal and the "
    "format is not json).",
)
@click.option(
    "-F",
    "--follow",
    is_flag=True,
    help="Follow one growing file (surviving rotation, like tail -F) or a stdin stream; print each "
    "finding as soon as it is certain (JSON Lines with --format json); Ctrl-C prints the summary.",
)
@click.option(
    "--no-redact",
    is_flag=True,
    help="Show secrets and personal data as logged (API keys, tokens, e-mails, client IPs, home-path "
    "user names, prompts). By default they are redacted in every format.",
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
    no_redact: bool,
) -> None:
    """Diagnose one or more vLLM logs.

    FILE is a log file (plain, gzip, bzip2, xz; zstd with the zstandard package), or - for
    standard input; with no FILE and standard input not a terminal, standard input is read.
    Several files are several sources, and so are the pods of `kubectl logs --prefix` and
    the hosts/processes of journald: each gets its own runs and findings.

    \b
    The verdict names the class (see `vllm-doctor rules`), the evidence lines
    (source:line), and remedies in the tuning order with the numbers from the log.
    """
    from .pipeline import build_verdict
    from .render import render

    specs: List[str] = list(files)
    if not specs:
        if sys.stdin is None or sys.stdin.isatty():
            raise click.UsageError("no input: give a FILE, or pipe a log into `vllm-doctor diagnose -`")
        specs = ["-"]
    fmt = fmt or "text"
    if follow:
        if len(specs) != 1:
            raise click.UsageError("--follow takes exactly one FILE (or - for standard input)")
        if jobs > 1:
            raise click.UsageError("--follow reads one input: -j does not apply")
        _follow(specs[0], fmt, input_format, no_redact, color)
    if progress is None:
        progress = sys.stderr.isatty() and fmt != "json" and "CI" not in os.environ
    if jobs > 1 and len(specs) > 1 and "-" not in specs:
        outcomes = _diagnose_in_workers(specs, jobs, input_format)
    else:
        outcomes = [_diagnose_one(spec, progress, input_format, chunks=True) for spec in specs]
    results = [r for rs, _ in outcomes if rs for r in rs]
    errors = [e for _, errs in outcomes for e in errs]
    unreadable = [(spec, errs[0]) for spec, (rs, errs) in zip(specs, outcomes) if not rs and errs]
    if not results:
        for e in errors:
            click.echo(f"vllm-doctor: error: {e}", err=True)
        sys.exit(EXIT_USAGE)
    verdict = build_verdict(results, unreadable)
    if not no_redact:
        from .redact import redact_verdict

        verdict = redact_verdict(verdict)
    if color is None:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if output and output != "-":
        try:
            _write_atomic(output, render(verdict, fmt))
        except OSError as exc:
            click.echo(f"vllm-doctor: error: cannot write {output}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_USAGE)
        click.echo(render(verdict, "text", color=color), nl=False)
    else:
        click.echo(render(verdict, fmt, color=color and fmt == "text"), nl=False)
    for e in errors:
        click.echo(f"vllm-doctor: error: {e}", err=True)
    if verdict.exit_code == EXIT_UNRECOGNISED:
        from .formats import TRIED

        click.echo(f"vllm-doctor: nothing recognisable as vLLM output (formats tried: {TRIED})", err=True)
    for s in verdict.sources:
        if s.malformed:
            click.echo(
                f"vllm-doctor: warning: {s.name}: {s.malformed} record(s) could not be read and were skipped", err=True
            )
    sys.exit(EXIT_USAGE if errors else verdict.exit_code)


PROGRESS_MIN_BYTES = 64 * 2**20


def _follow(spec: str, fmt: str, input_format: str, no_redact: bool, color: Optional[bool]) -> None:
    import json as _json
    import signal

    from .follow import follow
    from .redact import redact_verdict
    from .render import render
    from .verdict import Verdict

    if spec != "-" and os.path.isdir(spec):
        click.echo(f"vllm-doctor: error: {spec}: is a directory, not a log file", err=True)
        sys.exit(EXIT_USAGE)
    color = sys.stdout.isatty() if color is None else color

    def stop(signum, frame):  # SIGTERM (systemd, docker stop) ends following like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)

    def emit(finding) -> None:
        f = finding if no_redact else redact_verdict(finding)
        if fmt == "json":
            click.echo(_json.dumps({"type": "finding", **f.to_dict()}, ensure_ascii=False, default=str))
        else:
            v = Verdict(f.class_id, f.code, f.severity, f.title, findings=[f])
            text = render(v, "markdown" if fmt == "markdown" else "text", color=color)
            click.echo(text.split("\n\n", 1)[-1].rstrip() if fmt == "text" else text)
        sys.stdout.flush()

    verdict = follow(spec, input_format, emit)
    if not no_redact:
        verdict = redact_verdict(verdict)
    if fmt != "json":
        click.echo("\n--- summary ---\n")
    if fmt == "json":
        click.echo(_json.dumps({"type": "verdict", **verdict.to_dict()}, ensure_ascii=False, default=str))
    else:
        click.echo(render(verdict, fmt, color=color), nl=False)
    sys.exit(verdict.exit_code)


def _diagnose_in_workers(specs: List[str], jobs: int, input_format: str):
    """``-j``: one input per worker process (:mod:`vllm_doctor.workers`: they die with this
    process). SIGTERM ends the command like Ctrl-C: the workers are killed, nothing waits."""
    import signal

    from . import workers

    def stop(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop)
    ex = workers.pool(min(jobs, len(specs)))
    try:
        # Within a worker an input is read whole (no chunk pool inside a pool).
        return list(
            ex.map(_diagnose_one, specs, [False] * len(specs), [input_format] * len(specs), [False] * len(specs))
        )
    finally:
        workers.shutdown(ex)
        signal.signal(signal.SIGTERM, previous)


def _diagnose_one(spec: str, progress: bool, input_format: str = "auto", chunks: bool = False):
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
                result = diagnose_input(src, on_block=bar[1], input_format=input_format, chunks=chunks)
        else:
            result = diagnose_input(src, input_format=input_format, chunks=chunks)
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
    label = os.path.basename(src.name) + (f" ({src.compression})" if src.compression else "")
    task = bar.add_task(label, total=size)
    by_position = src.compression is not None or size is None  # compressed bytes, or stdin's count

    def on_read(n: int) -> None:
        if by_position:
            bar.update(task, completed=src.position())
        else:  # plain file: windows here, or chunks scanned by workers
            bar.advance(task, n)

    return bar, on_read


def _write_atomic(path: str, text: str) -> None:
    """Write via a temporary file and a rename, so readers never see half a verdict.
    A path that exists and is not a regular file (a pipe, /dev/stdout) is written in place."""
    if os.path.exists(path) and not os.path.isfile(path):
        if os.path.isdir(path):
            raise IsADirectoryError(21, "is a directory")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".vllm-doctor-", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as an ordinary new file would be, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@cli.command()
def rules() -> None:
    """List every class with its code and a one-line summary."""
    from .diagnoses import MODULES, notes

    width = max([len(m.CLASS) for m in MODULES] + [len(n) + 2 for n in notes.CODES])
    for m in MODULES:
        click.echo(f"{m.CODE}  {m.CLASS:<{width}}  {m.SUMMARY}")
        if m is notes:
            for name, code in notes.CODES.items():
                click.echo(f"{code}  {'  ' + name:<{width}}  {notes.SUMMARIES[name]}")


@cli.command()
@click.argument("name", metavar="CLASS_OR_CODE")
def explain(name: str) -> None:
    """Explain one class: meaning, causes, remedies, sources.

    CLASS_OR_CODE is a class id (kv_cache_capacity) or a code (VD101). Prints what it
    means, why it happens, the remedies in order, what does not help, and the vLLM
    sources it rests on."""
    import inspect

    from .diagnoses import BY_CLASS, BY_CODE, notes

    key = name.strip()
    mod = BY_CLASS.get(key) or BY_CODE.get(key.upper())
    if mod is None and (key in notes.CODES or key.upper() in notes.CODES.values()):
        mod = notes
    if mod is None:
        raise click.UsageError(f"unknown class or code {name!r}; `vllm-doctor rules` lists them")
    click.echo(f"{mod.CODE} {mod.CLASS} ({mod.SEVERITY})\n")
    click.echo(inspect.cleandoc(mod.__doc__ or "").replace("``", "`"))


def main() -> None:
    """Entry point: run the commands; usage errors are one line on stderr and exit 2."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click >= 8.2
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(EXIT_USAGE)
    except click.exceptions.UsageError as exc:
        hint = f" (see `vllm-doctor {exc.ctx.info_name} --help`)" if exc.ctx and exc.ctx.info_name != "cli" else ""
        click.echo(f"vllm-doctor: error: {exc.format_message()}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo("vllm-doctor: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"vllm-doctor: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    sys.exit(EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    main()
