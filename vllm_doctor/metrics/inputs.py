"""Where metrics come from: a scrape file, a directory of scrapes, a live server, a query export.

* A file holding one exposition (Prometheus text 0.0.4 or OpenMetrics, told from the content)
  is one scrape; a file holding a Prometheus ``query_range`` (or ``query``) JSON answer is a
  series of points. Compressed files (gzip, bzip2, xz) are read like logs are.
* A directory is one scrape per file, read in name order (digit runs compare as numbers, so
  ``scrape-999`` comes before ``scrape-1000``): what
  ``while sleep 10; do curl -s HOST/metrics > scrape-$(date +%s).prom; done`` leaves. Files
  that are not metrics (a README, an empty file) are skipped and named in the warnings.
* A URL (``http://`` or ``https://``; ``/metrics`` is added when there is no path) is scraped
  ``count`` times, ``interval`` seconds apart, with the standard library.

The time of a scrape is the latest timestamp of its samples when the exposition has them;
else, for a file, the epoch in its name (10 digits: seconds; 13: milliseconds), else its
modification time; for a URL, the time the answer arrived.
"""

from __future__ import annotations

import os
import re
import time
from typing import Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import urlsplit

from ..sources import ARCHIVE_ERRORS, InputError, open_input
from .parse import OPENMETRICS, PROMETHEUS, QUERY_RANGE, MetricsError, Sample, parse_query, parse_text, sniff
from .scrape import Skipped, SourceKey, group
from .series import MetricsSeries, SourceBuilder, new_series
from .summary import MetricsSummary

#: Bytes of one scrape file or HTTP answer read at most (a vLLM scrape is 20-200 KB).
MAX_SCRAPE_BYTES = 64 * 2**20
#: Bytes of a query answer read at most.
MAX_QUERY_BYTES = 512 * 2**20
#: Files of a directory read at most (the newest past that are skipped, with a warning).
MAX_FILES = 100_000
#: Seconds a scrape may wait for the connection or for any one read before it counts as failed.
SCRAPE_TIMEOUT = 10.0
#: Seconds one whole scrape may take, however the bytes trickle in: a vLLM /metrics page is
#: 20-200 KB and comes in milliseconds, so a server still sending after this is wedged (or
#: not vLLM), and ``--count`` scrapes must end in bounded time (a per-read time-out alone
#: lets a server that drips one line a second hold a scrape for as long as it likes).
SCRAPE_DEADLINE = 30.0

_EPOCH = re.compile(r"(?<![0-9])(1[0-9]{9}|[2-3][0-9]{9}|1[0-9]{12}|[2-3][0-9]{12})(?:\.[0-9]+)?(?![0-9])")


def is_url(spec: str) -> bool:
    """True for ``http://...`` and ``https://...``."""
    return spec.lower().startswith(("http://", "https://"))


def url_problem(url: str) -> Optional[str]:
    """Why ``url`` cannot be scraped (one phrase), or None for a usable ``http(s)://host[:port]
    [/path]``: not http(s), no host, a bad port or IPv6 literal, spaces or control characters."""
    if not is_url(url):
        return "not an http:// or https:// URL"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "a URL cannot hold spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        return f"not a valid URL ({exc})"
    if not parts.hostname:
        return "the URL names no host"
    return None


def _credentials(url: str) -> Tuple[str, Optional[str]]:
    """``url`` without its user info, and the ``Authorization: Basic`` value the user info
    gives (``http://user:pass@host/`` -> ``http://host/``, HTTP basic authentication), or None."""
    import base64
    from urllib.parse import unquote, urlunsplit

    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    plain = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return plain, "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")


def _natural(name: str) -> Tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"([0-9]+)", name))


def name_time(name: str) -> Optional[float]:
    """The epoch in a file name (``scrape-1718000000.prom`` -> 1718000000.0), or None."""
    found = list(_EPOCH.finditer(os.path.basename(name)))
    if not found:
        return None
    m = found[-1]
    digits = m.group(1)
    return int(digits) / 1000.0 if len(digits) == 13 else float(m.group(0))


def _read_file(path: str, limit: int) -> str:
    try:
        src = open_input(path)
    except InputError as exc:
        raise MetricsError(str(exc)) from None
    try:
        data = src.stream.read(limit + 1)
    except ARCHIVE_ERRORS as exc:
        raise MetricsError(f"{path}: read error ({exc})") from None
    finally:
        src.stream.close()
    if len(data) > limit:
        raise MetricsError(f"{path}: larger than {limit // 2**20} MiB: not one scrape")
    return data.decode("utf-8", "replace")


def sniff_path(path: str) -> Optional[str]:
    """What a path holds, for the command line to route it: ``directory`` (a directory with
    at least one metrics file among its first few), a format of :func:`~.parse.sniff` for a
    regular file, or None (a log, a pipe or device - never read here -, or unreadable: the
    log reader reports that)."""
    try:
        if os.path.isdir(path):
            for entry in sorted(os.listdir(path), key=_natural)[:16]:
                full = os.path.join(path, entry)
                if not entry.startswith(".") and os.path.isfile(full) and sniff_path(full):
                    return "directory"
            return None
        if not os.path.isfile(path):
            return None  # a pipe (<(journalctl ...)), a device: reading its head would eat it
        src = open_input(path)
    except (OSError, InputError):
        return None
    try:
        head = src.stream.read(65536)
    except ARCHIVE_ERRORS:  # a damaged archive: the log reader reports it
        return None
    finally:
        src.stream.close()
    return sniff(head.decode("utf-8", "replace"))


class _Reader:
    """Builds the series of one input, scrape by scrape, one builder per source."""

    def __init__(self, input_name: str) -> None:
        self.input = input_name
        self.builders: Dict[SourceKey, SourceBuilder] = {}
        self.formats: List[str] = []
        self.warnings: List[str] = []
        self.malformed = 0
        self.dropped_sources = 0
        self.skipped = Skipped()

    def scrape(self, samples: Iterable[Sample], t: Optional[float], origin: str, fmt: str, malformed: int = 0) -> int:
        """Add one scrape (``t``: its time when the samples carry none); returns the number
        of vLLM sources in it."""
        snaps, dropped = group(samples, self.skipped)
        self.dropped_sources = max(self.dropped_sources, dropped)
        self.malformed += malformed
        if fmt not in self.formats:
            self.formats.append(fmt)
        for snap in snaps:
            b = self.builders.get(snap.key)
            if b is None:
                b = self.builders[snap.key] = SourceBuilder(
                    new_series(self.input, snap.key, snap.labels, fmt), MetricsSummary()
                )
            when = snap.t if snap.t is not None else t
            if when is None:
                when = time.time()
            b.add(snap, when, origin)
        return len(snaps)

    def finish(self) -> List[MetricsSeries]:
        out = []
        for b in self.builders.values():
            ser = b.series
            ser.format = "+".join(self.formats)
            ser.malformed = self.malformed
            ser.summary = b.summary
            for w in self.warnings:
                b.warn(w)
            if self.dropped_sources:
                b.warn(f"{self.dropped_sources} more source(s) in {self.input} were not kept")
            if self.skipped.duplicates:
                b.warn(f"{self.skipped.duplicates} duplicate sample(s) ignored (the first of each series was read)")
            if self.skipped.timestamps:
                b.warn(
                    f"{self.skipped.timestamps} sample time stamp(s) ignored (other samples of the scrape carry "
                    "none or another: the scrape's own time was used)"
                )
            if self.malformed:
                b.warn(f"{self.malformed} sample line(s) not read (malformed, or a value that is not a finite number)")
            out.append(ser)
        return out


def _text_scrape(reader: _Reader, text: str, origin: str, t: Optional[float], fmt: str) -> int:
    samples, bad = parse_text(text, fmt)
    return reader.scrape(samples, t, origin, fmt, bad)


def read_file(path: str, name: Optional[str] = None) -> List[MetricsSeries]:
    """The series of one file: one scrape, or a query answer. Raises :class:`MetricsError`."""
    name = name or path
    text = _read_file(path, MAX_QUERY_BYTES)
    fmt = sniff(text[:65536])
    if fmt is None:
        raise MetricsError(f"{path}: not Prometheus metrics (neither text exposition nor a query_range JSON answer)")
    reader = _Reader(name)
    if fmt == QUERY_RANGE:
        _query(reader, text, path)
    else:
        t = name_time(path)
        if t is None:
            t = _mtime(path)
        _text_scrape(reader, text, os.path.basename(path), t, fmt)
    return _nonempty(reader, path)


def _mtime(path: str) -> Optional[float]:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _query(reader: _Reader, text: str, path: str) -> None:
    """A query answer: one scrape per distinct time step (all series of one step together)."""
    steps: Dict[float, List[Sample]] = {}
    skipped: List[str] = []
    for t, sample in parse_query(text, path, skipped):
        steps.setdefault(t, []).append(sample)
    for i, t in enumerate(sorted(steps)):
        reader.scrape(steps[t], t, f"{os.path.basename(path)}@{t:g}", QUERY_RANGE, len(skipped) if i == 0 else 0)


def _nonempty(reader: _Reader, spec: str) -> List[MetricsSeries]:
    series = reader.finish()
    if not series:
        raise MetricsError(f"{spec}: metrics, but no vllm: series (is this a vLLM server's /metrics?)")
    return series


def read_directory(path: str, name: Optional[str] = None) -> List[MetricsSeries]:
    """The series of a directory of scrapes (one per file, name order). Raises
    :class:`MetricsError` when no file in it is metrics."""
    name = name or path.rstrip("/") + "/"
    try:
        entries = sorted((e for e in os.listdir(path) if not e.startswith(".")), key=_natural)
    except OSError as exc:
        raise MetricsError(f"{path}: cannot list the directory ({exc.strerror or exc})") from None
    reader = _Reader(name)
    not_scrapes: List[str] = []
    unreadable: List[str] = []
    if len(entries) > MAX_FILES:
        reader.warnings.append(f"{len(entries) - MAX_FILES} file(s) past the first {MAX_FILES} were not read")
        entries = entries[:MAX_FILES]
    scrapes = 0
    for entry in entries:
        full = os.path.join(path, entry)
        if os.path.isdir(full):
            not_scrapes.append(entry + "/")
            continue
        if not os.path.isfile(full):
            not_scrapes.append(entry)  # a pipe or a device: never read here
            continue
        try:
            text = _read_file(full, MAX_SCRAPE_BYTES)
        except MetricsError as exc:
            unreadable.append(str(exc).replace(full, entry, 1))
            continue
        fmt = sniff(text[:65536])
        if fmt is None or fmt == QUERY_RANGE:
            not_scrapes.append(entry)
            continue
        t = name_time(entry)
        _text_scrape(reader, text, entry, t if t is not None else _mtime(full), fmt)
        scrapes += 1
    if not_scrapes:
        reader.warnings.append(_skipped(not_scrapes, "not a scrape", ", "))
    if unreadable:
        reader.warnings.append(_skipped(unreadable, "cannot be read", "; "))
    if not scrapes:
        raise MetricsError(f"{path}: no metrics scrapes in the directory")
    return _nonempty(reader, path)


#: Names a skipped-files note lists (the rest are counted).
SKIPPED_NAMES = 5


def _skipped(names: List[str], why: str, sep: str) -> str:
    """``3 files skipped: not a scrape (a, b/, c)``; past :data:`SKIPPED_NAMES` the rest are counted."""
    n = len(names)
    shown = sep.join(names[:SKIPPED_NAMES]) + (f"{sep}and {n - SKIPPED_NAMES} more" if n > SKIPPED_NAMES else "")
    return f"{n} file{'' if n == 1 else 's'} skipped: {why} ({shown})"


def metrics_url(url: str) -> str:
    """``http://host:8000`` -> ``http://host:8000/metrics`` (a URL with a path is kept)."""
    parts = urlsplit(url)
    return url.rstrip("/") + "/metrics" if parts.path in ("", "/") else url


class _Deadline:
    """The end of one scrape: at ``seconds`` a timer shuts down every socket the scrape
    opened (:func:`_opener` records them), so a read blocked anywhere - the status line, the
    headers, the body - returns at once. ``expired`` says it was the deadline."""

    def __init__(self, seconds: float) -> None:
        import threading

        self.seconds = seconds
        self.sockets: List = []
        self.expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def _expire(self) -> None:
        import socket

        self.expired = True
        for sock in list(self.sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "_Deadline":
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()


def _opener(deadline: _Deadline):
    """A urllib opener whose HTTP(S) connections register their sockets with ``deadline``."""
    import http.client
    import urllib.request

    class _HTTP(http.client.HTTPConnection):
        def connect(self):
            super().connect()
            deadline.sockets.append(self.sock)

    class _HTTPS(http.client.HTTPSConnection):
        def connect(self):
            super().connect()
            deadline.sockets.append(self.sock)

    class _HTTPHandler(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(_HTTP, req)

    class _HTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(_HTTPS, req, context=getattr(self, "_context", None))

    class _Redirects(urllib.request.HTTPRedirectHandler):
        # vLLM's /metrics may answer 307 /metrics/ (a mounted app): the credentials follow a
        # redirect to the same scheme, host and port, never to another origin.
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            auth = req.unredirected_hdrs.get("Authorization")
            if new is not None and auth and _origin(new.full_url) == _origin(req.full_url):
                new.add_unredirected_header("Authorization", auth)
            return new

    return urllib.request.build_opener(_HTTPHandler, _HTTPSHandler, _Redirects)


def _origin(url: str) -> Tuple[str, str, Optional[int]]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


def fetch(url: str, timeout: float = SCRAPE_TIMEOUT, deadline: float = SCRAPE_DEADLINE) -> Tuple[str, str]:
    """One scrape: ``(text, format)``. ``timeout``: seconds any one wait may take (connect,
    each read); ``deadline``: seconds the whole scrape may take (:data:`SCRAPE_DEADLINE`).
    User info in the URL (``http://user:pass@host``) is sent as HTTP basic authentication,
    on a redirect only to the same origin (scheme, host, port). Raises :class:`MetricsError` with one line: a URL that
    cannot be scraped, a refused connection, a name that does not resolve, a time-out, a
    scrape past its deadline, an HTTP error status, or a page that is not metrics."""
    import socket
    import urllib.error
    import urllib.request

    problem = url_problem(url)
    if problem:
        raise MetricsError(f"{url}: {problem}")
    plain, auth = _credentials(url)
    req = urllib.request.Request(plain, headers={"Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1"})
    if auth is not None:
        req.add_unredirected_header("Authorization", auth)  # a redirect never carries it on
    late = MetricsError(f"{url}: scrape timed out (still sending after {deadline:g} s)")
    try:
        with _Deadline(deadline) as watch:
            try:
                with _opener(watch).open(req, timeout=timeout) as resp:
                    ctype = resp.headers.get("Content-Type", "")
                    data = resp.read(MAX_SCRAPE_BYTES + 1)
            except Exception:
                if watch.expired:
                    raise late from None
                raise
            if watch.expired:  # the shut-down socket read as the end of the answer
                raise late
    except MetricsError:
        raise
    except (socket.timeout, TimeoutError):
        raise MetricsError(f"{url}: no answer within {timeout:g} s") from None
    except urllib.error.HTTPError as exc:
        raise MetricsError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            raise MetricsError(f"{url}: connection refused (is the server running, and is that its port?)") from None
        if isinstance(reason, socket.gaierror):
            raise MetricsError(f"{url}: unknown host") from None
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise MetricsError(f"{url}: no answer within {timeout:g} s") from None
        raise MetricsError(f"{url}: cannot connect ({reason})") from None
    except (OSError, ValueError) as exc:
        raise MetricsError(f"{url}: cannot scrape ({exc})") from None
    if len(data) > MAX_SCRAPE_BYTES:
        raise MetricsError(f"{url}: answer larger than {MAX_SCRAPE_BYTES // 2**20} MiB: not a metrics page")
    text = data.decode("utf-8", "replace")
    fmt = sniff(text[:65536])
    if fmt not in (PROMETHEUS, OPENMETRICS):
        kind = ctype.split(";")[0].strip() or "unknown content"
        raise MetricsError(f"{url}: not Prometheus metrics (got {kind}); vLLM serves them at /metrics")
    if "openmetrics" in ctype.lower() and fmt == PROMETHEUS and text.rstrip().endswith("# EOF"):
        fmt = OPENMETRICS
    return text, fmt


class ScrapingInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, where the caller maps it to KeyboardInterrupt) while scraping a
    live server, after at least one scrape: ``series`` holds what the scrapes taken so far show
    (each series' warnings say it was cut short), ``scrapes`` how many were taken. Before the
    first scrape the plain KeyboardInterrupt propagates."""

    def __init__(self, series: List[MetricsSeries], scrapes: int) -> None:
        super().__init__(f"interrupted after {scrapes} scrape{'s' if scrapes != 1 else ''}")
        self.series, self.scrapes = series, scrapes


#: ``progress(taken, count, failure)``: called after each scrape of a live server, with the
#: scrapes attempted so far, the number asked for, and the one-line reason when it failed.
Progress = Callable[[int, int, Optional[str]], None]


def read_url(
    url: str,
    interval: float = 10.0,
    count: int = 6,
    timeout: float = SCRAPE_TIMEOUT,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    deadline: float = SCRAPE_DEADLINE,
    progress: Optional[Progress] = None,
) -> List[MetricsSeries]:
    """Scrape ``url`` ``count`` times, ``interval`` seconds apart (from one scrape's start to
    the next), calling ``progress`` after each (see :data:`Progress`). A first scrape that
    fails raises :class:`MetricsError`; a later one that fails is a gap, named in the warnings
    (a server that died mid-way is itself a fact). The series are named by the URL without
    its user info. KeyboardInterrupt after a scrape was taken raises
    :class:`ScrapingInterrupted` with the series of the scrapes taken."""
    if count < 1:
        raise MetricsError("--count must be at least 1")
    if interval < 0:
        raise MetricsError("--interval cannot be negative")
    problem = url_problem(url)
    if problem:
        raise MetricsError(f"{url}: {problem}")
    url = metrics_url(url)
    name = _credentials(url)[0]
    reader = _Reader(name)
    failed: List[str] = []
    start = time.monotonic()
    attempted = taken = 0
    try:
        for i in range(count):
            if i:
                sleep(max(0.0, start + i * interval - time.monotonic()))
            try:
                text, fmt = fetch(url, timeout, deadline)
            except MetricsError as exc:
                if i == 0:
                    raise
                failed.append(f"scrape {i + 1}: {str(exc).split(': ', 1)[-1]}")
                attempted = i + 1
                if progress is not None:
                    progress(attempted, count, failed[-1])
                continue
            _text_scrape(reader, text, f"{name} #{i + 1}", clock(), fmt)
            attempted, taken = i + 1, taken + 1
            if progress is not None:
                progress(attempted, count, None)
    except KeyboardInterrupt:
        if not taken:
            raise
        reader.warnings.append(f"interrupted after {attempted} of {count} scrapes: this covers those")
        if failed:
            reader.warnings.append(f"{len(failed)} of {attempted} scrapes failed ({failed[0]})")
        raise ScrapingInterrupted(_nonempty(reader, name), taken) from None
    if failed:
        reader.warnings.append(f"{len(failed)} of {count} scrapes failed ({failed[0]})")
    return _nonempty(reader, name)


def read_metrics(
    *specs: str,
    interval: float = 10.0,
    count: int = 6,
    timeout: float = SCRAPE_TIMEOUT,
    progress: Optional[Callable[[str], Optional[Progress]]] = None,
) -> List[MetricsSeries]:
    """The series of every source of every input, in the order given.

    Each spec is a scrape file, a query answer file, a directory of scrapes, or a URL
    (scraped ``count`` times, ``interval`` seconds apart; ``progress(url)`` gives the
    :data:`Progress` callback for it, or None). Sources of different inputs are never merged.
    Raises :class:`MetricsError` (one line naming the input) for the first input that cannot
    be read or holds no vLLM series, :class:`ScrapingInterrupted` (with the series of every
    input read so far) when a live scrape is interrupted."""
    out: List[MetricsSeries] = []
    for spec in specs:
        if is_url(spec):
            try:
                out.extend(
                    read_url(
                        spec,
                        interval=interval,
                        count=count,
                        timeout=timeout,
                        progress=progress(spec) if progress is not None else None,
                    )
                )
            except ScrapingInterrupted as exc:
                raise ScrapingInterrupted(out + exc.series, exc.scrapes) from None
        elif os.path.isdir(spec):
            out.extend(read_directory(spec))
        else:
            out.extend(read_file(spec))
    return out
