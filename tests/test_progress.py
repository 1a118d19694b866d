"""Progress on long work: compressed input (compressed bytes against the file's size) and
standard input (bytes read, no total) (issue 12)."""

import gzip
import os
import subprocess
import sys
import threading

from vllm_doctor import cli, sources


def test_gzip_progress_counts_compressed_bytes_against_the_file_size(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "PROGRESS_MIN_BYTES", 0)
    p = tmp_path / "x.log.gz"
    p.write_bytes(gzip.compress(b"INFO 01-01 00:00:00 [x.py:1] hello\n" * 200000))
    src = sources.open_input(str(p))
    bar, on_read = cli._progress_bar(src)
    task = bar.tasks[0]
    assert task.total == p.stat().st_size and "(gzip)" in task.description
    for _ in sources.windows(src, size=65536, on_read=on_read):
        assert 0 < task.completed <= task.total
    assert task.completed == task.total


def test_stdin_progress_counts_bytes_without_a_total(monkeypatch):
    r, w = os.pipe()
    data = b"line\n" * 100000
    threading.Thread(target=lambda: (os.write(w, data), os.close(w)), daemon=True).start()
    with os.fdopen(r, "rb") as fh:
        monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": fh})())
        src = sources.open_input("-")
        bar, on_read = cli._progress_bar(src)
        task = bar.tasks[0]
        assert task.total is None
        for _ in sources.windows(src, on_read=on_read):
            pass
    assert task.completed == len(data)


def test_small_files_get_no_bar(tmp_path):
    p = tmp_path / "small.log"
    p.write_bytes(b"x\n")
    assert cli._progress_bar(sources.open_input(str(p))) is None


def test_the_bar_draws_on_a_terminal_for_gzip_input(tmp_path, monkeypatch):
    # A real pseudo-terminal on stderr: the bar is drawn there (and cleared), stdout stays clean.
    import pty

    p = tmp_path / "x.log.gz"
    p.write_bytes(gzip.compress(b"INFO 01-01 00:00:00 [x.py:1] hello\n" * 200000))
    code = (
        "import sys; from vllm_doctor import cli; cli.PROGRESS_MIN_BYTES = 0; sys.argv = ['vllm-doctor', 'diagnose', "
        f"{str(p)!r}, '--progress']; cli.main()"
    )
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out, _ = proc.communicate(timeout=60)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert b"x.log.gz (gzip)" in seen
    assert b"x.log.gz (gzip)" not in out
