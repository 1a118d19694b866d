"""Extract, from vLLM's own source, every message wording the catalog covers.

Reads the ``.py`` trees of several vLLM releases (fetched by ``fetch.py`` into
``/work/cache/vllm/<version>/vllm/``), finds with :mod:`ast` every

* logger call (``logger.info(...)``, ``logger.warning_once(...)``, ``logger.exception(...)``,
  old ``print_warning_once(...)``) -- the message is the first argument, ``%``-formatted
  with the others;
* ``raise X(...)`` -- the message is the exception's first argument (any ``...Error(...)`` /
  ``...Exception(...)`` built with a message, raised at once or kept and raised later); an
  exception built with several string arguments (``RuntimeError("a ", f"b {x}. ", "c")``, a
  comma where implicit concatenation was meant) prints ``str(args)``, the tuple repr
  ``('a ', 'b 7. ', 'c')``: its row holds the joined template and ``args``, the template of
  each argument;
* ``assert cond, msg`` -- vLLM's "Error in memory profiling" was an assertion for years;
* ``return f"..."`` in a ``__repr__`` / ``__str__`` -- what ``logger.debug(result)`` prints
  (V1's ``MemoryProfilingResult``: "Memory profiling takes ... weights memory: X GiB.");
* ``tqdm(desc=...)`` progress bars whose text marks a phase (``Capturing CUDA graphs``),

turns each message into a *template* with typed placeholders, keeps those of the families
the catalog covers (:data:`FAMILIES`, matched on the message's fixed text), and writes

* ``wordings.jsonl``: one row per distinct (family, level, template): ``family``,
  ``level`` (``info``/``warning``/``error``/``debug``/``raise:ValueError``/``assert``/``tqdm``),
  ``template`` (``str.format`` syntax, placeholders ``{0}``, ``{1}`` ...; literal braces
  doubled), ``params`` (per placeholder: ``expr`` = the Python source of the value,
  ``spec`` = its format spec, ``style`` = ``f``/``%``/``format``, ``type`` = ``int``,
  ``float``, ``gib`` (a GiB figure, ``format_gib``/``GiB()``/``/ GiB_bytes``) or ``str``),
  ``releases`` (the versions that print it, oldest first), ``sites`` (``file``,
  ``function``, ``releases`` of each place that prints it) and, for an exception raised with
  several arguments only, ``args`` (the template of each argument, in order; joined they are
  ``template``, placeholders numbered as in it);
* ``frames.json``: for each function that marks a startup or serving phase in a
  traceback (:data:`PHASE_FUNCS`, plus every kernel warm-up function found under
  ``model_executor/warmup/``), its ``phase`` tag (the tag names of
  ``vllm_doctor/frames.py``), the ``releases`` that define it and the ``files``.

A message whose text is chosen at run time (a variable assigned in several places) gives
one template per assignment (at most :data:`MAX_VARIANTS`). Standard library only.

Usage (see README, "Refreshing the wording table for a new vLLM release")::

    python tools/wordings/extract.py --cache /work/cache/vllm --out fixtures/wordings
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

MAX_VARIANTS = 8
LOG_METHODS = {
    "debug",
    "info",
    "warning",
    "warn",
    "error",
    "exception",
    "critical",
    "fatal",
    "debug_once",
    "info_once",
    "warning_once",
    "error_once",
}
ONCE_FUNCS = {"print_warning_once": "warning", "print_info_once": "info", "warn_once": "warning"}

#: Message families the catalog covers, matched (``re.search``) against the message's text
#: with placeholders shown as ``{}``. The first family that matches wins. Each expression
#: names the fixed words of one vLLM message family; see shared/vllm-messages.md.
FAMILIES: Tuple[Tuple[str, str], ...] = (
    # KV cache sizing failures and capacity errors (section 1)
    (
        "kv_capacity",
        r"max seq len .* (?:KV cache|stored in KV)|No available memory for the cache blocks"
        r"|Cannot auto-fit max_model_len|should be allocated for the cache blocks",
    ),
    # free memory / utilisation checks and memory profiling errors (section 2)
    (
        "free_memory",
        r"(?:Free|Available) memory on device|Externally held weights on device|Error in memory profiling"
        r"|memory on device .* GPU memory utilization",
    ),
    # memory profiling summaries, KV sizing facts (section 4)
    (
        "kv_sizing",
        r"Memory profiling|memory reserved for KV Cache|Available KV cache memory|GPU KV cache size"
        r"|Maximum concurrency for|# \{\} blocks|# GPU blocks|# CPU blocks|after num_gpu_blocks is"
        r"|memory for KV Cache as specified|the current vLLM instance can use|Initial free memory: "
        r"|Free memory after profiling|worker requested memory",
    ),
    # weight loading markers (section 3)
    (
        "weights",
        r"Loading weights took|Model loading took|Loading model weights took|Starting to load model"
        r"|Failed to load model|checkpoint shards",
    ),
    # CUDA graph capture (section 5)
    (
        "cuda_graph",
        r"Capturing cudagraphs|Capturing CUDA graph|Capturing the model for CUDA graphs|Graph capturing finished"
        r"|CUDA graph pool memory|Cudagraph is disabled under eager mode|Estimated CUDA graph memory"
        r"|CUDA graphs can take additional",
    ),
    # sampler / pooler warm-up (section 6)
    ("warmup", r"when warming up (?:sampler|pooler)"),
    # periodic stats (section 8)
    ("stats", r"Avg prompt throughput|Prefix cache hit rate: GPU"),
    # preemption (section 7)
    ("preemption", r"is preempted by"),
    # config / length errors (section 12)
    (
        "config_error",
        r"max_num_batched_tokens \(\{\}\) (?:is smaller than max_model_len|must be greater than or equal to max_num_seqs)"
        r"|User-specified max_model_len|exceeds available Mamba cache|(?:to fit|after capping to) Mamba cache blocks",
    ),
    # quantization / dtype capability (section 11)
    (
        "quantization",
        r"is not supported for the current GPU|Bfloat16 is only supported on GPUs",
    ),
    # requests longer than the model allows (section 12)
    (
        "too_long",
        r"maximum context length is|is longer than the maximum model length|is too long and exceeds limit",
    ),
    # engine death and its consequence markers (section 10)
    (
        "engine_death",
        r"EngineCore failed to start|EngineCore encountered (?:a fatal error|an issue)|Engine core initialization failed"
        r"|died unexpectedly|WorkerProc hit an exception|output_handler failed|Background loop has errored"
        r"|MQLLMEngine is already dead|Engine process failed to start|Engine loop is not running"
        r"|\{\} pid \{\} died, exit code|WorkerProc initialization failed|Worker failed with error",
    ),
    # startup / ready markers (section 9)
    (
        "ready",
        r"init engine \(profile, create kv cache, warmup model\) took|Starting vLLM (?:API )?server"
        r"|Available routes are|vLLM (?:API )?server version",
    ),
    # the configuration lines (section 9)
    (
        "config",
        r"^non-default args: |^args: \{\}$|LLM engine .*with config: |^Using max model len"
        r"|Chunked prefill is enabled with max_num_batched_tokens|in world size \{\} is assigned as",
    ),
    # vLLM's own out-of-memory wordings (section 13 and the allocator)
    ("oom", r"(?i)\bout of memory\b|OutOfMemoryError"),
)
_FAMILY_RX = tuple((name, re.compile(rx)) for name, rx in FAMILIES)

#: Functions whose frame in a traceback tells the phase, by ``vllm_doctor/frames.py`` tag.
#: A name is kept in frames.json only if some release defines it.
PHASE_FUNCS: Dict[str, Tuple[str, ...]] = {
    "weight_load": (
        "load_model",
        "load_weights",
        "_load_weights",
        "weight_loader",
        "create_weights",
        "get_model",
        "_initialize_model",
        "initialize_model",
        "process_weights_after_loading",
        "load_weights_and_postprocess",
        "gptq_marlin_repack",
        "awq_marlin_repack",
    ),
    "profile": (
        "profile_run",
        "_profile_run",
        "determine_available_memory",
        "determine_num_available_blocks",
    ),
    "kv_init": (
        "initialize_cache",
        "initialize_kv_cache",
        "_initialize_kv_caches",
        "initialize_from_config",
        "get_kv_cache_config",
        "get_kv_cache_configs",
        "check_enough_kv_cache_memory",
        "_check_enough_kv_cache_memory",
        "raise_if_cache_size_invalid",
        "_allocate_kv_cache",
        "_allocate_kv_cache_tensors",
        "initialize_kv_cache_tensors",
        "_reshape_kv_cache_tensors",
    ),
    # the entry points; every function of the warm-up modules they call is added (KERNEL_WARMUP_ROOTS)
    "kernel_warmup": ("kernel_warmup", "warmup_kernels"),
    "graph_capture": ("capture_model", "_capture_cudagraphs", "capture_graph"),
    "sampler_warmup": ("_dummy_sampler_run", "_dummy_pooler_run"),
    "startup": ("init_device", "request_memory", "wait_for_engine_startup", "_init_executor"),
    "runtime": ("execute_model", "run_busy_loop", "engine_step", "run_engine_loop", "step_with_batch_queue"),
    "wake_up": ("wake_up",),
}
#: Kernel warm-up (``gpu_worker.compile_or_warm_up_model`` -> ``kernel_warmup(worker)``, after
#: the KV cache is allocated and before CUDA graph capture) lives in these modules; a function
#: there is a warm-up frame when the entry points reach it through calls inside them.
KERNEL_WARMUP_ROOTS = ("kernel_warmup", "warmup_kernels")
_WARMUP_NAME = re.compile(r"warm|autotune|_tune")
#: Names on the warm-up path too generic to tell a phase from (other libraries use them too).
_GENERIC = {"warmup", "_warmup", "warmup_inputs", "get_warmup_keys", "register_warmup"}
_WARMUP_FILES = re.compile(r"^vllm/model_executor/warmup/|^vllm/v1/worker/gpu/warmup\.py$")


def _unparse(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # ast.unparse of a malformed node: keep a marker, never fail the run
        return "<expr>"


_GIB_EXPR = re.compile(r"format_gib\(|\bGiB\(|GiB_bytes|/ ?\(?1 ?<< ?30|/ ?2 ?\*\* ?30|/ ?1024 ?\*\* ?3|_gib\b|_GiB\b")


def _ptype(expr: str, spec: str, style: str) -> str:
    """The value type a placeholder renders: int, float, gib or str."""
    s = spec.rstrip()
    last = s[-1:] if s else ""
    if _GIB_EXPR.search(expr):
        return "gib"
    if last in "fFeEgG%" and last:
        return "float"
    if last in "dixX" and last:
        return "int"
    if s in (",", "_"):
        return "int"
    return "str"


class Template:
    """A message being built: literal text and placeholders, in order."""

    __slots__ = ("parts",)

    def __init__(self, parts: Optional[List[tuple]] = None) -> None:
        self.parts: List[tuple] = parts or []

    def __add__(self, other: "Template") -> "Template":
        return Template(self.parts + other.parts)

    @property
    def literal_only(self) -> bool:
        return all(p[0] == "lit" for p in self.parts)

    def text(self) -> str:
        return "".join(p[1] for p in self.parts if p[0] == "lit")

    def render(self) -> Tuple[str, List[Dict[str, str]], str, List[str]]:
        """``(format template, params, display text with {} for each placeholder, argument
        templates)``: the last is the template cut at each ``("sep",)`` part (one piece per
        argument of an exception raised with several), empty when there is none."""
        out, params, shown, cuts = [], [], [], []
        for p in self.parts:
            if p[0] == "sep":
                cuts.append(len("".join(out)))
                continue
            if p[0] == "lit":
                out.append(p[1].replace("{", "{{").replace("}", "}}"))
                shown.append(p[1])
            else:
                _, expr, spec, style = p
                out.append("{%d}" % len(params))
                before = "".join(shown)[-40:]
                shown.append("{}")
                params.append(
                    {"expr": expr, "spec": spec, "style": style, "type": _ptype(expr, spec, style), "before": before}
                )
        template = "".join(out)
        bounds = [0, *cuts, len(template)]
        pieces = [template[a:b] for a, b in zip(bounds, bounds[1:])] if cuts else []
        return template, params, "".join(shown), pieces


def _lit(s: str) -> Template:
    return Template([("lit", s)])


def _param(expr: str, spec: str = "", style: str = "f") -> Template:
    return Template([("param", expr, spec, style)])


_PCT = re.compile(
    r"%(?:\((?P<key>\w+)\))?(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?(?P<conv>[diouxXeEfFgGcrsa%])"
)


def _percent(fmt: Template, args: Sequence[ast.AST], builder: Optional["Builder"] = None) -> List[Template]:
    """Apply ``%``-formatting with ``args`` to the literal parts of ``fmt`` (placeholders
    already in it, such as an f-string prefix, are kept as they are).

    A ``%s`` whose argument is itself a string template (``f"{num_tokens:,}"``, a local
    message variable) takes that template's first variant in place."""
    out: List[tuple] = []
    i = 0
    for part in fmt.parts:
        if part[0] != "lit":
            out.append(part)
            continue
        text = part[1]
        pos = 0
        for m in _PCT.finditer(text):
            out.append(("lit", text[pos : m.start()]))
            pos = m.end()
            if m["conv"] == "%":
                out.append(("lit", "%"))
                continue
            spec = m.group(0)[1:]
            arg = args[i] if i < len(args) else None
            i += 1
            if isinstance(arg, ast.Starred):
                arg = None
            if (
                arg is not None
                and builder is not None
                and spec == "s"
                and (_is_stringy(arg) or isinstance(arg, ast.Name))
            ):
                inner = builder.variants(arg, 1)
                opaque = len(inner[0].parts) == 1 and inner[0].parts[0][0] == "param" and not inner[0].parts[0][2]
                if inner and not opaque:
                    out.extend(inner[0].parts)
                    continue
            out.append(("param", _unparse(arg) if arg is not None else "?", spec, "%"))
        out.append(("lit", text[pos:]))
    return [Template([p for p in out if p[0] != "lit" or p[1]])]


_FMT_FIELD = re.compile(r"\{\{|\}\}|\{(?P<field>[^{}!:]*)(?:![rsa])?(?::(?P<spec>[^{}]*))?\}")


def _str_format(fmt: Template, args: Sequence[ast.AST], kwargs: Dict[str, ast.AST]) -> List[Template]:
    if not fmt.literal_only:
        return [fmt]
    text = fmt.text()
    out: List[tuple] = []
    pos, auto = 0, 0
    for m in _FMT_FIELD.finditer(text):
        out.append(("lit", text[pos : m.start()]))
        pos = m.end()
        tok = m.group(0)
        if tok in ("{{", "}}"):
            out.append(("lit", tok[0]))
            continue
        field = m["field"] or ""
        if field == "":
            node = args[auto] if auto < len(args) else None
            auto += 1
        elif field.isdigit():
            node = args[int(field)] if int(field) < len(args) else None
        else:
            node = kwargs.get(field.split(".")[0].split("[")[0])
        out.append(("param", _unparse(node) if node is not None else field, m["spec"] or "", "format"))
    out.append(("lit", text[pos:]))
    return [Template([p for p in out if p[0] != "lit" or p[1]])]


class _Scope:
    """One function body, read on first use (most functions print nothing the families cover).

    ``names``: string assignments, name -> ``(line, value, is_augmented)`` in source order;
    ``lists``: list building, name -> ``(line, element nodes, conditional)`` for the list
    literal assigned and every ``append`` / ``extend`` / ``+=`` after it (``conditional``
    when the operation sits under an ``if`` or a loop); ``log_aliases``: local names bound
    to a logger method (``log_fn = logger.debug if idle else logger.info``)."""

    def __init__(self, body: Iterable[ast.stmt]) -> None:
        self._body = list(body)
        self._names: Optional[Dict[str, List[Tuple[int, ast.AST, bool]]]] = None
        self.lists: Dict[str, List[Tuple[int, List[ast.AST], bool]]] = {}
        self.log_aliases: set = set()

    @property
    def names(self) -> Dict[str, List[Tuple[int, ast.AST, bool]]]:
        if self._names is None:
            self._names = self._collect()
        return self._names

    def _collect(self) -> Dict[str, List[Tuple[int, ast.AST, bool]]]:
        names: Dict[str, List[Tuple[int, ast.AST, bool]]] = {}

        def visit(stmts: Iterable[ast.AST], cond: bool) -> None:
            for node in stmts:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue
                self._one(node, cond, names)
                inner = cond or isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try))
                visit(ast.iter_child_nodes(node), inner)

        visit(self._body, False)
        for assigns in names.values():
            assigns.sort(key=lambda a: a[0])
        for ops in self.lists.values():
            ops.sort(key=lambda a: a[0])
        return names

    def _one(self, node: ast.AST, cond: bool, names: Dict[str, List[Tuple[int, ast.AST, bool]]]) -> None:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
            names.setdefault(name, []).append((node.lineno, value, False))
            if isinstance(value, ast.List):
                self.lists[name] = [(node.lineno, list(value.elts), False)]
            if _is_log_method(value):
                self.log_aliases.add(name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            names.setdefault(node.target.id, []).append((node.lineno, node.value, False))
            if isinstance(node.value, ast.List):
                self.lists[node.target.id] = [(node.lineno, list(node.value.elts), False)]
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            names.setdefault(node.target.id, []).append((node.lineno, node.value, True))
            if node.target.id in self.lists and isinstance(node.value, ast.List):
                self.lists[node.target.id].append((node.lineno, list(node.value.elts), cond))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in self.lists
            and node.args
        ):
            if node.func.attr == "append":
                self.lists[node.func.value.id].append((node.lineno, [node.args[0]], cond))
            elif node.func.attr == "extend" and isinstance(node.args[0], (ast.List, ast.Tuple)):
                self.lists[node.func.value.id].append((node.lineno, list(node.args[0].elts), cond))


def _is_log_method(node: ast.AST) -> bool:
    if isinstance(node, ast.IfExp):
        return _is_log_method(node.body) and _is_log_method(node.orelse)
    return isinstance(node, ast.Attribute) and node.attr in LOG_METHODS and _logger_like(node.value)


def _is_stringy(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_stringy(node.left) or (isinstance(node.op, ast.Add) and _is_stringy(node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _is_stringy(node.func.value)
    if isinstance(node, ast.IfExp):
        return _is_stringy(node.body) or _is_stringy(node.orelse)
    return False


class Builder:
    """Turns a message expression into its template variants, resolving local string names."""

    def __init__(self, scope: Optional[_Scope]) -> None:
        self.scope = scope

    def variants(self, node: ast.AST, depth: int = 0) -> List[Template]:
        if depth > 4:
            return [_param(_unparse(node))]
        if isinstance(node, ast.Constant):
            return [_lit(node.value)] if isinstance(node.value, str) else [_param(_unparse(node))]
        if isinstance(node, ast.JoinedStr):
            acc = [Template()]
            for v in node.values:
                if isinstance(v, ast.Constant):
                    pieces = [_lit(str(v.value))]
                elif isinstance(v, ast.FormattedValue):
                    spec = _unparse(v.format_spec)[2:-1] if v.format_spec is not None else ""
                    resolved = None
                    if not spec and v.conversion == -1:
                        if isinstance(v.value, ast.Name):
                            resolved = self._name(v.value, depth)
                        elif _is_stringy(v.value):
                            resolved = self.variants(v.value, depth + 1)
                    pieces = resolved or [_param(_unparse(v.value), spec, "f")]
                else:
                    pieces = [_param(_unparse(v))]
                acc = self._product(acc, pieces)
            return acc
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._product(self.variants(node.left, depth + 1), self.variants(node.right, depth + 1))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _is_stringy(node.left):
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            return [t for f in self.variants(node.left, depth + 1) for t in _percent(f, args)][:MAX_VARIANTS]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and _is_stringy(node.func.value)
        ):
            kwargs = {k.arg: k.value for k in node.keywords if k.arg}
            return [t for f in self.variants(node.func.value, depth + 1) for t in _str_format(f, node.args, kwargs)][
                :MAX_VARIANTS
            ]
        if isinstance(node, ast.IfExp):
            return (self.variants(node.body, depth + 1) + self.variants(node.orelse, depth + 1))[:MAX_VARIANTS]
        joined = self._join(node, depth)
        if joined:
            return joined
        if isinstance(node, ast.Name):
            resolved = self._name(node, depth)
            if resolved:
                return resolved
        return [_param(_unparse(node))]

    def _name(self, node: ast.AST, depth: int) -> Optional[List[Template]]:
        """Templates of a local string variable: one per plain assignment (with the ``+=`` after it)."""
        if not isinstance(node, ast.Name) or self.scope is None:
            return None
        assigns = [a for a in self.scope.names.get(node.id, ()) if _is_stringy(a[1])]
        if not assigns:
            return None
        out: List[Template] = []
        for i, (_, value, aug) in enumerate(assigns):
            if aug:
                continue
            vs = self.variants(value, depth + 1)
            for _, more, aug2 in assigns[i + 1 :]:
                if not aug2:
                    break
                vs = self._product(vs, self.variants(more, depth + 1))
            out.extend(vs)
        return out[:MAX_VARIANTS] or None

    def _join(self, node: ast.AST, depth: int) -> Optional[List[Template]]:
        """``", ".join(parts)`` over a local list of strings: the message with every part,
        and with the unconditional parts only."""
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "join"
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)
            and self.scope is not None
        ):
            return None
        self.scope.names  # noqa: B018 - reads the body
        ops = self.scope.lists.get(node.args[0].id)
        if not ops:
            return None
        sep = node.func.value.value
        out: List[Template] = []
        for keep_conditional in (True, False):
            elts = [e for _, es, cond in ops if keep_conditional or not cond for e in es]
            if not all(_is_stringy(e) for e in elts):
                return None
            acc = [Template()]
            for i, e in enumerate(elts):
                if i:
                    acc = self._product(acc, [_lit(sep)])
                acc = self._product(acc, self.variants(e, depth + 1)[:1])
            out.extend(acc[:1])
        if len(out) == 2 and out[0].parts == out[1].parts:
            out.pop()
        return out

    def arguments(self, nodes: Sequence[ast.AST]) -> List[Template]:
        """Templates of an exception's several arguments, one after the other, with a
        ``("sep",)`` part between two arguments (see :meth:`Template.render`)."""
        acc = [Template()]
        for i, node in enumerate(nodes):
            if i:
                acc = self._product(acc, [Template([("sep",)])])
            acc = self._product(acc, self.variants(node))
        return acc

    @staticmethod
    def _product(a: List[Template], b: List[Template]) -> List[Template]:
        return [x + y for x in a for y in b][:MAX_VARIANTS]


def _logger_like(node: ast.AST) -> bool:
    name = _unparse(node)
    return bool(re.search(r"(?:^|\.)_?(?:logger|log|lgr|LOGGER|_LOGGER)$", name))


def _aliased(scope: "_Scope", name: str) -> bool:
    scope.names  # noqa: B018 - reads the body
    return name in scope.log_aliases


_EXC_NAME = re.compile(r"(?:^|\.)(?:[A-Z]\w*)?(?:Error|Exception)$")


def _exc_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return _unparse(node).split(".")[-1]


def messages(tree: ast.AST) -> Iterator[Tuple[str, str, Any, List[ast.AST], Optional[_Scope]]]:
    """Yield ``(level, function, message node, %-args, scope)`` for every message in a module;
    the message node is a list of nodes for an exception built with several string arguments."""
    stack: List[Tuple[str, _Scope]] = []

    def visit(node: ast.AST) -> Iterator:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.append((node.name, _Scope(node.body)))
            for child in node.body:
                yield from visit(child)
            stack.pop()
            return
        func, scope = stack[-1] if stack else ("<module>", None)
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in LOG_METHODS and _logger_like(f.value) and node.args:
                level = f.attr.replace("_once", "").replace("warn", "warning").replace("warninging", "warning")
                level = {"exception": "error", "fatal": "critical"}.get(level, level)
                yield level, func, node.args[0], list(node.args[1:]), scope
            elif isinstance(f, ast.Name) and f.id in ONCE_FUNCS and node.args:
                yield ONCE_FUNCS[f.id], func, node.args[0], [], scope
            elif isinstance(f, ast.Name) and scope is not None and node.args and _aliased(scope, f.id):
                yield "info", func, node.args[0], list(node.args[1:]), scope
            elif isinstance(f, (ast.Name, ast.Attribute)) and _EXC_NAME.search(_unparse(f)) and node.args:
                # an exception built with its message: raised here, or kept and raised later
                # (``e = Exception("WorkerProc initialization failed ..."); ...; raise e``);
                # with several string arguments it prints their tuple repr: all of them
                several = len(node.args) > 1 and all(_is_stringy(a) for a in node.args)
                yield f"raise:{_exc_name(f)}", func, list(node.args) if several else node.args[0], [], scope
            elif _unparse(f).split(".")[-1] == "tqdm":
                for kw in node.keywords:
                    if kw.arg == "desc":
                        yield "tqdm", func, kw.value, [], scope
        elif isinstance(node, ast.Assert) and node.msg is not None:
            yield "assert", func, node.msg, [], scope
        elif isinstance(node, ast.Return) and func in ("__repr__", "__str__") and node.value is not None:
            if _is_stringy(node.value):
                yield "repr", func, node.value, [], scope
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    yield from visit(tree)


def family_of(text: str) -> Optional[str]:
    """The first :data:`FAMILIES` entry whose expression is found in ``text`` (a message with
    ``{}`` for each placeholder), or None: the message is not one the catalog covers."""
    for name, rx in _FAMILY_RX:
        if rx.search(text):
            return name
    return None


def version_key(v: str) -> Tuple:
    """Sort key for release numbers: ``0.6.6.post1`` after ``0.6.6``, ``0.10.2`` after ``0.9.2``."""
    parts = re.findall(r"\d+|[a-z]+", v)
    return tuple(int(p) if p.isdigit() else -1 for p in parts)


_FILE_CACHE: Dict[Tuple[str, str], Tuple[List[dict], List[str], Dict[str, set]]] = {}


def _called_names(node: ast.AST) -> set:
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute):
                out.add(f.attr)
    return out


def scan_file(rel: str, source: str) -> Tuple[List[dict], List[str], Dict[str, set]]:
    """One module: messages of the covered families, the phase functions it defines, and
    (warm-up modules only) what each of its functions calls.

    Most modules are identical from one release to the next: results are cached by
    path and content hash."""
    key = (rel, hashlib.sha1(source.encode("utf-8", "replace")).hexdigest())
    hit = _FILE_CACHE.get(key)
    if hit is not None:
        return hit
    rows: List[dict] = []
    defs: List[str] = []
    calls: Dict[str, set] = {}
    try:
        tree = ast.parse(source, filename=rel)
    except SyntaxError as e:
        print(f"warning: {rel}: not parsed ({e.msg})", file=sys.stderr)
        _FILE_CACHE[key] = (rows, defs, calls)
        return rows, defs, calls
    wanted = {f for funcs in PHASE_FUNCS.values() for f in funcs}
    warmup_module = bool(_WARMUP_FILES.search(rel))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name in wanted:
                defs.append(node.name)
            if warmup_module:
                calls.setdefault(node.name, set()).update(_called_names(node))
    for level, func, msg, args, scope in messages(tree):
        builder = Builder(scope)
        for t in builder.arguments(msg) if isinstance(msg, list) else builder.variants(msg):
            if args and level != "tqdm" and not level.startswith(("raise", "assert")):
                ts = _percent(t, args, builder)
            else:
                ts = [t]
            for t2 in ts:
                template, params, shown, pieces = t2.render()
                fam = family_of(shown)
                if fam is None:
                    continue
                row = {
                    "family": fam,
                    "level": level,
                    "template": template,
                    "params": params,
                    "file": rel,
                    "function": func,
                }
                if pieces:
                    row["args"] = pieces
                rows.append(row)
    _FILE_CACHE[key] = (rows, defs, calls)
    return rows, defs, calls


def scan_release(root: Path) -> Tuple[List[dict], Dict[str, List[str]]]:
    """Messages of the covered families, and the files defining each phase function, in one tree.

    Kernel warm-up functions are the warm-up modules' functions reachable from
    :data:`KERNEL_WARMUP_ROOTS`; they are returned among the phase functions."""
    rows: List[dict] = []
    defs: Dict[str, List[str]] = {}
    graph: Dict[str, set] = {}
    where: Dict[str, List[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        file_rows, names, calls = scan_file(rel, path.read_text(encoding="utf-8", errors="replace"))
        rows.extend(file_rows)
        for name in names:
            defs.setdefault(name, []).append(rel)
        for name, callees in calls.items():
            graph.setdefault(name, set()).update(callees)
            where.setdefault(name, []).append(rel)
    seen: set = set()
    todo = [r for r in KERNEL_WARMUP_ROOTS if r in graph]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(c for c in graph.get(name, ()) if c in graph and c not in seen)
    for name in seen:
        # helpers on the path with generic names (run, add, compile) would tag unrelated frames
        if name not in PHASE_TAG_OF and name not in _GENERIC and _WARMUP_NAME.search(name):
            defs.setdefault("kernel_warmup:" + name, where[name])
    return rows, defs


PHASE_TAG_OF = {f: tag for tag, funcs in PHASE_FUNCS.items() for f in funcs}


def _phase_of_func(name: str) -> Tuple[str, Optional[str]]:
    """``(function name, tag)`` for a key of :func:`scan_release`'s defs."""
    if name.startswith("kernel_warmup:"):
        return name.split(":", 1)[1], "kernel_warmup"
    return name, PHASE_TAG_OF.get(name)


def build(cache: Path, versions: Sequence[str]) -> Tuple[List[dict], Dict[str, dict]]:
    """The wording rows and the frame table over ``versions`` (oldest first)."""
    table: Dict[Tuple[str, str, str], dict] = {}
    frames: Dict[str, dict] = {}
    for v in versions:
        rows, defs = scan_release(cache / v)
        for r in rows:
            # the same words raised as one argument and as several print differently
            key = (r["family"], r["level"], r["template"], tuple(r.get("args", ())))
            row = table.setdefault(
                key,
                {
                    "family": r["family"],
                    "level": r["level"],
                    "template": r["template"],
                    "params": r["params"],
                    **({"args": r["args"]} if "args" in r else {}),
                    "releases": [],
                    "sites": {},
                },
            )
            if v not in row["releases"]:
                row["releases"].append(v)
            site = row["sites"].setdefault((r["file"], r["function"]), [])
            if v not in site:
                site.append(v)
        for key, files in defs.items():
            name, tag = _phase_of_func(key)
            if tag is None:
                continue
            entry = frames.setdefault(name, {"phase": tag, "releases": [], "files": []})
            entry["releases"].append(v)
            for f in files:
                if f not in entry["files"]:
                    entry["files"].append(f)
    out = []
    for row in sorted(table.values(), key=lambda r: (r["family"], r["template"], r["level"], r.get("args", []))):
        row["sites"] = [{"file": f, "function": fn, "releases": rel} for (f, fn), rel in sorted(row["sites"].items())]
        out.append(row)
    for entry in frames.values():
        entry["files"].sort()
    return out, dict(sorted(frames.items()))


def log_format(root: Path) -> Dict[str, object]:
    """The record format of one release's logger (``vllm/logger.py`` ``_FORMAT``, with
    ``VLLM_LOGGING_PREFIX`` empty) and whether it prefixes each output line of its worker
    processes itself (``_add_prefix``: ``(NAME pid=N) ``, vllm/utils)."""
    fmt = ""
    logger_py = root / "vllm" / "logger.py"
    if logger_py.exists():
        tree = ast.parse(logger_py.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_FORMAT" for t in node.targets
            ):
                t = Builder(None).variants(node.value)[0]
                fmt = "".join(p[1] for p in t.parts if p[0] == "lit")
    prefixed = False
    candidates = sorted((root / "vllm").glob("utils/*.py")) + [
        root / "vllm" / "utils.py",
        root / "vllm" / "executor" / "multiproc_worker_utils.py",
    ]
    for path in candidates:
        if path.exists() and "def _add_prefix" in path.read_text(encoding="utf-8", errors="replace"):
            prefixed = True
    return {"format": fmt, "process_prefix_on_output": prefixed}


def releases_in(cache: Path) -> List[str]:
    """Release trees fetched completely (``fetch.py`` leaves a ``.complete`` marker)."""
    return sorted((p.name for p in cache.iterdir() if (p / ".complete").exists()), key=version_key)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/vllm"), help="directory of <version>/vllm trees")
    ap.add_argument("--out", type=Path, default=Path("fixtures/wordings"), help="where wordings.jsonl / frames.json go")
    ap.add_argument("versions", nargs="*", help="releases to read (default: every complete tree in --cache)")
    args = ap.parse_args(argv)
    if not args.cache.is_dir():
        print(f"error: no release cache at {args.cache} (run tools/wordings/fetch.py first)", file=sys.stderr)
        return 2
    versions = sorted(args.versions or releases_in(args.cache), key=version_key)
    missing = [v for v in versions if not (args.cache / v / "vllm").is_dir()]
    if missing or not versions:
        print(f"error: no vllm tree for {missing or 'any release'} in {args.cache}", file=sys.stderr)
        return 2
    rows, frames = build(args.cache, versions)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "wordings.jsonl", "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
    meta = {"releases": versions, "functions": frames}
    formats = {v: log_format(args.cache / v) for v in versions}
    with open(args.out / "log_formats.json", "w", encoding="utf-8") as fh:
        json.dump(formats, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    with open(args.out / "frames.json", "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    fams: Dict[str, int] = {}
    for r in rows:
        fams[r["family"]] = fams.get(r["family"], 0) + 1
    print(f"{len(rows)} wordings from {len(versions)} releases ({versions[0]} .. {versions[-1]}): {fams}")
    print(f"{len(frames)} phase functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
