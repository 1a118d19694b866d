import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def load_manifest():
    with open(FIXTURES / "manifest.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def manifest():
    return load_manifest()


def fixture_path(name: str) -> Path:
    return FIXTURES / name


def comparable(results):
    """The verdict of ``results`` as a dict, without the count of records examined (fewer on
    the fast paths, by design), for comparing the paths that read an input."""
    from vllm_doctor.pipeline import build_verdict

    d = build_verdict(results).to_dict()
    for s in d["sources"]:
        s.pop("records"), s.pop("joined")
    return d


def serial(path):
    """:func:`comparable` of reading every line of ``path`` (the plain path)."""
    from vllm_doctor.pipeline import diagnose_source
    from vllm_doctor.sources import Source, read_lines

    with open(path, "rb") as fh:
        return comparable(diagnose_source(str(path), read_lines(Source(str(path), fh))))


def pytest_configure(config):
    """``VLLM_DOCTOR_MUTATE=NAME=VALUE`` replaces one judgement constant for this run
    (tools/mutation_check.py uses it to prove every constant is pinned by a test)."""
    import os

    spec = os.environ.get("VLLM_DOCTOR_MUTATE")
    if spec:
        from vllm_doctor import thresholds

        name, _, value = spec.partition("=")
        if not hasattr(thresholds, name):
            raise pytest.UsageError(f"VLLM_DOCTOR_MUTATE: no constant {name}")
        setattr(thresholds, name, float(value))


def read_records(lines):
    """``(envelopes, records)`` of ``lines`` as the pipeline reads them: every line sniffed
    first (what is learned from the head applies to all), then unwrapped and joined."""
    from vllm_doctor.envelopes import Envelopes
    from vllm_doctor.reassemble import Reassembler

    env = Envelopes()
    for line in lines:
        env.sniff(line)
    r = Reassembler()
    out = []
    for n, line in enumerate(lines, 1):
        out += r.feed(env.unwrap("x", n, line))
    return env, out + r.flush()


def marked_known(cases, known, reason="known wrong"):
    """``cases`` (manifest entries) as pytest params named by file, the files in ``known``
    marked strict xfail with ``reason``: a listed log that starts passing fails until it is
    taken off the list."""
    return [
        pytest.param(
            c, id=c["file"], marks=[pytest.mark.xfail(strict=True, reason=reason)] if c["file"] in known else []
        )
        for c in cases
    ]
