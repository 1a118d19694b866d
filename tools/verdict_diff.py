#!/usr/bin/env python3
"""Snapshot the verdicts of a directory of logs, or diff two snapshots.

Usage:
    python tools/verdict_diff.py snapshot DIR OUT.json   # one entry per *.log in DIR
    python tools/verdict_diff.py diff OLD.json NEW.json  # what changed, per log and finding

Used to prove a refactor leaves verdicts alone (or to name each verdict it changes and why):
take a snapshot before, one after, and read the diff. A snapshot keeps what an operator acts
on: the primary class and title, and per finding its code, severity, phase, title, facts,
evidence lines and remedies (action and flag). Exit status of ``diff``: 0 same, 1 different.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _finding(f: dict) -> dict:
    return {
        "code": f["code"],
        "class": f["class"],
        "severity": f["severity"],
        "phase": f["phase"],
        "title": f["title"],
        "facts": f["facts"],
        "evidence": [f"{Path(e['source']).name}:{e['line']}" for e in f["evidence"]],
        "remedies": [(r["action"], r["flag"]) for r in f["remedies"]],
        "does_not_help": f["does_not_help"],
    }


def snapshot(directory: str, out: str) -> None:
    from vllm_doctor import diagnose

    snap = {}
    for path in sorted(Path(directory).glob("*.log")):
        v = diagnose(str(path)).to_dict()
        snap[path.name] = {
            "primary_class": v["primary_class"],
            "title": v["title"],
            "findings": [_finding(f) for f in v["findings"]],
        }
    Path(out).write_text(json.dumps(snap, indent=1, sort_keys=True, default=str))
    print(f"{len(snap)} verdicts -> {out}")


def _diff_findings(old: list, new: list) -> list:
    out = []
    by_code_old = {(f["code"], f["phase"]): f for f in old}
    by_code_new = {(f["code"], f["phase"]): f for f in new}
    for key in sorted(set(by_code_old) | set(by_code_new)):
        a, b = by_code_old.get(key), by_code_new.get(key)
        if a is None:
            out.append(f"  + {key[0]} {b['title']}")
        elif b is None:
            out.append(f"  - {key[0]} {a['title']}")
        else:
            for field in a:
                if a[field] != b.get(field):
                    out.append(f"  ~ {key[0]} {field}: {a[field]!r} -> {b.get(field)!r}")
    return out


def diff(old_path: str, new_path: str) -> int:
    old = json.loads(Path(old_path).read_text())
    new = json.loads(Path(new_path).read_text())
    changed = 0
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        lines = []
        if a is None or b is None:
            lines.append("  only in " + ("new" if a is None else "old"))
        else:
            if a["primary_class"] != b["primary_class"]:
                lines.append(f"  primary {a['primary_class']} -> {b['primary_class']}")
            if a["title"] != b["title"]:
                lines.append(f"  title {a['title']!r} -> {b['title']!r}")
            lines += _diff_findings(a["findings"], b["findings"])
        if lines:
            changed += 1
            print(name)
            print("\n".join(lines))
    print(f"{changed} of {len(set(old) | set(new))} verdicts differ")
    return 1 if changed else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "snapshot":
        snapshot(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "diff":
        sys.exit(diff(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
