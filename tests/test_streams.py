"""Streams and files: a closed, full or broken stdout/stdin/stderr, and -o, behave as a
script needs (issue 16, "Streams and files"). Real processes and real descriptors: the
shell closes or redirects them exactly as an operator's command line would."""

import json
import os
import stat
import subprocess
import sys

import pytest
from conftest import fixture_path

KV = str(fixture_path("s001-llama31-8b-3090-kv-29k.log"))
HEALTHY = str(fixture_path("r022-v1-startup-sm120-healthy.log"))
PY = f"{sys.executable} -m vllm_doctor"


def sh(script: str, **kw):
    """Run ``script`` in bash (pipefail on); returns the CompletedProcess."""
    return subprocess.run(["bash", "-c", "set -o pipefail; " + script], capture_output=True, text=True, **kw)


def one_error_line(stderr: str, *words: str) -> None:
    assert stderr.count("\n") == 1 and stderr.startswith("vllm-doctor: error: "), stderr
    assert "Traceback" not in stderr
    for w in words:
        assert w in stderr, (w, stderr)


def test_closed_stdout_is_one_line_and_exit_2():
    p = sh(f"{PY} diagnose {KV} >&-")
    assert p.returncode == 2
    one_error_line(p.stderr, "standard output", "closed")


def test_closed_stdout_still_writes_the_output_file(tmp_path):
    out = tmp_path / "v.json"
    p = sh(f"{PY} diagnose -f json -o {out} {KV} >&-")
    assert p.returncode == 2
    one_error_line(p.stderr, "standard output")
    assert json.loads(out.read_text())["primary_class"] == "kv_cache_capacity"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_full_stdout_is_one_line_and_exit_2(tmp_path, fmt):
    out = tmp_path / "v.md"
    p = sh(f"{PY} diagnose -f {fmt} {KV} > /dev/full")
    assert p.returncode == 2
    one_error_line(p.stderr, "No space left on device")
    p = sh(f"{PY} diagnose -f markdown -o {out} {KV} > /dev/full")
    assert p.returncode == 2 and out.read_text().startswith("## KV cache too small for max_model_len")


def test_closed_stdin_is_one_line_and_exit_2():
    p = sh(f"{PY} diagnose - <&-")
    assert p.returncode == 2
    one_error_line(p.stderr, "standard input", "closed")
    p = sh(f"{PY} diagnose <&-")
    assert p.returncode == 2
    one_error_line(p.stderr, "no input")


def test_closed_or_full_stderr_still_exits_2_when_a_message_is_lost():
    for redirect in ("2>&-", "2>/dev/full"):
        p = sh(f"{PY} diagnose /nonexistent/x.log {redirect}")
        assert p.returncode == 2, redirect
        assert p.stdout == ""
        p = sh(f"{PY} diagnose -f json {KV} /nonexistent/x.log {redirect}")
        assert p.returncode == 2 and json.loads(p.stdout)["primary_class"] == "kv_cache_capacity"


def test_closed_stderr_with_nothing_to_say_keeps_the_verdicts_code():
    assert sh(f"{PY} diagnose {HEALTHY} 2>&-").returncode == 0
    assert sh(f"{PY} diagnose {KV} 2>&-").returncode == 1


@pytest.mark.parametrize("log,code", [(HEALTHY, 0), (KV, 1)])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_broken_pipe_exits_with_the_verdicts_code_quietly(log, code, fmt):
    # `true` exits without reading: the verdict is written into a pipe nobody reads (EPIPE)
    p = sh(f"{PY} diagnose -f {fmt} {log} | true; exit ${{PIPESTATUS[0]}}")
    assert p.returncode == code
    assert p.stderr == ""


def test_output_onto_an_input_is_refused_and_the_log_kept(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(open(KV).read())
    before = log.read_bytes()
    for cmd in (f"{PY} diagnose -o {log} {log}", f"{PY} diagnose -f json -o {log} - < {log}"):
        p = sh(cmd)
        assert p.returncode == 2, cmd
        one_error_line(p.stderr, "refusing", "one of the inputs")
        assert log.read_bytes() == before
    link = tmp_path / "link.log"
    link.symlink_to(log)
    p = sh(f"{PY} diagnose -o {link} {log}")
    assert p.returncode == 2 and log.read_bytes() == before


def test_output_keeps_the_targets_mode(tmp_path):
    out = tmp_path / "verdict.json"
    out.write_text("old")
    out.chmod(0o600)
    assert sh(f"{PY} diagnose -f json -o {out} {KV}").returncode == 1
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert json.loads(out.read_text())["primary_class"] == "kv_cache_capacity"
    new = tmp_path / "new.json"
    assert sh(f"umask 027; {PY} diagnose -f json -o {new} {KV}").returncode == 1
    assert stat.S_IMODE(new.stat().st_mode) == 0o640  # a new file: as the umask says


def test_output_follows_a_symlink_instead_of_replacing_it(tmp_path):
    target = tmp_path / "real" / "verdict.md"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "verdict.md"
    link.symlink_to(target)
    assert sh(f"{PY} diagnose -f markdown -o {link} {KV}").returncode == 1
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("## KV cache too small for max_model_len")
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".vllm-doctor-")]


def test_output_into_a_hard_linked_file_keeps_the_link(tmp_path):
    a = tmp_path / "a.json"
    a.write_text("old")
    b = tmp_path / "b.json"
    os.link(a, b)
    assert sh(f"{PY} diagnose -f json -o {a} {KV}").returncode == 1
    assert a.stat().st_ino == b.stat().st_ino and json.loads(b.read_text())["primary_class"] == "kv_cache_capacity"


def test_output_into_a_missing_directory_is_one_line(tmp_path):
    p = sh(f"{PY} diagnose -o {tmp_path}/no/such/dir/v.json {KV}")
    assert p.returncode == 2
    one_error_line(p.stderr, "cannot write")


def test_a_file_name_with_a_newline_cannot_split_the_one_line_error(tmp_path):
    name = str(tmp_path / "x\nvllm-doctor: error: forged\x1b[2J.log")
    p = subprocess.run([sys.executable, "-m", "vllm_doctor", "diagnose", name], capture_output=True, text=True)
    assert p.returncode == 2
    one_error_line(p.stderr, "no such file")
    assert "\x1b" not in p.stderr


def test_an_output_name_with_control_characters_is_one_line(tmp_path):
    name = str(tmp_path / "no\ndir\x07" / "v.json")
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-o", name, KV], capture_output=True, text=True
    )
    assert p.returncode == 2
    one_error_line(p.stderr, "cannot write")
    assert "\x07" not in p.stderr


def test_rules_into_a_full_or_broken_stdout_is_quiet_or_one_line():
    if os.path.exists("/dev/full"):
        p = sh(f"{PY} rules > /dev/full")
        assert p.returncode == 2
        one_error_line(p.stderr, "No space left on device")
    p = sh(f"{PY} rules | true")
    assert p.stderr == ""


def test_an_internal_error_is_one_line_unless_debugging(tmp_path):
    # A bug anywhere below the command (here: a renderer that raises) is reported in one line.
    code = (
        "import sys, vllm_doctor.render as r\n"
        "def boom(*a, **k): raise RuntimeError('synthetic bug')\n"
        "r.render = boom\n"
        f"sys.argv = ['vllm-doctor', 'diagnose', {KV!r}]\n"
        "import vllm_doctor.cli as c\nc.main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "internal error: RuntimeError: synthetic bug" in p.stderr
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "VLLM_DOCTOR_DEBUG": "1"}
    )
    assert "Traceback" in p.stderr


def test_an_oserror_that_is_no_write_is_an_internal_error_not_cannot_write_output():
    """break-it 5: any OSError below the command (there: time.gmtime's EOVERFLOW for a
    scrape's time stamp) was reported as "cannot write output", even with debugging on."""
    code = (
        "import sys, time, vllm_doctor.render as r\n"
        "def boom(*a, **k): time.gmtime(1e20)\n"  # the real EOVERFLOW (an OSError), raised by the C library
        "r.render = boom\n"
        f"sys.argv = ['vllm-doctor', 'diagnose', {KV!r}]\n"
        "import vllm_doctor.cli as c\nc.main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "internal error: OSError" in p.stderr or "internal error: OverflowError" in p.stderr, p.stderr
    assert "cannot write output" not in p.stderr
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "VLLM_DOCTOR_DEBUG": "1"}
    )
    assert "Traceback" in p.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_help_into_a_full_stdout_is_still_cannot_write_output():
    p = sh(f"{PY} --help > /dev/full")
    assert p.returncode == 2
    one_error_line(p.stderr, "cannot write output", "No space left on device")


@pytest.mark.parametrize("cmd", ["rules", "explain kv_cache_capacity"])
def test_rules_and_explain_with_stdout_closed_exit_2_as_diagnose_does(cmd):
    """break-it 13: they exited 0 and said nothing."""
    p = sh(f"{PY} {cmd} >&-")
    assert p.returncode == 2
    one_error_line(p.stderr, "cannot write to standard output: it is closed")


@pytest.mark.parametrize("cmd", ["rules", "explain kv_cache_capacity"])
def test_rules_and_explain_into_a_closed_pipe_exit_0_every_time(cmd):
    """break-it 13: `explain | head -1` exited 1 ("a problem was diagnosed") and `rules | head
    -1` 0 or 1 at random. A reader that closed the pipe has what it wanted: 0, quietly."""
    for _ in range(5):
        p = sh(f"{PY} {cmd} | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}")
        assert p.stdout.strip() == "0" and p.stderr == "", (p.stdout, p.stderr)
