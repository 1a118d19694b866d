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
    was empty or a line break was not escaped; a value outside the allowed choices; another
    server's name for a setting (SGLang's ``--context-length``, TGI's ``--max-batch-size``); a
    flag glued to its value in one argument (a YAML list item ``- --dtype auto``, a subprocess
    list element); a switch given a value (``--trust-remote-code true``); the image's entrypoint
    (already the server) given ``vllm serve`` or a shell again; a typographic dash.

Remedies, in order:
    The flag named, with what to use instead: vLLM's flag for another server's name
    (:data:`OTHER_NAMES`), the nearest flag ``vllm serve`` knows for a misspelling (from the
    flags of every release, vllm_doctor/serve_flags.py, generated from vLLM's own parsers:
    thresholds.CLOSE_FLAG_RATIO and CLOSE_FLAG_LENGTH_GAP), the release range a flag exists in
    when it is newer or older than the release in force, the flag and its value as two
    arguments, the switch alone, the command without the entrypoint's own words; the allowed
    choices; the value the flag needs. Then ``vllm serve --help`` of the installed release. A
    secret's value is never written into a remedy.

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
from ..catalog.arguments import clip_words
from ..defaults import parse_version
from ..limits import MAX_FLAG_REMEDIES
from ..run import Failure, Run
from ..secret_names import names_secret
from ..verdict import Remedy
from .rule import merged_data, remedy


def known_as(flag: str) -> str:
    """The spelling :data:`serve_flags.FLAGS` holds ``flag`` under: underscores as dashes (vLLM's
    parser reads ``--max_num_seqs`` as ``--max-num-seqs``, every release: FlexibleArgumentParser
    .parse_args) and ``--no-X`` as ``--X`` (its boolean flags take both: ``BooleanOptionalAction``)."""
    base = flag.replace("_", "-") if flag.startswith("--") else flag
    return "--" + base[5:] if base.startswith("--no-") else base


#: Flags vLLM never had that operators type for a vLLM setting: other servers' names (SGLang,
#: TGI, llama.cpp) and common guesses, with the vLLM flag that does the job. Checked before the
#: spelling match, which would offer a flag that only looks alike (``--max-batch-size`` is not
#: ``--ubatch-size``: breakit5 item 10). Each target is a flag of :data:`serve_flags.FLAGS`
#: (tests/test_launch_rejected.py).
OTHER_NAMES: Dict[str, str] = {
    "--max-batch-size": "--max-num-seqs",
    "--batch-size": "--max-num-seqs",
    "--max-concurrent-requests": "--max-num-seqs",
    "--max-running-requests": "--max-num-seqs",
    "--max-num-tokens": "--max-num-batched-tokens",
    "--max-batch-total-tokens": "--max-num-batched-tokens",
    "--max-batch-prefill-tokens": "--max-num-batched-tokens",
    "--max-seq-len": "--max-model-len",
    "--max-seq-length": "--max-model-len",
    "--max-sequence-length": "--max-model-len",
    "--context-length": "--max-model-len",
    "--context-len": "--max-model-len",
    "--ctx-size": "--max-model-len",
    "--max-total-tokens": "--max-model-len",
    "--mem-fraction-static": "--gpu-memory-utilization",
    "--gpu-memory-fraction": "--gpu-memory-utilization",
    "--gpu-mem-util": "--gpu-memory-utilization",
    "--tp-size": "--tensor-parallel-size",
    "--tp": "--tensor-parallel-size",
    "--num-shard": "--tensor-parallel-size",
    "--num-gpus": "--tensor-parallel-size",
    "--pp-size": "--pipeline-parallel-size",
    "--dp-size": "--data-parallel-size",
    "--model-path": "--model",
    "--model-id": "--model",
}
#: Values a switch was given that mean on or off (argparse's store_true and
#: BooleanOptionalAction take none).
_BOOL_WORDS = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off"})
#: Dashes a word processor or a chat puts where "--" was typed (en, em, figure dash, minus,
#: hyphens): argparse reads "—max-model-len" as a stray word.
_TYPOGRAPHIC_DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"


def nearest_flag(flag: str) -> Optional[str]:
    """The flag of any release ``flag`` is a misspelling of, or None when ``flag`` is one
    (:func:`known_as`) or nothing is close: at least :data:`thresholds.CLOSE_FLAG_RATIO` alike
    (difflib's ratio) and at most :data:`thresholds.CLOSE_FLAG_LENGTH_GAP` characters longer or
    shorter (a letter or two dropped, doubled or swapped, not a word more)."""
    base = known_as(flag)
    if base in serve_flags.FLAGS:
        return None
    close = difflib.get_close_matches(base, list(serve_flags.FLAGS), n=3, cutoff=thresholds.CLOSE_FLAG_RATIO)
    return next((c for c in close if abs(len(c) - len(base)) <= thresholds.CLOSE_FLAG_LENGTH_GAP), None)


def _span(key: str) -> str:
    """The releases a flag (a key of :data:`serve_flags.FLAGS`) is in, in words."""
    first, last = serve_flags.FLAGS[key]
    if last == serve_flags.NEWEST:
        return f"from vLLM {first} on" if first != serve_flags.RELEASES[0] else f"in every release since {first}"
    return f"in vLLM {first} to {last}"


def _q(flag: str) -> str:
    """A flag as the remedies' words name it: in backquotes, so neither a reader nor the
    redactor (which takes the word after ``--api-key``) reads the next word as its value."""
    return f"`{flag}`"


def release_has(key: str, version: Optional[str]) -> Optional[bool]:
    """Whether the release ``version`` has the flag ``key`` (a key of :data:`serve_flags.FLAGS`):
    None when the version is not known or older than the releases scanned."""
    v = parse_version(version)
    if v is None or v < parse_version(serve_flags.RELEASES[0]):
        return None
    first, last = serve_flags.FLAGS[key]
    return parse_version(first) <= v and (last == serve_flags.NEWEST or v <= parse_version(last))


def flag_remedy(flag: str, version: Optional[str], value: Optional[str] = None, equals: bool = False) -> Remedy:
    """What to do about one flag the parser did not know: the vLLM flag for another server's
    name, a switch given a value, a flag the release does not have (removed, or newer), a flag
    glued to its value, a misspelling, or drop it. ``version``: the server's release where the
    log shows it; ``value``: the word after the flag in the refused arguments, ``equals`` when it
    was given as ``--flag=value``."""
    # a secret's value is never written into the remedy, nor a word right after its flag (the
    # redactor takes that word as the value)
    secret = names_secret(known_as(flag))
    plain = value is not None and regex.fullmatch(r"[\w.:/@+,<>-]{1,60}", value) is not None and not secret
    given = f"as {flag}={value}" if plain else ("joined by '='" if secret else f"as {flag}=VALUE")
    key = known_as(flag)
    if key not in serve_flags.FLAGS and key in OTHER_NAMES:
        meant = OTHER_NAMES[key]
        return remedy(
            f"Use {_q(meant)} instead of {_q(flag)}"
            + (f" ({meant} {value})" if plain else "")
            + ": vLLM has no such flag; this is its name for that setting",
            None,
            f"{_q(flag)} is another server's or a guessed name",
        )
    span = serve_flags.FLAGS.get(key)
    if span is None:
        near = nearest_flag(flag)
        if near is not None:
            return remedy(
                f"Replace {_q(flag)} with {_q(near)}"
                + (f" ({near} {value})" if plain else "")
                + ", the vLLM flag it is a misspelling of",
                None,
                f"{_q(flag)} is no flag of any vLLM release; check that {_q(near)} is the one you meant",
            )
        return remedy(
            f"Drop {_q(flag)}, or check its spelling against `vllm serve --help` of the installed release (a plugin's "
            "flag needs the plugin installed, at the release that matches vLLM's)",
            None,
            "no vLLM release has this flag",
        )
    first, last = span
    has = release_has(key, version)
    removed = last != serve_flags.NEWEST
    if value is not None and value.lower() in _BOOL_WORDS and not flag.startswith("--no-"):
        return remedy(
            f"Pass {_q(flag)} alone to switch it on, with no value after it (or leave it out for off)",
            None,
            f"{_q(flag)} is a switch: argparse refuses '{value}' after it",
        )
    if has is False and removed and parse_version(version) > parse_version(last):
        return remedy(
            f"Drop {_q(flag)}: vLLM {version} no longer has it (it is {_span(key)}); check the release notes for what "
            "replaced it",
            None,
            "the server's parser does not know it",
        )
    if has is False:
        return remedy(
            f"{_q(flag)} is too new for vLLM {version}: it exists {_span(key)}; upgrade vLLM, or drop it",
            None,
            "the server's parser does not know it",
        )
    if flag.startswith("--no-"):
        return remedy(
            f"Drop {_q(flag)}, or check that the installed release's `vllm serve --help` lists it: the --no- "
            f"spelling is the off switch of {_q(key)} only where the parser makes one",
            None,
            f"{_q(key)} exists {_span(key)}, but the parser refused its off switch",
        )
    # a value after a space may have been glued to the flag; "--flag=value" is one word by design
    spaced = value is not None and not equals
    if removed and has is None:
        after = serve_flags.RELEASES[serve_flags.RELEASES.index(last) + 1]
        glued = (
            f"; on a release up to {last}, pass the flag and its value as two arguments, or {given}" if spaced else ""
        )
        return remedy(
            f"Drop {_q(flag)}: vLLM removed it (it is {_span(key)}, not in {after}){glued}",
            None,
            "the server's parser does not know it, and the flag was last in an older release",
        )
    if spaced and (first == serve_flags.RELEASES[0] or has):
        return remedy(
            f"Pass {_q(flag)} and its value as two arguments, or {given}: the parser most likely got them as one "
            'word (a YAML list item "- --flag value", a subprocess list element "--flag value", a quoted "$ARGS")',
            None,
            f"{_q(flag)} is a flag of this release ({_span(key)}): a flag glued to its value is what the parser refuses",
        )
    if first == serve_flags.RELEASES[0] or has:
        return remedy(
            f"Retype {_q(flag)}: the release has it ({_span(key)}), so the word the parser got is not exactly it (a "
            "carriage return from a script saved with Windows line ends, a no-break space), or it went to another "
            "program",
            None,
            "a flag the release has is refused only when the word differs from it",
        )
    if not spaced:
        return remedy(
            f"{_q(flag)} exists {_span(key)}: the installed release is likely older; upgrade vLLM, or drop it",
            None,
            "the server's parser does not know it; the log does not show the release",
        )
    return remedy(
        f"{_q(flag)} exists {_span(key)}: on an older release, upgrade vLLM or drop it; on a newer one, pass the "
        f"flag and its value as two arguments, or {given} (one word such as a YAML list item "
        '"- --flag value" is refused)',
        None,
        "the server's parser does not know it; the log does not show the release",
    )


#: Words that, first among the refused arguments, show the container's entrypoint already runs the
#: server and was given a second command (the vllm/vllm-openai image's ENTRYPOINT is the server:
#: ``python3 -m vllm.entrypoints.openai.api_server``, later ``vllm serve``).
_SERVE_WORDS = frozenset({"vllm", "serve"})
_SHELL_WORDS = frozenset({"/bin/bash", "/bin/sh", "bash", "sh", "python", "python3", "-c"})


def stray_remedy(prog: str, words: Sequence[str]) -> Remedy:
    """The refused arguments start with a word that is no flag: a second command, a shell, the
    server's own entrypoint again, a typographic dash, or the model given bare to an entrypoint
    that takes ``--model``."""
    head = words[0]
    if head in _SERVE_WORDS:
        return remedy(
            "Drop `vllm serve` from the container's command: the image's entrypoint already runs it, so pass the "
            "model and the flags only (docker run IMAGE MODEL --flag value; compose command: [MODEL, --flag, value])",
            None,
            f"{prog} got '{head}' as an argument of its own",
        )
    if head.startswith(("python", "/usr/bin/python")) and any("vllm.entrypoints" in w for w in words[:4]):
        server = next(w for w in words[:4] if "vllm.entrypoints" in w)
        return remedy(
            f"Drop `{' '.join(words[: words.index(server) + 1])}` from the container's command: the image's "
            "entrypoint already runs it, so pass the flags only",
            None,
            f"{prog} got its own command line as arguments",
        )
    if head in _SHELL_WORDS or head.startswith("/bin/"):
        return remedy(
            "Override the image's entrypoint to run a shell (docker run --entrypoint /bin/bash ...; in Kubernetes "
            "the container's command, not its args): the entrypoint runs the server and took the shell command as "
            "its arguments",
            None,
            f"{prog} got '{head}' as an argument",
        )
    if head[:1] in _TYPOGRAPHIC_DASHES:
        return remedy(
            f"Retype '{head}' with two ASCII hyphens (--{head.lstrip(_TYPOGRAPHIC_DASHES)}): a document or chat turned "
            "them into a dash",
            None,
            "argparse reads a word that starts with a typographic dash as no flag",
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


def nearest_choice(value: str, choices: Sequence[str]) -> Optional[str]:
    """The allowed choice ``value`` was meant to be: the same word in another case (``AWQ`` for
    ``awq``), else the closest by difflib's ratio (at least 0.6, its default), else None."""
    same = [c for c in choices if c.lower() == value.lower()]
    if same:
        return same[0]
    lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(value.lower(), list(lower), n=1, cutoff=0.6)
    return lower[close[0]] if close else None


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
        second_command = bool(words) and (
            words[0] in _SERVE_WORDS | _SHELL_WORDS or words[0].startswith(("/bin/", "python", "/usr/bin/python"))
        )
        if words and not words[0].startswith("-"):
            out.append(stray_remedy(str(d.get("prog", "vllm")), words))
        if not second_command:  # a second command's flags are its own, not the server's
            out += [
                flag_remedy(f, version, value_after(words, f), any(w.startswith(f + "=") for w in words))
                for f in flags[:MAX_FLAG_REMEDIES]
            ]
            if len(flags) > MAX_FLAG_REMEDIES:
                out.append(remedy(f"Check the other flags it refused too: {', '.join(flags[MAX_FLAG_REMEDIES:])}"))
        if d.get("hint"):
            out.append(remedy(f"vLLM's own hint: {d['hint']}", None, "printed by vLLM's parser"))
    elif form == "invalid_choice":
        choices = d.get("choices") or []
        value = d.get("value", "")
        near = nearest_choice(value, choices)
        if arg == "subparser" or arg.startswith("{"):  # the command after `vllm` (vllm/entrypoints/cli/main.py)
            # a model name where the command goes: `vllm MODEL` with serve forgotten
            command = f"serve {value}" if "/" in value and not near else (near or "serve")
            out.append(
                remedy(
                    f"Run `vllm {command}`: '{value}' is no vllm command"
                    + (f" (the commands: {', '.join(choices)})" if choices else ""),
                    None,
                    "vllm's first word names its command",
                )
            )
        elif near:
            out.append(remedy(f"Use '{near}' for {arg}: '{value}' is not one of its choices", None))
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
    elif form == "switch_value":
        out.append(
            remedy(
                f"Pass {_q(arg)} alone, with no '={d.get('value', '')}': it is a switch (on when given"
                + (f"; {_q('--no-' + arg[2:])} for off where the release has it)" if arg.startswith("--") else ")"),
                None,
                "argparse ignores a value given to a switch, and refuses the command",
            )
        )
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
    return f"Startup failed: {d.get('prog', 'vllm')} refused its command line: {clip_words(d.get('message', ''), 120)}"
