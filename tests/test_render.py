"""What a person reads: the text view at 80x24, the ticket, the follow summary (issue 12)."""

import json
import os
import subprocess
import sys

import pytest
import regex
from click.testing import CliRunner
from conftest import fixture_path, load_manifest

from vllm_doctor import diagnose
from vllm_doctor.cli import cli as main
from vllm_doctor.redact import redact_verdict
from vllm_doctor.render import render
from vllm_doctor.render.evidence import anchors_for, clip, evidence_rows
from vllm_doctor.render.facts import fact_rows
from vllm_doctor.render.markdown import full_lines_summary
from vllm_doctor.render.names import CLIP, display_source, where
from vllm_doctor.render.series import sparkline
from vllm_doctor.render.text import PIPE_WIDTH, recap
from vllm_doctor.render.titles import symptom_title
from vllm_doctor.verdict import Evidence, Finding

MANIFEST = load_manifest()


def verdict_of(name, **kw):
    return redact_verdict(diagnose(str(fixture_path(name)), **kw))


def one_log_per_class():
    """The first corpus log of every labelled class that the tool reads right."""
    seen = {}
    for entry in MANIFEST:
        label = entry["class"]
        if label in seen:
            continue
        if diagnose(str(fixture_path(entry["file"]))).primary_class == label:
            seen[label] = entry["file"]
    return seen


PER_CLASS = one_log_per_class()


def test_every_labelled_class_has_a_log_the_tool_reads_right():
    assert set(PER_CLASS) == {e["class"] for e in MANIFEST}


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("label", sorted(PER_CLASS))
def test_code_class_and_first_flag_within_the_first_three_lines_at_80_columns(label):
    v = verdict_of(PER_CLASS[label])
    out = render(v, "text", width=80, height=24)
    lines = out.splitlines()
    assert all(len(x) <= 80 for x in lines), max(lines, key=len)
    top = words(" ".join(lines[:3]))
    assert f"{v.primary_code} {v.primary_class}" in top
    p = v.primary
    if p is not None and p.remedies:
        first = p.remedies[0]
        want = first.flag or first.action.split(" (")[0][:30]
        assert words(want) in top, (want, lines[:3])
        assert "do this first:" in top
    if p is not None:
        assert p.confidence + " confidence" in top
    if label == "healthy":
        assert "running:" in top


@pytest.mark.parametrize("name", [e["file"] for e in MANIFEST[::7]])
@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_no_output_line_ends_in_spaces(name, fmt):
    out = CliRunner().invoke(main, ["diagnose", "-f", fmt, str(fixture_path(name))]).stdout
    bad = [x for x in out.splitlines() if x != x.rstrip()]
    assert not bad, bad[:3]


def test_pipe_output_is_wrapped_at_100_columns_with_hanging_indents():
    out = CliRunner().invoke(main, ["diagnose", str(fixture_path("r003-club3090-enginecore-oom-runtime.log"))]).stdout
    lines = out.splitlines()
    assert max(map(len, lines)) <= PIPE_WIDTH
    # a wrapped remedy continues under its text, not at column 0
    i = next(n for n, x in enumerate(lines) if x.startswith("    1. --gpu-memory-utilization"))
    assert lines[i + 1].startswith("       ") and lines[i + 1].strip()


def test_text_view_names_the_file_once_per_finding_and_the_title_once():
    v = verdict_of("s001-llama31-8b-3090-kv-29k.log")
    out = render(v, "text", width=80)
    assert out.count("s001-llama31-8b-3090-kv-29k.log") == 3  # headline, the finding, the source line
    assert words(out).count(v.title) == 1
    ev = [x for x in out.splitlines() if regex.match(r"^    +\d+  ", x)]
    assert [int(x.split()[0]) for x in ev] == [1, 2, 3, 4, 5]  # line order, each once


def test_evidence_is_clipped_to_the_clause_that_matters_with_a_marker():
    v = verdict_of("s001-llama31-8b-3090-kv-29k.log")
    out = render(v, "text", width=80)
    lines = out.splitlines()
    i = next(n for n, x in enumerate(lines) if x.strip().startswith("2  Memory profiling results:"))
    row = words(" ".join(lines[i : i + 3]).split(" 3  ")[0])
    assert f"{CLIP} gpu_memory_utilization=0.90 ← gpu_memory_utilization = 0.9" in row  # the clause it is about
    assert "peak_torch_memory" not in row
    assert "← max_model_len = 29000" in out  # a note is never split across lines
    # the full line stays in JSON and in the ticket
    assert "peak_torch_memory=17.98GiB" in render(v, "json")
    assert "peak_torch_memory=17.98GiB" in render(v, "markdown")


def test_a_long_output_ends_with_a_one_line_recap_and_a_short_one_does_not():
    long = verdict_of("s001-llama31-8b-3090-kv-29k.log")
    out = render(long, "text", width=80, height=24).splitlines()
    assert (
        len(out) > 24 and out[-1] == "recap: VD101 kv_cache_capacity (critical) · do this first: --max-model-len 23552"
    )
    assert len(out[-1]) <= 80
    short = verdict_of("r022-v1-startup-sm120-healthy.log")
    out = render(short, "text", width=80, height=24).splitlines()
    assert len(out) <= 24 and not any(x.startswith("recap:") for x in out)
    assert recap(long) == (
        "VD101 kv_cache_capacity (critical) · do this first: --max-model-len 23552 · s001-llama31-8b-3090-kv-29k.log"
    )
    # a flag is never cut (a cut flag is another command), nor the class: the severity gives
    # way, then the line is longer than the width (the view wraps it; test_render_operator)
    assert recap(long, 62) == "VD101 kv_cache_capacity · do this first: --max-model-len 23552"
    assert recap(long, 40) == "VD101 kv_cache_capacity (critical) · do this first: --max-model-len 23552"
    both = verdict_of("k029-ilab-podman-traceback-attention-heads-32-not-divisible-by-tp-3.log")
    assert recap(both, 60).endswith("do this first: --tensor-parallel-size 1 --pipeline-parallel-size 3")
    # a remedy in words is never cut mid-clause either (a cut action is another instruction):
    # a long one is repeated as its instruction, pointing back to the remedy printed whole
    words_first = verdict_of("x014-omni-ci-startup-oom-lists-other-stage-pids.log")
    r = words_first.primary.remedies[0]
    assert not r.flag and r.action.startswith("Free the GPU: ")
    line = recap(words_first, 40)
    assert line == "VD102 startup_memory_contention (critical) · do this first: Free the GPU (remedy 1 above)"


def test_the_follow_summary_never_cuts_a_flag():
    from vllm_doctor.render.text import render_follow_summary

    v = verdict_of("k029-ilab-podman-traceback-attention-heads-32-not-divisible-by-tp-3.log")
    out = render_follow_summary(v, width=80, lines=29).splitlines()
    # the row's flag does not fit beside the other columns: it goes on a line of its own
    assert "      --tensor-parallel-size 1 --pipeline-parallel-size 3" in out
    assert all(len(x) <= 80 for x in out)


def test_a_healthy_startup_shows_what_it_runs_with():
    out = render(verdict_of("r022-v1-startup-sm120-healthy.log"), "text", width=80)
    assert out.splitlines()[0].startswith("VD000 healthy (ok)")
    top = words(" ".join(out.splitlines()[:4]))
    # remedies3: the engine is now read from its records' files (core.py, gpu_model_runner.py)
    assert "running: engine v1; KV cache 251920 tokens, 6.15x concurrency at max_model_len 40960" in top
    assert "26.91 GiB" in out


def test_facts_are_in_words_and_units():
    v = verdict_of("r003-club3090-enginecore-oom-runtime.log")
    rows = dict(fact_rows(v, v.primary))
    assert rows["GPU 0"] == "23.56 GiB total, 21.75 MiB free"
    assert rows["Failed allocation"] == "50.00 MiB"
    assert rows["Other processes"].startswith("none listed")
    md = render(v, "markdown")
    table = [x for x in md.splitlines() if x.startswith("| ")]
    assert not any(regex.search(r"_gib|_pct|co_tenant", x) for x in table), table


def test_runtime_episode_is_a_sparkline_in_the_text_view_and_the_ticket():
    v = verdict_of("r002-mtp-slow-v1-waiting.log")
    kv = [95.9, 95.5, 87.7, 95.9, 98.4]  # the five stats lines of the log
    assert [p["kv_usage_pct"] for p in v.runs[0].series] == kv
    assert [p["line"] for p in v.runs[0].series] == [1, 2, 3, 4, 5]
    out = render(v, "text", width=80)
    row = next(x for x in out.splitlines() if x.strip().startswith("KV cache ") and "max" in x)
    assert row.split()[2] == sparkline(kv, top=100.0) == "██▇██" and row.endswith("max 98.4%")
    assert "waiting  ██▆▅▅ max 43" in out
    md = render(v, "markdown")
    assert "Stats over the episode (5 intervals, 05-19 10:13:11 to 10:13:51, lines 1-5):" in md
    assert "waiting  ██▆▅▅ max 43" in md


def test_startup_findings_have_no_sparkline():
    out = render(verdict_of("s001-llama31-8b-3090-kv-29k.log"), "text", width=80)
    assert "stats:" not in out and "▁" not in out


# -- the ticket -----------------------------------------------------------------------


def test_runtime_oom_ticket_has_a_symptom_title_time_source_and_no_local_path(tmp_path, monkeypatch):
    log = tmp_path / "deep" / "dir" / "server.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(fixture_path("r003-club3090-enginecore-oom-runtime.log").read_bytes())
    md = CliRunner().invoke(main, ["diagnose", "-f", "markdown", str(log)]).stdout
    assert md.startswith("## Runtime OOM on GPU 0 (23.56 GiB) at 05-01 14:39:06\n")
    assert "| First incident | 05-01 14:39:06 |" in md
    assert "| Source | `server.log` |" in md
    assert "\nserver.log:1  05-01 14:39:06  torch.OutOfMemoryError: CUDA out of memory." in md
    assert str(tmp_path) not in md and "/deep/dir" not in md
    assert "1. `--gpu-memory-utilization 0.85`: Lower gpu_memory_utilization" in md
    assert "Does not help:" in md and "- Raising gpu_memory_utilization" in md
    assert md.rstrip().splitlines()[-1].startswith("vllm-log-doctor 0.1.0 (`vllm-doctor diagnose`) · schema 1.5")
    # a source given relative keeps its directories, as given
    monkeypatch.chdir(tmp_path)
    md = CliRunner().invoke(main, ["diagnose", "-f", "markdown", "deep/dir/server.log"]).stdout
    assert "| Source | `deep/dir/server.log` |" in md


def test_ticket_evidence_is_clipped_in_its_fence_and_whole_below_it():
    md = render(verdict_of("r003-club3090-enginecore-oom-runtime.log"), "markdown")
    fence, _, details = md.partition(f"<details><summary>{full_lines_summary()}</summary>")
    shown = next(x for x in fence.splitlines() if ":1  05-01 14:39:06  torch" in x)
    assert len(shown) < 300 and f"memory in use. {CLIP}" in shown
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in details.split("</details>")[0]


def test_ticket_title_names_host_and_first_incident():
    v = verdict_of("r002-mtp-slow-v1-waiting.log")
    assert symptom_title(v) == "KV cache saturated, requests waiting or preempted at 05-19 10:13:11"
    md = render(v, "markdown")
    assert "| First incident | 05-19 10:13:11 |" in md and "| Last incident | 05-19 10:13:51 |" in md


def test_display_source_drops_local_directories_only():
    assert display_source("/home/<user-1>/logs/x.log [pod/<pod-1>/vllm]") == "x.log [pod/<pod-1>/vllm]"
    assert display_source("logs/x.log") == "logs/x.log"
    assert display_source("<stdin> [vllm[7]@<host-2>]") == "<stdin> [vllm[7]@<host-2>]"
    assert where("x.log [vllm[7]@<host-2>]") == [("Host", "<host-2> (process vllm[7])")]
    assert where("x.log [pod/<pod-1>/vllm]") == [("Pod", "<pod-1> (container vllm)")]
    assert where("x.log") == []


# -- two pods, two hosts ----------------------------------------------------------------


def _two_pods(tmp_path):
    kv = fixture_path("s004-v1-kv-1m-context-oneline.log").read_text().splitlines()
    oom = fixture_path("r003-club3090-enginecore-oom-runtime.log").read_text().splitlines()
    lines = [f"[pod/vllm-b-5c2e/vllm] {x}" for x in oom] + [f"[pod/vllm-a-7d9f/vllm] {x}" for x in kv]
    log = tmp_path / "pods.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def _two_hosts(tmp_path):
    kv = fixture_path("s004-v1-kv-1m-context-oneline.log").read_text().splitlines()
    oom = fixture_path("r003-club3090-enginecore-oom-runtime.log").read_text().splitlines()
    lines = [f"Jan 01 00:00:0{i % 10} gpu-node-b2 vllm[22]: {x}" for i, x in enumerate(oom)]
    lines += [f"Jan 01 00:00:0{i % 10} gpu-node-a1 vllm[11]: {x}" for i, x in enumerate(kv)]
    log = tmp_path / "journal.log"
    log.write_text("\n".join(lines) + "\n")
    return log


@pytest.mark.parametrize("make,secret", [(_two_pods, "vllm-a-7d9f"), (_two_hosts, "gpu-node")])
def test_headline_primary_source_and_first_finding_agree_and_sources_stay_apart(tmp_path, make, secret):
    log = make(tmp_path)
    d = json.loads(CliRunner().invoke(main, ["diagnose", "-f", "json", str(log)]).stdout)
    assert d["primary_finding"] == 0
    first = d["findings"][0]
    assert first["source"] == d["primary_source"] and first["class"] == d["primary_class"]
    assert first["title"] == d["title"]
    names = [s["name"] for s in d["sources"]]
    assert len(set(names)) == 2 and all(secret not in n for n in names)
    other = [f for f in d["findings"] if f["source"] != d["primary_source"] and f["severity"] == "critical"]
    assert other and {other[0]["class"], first["class"]} == {"runtime_oom", "kv_cache_capacity"}
    text = CliRunner().invoke(main, ["diagnose", str(log)], env={"COLUMNS": "200"}).stdout
    lines = text.splitlines()
    key = d["primary_source"].split(" [", 1)[1].rstrip("]")
    assert key in lines[0] and d["primary_class"] in lines[0]  # the headline names its source
    first_section = next(x for x in lines[1:] if x.startswith(first["code"] + " "))
    assert d["primary_source"] in first_section  # and the first finding below it is the same one
    assert secret not in text
    md = CliRunner().invoke(main, ["diagnose", "-f", "markdown", str(log)]).stdout
    assert secret not in md and "<host-1>" in md + text or "<pod-1>" in md + text


# -- pieces -------------------------------------------------------------------------------


def test_clip_keeps_the_opening_and_the_anchored_clause_within_the_budget():
    text = (
        "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
        "peak_torch_memory=17.98GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB gpu_memory_utilization=0.90"
    )
    out, cut = clip(text, 90, ["gpu_memory_utilization"])
    assert cut and len(out) <= 90
    assert out.startswith("Memory profiling results:") and out.endswith(f"{CLIP} gpu_memory_utilization=0.90")
    assert clip("short", 90) == ("short", False)
    sentences = "One thing failed. Two more words here. Three is the last clause of this text."
    out, cut = clip(sentences, 45)
    assert out == f"One thing failed. Two more words here. {CLIP}"
    out, _ = clip("A" * 500, 60)
    assert len(out) <= 60 and out.endswith(CLIP)


def test_evidence_rows_are_in_line_order_and_merge_repeats():
    f = Finding("runtime_oom", "VD200", "critical", "runtime", "t", source="x")
    f.evidence = [
        Evidence("x", 9, "torch.OutOfMemoryError: boom", "out of memory"),
        Evidence("x", 3, "max_model_len=4096", "max_model_len = 4096"),
        Evidence("x", 12, "torch.OutOfMemoryError: boom"),
        Evidence("x", 9, "torch.OutOfMemoryError: boom", "rank 0"),
    ]
    rows = evidence_rows(f)
    assert [(r.line, r.also, r.notes) for r in rows] == [
        (3, [], ["max_model_len = 4096"]),
        (9, [12], ["out of memory", "rank 0"]),
    ]


def test_sparkline_scales_and_buckets():
    assert sparkline([0, 50, 100], top=100) == "▁▅█"
    assert sparkline([1, 2, 3, 4]) == "▃▅▆█"  # scaled to the maximum when no top is given
    assert sparkline([None, 0, 8]) == " ▁█"
    assert len(sparkline(list(range(1000)), width=40)) == 40
    assert sparkline([5, 5], top=0) == "▁▁"


# -- the command's small things ---------------------------------------------------------


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "vllm_doctor", *args], capture_output=True, text=True, **kw)


def test_version_names_the_distribution():
    p = cli("--version")
    assert p.returncode == 0 and p.stdout == "vllm-log-doctor 0.1.0\n"


def test_usage_hint_names_the_command_once():
    p = cli("bogus")
    assert p.returncode == 2 and "(see `vllm-doctor --help`)" in p.stderr and "vllm-doctor vllm-doctor" not in p.stderr
    p = cli("diagnose", "--bogus")
    assert "(see `vllm-doctor diagnose --help`)" in p.stderr


def test_color_forces_colour_in_a_pipe_and_no_color_keeps_it_out():
    log = str(fixture_path("s001-llama31-8b-3090-kv-29k.log"))
    env = {**os.environ, "TERM": "dumb"}
    coloured = cli("diagnose", "--color", log, env=env).stdout
    assert "\x1b[1;31mVD101 kv_cache_capacity" in coloured
    assert not any(regex.search(r"[ \t](?:\x1b\[[0-9;]*m)*$", x) for x in coloured.splitlines())
    assert "\x1b[" not in cli("diagnose", log, env=env).stdout
    assert "\x1b[" not in cli("diagnose", "--no-color", log, env=env).stdout


def _page_words(text: str):
    return [w for w in text.split() if w]


def test_rules_and_explain_never_break_a_word_at_80_columns():
    from vllm_doctor.rules import RULES

    env = {**os.environ, "COLUMNS": "80"}
    out = cli("rules", env=env).stdout
    assert _page_words(out) == _page_words(
        "\n".join(f"{r.code} {r.name} {r.summary}" for r in RULES)
    )  # same words, none split
    assert all(len(x) <= 80 for x in out.splitlines())
    for r in RULES:
        page = cli("explain", r.code, env=env).stdout
        # the same words, a word hyphenated across two source lines (out-of- / memory) joined
        source = regex.sub(r"(?<=\p{L}-)\n\s*(?=\p{L})", "", r.explanation)
        assert _page_words(page) == _page_words(f"{r.code} {r.name} ({r.severity})\n" + source), r.code
        assert all(len(x) <= 80 or " " not in x.strip() for x in page.splitlines()), r.code
    # in a pipe without COLUMNS, `rules` stays one line a rule (for grep)
    plain = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    assert len(cli("rules", env=plain).stdout.splitlines()) == len(RULES)


def test_explain_cites_public_sources_only():
    from vllm_doctor.rules import RULES

    for r in RULES:
        sources = r.explanation.split("Sources:", 1)[1]
        assert "shared/" not in sources and "domain.md" not in sources, (r.code, sources)
        assert regex.search(r"vllm/|docs\.vllm\.ai|pytorch|torch/", sources), (r.code, sources)


def test_an_oom_line_keeps_the_allocation_and_the_co_tenant_within_three_lines():
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 204.00 MiB. GPU 0 has a total capacity "
        "of 79.25 GiB of which 1.25 MiB is free. Including non-PyTorch memory, this process has 71.68 GiB memory "
        "in use. Process 290370 has 7.56 GiB memory in use. Of the allocated memory 69.10 GiB is allocated by "
        "PyTorch, and 1.07 GiB is reserved by PyTorch but unallocated."
    )
    facts = {
        "tried_to_allocate_gib": 0.199219,
        "gpu_free_gib": 0.001221,
        "gpu_total_gib": 79.25,
        "co_tenant_pids": [290370],
    }
    anchors = anchors_for("out of memory", facts)
    assert anchors[:2] == ["Process 290370 ", "204.00 MiB"]
    out, cut = clip(text, 150, anchors)
    assert cut and len(out) <= 150
    assert "Tried to allocate 204.00 MiB." in out and "Process 290370 has 7.56 GiB memory in use." in out
    assert "Of the allocated memory" not in out
    # a setting's line keeps the key its note names
    assert anchors_for("max_model_len = 29000") == ["max_model_len", "max model len", "29000"]


def test_readme_names_the_schema_version_and_how_to_install():
    from pathlib import Path

    from vllm_doctor.verdict import SCHEMA_VERSION

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert f"| {SCHEMA_VERSION} | " in readme  # every schema bump is in the README's table
    assert "not on the package index yet" in readme and "Do not `pip install vllm-doctor`" in readme
    assert "vllm-log-doctor X.Y.Z" in readme
    assert "## How it works" not in readme  # contributor material lives in CONTRIBUTING.md
    assert "## How it works" in (Path(__file__).resolve().parent.parent / "CONTRIBUTING.md").read_text()


def test_a_note_made_a_sentence_keeps_its_units_and_names():
    """The note's first letter is raised; "GiB" and "GPU" are not lowered (str.capitalize)."""
    v = verdict_of("s007-qwen25-72b-fp8-h20-v013-load-oom.log")
    notes = " ".join(v.primary.notes)
    assert notes.startswith("Only 1 of 37 checkpoint shards")
    assert "139.72 GiB: the weights read so far cannot fill the GPU" in notes


# -- a vLLM message quoted deep inside a long foreign line (a controller's klog line, n03) ---

#: A Go controller's access line with the vLLM API server's JSON error body at its end, the
#: way llm-d's launcher logs a failed call; the message sits past the first 600 characters.
_KLOG = (
    'I0902 00:55:35.305769       1 inference-server.go:2282] "HTTP call done" worker=1 node="host1" '
    'serverUID="8c60c439-a9db-4b38-82b1-c7df3341dc5a" requesterName="my-request-02-00-46-04-td8hd" '
    'instanceID="IiWd70K6nRygTCRBFQeKHC_yw4XZalBuBxOYgeh7oS5Ii" providerName="launcher-02-00-46-04-mjdh4" '
    'purpose="{purpose}" method="POST" url="http://192.0.2.54:8006/{path}" '
    'httpCallStartTime="2026-09-02T00:55:35.245886758Z" latencySecs=0.059773795 statusCode=500 '
    'err="HTTP POST \\"http://192.0.2.54:8006/{path}\\" returned unexpected status 500; bodyReadErr=<nil>; '
    'responseBody={{\\"error\\":{{\\"message\\":\\"{message}\\",\\"type\\":\\"InternalServerError\\",'
    '\\"param\\":null,\\"code\\":500}}}}"'
)


@pytest.mark.parametrize(
    "purpose,path,message,words",
    [
        ("wake", "wake_up", "Call to wake_up method failed: CUDA Error: out of memory at <path>:163", "out of memory"),
        (
            "generate",
            "v1/completions",
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.56 GiB of which "
            "1.02 GiB is free.",
            "CUDA out of memory",
        ),
        (
            "generate",
            "v1/completions",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "illegal memory access",
        ),
    ],
)
def test_a_message_past_the_head_of_a_long_foreign_line_is_in_the_evidence(purpose, path, message, words):
    line = _KLOG.format(purpose=purpose, path=path, message=message)
    assert len(line) > 700 and line.index(words) > 600
    v = diagnose([line], name="controller.log")
    (e,) = [e for e in v.findings[0].evidence if e.line == 1]
    assert len(e.text) <= 600 and words in e.text and e.text.startswith("I0902 00:55:35.305769")
    shown = render(v, "text", width=80)
    assert " ".join(words.split()) in " ".join(shown.split())


def test_evidence_keeps_the_head_of_a_long_line_whose_message_opens_it():
    from vllm_doctor.rules.rule import MAX_EVIDENCE_CHARS, evidence_text

    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. " + "x" * 800
    assert evidence_text(oom) == oom[: MAX_EVIDENCE_CHARS - 3] + "..."
    assert evidence_text("  short  ") == "short"


def test_clip_keeps_an_anchor_of_several_words_whole_and_splits_a_word_longer_than_the_budget():
    body = 'err="x"; responseBody={\\"error\\":{\\"message\\":\\"CUDA Error: out of memory at <path>:163\\",\\"code\\":500}}'
    text = "I0902 00:55:35.305769 1 inference-server.go:2282] " + "key=value " * 30 + body
    out, cut = clip(text, 160, ["CUDA Error: out of memory at"])
    assert cut and len(out) <= 160
    assert "CUDA Error: out of memory at" in out and out.startswith("I0902")
    assert anchors_for("out of memory", {}, text)[:1] == ["CUDA Error: out of memory at"]


def test_the_evidence_window_never_starts_or_ends_inside_a_word():
    # breakit3: a window that began inside an hf_ token printed its tail, which no redaction
    # pattern knows without the prefix
    from vllm_doctor.rules.rule import MAX_EVIDENCE_CHARS, evidence_text

    token = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345"
    for pad in range(0, 160, 7):
        line = "x " * 250 + "y" * pad + f' "token":"{token}" "body":"CUDA out of memory. Tried to allocate 2.00 GiB."'
        out = evidence_text(line)
        assert len(out) <= MAX_EVIDENCE_CHARS and "CUDA out of memory" in out
        words = out.replace("...", " ").split()
        assert all(w in line.split() or token in w for w in words if "token" not in w), out
        assert token in out or token[3:] not in out and token[-12:] not in out
