"""Every corpus verdict validates against the published schema file."""

import json
from importlib import resources

import jsonschema
import pytest
from conftest import fixture_path, load_manifest

from vllm_doctor import diagnose
from vllm_doctor.redact import redact_verdict
from vllm_doctor.verdict import SCHEMA_VERSION

SCHEMA = json.loads(resources.files("vllm_doctor").joinpath("verdict.schema.json").read_text())
CASES = load_manifest()


def test_schema_version_matches_the_code():
    assert SCHEMA["properties"]["schema_version"]["const"] == SCHEMA_VERSION


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_corpus_verdict_validates(case):
    verdict = redact_verdict(diagnose(fixture_path(case["file"])))
    jsonschema.validate(json.loads(json.dumps(verdict.to_dict(), default=str)), SCHEMA)


def test_unrecognisable_input_validates():
    jsonschema.validate(diagnose(["hello", "world"]).to_dict(), SCHEMA)
