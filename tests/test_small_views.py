"""Small things a first-time user tripped on (fresh-user report, finding 14): max concurrency
as vLLM prints it, a long source name that keeps its colon, the recap naming the source when
there are several, the healthy headline's punctuation, README's schema table in order."""

import re
from pathlib import Path

from conftest import fixture_path

from vllm_doctor import diagnose
from vllm_doctor.render import render
from vllm_doctor.render.facts import concurrency
from vllm_doctor.render.text import recap

ROOT = Path(__file__).resolve().parent.parent


def test_concurrency_has_vllm_s_two_decimals():
    assert concurrency(1.0546875) == "1.05x" and concurrency(6.15) == "6.15x" and concurrency(12) == "12.00x"


def test_a_metrics_verdict_shows_concurrency_rounded():
    from vllm_doctor.metrics import read_directory
    from vllm_doctor.pipeline import build_verdict, metrics_results

    series = read_directory(str(ROOT / "fixtures" / "metrics" / "seq" / "storm-v1"))
    out = render(build_verdict(metrics_results(series, [], None)), "text", width=100)
    assert "1.05x concurrency" in out and "1.05469x" not in out


def test_a_source_name_wider_than_the_line_keeps_its_colon(tmp_path):
    log = tmp_path / ("x" * 90 + ".log")
    log.write_bytes(fixture_path("r022-v1-startup-sm120-healthy.log").read_bytes())
    out = render(diagnose(str(log)), "text", width=80)
    assert not any(line.lstrip().startswith(":") for line in out.splitlines())
    assert max(len(x) for x in out.splitlines()) <= 80
    # the name whole (broken at separators only, never shortened: it is to be copied), then ':'
    block = out[out.index(str(log)[:40]) :] if str(log)[:40] in out else ""
    assert re.search(r"^x+\.log:\n  13 lines", out, re.M) and "\u2026" not in block.split("13 lines")[0]
    assert "".join(x.strip() for x in block.split(":\n")[0].splitlines()) == str(log)


def test_with_several_sources_the_recap_names_the_source():
    from vllm_doctor.pipeline import build_verdict, diagnose_input
    from vllm_doctor.sources import open_input

    results = []
    for name in ("s001-llama31-8b-3090-kv-29k.log", "r003-club3090-enginecore-oom-runtime.log"):
        src = open_input(str(fixture_path(name)))
        results += diagnose_input(src)
        src.stream.close()
    v = build_verdict(results)
    line = recap(v, 73)  # 80 columns less "recap: ": the source stays, shortened; the view wraps
    assert line.startswith("VD101 kv_cache_capacity (critical) · ") and line.endswith("29k.log")
    assert "--max-model-len 23552" in line
    out = render(v, "text", width=80, height=24).splitlines()
    assert out[-2:] == [
        "recap: VD101 kv_cache_capacity (critical) \u00b7",
        f"  do this first: {line.split('first: ')[1]}",
    ]
    one = diagnose(str(fixture_path("s001-llama31-8b-3090-kv-29k.log")))
    assert "s001" not in recap(one, 73)  # one source: the flag and the class come first


def test_the_healthy_headline_runs_into_its_source():
    out = render(diagnose(str(fixture_path("r022-v1-startup-sm120-healthy.log"))), "text", width=200)
    assert out.splitlines()[0].endswith("found in the log \u00b7 r022-v1-startup-sm120-healthy.log")


def test_readme_schema_versions_are_in_order():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    versions = re.findall(r"^\| (1\.\d+) \|", readme, re.M)
    assert versions == sorted(versions, key=lambda v: tuple(map(int, v.split(".")))) and len(versions) >= 3
