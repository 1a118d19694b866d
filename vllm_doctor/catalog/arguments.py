"""The launch command refused by the argument parser: ``vllm serve: error: ...``.

vLLM's command line is Python's ``argparse`` (``FlexibleArgumentParser``,
``vllm/utils/argparse_utils.py`` in 0.10-0.33, ``vllm/utils.py`` before): a flag it does not
know, a value it cannot read or a missing argument ends the process before anything is loaded,
with the usage line and one message on stderr, exit code 2::

    usage: vllm serve [model_tag] [options]
    vllm serve: error: unrecognized arguments: --max-modle-len 8192

The program's name before ``: error:`` is ``vllm serve`` (``vllm/entrypoints/cli/serve.py``),
``vllm`` for the command itself (``vllm server``: "argument subparser: invalid choice") or
``api_server.py`` (``python -m vllm.entrypoints.openai.api_server``, whose name argparse takes
from the script). The messages are argparse's own (CPython ``Lib/argparse.py``, 3.8-3.13):

- ``unrecognized arguments: A B ...`` (``parse_args``): a misspelt flag, one newer than the
  release, one the release removed (``--swap-space`` after 0.17), or a value a shell line break
  left alone; vLLM 0.33 adds a hint after ``--task`` (``FlexibleArgumentParser.error``);
- ``argument --X/-x: invalid choice: 'v' (choose from 'a', 'b', ...)``;
- ``argument --X: invalid T value: 'v'`` (a value of the wrong type: ``int``, ``float``,
  vLLM's ``human_readable_int``, ``optional_type``, ...);
- ``argument --X: expected one argument`` (and "at least one", "at most one", "N arguments"):
  the flag ended the line, or an empty shell variable left it without its value;
- ``the following arguments are required: A, B``;
- ``ambiguous option: --X could match --A, --B``;
- ``argument --X: not allowed with argument --Y``.

Events are ``cli_error`` with ``{prog, message, form, argument, value, choices, flags}`` (each
where printed): ``form`` is ``unrecognized``, ``invalid_choice``, ``invalid_value``,
``missing_value``, ``required``, ``ambiguous``, ``conflict`` or ``switch_value`` (none for another
message); ``flags`` are the
unrecognised flags (tokens that start with ``-``), ``choices`` the allowed values.
"""

from __future__ import annotations

from typing import Any, Dict, List

import regex

from ..events import Phase
from .pattern import NO_CUT, Pattern

#: The argparse messages, in the order tried (CPython Lib/argparse.py).
_FORMS = (
    ("unrecognized", regex.compile(r"unrecognized arguments: (?P<rest>.*)")),
    (
        "invalid_choice",
        regex.compile(
            r"argument (?P<arg>[^:]+): invalid choice: (?P<value>'[^']*'|\S+)(?: \(choose from (?P<choices>[^)]*)\))?"
        ),
    ),
    ("invalid_value", regex.compile(r"argument (?P<arg>[^:]+): invalid (?P<type>[\w<>. ]+?) value: (?P<value>.*)")),
    ("missing_value", regex.compile(r"argument (?P<arg>[^:]+): expected (?P<n>one|at least one|at most one|\d+) arg")),
    ("required", regex.compile(r"the following arguments are required: (?P<rest>.*)")),
    ("ambiguous", regex.compile(r"ambiguous option: (?P<arg>\S+) could match (?P<choices>.*)")),
    ("conflict", regex.compile(r"argument (?P<arg>[^:]+): not allowed with argument (?P<value>.*)")),
    # a switch given a value with "=" (store_true / BooleanOptionalAction take none)
    ("switch_value", regex.compile(r"argument (?P<arg>[^:]+): ignored explicit argument (?P<value>.*)")),
)
#: Where a message glued to the lines after it ends: the next usage line, the next refusal, a
#: compose status line ("vllm-1 exited with code 2", its name glued onto the last word when a
#: paste lost the newline: breakit5 item 9).
_GLUED_END = regex.compile(
    r"\s*(?:\busage: |(?<![\w.-])(?:vllm serve|vllm|api_server\.py): error: |(?<![a-z])[a-z][\w.]*-\d+ exited with code )"
)
#: Characters of a refused flag kept (a pasted blob is no flag: breakit5 item 11).
MAX_FLAG_CHARS = 80


def _words(text: str) -> List[str]:
    """``'awq', 'gptq'`` or ``--a, --b`` -> ``['awq', 'gptq']`` / ``['--a', '--b']``."""
    return [w.strip().strip("'\"") for w in text.split(",") if w.strip().strip("'\"")]


def _first_flag(arg: str) -> str:
    """``--quantization/-q`` -> ``--quantization``: argparse joins an option's spellings with /."""
    names = [a for a in arg.strip().split("/") if a]
    return next((a for a in names if a.startswith("--")), names[0] if names else arg.strip())


def read_message(message: str) -> Dict[str, Any]:
    """What one argparse message says: ``{form, argument, value, choices, flags, hint}``, each
    where the message has it (see the module's docstring; no ``form`` for a message argparse's
    wordings do not hold). Never raises."""
    text = message.strip()
    hint = None
    if "Hint:" in text:
        text, _, hint = text.partition("Hint:")
        text, hint = text.strip(), hint.strip()
    data: Dict[str, Any] = {}
    if hint:
        data["hint"] = hint[:300]
    for form, rx in _FORMS:
        m = rx.match(text)
        if m is None:
            continue
        data["form"] = form
        groups = m.groupdict()
        if groups.get("arg"):
            data["argument"] = _first_flag(groups["arg"])
        if groups.get("value"):
            data["value"] = groups["value"].strip().strip("'\"")[:120]
        if groups.get("type"):
            data["value_type"] = groups["type"].strip()
        if groups.get("choices"):
            data["choices"] = _words(groups["choices"])[:40]
        if form == "unrecognized":
            tokens = groups["rest"].split()
            # "--" alone is no flag (argparse's end of options; here a word inside a value)
            flags = [t.split("=", 1)[0] for t in tokens if t.startswith("-") and t.strip("-")]
            data["flags"] = [f if len(f) <= MAX_FLAG_CHARS else f[:MAX_FLAG_CHARS] + "\u2026" for f in flags][:10]
            data["arguments"] = clip_words(groups["rest"].strip(), 300)
        elif form == "required":
            data["choices"] = _words(groups["rest"])[:10]
        break
    return data


def clip_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a space, with "…" where it was cut: a
    token is kept whole or left out, so a secret is never shown in part (redaction, which runs
    on the verdict, cannot recognise half of one: breakit5 item 1)."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return (text[:cut] if cut > 0 else "") + "\u2026"


def _build(m, rec) -> Dict[str, Any]:
    message = (m["msg"] or "").strip()
    glued = _GLUED_END.search(message)
    if glued is not None and glued.start() > 0:
        message = message[: glued.start()]
    data = {"prog": m["prog"], "message": clip_words(message, 400)}
    data.update(read_message(message))
    return data


PATTERNS = [
    Pattern(
        "argparse_error",
        "cli_error",
        ("serve: error: ", "vllm: error: ", "api_server.py: error: "),
        # the server's programs only (another script's "x_api_server.py", a client's "vllm bench
        # serve" are not the server refusing its command: breakit5 item 2), where argparse puts
        # its message: at the start of the line, or after the usage line it glued onto
        r"(?:^|(?<=\[options\]|\.\.\.|\]))(?P<prog>vllm serve|vllm|api_server\.py): error: (?P<msg>\S.*)",
        "CPython Lib/argparse.py ArgumentParser.error via vLLM's FlexibleArgumentParser "
        "(vllm/utils/argparse_utils.py 0.10-0.33; vllm/utils.py before)",
        Phase.CONFIG,
        _build,
        # free text to the end of the line: a record cut inside the message still matches whole,
        # and one cut before it has said nothing yet
        cut_from=NO_CUT,
    ),
]
