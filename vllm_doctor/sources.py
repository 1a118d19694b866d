"""Open the inputs and hand out their lines: the one line reader, one pass, constant memory.

An input is a file path, ``-`` for standard input, or (from the library) any iterable
of ``str``/``bytes`` lines. Files compressed with gzip (read with ISA-L where installed),
bzip2, xz or zstd are recognised by their magic bytes, whatever their name. Every path
(plain, compressed, stdin, the pre-filter, chunks, follow mode, library lines) goes through
the same pieces: :class:`Decoder` (UTF-8; UTF-16/32 LE/BE on a byte-order mark),
:class:`LineCutter` / :func:`spans` (whole lines, one cap of :data:`LINE_LIMIT` bytes a
line), :func:`cap` and :func:`text` (invalid UTF-8 becomes U+FFFD, never fatal).
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import lzma
import os
import stat
import sys
import zlib
from dataclasses import dataclass
from typing import IO, Iterable, Iterator, Optional, Tuple, Union

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"))


class InputError(Exception):
    """An input cannot be read at all; the message is one line for the operator."""


class _Counted:
    """A non-seekable binary stream (standard input) that counts the bytes read from it,
    so progress can be shown without a total."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self.raw.read(n)
        self.count += len(data)
        return data

    def read1(self, n: int = -1) -> bytes:
        data = self.raw.read1(n) if hasattr(self.raw, "read1") else self.raw.read(n)
        self.count += len(data)
        return data

    def readinto(self, buf) -> int:
        n = self.raw.readinto(buf)
        self.count += n or 0
        return n

    def peek(self, n: int = 0) -> bytes:
        return self.raw.peek(n) if hasattr(self.raw, "peek") else b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:  # standard input stays open for the caller
        pass

    @property
    def closed(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.raw.fileno()


@dataclass
class Source:
    """One input: ``name`` as shown in evidence, and the binary stream to read.

    ``raw`` is the stream under any decompressor (the file or standard input itself);
    :meth:`position` and :meth:`size` give progress in its bytes."""

    name: str
    stream: IO[bytes]
    compression: Optional[str] = None
    truncated: bool = False  # a compressed stream ended early
    raw: Optional[IO[bytes]] = None

    def position(self) -> int:
        """Bytes of the input read so far (compressed bytes for an archive), or 0."""
        raw = self.raw if self.raw is not None else self.stream
        if isinstance(raw, _Counted):
            return raw.count
        try:
            return os.lseek(raw.fileno(), 0, os.SEEK_CUR)
        except (OSError, AttributeError, ValueError):
            return 0

    def size(self) -> Optional[int]:
        """Size in bytes of a regular file (compressed size for an archive), else None."""
        raw = self.raw if self.raw is not None else self.stream
        try:
            st = os.fstat(raw.fileno())
        except (OSError, AttributeError, ValueError):
            return None
        return st.st_size if stat.S_ISREG(st.st_mode) else None


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


try:  # ISA-L's inflate: about 4x the stdlib's (a wheel on Linux, macOS and Windows)
    from isal import igzip as _igzip
    from isal import igzip_threaded as _igzip_threaded
    from isal.isal_zlib import error as _IsalError
except ImportError:  # pragma: no cover - the stdlib reads gzip where the wheel is missing
    _igzip = _igzip_threaded = None
    _IsalError = zlib.error


def _gzip_reader(raw):
    """A gzip reader over ``raw``: ISA-L when installed (decompressing in a second thread,
    so both cores work), else the stdlib."""
    if _igzip_threaded is not None:
        return _igzip_threaded.open(raw, "rb", threads=1)
    return gzip.GzipFile(fileobj=raw)


def _stdlib_gzip_after(src: Source, delivered: int):
    """After ISA-L failed on a damaged gzip file: the stdlib's reader over the same file,
    positioned ``delivered`` decompressed bytes in (it hands over everything before the
    damage, ISA-L the whole blocks only), or None where that does not apply."""
    if src.compression != "gzip" or _igzip is None or getattr(src, "_fallback", False):
        return None
    try:
        src.raw.seek(0)
    except (OSError, AttributeError, ValueError):
        return None
    src._fallback = True
    src.stream = gzip.GzipFile(fileobj=src.raw)
    try:
        while delivered > 0:
            got = len(src.stream.read(min(delivered, WINDOW)))
            if not got:
                break
            delivered -= got
    except ARCHIVE_ERRORS:
        pass  # damaged before that point too: the reads that follow say so again
    return src.stream


def _detect(name: str, raw: IO[bytes]) -> Source:
    """Wrap ``raw`` in a decompressor when its first bytes are a known magic number."""
    try:
        head = raw.peek(8)[:8] if hasattr(raw, "peek") else b""
    except OSError:
        head = b""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            if kind == "gzip":
                return Source(name, _gzip_reader(raw), kind, raw=raw)
            if kind == "bzip2":
                return Source(name, bz2.BZ2File(raw), kind, raw=raw)
            if kind == "xz":
                return Source(name, lzma.LZMAFile(raw), kind, raw=raw)
            try:
                import zstandard  # optional: pip install zstandard
            except ImportError:
                raise InputError(f"{name}: zstd-compressed; install the 'zstandard' package to read it") from None
            return Source(name, zstandard.ZstdDecompressor().stream_reader(raw), kind, raw=raw)
    return Source(name, raw, raw=raw)


def compression_of(path: str) -> Optional[str]:
    """The compression of the file at ``path`` told by its magic bytes (``gzip``, ``bzip2``,
    ``xz``, ``zstd``), or None: plain, or not readable (the reader reports that)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError:
        return None
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


def open_input(spec: str) -> Source:
    """Open a path, or standard input for ``-`` (compressed or not). Raises :class:`InputError`."""
    if spec == "-":
        stdin = sys.stdin.buffer
        return _detect("<stdin>", _Counted(stdin) if not stdin.seekable() else stdin)
    return _open_file(spec)


#: Bytes of one line that are kept; the rest of a longer line is read past, never held.
#: Every path (plain, pre-filtered, chunked, follow, stdin, library lines) keeps the same bytes.
LINE_LIMIT = 2**20
#: Bytes read at a time: large windows keep the per-window cost (a Python call or two) small.
WINDOW = 8 * 2**20
#: What a damaged archive raises while it is read (a cut file, or corrupt data).
ARCHIVE_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error, _IsalError, ValueError)

# Byte-order marks, longest first (UTF-32 LE starts like UTF-16 LE). PowerShell's ``>`` and
# ``Out-File`` write UTF-16LE with a BOM; Windows tools write UTF-8 with one.
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


#: Bytes of an input without a BOM that are held to sniff UTF-16 / UTF-32 (a text with a NUL
#: byte in its first ones), and that the sniff reads at most.
SNIFF_BYTES = 64
SNIFF_MAX = 512


def sniff_wide(head: bytes) -> Optional[str]:
    """The codec of a text in UTF-32 or UTF-16 written without a BOM (Windows tools, a
    ``iconv -t UTF-16LE``), from its first bytes: ASCII text in it puts NUL bytes at fixed
    offsets (UTF-16 LE: every odd byte; BE: every even one; UTF-32: three of each four). A
    codec is named when at least 3 in 4 of the units read have that shape, and the other
    bytes are mostly not NUL (a block of zeros is no text); else None (UTF-8, as before)."""
    head = head[:SNIFF_MAX]
    quads = [head[i : i + 4] for i in range(0, len(head) - 3, 4)]
    pairs = [head[i : i + 2] for i in range(0, len(head) - 1, 2)]
    if len(pairs) < 2:
        return None

    def most(units, shape) -> bool:
        return sum(1 for u in units if shape(u)) * 4 >= len(units) * 3

    if quads and most(quads, lambda q: q[1:] == b"\0\0\0" and q[0]):
        return "utf-32-le"
    if quads and most(quads, lambda q: q[:3] == b"\0\0\0" and q[3]):
        return "utf-32-be"
    if most(pairs, lambda p: p[1] == 0 and p[0]):
        return "utf-16-le"
    if most(pairs, lambda p: p[0] == 0 and p[1]):
        return "utf-16-be"
    return None


def archive_error(src: "Source", exc: BaseException, where: str) -> None:
    """A read failed: a damaged archive is diagnosed as far as it could be read
    (``src.truncated``); a plain file that cannot be read is an :class:`InputError`."""
    if src.compression is None and not isinstance(exc, EOFError):
        raise InputError(f"{src.name}: read error {where} ({exc})") from None
    src.truncated = True


class Decoder:
    """Turn an input's bytes into UTF-8 bytes, chunk by chunk (push style).

    The encoding is chosen on the first bytes: a UTF-32 or UTF-16 byte-order mark (LE or
    BE) selects that codec (decoded incrementally, invalid sequences become U+FFFD, then
    re-encoded as UTF-8); a UTF-8 BOM is dropped; without a BOM, first bytes that hold a NUL
    are sniffed (:func:`sniff_wide`, on up to :data:`SNIFF_BYTES` held first) for UTF-16 or
    UTF-32 written without one; anything else passes through unchanged (it is decoded as
    UTF-8 with replacement where a line is read). ``encoding`` names the
    codec once known (None before the first 4 bytes, ``"utf-8"`` without a BOM).
    """

    def __init__(self) -> None:
        self.encoding: Optional[str] = None
        self._head = b""
        self._dec = None

    def feed(self, data: bytes, final: bool = False) -> bytes:
        """UTF-8 bytes for ``data``; ``final`` at the end of the input flushes what is held."""
        if self.encoding is None:
            data = self._head + data
            maybe = len(data) == 1 or b"\0" in data or any(bom.startswith(data) for bom, _ in _BOMS)
            if len(data) < 4 and not final and maybe:
                self._head = data  # a BOM, or UTF-16 without one (its NUL is the 2nd byte)? wait
                return b""
            bom = next(((b, enc) for b, enc in _BOMS if data.startswith(b)), None)
            if bom is None and len(data) < SNIFF_BYTES and not final and b"\0" in data:
                self._head = data  # a NUL early: UTF-16 without a BOM? wait for enough to tell
                return b""
            self._head = b""
            self.encoding = "utf-8"
            if bom is not None:
                data = data[len(bom[0]) :]
                self.encoding = bom[1]
            elif b"\0" in data[:SNIFF_MAX]:
                self.encoding = sniff_wide(data) or "utf-8"
            if self.encoding != "utf-8":
                self._dec = codecs.getincrementaldecoder(self.encoding)("replace")
        if self._dec is None:
            return data
        return self._dec.decode(data, final).encode("utf-8")


class LineCutter:
    """Whole lines out of arbitrary chunks, holding at most :data:`LINE_LIMIT` bytes.

    ``feed(chunk)`` returns the complete lines the chunk finishes, as one ``bytes`` block
    ending in ``\\n`` (empty when none); the partial last line is held. A held line that
    reaches the limit is emitted cut to its first ``limit`` bytes and the rest of it is read
    past. Lines inside a block may still be longer than the limit: every consumer cuts a
    line to ``limit`` bytes where it takes it out of a block (:func:`cap`), so all paths
    keep the same bytes. ``end()`` returns the held last line (no newline in the input).
    """

    def __init__(self, limit: Optional[int] = None) -> None:
        self.limit = LINE_LIMIT if limit is None else limit
        self.carry = b""
        self.skipping = False  # reading past the rest of a line longer than the limit
        self.cuts = 0  # lines cut so far (block offsets then differ from the input's)

    def feed(self, chunk: bytes) -> bytes:
        if self.skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return b""
            chunk, self.skipping = chunk[nl + 1 :], False
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            carry = self.carry + chunk if self.carry else chunk
            if len(carry) >= self.limit:
                self.carry, self.skipping = b"", True
                self.cuts += 1
                return carry[: self.limit] + b"\n"
            self.carry = carry
            return b""
        if self.carry:
            block = b"".join((self.carry, memoryview(chunk)[:cut]))
        else:
            block = chunk if cut == len(chunk) else chunk[:cut]
        rest = chunk[cut:] if cut < len(chunk) else b""
        if len(rest) >= self.limit:
            block += rest[: self.limit] + b"\n"
            rest, self.skipping = b"", True
            self.cuts += 1
        self.carry = rest
        return block

    def end(self) -> bytes:
        carry, self.carry = self.carry, b""
        self.skipping = False
        return carry + b"\n" if carry else b""

    @property
    def held(self) -> int:
        """Bytes of the partial line held (at most ``limit``)."""
        return len(self.carry)


def cap(line: bytes) -> bytes:
    """A line as every path keeps it: at most :data:`LINE_LIMIT` bytes."""
    return line if len(line) <= LINE_LIMIT else line[:LINE_LIMIT]


def text(line: bytes) -> str:
    """Decode one (capped) line of UTF-8 bytes, invalid sequences as U+FFFD."""
    return line.decode("utf-8", "replace")


def windows(src: Source, size: int = WINDOW, on_read=None, decode: bool = True) -> Iterator[bytes]:
    """The one line reader: blocks of whole UTF-8 lines from ``src``, each ending in ``\\n``.

    Reads ``size`` bytes at a time (``read1`` where the stream has it, so a cut archive
    still hands over everything before the cut), decodes by BOM (:class:`Decoder`) and cuts
    at line ends (:class:`LineCutter`). ``on_read(n)`` is called with the byte count of each
    read (decompressed bytes; see :meth:`Source.position` for compressed progress). Memory:
    one window plus one held line. A damaged archive ends the blocks with ``src.truncated``
    set; a plain file that cannot be read raises :class:`InputError`. ``decode=False``
    takes the bytes as they are (a chunk from the middle of a file has no BOM).
    ``src.cutter`` is set to the :class:`LineCutter` in use (its ``cuts`` count lines cut).
    """
    stream = src.stream
    read = getattr(stream, "read1", None) or stream.read
    dec = Decoder()
    if not decode:
        dec.encoding = "utf-8"
    cutter = src.cutter = LineCutter()
    delivered = 0  # decompressed bytes handed over
    while True:
        try:
            chunk = read(size)
        except ARCHIVE_ERRORS as exc:
            stream = _stdlib_gzip_after(src, delivered)
            if stream is not None:  # ISA-L drops the last block before a cut: read on with the stdlib
                read = stream.read1
                continue
            archive_error(src, exc, "")
            chunk = b""
        delivered += len(chunk)
        if not chunk:
            block = cutter.feed(dec.feed(b"", final=True)) + cutter.end()
            if block:
                yield block
            return
        if on_read is not None:
            on_read(len(chunk))
        block = cutter.feed(dec.feed(chunk))
        if block:
            yield block


def _plain_region(src: Source):
    """(fd, start) for a regular, uncompressed file read from its start that needs no
    transcoding (no UTF-16/32 BOM, nor such a text without one: :func:`sniff_wide`; start
    skips a UTF-8 BOM), else None."""
    if not hasattr(os, "pread") or src.compression is not None or (src.raw is not None and src.stream is not src.raw):
        return None  # (no pread on Windows: the stream reader reads it)
    try:
        fd = src.stream.fileno()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or src.stream.tell() != 0:
            return None
    except (OSError, AttributeError, ValueError):
        return None
    head = os.pread(fd, SNIFF_MAX, 0)
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        return None
    if b"\0" in head and sniff_wide(head):  # UTF-16/32 without a BOM: the Decoder transcodes it
        return None
    return fd, 3 if head.startswith(b"\xef\xbb\xbf") else 0


def spans(
    src: Source, size: int = WINDOW, on_read=None, decode: bool = True, region=None
) -> Iterator[Tuple[bytes, int, int]]:
    """The one line reader without copies: ``(block, end, offset)`` where ``block[:end]``
    are whole lines (``end`` just after a newline) and ``offset`` is the file offset of
    ``block[0]`` (-1 where it is not known: input that is decompressed or transcoded, and
    after a line longer than a window). Bytes past ``end`` start a line the next block
    repeats. Same lines, cap and decoding as :func:`windows` (which it uses where a file
    cannot be read in place); ``region=(fd, start, end)`` reads that byte range of a
    plain file (``end`` None: to the end of the file, ``decode`` is then not applied).
    """
    if region is None:
        plain = _plain_region(src)
        if plain is None or not decode:
            for block in windows(src, size, on_read, decode):
                yield block, len(block), -1
            return
        fd, pos = plain
        stop = None
    else:
        fd, pos, stop = region
    while stop is None or pos < stop:
        n = size if stop is None else min(size, stop - pos)
        data = os.pread(fd, n, pos)
        if not data:
            return
        at_end = len(data) < n or (stop is not None and pos + len(data) >= stop)
        cut = data.rfind(b"\n") + 1
        if not cut and not at_end:
            # A line longer than the window: read it up to the cap in one piece, or keep its
            # first LINE_LIMIT bytes and read past the rest.
            data = os.pread(fd, LINE_LIMIT + 1 if stop is None else min(LINE_LIMIT + 1, stop - pos), pos)
            nl = data.find(b"\n")
            if nl >= 0:
                if on_read is not None:
                    on_read(nl + 1)
                yield data, nl + 1, pos
                pos += nl + 1
                continue
            if len(data) <= LINE_LIMIT:  # the last line of the file or range, no newline
                if on_read is not None:
                    on_read(len(data))
                yield data + b"\n", len(data) + 1, -1  # a newline added: not the file's bytes
                return
            head = data[:LINE_LIMIT]
            line_start = pos
            pos += len(data)
            while stop is None or pos < stop:
                more = os.pread(fd, size if stop is None else min(size, stop - pos), pos)
                if not more:
                    break
                nl = more.find(b"\n")
                if nl >= 0:
                    pos += nl + 1
                    break
                pos += len(more)
            if on_read is not None:
                on_read(pos - line_start)
            yield head + b"\n", len(head) + 1, -1  # a cut line: its bytes are not the file's
            continue
        if cut:
            if on_read is not None:
                on_read(cut)
            yield data, cut, pos
            pos += cut
        if at_end:
            if cut < len(data):  # the last line has no newline: it still counts
                rest = data[cut:]
                if on_read is not None:
                    on_read(len(rest))
                block = rest[:LINE_LIMIT] + b"\n"
                yield block, len(block), -1  # a newline added: not the file's bytes
            return


def read_lines(src: Source, on_read=None) -> Iterator[Tuple[int, str]]:
    """Yield ``(line number, text)`` for every line; text keeps no newline and at most
    :data:`LINE_LIMIT` bytes of a line (memory stays bounded on a file with no newlines).
    A damaged archive ends the iteration with ``src.truncated`` set (what was read is
    still diagnosed)."""
    n = 0
    for block in windows(src, on_read=on_read):
        lines = block.split(b"\n")
        lines.pop()  # the block ends in a newline
        for line in lines:
            n += 1
            yield n, text(cap(line))


def iter_text_lines(lines: Iterable[Union[str, bytes]]) -> Iterator[Tuple[int, str]]:
    """Number an iterable of lines given by a library caller (str or bytes), with the same
    cap and decoding as a file: one trailing newline dropped, at most :data:`LINE_LIMIT`
    bytes (characters for ``str``), bytes decoded as UTF-8 with replacement."""
    for n, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            line = text(cap(line[:-1] if line.endswith(b"\n") else line))
        else:
            line = line[:-1] if line.endswith("\n") else line
            line = line[:LINE_LIMIT]
        yield n, line
