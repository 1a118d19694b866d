"""Scraping a live server (`--metrics URL --count N --interval S`): progress on standard
error while it scrapes, and Ctrl-C (or SIGTERM) gives the verdict of the scrapes taken so
far, as -F summarises (fresh-user report, finding 10). A real HTTP server on 127.0.0.1."""

import os
import signal
import subprocess
import sys
import time

import pytest
from terminal import VD, Pane, needs_tmux
from test_metrics_http import _scrapes, _Server

from vllm_doctor.metrics import ScrapingInterrupted, inputs, read_metrics, read_url


def _interrupt_at(n):
    """A ``sleep`` that raises KeyboardInterrupt (as Ctrl-C does) on its ``n``-th call."""
    calls = []

    def sleep(seconds):
        calls.append(seconds)
        if len(calls) == n:
            raise KeyboardInterrupt

    return sleep


def test_ctrl_c_after_scrapes_keeps_the_scrapes_taken():
    with _Server(_scrapes("storm-v1")) as srv:
        with pytest.raises(ScrapingInterrupted) as info:
            read_url(srv.url, interval=0, count=10, sleep=_interrupt_at(4))
    assert info.value.scrapes == 4 and srv.hits == 4
    (series,) = info.value.series
    assert series.summary.scrapes == 4
    assert series.warnings[0] == "interrupted after 4 of 10 scrapes: this covers those"


def test_ctrl_c_before_the_first_scrape_is_a_plain_interrupt(monkeypatch):
    def fetch(url, timeout, deadline=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(inputs, "fetch", fetch)
    with pytest.raises(KeyboardInterrupt) as info:
        read_url("http://127.0.0.1:9", interval=0, count=3)
    assert type(info.value) is KeyboardInterrupt


def test_read_metrics_hands_on_what_every_input_read():
    def progress(url):
        def update(taken, count, failure):
            if url == b.url and taken == 2:  # Ctrl-C while the second server is scraped
                raise KeyboardInterrupt

        return update

    with _Server(_scrapes("storm-v1")) as a, _Server(_scrapes("hot-idle-v1")) as b:
        with pytest.raises(ScrapingInterrupted) as info:
            read_metrics(a.url, b.url, interval=0, count=3, progress=progress)
    first, second = info.value.series
    assert first.summary.scrapes == 3 and "interrupted" not in " ".join(first.warnings)
    assert second.summary.scrapes == 2 and second.warnings[0].startswith("interrupted after 2 of 3 scrapes")


def test_progress_is_called_after_each_scrape_with_failures_named():
    seen = []
    with _Server(_scrapes("storm-v1"), fail_after=2) as srv:
        read_url(srv.url, interval=0, count=3, progress=lambda *a: seen.append(a))
    assert seen[:2] == [(1, 3, None), (2, 3, None)]
    assert seen[2][:2] == (3, 3) and "HTTP 503" in seen[2][2]


def _cli_env():
    return {**os.environ, "COLUMNS": "200"}


def test_sigterm_while_scraping_gives_the_verdict_of_the_scrapes_taken():
    with _Server(_scrapes("storm-v1")) as srv:
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "vllm_doctor",
                "diagnose",
                "--metrics",
                srv.url,
                "--interval",
                "0.2",
                "--count",
                "1000",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=_cli_env(),
        )
        deadline = time.monotonic() + 60
        while srv.hits < 4:
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 1, err  # the storm's verdict, not 130
    assert out.startswith("VD201 preemption_storm")
    assert "vllm-doctor: interrupted after" in err and "the verdict covers the scrapes taken" in err
    assert "scraping" not in err  # no terminal on stderr: no banner, no bar


def test_exit_codes_in_help_name_the_interrupt():
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "--help"], capture_output=True, text=True, env=_cli_env()
    )
    flat = " ".join(p.stdout.split())
    assert "130 interrupted (Ctrl-C) before there was anything to judge" in flat
    assert "gives the verdict of the scrapes taken, with its code" in flat


@needs_tmux
def test_on_a_terminal_scraping_shows_progress_and_ctrl_c_gives_the_verdict(tmp_path):
    with _Server(_scrapes("storm-v1")) as srv:
        with Pane(f"exec env -u CI {VD} diagnose --metrics {srv.url} --interval 0.3 --count 1000", tmp_path) as pane:
            screen = pane.wait_for("/1000", 60)
            assert "Ctrl-C for the verdict so far" in screen and "scrapes of 127.0.0.1:" in screen
            deadline = time.monotonic() + 60
            while srv.hits < 4:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            pane.keys("C-c")
            code = pane.wait_end(60)
            screen = pane.screen()
    assert code == 1, screen
    assert "vllm-doctor: interrupted after" in screen and "VD201 preemption_storm" in screen
    assert "/1000" not in screen.split("interrupted after", 1)[1]  # the bar is cleared
