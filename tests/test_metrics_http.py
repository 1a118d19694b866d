"""`--metrics URL` against a real HTTP server on 127.0.0.1 serving a recorded scrape sequence."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vllm_doctor.metrics import MetricsError, read_url

SEQ = os.path.join(os.path.dirname(__file__), "..", "fixtures", "metrics", "seq")
T0 = 1789087500


def _scrapes(name):
    d = os.path.join(SEQ, name)
    return [open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))]


class _Loopback:
    """A ThreadingHTTPServer on 127.0.0.1 serving ``handler`` in a thread while the context
    lasts (``url`` is its address); shut down and joined on exit."""

    def _serve(self, handler) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class _Server(_Loopback):
    """Serves scrape i on the i-th GET of /metrics (the last one again after the end);
    /page answers HTML, /gone 404; after ``fail_after`` scrapes, /metrics answers 503."""

    def __init__(self, scrapes, fail_after=None):
        self.scrapes, self.fail_after, self.hits = scrapes, fail_after, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path == "/metrics":
                    i = outer.hits
                    outer.hits += 1
                    if outer.fail_after is not None and i >= outer.fail_after:
                        return self._send(503, b"engine is dead\n", "text/plain")
                    body = outer.scrapes[min(i, len(outer.scrapes) - 1)]
                    return self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")
                if self.path == "/page":
                    return self._send(200, b"<html><body><h1>vLLM</h1></body></html>", "text/html; charset=utf-8")
                return self._send(404, b'{"detail":"Not Found"}', "application/json")

            def _send(self, code, body, ctype):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # keep the test output clean
                pass

        self._serve(Handler)


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        # wide enough that the text view clips no evidence line (under pytest, readline may
        # have exported COLUMNS=80 to child processes)
        env={**os.environ, "COLUMNS": "200"},
    )


def test_cli_scrapes_a_live_server_count_times():
    with _Server(_scrapes("storm-v1")) as srv:
        p = _cli("--no-redact", "--metrics", srv.url, "--interval", "0.05", "--count", "7")
        assert srv.hits == 7
    assert p.returncode == 1, p.stderr  # a problem diagnosed
    assert p.stdout.startswith("VD201 preemption_storm (warning") and f"{srv.url}/metrics [Qwen3-0.6B]" in p.stdout
    # the evidence is the preemptions of each interval, a rate (counts do not depend on the clock)
    assert "preemptions over" in p.stdout and "KV cache 99.0% full" in p.stdout
    assert "Traceback" not in p.stderr


def test_cli_json_output_holds_the_series():
    with _Server(_scrapes("wedge-v1")) as srv:
        p = _cli(
            "--no-redact", "--metrics", srv.url + "/metrics", "--interval", "0.05", "--count", "6", "--format", "json"
        )
    assert p.returncode == 1, p.stderr
    v = json.loads(p.stdout)
    assert v["primary_class"] == "engine_stall" and v["primary_source"] == f"{srv.url}/metrics [Qwen3-0.6B]"
    f = v["findings"][v["primary_finding"]]
    assert f["facts"]["wedged_intervals"] == 4 and f["facts"]["running_at_stall"] == 3
    assert {e["kind"] for e in f["evidence"]} == {"metric"}
    assert f["evidence"][0]["metric"]["series"]["generation_tps"] == "vllm:generation_tokens_total"


def test_library_scrape_with_the_clock_given_has_exact_rates():
    ticks = iter(T0 + 10 * i for i in range(7))
    with _Server(_scrapes("storm-v1")) as srv:
        [s] = read_url(srv.url, interval=0.05, count=7, clock=lambda: next(ticks))
    assert [x.preemptions_per_s for x in s.samples] == [None, 0.6, 1.5, 1.9, 2.1, 1.9, 2.1]
    assert s.samples[3].origin == f"{srv.url}/metrics #4"


def test_refused_connection_is_one_line_and_exit_2():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = _cli("--metrics", f"http://127.0.0.1:{port}", "--count", "2", "--interval", "0")
    assert p.returncode == 2
    assert p.stderr.strip() == (
        f"vllm-doctor: error: http://127.0.0.1:{port}/metrics: connection refused "
        "(is the server running, and is that its port?)"
    )


def test_a_page_that_is_not_metrics_and_a_404_are_one_line_errors():
    with _Server([]) as srv:
        with pytest.raises(MetricsError, match=r"/page: not Prometheus metrics \(got text/html\)"):
            read_url(srv.url + "/page", count=1)
        with pytest.raises(MetricsError, match=r"/gone: HTTP 404 Not Found"):
            read_url(srv.url + "/gone", count=1)
        p = _cli("--metrics", srv.url + "/page", "--count", "1")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_a_server_that_dies_mid_way_leaves_a_gap_and_a_warning():
    with _Server(_scrapes("storm-v1"), fail_after=3) as srv:
        [s] = read_url(srv.url, interval=0.05, count=6)
    assert s.scrapes == 3
    assert s.warnings == ["3 of 6 scrapes failed (scrape 4: HTTP 503 Service Unavailable)"]


def test_a_url_given_as_file_gets_the_hint():
    p = _cli("http://127.0.0.1:8000/metrics")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "vllm-doctor reads log files (or - for standard input), not URLs" in p.stderr
    assert "give it as --metrics http://127.0.0.1:8000/metrics" in p.stderr


def test_cli_reads_a_directory_and_a_scrape_beside_a_log():
    log = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logs", "s001-llama31-8b-3090-kv-29k.log")
    p = _cli(os.path.join(SEQ, "hot-idle-v1"))  # KV cache at 95 % with nothing waiting: heat, not harm
    assert p.returncode == 0 and p.stdout.startswith("VD000 healthy (ok)")
    p = _cli("--format", "json", log, os.path.join(SEQ, "storm-v1", f"scrape-{T0}.prom"))
    v = json.loads(p.stdout)
    assert p.returncode == 1 and v["primary_class"] == "kv_cache_capacity"  # the log's verdict decides
    # another model's single scrape is a source of its own, never merged into the log's run
    assert [s["primary_class"] for s in v["sources"]] == ["kv_cache_capacity", "healthy"]


def test_a_pipe_given_as_file_is_read_as_a_log_not_sniffed(tmp_path):
    log = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logs", "s001-llama31-8b-3090-kv-29k.log")
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: open(fifo, "wb").write(open(log, "rb").read()), daemon=True)
    writer.start()
    p = _cli(str(fifo))
    writer.join(timeout=10)
    assert p.returncode == 1 and "kv_cache_capacity" in p.stdout, p.stderr


class _Tricky(_Loopback):
    """A loopback server with the answers break-it found: ``/drip`` sends its headers, then
    one line every ``drip`` seconds for ever (``/hdrip``: one header line); ``/auth`` wants HTTP basic ``user:pa ss``;
    ``/secret`` fails with a reason phrase that holds a token."""

    def __init__(self, drip=0.2):
        self.auth_seen = []
        outer = self
        body = _scrapes("storm-v1")[0]

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                if self.path == "/drip":
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.end_headers()
                    try:
                        for _ in range(int(60 / drip)):
                            self.wfile.write(b"# HELP vllm:x a line\n")
                            self.wfile.flush()
                            time.sleep(drip)
                    except OSError:
                        pass
                    return
                if self.path == "/hdrip":  # the status line, then one header line every `drip` s
                    try:
                        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                        for i in range(int(60 / drip)):
                            self.wfile.write(b"X-Wait-%d: 1\r\n" % i)
                            self.wfile.flush()
                            time.sleep(drip)
                    except OSError:
                        pass
                    return
                if self.path.startswith("/to/"):  # a redirect: /to/PORT/PATH
                    _, _, port, path = self.path.split("/", 3)
                    self.send_response(307)
                    self.send_header("Location", f"http://127.0.0.1:{port}/{path}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/auth/metrics":
                    outer.auth_seen.append(self.headers.get("Authorization"))
                    if self.headers.get("Authorization") != "Basic dXNlcjpwYSBzcw==":  # user:pa ss
                        self.send_response(401)
                        self.end_headers()
                        return
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(500, "Boom hf_abcdefghijklmnopqrstuvwxyzABCD")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._serve(Handler)


def test_a_server_that_drips_bytes_is_cut_at_the_scrape_deadline():
    """break-it 14: each read had a time-out, the scrape none: one line a second held it for
    ever. The whole scrape ends at its deadline (here 1 s; SCRAPE_DEADLINE by default)."""
    import inspect

    from vllm_doctor.metrics import inputs

    assert inspect.signature(inputs.fetch).parameters["deadline"].default == inputs.SCRAPE_DEADLINE
    assert inspect.signature(inputs.read_url).parameters["deadline"].default == inputs.SCRAPE_DEADLINE
    assert inputs.SCRAPE_TIMEOUT < inputs.SCRAPE_DEADLINE <= 60  # bounded, and longer than one wait
    with _Tricky(drip=0.1) as srv:
        start = time.monotonic()
        with pytest.raises(MetricsError, match=r"/drip: scrape timed out \(still sending after 1 s\)$"):
            read_url(srv.url + "/drip", count=1, timeout=5, deadline=1.0)
        assert time.monotonic() - start < 5  # the deadline ended it, not a per-read time-out
        start = time.monotonic()
        with pytest.raises(MetricsError, match=r"/hdrip: scrape timed out \(still sending after 1 s\)$"):
            read_url(srv.url + "/hdrip", count=1, timeout=5, deadline=1.0)  # headers that never end
        assert time.monotonic() - start < 5


def test_user_info_in_the_url_is_basic_auth_and_never_printed():
    """break-it 3: http://user:pass@127.0.0.1 failed with "unknown host"; the user info is
    HTTP basic authentication, and the series is named without it."""
    with _Tricky() as srv:
        url = srv.url.replace("http://", "http://user:pa%20ss@") + "/auth/metrics"
        [s] = read_url(url, count=1)
        assert srv.auth_seen == ["Basic dXNlcjpwYSBzcw=="]
        assert s.name == f"{srv.url}/auth/metrics [Qwen3-0.6B]" and "pa%20ss" not in s.name
        p = _cli("--no-redact", "--metrics", url, "--count", "1")
        assert p.returncode == 0 and "pa%20ss" not in p.stdout, p.stderr
        with _Tricky() as other:
            auth = srv.url.replace("http://", "http://user:pa%20ss@")
            srv.auth_seen.clear()
            read_url(f"{auth}/to/{srv.httpd.server_address[1]}/auth/metrics", count=1)  # same origin: sent on
            assert srv.auth_seen == ["Basic dXNlcjpwYSBzcw=="]
            with pytest.raises(MetricsError, match="HTTP 401"):  # another origin: never sent there
                read_url(f"{auth}/to/{other.httpd.server_address[1]}/auth/metrics", count=1)
            assert other.auth_seen == [None]


def test_error_messages_on_stderr_are_redacted():
    """break-it 3: the URL's password and ?token=, and a server's reason phrase, were printed
    as they were on standard error."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = _cli("--metrics", f"http://user:SECRETPW@127.0.0.1:{port}/metrics?token=SECRETTOK", "--count", "1")
    assert p.returncode == 2
    assert p.stderr == (
        f"vllm-doctor: error: http://<redacted>@127.0.0.1:{port}/metrics?token=<redacted>: connection refused "
        "(is the server running, and is that its port?)\n"
    )
    with _Tricky() as srv:
        p = _cli("--metrics", srv.url + "/secret/metrics", "--count", "1")
    assert (
        p.returncode == 2 and p.stderr == f"vllm-doctor: error: {srv.url}/secret/metrics: HTTP 500 Boom hf_<redacted>\n"
    )
    p = _cli("http://u:SECRETPW@h/x?token=T0K")
    assert p.returncode == 2 and "SECRETPW" not in p.stderr and "T0K" not in p.stderr
    assert "http://<redacted>@h/x?token=<redacted>" in p.stderr


@pytest.mark.parametrize(
    "url,why",
    [
        ("http://[::1", "not a valid URL (Invalid IPv6 URL)"),
        ("http://a b", "a URL cannot hold spaces or control characters"),
        ("", "not an http:// or https:// URL"),
        ("scrape.prom", "not an http:// or https:// URL"),
        ("http://", "the URL names no host"),
        ("http://h:99999/", "not a valid URL (Port out of range 0-65535)"),
    ],
)
def test_a_bad_metrics_url_is_a_usage_error(url, why):
    """break-it 10: a bad IPv6 literal or a space in the URL was an internal error."""
    p = _cli("--metrics", url)
    assert p.returncode == 2
    assert p.stderr == (
        f"vllm-doctor: error: Invalid value for --metrics: {url!r}: {why} (http://host:port) "
        "(see `vllm-doctor diagnose --help`)\n"
    )
