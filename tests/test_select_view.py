"""`--select` that leaves out the rule that would explain a failure never reads "healthy"
(fresh-user report, finding 12): the text and Markdown views say "not checked", that the
selected rules found nothing and, where the log shows it, that the server never became
ready; the exit code stays the selected rules' verdict (0) and JSON keeps its contract."""

import json
import os
import subprocess
import sys

from conftest import fixture_path

from vllm_doctor import diagnose
from vllm_doctor.render import render
from vllm_doctor.render.titles import not_checked

FAILED = fixture_path("s001-llama31-8b-3090-kv-29k.log")  # never got past KV cache sizing
HEALTHY = fixture_path("r022-v1-startup-sm120-healthy.log")


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
    )


def test_a_failed_start_with_its_rule_left_out_is_not_checked_and_never_ready():
    p = _cli(str(FAILED), "--select", "VD2")
    assert p.returncode == 0  # the selected rules' verdict
    head = p.stdout.splitlines()[0]
    assert head.startswith("VD000 not checked (selected rules only): The server never became ready in this log")
    assert "(last phase: KV cache sizing); the selected rules (engine_stall, preemption_storm" in head
    assert "healthy" not in p.stdout.replace(FAILED.name, "")
    md = _cli(str(FAILED), "--select", "VD2", "-f", "markdown").stdout
    assert md.startswith("## Not checked: the selected rules found nothing")
    assert "**VD000 not checked**" in md and "healthy" not in md


def test_a_server_that_became_ready_is_not_checked_without_the_never_ready_clause():
    out = _cli(str(HEALTHY), "--select", "VD2").stdout
    assert out.startswith("VD000 not checked (selected rules only): The selected rules (engine_stall")
    assert "never became ready" not in out and "VD000 healthy" not in out and "verdict healthy" not in out


def test_json_and_the_exit_code_keep_the_selected_rules_verdict():
    p = _cli(str(FAILED), "--select", "VD2", "-f", "json")
    d = json.loads(p.stdout)
    assert p.returncode == 0 and d["primary_class"] == "healthy" and d["exit_code"] == 0
    assert d["title"].startswith("No problem found by the selected rules (")


def test_without_select_a_clean_verdict_is_still_healthy():
    v = diagnose(str(HEALTHY))
    assert not_checked(v) is v
    assert render(v, "text", width=100).startswith("VD000 healthy (ok)")


def test_the_pipeline_s_wording_is_what_the_view_recognises():
    v = diagnose(str(FAILED), select=["VD2"])
    shown = not_checked(v)
    assert shown is not v and shown.primary_class == "not checked"
    assert v.primary_class == "healthy" and v.exit_code == 0  # the verdict itself is unchanged


def test_help_documents_the_wording_and_the_exit_code():
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80"},
    )
    flat = " ".join(p.stdout.split())
    assert "the verdict reads 'not checked' (never 'healthy'" in flat and "the exit code is theirs (0)" in flat
