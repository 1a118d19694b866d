#!/usr/bin/env python3
"""Prove every judgement number is pinned: move each one and watch a test fail.

For each numeric constant of ``vllm_doctor/thresholds.py`` and each factor (0.5 and 1.5 by
default), this runs the rule case tables and the corpus test in a fresh interpreter with that
one constant replaced (``VLLM_DOCTOR_MUTATE=NAME=VALUE``, read by ``tests/conftest.py``) and
expects the run to FAIL. A constant whose move leaves every test green is reported as
surviving: no test would notice if it were wrong. Exit status: 0 when every mutation was
caught, 1 otherwise.

Usage: python tools/mutation_check.py [--factors 0.5,1.5] [NAME ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/rules",
    "tests/test_corpus.py",
    "tests/test_compare.py",
    "tests/test_render_operator.py",
    # the client transcript's body-to-status distance (CLIENT_BODY_LINES) is pinned there
    "tests/test_envelopes_wrappers7.py",
]


def constants():
    sys.path.insert(0, str(ROOT))
    from vllm_doctor import thresholds

    return {
        name: value
        for name, value in vars(thresholds).items()
        if name.isupper() and isinstance(value, (int, float)) and not isinstance(value, bool)
    }


def caught(name: str, value: float) -> bool:
    env = dict(os.environ, VLLM_DOCTOR_MUTATE=f"{name}={value!r}")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True).returncode != 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="only these constants (default: all)")
    ap.add_argument("--factors", default="0.5,1.5")
    a = ap.parse_args()
    factors = [float(x) for x in a.factors.split(",")]
    table = constants()
    unknown = set(a.names) - set(table)
    if unknown:
        print(f"mutation_check: no such constant: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    survivors = []
    t0 = time.monotonic()
    for name in a.names or sorted(table):
        for factor in factors:
            value = table[name] * factor
            ok = caught(name, value)
            print(f"{'caught  ' if ok else 'SURVIVED'} {name} = {value:g} ({factor:g} x {table[name]:g})", flush=True)
            if not ok:
                survivors.append(f"{name} x {factor:g}")
    n = len(a.names or table) * len(factors)
    print(f"{n - len(survivors)} of {n} mutations caught in {time.monotonic() - t0:.0f} s")
    if survivors:
        print("surviving: " + ", ".join(survivors))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
