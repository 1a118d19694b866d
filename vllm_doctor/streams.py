"""Where the command's output goes: standard output, standard error, an ``-o`` file.

Each of them can fail in ways a script must be able to tell apart:

* standard output closed (``>&-``), full (``> /dev/full``) or broken (a read error):
  :class:`OutputError` with a one-line message; the caller exits 2;
* standard output read by a pipe that closed early (``| head``): ``BrokenPipeError``
  passes through :func:`write_stdout` (after stdout is pointed at ``/dev/null`` so the
  interpreter's final flush cannot fail again); the caller exits with the verdict's code;
* standard error closed or full: :func:`write_stderr` returns False and remembers it in
  :data:`stderr_failed`; the caller exits 2, since a message was lost;
* ``-o FILE``: :func:`write_file` writes atomically (a temporary file beside the target,
  then a rename), keeps an existing target's mode (a 0600 file stays 0600) and owner
  where allowed, writes through a symbolic link to the file it names instead of replacing
  the link, writes a hard-linked file in place (a rename would split the links), writes a
  special file (a pipe, ``/dev/stdout``) in place, and refuses a target that is one of
  the inputs (same device and inode), which would destroy the log being diagnosed.

Every message is made one line and inert (:func:`vllm_doctor.render.inert.one_line`): a
file name holding a newline or an escape sequence cannot split or forge an error line.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from typing import Iterable, Optional, Union

from .render.inert import one_line

#: Longest message written to standard error (a hostile file name can be very long).
MAX_MESSAGE_CHARS = 2000

#: True once a message could not be written to standard error.
stderr_failed = False


class OutputError(Exception):
    """An output could not be written; the message is one line for the operator."""


def message(text: str) -> str:
    """``text`` as one inert line of at most :data:`MAX_MESSAGE_CHARS` characters."""
    text = one_line(str(text))
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def isatty(stream) -> bool:
    """``stream.isatty()``, False for a closed or missing stream (``>&-`` gives None)."""
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError, AttributeError):
        return False


def write_stderr(text: str) -> bool:
    """Write ``text`` (made one line) and a newline to standard error; False (and
    :data:`stderr_failed` set) when standard error is closed, full or broken."""
    global stderr_failed
    stream = sys.stderr
    try:
        if stream is None:
            raise OSError("standard error is closed")
        stream.write(message(text) + "\n")
        stream.flush()
        return True
    except (OSError, ValueError):
        stderr_failed = True
        return False


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so the exit-time flush of a broken pipe is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output and flush. Raises :class:`OutputError` when
    standard output is closed, full or fails; lets ``BrokenPipeError`` through."""
    stream = sys.stdout
    if stream is None:
        raise OutputError("cannot write to standard output: it is closed")
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise
    except (OSError, ValueError) as exc:
        _silence_stdout()
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise OutputError(f"cannot write to standard output ({reason})") from None


def _same_file(st: os.stat_result, spec: str) -> bool:
    try:
        if spec == "-":
            other = os.fstat(sys.stdin.fileno())
        else:
            other = os.stat(spec)
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino)


def write_file(path: str, text: Union[str, bytes], inputs: Iterable[str] = ()) -> None:
    """Write ``text`` (UTF-8 text, or bytes as they are: a PNG) to ``path`` as the module
    doc says. ``inputs`` are the command's
    input specs (``-`` is standard input). Raises :class:`OutputError` (one line) when the
    file cannot be written or is an input."""
    try:
        _write_file(path, text, list(inputs))
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None


def _open(path_or_fd, text: Union[str, bytes]):
    if isinstance(text, bytes):
        return open(path_or_fd, "wb") if isinstance(path_or_fd, str) else os.fdopen(path_or_fd, "wb")
    if isinstance(path_or_fd, str):
        return open(path_or_fd, "w", encoding="utf-8")
    return os.fdopen(path_or_fd, "w", encoding="utf-8")


def _write_file(path: str, text: Union[str, bytes], inputs) -> None:
    st: Optional[os.stat_result]
    try:
        st = os.stat(path)  # through symbolic links, to the file they name
    except FileNotFoundError:
        st = None
    real = os.path.realpath(path)
    if st is not None:
        if any(_same_file(st, spec) for spec in inputs):
            raise OutputError(f"refusing to write {path}: it is one of the inputs")
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(21, "is a directory")
        # a pipe, a terminal, /dev/stdout (-> /proc/self/fd/1), or a file with hard links
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or real.startswith(("/proc/", "/dev/")):
            with _open(path, text) as fh:
                fh.write(text)
            return
    d = os.path.dirname(real)
    fd, tmp = tempfile.mkstemp(prefix=".vllm-doctor-", dir=d)
    try:
        with _open(fd, text) as fh:
            fh.write(text)
            if st is not None:
                mode = st.st_mode & 0o7777
                try:
                    os.fchown(fh.fileno(), st.st_uid, st.st_gid)
                except OSError:
                    pass  # not ours to give away: the new file keeps our owner
            else:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask  # as an ordinary new file would be, not mkstemp's 0600
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
