r"""Environment variables the log shows set: what a remedy must not ask for again.

An operator's log often carries the environment the server ran with: a script's ``export``
lines, a command run with ``NAME=VALUE`` before it, ``docker run -e NAME=VALUE``, a compose
or Kubernetes ``NAME: "VALUE"`` / ``- NAME=VALUE`` entry, a Dockerfile's ``ENV``,
``os.environ["NAME"] = "VALUE"``, the ``NAME=VALUE`` listing of ``vllm collect-env``
(``vllm/collect_env.py`` ``get_env_vars``: the ``NCCL``/``CUDA``/``TORCH``/``VLLM``... names
set), and NCCL's own ``NCCL INFO NAME set by environment to VALUE`` (NCCL's ``ncclGetEnv`` /
``NCCL_PARAM`` logging, printed under ``NCCL_DEBUG=INFO``, the value ended by a period); any ``NCCL INFO`` line itself
proves ``NCCL_DEBUG`` at ``INFO`` or finer. Each gives an ``env`` event: ``{"env": {NAME:
VALUE}}`` (the tracker keeps the last value of each name per run, :attr:`Run.env`), marked
``prose`` because an operator's setting is no vLLM output (it proves no phase and opens no
run). A line cut short sets nothing (``NO_CUT``: ``NCCL_DEBUG=IN`` is no value); an ``NCCL INFO``
line cut anywhere after those words still implies the level.

Only names of the families whose variables remedies talk about (:data:`PREFIXES`: NCCL,
vLLM, CUDA, PyTorch, ROCm/HIP, Ascend) are read, with a value the way a shell reads it
(quotes taken off). A line that only *mentions* ``NAME=VALUE`` (PyTorch's OOM message "try
setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation", a remedy
quoted in prose) sets nothing: an assignment counts at the start of a line (a listing or an
``.env`` file: nothing but assignments and a comment on it), before a command word, or after
``export``, ``ENV``, ``env``, ``-e``/``--env``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import regex

from .pattern import NO_CUT, Pattern

#: Name families read (what vllm-doctor's remedies set: NCCL_DEBUG, NCCL_P2P_DISABLE,
#: CUDA_LAUNCH_BLOCKING, PYTORCH_CUDA_ALLOC_CONF, VLLM_*, HIP_LAUNCH_BLOCKING,
#: AMD_SERIALIZE_KERNEL ...; collect_env's own list of prefixes is close to this one).
PREFIXES = ("NCCL_", "VLLM_", "CUDA_", "PYTORCH_", "TORCH_", "HIP_", "AMD_", "HSA_", "ROCM_", "HCCL_", "ASCEND_")
#: The literals one of which a setting's line must hold to be read at all (the pre-filter's gate
#: has room for few: these cover every variable a remedy names).
ANCHORS = ("NCCL_", "VLLM_", "CUDA_", "ALLOC_CONF", "AMD_SERIALIZE", "HIP_LAUNCH")
_NAME = r"(?:" + "|".join(PREFIXES) + r")[A-Z0-9_]+"
#: Any variable's name: a line that sets others too (``HF_TOKEN=... NCCL_P2P_DISABLE=1 vllm``)
#: is read for the names of :data:`PREFIXES` among them (breakit6 item 1).
_ANY = r"[A-Za-z_][A-Za-z0-9_]*"
#: A value as a shell reads it: quoted, or a word (a backslash-escaped character included).
_VALUE = r"(?:\"[^\"\n]*\"|'[^'\n]*'|(?:\\.|[^\s\"';&|#`\\])+)"
_ASSIGN = r"(?P<name>" + _NAME + r")=(?P<value>" + _VALUE + r")"
#: What may follow assignments that prefix a command: the command's first word.
_COMMAND = (
    r"(?:vllm|python[\d.]*|uv|torchrun|docker|podman|ray|accelerate|deepspeed|bash|sh|srun|exec|nohup|env|"
    r"\./\S+|/\S+)(?=\s|$)"
)
_PAIR = regex.compile(r"(?<![\w.\\-])" + _ASSIGN)

_LISTING = (
    # a listing, a .env file, a compose list entry ("- NAME=VALUE", '- "NAME=VALUE"'), systemd's
    # Environment=: assignments alone on the line
    r"^\s*(?:-\s+[\"']?|Environment=[\"']?)?" + _ASSIGN + r"[\"']?\s*(?:#.*)?$"
)
_PREFIXED = (
    # assignments before a command word ("NCCL_DEBUG=INFO vllm serve ...", after "$ " or "sudo")
    r"^\s*(?:[$>]\s+)?(?:sudo\s+)?(?:env\s+)?(?:" + _ANY + r"=" + _VALUE + r"\s+)*?" + _ASSIGN + r"\s+"
    r"(?:" + _ANY + r"=" + _VALUE + r"\s+)*" + _COMMAND
)
_KEYWORD = (
    # export / ENV / setenv / env starting a command (the line's, or after ; && | or a prompt),
    # docker's -e / --env anywhere; a comment line sets nothing, nor prose that quotes one
    r"^(?!\s*#)(?:(?:.*?[;&|(]\s*)?\s*(?:[$>]\s+)?(?:sudo\s+)?(?:export|ENV|setenv|env)\s+"
    r"|.*?\s(?:-e|--env)(?:\s+|=)[\"']?)(?:" + _ANY + r"=" + _VALUE + r"\s+)*" + _ASSIGN
)
_YAML = (
    # a compose or Kubernetes map entry (NAME: "VALUE"), a Ray runtime_env / JSON dict's
    # "NAME": "VALUE"
    r"(?:^\s*(?P<name>" + _NAME + r"):\s+(?P<value>" + _VALUE + r")\s*(?:#.*)?$"
    r"|[\"'](?P<name>" + _NAME + r")[\"']\s*:\s*(?P<value>\"[^\"\n]*\"|'[^'\n]*'|\d+))"
)
_KEYWORD_RX = regex.compile(r"(?:^|[\s;&(])(?:-e|--env)(?:\s+|=)[\"']?" + _ASSIGN)
_EXPORT_LINE = regex.compile(r"^\s*(?:[$>]\s+)?(?:export|ENV|setenv|env)\s")
_PYTHON = (
    r"^(?!\s*#)[^#]*?os\.environ(?:\[\s*|\.setdefault\(\s*)[\"'](?P<name>"
    + _NAME
    + r")[\"']\s*(?:\]\s*=|,)\s*(?P<value>"
    + _VALUE
    + r")"
)
#: NCCL's own record: "host:pid:tid [rank] NCCL INFO ..." (a reporter's words that name "NCCL
#: INFO" are no such record: breakit6 item 4).
_NCCL_RECORD = r"(?:^|\[\d{1,5}\]\s)NCCL INFO "
_NCCL_SET = _NCCL_RECORD + r"(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+?)(?=\.?(?:\s|$))"
_UNSET = (
    # unset A B / export -n A: names taken out of the environment
    r"^\s*(?:[$>]\s+)?(?:unset|export\s+-n)\s+(?P<names>(?:" + _ANY + r"\s*)+)$"
)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return regex.sub(r"\\(.)", r"\1", value)


def _one(m, rec) -> Optional[Dict[str, Any]]:
    return {"env": {m["name"]: _unquote(m["value"])}, "prose": True}


def _prefix(m, rec) -> Optional[Dict[str, Any]]:
    """Every tracked assignment before the command word (``A=1 B=2 vllm serve``)."""
    found = {p["name"]: _unquote(p["value"]) for p in _PAIR.finditer(m.string, 0, m.end())}
    return {"env": found, "prose": True} if found else None


def _keyword(m, rec) -> Optional[Dict[str, Any]]:
    """Every assignment a keyword sets (``-e A=1 -e B=2``), and all of an ``export A=1 B=2``."""
    if _EXPORT_LINE.match(m.string):
        found = {p["name"]: _unquote(p["value"]) for p in _PAIR.finditer(m.string)}
    else:
        found = {k["name"]: _unquote(k["value"]) for k in _KEYWORD_RX.finditer(m.string)}
        found.setdefault(m["name"], _unquote(m["value"]))
    return {"env": found, "prose": True} if found else None


def _unset(m, rec) -> Optional[Dict[str, Any]]:
    names = [n for n in m["names"].split() if n.startswith(PREFIXES)]
    return {"unset": names, "env": {}, "prose": True} if names else None


def _nccl_debug(m, rec) -> Optional[Dict[str, Any]]:
    """``implied``: a value the tracker keeps only where no line set the name."""
    return {"env": {"NCCL_DEBUG": "INFO"}, "prose": True, "implied": True}


PATTERNS = [
    Pattern(
        "env_unset",
        "env",
        ANCHORS,
        _UNSET,
        "a shell's unset / export -n",
        None,
        _unset,
        NO_CUT,
    ),
    Pattern(
        "env_listing",
        "env",
        ANCHORS,
        _LISTING,
        "an operator's .env file or listing; vllm/collect_env.py get_env_vars",
        None,
        _one,
        NO_CUT,
    ),
    Pattern(
        "env_command_prefix",
        "env",
        ANCHORS,
        _PREFIXED,
        "the operator's launch command (NAME=VALUE vllm serve ...)",
        None,
        _prefix,
        NO_CUT,
    ),
    Pattern(
        "env_keyword",
        "env",
        ANCHORS,
        _KEYWORD,
        "a shell export, a Dockerfile ENV, docker run -e / --env",
        None,
        _keyword,
        NO_CUT,
    ),
    Pattern(
        "env_yaml",
        "env",
        ANCHORS,
        _YAML,
        "a compose file's environment map or a Kubernetes manifest",
        None,
        _one,
        NO_CUT,
    ),
    Pattern(
        "env_python",
        "env",
        ANCHORS,
        _PYTHON,
        "a script's os.environ assignment",
        None,
        _one,
        NO_CUT,
    ),
    Pattern(
        "env_nccl_set",
        "env",
        ("NCCL INFO",),
        _NCCL_SET,
        "NCCL's parameter logging (NCCL_DEBUG=INFO): NAME set by environment to VALUE",
        None,
        _one,
        NO_CUT,
    ),
    Pattern(
        "env_nccl_info",
        "env",
        ("NCCL INFO",),
        _NCCL_RECORD,
        "NCCL prints INFO lines only under NCCL_DEBUG=INFO (or TRACE)",
        None,
        _nccl_debug,
    ),
]
