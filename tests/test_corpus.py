"""Every real log in fixtures/logs gets its labelled class and every labelled fact."""
import math

import pytest

from conftest import fixture_path, load_manifest
from vllm_doctor import diagnose

CASES = load_manifest()


def close(want, got):
    """Same comparison as shared/tools/score-corpus: numbers within 1 %, strings
    case-insensitively, lists as sets."""
    if isinstance(want, bool) or isinstance(got, bool):
        return want == got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(want, got, rel_tol=0.01, abs_tol=1e-4)
    if isinstance(want, list) and isinstance(got, list):
        return {str(x).lower() for x in want} == {str(x).lower() for x in got}
    if isinstance(want, str) and isinstance(got, str):
        return want.strip().lower() == got.strip().lower()
    return want == got


def fact_pool(verdict):
    d = verdict.to_dict()
    pool = {}
    for run in d["runs"]:
        for k, v in {**run["config"], **run["facts"]}.items():
            pool.setdefault(k, []).append(v)
    for f in d["findings"]:
        for k, v in f["facts"].items():
            pool.setdefault(k, []).append(v)
    return pool


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_class(case):
    verdict = diagnose(fixture_path(case["file"]))
    allowed = {case["class"], *case.get("accept", [])}
    assert verdict.primary_class in allowed, verdict.title


@pytest.mark.parametrize("case", [c for c in CASES if c.get("facts")], ids=[c["file"] for c in CASES if c.get("facts")])
def test_facts(case):
    pool = fact_pool(diagnose(fixture_path(case["file"])))
    missing = {k: (want, pool.get(k)) for k, want in case["facts"].items()
               if not any(close(want, got) for got in pool.get(k, []))}
    assert not missing


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_every_finding_has_evidence_and_a_remedy_for_failures(case):
    verdict = diagnose(fixture_path(case["file"]))
    for f in verdict.findings:
        assert f.evidence, f"{f.class_id} without evidence"
        for e in f.evidence:
            assert e.line >= 1 and case["file"] in e.source
        if f.severity in ("critical", "warning"):
            assert f.remedies and [r.order for r in f.remedies] == list(range(1, len(f.remedies) + 1))


def test_lines_give_the_same_verdict_as_the_path():
    path = fixture_path("s002-qwen25vl-7b-3090-v0-kv.log")
    a = diagnose(path).to_dict()
    with open(path, "rb") as fh:
        b = diagnose(fh, name=str(path)).to_dict()
    for d in (a, b):  # how many records were examined depends on the path taken (pre-filter)
        for s in d["sources"]:
            s.pop("records"), s.pop("joined")
    assert a == b
