"""The house: data flows one way, and no module imports one that imports it back.

The import graph of the package (every import, in-function ones included) has no cycle; and
the layers only look downstream: the catalog knows nothing of the tracker, the tracker and
the run view nothing of the rules, the rules nothing of how input is read or output printed.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "vllm_doctor"


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path):
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("vllm_doctor"):
                subs = {f"{target}.{a.name}" for a in node.names}
                # "from .. import thresholds" imports the module thresholds; "from .x import y"
                # imports module x (the package itself only when a name is not a submodule).
                known = {
                    s
                    for s in subs
                    if (PKG.parent / (s.replace(".", "/") + ".py")).exists()
                    or (PKG.parent / s.replace(".", "/") / "__init__.py").exists()
                }
                out |= known
                if known != subs:
                    out.add(target)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("vllm_doctor")}
    return out


def graph():
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    edges = {}
    for name, path in modules.items():
        edges[name] = {t for t in imports_of(path) if t in modules and t != name}
    return edges


def test_no_import_cycles():
    edges = graph()
    seen, stack, cycles = set(), [], []

    def visit(n):
        if n in stack:
            cycles.append(stack[stack.index(n) :] + [n])
            return
        if n in seen:
            return
        seen.add(n)
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            # a package importing its own submodule is how Python packages work, not a cycle
            if not m.startswith(n + "."):
                visit(m)
        stack.pop()

    for n in sorted(edges):
        visit(n)
    assert cycles == []


def reaches(edges, start, targets):
    todo, seen = [start], set()
    while todo:
        n = todo.pop()
        for m in edges.get(n, ()):
            if any(m == t or m.startswith(t + ".") for t in targets):
                return m
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return None


def test_layers_only_look_downstream():
    edges = graph()
    rules = [
        ("vllm_doctor.catalog", ["vllm_doctor.tracker", "vllm_doctor.rules", "vllm_doctor.pipeline"]),
        ("vllm_doctor.tracker", ["vllm_doctor.rules", "vllm_doctor.pipeline", "vllm_doctor.render"]),
        ("vllm_doctor.run", ["vllm_doctor.rules", "vllm_doctor.pipeline", "vllm_doctor.render"]),
        ("vllm_doctor.rules", ["vllm_doctor.pipeline", "vllm_doctor.cli", "vllm_doctor.render", "vllm_doctor.sources"]),
        ("vllm_doctor.render", ["vllm_doctor.rules", "vllm_doctor.tracker", "vllm_doctor.pipeline"]),
    ]
    for start, forbidden in rules:
        for mod in [m for m in edges if m == start or m.startswith(start + ".")]:
            assert reaches(edges, mod, forbidden) is None, (mod, reaches(edges, mod, forbidden))
