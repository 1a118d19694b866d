"""`selected_rules` (schema 1.4): a verdict says which rules `--select` ran, so JSON readers
can tell a clean verdict of some rules from a healthy one, and the views decide "not checked"
from that field, not from the title's wording."""

import copy
import json
import subprocess
import sys
from importlib import resources

import jsonschema
from conftest import fixture_path

from vllm_doctor import diagnose
from vllm_doctor.render import render
from vllm_doctor.render.titles import not_checked

SCHEMA = json.loads(resources.files("vllm_doctor").joinpath("verdict.schema.json").read_text())
FAILED = fixture_path("s001-llama31-8b-3090-kv-29k.log")
OOM = fixture_path("r003-club3090-enginecore-oom-runtime.log")
VD2 = ["engine_stall", "preemption_storm", "request_too_long", "runtime_oom"]


def _json(*args):
    p = subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", "-f", "json", *args], capture_output=True, text=True
    )
    return p.returncode, json.loads(p.stdout)


def test_json_names_the_selected_rules_and_validates():
    code, d = _json(str(FAILED), "--select", "VD2")
    assert code == 0 and d["schema_version"] == "1.5"
    assert d["primary_class"] == "healthy" and d["selected_rules"] == VD2
    jsonschema.validate(d, SCHEMA)


def test_a_finding_of_the_selected_rules_carries_them_too():
    code, d = _json(str(OOM), "--select", "runtime_oom,VD303")
    assert code == 1 and d["primary_class"] == "runtime_oom"
    assert d["selected_rules"] == ["high_gpu_memory_utilization", "runtime_oom"]


def test_without_select_the_field_is_null():
    code, d = _json(str(FAILED))
    assert code == 1 and d["selected_rules"] is None
    jsonschema.validate(d, SCHEMA)


def test_not_checked_is_decided_by_the_field_not_the_title():
    v = diagnose(str(FAILED), select=["VD2"])
    assert v.selected_rules == VD2
    reworded = copy.copy(v)
    reworded.title = "Nothing found."  # any wording: the field decides
    shown = not_checked(reworded)
    assert shown.primary_class == "not checked"
    assert "the selected rules (engine_stall, preemption_storm, request_too_long, runtime_oom) found nothing" in (
        shown.title
    )
    look_alike = diagnose(str(fixture_path("r022-v1-startup-sm120-healthy.log")))
    look_alike.title = "No problem found by the selected rules (a log line said so)."
    assert look_alike.selected_rules is None and not_checked(look_alike) is look_alike
    assert render(look_alike, "text", width=200).startswith("VD000 healthy (ok)")
