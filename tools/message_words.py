#!/usr/bin/env python3
"""Write vllm_doctor/message_words.txt: the words vLLM's log and error messages are made of.

Usage:
    python tools/message_words.py /work/cache/vllm 0.5.5 0.6.6 0.8.4 0.10.2 0.13.0 0.20.2 0.28.0 0.33.0

Reads each release's ``.py`` files (``pip download --no-deps --only-binary :all: vllm==X``,
kept outside the repo) and collects every word in the string literals of the first
argument of a logger call (``logger.info/warning/error/debug/exception/critical`` and their
``_once`` forms) and of the arguments of a raised exception's constructor, lower-cased, one a
line, sorted; and every word of the string literals of ``vllm_doctor/catalog/*.py`` (the
wordings of what vLLM relays: PyTorch's, XLA's, Ray's messages). A name in camel case is its words (``ModelRunner``: model, runner; ``KVCache``: kv,
cache), so the glued form of two words is not taken for a word of its own. Single letters are left out but for "a" (``%s``, ``%d`` are no words).
:func:`vllm_doctor.reassemble._two_words` reads the file to tell a line word-wrapped at a space
from a word a terminal cut in two.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

LOGGER_CALLS = {"info", "warning", "warn", "error", "debug", "exception", "critical"}
OUT = Path(__file__).resolve().parent.parent / "vllm_doctor" / "message_words.txt"
CATALOG = OUT.parent / "catalog"
#: A word; a name in camel case is its words (ModelRunner, KVCache).
WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


def _strings(node: ast.AST):
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n.value


def _message_args(tree: ast.AST):
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr.removesuffix("_once") in LOGGER_CALLS:
                yield from n.args[:1]
        elif isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call):
            yield from n.exc.args


def words(root: Path, versions) -> set:
    out = set()
    for ver in versions:
        for d, _, files in os.walk(root / ver / "vllm"):
            for f in files:
                if not f.endswith(".py"):
                    continue
                try:
                    tree = ast.parse(Path(d, f).read_text(encoding="utf-8", errors="replace"))
                except SyntaxError:
                    continue
                for arg in _message_args(tree):
                    for s in _strings(arg):
                        out.update(w.lower() for w in WORD.findall(s))
    # The catalog's own string literals: the wordings of what vLLM relays (PyTorch's, XLA's,
    # Ray's, HPU's messages), as its patterns and docstrings spell them.
    for path in sorted(CATALOG.glob("*.py")):
        for s in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            out.update(w.lower() for w in WORD.findall(s))
    return {w for w in out if len(w) > 1 or w == "a"}


def main(argv) -> int:
    if len(argv) < 2:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    found = words(Path(argv[0]), argv[1:])
    OUT.write_text("".join(w + "\n" for w in sorted(found)), encoding="utf-8")
    print(f"{len(found)} words -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
