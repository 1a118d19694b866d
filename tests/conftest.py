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
