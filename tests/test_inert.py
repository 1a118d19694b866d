"""Output is inert: no hostile string in any field reaches a terminal, a ticket or a JSON
reader as anything but text (issue 16, "Output is inert")."""

import json

import pytest
import regex
from click.testing import CliRunner
from markdown_it import MarkdownIt

from vllm_doctor.cli import cli as main
from vllm_doctor.redact import redact_verdict
from vllm_doctor.render import render
from vllm_doctor.render.inert import clean, clean_output, one_line
from vllm_doctor.render.markdown import code, prose
from vllm_doctor.verdict import Evidence, Finding, Remedy, RunSummary, SourceSummary, Verdict

#: Strings a log (or a prompt, a header, a file name) can carry, and what each attacks.
HOSTILE = {
    "clear screen": "\x1b[2J\x1b[H",
    "reset terminal": "\x1bc",
    "DEC line drawing": "\x1b(0lqqk",
    "DEC screen alignment": "\x1b#8",
    "DCS request": "\x1bP$q m\x1b\\",
    "device attributes query": "\x1b[>c\x1b[6n",
    "save/restore cursor": "\x1b7moved\x1b8",
    "next line / reverse index": "\x1bE\x1bMhealthy (VD000, ok) No memory or slowdown problem found",
    "8-bit CSI": "\x9b31mred\x9b0m",
    "8-bit OSC title": "\x9d0;owned\x07",
    "OSC 8 hyperlink": "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07",
    "unterminated OSC": "\x1b]0;title",
    "bidi override": "abc\u202edcba\u202c",
    "bidi isolate": "\u2066x\u2069\u2067y\u2069\u2068z\u2069",
    "bidi marks": "\u200e\u200f\u061c",
    "zero width": "t\u200bo\u200ck\u200de\u2060n\ufeff",
    "C0 controls": "\x00\x01\x07\x08\x0b\x0c\x0e\x1f",
    "carriage return": "safe\rhealthy (VD000, ok)",
    "DEL and C1": "\x7f\x80\x85\x9f",
    "forged line": "x\nhealthy (VD000, ok) No memory or slowdown problem found",
    "CRLF": "x\r\n\r\n## forged heading",
    "unicode line separators": "x\u2028y\u2029z",
    "tag characters": "\U000e0041\U000e0042",
    "lone surrogate": "a\ud800b",
    "html close details": "</details><details open><summary>forged</summary>",
    "script": "<script>alert(1)</script>",
    "img onerror": '<img src=x onerror="alert(1)">',
    "javascript link": "[click](javascript:alert(1))",
    "tracking pixel": "![](https://evil.example/pixel.png?u=1)",
    "autolink": "<https://evil.example>",
    "reference link": "[x]: https://evil.example",
    "mentions": "@here @channel @everyone",
    "emoji code": ":smile: :rotating_light:",
    "rich markup": "[bold red]x[/] [link=https://evil.example]y[/link]",
    "table break": "a | b | c",
    "fence break": "````\n# out of the fence",
    "backticks": "`a` ``b`` ```c```",
    "tilde fence": "~~~",
    "emphasis": "**bold** __b__ *i* _i_ ~~s~~",
    "html comment": "<!-- swallow the rest",
    "entity": "&lt;script&gt; &#60;b&#62;",
    "heading": "# Heading",
    "list start": "1. item",
    "dash start": "- item",
    "quote start": "> quote",
    "rule": "---",
    "setext": "===",
    "math": "$x^2$ $$y$$",
    "backslash": "trailing \\",
    "long": "A" * 5000,
}

# What no output may contain (escape sequences are caught by their ESC / C1 introducer).
FORBIDDEN = regex.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\U000e0000-\U000e007f\ud800-\udfff\u2028\u2029]"
)
ALLOWED_TAGS = {
    "h2",
    "h3",
    "p",
    "strong",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "pre",
    "code",
    "ol",
    "ul",
    "li",
    "blockquote",
    "hr",
    "br",
    # the ticket's own collapsed block of full log lines (counted below: never one of the log's)
    "details",
    "summary",
}


def verdict_with(s: str) -> Verdict:
    """A verdict with ``s`` in every string field any renderer prints."""
    src = f"in{s}.log [vllm{s}[12]@host{s}]"
    finding = Finding(
        class_id="kv_cache_capacity",
        code="VD101",
        severity="critical",
        phase="startup",
        title=f"title {s}",
        source=src,
        run=1,
        facts={"model": f"model {s}", "vllm_version": f"v {s}", "exception": f"Err{s}", "max_model_len": 4096},
        evidence=[Evidence(source=src, line=3, text=f"evidence {s}", note=f"note {s}")],
        remedies=[Remedy(order=1, action=f"action {s}", flag=f"--flag {s}", why=f"why {s}")],
        does_not_help=[f"{s} does not help"],
        notes=[f"{s} note"],
    )
    info = Finding("startup_memory_contention", "VD110", "info", "startup", f"{s}", source=src, run=1, notes=[s])
    run = RunSummary(src, 1, 1, 9, "startup", "v1", config={"model": f"m{s}", "kv_cache_dtype": s}, facts={})
    sources = [
        SourceSummary(name=src, input=f"in{s}.log", format=f"fmt{s}", lines=9, runs=1, vllm_output=True, wrappers=[s]),
        SourceSummary(name=f"other{s}.log", input=f"other{s}.log", error=f"error {s}", primary_class="unknown"),
    ]
    return Verdict(
        "kv_cache_capacity",
        "VD101",
        "critical",
        f"headline {s}",
        findings=[finding, info],
        runs=[run],
        sources=sources,
        tool_version=f"0.1.0{s}",
        primary_finding=finding,
    )


#: Width at which nothing in these verdicts wraps: the line structure then shows injection
#: only (at a terminal's width, fields of other lengths wrap differently, which is layout).
UNWRAPPED = 100_000


def rendered(verdict, fmt: str) -> str:
    return render(verdict, fmt, width=UNWRAPPED)


BENIGN = {fmt: rendered(verdict_with("x"), fmt) for fmt in ("text", "markdown", "json")}


def assert_inert_text(out: str) -> None:
    bad = FORBIDDEN.search(out)
    assert bad is None, (bad.group(), out[max(0, bad.start() - 40) : bad.end() + 40])


def html_of(md: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(md)


@pytest.mark.parametrize("name", list(HOSTILE))
@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_every_field_of_every_format_is_inert(name, fmt):
    s = HOSTILE[name]
    out = rendered(verdict_with(s), fmt)
    assert_inert_text(out)
    # No field can add, remove or forge a line: the layout is the benign one (a 5000-character
    # evidence line is clipped, and the ticket then adds the full line below it: layout).
    long = name == "long"
    if not (long and fmt != "json"):
        assert out.count("\n") == BENIGN[fmt].count("\n")
    lines = out.splitlines()
    assert not any(line.startswith(("healthy", "## forged", "# out of")) for line in lines)
    if fmt == "json":
        d = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
        assert d["title"].startswith("headline")
    if fmt == "markdown":
        html = html_of(out)
        tags = set(regex.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", html))
        assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
        attrs = regex.findall(r"<[a-z0-9]+(\s[^>]*)>", html)
        assert set(attrs) <= {' class="language-text"', " /"}, attrs
        assert html.count("<tr>") == html_of(BENIGN["markdown"]).count("<tr>")
        assert html.count("<li>") == html_of(BENIGN["markdown"]).count("<li>")
        assert html.count("<pre>") == 1 + long  # the evidence (and the full line, when clipped)
        assert html.count("<details>") == html.count("<summary>") == long
        # mentions and emoji codes outside code are escaped in the source
        outside_code = regex.sub(r"(?s)(`+).*?\1", "", out)
        assert not regex.search(r"(?<!\\)@(?:here|channel|everyone)", outside_code)
        assert not regex.search(r"(?<!\\):smile:", outside_code)


def test_colour_text_keeps_only_its_own_colour_codes():
    out = render(verdict_with(HOSTILE["next line / reverse index"] + HOSTILE["8-bit CSI"]), "text", color=True)
    assert regex.findall(r"\x1b\[[0-9;]*m", out)  # rich's styles are there
    assert_inert_text(regex.sub(r"\x1b\[[0-9;]*m", "", out))
    assert "\x1bE" not in out and "\x1bM" not in out


def test_rich_neither_interprets_markup_nor_emoji_codes():
    out = render(verdict_with(":smile: [bold]b[/] [/]"), "text")
    assert ":smile: [bold]b[/] [/]" in out
    assert "\U0001f604" not in out  # 😄


def test_markdown_code_span_outgrows_backticks_and_escapes_table_pipes():
    assert code("a``b") == "```a``b```"
    assert code("`x`") == "`` `x` ``"
    assert code("a|b", in_table=True) == "`a\\|b`"
    html = html_of("| a |\n|---|\n| " + code("x`` | <b>", in_table=True) + " |\n")
    assert "<code>x`` | &lt;b&gt;</code>" in html


def test_prose_is_escaped_for_markdown_and_html_and_stays_readable():
    assert prose("max_model_len 0.9 -> 0.93") == "max_model_len 0.9 -> 0.93"
    assert prose("<img src=x>") == "&lt;img src=x>"
    assert prose("&#60;") == "&amp;\\#60;"
    assert prose("- x", line_start=True) == "\\- x"
    assert prose("12. x", line_start=True) == "12\\. x"
    html = html_of(prose("[x](javascript:alert(1)) **b** @here :smile:"))
    assert "<a" not in html and "<strong>" not in html


def test_clean_drops_sequences_whole_and_keeps_text():
    assert clean("a\x1b[31mred\x1b[0m b") == "a red b".replace(" red", "red")
    assert clean("\x1b]0;title\x07text") == "text"
    assert clean("\x1b(0x\x1b#8y") == "xy"
    assert clean("tab\tand\nnewline") == "tab\tand\nnewline"
    assert one_line("a\nb\r\nc") == "a\u23ceb\u23cec"
    assert clean(clean("\x9b1mz")) == clean("\x9b1mz") == "z"
    assert clean_output("\x1b[1mx\x1b[0m\x1bc", sgr=True) == "\x1b[1mx\x1b[0m"


def test_redacted_verdict_is_inert_too():
    out = rendered(redact_verdict(verdict_with(HOSTILE["forged line"] + HOSTILE["bidi override"])), "text")
    assert_inert_text(out)
    assert out.count("\n") == BENIGN["text"].count("\n")


def _hostile_log(tmp_path):
    payload = (
        "\x1bE\x1bMhealthy (VD000, ok) No memory or slowdown problem found\x9b2J\u202e "
        "</details><script>alert(1)</script> [x](javascript:alert(1)) @here :smile: | a | `b`"
    )
    log = tmp_path / "server\x1b[31m`|<b>.log"
    log.write_text(
        f"INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.10.1{payload}\n"
        f"INFO 01-01 00:00:00 [api_server.py:1] non-default args: {{'model': 'org/m{payload}'}}\n"
        "ERROR 01-01 00:00:01 [core.py:1] EngineCore failed to start.\n"
        "ERROR 01-01 00:00:01 [core.py:1] Traceback (most recent call last):\n"
        'ERROR 01-01 00:00:01 [core.py:1]   File "/x/vllm/v1/engine/core.py", line 1, in run\n'
        f"ERROR 01-01 00:00:01 [core.py:1] ValueError: bad{payload}\n",
        encoding="utf-8",
    )
    return log


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
@pytest.mark.parametrize("redact", [True, False])
def test_a_hostile_log_through_the_cli_prints_inert(tmp_path, fmt, redact):
    log = _hostile_log(tmp_path)
    out_file = tmp_path / f"out.{fmt}"
    args = ["diagnose", "-f", fmt, "-o", str(out_file), str(log)] + ([] if redact else ["--no-redact"])
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1, r.output
    for out in (r.stdout, out_file.read_text(encoding="utf-8")):
        assert_inert_text(out)
        assert not any(line.startswith("healthy") for line in out.splitlines())
    assert r.stdout.startswith("VD900 other (critical, high confidence)")
    written = out_file.read_text(encoding="utf-8")
    if fmt == "markdown":
        tags = set(regex.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", html_of(written)))
        assert tags <= ALLOWED_TAGS
    if fmt == "json":
        assert json.loads(written)["primary_class"] == "other"
