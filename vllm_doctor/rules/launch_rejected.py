"""The launch command refused by vLLM's argument parser (a VD900 finding of rules/other.py).

What it means:
    ``vllm serve`` stopped before it loaded anything: argparse could not read the command line
    (catalog/arguments.py: ``vllm serve: error: unrecognized arguments: --max-modle-len 8192``).
    Nothing ran, so nothing about memory is known; the fix is the command itself.

Why it happens:
    A misspelt flag; a flag newer than the installed release, or one a later release removed
    (``--swap-space`` is gone after 0.17; ``--disable-log-requests`` after 0.16; ``--task``
    after 0.12); a value argparse cannot read (``--max-model-len 32K`` before releases that read
    sizes, a word where a number goes); a flag left without its value because a shell variable
    was empty or a line break was not escaped; a value outside the allowed choices.

Remedies, in order:
    The flag named, with what to use instead: the nearest flag ``vllm serve`` knows (from the
    flags of every release, vllm_doctor/serve_flags.py, generated from vLLM's own parsers); the
    release range a flag exists in, when it is newer or older than the server; the allowed
    choices; the value the flag needs. Then ``vllm serve --help`` of the installed release.

What does not help:
    Memory settings: nothing was allocated.

Sources:
    CPython ``Lib/argparse.py`` (the messages); vllm/utils/argparse_utils.py
    ``FlexibleArgumentParser`` (vLLM's parser, its ``--task`` hint); vllm/engine/arg_utils.py
    and vllm/entrypoints/openai/cli_args.py (the flags, by release: tools/serve_flags.py).
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence

import regex

from .. import serve_flags, thresholds
from ..defaults import parse_version
from ..limits import MAX_FLAG_REMEDIES
from ..run import Failure, Run
from ..verdict import Remedy
from .rule import merged_data, remedy


def known_as(flag: str) -> str:
    """The spelling :data:`serve_flags.FLAGS` holds ``flag`` under: underscores as dashes (vLLM's
    parser reads ``--max_num_seqs`` as ``--max-num-seqs``, every release: FlexibleArgumentParser
    .parse_args) and ``--no-X`` as ``--X`` (its boolean flags take both: ``BooleanOptionalAction``)."""
    base = flag.replace("_", "-") if flag.startswith("--") else flag
    return "--" + base[5:] if base.startswith("--no-") else base


def nearest_flag(flag: str) -> Optional[str]:
    """The flag of any release most like ``flag`` (a misspelling: at least
    :data:`thresholds.CLOSE_FLAG_RATIO` alike), or None when ``flag`` is one (:func:`known_as`)
    or nothing is that close."""
    base = known_as(flag)
    if base in serve_flags.FLAGS:
        return None
    close = difflib.get_close_matches(base, list(serve_flags.FLAGS), n=1, cutoff=thresholds.CLOSE_FLAG_RATIO)
    return close[0] if close else None


def _span(key: str) -> str:
    """The releases a flag (a key of :data:`serve_flags.FLAGS`) is in, in words."""
    first, last = serve_flags.FLAGS[key]
    if last == serve_flags.NEWEST:
        return f"from vLLM {first} on" if first != serve_flags.RELEASES[0] else f"in every release since {first}"
    return f"in vLLM {first} to {last}"


def flag_remedy(flag: str, version: Optional[str], value: Optional[str] = None) -> Remedy:
    """What to do about one flag the parser did not know: its spelling, its release range,
    or the flag and its value passed as one argument. ``version``: the server's release where
    the log prints it; ``value``: the word after the flag in the refused arguments."""
    plain = value is not None and regex.fullmatch(r"[\w.:/@+,<>-]{1,60}", value) is not None
    given = f"{flag}={value}" if plain else f"{flag}=VALUE"
    key = known_as(flag)
    span = serve_flags.FLAGS.get(key)
    if span is not None:
        first, last = span
        releases = serve_flags.RELEASES
        if last != serve_flags.NEWEST:
            after = releases[releases.index(last) + 1]
            return remedy(
                f"Drop {flag}: vLLM removed it (it is {_span(key)}, not in {after}); check the release notes "
                "for what replaced it",
                None,
                "the server's parser does not know it, and the flag was last in an older release",
            )
        older = parse_version(version) is not None and parse_version(version) < parse_version(first)
        if older:
            return remedy(
                f"{flag} is too new for vLLM {version}: it exists {_span(key)}; upgrade vLLM, or drop it",
                None,
                "the server's parser does not know it",
            )
        if flag.startswith("--no-"):
            return remedy(
                f"Drop {flag}, or check that the installed release's `vllm serve --help` lists it: the --no- "
                f"spelling is the off switch of {key} only where the parser makes one",
                None,
                f"{key} exists {_span(key)}, but the parser refused its off switch",
            )
        if value is not None and (first == releases[0] or version is not None):
            return remedy(
                f"Pass {flag} and its value as two arguments, or as {given}: the parser most likely got them as one "
                'word (a YAML list item "- --flag value", a subprocess list element "--flag value", a quoted "$ARGS")',
                None,
                f"{flag} is a flag of this release ({_span(key)}): a flag glued to its value is what the parser refuses",
            )
        if value is None:
            return remedy(
                f"{flag} exists {_span(key)}: the installed release is likely older; upgrade vLLM, or drop it",
                None,
                "the server's parser does not know it; the log does not print the release",
            )
        return remedy(
            f"{flag} exists {_span(key)}: on an older release, upgrade vLLM or drop it; on a newer one, pass the "
            f"flag and its value as two arguments, or as {given} (one word such as a YAML list item "
            '"- --flag value" is refused)',
            None,
            "the server's parser does not know it; the log does not print the release",
        )
    near = nearest_flag(flag)
    if near is not None:
        # no remedy flag: the plan's settings are what a run had in force, and this one never ran
        return remedy(
            f"Replace {flag} with {near}" + (f" ({near} {value})" if value else "") + ": a misspelt flag",
            None,
            f"{flag} is no flag of any vLLM release; {near} is the nearest one",
        )
    return remedy(
        f"Drop {flag}, or check its spelling against `vllm serve --help` of the installed release (a plugin's "
        "flag needs the plugin installed)",
        None,
        "no vLLM release has this flag",
    )


#: Words that, first among the refused arguments, show the container's entrypoint already runs the
#: server and was given a second command (the vllm/vllm-openai image's ENTRYPOINT is the server:
#: ``python3 -m vllm.entrypoints.openai.api_server``, later ``vllm serve``).
_SERVE_WORDS = frozenset({"vllm", "serve"})
_SHELL_WORDS = frozenset({"/bin/bash", "/bin/sh", "bash", "sh", "python", "python3", "-c"})


def stray_remedy(prog: str, words: Sequence[str]) -> Remedy:
    """The refused arguments start with a word that is no flag: a second command, a shell, or
    the model given bare to an entrypoint that takes ``--model``."""
    head = words[0]
    if head in _SERVE_WORDS:
        return remedy(
            f"Drop '{' '.join(words[:2]) if words[:2] == ['vllm', 'serve'] else head}' from the container's "
            "command: the image's entrypoint already runs the server, so pass the model and the flags only "
            "(docker run IMAGE MODEL --flag value; compose command: [MODEL, --flag, value])",
            None,
            f"{prog} got '{head}' as an argument of its own",
        )
    if head in _SHELL_WORDS or head.startswith("/bin/"):
        return remedy(
            "Override the image's entrypoint to run a shell (docker run --entrypoint /bin/bash ...; in Kubernetes "
            "the container's command, not its args): the entrypoint runs the server and took the shell command as "
            "its arguments",
            None,
            f"{prog} got '{head}' as an argument",
        )
    if prog.endswith("api_server.py"):
        return remedy(
            f"Give the model as --model {head}: this entrypoint (python -m vllm.entrypoints.openai.api_server) takes "
            "no bare model name, unlike `vllm serve MODEL`",
            None,
            f"{prog} got '{head}' with no flag before it",
        )
    return remedy(
        f"Remove the stray words '{' '.join(words)[:120]}' from the command: a value without its flag, often a "
        "line break the shell did not join (a missing '\\' at a line's end) or a value with an unquoted space",
        None,
        "argparse found words that belong to no flag",
    )


def value_after(words: Sequence[str], flag: str) -> Optional[str]:
    """The value given to ``flag`` among the refused ``words``: ``--flag=V`` or the word after
    it when that is no flag; None otherwise."""
    for i, w in enumerate(words):
        if w.startswith(flag + "="):
            return w.split("=", 1)[1] or None
        if w == flag and i + 1 < len(words) and not words[i + 1].startswith("-"):
            return words[i + 1]
    return None


def remedies(run: Run, failures: Sequence[Failure]) -> List[Optional[Remedy]]:
    """The remedies for a refused launch command, by what argparse said (catalog/arguments.py
    ``form``), most specific first."""
    d = merged_data(failures)
    form, arg = d.get("form"), d.get("argument")
    version = run.value("vllm_version")
    out: List[Optional[Remedy]] = []
    if form == "unrecognized":
        flags = d.get("flags") or []
        words = str(d.get("arguments", "")).split()
        second_command = bool(words) and (words[0] in _SERVE_WORDS | _SHELL_WORDS or words[0].startswith("/bin/"))
        if words and not words[0].startswith("-"):
            out.append(stray_remedy(str(d.get("prog", "vllm")), words))
        if not second_command:  # a second command's flags are its own, not the server's
            out += [flag_remedy(f, version, value_after(words, f)) for f in flags[:MAX_FLAG_REMEDIES]]
            if len(flags) > MAX_FLAG_REMEDIES:
                out.append(remedy(f"Check the other flags it refused too: {', '.join(flags[MAX_FLAG_REMEDIES:])}"))
        if d.get("hint"):
            out.append(remedy(f"vLLM's own hint: {d['hint']}", None, "printed by vLLM's parser"))
    elif form == "invalid_choice":
        choices = d.get("choices") or []
        value = d.get("value", "")
        near = difflib.get_close_matches(value, choices, n=1, cutoff=0.6) if choices else []
        if arg == "subparser" or arg.startswith("{"):  # the command after `vllm` (vllm/entrypoints/cli/main.py)
            out.append(
                remedy(
                    f"Run `vllm {near[0] if near else 'serve'}`: '{value}' is no vllm command"
                    + (f" (the commands: {', '.join(choices)})" if choices else ""),
                    None,
                    "vllm's first word names its command",
                )
            )
        elif near:
            out.append(remedy(f"Use '{near[0]}' for {arg}: '{value}' is not one of its choices", None))
        out.append(
            remedy(
                f"{arg} takes one of: {', '.join(choices[:20])}" + (" ..." if len(choices) > 20 else ""),
                None,
                f"'{value}' is not among the choices this release offers",
            )
            if choices
            else remedy(f"{arg} does not take '{value}': see `vllm serve --help` for its choices", None)
        )
    elif form == "invalid_value":
        out.append(
            remedy(
                f"Give {arg} a value of the type it reads ({d.get('value_type', 'see --help')}): "
                f"'{d.get('value', '')}' is not one",
                None,
                "argparse could not convert the value",
            )
        )
    elif form == "missing_value":
        out.append(
            remedy(
                f"Give {arg} its value: it ended the command, or an empty shell variable (--flag $UNSET) or an "
                "unescaped line break left it bare",
                None,
                "argparse found the flag without the value it takes",
            )
        )
    elif form == "required":
        required = d.get("choices") or []
        if "model_tag" in required:
            out.append(
                remedy(
                    "Give the model: `vllm serve MODEL` (a Hugging Face name or a local path) before the flags; an "
                    "empty shell variable (vllm serve $MODEL with MODEL unset) leaves it out",
                    None,
                    "vllm serve takes the model as its first argument (model_tag)",
                )
            )
        else:
            out.append(remedy(f"Add what the command requires: {', '.join(required)}", None))
    elif form == "ambiguous":
        out.append(remedy(f"Spell {arg} in full: it could be {', '.join(d.get('choices') or [])}", None))
    elif form == "conflict":
        out.append(remedy(f"Use {arg} or {d.get('value', 'the other flag')}, not both", None))
    out.append(
        remedy(
            "Check the command against `vllm serve --help` of the installed release (`vllm --version`)",
            None,
            "flags change between releases",
        )
    )
    # the plan's settings are what a run had in force, and this command never ran: a remedy that
    # names one says why it carries no number of the plan (rules/plan.py)
    return [_never_ran(r) for r in out if r is not None]


#: Said of a remedy that names a memory setting: no number of the refused command is in force.
NEVER_RAN = "the command never ran, so no setting was in force"
#: The settings of the run's plan (rules/plan.py), as a remedy's words may name them.
_PLAN_SETTINGS = regex.compile(
    r"\b(?:gpu|max|tensor|kv)[_-](?:memory[_-]utilization|model[_-]len|num[_-]seqs|num[_-]batched[_-]tokens|"
    r"parallel[_-]size|cache[_-]dtype)\b"
)


def _never_ran(r: Remedy) -> Remedy:
    if not _PLAN_SETTINGS.search(r.action):
        return r
    return replace(r, why=f"{r.why}; {NEVER_RAN}" if r.why else NEVER_RAN)


def facts(failures: Sequence[Failure]) -> Dict[str, Any]:
    """The facts a refused command's finding shows: the program, argparse's message, the flag."""
    d = merged_data(failures)
    return {k: d[k] for k in ("prog", "message", "argument", "flags") if k in d}


def title(failures: Sequence[Failure]) -> str:
    """``Startup failed: vllm serve refused the command: unrecognized arguments: --max-modle-len``."""
    d = merged_data(failures)
    return f"Startup failed: {d.get('prog', 'vllm')} refused its command line: {d.get('message', '')[:120]}"
