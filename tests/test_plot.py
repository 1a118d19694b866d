"""--plot draws the stats of the run for a ticket: the series really drawn, labelled (issue 12)."""

import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from conftest import fixture_path

from vllm_doctor.render.plot import INSTALL_HINT

pytest.importorskip("matplotlib")  # in the test extra: this runs wherever `pip install -e '.[test]'` did

SVG = "{http://www.w3.org/2000/svg}"
#: KV cache usage (%) of each stats line of the log below, and its running / waiting counts.
KV = [20.0, 35.5, 51.0, 66.5, 82.0, 97.5, 99.1, 99.4, 99.0, 98.7]
RUNNING = [4, 8, 12, 16, 20, 24, 24, 23, 24, 24]
WAITING = [0, 0, 0, 0, 3, 9, 17, 25, 31, 40]


def stats_log(tmp_path, name="server.log"):
    """A V1 server's stats lines (real wording, vllm/v1/metrics/loggers.py) every 10 s with the
    KV cache filling, then the runtime OOM of r003 (a real log)."""
    lines = []
    for i, (kv, run, wait) in enumerate(zip(KV, RUNNING, WAITING)):
        t = f"05-01 14:3{i // 6}:{(i % 6) * 10:02d}"
        lines.append(
            f"(APIServer pid=1) INFO {t} [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            f"Avg generation throughput: {100.0 + 10 * i:.1f} tokens/s, Running: {run} reqs, Waiting: {wait} reqs, "
            f"GPU KV cache usage: {kv}%, Prefix cache hit rate: 0.0%"
        )
    lines += fixture_path("r003-club3090-enginecore-oom-runtime.log").read_text().splitlines()
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return log


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "vllm_doctor", *args], capture_output=True, text=True, **kw)


def polylines(svg_path):
    """{stroke colour: [(x, y), ...]} of every drawn line of the chart."""
    out = {}
    for p in ET.parse(svg_path).iter(f"{SVG}path"):
        style, d = p.get("style") or "", p.get("d") or ""
        if "fill: none" not in style or "stroke:" not in style:
            continue
        colour = style.split("stroke:")[1].split(";")[0].strip()
        pts = [tuple(map(float, seg.split())) for seg in d.replace("M", "L").split("L") if seg.strip()]
        if len(pts) > len(out.get(colour, [])):
            out[colour] = pts
    return out


def texts(svg_path):
    return [(t.text or "").strip() for t in ET.parse(svg_path).iter(f"{SVG}text")]


def test_svg_draws_each_series_point_for_point_with_labels(tmp_path):
    (tmp_path / "deep").mkdir()
    log = stats_log(tmp_path / "deep")
    out = tmp_path / "chart.svg"
    p = cli("diagnose", str(log), "--plot", str(out))
    assert p.returncode == 1, p.stderr  # the verdict's exit code: a problem was diagnosed
    assert p.stdout.startswith("VD200 runtime_oom") and p.stderr == ""
    lines = polylines(out)
    kv, running, waiting = lines["#c0392b"], lines["#2471a3"], lines["#d68910"]
    assert len(kv) == len(KV) and len(running) == len(RUNNING) and len(waiting) == len(WAITING)
    # y is linear in the value (SVG y grows downwards): the drawn shape is the data's
    for pts, vals in ((kv, KV), (running, RUNNING), (waiting, WAITING)):
        y0, v0 = pts[0][1], vals[0]
        j = max(range(len(vals)), key=lambda i: abs(vals[i] - v0))
        scale = (pts[j][1] - y0) / (vals[j] - v0)
        assert scale < 0
        for (_, y), v in zip(pts, vals):
            assert y == pytest.approx(y0 + scale * (v - v0), abs=0.05)
    xs = [x for x, _ in kv]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)  # one point per stats line, in time order
    words = texts(out)
    for label in ("KV cache %", "requests", "tokens/s", "running", "waiting", "GPU KV cache usage", "generation"):
        assert label in words, label
    assert "Runtime OOM on GPU 0 (23.56 GiB) at 05-01 14:39:06" in words  # the ticket's title
    assert any(w.startswith("VD200 out of memory") for w in words)  # the incident is marked
    footer = next(w for w in words if "stats intervals" in w)
    assert footer.startswith("server.log run 1: 10 stats intervals") and "vllm-log-doctor" in footer
    assert str(tmp_path) not in out.read_text()  # no local path in an attachment


def test_png_is_a_real_image(tmp_path):
    out = tmp_path / "chart.png"
    p = cli("diagnose", str(stats_log(tmp_path)), "--plot", str(out))
    assert p.returncode == 1, p.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert 900 <= width <= 1400 and 500 <= height <= 900


def test_a_log_without_stats_is_a_note_and_no_file(tmp_path):
    out = tmp_path / "chart.svg"
    p = cli("diagnose", str(fixture_path("s001-llama31-8b-3090-kv-29k.log")), "--plot", str(out))
    assert p.returncode == 1 and not out.exists()
    assert (
        p.stderr
        == f"vllm-doctor: note: --plot: no run has two or more stats lines: nothing to plot ({out} not written)\n"
    )


def test_missing_matplotlib_is_one_line_with_the_install_hint(tmp_path):
    out = tmp_path / "chart.svg"
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"  # as if not installed: import raises ImportError
        "from vllm_doctor.cli import main\n"
        f"sys.argv = ['vllm-doctor', 'diagnose', {str(stats_log(tmp_path))!r}, '--plot', {str(out)!r}]\n"
        "main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2 and not out.exists()
    assert p.stdout.startswith("VD200 runtime_oom")  # the verdict is still printed
    assert p.stderr == f"vllm-doctor: error: --plot needs matplotlib: {INSTALL_HINT}\n"
    assert "'.[plot]'" in INSTALL_HINT


def test_plot_wants_svg_or_png(tmp_path):
    p = cli("diagnose", str(stats_log(tmp_path)), "--plot", str(tmp_path / "chart.pdf"))
    assert p.returncode == 2 and "--plot" in p.stderr and ".svg or .png" in p.stderr
    assert p.stderr.count("\n") == 1
