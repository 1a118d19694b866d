"""What was not read reaches every view: a metrics series' warnings (failed scrapes, skipped
files) and the formats tried are sources[].notes, in JSON, the text view and the Markdown
ticket alike, each said once."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_metrics_http import _scrapes, _Server

SEQ = Path(__file__).resolve().parent.parent / "fixtures" / "metrics" / "seq"


def cli(*args, input=None):
    return subprocess.run(
        [sys.executable, "-m", "vllm_doctor", "diagnose", *args], capture_output=True, text=True, input=input
    )


@pytest.fixture(scope="module")
def dead_server_outputs():
    """A server that dies after 3 of 6 scrapes, diagnosed once per format (one server each)."""
    out = {}
    for fmt in ("json", "text", "markdown"):
        with _Server(_scrapes("storm-v1"), fail_after=3) as srv:
            p = cli("--metrics", srv.url, "--count", "6", "--interval", "0.05", "-f", fmt)
        out[fmt] = p
    return out


WARNING = "3 of 6 scrapes failed (scrape 4: HTTP 503 Service Unavailable)"


@pytest.mark.parametrize("fmt", ["json", "text", "markdown"])
def test_failed_scrapes_reach_every_view_once(dead_server_outputs, fmt):
    """break-it: the series' warnings never reached the verdict (robust), and Markdown had no
    notes at all."""
    p = dead_server_outputs[fmt]
    assert p.returncode == 1, p.stderr
    if fmt == "json":
        assert json.loads(p.stdout)["sources"][0]["notes"] == [WARNING]
    elif fmt == "markdown":
        assert "Notes on the input:\n\n- `http://<ip>:" in p.stdout  # the address redacted, the port kept
        assert f"/metrics [Qwen3-0.6B]`: {WARNING}\n" in p.stdout
    else:
        assert f"note: {WARNING}" in p.stdout
    assert p.stdout.count("scrapes failed") == 1


def test_a_skipped_file_of_a_scrape_directory_is_a_note_in_the_ticket(tmp_path):
    d = tmp_path / "scrapes"
    shutil.copytree(SEQ / "storm-v1", d)
    (d / "README.txt").write_text("how these were taken\n")
    p = cli("-f", "markdown", str(d))
    assert p.returncode == 1
    notes = p.stdout.split("Notes on the input:\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(notes) == 1 and notes[0].startswith("- `")
    assert notes[0].endswith("scrapes/ [Qwen3-0.6B]`: 1 file skipped: not a scrape (README.txt)")


def test_an_unreadable_input_is_named_in_the_ticket_notes(tmp_path):
    log = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "s001-llama31-8b-3090-kv-29k.log"
    p = cli("-f", "markdown", str(log), str(tmp_path / "missing.log"))
    assert p.returncode == 2
    assert f"- `missing.log`: not read: {tmp_path / 'missing.log'}: no such file" in p.stdout


def test_a_clean_log_has_no_notes_section():
    log = Path(__file__).resolve().parent.parent / "fixtures" / "logs" / "r022-v1-startup-sm120-healthy.log"
    assert "Notes on the input" not in cli("-f", "markdown", str(log)).stdout
