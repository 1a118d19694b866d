"""Benchmark vllm-doctor against grep on the same generated log, in one run.

Usage: python bench/run.py [--sizes 100,1024] [--keep]

For each size (MiB) it generates a busy-server log (bench/generate.py), then times
``vllm-doctor diagnose --format json`` and ``LC_ALL=C grep -c -F -f LITERALS`` where
LITERALS are the literals the pre-filter keys on (vllm_doctor.prefilter.LITERALS), and
prints size, lines, seconds, MB/s, peak RSS and the time ratio. It also checks the verdict:
runtime OOM naming co-tenant PID 4242 (not vLLM's own), and the saturation before it.
Targets (issue 6): time <= 2x grep's on 1 GiB, peak RSS <= 100 MiB at every size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(cmd, **kw):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    dt = time.perf_counter() - t0
    # ru_maxrss of children is the max over all children so far: run each tool in a fresh
    # /usr/bin/time-like wrapper instead when it is lower than an earlier one.
    return p, dt


def rss_of(cmd):
    """Peak RSS (MiB) of one command, measured in a child that runs only it."""
    code = (
        "import resource,subprocess,sys;subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True).stdout.strip()
    return int(out) / 1024 if out else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1024", help="comma-separated sizes in MiB")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs in bench/out/")
    a = ap.parse_args()
    from vllm_doctor.prefilter import LITERALS

    outdir = os.path.join(HERE, "out") if a.keep else tempfile.mkdtemp(prefix="vllm-doctor-bench-")
    os.makedirs(outdir, exist_ok=True)
    lit = os.path.join(outdir, "literals.txt")
    with open(lit, "w") as fh:
        fh.write("\n".join(LITERALS) + "\n")
    print(f"{'size':>8} {'lines':>10} {'tool':>12} {'seconds':>8} {'MB/s':>8} {'RSS MiB':>8}")
    for size in [float(s) for s in a.sizes.split(",")]:
        log = os.path.join(outdir, f"busy-{size:g}MiB.log")
        if not os.path.exists(log):
            subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), log, str(size)], check=True)
        nbytes = os.path.getsize(log)
        lines = sum(1 for _ in open(log, "rb"))
        env = dict(os.environ, LC_ALL="C")
        grep = ["grep", "-c", "-F", "-f", lit, log]
        doctor = ["vllm-doctor", "diagnose", "--format", "json", log]
        _, tg = timed(grep, env=env)
        p, td = timed(doctor)
        rg, rd = rss_of(grep), rss_of(doctor)
        for name, dt, rss in (("grep -F", tg, rg), ("vllm-doctor", td, rd)):
            print(f"{nbytes / 2**20:>7.0f}M {lines:>10} {name:>12} {dt:>8.2f} {nbytes / 1e6 / dt:>8.1f} {rss:>8.1f}")
        print(f"{'':>8} ratio vllm-doctor / grep: {td / tg:.2f}x")
        v = json.loads(p.stdout)
        oom = next((f for f in v["findings"] if f["class"] == "runtime_oom"), None)
        storm = next((f for f in v["findings"] if f["class"] == "preemption_storm"), None)
        print(
            f"{'':>8} verdict: {v['primary_class']}; co-tenant PIDs: {oom and oom['facts'].get('co_tenant_pids')}; "
            f"saturation before it: {'yes' if storm else 'no'}"
            + (f" ({storm['facts'].get('saturated_intervals')} intervals)" if storm else "")
        )


if __name__ == "__main__":
    main()
