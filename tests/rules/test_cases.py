"""Every rule's table of pass and fail cases (tests/rules/cases/<CODE>_<name>.yml).

The way sqlfluff keeps YAML cases per rule: each file names its ``rule`` and lists
``cases``. A case gives a short log excerpt, inline (``log:``, real lines from the corpus
wherever possible, with ``from:`` saying where they come from and what was changed) or by
reference (``fixture: s001`` for a whole corpus log, ``fixture: s001:3-5`` for its lines 3 to
5), and what the rule alone (``select=[rule]``) must make of it:

* ``expect: none`` - no finding of this rule;
* ``expect:`` a mapping - a finding of this rule with, where given: ``phase``, ``severity``,
  ``confidence``, ``title`` (a substring), ``facts`` (numbers within 1 %, as the corpus test
  compares), ``first_flag`` (the flag of the first remedy that has one, exactly, or ``null``
  when no remedy has a flag), ``flags`` (flags that must appear among the remedies),
  ``no_flags`` (flag prefixes that must not), ``first_action`` (a substring of the first
  remedy's action), ``actions`` / ``no_actions`` (substrings that
  must / must not appear in a remedy's action), ``does_not_help`` / ``no_does_not_help`` (substrings);
* ``primary:`` (optional) - the class of the whole verdict, all rules running;
* ``all_rules: true`` (optional) - judge the finding with every rule running, for what the
  run's plan does across findings (a note's number giving way to the failure's); also
  ``whys`` (substrings of some remedy's why).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from vllm_doctor import diagnose
from vllm_doctor.rules import BY_CODE

CASES_DIR = Path(__file__).parent / "cases"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"


def _load():
    out = []
    for path in sorted(CASES_DIR.glob("*.yml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        code = doc["rule"]
        assert path.stem.startswith(f"{code}_"), f"{path.name}: file name must start with its rule code"
        for case in doc["cases"]:
            out.append(pytest.param(code, case, id=f"{code}:{case['name']}"))
    return out


CASES = _load()


def lines_of(case):
    if "log" in case:
        return case["log"].splitlines()
    ref = str(case["fixture"])
    name, _, span = ref.partition(":")
    (path,) = FIXTURES.glob(f"{name}-*.log")
    lines = path.read_text(encoding="utf-8").split("\n")
    if span:
        a, _, b = span.partition("-")
        lines = lines[int(a) - 1 : int(b or a)]
    return lines


def close(want, got):
    if isinstance(want, bool) or isinstance(got, bool):
        return want == got
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(want, got, rel_tol=0.01, abs_tol=1e-4)
    if isinstance(want, list) and isinstance(got, list):
        return sorted(map(str, want)) == sorted(map(str, got))
    return want == got


def check_finding(f, expect):
    for key in ("phase", "severity", "confidence"):
        if key in expect:
            assert getattr(f, key) == expect[key], f"{key}: {getattr(f, key)!r}"
    if "title" in expect:
        assert expect["title"] in f.title, f.title
    for k, want in (expect.get("facts") or {}).items():
        assert k in f.facts, f"fact {k} missing; facts: {sorted(f.facts)}"
        assert close(want, f.facts[k]), f"fact {k}: want {want!r} got {f.facts[k]!r}"
    flags = [r.flag for r in f.remedies if r.flag]
    if "first_flag" in expect:
        assert (flags[0] if flags else None) == expect["first_flag"], f"remedies: {flags}"
    for flag in expect.get("flags") or ():
        assert flag in flags, f"{flag!r} not among {flags}"
    for prefix in expect.get("no_flags") or ():
        assert not any(x.startswith(prefix) for x in flags), f"{prefix!r} among {flags}"
    actions = [r.action for r in f.remedies]
    if "first_action" in expect:
        assert actions and expect["first_action"] in actions[0], actions
    for text in expect.get("actions") or ():
        assert any(text in a for a in actions), f"{text!r} not in {actions}"
    for text in expect.get("no_actions") or ():
        assert not any(text in a for a in actions), f"{text!r} in {actions}"
    whys = [r.why or "" for r in f.remedies]
    for text in expect.get("whys") or ():
        assert any(text in w for w in whys), f"{text!r} not in {whys}"
    for text in expect.get("does_not_help") or ():
        assert any(text in d for d in f.does_not_help), f.does_not_help
    for text in expect.get("no_does_not_help") or ():
        assert not any(text in d for d in f.does_not_help), f.does_not_help


@pytest.mark.parametrize("code,case", CASES)
def test_case(code, case):
    lines = lines_of(case)
    if case.get("all_rules"):
        verdict = diagnose(lines, name="case.log")
    else:
        verdict = diagnose(lines, name="case.log", select=[code])
        assert not any(f.code != code for f in verdict.findings), "select ran other rules"
    mine = [f for f in verdict.findings if f.code == code]
    expect = case["expect"]
    if expect in (None, "none"):
        assert not mine, f"unexpected {code}: {[f.title for f in mine]}"
    else:
        assert mine, f"no {code} finding; verdict: {verdict.title}"
        check_finding(mine[0], expect)
    if "primary" in case:
        assert diagnose(lines, name="case.log").primary_class == case["primary"]
    assert all(s.internal_errors == 0 for s in verdict.sources), verdict.sources[0].first_internal_error


def test_every_rule_has_a_table_with_a_pass_and_a_fail_case():
    seen = {}
    for p in CASES:
        code, case = p.values
        seen.setdefault(code, set()).add(case["expect"] in (None, "none"))
    for code in BY_CODE:
        if code == "VD000":  # healthy is the verdict when no rule finds anything
            continue
        assert seen.get(code) == {True, False}, f"{code} needs at least one case with and one without a finding"
