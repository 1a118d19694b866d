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
