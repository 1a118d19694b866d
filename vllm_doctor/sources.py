"""Open the inputs and hand out their lines, one pass, constant memory.

An input is a file path, ``-`` for standard input, or (from the library) any iterable
of ``str``/``bytes`` lines. Files compressed with gzip, bzip2 or xz are recognised by
their magic bytes, whatever their name. Bytes are decoded as UTF-8; invalid sequences
become U+FFFD and are counted, never fatal.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import sys
import zlib
from dataclasses import dataclass
from typing import IO, Iterable, Iterator, Optional, Tuple, Union

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"))


class InputError(Exception):
    """An input cannot be read at all; the message is one line for the operator."""


@dataclass
class Source:
    """One input: ``name`` as shown in evidence, and the binary stream to read."""

    name: str
    stream: IO[bytes]
    compression: Optional[str] = None
    truncated: bool = False  # a compressed stream ended early


def _open_file(path: str) -> Source:
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, not a log file")
    try:
        raw = open(path, "rb")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    return _detect(path, raw)


def _detect(name: str, raw: IO[bytes]) -> Source:
    """Wrap ``raw`` in a decompressor when its first bytes are a known magic number."""
    try:
        head = raw.peek(8)[:8] if hasattr(raw, "peek") else b""
    except OSError:
        head = b""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if kind == "gzip":
                return Source(name, gzip.GzipFile(fileobj=raw), kind)
            if kind == "bzip2":
                return Source(name, bz2.BZ2File(raw), kind)
            if kind == "xz":
                return Source(name, lzma.LZMAFile(raw), kind)
            try:
                import zstandard  # optional: pip install zstandard
            except ImportError:
                raise InputError(f"{name}: zstd-compressed; install the 'zstandard' package to read it") from None
            return Source(name, zstandard.ZstdDecompressor().stream_reader(raw), kind)
    return Source(name, raw)


def open_input(spec: str) -> Source:
    """Open a path, or standard input for ``-`` (compressed or not). Raises :class:`InputError`."""
    if spec == "-":
        return _detect("<stdin>", sys.stdin.buffer)
    return _open_file(spec)


#: Bytes of one line that are kept; the rest of a longer line is read past, never held.
LINE_LIMIT = 2**20
#: What a damaged archive raises while it is read (a cut file, or corrupt data).
ARCHIVE_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, ValueError)


def archive_error(src: "Source", exc: BaseException, where: str) -> None:
    """A read failed: a damaged archive is diagnosed as far as it could be read
    (``src.truncated``); a plain file that cannot be read is an :class:`InputError`."""
    if src.compression is None and not isinstance(exc, EOFError):
        raise InputError(f"{src.name}: read error {where} ({exc})") from None
    src.truncated = True


def read_lines(src: Source) -> Iterator[Tuple[int, str]]:
    """Yield ``(line number, text)``; text keeps no newline and at most :data:`LINE_LIMIT`
    bytes of a line (memory stays bounded on a file with no newlines). A damaged archive
    ends the iteration with ``src.truncated`` set (what was read is still diagnosed)."""
    readline = src.stream.readline
    n = 0
    try:
        while True:
            raw = readline(LINE_LIMIT)
            if not raw:
                return
            if len(raw) == LINE_LIMIT and not raw.endswith(b"\n"):
                rest = raw
                while rest and not rest.endswith(b"\n"):  # read past the rest of the line
                    rest = readline(LINE_LIMIT)
            n += 1
            yield n, raw.rstrip(b"\n").decode("utf-8", "replace")
    except ARCHIVE_ERRORS as exc:
        archive_error(src, exc, f"after line {n}")


def iter_text_lines(lines: Iterable[Union[str, bytes]]) -> Iterator[Tuple[int, str]]:
    """Number an iterable of lines given by a library caller (str or bytes)."""
    for n, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = line.decode("utf-8", "replace")
        yield n, line
