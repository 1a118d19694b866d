"""Redaction: keep secrets and personal data out of verdicts pasted into tickets.

Every CLI output is made from :meth:`Redactor.verdict` unless ``--no-redact``. It first
makes each string inert (:func:`vllm_doctor.render.inert.one_line`: escape sequences,
controls and invisible characters dropped, line breaks shown as ``⏎``), so the rules see
exactly the text a renderer prints: a control character planted inside a token cannot hide
it from a rule and then vanish from the output. Rules anchor on non-alphanumerics, not
``\\b`` (``_`` and ``%3D`` are word characters to ``\\b``, so ``x_hf_...`` and
``%3Dhf_...`` slipped past it). What goes, and what it becomes:

* credentials that say what they are, wherever they stand: Hugging Face ``hf_``, OpenAI /
  Anthropic ``sk-``, AWS access key ids (``AKIA...``, ``ASIA...``), GitHub ``ghp_``/``gho_``/
  ``ghs_``/``ghu_``/``ghr_``/``github_pat_``, GitLab ``glpat-``, Slack ``xox?-``/``xapp-`` and
  webhook URLs, Stripe ``sk_live_``/``rk_live_``, Google ``AIza...`` keys and ``ya29.``
  tokens, npm, PyPI, SendGrid, Databricks -> the prefix and ``<redacted>``; JWTs
  (``eyJ...``, even glued to a word) -> ``<jwt redacted>``; PEM private-key blocks and bare
  base64 lines -> ``<private key redacted>`` / ``<base64 redacted>``;
* the value of every ``Authorization`` / ``Proxy-Authorization`` header, whatever the
  scheme (``Basic``, ``Bearer``, ``Token``, ``Digest``, AWS SigV4, none) and of ``Bearer``
  anywhere (short tokens too, and a token glued to it by a re-joined line wrap);
* the value of any key that names a secret (``api_key``, ``x-api-key``, ``hf_token``,
  ``HUGGING_FACE_HUB_TOKEN``, ``password``, ``secret``, ``aws_secret_access_key``,
  ``credentials``, ``cookie``, ``signature``...), in ``key=value``, ``key: value``,
  ``'key': 'value'``, JSON, JSON inside a string (``\\"key\\": \\"v\\"``), list values
  (``'api_key': ['...']``), URL-encoded (``key%3Dvalue``) and ``--flag value`` forms;
* URL user info (``scheme://user:pass@host``, ``redis://:pass@host``) and secret query
  parameters (``?token=``, ``X-Amz-Signature``/``X-Amz-Credential``/``X-Amz-Security-Token``,
  ``X-Goog-Signature``, Azure SAS ``sig=``, ``access_token``, ``key``, ...), also when the
  URL is the model path;
* prompt text: the request logger's ``prompt: '...'`` and ``prompt_token_ids``, and the
  value of a ``prompt``, ``messages``, ``input``, ``content``, ``instructions``, ``text``...
  field wherever it stands (an exception message, a ``messages=[...]`` repr, a JSON body
  in a validation error) -> ``<prompt redacted>``;
* e-mail addresses -> ``<email>``; IPv4 and IPv6 addresses -> ``<ip>`` (the port stays;
  version strings that look like addresses, ``v1.2.3.4``, ``0.10.2.dev378``, stay);
* people and machines get stable pseudonyms per verdict, so sources stay apart: user names
  in home paths (``/home/alice/`` -> ``/home/<user-1>/``, also ``/Users/`` and
  ``C:\\Users\\``), journald hosts (``x.log [vllm[4127]@gpu-node-3]`` ->
  ``x.log [vllm[4127]@<host-1>]``, with or without a PID) and pods (``x.log
  [pod/vllm-7d9f/vllm]`` -> ``x.log [pod/<pod-1>/vllm]``), in every field that names a source.

Numbers, model names, versions and PIDs - what the diagnosis needs - are kept. Rule
formats follow the public rule sets of secret scanners (gitleaks, detect-secrets); the
rules are ours because the verdict is small and the pseudonyms and prompt fields are
specific to it.
"""

from __future__ import annotations

import difflib
import unicodedata
from typing import Callable, Dict, List, Optional, Tuple

import regex

from .catalog import regex_timed_out
from .render.inert import map_strings, one_line
from .secret_names import SECRET_WORDS, names_secret  # noqa: F401 - names_secret: redact's public name

#: Seconds one rule may spend on one string before the string is withheld.
TIMEOUT = 0.5
#: Tokens one redactor remembers for :meth:`Redactor.scrub` (bounds its work on a huge verdict).
MAX_TOKENS = 4096
WITHHELD = "<line withheld: too complex to redact safely>"

# Left edge of a self-identifying token: not preceded by a letter or digit, or preceded by a
# URL escape (%3D, %20) or by a word it was glued to when a wrapped line was re-joined.
_L = r"(?:(?<![A-Za-z0-9])|(?<=%[0-9A-Fa-f]{2})|(?<=[Bb]earer|BEARER|[Tt]oken|TOKEN|[Kk]ey|KEY))"

_PEM = regex.compile(
    r"-----BEGIN[A-Z0-9 _-]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 _-]{0,40}PRIVATE KEY(?: BLOCK)?-----|$)",
    regex.S,
)
_BASE64_LINE = regex.compile(r"\s*(?=[A-Za-z0-9+/]*[0-9])(?=[A-Za-z0-9+/]*[a-z])[A-Za-z0-9+/]{60,}={0,2}\s*")

# Authorization schemes (IANA HTTP Authentication Scheme Registry, plus common API ones).
_SCHEMES = (
    r"basic|bearer|token|digest|negotiate|ntlm|hoba|mutual|apikey|key|sso-key|dpop|gnap|privatetoken"
    r"|aws4-hmac-sha256|goog4-hmac-sha256|scram-sha-256|vapid"
)


def _rule(pattern: str, placeholder: str = "<redacted>") -> Tuple["regex.Pattern", str]:
    """A token rule: ``pattern`` has a group ``s`` (the secret, replaced by ``placeholder``)
    and may have ``k`` (kept before it) and ``t`` (kept after it)."""
    return regex.compile(pattern), placeholder


# Token rules, applied in order by Redactor.text; see the module doc.
_TOKENS: List[Tuple["regex.Pattern", str]] = [
    # the brackets are kept around the placeholder, not in it: scrub() must not find the
    # token's start ("prompt_token_ids: [") again in its own replacement
    _rule(r"(?P<k>prompt_token_ids(?::\s*|=)\[)(?P<s>[^\]]*+)(?P<t>\]?)"),
    _rule(
        r"(?i)(?P<k>(?<![A-Za-z0-9])(?:proxy-)?authorization\\{0,2}['\"]?\s*[:=]\s*\\{0,2}"
        r"(?:[bru]{1,2}(?=['\"]))?['\"]?\s*"
        r"(?!(?:" + _SCHEMES + r")\s+<redacted>|<redacted>)(?:(?:" + _SCHEMES + r")\s+)?)"
        r"(?P<s>(?:[A-Za-z][\w.-]{0,30}\s+(?=[^\s'\",;\\]{8,})(?=[^\s'\",;\\]*[0-9+/=]))?[^\s'\",;\\]+)"
    ),
    _rule(
        r"(?P<k>(?<![A-Za-z0-9])(?:[Bb]earer|BEARER)(?:\s+|(?=eyJ|hf_|sk-|gh[pousr]_|github_pat_|xox|ya29\.)))"
        r"(?!<redacted>|(?i:token|tokens|auth|authentication|authorization|header|is|was|the|an?|missing|invalid"
        r"|required|scheme|realm|credentials?|none|null)(?![A-Za-z0-9._~+/=-]))(?P<s>[A-Za-z0-9._~+/=-]+)",
        " <redacted>",
    ),
    # user info: the password may hold "/" (an AWS secret key is base64: breakit5 item 1), the
    # user name may not (a path's "host/a:b@c" is no user info)
    _rule(r"(?i)(?P<k>(?<![A-Za-z0-9+.-])[a-z][a-z0-9+.-]{0,20}://)(?P<s>[^\s/?#'\"<>@]*:[^\s?#'\"<>@]*)(?P<t>@)"),
    _rule(
        r"(?i)(?P<k>(?:[?&;#]|&amp;|%3F|%26)(?:x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature"
        r"|x-goog-credential|signature|sig|token|access_token|id_token|refresh_token|auth|auth_token|api_key|apikey"
        r"|api-key|key|password|passwd|pass|secret|client_secret|code|awsaccesskeyid|jwt|session|sessionid|ticket)"
        r"(?:=|%3D))(?!<redacted>)(?P<s>(?:(?!%26|&amp;|:(?:\s|$))[^&\s#'\"<>])+)"
    ),
    _rule(r"(?i)(?P<k>hooks\.slack\.com/(?:services|workflows|triggers)/)(?P<s>[A-Za-z0-9/_-]+)"),
    _rule(
        _L + r"(?P<k>A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)(?P<s>[A-Z0-9]{16})(?![A-Z0-9])"
    ),
    _rule(_L + r"(?P<k>gh[pousr]_|github_pat_)(?P<s>[A-Za-z0-9_]{20,})"),
    _rule(_L + r"(?P<k>glpat-)(?P<s>[A-Za-z0-9_-]{20,})"),
    _rule(_L + r"(?P<k>xox[abposre]-|xapp-)(?P<s>[A-Za-z0-9-]{10,})"),
    _rule(_L + r"(?P<k>(?:sk|rk)_(?:live|test|prod)_)(?P<s>[A-Za-z0-9]{10,})"),
    _rule(_L + r"(?P<k>AIza)(?P<s>[0-9A-Za-z_-]{35})"),
    _rule(_L + r"(?P<k>ya29\.)(?P<s>[0-9A-Za-z_-]{20,})"),
    _rule(_L + r"(?P<k>hf_|api_org_)(?P<s>[A-Za-z0-9]{16,})"),
    _rule(_L + r"(?P<k>sk-)(?P<s>[A-Za-z0-9_-]{16,})"),
    _rule(_L + r"(?P<k>npm_)(?P<s>[A-Za-z0-9]{36})"),
    _rule(_L + r"(?P<k>pypi-)(?P<s>AgE[A-Za-z0-9_-]{50,})"),
    _rule(_L + r"(?P<k>SG\.)(?P<s>[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})"),
    _rule(_L + r"(?P<k>dapi)(?P<s>[a-f0-9]{32})(?![a-f0-9])"),
    _rule(_L + r"(?P<k>dckr_pat_)(?P<s>[A-Za-z0-9_-]{20,})"),
    _rule(_L + r"(?P<k>r8_)(?P<s>[A-Za-z0-9]{20,})"),
    _rule(_L + r"(?P<k>gsk_)(?P<s>[A-Za-z0-9]{20,})"),
    _rule(r"(?P<s>eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]*)?)", "<jwt redacted>"),
]

# Keys whose value is a secret. Found by the key word itself (no lazy prefix: linear on any
# line); the value is then measured by _value_end, so quotes, lists and JSON all end right.
# A key word inside a path component (``/etc/passwd: ...``, ``C:\\keys\\token: ...``) names a
# file, not a key: not matched.
#: The words a key that names a secret is made of (its value is then a secret).
_SECRET_WORDS = SECRET_WORDS
_SECRET_KEY = regex.compile(
    r"(?i)(?<![/\\][\w.-]{0,40})(?P<key>" + _SECRET_WORDS + r"|pwd|x-auth-token)(?![A-Za-z0-9])"
    r"(?:\\{0,2}['\"])?\s*(?:=>|[:=]|%3[Dd])\s*"
)
#: Keys whose unquoted value may hold spaces (a passphrase): it runs on past a space up to a
#: delimiter or the next ``key=`` / ``key:``, not to the first space.
_PHRASE_KEYS = ("password", "passwd", "pwd")
# names_secret (a configuration key that names a secret) lives in secret_names.py, beside the
# words, so that the rules can ask it without importing the redactor.


#: An environment variable that names a secret, written with its value after spaces alone
#: (a Dockerfile's ``ENV HF_TOKEN hf_...``, csh's ``setenv OPENAI_API_KEY sk-...``, an env
#: dump pasted as columns): upper case, a compound name (``HF_TOKEN``, ``API_KEY``, not a
#: bare ``TOKEN``), and a value that looks like one (a digit in it, or a token's own
#: prefix), so prose such as ``HF_TOKEN is not set`` keeps its words.
_SECRET_ENV = regex.compile(
    r"(?<![A-Za-z0-9_])(?:(?:[A-Z0-9]+_)*(?:API_?KEY|ACCESS_?KEY|SECRET_?KEY|PRIVATE_?KEY|AUTH_?TOKEN)"
    r"|(?:[A-Z0-9]+_)+(?:TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?))[ \t]+"
    r"(?=[^\s'\",;]*[0-9]|hf_|api_org_|sk-|gh[pousr]_|github_pat_|glpat-|xox|eyJ|AKIA|ASIA)(?![^\s'\",;]*<redacted>)"
)
_SECRET_FLAG = regex.compile(
    r"(?i)(?<![A-Za-z0-9-])--[a-z0-9-]{0,30}?(?:api-key|token|password|secret)(?![a-z0-9-])\s+"
)
_PROMPT_KEY = regex.compile(
    r"(?P<q>\\{0,2}['\"])?(?<![A-Za-z0-9_])"
    r"(?P<k>prompt|prompts|messages|input|inputs|content|instructions|system_prompt|query|text|documents)"
    r"(?![A-Za-z0-9_])(?(q)\\{0,2}['\"])\s*(?P<sep>=|:)\s*"
)
_PLACEHOLDERS = ("<redacted>", "<jwt redacted>", "<email>", "<ip>")
_KEEP_VALUES = ("None", "null", "True", "False", "true", "false", "''", '""', "[]", "{}", "<redacted>")

_EMAIL = regex.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9-])"
)
_NETWORK = [
    (
        regex.compile(
            r"(?<![\w.])(?<!v)(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.]*\d)(?!\.\w)"
        ),
        "<ip>",
    ),
    (regex.compile(r"(?<![\w:])(?=[0-9A-Fa-f:]*[A-Fa-f])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])"), "<ip>"),
    (
        regex.compile(
            r"(?<![\w:])[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4})*::(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4})*)?"
            r"(?:%\w+)?(?![\w:])"
        ),
        "<ip>",
    ),
]
_HOME = regex.compile(r"(/home/|/Users/|[A-Za-z]:\\Users\\)(?!<user)([^/\\\s'\"]+)")
_SOURCE = regex.compile(r"(?s)(?P<input>.*?) \[(?P<key>.*)\]")
_JOURNALD_KEY = regex.compile(r"(?s)(?P<unit>.*?)(?P<pid>\[[0-9]+\])?@(?P<host>.*)")


def _string_prefix(text: str, i: int) -> int:
    """Length of a Python string prefix (``b``, ``rb``, ``u``...) at ``text[i]`` directly
    followed by a quote (``b'...'``, a bytes repr), else 0."""
    for n in (2, 1):
        if text[i : i + n].lower() in _STRING_PREFIXES[n] and text[i + n : i + n + 1] in ("'", '"'):
            return n
    return 0


_STRING_PREFIXES = {1: ("b", "r", "u", "f"), 2: ("rb", "br", "rf", "fr")}
_NEXT_KEY = regex.compile(r"\s+[A-Za-z_][\w.-]{0,40}\s*[:=]")


def _value_end(text: str, i: int, bare_to_end: bool = False, phrase: bool = False) -> int:
    """Where the value starting at ``text[i]`` ends: past its closing quote (backslash
    escapes honoured, ``\\"`` quoting too) or bracket (nesting and quotes honoured), or at
    the first delimiter for a bare value (the end of ``text`` with ``bare_to_end``). An
    unclosed quote or bracket runs to the end: a cut line leaks nothing. A Python string
    prefix is part of the quoted value (``b'SECRET'``). With ``phrase`` a bare value runs on
    past spaces, up to a delimiter or the next ``key=`` / ``key:``. A backslash-escaped space
    (a shell word) does not end a bare value."""
    n = len(text)
    i += _string_prefix(text, i)
    j = i
    while j < n and text[j] == "\\":
        j += 1
    if j < n and text[j] in "'\"":
        quote = text[i : j + 1]
        k = j + 1
        while k < n:
            if text.startswith(quote, k) and (len(quote) > 1 or text[k - 1] != "\\" or text[k - 2 : k] == "\\\\"):
                return k + len(quote)
            k += 1
        return n
    if i < n and text[i] in "[{(":
        closer = {"[": "]", "{": "}", "(": ")"}
        stack = [closer[text[i]]]
        k = i + 1
        quote = None
        while k < n and stack:
            c = text[k]
            if quote:
                if c == "\\":
                    k += 1
                elif c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif c in closer:
                stack.append(closer[c])
            elif c == stack[-1]:
                stack.pop()
            k += 1
        return k if not stack else n
    if bare_to_end:
        return n
    k = i
    while k < n:
        if text[k] == "\\" and k + 1 < n and text[k + 1] == " ":
            k += 2  # a shell word's escaped space is inside the value (breakit6 item 10: alpha\ bravo)
            continue
        if text[k] in ",;&)]}'\"<>\\":
            break
        if text[k].isspace():
            if not phrase or _NEXT_KEY.match(text, k) or not text[k:].strip():
                break
        k += 1
        for mark in _PLACEHOLDERS:  # a token an earlier rule already cut ("hf_<redacted>")
            if text.startswith(mark, k):
                k += len(mark)
    return k


def _mask(value: str, placeholder: str) -> str:
    """``value`` replaced by ``placeholder``, keeping its quotes (and a string prefix:
    ``b'<redacted>'``) or brackets."""
    p = _string_prefix(value, 0)
    if p:
        return value[:p] + _mask(value[p:], placeholder)
    j = 0
    while j < len(value) and value[j] == "\\":
        j += 1
    if j < len(value) and value[j] in "'\"":
        quote = value[: j + 1]
        return quote + placeholder + (quote if len(value) >= 2 * len(quote) and value.endswith(quote) else "")
    if value[:1] in "[{(":
        close = {"[": "]", "{": "}", "(": ")"}[value[0]]
        return value[0] + placeholder + (close if value.endswith(close) and len(value) > 1 else "")
    return placeholder


def _mask_values(text: str, rx: "regex.Pattern", placeholder: str, accept=None) -> str:
    """Replace the value after every match of ``rx`` (a key and its separator).
    ``accept(match, value_start)`` may return None (leave it), False (bare value to the
    next delimiter), True (bare value to the end of ``text``) or ``"phrase"`` (bare value
    past spaces, see :func:`_value_end`)."""
    out: List[str] = []
    pos = 0
    while True:
        m = rx.search(text, pos, timeout=TIMEOUT)
        if m is None:
            break
        start = m.end()
        to_end = accept(m, start) if accept else False
        if to_end is None or start >= len(text):
            out.append(text[pos:start])
            pos = start
            continue
        end = _value_end(text, start, bare_to_end=to_end is True, phrase=to_end == "phrase")
        value = text[start:end]
        if not value or value in _KEEP_VALUES or value.strip("'\"\\") in ("None", "null", "<redacted>", placeholder):
            out.append(text[pos:end])
        else:
            out.append(text[pos:start] + _mask(value, placeholder))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _secret_accept(m, start: int):
    """The value of a secret key: a passphrase key's runs past spaces; ``pwd`` followed by a
    directory (the shell's ``PWD=/home/...``) is no password."""
    key = m["key"].lower()
    if key == "pwd" and m.string[start : start + 1] in ("/", "~"):
        return None
    return "phrase" if key in _PHRASE_KEYS else False


def _prompt_accept(m, start: int) -> Optional[bool]:
    text = m.string
    nxt = text[start : start + 3].lstrip("\\")[:1]
    if m["q"] or m["sep"] == "=":
        return False if nxt in ("'", '"', "[", "{", "(") else m["k"] in ("prompt", "messages")
    if m["k"] not in ("prompt", "messages"):
        # prose such as "Invalid input: 'Input prompt (8193 tokens) is too long'" or tqdm's
        # "Processed prompts: 100%|..." stays
        return None
    # An unquoted "prompt: hello ..." runs to the end of the line.
    return nxt not in ("'", '"', "[", "{")


#: Equal runs shorter than this between two replaced spans are folded into the replacement
#: when a redaction of the NFKC form is mapped back (a placeholder's letters that happen to
#: match the secret's stay the placeholder's).
_MIN_KEPT_RUN = 4


def _on_compatibility_form(text: str, redact: Callable[[str], str]) -> str:
    """``redact`` applied to ``text`` as NFKC reads it, the result in ``text``'s own characters.

    Fullwidth or other compatibility forms (``ｈｆ＿...``, ``ＡＰＩ＿ＫＥＹ＝...``) are what
    vLLM's users paste from wide-character terminals and documents; the rules match ASCII.
    Each character is NFKC-normalised on its own (so positions map back), the rules run on
    that, and the spans they left alone are printed as the original characters; what they
    replaced is the placeholder. A text already in NFKC is redacted as it is."""
    if unicodedata.is_normalized("NFKC", text):
        return redact(text)
    parts = [unicodedata.normalize("NFKC", ch) for ch in text]
    norm = "".join(parts)
    owner: List[int] = []  # index of the original character each normalised one came from
    starts: List[int] = []  # where each original character's normal form starts in norm
    for i, part in enumerate(parts):
        starts.append(len(owner))
        owner.extend([i] * len(part))
    done = redact(norm)
    if done == norm:
        return text
    ops = difflib.SequenceMatcher(None, norm, done, autojunk=False).get_opcodes()
    out: List[str] = []
    for n, (tag, a1, a2, b1, b2) in enumerate(ops):
        short = 0 < n < len(ops) - 1 and a2 - a1 < _MIN_KEPT_RUN
        if tag != "equal" or short:
            out.append(done[b1:b2])
            continue
        j = a1
        while j < a2:  # whole original characters inside the run, else their normalised form
            i = owner[j]
            if starts[i] == j and j + len(parts[i]) <= a2:
                out.append(text[i])
                j += len(parts[i])
            else:
                out.append(norm[j])
                j += 1
    return "".join(out)


class Redactor:
    """Redacts strings and verdicts, giving hosts, pods and users stable pseudonyms
    (``<host-1>``, ``<pod-1>``, ``<user-1>``, numbered in order of first appearance) for as
    long as the instance lives: one per verdict, or one per ``--follow`` session so that
    the findings printed as they come and the summary agree."""

    def __init__(self) -> None:
        self.hosts: Dict[str, str] = {}
        self.pods: Dict[str, str] = {}
        self.users: Dict[str, str] = {}
        self._names: Dict[str, str] = {}
        # token -> (its kept prefix, what replaces it): to scrub copies a rule cannot see,
        # such as a title that cut the token short ("Look up 'ValueError: ... hf_abcd").
        self._tokens: Dict[str, Tuple[str, str]] = {}
        # text -> (tokens known when it was redacted, the result): see _string
        self._memo: Dict[str, Tuple[int, str]] = {}

    def pseudonym_note(self) -> Optional[str]:
        """One line for the operator when names were replaced (fresh22 item 3: which pod
        failed, when two pods interleave), else None."""
        kinds = [k for k, t in (("host", self.hosts), ("pod", self.pods), ("user", self.users)) if t]
        if not kinds:
            return None
        shown = ", ".join(f"<{k}-N>" for k in kinds)
        return f"note: {'/'.join(kinds)} names are shown as {shown}; --no-redact shows them as logged"

    @staticmethod
    def _pseudonym(table: Dict[str, str], kind: str, name: str) -> str:
        if name not in table:
            table[name] = f"<{kind}-{len(table) + 1}>"
        return table[name]

    def _token(self, m, placeholder: str) -> str:
        kept = m["k"] or "" if "k" in m.re.groupindex else ""
        after = m["t"] or "" if "t" in m.re.groupindex else ""
        if placeholder.startswith(" ") and kept[-1:].isspace():
            placeholder = placeholder[1:]
        replacement = kept + placeholder + after
        if len(self._tokens) < MAX_TOKENS:
            self._tokens.setdefault(kept + m["s"], (kept, kept + placeholder))
        return replacement

    def _rules(self, text: str) -> str:
        if "PRIVATE KEY" in text:
            text = _PEM.sub("<private key redacted>", text, timeout=TIMEOUT)
        if _BASE64_LINE.fullmatch(text, timeout=TIMEOUT):
            return "<base64 redacted>"
        text = _mask_values(text, _PROMPT_KEY, "<prompt redacted>", _prompt_accept)
        text = self._secret_rules(text)
        text = _EMAIL.sub("<email>", text, timeout=TIMEOUT)
        for rx, repl in _NETWORK:
            text = rx.sub(repl, text, timeout=TIMEOUT)
        return _HOME.sub(lambda m: m[1] + self._pseudonym(self.users, "user", m[2]), text, timeout=TIMEOUT)

    def _secret_rules(self, text: str) -> str:
        """The credential rules alone: tokens, secret keys' values, secret flags' values."""
        for rx, placeholder in _TOKENS:
            text = rx.sub(lambda m, p=placeholder: self._token(m, p), text, timeout=TIMEOUT)
        text = _mask_values(text, _SECRET_KEY, "<redacted>", _secret_accept)
        text = _mask_values(text, _SECRET_ENV, "<redacted>")
        return _mask_values(
            text, _SECRET_FLAG, "<redacted>", lambda m, s: None if m.string[s : s + 1] == "-" else False
        )

    def secrets(self, text: str) -> str:
        """``text`` made inert (one line) with its credentials redacted (the token, key,
        flag, URL user-info and query rules of the module doc), and nothing else: for the
        tool's own messages, where a host, an address or a path is what the operator typed."""
        if not text:
            return text
        text = one_line(text)
        if "PRIVATE KEY" in text:
            text = _PEM.sub("<private key redacted>", text, timeout=TIMEOUT)
        try:
            return _on_compatibility_form(text, lambda t: self.scrub(self._secret_rules(t)))
        except TimeoutError as exc:
            if not regex_timed_out(exc):
                raise
            return WITHHELD

    def secret(self, value: str) -> None:
        """Remember ``value`` as a secret (the value of a key that names one, shown apart from
        its key): :meth:`scrub` then replaces it, and its cut copies, everywhere."""
        if len(value) >= 4 and len(self._tokens) < MAX_TOKENS:
            self._tokens.setdefault(value, ("", "<redacted>"))

    def scrub(self, text: str) -> str:
        """Replace every token this redactor has seen, and every cut copy of one (a title or
        a remedy quotes a message cut short: ``Look up 'ValueError: ... hf_abcd'``): a copy is
        its kept prefix and at least one more character (four of a token with no kept prefix,
        a JWT), ending where the token ends or before a character no token continues with."""
        for token, (kept, replacement) in self._tokens.items():
            probe = token[: len(kept) + 1] if kept else token[:4]
            if probe not in text:
                continue
            need = 1 if kept else 4
            out: List[str] = []
            pos = 0
            while True:
                i = text.find(probe, pos)
                if i < 0:
                    break
                n = len(probe)
                while n < len(token) and i + n < len(text) and text[i + n] == token[n]:
                    n += 1
                after = text[i + n : i + n + 1]
                continues = after != "" and (after.isalnum() or after in "_-.")
                if n - len(kept) >= need and (n == len(token) or not continues):
                    out.append(text[pos:i] + replacement)
                    pos = i + n
                else:
                    out.append(text[pos : i + 1])
                    pos = i + 1
            out.append(text[pos:])
            text = "".join(out)
        return text

    def text(self, text: str) -> str:
        """``text`` made inert (one line) and redacted (see the module doc). A string the
        rules cannot finish within their time limit is withheld whole."""
        if not text:
            return text
        text = one_line(text)
        for original, redacted in self._names.items():
            if original != redacted and original in text:
                text = text.replace(original, redacted)
        try:
            return _on_compatibility_form(text, lambda t: self.scrub(self._rules(t)))
        except TimeoutError as exc:
            if not regex_timed_out(exc):
                raise
            return WITHHELD

    def source_name(self, name: str, input_name: Optional[str] = None) -> str:
        """A source name with its host or pod pseudonymised and its input name redacted:
        ``INPUT [unit[pid]@host]`` (journald, with or without unit and PID), ``INPUT
        [pod/POD/CONTAINER]`` (kubectl --prefix); any other name is redacted as text."""
        if name in self._names:
            return self._names[name]
        clean = one_line(name)
        if input_name is not None and clean.startswith(one_line(input_name) + " [") and clean.endswith("]"):
            base, key = one_line(input_name), clean[len(one_line(input_name)) + 2 : -1]
        else:
            m = _SOURCE.fullmatch(clean)
            if m is None:
                redacted = self.text(clean)
                self._names[name] = redacted
                return redacted
            base, key = m["input"], m["key"]
        if key.startswith("pod/"):
            pod, _, container = key[4:].partition("/")
            key = f"pod/{self._pseudonym(self.pods, 'pod', pod)}/{self.text(container)}"
        else:
            j = _JOURNALD_KEY.fullmatch(key)
            if j is not None:
                host = j["host"] if j["host"] in ("", "?") else self._pseudonym(self.hosts, "host", j["host"])
                key = f"{self.text(j['unit'])}{j['pid'] or ''}@{host}"
            else:
                key = self.text(key)
        redacted = f"{self.text(base)} [{key}]"
        if name != clean:
            self._names[clean] = redacted
        self._names[name] = redacted
        return redacted

    def _register_sources(self, obj) -> None:
        for s in getattr(obj, "sources", ()):
            self.source_name(s.name, s.input)
        findings = getattr(obj, "findings", None)
        for f in findings if findings is not None else [obj]:
            self.source_name(f.source)
            for e in f.evidence:
                self.source_name(e.source)
        for r in getattr(obj, "runs", ()):
            self.source_name(r.source)

    def _string(self, text: str) -> str:
        """One string of a verdict, redacted. A verdict repeats most of its strings (each
        point of a stats series has the same seven keys; 302 distinct of 1,622 on
        bench/generate.py's 10 MiB log), so each distinct one is redacted once: what
        :meth:`text` gives depends only on the text, the names registered (fixed before
        the strings are mapped), pseudonyms (stable once given) and the tokens seen so far
        (only ever added), so a result is reused while no token was added since."""
        name = self._names.get(text)
        if name:
            return name
        memo = self._memo.get(text)
        if memo is not None and memo[0] == len(self._tokens):
            return memo[1]
        done = self.text(text)
        if len(self._memo) < MAX_TOKENS:
            self._memo[text] = (len(self._tokens), done)
        return done

    def verdict(self, verdict):
        """A redacted, inert copy of a :class:`~vllm_doctor.verdict.Verdict` (or of one
        :class:`~vllm_doctor.verdict.Finding`); the original is not changed."""
        self._register_sources(verdict)
        return map_strings(map_strings(verdict, self._string), self.scrub)


def redact_text(text: str) -> str:
    """Return ``text`` inert and with secrets and personal data replaced (see the module doc)."""
    return Redactor().text(text)


def redact_secrets(text: str) -> str:
    """Return ``text`` inert with its credentials replaced, and nothing else (see
    :meth:`Redactor.secrets`): what error messages on standard error go through."""
    return Redactor().secrets(text)


def redact_verdict(verdict, redactor: Optional[Redactor] = None):
    """A redacted copy of a :class:`~vllm_doctor.verdict.Verdict` or
    :class:`~vllm_doctor.verdict.Finding`; pass one ``redactor`` to keep pseudonyms stable
    across calls."""
    return (redactor or Redactor()).verdict(verdict)
