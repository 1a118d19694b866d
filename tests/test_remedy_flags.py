"""Every flag a remedy prints is one vLLM's server accepts, and, where the log names the
release, one that release has (vllm_doctor/serve_flags.py: the flags of every release's parser,
read from vLLM's source by tools/serve_flags.py). A remedy read at 3 a.m. must not end in
``vllm serve: error: unrecognized arguments``."""

from __future__ import annotations

import pytest
import regex
from conftest import fixture_path, load_manifest

from vllm_doctor import diagnose, serve_flags
from vllm_doctor.defaults import parse_version
from vllm_doctor.rules.launch_rejected import known_as

CASES = load_manifest()
FLAG = regex.compile(r"(?<![\w-])--?[a-z][a-z0-9_-]*")


def release_has(flag: str, version: str) -> bool:
    first, last = serve_flags.FLAGS[known_as(flag)]
    v = parse_version(version)
    return parse_version(first) <= v and (last == serve_flags.NEWEST or v <= parse_version(last))


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_every_remedy_flag_is_one_the_release_accepts(case):
    verdict = diagnose(fixture_path(case["file"]))
    runs = {(r.source, r.index): r for r in verdict.runs}
    for f in verdict.findings:
        run = runs.get((f.source, f.run))
        version = run.facts.get("vllm_version") if run is not None else None
        for r in f.remedies:
            for flag in FLAG.findall(r.flag or ""):
                assert known_as(flag) in serve_flags.FLAGS, (f.code, r.flag)
                if version and parse_version(version):
                    assert release_has(flag, version), (f.code, r.flag, version, serve_flags.FLAGS[known_as(flag)])


def test_a_flag_outside_the_release_is_caught():
    assert release_has("--max-model-len", "0.9.2")
    assert not release_has("--kv-cache-memory-bytes", "0.9.2")  # from 0.10.2 on
    assert not release_has("--swap-space", "0.20.1")  # gone after 0.17.1
