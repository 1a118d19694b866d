"""Fetch the ``.py`` files of vLLM releases into a cache outside the repository.

For each version: ``pip download --no-deps --only-binary :all: vllm==X`` into a wheel
directory, unzip only the ``vllm/**.py`` members into ``CACHE/<version>/``, delete the
wheel (about 400 MB each; the ``.py`` files are a tenth of that). A version whose tree
is already there is skipped. Never commit the cache: it is vLLM's source, not ours.

Usage::

    python tools/wordings/fetch.py [--cache /work/cache/vllm] [--wheels /work/cache/wheels] 0.5.5 0.6.6.post1 ...

Standard library only (``pip`` is run as ``python -m pip``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path


def fetch(version: str, cache: Path, wheels: Path) -> Path:
    """Return ``cache/version`` holding that release's ``vllm/**.py``; download if missing.

    Raises ``subprocess.CalledProcessError`` when pip cannot download the wheel and
    ``FileNotFoundError`` when pip reports success but leaves no wheel.
    """
    dest = cache / version
    marker = dest / ".complete"
    if marker.exists():
        return dest
    wheels.mkdir(parents=True, exist_ok=True)
    tmp = wheels / version
    tmp.mkdir(exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary",
            ":all:",
            f"vllm=={version}",
            "-d",
            str(tmp),
        ],
        check=True,
    )
    found = sorted(tmp.glob("vllm-*.whl"))
    if not found:
        raise FileNotFoundError(f"no vllm wheel for {version} in {tmp}")
    if dest.exists():
        shutil.rmtree(dest)
    with zipfile.ZipFile(found[0]) as zf:
        for name in zf.namelist():
            if name.startswith("vllm/") and name.endswith(".py"):
                zf.extract(name, dest)
    shutil.rmtree(tmp)
    marker.write_text(found[0].name + "\n", encoding="utf-8")
    return dest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/vllm"), help="where the .py trees go")
    ap.add_argument("--wheels", type=Path, default=Path("/work/cache/wheels"), help="scratch directory for wheels")
    ap.add_argument("versions", nargs="+", help="vLLM release numbers, e.g. 0.5.5 0.10.2")
    args = ap.parse_args(argv)
    failed = []
    for v in args.versions:
        try:
            path = fetch(v, args.cache, args.wheels)
            print(f"{v}: {path}", flush=True)
        except (subprocess.CalledProcessError, FileNotFoundError, zipfile.BadZipFile) as e:
            print(f"{v}: FAILED {e}", file=sys.stderr, flush=True)
            failed.append(v)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
