"""What a first-time operator reads at 80x24 (REPORT-fresh19 P6-P9, breakit3 7), by family:
the recap and "do this first" keep the whole action, a ticket's time is the failure's, the
device has its own word and never a blank index, the collapsed lines say what they hold,
file names break at separators only, stderr errors wrap on a terminal, a document quoting
vLLM is no log, an OOM listing thousands of processes names a few."""

import os
import subprocess
import sys

import pytest
import regex
from conftest import fixture_path, load_manifest
from terminal import VD, needs_tmux, run_in_tmux

from vllm_doctor import diagnose
from vllm_doctor.redact import redact_verdict
from vllm_doctor.render import render
from vllm_doctor.render.evidence import incident_times
from vllm_doctor.render.facts import device_word
from vllm_doctor.render.markdown import TICKET_EVIDENCE_CHARS, TICKET_EVIDENCE_MIN
from vllm_doctor.render.text import NOTHING_JUDGED, RECAP_ACTION_CHARS, break_path, recap, recap_action
from vllm_doctor.rules.rule import MAX_EVIDENCE_CHARS

MANIFEST = load_manifest()
M09 = "m09-ascend-pod-prefix-literal-ansi-two-instances-available-memory-0.log"


def verdict_of(name):
    return redact_verdict(diagnose(str(fixture_path(name))))


def _file(prefix):
    return next(e["file"] for e in MANIFEST if e["file"].startswith(prefix))


def _words(text):
    return " ".join(text.split())


# -- P6: the recap and "do this first" --------------------------------------------------

#: Remedies in words (no flag) of every length, and flags: cut before at 80 columns.
RECAP_LOGS = ["p01", "p21", "n11", "p22", "m09", "m08", "s001", "k029", "x014"]


@pytest.mark.parametrize("prefix", RECAP_LOGS)
def test_the_recap_and_do_this_first_keep_the_whole_action_at_80_columns(prefix):
    v = verdict_of(_file(prefix))
    r = v.primary.remedies[0]
    out = render(v, "text", width=80, height=24)
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= 80
    at = next(i for i, x in enumerate(lines) if x.startswith("recap: "))
    block = _words(" ".join(lines[at:]))
    # one shape: code and class always, then the first thing to do, whole
    assert block.startswith(f"recap: {v.primary_code} {v.primary_class}")
    if len(lines) - at > 1:  # wrapped: the whole shape, severity included
        assert block.startswith(f"recap: {v.primary_code} {v.primary_class} ({v.severity}) \u00b7 do this first: ")
    assert f"do this first: {_words(r.flag or recap_action(r.action))}" in block
    assert "\u2026" not in block
    head = next(i for i, x in enumerate(lines) if x.startswith("do this first:"))
    end = next(i for i in range(head + 1, len(lines)) if not lines[i].startswith("  "))
    assert _words(r.flag or r.action) in _words(" ".join(lines[head:end]))


@pytest.mark.parametrize(
    "action,repeated",
    [
        # u19's first remedy (six lines at 80 columns): its instruction, pointing back to it
        (
            "Find who sent the SIGKILL: the kernel's OOM killer (dmesg -T | grep -i -e 'out of memory' -e 'killed "
            "process', or journalctl -k), a container memory limit (docker inspect --format '{{.State.OOMKilled}}' "
            "CONTAINER; kubectl describe pod: Last State Reason OOMKilled), a scheduler's time or memory limit",
            "Find who sent the SIGKILL (remedy 1 above)",
        ),
        # short: whole
        ("Move the co-tenant process(es) 29153 off this GPU (check with nvidia-smi)", None),
        # long, but its first ": " is inside brackets or a quote, or leaves under three words: whole
        ("Drop it (see: " + "x " * 90 + ")", None),
        ("Drop --omni: " + "y " * 90, None),
    ],
)
def test_the_recap_repeats_a_long_action_as_its_instruction(action, repeated):
    assert recap_action(action) == (repeated or action)
    assert len(action) > RECAP_ACTION_CHARS or repeated is None


def test_what_gives_way_in_the_recap_first_is_the_source_then_the_severity():
    v = verdict_of(_file("s001"))
    full = recap(v)
    assert full == (
        "VD101 kv_cache_capacity (critical) · do this first: --max-model-len 23552 · s001-llama31-8b-3090-kv-29k.log"
    )
    assert recap(v, len(full) - 1) == "VD101 kv_cache_capacity (critical) · do this first: --max-model-len 23552"
    assert recap(v, 62) == "VD101 kv_cache_capacity · do this first: --max-model-len 23552"
    # narrower still: nothing is cut and the severity stays (the caller wraps), the flag whole
    assert recap(v, 30) == "VD101 kv_cache_capacity (critical) · do this first: --max-model-len 23552"
    out = render(v, "text", width=50, height=10).splitlines()
    assert out[-2:] == ["recap: VD101 kv_cache_capacity (critical) \u00b7", "  do this first: --max-model-len 23552"]


# -- P7: the ticket ---------------------------------------------------------------------


def test_the_incident_time_is_the_failures_not_a_line_quoted_from_another_run():
    v = verdict_of(M09)
    # the evidence quotes the healthy first instance (06:46:16); the failure is 06:47:41
    assert incident_times(v.primary) == ("01-15 06:46:16", "01-15 06:47:41")
    assert incident_times(v.primary, v) == ("01-15 06:47:41", "01-15 06:47:41")
    md = render(v, "markdown")
    assert md.splitlines()[0].endswith(" at 01-15 06:47:41")
    assert "| First incident | 01-15 06:47:41 |" in md and "06:46:16 |" not in md
    text = render(v, "text", width=80)
    assert "VD102 startup_memory_contention \u00b7 01-15 06:47:41 \u00b7" in text


def test_a_ticket_title_never_leaves_a_blank_for_the_device_index():
    seen = 0
    for entry in MANIFEST:
        title = render(verdict_of(entry["file"]), "markdown").splitlines()[0]
        assert not regex.search(r"\bon [GNXT]PU \(", title), (entry["file"], title)
        seen += " GiB GPU at " in title or title.endswith(" GiB GPU")
    assert seen  # the form without an index is used: "on a 23.58 GiB GPU"


@pytest.mark.parametrize(
    "texts, word",
    [
        (["Starting to capture ACL graphs for cases: [256, 248]"], "NPU"),
        (["RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"], "NPU"),
        (['File "/usr/local/python3.10/site-packages/vllm_ascend/worker/worker_v1.py", line 270'], "NPU"),
        (["torch_npu.npu.mem_get_info(device='npu:0')"], "NPU"),
        (["XPU out of memory. Tried to allocate 1.00 GiB"], "XPU"),
        (["RESOURCE_EXHAUSTED: TPU backend ran out of memory"], "TPU"),
        (["torch.OutOfMemoryError: CUDA out of memory. GPU 0 has a total capacity of 79.15 GiB"], "GPU"),
        (["Free memory on device (20.1/23.58 GiB) on startup"], "GPU"),
        ([], "GPU"),
    ],
)
def test_the_device_is_named_by_the_words_its_log_uses(texts, word):
    assert device_word(texts) == word


def test_an_ascend_log_reads_npu_in_the_ticket_and_the_text_view():
    v = verdict_of(M09)
    md = render(v, "markdown")
    assert (
        md.splitlines()[0] == "## NPU memory taken by another process at startup on a 60.96 GiB NPU at 01-15 06:47:41"
    )
    assert "| NPU | 60.96 GiB total |" in md
    assert regex.search(r"^  NPU +60\.96 GiB total$", render(v, "text", width=80), regex.M)
    cuda = render(verdict_of(_file("s001")), "markdown")
    assert " GPU" in cuda.splitlines()[0] or "| GPU" in cuda


def test_the_ticket_clips_each_row_and_says_what_its_collapsed_lines_hold():
    md = render(verdict_of(M09), "markdown")
    fence, _, details = md.partition("<details><summary>")
    rows = [x for x in fence.split("```text", 2)[1].split("```")[0].splitlines() if x]
    for row in rows:
        text = row.split("  ", 2)[-1].split("   <- ")[0]
        assert len(row) <= TICKET_EVIDENCE_CHARS or len(text) <= TICKET_EVIDENCE_MIN + 2, row
    assert any(row.endswith("got this far") and "\u2026" in row for row in rows)
    # the collapsed block is there, and says honestly what it holds
    assert details.startswith(f"The log lines (whole up to {MAX_EVIDENCE_CHARS} characters")
    assert "mode: PIECEWISE, uniform_decode: False" in details
    p22 = render(verdict_of(_file("p22")), "markdown")
    assert "The full log lines" not in p22 and f"whole up to {MAX_EVIDENCE_CHARS} characters" in p22
    text = render(verdict_of(_file("p22")), "text", width=80)
    assert f"whole up to {MAX_EVIDENCE_CHARS}" in _words(text) and "has it whole)" not in text


def test_a_failure_the_classes_do_not_name_is_titled_by_its_own_finding():
    titles = {p: render(verdict_of(_file(p)), "markdown").splitlines()[0] for p in ("p22", "p21", "m19", "u014")}
    assert titles["p22"] == "## Out of GPU memory outside vLLM"
    assert titles["p21"] == "## Not a capacity OOM"
    assert titles["m19"] == "## Host RAM ran out"
    assert titles["u014"].startswith("## Server failure: CUDA error")  # the exception, as before


# -- P8: file names and errors ----------------------------------------------------------


@pytest.mark.parametrize(
    "name, width, lines",
    [
        ("fixtures/logs/short.log", 78, ["fixtures/logs/short.log"]),
        ("fixtures/logs/" + "a" * 70 + ".log", 78, ["fixtures/logs/", "a" * 70 + ".log"]),
        ("/var/log/vllm/x.log", 10, ["/var/log/", "vllm/x.log"]),
        ("dir/p21-colocate-cumem-fake-oom.log", 20, ["dir/p21-colocate-", "cumem-fake-oom.log"]),
        ("x" * 25, 10, ["x" * 10, "x" * 10, "x" * 5]),
    ],
)
def test_a_path_breaks_at_separators_only(name, width, lines):
    assert break_path(name, width) == lines
    assert "".join(lines) == name


@pytest.mark.parametrize("prefix", ["m08", "m09", "n11", "p21"])
def test_a_long_file_name_is_never_split_inside_a_word_in_the_text_view(prefix):
    path = str(fixture_path(_file(prefix)))
    rel = os.path.relpath(path)
    out = render(redact_verdict(diagnose(rel)), "text", width=80, height=24)
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= 80
    name = os.path.basename(rel)
    if len(name) <= 78:  # a name that fits a line is on one line, twice (finding, sources)
        assert sum(name in x for x in lines) >= 2, out
    else:  # longer: broken after a '-', '_' or '.' of it, the pieces joined give it back
        pieces = [x.strip() for x in lines if x.strip() and x.strip() in rel]
        assert any(p.endswith(("-", "_", ".")) for p in pieces)
    for x in lines:  # never a line that ends inside a word of the name and goes on with it
        assert not regex.search(r"[a-z0-9]$", x) or not any((x.strip() + y.strip()) in rel and y.strip() for y in lines)


def _pty_stderr(args, columns):
    """Run the CLI with standard error a terminal of ``columns``; its stderr lines."""
    import pty

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns)}
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", *args], stdout=subprocess.DEVNULL, stderr=follower, env=env, timeout=60
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return p.returncode, out.decode().replace("\r", "").splitlines()


@pytest.mark.parametrize(
    "args",
    [
        ["diagnose", "http://127.0.0.1:9/metrics"],  # the URL hint
        ["diagnose", "/nonexistent/dir/with/a/very/long/name/that/goes/on/and/on/server.log"],
        ["explain", "VD999"],
    ],
)
def test_errors_wrap_at_words_on_a_terminal_and_stay_one_line_in_a_pipe(args):
    piped = subprocess.run([sys.executable, "-m", "vllm_doctor", *args], capture_output=True, text=True, timeout=60)
    one = [x for x in piped.stderr.splitlines() if x]
    assert piped.returncode == 2 and len(one) == 1 and len(one[0]) > 60
    rc, lines = _pty_stderr(args, 60)
    assert rc == 2 and len(lines) >= 2
    assert lines[0].startswith("vllm-doctor: error:") and all(x.startswith("  ") for x in lines[1:])
    assert _words(" ".join(lines)) == _words(one[0])  # same words, none split
    assert all(len(x) <= 60 or " " not in x.strip() for x in lines)


@needs_tmux
def test_in_a_real_80x24_terminal_the_recap_holds_the_action_and_paths_break_whole(tmp_path):
    log = os.path.relpath(fixture_path(_file("m08")))
    screen = run_in_tmux(f"{VD} diagnose {log}", tmp_path, width=80, height=24)
    rows = [x.rstrip() for x in screen.splitlines() if x.strip()]
    assert "recap: VD106 config_limit_error (critical) \u00b7 do this first: --max-num-seqs 939" in rows
    assert sum(x.strip().rstrip(":") == os.path.basename(log) for x in rows) == 2  # finding, source
    assert max(len(x) for x in rows) <= 80


# -- P9: a document that quotes vLLM ----------------------------------------------------

QUOTE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.58 GiB"
)
PROSE = "The server is started with the flags below and then we look at what it printed when it failed."


def _doc(shape, lines, quotes=1):
    """A document of ``lines`` lines quoting the OOM ``quotes`` times, in one of the shapes
    a page about vLLM takes."""
    body = {
        "markdown": lambda i: f"## Step {i}" if i % 10 == 0 else PROSE,
        "chat": lambda i: f"[10:{i % 60:02d}] alice: {PROSE}",
        "wiki": lambda i: f"* {PROSE}" if i % 3 else f"== Section {i} ==",
    }[shape]
    out = [body(i) for i in range(lines - quotes)]
    for q in range(quotes):
        out.insert(min(5 + q * 7, len(out)), QUOTE)
    return "\n".join(out) + "\n"


def _cli(tmp_path, text, *extra):
    path = tmp_path / "input.txt"
    path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", str(path), *extra], capture_output=True, text=True
    )


@pytest.mark.parametrize("shape", ["markdown", "chat", "wiki"])
def test_a_document_that_quotes_a_vllm_line_is_not_a_log(tmp_path, shape):
    p = _cli(tmp_path, _doc(shape, 200))
    assert p.returncode == 3, p.stdout
    assert "not a vLLM log: 1 of its 200 lines are vLLM messages" in _words(p.stdout)
    assert "do this first" not in p.stdout and "critical" not in p.stdout
    assert f"({NOTHING_JUDGED})" in p.stdout
    js = _cli(tmp_path, _doc(shape, 200), "-f", "json")  # a program reads JSON: the operator, stderr
    assert js.returncode == 3 and js.stderr.startswith("vllm-doctor: not a vLLM log: 1 of its 200 lines")


def test_this_projects_readme_is_not_a_log():
    p = subprocess.run([sys.executable, "-m", "vllm_doctor", "diagnose", "README.md"], capture_output=True, text=True)
    assert p.returncode == 3 and "not a vLLM log" in p.stdout and "--max-num-seqs" not in p.stdout


def _exit(tmp_path, text):
    """The exit code of the verdict on ``text``, in this process (so that
    ``VLLM_DOCTOR_MUTATE`` moves the thresholds it reads: tools/mutation_check.py)."""
    path = tmp_path / "input.txt"
    path.write_text(text)
    return diagnose(str(path)).exit_code


def test_a_short_paste_in_prose_or_a_log_with_vllms_prefix_is_still_diagnosed(tmp_path):
    # QUOTED_DOC_MIN_LINES (80): 60 lines are a paste in an issue, read as a log; 100 are not
    assert _exit(tmp_path, _doc("markdown", 60)) == 1
    assert _exit(tmp_path, _doc("markdown", 100)) == 3
    # QUOTED_DOC_MAX_SHARE (5%): of 200 lines, 6 vLLM messages (3%) are quotes in a document,
    # 14 (7%) a log without a prefix
    assert _exit(tmp_path, _doc("markdown", 200, quotes=6)) == 3
    assert _exit(tmp_path, _doc("markdown", 200, quotes=14)) == 1
    # a long log with vLLM's record prefix on its lines is a log, however little it says
    log = "\n".join(
        [f"INFO 05-01 14:39:{i % 60:02d} [api_server.py:1] GET /health 200" for i in range(400)]
        + [f"ERROR 05-01 14:40:00 [core.py:843] {QUOTE}"]
    )
    assert _exit(tmp_path, log + "\n") == 1


# -- breakit3 7: an OOM that lists thousands of processes -------------------------------


def _crowded(n):
    """An OOM listing ``n`` processes of 1 MiB and, 8th, one of 30 GiB (the largest)."""
    procs = [f"Process {p} has 1.00 MiB memory in use. " for p in range(1000, 1000 + n)]
    procs.insert(min(7, n), "Process 4242 has 30.00 GiB memory in use. ")
    return (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        f"79.15 GiB of which 1.50 GiB is free. {''.join(procs)}Including non-PyTorch memory, this process has "
        "12.40 GiB memory in use. Of the allocated memory 12.00 GiB is allocated by PyTorch\n"
    )


@pytest.mark.parametrize("n", [10, 1000])  # 1000: 40,000 characters, inside the record cap
def test_an_oom_listing_many_processes_names_the_largest_then_how_many_more(tmp_path, n):
    for fmt in ("text", "markdown"):
        out = _cli(tmp_path, _crowded(n), "-f", fmt).stdout
        assert out.count("PID ") == 5 and "PID 4242 (30.00 GiB), PID 1000 (1.00 MiB)" in _words(out)  # largest first
        assert "process(es) 4242, 1000, 1001, 1002, 1003 +" in _words(out)  # the title and remedy too
        assert regex.search(r"\+[0-9]+ more", out)
        assert "1.00 MiB" in out and "1.02 MiB" not in out  # MiB precision kept
        assert len(out.splitlines()) < 80, fmt
    small = _cli(tmp_path, _crowded(2), "-f", "text").stdout
    assert "PID 4242 (30.00 GiB), PID 1000 (1.00 MiB), PID 1001 (1.00 MiB)" in _words(
        small
    )  # largest first (the facts keep that order)
    assert not regex.search(r"\+[0-9]+ more", small)


# -- VD901: one wording ----------------------------------------------------------------


def test_vd901_reads_severity_and_confidence_in_one_shape(tmp_path):
    judged = render(verdict_of(_file("p01")), "text", width=80).splitlines()[0]
    assert judged.startswith("VD901 unknown (critical, medium confidence): ")
    p = _cli(tmp_path, "NAME=Debian\nVERSION=12\n")
    assert p.returncode == 3
    assert p.stdout.startswith(f"VD901 unknown ({NOTHING_JUDGED}): ")
    md = _cli(tmp_path, "NAME=Debian\nVERSION=12\n", "-f", "markdown").stdout
    assert f"**VD901 unknown** ({NOTHING_JUDGED}): " in md
    assert "(unknown)" not in p.stdout + md


KV_ERROR = (
    "ValueError: The model's max seq len (65536) is larger than the maximum number of tokens that can be stored in"
    " KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing"
    " the engine."
)


@pytest.mark.parametrize("after,judged", [(0, True), (7, True), (12, False)])
def test_a_programs_output_ending_in_vllms_failure_is_a_log(tmp_path, after, judged):
    # breakit4 item 2: `python train.py 2>&1 | tee log` - 200 prints, then vLLM's fatal error.
    # QUOTED_DOC_TAIL_LINES 10: 7 lines after it still end the input (at half, 5, they would
    # not); 12 lines of a page after it do not (at 1.5x, 15, they would).
    body = [f"epoch 0 step {i} loss {1.0 / (i + 1):.4f}" for i in range(200)]
    text = "\n".join(body + [KV_ERROR] + [PROSE] * after) + "\n"
    assert _exit(tmp_path, text) == (1 if judged else 3)
    if after == 0:  # as the operator sees it
        p = _cli(tmp_path, text)
        assert p.returncode == 1 and "VD101" in p.stdout and "not a vLLM log" not in p.stdout
