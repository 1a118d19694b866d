"""Fuzz: mutated corpus logs through the command, in every format (issue 16).

Each case takes a real corpus log and damages it the ways logs are damaged on their way to
us - lines dropped, duplicated or cut, bytes flipped, escape sequences and control
characters inserted, hostile numbers planted (400-digit values, inf, nan, 1e308, text where
a count belongs), secrets planted, a wrapper around every line - and runs it through the
CLI's in-process path twice (``-f json`` to stdout; ``-f markdown -o FILE`` with the text
view on stdout), so every format is exercised. For every case:

* no traceback, and the exit code is 0-3;
* the JSON is strict (no NaN/Infinity) and every output is inert (no control, escape,
  bidi or invisible character);
* no planted secret shows in any output (and, so the check means something, a good share of
  them do show with ``--no-redact``);
* when the damage is unrelated (it touches only lines no catalog literal is in, and inserts
  only lines that carry no valid value), a startup failure keeps its class.

The seed is fixed, so a failure is reproducible: the case id names the seed and the log.
Envelope-level numbers (4300-digit PIDs, ranks, Ray repeat counts, a journald ``_PID`` of
``²``) belong to the envelope reader and join the mutations when it refuses them.
"""

import json
import random

import pytest
import regex
from click.testing import CliRunner
from conftest import FIXTURES, load_manifest

from vllm_doctor import diagnose
from vllm_doctor.catalog import ANCHORS
from vllm_doctor.cli import cli as main
from vllm_doctor.envelopes import unwrap
from vllm_doctor.reassemble import Reassembler

SEED = 16
CASES = 300

MANIFEST = [c for c in load_manifest() if (FIXTURES / c["file"]).suffix == ".log"]
STARTUP_FAILURES = {
    "kv_cache_capacity",
    "weight_load_oom",
    "startup_memory_contention",
    "sampler_warmup_oom",
    "cuda_graph_capture_oom",
    "quantization_unsupported",
    "config_limit_error",
}
#: Startup failures, the verdicts unrelated damage must never cost.
STARTUP_MANIFEST = [c for c in MANIFEST if c["class"] in STARTUP_FAILURES]
FORBIDDEN = regex.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff]"
)

WRAPPERS = [
    lambda i, s: f"Nov 30 03:08:{i % 60:02d} gpu-host-fz vllm[4242]: {s}",
    lambda i, s: f"2026-11-30T03:08:{i % 60:02d}.123456789Z {s}",
    lambda i, s: f"vllm-1  | {s}",
    lambda i, s: f"[pod/vllm-fz-7d9f/vllm] {s}",
    lambda i, s: f"\x1b[32m{s}\x1b[0m",
]

#: Lines whose numbers are damaged but whose wording the catalog knows; none carries a valid
#: value, so none may change a verdict.
HOSTILE_LINES = [
    "INFO 01-01 00:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation "
    "throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: " + "9" * 400 + "%",
    "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'gpu_memory_utilization': inf, 'max_model_len': '4k'}",
    "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'gpu_memory_utilization': nan, 'max_num_seqs': 1e308}",
    "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'gpu_memory_utilization': 1e308, 'tensor_parallel_size': '²'}",
    "INFO 01-01 00:00:00 [utils.py:1] non-default args: {'gpu_memory_utilization': 1.5, 'block_size': -16}",
    "INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: " + "9" * 400 + " GiB",
    "INFO 01-01 00:00:00 [kv_cache_utils.py:1] GPU KV cache size: " + "9" * 400 + " tokens",
    "INFO 01-01 00:00:00 [kv_cache_utils.py:1] Maximum concurrency for ٣٢٧٦٨ tokens per request: inf",
]
#: Noise: text a log can hold that is nothing to the catalog.
NOISE = [
    "\x1bE\x1bMhealthy (VD000, ok) No memory or slowdown problem found",
    "</details><script>alert(1)</script> [x](javascript:alert(1)) @here :smile: | a |",
    "\x9b2J\u202etxet desrever\u202c \x1b]0;title\x07 \x1bP$q m\x1b\\",
    "\x00\x01\x02 binary \x7f\x85",
]
#: Self-identifying secrets (recognisable whatever damage the line around them took).
SECRETS = [
    "hf_FzQwErTyUiOpAsDfGhJkLzX",
    "sk-proj-FzAbCdEfGhIjKlMnOpQrSt",
    "ghp_FzZx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe",
    "AKIAFZEXAMPLE7777777",
    "xoxb-1234567890-0987654321-FzQwErTyUiOpAsDf",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJmdXp6In0.RnV6elNpZ25hdHVyZQ",
    "AIzaSyFz-1a2b3c4d5e6f7g8h9i0jKlMnOpQrStU",
]
GLUE = [" Bearer ", " token=", " ", "_", "%3D", " Authorization: Bearer ", ", 'api_key': '"]


def _related(lines):
    """Indexes of the lines a diagnosis may rest on: any holding a catalog literal, any whose
    message (wrappers and process prefixes removed) is blank or indented (traceback frames,
    code lines, ``^^^`` markers), and every physical line the reassembler joins with them."""
    related = set()
    reasm = Reassembler()
    recs = []
    for i, line in enumerate(lines):
        inner = unwrap("x", i + 1, line)
        recs.extend(reasm.feed(inner))
        texts = [r.text for r in inner] or [""]
        if any(a in line for a in ANCHORS) or any(not t.strip() or t[:1].isspace() for t in texts):
            related.add(i)
    recs.extend(reasm.flush())
    for r in recs:
        group = set(range(r.lineno - 1, r.lineno + r.continued))
        if group & related:
            related |= group
    return related


def _flip(rng, text: str, most: int) -> str:
    b = bytearray(text.encode("utf-8", "surrogateescape"))
    for _ in range(rng.randint(1, most)):
        if b:
            b[rng.randrange(len(b))] = rng.randrange(256)
    return b.decode("utf-8", "replace")


def make_case(seed: int):
    """(corpus case, data bytes, planted secrets, unrelated-only damage?, wrapper or None)."""
    rng = random.Random(seed)
    unrelated_only = rng.random() < 0.4
    case = rng.choice(STARTUP_MANIFEST if unrelated_only else MANIFEST)
    lines = (FIXTURES / case["file"]).read_text(encoding="utf-8", errors="replace").splitlines() or [""]
    planted = []
    for _ in range(rng.randint(1, 4)):
        lines = [x for line in lines if line is not None for x in line.split("\n")] or [""]
        related = _related(lines)
        free = [i for i in range(len(lines)) if i not in related]
        op = rng.choice(["drop", "dup", "cut", "flip", "hostile", "noise", "secret", "secret"])
        if unrelated_only:
            # touch only lines no catalog literal is in; insert only between two such lines
            if op in ("drop", "dup", "cut", "flip"):
                if not free:
                    continue
                i = rng.choice(free)
                lines[i] = {
                    "drop": None,
                    "dup": lines[i] + "\n" + lines[i],
                    "cut": lines[i][: rng.randint(0, len(lines[i]))],
                    "flip": _flip(rng, lines[i], 3),
                }[op]
            else:
                pool = HOSTILE_LINES if op == "hostile" else NOISE if op == "noise" else SECRETS
                spots = [
                    i for i in range(len(lines) + 1) if (i == 0 or i - 1 in free) and (i == len(lines) or i in free)
                ]
                lines.insert(rng.choice(spots or [0]), rng.choice(pool))
            continue
        i = rng.randrange(len(lines))
        if op == "drop":
            lines[i] = None
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines[i] = lines[i][: rng.randint(0, len(lines[i]))]
        elif op == "flip":
            lines[i] = _flip(rng, lines[i], 8)
        elif op == "hostile":
            lines.insert(i, rng.choice(HOSTILE_LINES))
        elif op == "noise":
            lines[i] = lines[i] + " " + rng.choice(NOISE)
        else:
            # glued onto an evidence line, so that it reaches the output when shown (a verdict
            # without evidence, a healthy one, prints no log line to plant into)
            used = sorted({e.line - 1 for f in diagnose(lines).findings for e in f.evidence} & set(range(len(lines))))
            if used:
                secret = rng.choice(SECRETS)
                planted.append(secret)
                j = rng.choice(used)
                lines[j] = lines[j] + rng.choice(GLUE) + secret
    lines = [x for line in lines if line is not None for x in line.split("\n")]
    wrap = rng.choice(WRAPPERS) if rng.random() < 0.3 else None
    if wrap:
        lines = [wrap(i, s) for i, s in enumerate(lines)]
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
    if not unrelated_only and rng.random() < 0.15:
        data = data[: rng.randrange(len(data) + 1)]  # a log cut anywhere
    return case, data, planted, unrelated_only, wrap


def run(args, data):
    r = CliRunner().invoke(main, args, input=data)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1, 2, 3), r.exit_code
    return r


def strict(text):
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def verdict_class(data):
    return strict(run(["diagnose", "-f", "json", "-"], data).stdout)["primary_class"]


_baselines = {}


def baseline(case, wrap):
    key = (case["file"], wrap)
    if key not in _baselines:
        lines = (FIXTURES / case["file"]).read_text(encoding="utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if wrap:
            lines = [wrap(i, s) for i, s in enumerate(lines)]
        _baselines[key] = verdict_class(("\n".join(lines) + "\n").encode())
    return _baselines[key]


shown_unredacted = []


@pytest.mark.parametrize("seed", range(SEED * 1000, SEED * 1000 + CASES))
def test_a_mutated_corpus_log_never_costs_safety_or_the_verdict(seed, tmp_path):
    case, data, planted, unrelated_only, wrap = make_case(seed)
    out = tmp_path / "ticket.md"
    as_json = run(["diagnose", "-f", "json", "-"], data)
    as_ticket = run(["diagnose", "-f", "markdown", "-o", str(out), "-"], data)
    d = strict(as_json.stdout)
    assert d["exit_code"] == as_json.exit_code or as_json.exit_code == 2
    outputs = [as_json.stdout, as_ticket.stdout, out.read_text(encoding="utf-8")]
    for text in outputs:
        bad = FORBIDDEN.search(text)
        assert bad is None, (case["file"], repr(bad.group()))
        for secret in planted:
            assert secret not in text, (case["file"], secret)
    if planted:
        raw = run(["diagnose", "-f", "json", "--no-redact", "-"], data).stdout
        shown_unredacted.append(any(s in raw for s in planted))
    if unrelated_only:
        want = baseline(case, wrap)
        if want in STARTUP_FAILURES:
            assert d["primary_class"] == want, (case["file"], seed)


def test_planted_secrets_mostly_reach_the_output_unredacted():
    """The secret checks above mean something: most planted secrets do show with --no-redact."""
    if len(shown_unredacted) < 20:
        pytest.skip("run with the fuzz cases")
    assert sum(shown_unredacted) / len(shown_unredacted) >= 0.5, (sum(shown_unredacted), len(shown_unredacted))
