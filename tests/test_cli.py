"""The command as scripts use it: exit codes, stdin, formats, rules and explain."""

import gzip
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import fixture_path

from vllm_doctor.cli import cli as main
from vllm_doctor.formats import TRIED
from vllm_doctor.rules import RULES


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_piped_input_gives_the_same_verdict_as_the_file():
    path = fixture_path("x007-v0-deepseek32b-kv-131072-vs-58496-worker-died.log")
    by_file = json.loads(run("diagnose", "--format", "json", str(path)).output)
    piped = json.loads(run("diagnose", "--format", "json", "-", input=path.read_bytes()).output)
    for d in (by_file, piped):
        for f in d["findings"]:
            for e in f["evidence"]:
                e.pop("source")
            f.pop("source")
        for r in d["runs"]:
            r.pop("source")
        d.pop("sources")
        assert d.pop("primary_source") in (str(path), "<stdin>")
    assert by_file == piped


@pytest.mark.parametrize(
    "name,code", [("s001-llama31-8b-3090-kv-29k.log", 1), ("r022-v1-startup-sm120-healthy.log", 0)]
)
def test_exit_codes_for_problem_and_healthy(name, code):
    assert run("diagnose", str(fixture_path(name))).exit_code == code


def test_nothing_recognisable_exits_3():
    r = run("diagnose", "-", input="hello\nworld\n")
    assert r.exit_code == 3
    assert "unknown" in r.output


def cli(*args):
    return subprocess.run([sys.executable, "-m", "vllm_doctor", *args], capture_output=True, text=True)


def test_missing_file_is_one_line_and_exit_2():
    p = cli("diagnose", "/nonexistent/x.log")
    assert p.returncode == 2
    assert p.stderr == "vllm-doctor: error: /nonexistent/x.log: no such file\n"


def test_directory_is_refused(tmp_path):
    p = cli("diagnose", str(tmp_path))
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "is a directory" in p.stderr
    assert "Traceback" not in p.stderr


def test_gzip_input_gives_the_same_class(tmp_path):
    src = fixture_path("s006-v1-kv-1m-estimate-199552.log")
    gz = tmp_path / "server.log.1"  # no .gz suffix: detected by magic bytes
    gz.write_bytes(gzip.compress(src.read_bytes()))
    d = json.loads(run("diagnose", "-f", "json", str(gz)).output)
    assert d["primary_class"] == "kv_cache_capacity"


@pytest.mark.parametrize(
    "fmt,on_stdout,on_stderr", [("text", 1, 0), ("json", 1, 1), ("markdown", 1, 1)], ids=["text", "json", "markdown"]
)
def test_formats_tried_is_said_once_where_the_operator_reads_it(fmt, on_stdout, on_stderr):
    """ux2: the formats tried were in the title (shortened on line 1, then printed whole under
    it) and again on standard error. Now once in the verdict (the source's note), and on
    standard error only when standard output is for a program or a ticket."""
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-f", fmt, "-"],
        input="hello\nworld\n",
        capture_output=True,
        text=True,
    )
    assert p.returncode == 3
    assert (p.stdout.count("formats tried"), p.stderr.count("formats tried")) == (on_stdout, on_stderr)
    if fmt == "json":
        d = json.loads(p.stdout)
        assert d["title"] == "Nothing recognisable as vLLM output in the input"
        assert d["sources"][0]["notes"] == [f"nothing recognisable as vLLM output (formats tried: {TRIED})"]


def test_formats_tried_is_listed_once_for_several_unrecognised_inputs(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("hello\n")
    b.write_text("world\n")
    d = json.loads(cli("diagnose", "-f", "json", str(a), str(b)).stdout)
    assert [s["notes"] for s in d["sources"]] == [
        [f"nothing recognisable as vLLM output (formats tried: {TRIED})"],
        [f"nothing recognisable as vLLM output (formats tried: as for {a})"],
    ]


def test_a_recognised_log_has_no_formats_tried_note():
    d = json.loads(run("diagnose", "-f", "json", str(fixture_path("s001-llama31-8b-3090-kv-29k.log"))).output)
    assert not any("formats tried" in n for s in d["sources"] for n in s["notes"])


def test_binary_and_invalid_utf8_do_not_crash():
    r = run("diagnose", "-f", "json", "-", input=bytes(range(256)) * 50)
    assert r.exit_code == 3
    assert json.loads(r.stdout)["primary_class"] == "unknown"


def test_markdown_has_verdict_evidence_and_numbered_remedies():
    out = run("diagnose", "-f", "markdown", str(fixture_path("s001-llama31-8b-3090-kv-29k.log"))).output
    assert out.startswith("## KV cache too small for max_model_len 29000 on a 23.58 GiB GPU\n")
    assert "**VD101 kv_cache_capacity** (critical, high confidence, startup): KV cache too small" in out
    assert "\ns001-llama31-8b-3090-kv-29k.log:5  The model's max seq len (29000)" in out
    assert "1. `--max-model-len 23552`: Lower max_model_len" in out


def test_output_file_written_and_terminal_gets_text(tmp_path):
    out = tmp_path / "verdict.json"
    r = run("diagnose", "-f", "json", "-o", str(out), str(fixture_path("r002-mtp-slow-v1-waiting.log")))
    assert json.loads(out.read_text())["primary_class"] == "preemption_storm"
    assert r.output.startswith("VD201 preemption_storm (warning")


def test_rules_lists_every_class_with_its_code():
    out = run("rules").output.splitlines()
    assert len(out) == len(RULES)
    for r, line in zip(RULES, out):
        assert line.startswith(f"{r.code}  {r.name} ") and line.endswith(r.summary)


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_every_code_has_a_page_of_its_own(rule):
    out = run("explain", rule.code).output
    assert out.startswith(f"{rule.code} {rule.name} ({rule.severity})")
    for heading in ("What it means:", "Why it happens:", "Remedies, in order:", "What does not help:", "Sources:"):
        assert heading in out
    # The page is the rule's own: no other rule's page is the same text.
    others = {r.explanation for r in RULES if r is not rule}
    assert rule.explanation not in others


@pytest.mark.parametrize("spelling", ["VD303", "vd303", "high-gpu-memory-utilization", "HIGH_GPU_MEMORY_UTILIZATION"])
def test_explain_accepts_any_case_and_dash_or_underscore(spelling):
    assert run("explain", spelling).output.startswith("VD303 high_gpu_memory_utilization (info)")


def test_explain_suggests_the_nearest_names_on_a_miss():
    result = CliRunner().invoke(main, ["explain", "kv_cache_capacty"])
    assert result.exit_code == 2 and "did you mean VD101 kv_cache_capacity?" in result.output


@pytest.mark.parametrize(
    "name,message",
    [
        # a code prefix: every code it begins, in the case `vllm-doctor rules` prints
        ("VD3", "'VD3' is not a code; the codes that begin with it: " + ", ".join(f"VD30{i}" for i in range(1, 9))),
        ("vd10", "'vd10' is not a code; the codes that begin with it: " + ", ".join(f"VD10{i}" for i in range(7))),
        # a near-miss code: the nearest codes, upper case, with their class ids
        ("VD999", "'VD999' is not a code; did you mean VD900 other or VD901 unknown?"),
        # part of a class id: the classes that hold it
        ("kv", "'kv' is not a class id or code; did you mean VD101 kv_cache_capacity or VD301 kv_pressure?"),
        ("high-gpu", "'high-gpu' is not a class id or code; did you mean VD303 high_gpu_memory_utilization?"),
        (
            "oom",
            "'oom' is not a class id or code; the classes that hold it: VD100 weight_load_oom, "
            "VD103 cuda_graph_capture_oom, VD104 sampler_warmup_oom, VD200 runtime_oom",
        ),
        # too many to list, or nothing near: counted, and pointed at the list
        ("VD", "'VD' is not a class id or code; 22 codes begin with it; `vllm-doctor rules` lists them"),
        ("nope", "'nope' is not a class id or code; `vllm-doctor rules` lists them"),
    ],
)
def test_explain_a_prefix_or_near_miss_is_one_line_listing_the_codes(name, message):
    """ux2: `explain VD3` printed `did you mean vd308, vd307, vd306?; ...`: lower case, three
    arbitrary near codes and not the eight it begins."""
    p = cli("explain", name)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (
        f"vllm-doctor: error: Invalid value for CLASS_OR_CODE: {message} (see `vllm-doctor explain --help`)\n"
    )


def test_select_a_near_miss_lists_the_codes_as_explain_does():
    p = cli("diagnose", str(fixture_path("s001-llama31-8b-3090-kv-29k.log")), "--select", "VD101,kv")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (
        "vllm-doctor: error: Invalid value for --select: 'kv' is not a class id or code; did you mean "
        "VD101 kv_cache_capacity or VD301 kv_pressure? (see `vllm-doctor diagnose --help`)\n"
    )


def test_lookup_names_what_a_miss_may_have_meant():
    from vllm_doctor.rules import UnknownRule, lookup

    with pytest.raises(UnknownRule) as caught:
        lookup("vd2")
    assert [r.code for r in caught.value.matches] == ["VD200", "VD201", "VD202", "VD203"]
    assert caught.value.listed and isinstance(caught.value, KeyError)


def test_explain_unknown_is_a_usage_error():
    assert run("explain", "nope").exit_code == 2


def test_json_output_does_not_import_rich():
    code = (
        "import sys, runpy; sys.argv=['vllm-doctor','diagnose','-f','json',%r];"
        "import vllm_doctor.cli as c\ntry:\n c.main()\nexcept SystemExit: pass\n"
        "assert 'rich' not in sys.modules, 'rich imported'" % str(fixture_path("s001-llama31-8b-3090-kv-29k.log"))
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_usage_errors_are_one_line():
    for args in (["diagnose", "--bogus"], ["diagnose", "--format", "yaml", "x"], ["explain", "nonsense"]):
        p = cli(*args)
        assert p.returncode == 2, args
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("vllm-doctor: error: "), p.stderr


def test_overflowing_numbers_do_not_stop_the_diagnosis(tmp_path):
    log = tmp_path / "x.log"
    real = fixture_path("s001-llama31-8b-3090-kv-29k.log").read_text()
    lines = real.splitlines()
    lines.insert(2, "# GPU blocks: " + "9" * 400 + ", # CPU blocks: 1")
    lines.insert(3, "Maximum concurrency for " + "9" * 400 + " tokens per request: 1.00x")
    log.write_text("\n".join(lines) + "\n")
    p = cli("diagnose", "-f", "json", str(log))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert json.loads(p.stdout)["primary_class"] == "kv_cache_capacity"


def test_truncated_archive_is_diagnosed_but_exits_2(tmp_path):
    data = gzip.compress(fixture_path("r030-v0-two-requests-0p4-toks-low-kv.log").read_bytes() * 50)
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    p = cli("diagnose", "-f", "json", str(cut))
    assert p.returncode == 2
    assert json.loads(p.stdout)["primary_class"] in ("healthy", "other")
    assert "compressed data ends early" in p.stderr and p.stderr.count("\n") == 1


def test_an_unterminated_escape_sequence_ends_at_the_next_escape():
    # Scanning each unterminated OSC sequence to the end of the line made a line of them
    # quadratic (seconds per 64 KB line); now a sequence never runs past the next ESC.
    from vllm_doctor.envelopes import _ANSI, unwrap

    assert _ANSI.match("\x1b]8;;http://x\x1b]8;;y").end() == len("\x1b]8;;http://x")
    assert unwrap("x", 1, "\x1b]" * 1000 + "\x07INFO 01-01 00:00:00 [a.py:1] ok")[0].text == "ok"


def test_output_to_a_special_file_is_written_in_place():
    p = cli("diagnose", "-f", "json", "-o", "/dev/stdout", str(fixture_path("r001-limo-preemption-101.log")))
    assert p.returncode == 1
    assert '"primary_class": "preemption_storm"' in p.stdout


def test_absurdly_nested_json_is_one_bad_line_not_a_crash(tmp_path):
    log = tmp_path / "j.log"
    good = fixture_path("s004-v1-kv-1m-context-oneline.log").read_text().strip()
    log.write_text('{"MESSAGE": ' + "[" * 3000 + "]" * 3000 + "}\n" + json.dumps({"MESSAGE": good}) + "\n")
    p = cli("diagnose", "-f", "json", str(log))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert json.loads(p.stdout)["primary_class"] == "kv_cache_capacity"


@pytest.mark.parametrize("suffix,magic", [("gz", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"), ("xz", b"\xfd7zXZ\x00")])
def test_corrupt_archive_is_one_line_and_exit_2(tmp_path, suffix, magic):
    bad = tmp_path / f"bad.{suffix}"
    bad.write_bytes(magic + bytes(range(256)) * 20)
    for args in (
        ["diagnose", str(bad)],
        ["diagnose", "-j", "2", str(bad), str(fixture_path("s001-llama31-8b-3090-kv-29k.log"))],
    ):
        p = cli(*args)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        assert "compressed data ends early or is corrupt" in p.stderr


def test_carriage_return_line_endings_read_like_newlines(tmp_path):
    src = fixture_path("s001-llama31-8b-3090-kv-29k.log").read_bytes()
    cr = tmp_path / "cr.log"
    cr.write_bytes(src.replace(b"\n", b"\r"))
    got = json.loads(cli("diagnose", "-f", "json", str(cr)).stdout)["findings"][0]["facts"]
    want = json.loads(cli("diagnose", "-f", "json", str(fixture_path("s001-llama31-8b-3090-kv-29k.log"))).stdout)
    assert got == want["findings"][0]["facts"]


def test_an_unreadable_input_is_listed_with_its_error_and_the_rest_diagnosed():
    p = cli("diagnose", "-f", "json", str(fixture_path("s001-llama31-8b-3090-kv-29k.log")), "/nonexistent/b.log")
    assert p.returncode == 2
    d = json.loads(p.stdout)
    assert d["primary_class"] == "kv_cache_capacity"
    assert d["sources"][-1]["name"] == "/nonexistent/b.log" and "no such file" in d["sources"][-1]["error"]


@pytest.mark.parametrize("prefilter", [True, False], ids=["pre-filtered", "every-line"])
def test_vllm_records_with_an_unknown_error_are_vllm_output_exit_1_not_3(prefilter):
    """hunt4 h12: every line in vLLM's record format, the one ERROR a message no pattern
    knows. It is vLLM output (exit 1, an unexplained error), never "not a vLLM log" (3)."""
    import io

    from vllm_doctor.pipeline import build_verdict, diagnose_input
    from vllm_doctor.sources import Source

    log = (
        "(Worker_TP1 pid=530) INFO 10-06 18:54:20 [parallel_state.py:1165] rank 1 in world size 2 is assigned as TP rank 1\n"
        "(Worker_TP1 pid=530) ERROR 10-06 18:54:30 [multiproc_executor.py:597] WorkerProc failed to start.\n"
    )
    v = build_verdict(diagnose_input(Source("x.log", io.BytesIO(log.encode())), prefilter=prefilter))
    assert v.primary_class == "unknown" and v.exit_code == 1
    only_error = b"ERROR 10-06 18:54:30 [multiproc_executor.py:597] WorkerProc failed to start.\n"
    v = build_verdict(diagnose_input(Source("x.log", io.BytesIO(only_error)), prefilter=prefilter))
    assert v.exit_code == 1
    not_vllm = b"ERROR something else failed\n"
    assert build_verdict(diagnose_input(Source("x.log", io.BytesIO(not_vllm)), prefilter=prefilter)).exit_code == 3


@pytest.mark.parametrize("select", [",,", " ", "", " , "])
def test_a_select_that_names_no_rules_is_a_usage_error(select):
    """break-it 7: `--select ,,` ran no rule and called a runtime OOM healthy (exit 0)."""
    p = cli("diagnose", str(fixture_path("r003-club3090-enginecore-oom-runtime.log")), "--select", select)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (
        f"vllm-doctor: error: Invalid value for --select: {select!r} names no rules: give codes, class ids or "
        "code prefixes (`vllm-doctor rules` lists them) (see `vllm-doctor diagnose --help`)\n"
    )


def test_standard_input_twice_is_refused_as_compare_refuses_it():
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-", "-"], input="x\n", capture_output=True, text=True
    )
    assert p.returncode == 2
    assert p.stderr.startswith("vllm-doctor: error: standard input (-) can be read only once")


@pytest.mark.parametrize("kind,opener", [("gzip", gzip.open), ("bzip2", __import__("bz2").open)])
def test_follow_refuses_a_compressed_file_in_one_line(tmp_path, kind, opener):
    """break-it 8: -F read a .gz file's compressed bytes as text ("4 lines read", exit 3)."""
    path = tmp_path / "server.log.gz"
    with opener(path, "wb") as fh:
        fh.write(fixture_path("s001-llama31-8b-3090-kv-29k.log").read_bytes())
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-F", str(path)], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == f"vllm-doctor: error: {path}: cannot follow a compressed file ({kind}); diagnose it without -F\n"
