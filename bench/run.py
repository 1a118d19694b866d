"""Benchmark vllm-doctor against what an operator would type instead, in one run.

Usage: python bench/run.py [--sizes 10,100,1024] [--reps 5] [--shapes storm,restarts,traceback,longline,empty]
                           [--out DIR] [--doctor LABEL=COMMAND ...]

Inputs (made once with bench/generate.py, kept in --out, default /tmp/vllm-doctor-bench):
busy logs of each size, plain and gzip; and the adversarial shapes of issue 15, where every
line is a candidate: a 3 M-line HTTP 500 storm, 3 M restart lines, a 200 MiB traceback,
one 48 MiB line without a newline (read plain and with ``-F -``, issue 9), and 100 MiB of one
empty ERROR record (breakit4 item 11).

Tools, per input, run alternately (tool A, B, C, D, then A, B, C, D again ...), each
--reps times; the median is reported:
- ``cat FILE > /dev/null`` (``zcat`` for gzip): the I/O floor;
- ``LC_ALL=C grep -c -F -f bench/keywords.txt`` (``zcat | grep`` for gzip): the 13 keywords
  an operator would grep for;
- ``rg -c -F -f bench/keywords.txt`` (``rg -z`` for gzip): ripgrep, the same keywords
  (Debian package ``ripgrep``; skipped with a note when it is not installed);
- ``vllm-doctor diagnose --format json``: the whole diagnosis. With ``--doctor LABEL=COMMAND``
  (repeatable) several builds are timed in the same rounds, e.g. the main branch against a
  change: ``--doctor "main=env PYTHONPATH=/tmp/main vllm-doctor" --doctor change=vllm-doctor``;
  ratios are the last one's, and the verdicts of all of them must be the same.

It prints MB/s (of the uncompressed log), lines/s, peak RSS (the largest of the command's
processes that were waited for, from ``wait4``), each tool's ratio to vllm-doctor, the
machine's load average before and after, and checks each verdict (the busy log: a runtime
OOM naming co-tenant PID 4242, with the saturation episode before it).
Targets (issue 15), read off this output, never asserted in a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KEYWORDS = os.path.join(HERE, "keywords.txt")
#: (shape, size in MiB): sizes that give the line counts of issue 15.
SHAPES = {"storm": 315, "restarts": 390, "traceback": 200, "longline": 48, "empty": 100}
RESULT_DIR = "/tmp"


def run(cmd, stdin=None, stdout=None, shell=False):
    """Wall seconds, peak RSS (MiB) and exit status of one command. RSS comes from GNU time
    (``/usr/bin/time -f %M``), which forks from a small process: ``wait4`` from here would
    count this Python process's pages copied at fork."""
    argv = ["sh", "-c", cmd] if shell else list(cmd)
    res = os.path.join(RESULT_DIR, "time.txt")
    # Output to a file, never /dev/null: GNU grep stops at the first match when its output
    # is /dev/null (it behaves like -q), which would time nothing.
    with open(os.path.join(RESULT_DIR, "stdout.txt"), "wb") as sink:
        t0 = time.perf_counter()
        p = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", res, *argv],
            stdin=stdin,
            stdout=stdout or sink,
            stderr=subprocess.DEVNULL,
        )
        dt = time.perf_counter() - t0
    with open(res) as fh:
        kib = int(fh.read().split()[-1])
    return dt, kib / 1024, p.returncode


def ensure(path, size, shape="busy", gz=False):
    if not os.path.exists(path):
        plain = path[:-3] if gz else path
        if not os.path.exists(plain):
            subprocess.run(
                [sys.executable, os.path.join(HERE, "generate.py"), plain, str(size), "--shape", shape], check=True
            )
        if gz:
            with open(path, "wb") as out:
                subprocess.run(["gzip", "-6", "-c", plain], stdout=out, check=True)
    return path


def count_lines(path):
    n = 0
    with open(path, "rb") as fh:
        while True:
            b = fh.read(2**24)
            if not b:
                return n
            n += b.count(b"\n")


#: ``(label, command)`` of each vllm-doctor build timed (``--doctor``); the last is the one the
#: ratios are of.
DOCTORS = [("vllm-doctor", "vllm-doctor")]


def tools_for(log, gz, doctor_out):
    kw = KEYWORDS
    q = f"'{log}'"
    tools = []
    if gz:
        tools.append(("zcat > /dev/null", f"zcat {q} > /dev/null", True))
        tools.append(("zcat | grep -F", f"zcat {q} | LC_ALL=C grep -c -F -f '{kw}'", True))
        if shutil.which("rg"):
            tools.append(("rg -z -F", ["rg", "-z", "-c", "-F", "-f", kw, log], False))
    else:
        tools.append(("cat > /dev/null", f"cat {q} > /dev/null", True))
        tools.append(("grep -F", f"LC_ALL=C grep -c -F -f '{kw}' {q}", True))
        if shutil.which("rg"):
            tools.append(("rg -F", ["rg", "-c", "-F", "-f", kw, log], False))
    for label, command in DOCTORS:
        tools.append((label, f"{command} diagnose --format json {q} > '{doctor_out}.{label}'", True))
    return tools


def bench_one(label, log, gz, reps, nbytes, lines, out, rows):
    doctor_out = os.path.join(out, "verdict.json")
    tools = tools_for(log, gz, doctor_out)
    times = {name: [] for name, _, _ in tools}
    rss = {name: 0.0 for name, _, _ in tools}
    for _ in range(reps):
        for name, cmd, shell in tools:  # alternating: every tool once per round
            dt, mx, _ = run(cmd, shell=shell)
            times[name].append(dt)
            rss[name] = max(rss[name], mx)
    doc = statistics.median(times[DOCTORS[-1][0]])
    for name, _, _ in tools:
        t = statistics.median(times[name])
        rows.append((label, name, t, nbytes / 1e6 / t, lines / t, rss[name], doc / t))
        print(
            f"{label:<22} {name:<18} {t:>8.2f} {nbytes / 1e6 / t:>9.0f} {lines / t / 1e3:>9.0f}k "
            f"{rss[name]:>8.1f} {doc / t:>8.2f}x",
            flush=True,
        )
    verdicts = []
    for label, _ in DOCTORS:
        with open(f"{doctor_out}.{label}") as fh:
            verdicts.append(json.load(fh))
    if len(verdicts) > 1:
        same = all(comparable(v) == comparable(verdicts[-1]) for v in verdicts)
        print(f"{'':<22} verdicts of {', '.join(x for x, _ in DOCTORS)}: {'identical' if same else 'DIFFERENT'}")
    return verdicts[-1]


def comparable(v):
    """A verdict without what differs between builds by design (the version; the records
    a fast path examined)."""
    v = json.loads(json.dumps(v))
    v.get("tool", {}).pop("version", None)
    for s in v.get("sources", []):
        s.pop("records", None), s.pop("joined", None)
    return v


def check_busy(v):
    oom = next((f for f in v["findings"] if f["class"] == "runtime_oom"), None)
    storm = next((f for f in v["findings"] if f["class"] == "preemption_storm"), None)
    return (
        f"verdict {v['primary_class']}; co-tenant PIDs {oom and oom['facts'].get('co_tenant_pids')}; "
        f"saturation before it: {'yes' if storm else 'no'}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,1024", help="busy-log sizes in MiB, comma-separated")
    ap.add_argument("--reps", type=int, default=5, help="runs of each tool on each input (median reported)")
    ap.add_argument("--big-reps", type=int, default=3, help="runs on inputs of 1 GiB and more, and the shapes")
    ap.add_argument("--shapes", default="storm,restarts,traceback,longline,empty")
    ap.add_argument("--no-gzip", action="store_true")
    ap.add_argument("--out", default=os.path.join("/tmp", "vllm-doctor-bench"))
    ap.add_argument(
        "--doctor",
        action="append",
        metavar="LABEL=COMMAND",
        help="a vllm-doctor build to time (repeatable; default vllm-doctor=vllm-doctor); ratios are the last one's",
    )
    a = ap.parse_args()
    if a.doctor:
        DOCTORS[:] = [tuple(d.split("=", 1)) for d in a.doctor]
        if any(len(d) != 2 or not d[0] or not d[1] for d in DOCTORS):
            raise SystemExit("--doctor takes LABEL=COMMAND")
    os.makedirs(a.out, exist_ok=True)
    global RESULT_DIR
    RESULT_DIR = a.out
    if not os.path.exists("/usr/bin/time"):
        raise SystemExit("bench/run.py needs GNU time (apt-get install -y time) for peak RSS")
    if not shutil.which("rg"):
        print("note: ripgrep not installed (apt-get install -y ripgrep): its column is skipped")
    print(f"load average before: {os.getloadavg()}; cores: {os.cpu_count()}")
    print(f"{'input':<22} {'tool':<18} {'seconds':>8} {'MB/s':>9} {'lines/s':>10} {'RSS MiB':>8} {'doctor/x':>9}")
    rows = []
    for size in [float(s) for s in a.sizes.split(",") if s]:
        plain = ensure(os.path.join(a.out, f"busy-{size:g}MiB.log"), size)
        nbytes, lines = os.path.getsize(plain), count_lines(plain)
        reps = a.big_reps if size >= 1024 else a.reps
        for gz in (False,) if a.no_gzip else (False, True):
            log = ensure(plain + ".gz", size, gz=True) if gz else plain
            v = bench_one(f"busy {size:g} MiB{' .gz' if gz else ''}", log, gz, reps, nbytes, lines, a.out, rows)
            print(f"{'':<22} {check_busy(v)}")
    for shape in [s for s in a.shapes.split(",") if s]:
        log = ensure(os.path.join(a.out, f"{shape}.log"), SHAPES[shape], shape)
        nbytes, lines = os.path.getsize(log), max(count_lines(log), 1)
        v = bench_one(f"{shape} ({lines / 1e6:.1f} M lines)", log, False, a.big_reps, nbytes, lines, a.out, rows)
        print(f"{'':<22} verdict {v['primary_class']}")
        if shape == "longline":  # issue 9: -F on one 48 MiB line without a newline vs the plain path
            ts = []
            for _ in range(a.big_reps):
                with open(log, "rb") as fh:
                    ts.append(run(f"{DOCTORS[-1][1]} diagnose -F --format json -", stdin=fh, shell=True))
            t = statistics.median(x[0] for x in ts)
            plain_t = next(r[2] for r in rows if r[0].startswith("longline") and r[1] == DOCTORS[-1][0])
            print(
                f"{'longline -F -':<22} {'vllm-doctor -F':<18} {t:>8.2f} {nbytes / 1e6 / t:>9.0f} {'':>10} "
                f"{max(x[1] for x in ts):>8.1f}   ({t / plain_t:.2f}x the plain path)"
            )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
