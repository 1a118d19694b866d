r"""Server start markers and configuration lines.

Sources (``shared/vllm-messages.md`` section 9):

* ``vllm/entrypoints/openai/api_server.py``: ``vLLM API server version %s``,
  ``args: %s`` (an argparse Namespace, up to about v0.9);
* ``vllm/entrypoints/utils.py``: ``non-default args: %s`` (a dict, v0.10+);
* ``vllm/v1/engine/core.py`` / ``vllm/engine/llm_engine.py``: ``Initializing a V1 LLM
  engine (v%s) with config: %s``, ``Initializing a V0 LLM engine ...``, ``Initializing an
  LLM engine (v%s) with config:``, oldest ``Initializing an LLM engine with config:``;
  the config string is ``VllmConfig.__str__`` (``max_seq_len=`` is ``max_model_len``);
* ``vllm/config`` ``Using max model len %s``; ``vllm/config/scheduler.py`` ``Chunked
  prefill is enabled with max_num_batched_tokens=%d.``;
* ``vllm/distributed/parallel_state.py``: ``rank %d in world size %d is assigned as DP
  rank %d, PP rank %d, TP rank %d``;
* ``vllm/worker/model_runner.py`` / ``vllm/v1/worker/gpu_model_runner.py``: ``Starting to
  load model %s...``.

And the operator's own launch command when it is pasted or echoed beside the log (a bug
report, a container entrypoint that echoes its command, ``set -x``): ``vllm serve MODEL
--flag value ...``, ``python -m vllm.entrypoints.openai.api_server --model M ...``, a
``docker run ... vllm/vllm-openai ...`` line, the offline ``LLM(model=..., ...)`` call, or
the ``EngineArgs(...)`` / ``AsyncEngineArgs(...)`` repr that code handing them to vLLM prints
(Ray Serve's vLLM example: ``Starting with engine args: AsyncEngineArgs(...)``).
Its flags are read with vLLM's own spellings and short aliases
(``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args``: ``-tp``, ``-pp``, ``-dp``,
``-q``), sizes like ``32k`` as vLLM reads them (``vllm/utils/argparse_utils.py``
``human_readable_int``), and a shell command continued over several lines (`` \``) is
joined back by :mod:`vllm_doctor.reassemble`. vLLM's own printout of its arguments wins
over the command where both give a value (:meth:`vllm_doctor.tracker.SourceTracker._on_config`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import regex

from ..events import Phase
from ..units import MAX_GIB, to_float, to_int
from .pattern import Pattern, convert

#: Keys read from ``non-default args``, ``args: Namespace(...)`` and the engine config line.
CONFIG_KEYS = (
    "model",
    "served_model_name",
    "max_model_len",
    "max_seq_len",
    "gpu_memory_utilization",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "quantization",
    "kv_cache_dtype",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enforce_eager",
    "dtype",
    "block_size",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "cpu_offload_gb",
    "swap_space",
    "max_logprobs",
    "limit_mm_per_prompt",
    "disable_log_stats",
    "api_server_count",
    "scheduler_reserve_full_isl",
    "enable_lora",
    "max_loras",
)
_KEYS = "|".join(CONFIG_KEYS)
# An unquoted value is whole once what follows it is there (", ", "}", ")"): these lines never end
# with one, so a value the end of a cut line runs into is not read ("dtype=t" of "dtype=torch...").
_DICT_ITEM = regex.compile(r"'(?P<k>" + _KEYS + r")': (?P<v>'[^']*'|\"[^\"]*\"|[\w.+-]+(?=[^\w.+-]))")
# Values in the engine config line are unquoted for some keys (served_model_name=Qwen/Qwen3-8B).
_KWARG_ITEM = regex.compile(r"(?<![\w.])(?P<k>" + _KEYS + r")=(?P<v>'[^']*'|\"[^\"]*\"|[\w.+/:-]+(?=[^\w.+/:-]))")


#: Config keys that are switches; anything but True/False is dropped.
BOOL_KEYS = frozenset(
    {
        "enforce_eager",
        "enable_prefix_caching",
        "enable_chunked_prefill",
        "disable_log_stats",
        "scheduler_reserve_full_isl",
        "enable_lora",
    }
)
#: Config keys that hold a size in GiB as a plain number (``--cpu-offload-gb``, ``--swap-space``).
GIB_KEYS = frozenset({"cpu_offload_gb", "swap_space"})
#: Config keys that hold a count (besides the catalog's INT_FIELDS).
COUNT_KEYS = frozenset({"max_logprobs", "api_server_count", "max_loras"})
#: Config keys kept as text (names, dtypes, methods).
TEXT_KEYS = frozenset({"model", "served_model_name", "quantization", "kv_cache_dtype", "dtype", "limit_mm_per_prompt"})


def _value(key: str, raw: str) -> Any:
    """One config value, typed by its key; None when it is unset or does not parse.

    A value that is not of its key's type (``max_seq_len=4k``, ``gpu_memory_utilization=inf``,
    ``enforce_eager=maybe``) is dropped rather than kept as text: the rules do arithmetic
    on numbers, and a string where a number is expected would cost the whole verdict."""
    raw = raw.strip("'\"")
    if raw in ("None", ""):
        return None
    if key in BOOL_KEYS:
        return {"True": True, "False": False}.get(raw)
    if key in TEXT_KEYS:
        return raw
    try:
        if key in GIB_KEYS:
            value = to_float(raw)
            return value if 0 <= value <= MAX_GIB else None
        if key in COUNT_KEYS:
            return to_int(raw)
        value = convert(key, raw)
    except ValueError:
        return None
    if isinstance(value, str) and key not in TEXT_KEYS:
        return None  # a key convert() does not type: never let text stand in for a number
    return value


def _items(rx: "regex.Pattern", text: str) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for m in rx.finditer(text, timeout=0.25):
        key = "max_model_len" if m["k"] == "max_seq_len" else m["k"]
        val = _value(key, m["v"])
        if val is not None and key not in out:
            out[key] = val
    return out


def _non_default(m, rec) -> Optional[Dict[str, Any]]:
    return _items(_DICT_ITEM, m.string[m.end() :]) or None


def _namespace(m, rec) -> Optional[Dict[str, Any]]:
    return _items(_KWARG_ITEM, m.string[m.end() :]) or None


def _engine_config(m, rec) -> Dict[str, Any]:
    data = _items(_KWARG_ITEM, m.string[m.end() :])
    if m["version"]:
        data["vllm_version"] = m["version"]
    if m["gen"]:
        data["engine"] = m["gen"].lower()
    return data


#: vLLM's short aliases of its long flags (``vllm/engine/arg_utils.py``).
SHORT_FLAGS = {
    "tp": "tensor_parallel_size",
    "pp": "pipeline_parallel_size",
    "dp": "data_parallel_size",
    "q": "quantization",
}
#: Flags that take a size as vLLM's ``human_readable_int`` reads it (``32k`` = 32000, ``32K`` = 32768).
HUMAN_INT_KEYS = frozenset({"max_model_len", "max_num_batched_tokens", "max_num_seqs"})
_FLAG = regex.compile(r"(?<!\S)--?(?P<name>[A-Za-z][\w-]*)(?:=(?P<eq>[^\s`]*)|[ \t]+(?P<sp>(?!-)[^\s\\`]+))?")
_HUMAN_INT = regex.compile(r"(?P<n>[0-9]{1,12}(?:\.[0-9]{1,6})?)(?P<s>[kKmMgG])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30}


def _human_int(raw: str) -> Optional[int]:
    """``32k`` -> 32000, ``32K`` -> 32768 (vLLM's ``human_readable_int``; decimals only with
    the decimal suffixes), None when ``raw`` is not of that shape."""
    m = _HUMAN_INT.fullmatch(raw.strip("'\""))
    if m is None:
        return None
    n, s = m["n"], m["s"]
    if s in _DECIMAL:
        return int(float(n) * _DECIMAL[s])
    return int(n) * _BINARY[s] if "." not in n else None


def command_flags(text: str) -> Dict[str, Any]:
    """The known configuration flags of one launch command (``--gpu-memory-utilization 0.6``,
    ``--max-model-len=32k``, ``-tp 2``, ``--enforce-eager``, ``--no-enable-prefix-caching``),
    typed as the catalog types config values; unknown flags and values that do not parse are
    left out. A switch never takes the next word (argparse's ``store_true``)."""
    out: Dict[str, Any] = {}
    for m in _FLAG.finditer(text, timeout=0.25):
        name = m["name"].replace("-", "_")
        key = SHORT_FLAGS.get(name, name) if len(m["name"]) <= 3 and "-" not in m["name"] else name
        negated = key.startswith("no_") and key[3:] in BOOL_KEYS
        if negated or key in BOOL_KEYS:
            key = key[3:] if negated else key
            raw = m["eq"]
            val = (not negated) if raw is None else _value(key, raw.capitalize())
        else:
            if key not in CONFIG_KEYS:
                continue
            raw = m["eq"] if m["eq"] is not None else m["sp"]
            if raw is None:
                continue
            val = _human_int(raw) if key in HUMAN_INT_KEYS else None
            val = val if val is not None else _value("max_model_len" if key == "max_seq_len" else key, raw)
        if val is not None and key not in out:
            out["max_model_len" if key == "max_seq_len" else key] = val
    return out


#: The release in the image's tag (``vllm/vllm-openai:v0.20.1``, ``vllm-openai:0.9.2``): the
#: server's version where nothing else prints it (an image's tag names the vLLM release it holds;
#: ``latest``, ``nightly`` and digests name none).
_IMAGE_RELEASE = regex.compile(r"\bvllm/vllm-openai(?:-\w+)?:v?(?P<v>\d+\.\d+(?:\.\d+)?(?:\.post\d+|rc\d+)?)\b")
_SERVE_MODEL = regex.compile(r"\bvllm serve[ \t]+(?P<model>(?![-\[<])[^\s\\'\"`]+)")


def _launch_command(m, rec) -> Optional[Dict[str, Any]]:
    text = m.string
    data = command_flags(text[m.start() :])
    if "model" not in data:
        serve = _SERVE_MODEL.search(text)
        if serve:
            data["model"] = serve["model"]
    image = _IMAGE_RELEASE.search(text)
    if image:
        data["vllm_version"] = image["v"]
    data["launch_command"] = True  # the command is there, even with no flag read from it
    return data


#: An unquoted keyword value in Python code that is a name, not a literal (``model=model_path``,
#: ``model=args.model``): a variable whose value the code does not show (hunt7 q12). Dotted
#: ``torch.`` dtypes are values.
_PY_NAME = regex.compile(r"(?!(?:True|False|None|torch\.)\b)[A-Za-z_][\w.]*")


def _offline_llm(m, rec) -> Optional[Dict[str, Any]]:
    text = m.string[m.end() :]
    names = {k for k in TEXT_KEYS for i in _KWARG_ITEM.finditer(text) if i["k"] == k and _PY_NAME.fullmatch(i["v"])}
    data = {k: v for k, v in _items(_KWARG_ITEM, text).items() if k not in names}
    data["launch_command"] = True  # the call is there, even with no keyword read from it
    return data


def _engine_args(m, rec) -> Optional[Dict[str, Any]]:
    data = _items(_KWARG_ITEM, m.string[m.end() :])
    # What was passed to the engine, printed by the operator's code or a framework (Ray Serve's
    # vLLM example, an integration): as the operator's command, vLLM's own printout of what it
    # resolved wins where both give a value (max_model_len=None here is "the model's", resolved
    # later), so it is marked as the command is (tracker.SourceTracker._on_config).
    data["launch_command"] = True
    return data


def _world(m, rec) -> Dict[str, Any]:
    # The parallel world is TP x PP of one engine: world size 1 means TP 1 and PP 1.
    if not m["world_size"]:
        return {}  # the line cut before its world size
    if m["world_size"] == "1":
        return {"world_size": 1, "tensor_parallel_size": 1, "pipeline_parallel_size": 1}
    return {"world_size": int(m["world_size"])}


PATTERNS = [
    Pattern(
        "api_server_version",
        "run_start",
        ("vLLM API server version",),
        r"vLLM API server version (?P<vllm_version>\S+)",
        "vllm/entrypoints/openai/api_server.py run_server",
        Phase.CONFIG,
    ),
    Pattern(
        "server_version",
        "run_start",
        ("vLLM server version",),
        r"vLLM server version (?P<vllm_version>\S+?),? serving model (?P<model>\S+)",
        "vllm/entrypoints/serve/utils/api_utils.py log_version_and_model (v0.25+; VLLM_DISABLE_LOG_LOGO)",
        Phase.CONFIG,
    ),
    # The logo (v0.15+) prints "version %s" and "model   %s" beside its last block letters. A
    # blog, a chat or a terminal copy collapses its runs of spaces (p28: "█ version 0.19.0"),
    # or turns them into no-break spaces: the tails are read whatever spaces precede them.
    Pattern(
        "server_version_logo",
        "run_start",
        # "  version " also where the colour formatter puts an escape code between the letters and it
        ("  version ", "\u2588 version ", "\u2588\u00a0"),
        r"\u2588[ \t\u00a0]+version[ \t\u00a0]+(?P<vllm_version>\d[\w.+-]*)\s*$",
        "vllm/entrypoints/utils.py (v0.15-v0.22), serve/utils/api_utils.py (v0.23-v0.32), common/startup.py "
        "(v0.33) log_version_and_model: the logo with 'version X' beside it",
        Phase.CONFIG,
        cut_from=r"\u2588[ \t\u00a0]+version[ \t\u00a0]+\d",
    ),
    Pattern(
        "server_model_logo",
        "config",
        ("  model   ", "\u2588 model ", "\u2588\u00a0"),
        r"\u2588[ \t\u00a0]+model[ \t\u00a0]+(?P<model>\S+)\s*$",
        "the same logo's 'model   %s' line",
        Phase.CONFIG,
        cut_from=r"\u2588[ \t\u00a0]+model[ \t\u00a0]+\S",
    ),
    Pattern(
        "non_default_args",
        "config",
        ("non-default args:",),
        r"non-default args: ",
        "vllm/entrypoints/utils.py log_non_default_args",
        Phase.CONFIG,
        _non_default,
    ),
    Pattern(
        "args_namespace",
        "config",
        ("args: Namespace(",),
        r"^args: Namespace\(",
        "vllm/entrypoints/openai/api_server.py (<= v0.9)",
        Phase.CONFIG,
        _namespace,
    ),
    Pattern(
        "engine_config",
        "run_start",
        ("LLM engine", "with config:"),
        r"Initializing an? (?:(?P<gen>V[01]) )?LLM engine (?:\(v(?P<version>[^)\s]+)\) )?with config: ",
        "vllm/v1/engine/core.py EngineCore.__init__; vllm/engine/llm_engine.py",
        Phase.CONFIG,
        _engine_config,
    ),
    Pattern(
        "using_max_model_len",
        "config",
        ("Using max model len",),
        r"Using max model len (?P<max_model_len>\d+)",
        "vllm/config/model.py",
        Phase.CONFIG,
    ),
    Pattern(
        "chunked_prefill_budget",
        "config",
        ("Chunked prefill is enabled with",),
        r"Chunked prefill is enabled with max_num_batched_tokens=(?P<max_num_batched_tokens>\d+)\.",
        "vllm/config/scheduler.py SchedulerConfig.__post_init__",
        Phase.CONFIG,
    ),
    Pattern(
        "parallel_world",
        "config",
        ("in world size",),
        r"rank \d+ in world size (?P<world_size>\d+) is assigned as",
        "vllm/distributed/parallel_state.py initialize_model_parallel",
        Phase.CONFIG,
        _world,
    ),
    Pattern(
        "launch_command",
        "config",
        ("vllm serve", "-m vllm.entrypoints", "vllm/vllm-openai"),
        # "vllm server" (a paste's typo, m09) only before a flag: in prose it is the server;
        # argparse's own lines ("usage: vllm serve [model_tag] ...", <model_tag> before 0.7,
        # "vllm serve: error: ...",
        # catalog/arguments.py) name the program, not a command
        r"(?<!usage: )\bvllm serve\b(?!:| [\[<]model_tag[\]>])|\bvllm server\b(?=[^\n]*\s--[a-z])|-m vllm\.entrypoints\.(?:openai\.)?api_server\b|\bvllm/vllm-openai\b",
        "vllm/entrypoints/cli/serve.py, vllm/entrypoints/openai/api_server.py (the operator's command)",
        None,
        _launch_command,
        # a cut line is a command only with the command itself in it: "vllm server" cut before
        # its flags may be prose
        cut_from=r"\bvllm serve\b|-m vllm\.entrypoints|\bvllm/vllm-openai\b",
    ),
    Pattern(
        "offline_llm_call",
        "config",
        ("LLM(",),
        r"(?<![\w.])LLM\((?=[^)]*\b(?:model|gpu_memory_utilization|max_model_len)=)",
        "vllm/entrypoints/llm.py LLM.__init__ (the operator's offline call)",
        None,
        _offline_llm,
        cut_from=r"(?<![\w.])LLM\([^)]*\b(?:model|gpu_memory_utilization|max_model_len)=",
    ),
    Pattern(
        "engine_args_repr",
        "config",
        ("EngineArgs(",),
        # the dataclass's repr, every field as key=value ("AsyncEngineArgs(model='m', ...,
        # gpu_memory_utilization=0.9, ...)"); a class named like it (MyEngineArgs) is not it
        r"(?<![\w.])(?:Async)?EngineArgs\((?=\w+=)",
        "vllm/engine/arg_utils.py EngineArgs / AsyncEngineArgs (dataclass repr, printed by the operator's "
        "code or a framework: what was passed to the engine)",
        None,
        _engine_args,
        cut_from=r"(?<![\w.])(?:Async)?EngineArgs\(\w+=",
    ),
    Pattern(
        "starting_to_load",
        "config",
        ("Starting to load model",),
        r"Starting to load model (?P<model>\S+?)\.\.\.",
        "vllm/worker/model_runner.py, vllm/v1/worker/gpu_model_runner.py load_model",
        Phase.LOADING_WEIGHTS,
    ),
]
