"""An incident-ticket block: verdict first, key facts, evidence, remedies, what does not help."""

from __future__ import annotations

from typing import List

from .common import key_facts


def _fence(lines: List[str]) -> List[str]:
    body = "\n".join(lines)
    fence = "```"
    while fence in body:
        fence += "`"
    return [fence + "text", body, fence]


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def render_markdown(verdict) -> str:
    p = verdict.primary
    out = [
        f"## vllm-doctor: {verdict.primary_class} ({verdict.primary_code})",
        "",
        f"**Verdict:** {verdict.title}  ",
        f"**Severity:** {verdict.severity}" + (f" · **Phase:** {p.phase}" if p else ""),
        "",
    ]
    facts = key_facts(verdict, p)
    if facts:
        out += ["| fact | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in facts] + [""]
    if len(verdict.sources) > 1:
        out += ["| source | verdict | format | runs |", "|---|---|---|---|"]
        out += [f"| `{s.name}` | {s.primary_class} | {s.format} | {s.runs} |" for s in verdict.sources] + [""]
    shown = [f for f in verdict.findings if f.severity != "info"] + [
        f for f in verdict.findings if f.severity == "info"
    ]
    for f in shown:
        where = f" · `{f.source}` run {f.run}" if len(verdict.sources) > 1 else ""
        out += [f"### {f.code} {f.class_id} ({f.severity}, {f.phase}{where}): {f.title}", ""]
        if f.evidence:
            out += (
                ["Evidence:", ""]
                + _fence([f"{e.source}:{e.line}: {e.text}" + (f"   <- {e.note}" if e.note else "") for e in f.evidence])
                + [""]
            )
        if f.remedies:
            out.append("Remedies, in order:")
            out.append("")
            for r in f.remedies:
                line = f"{r.order}. {r.action}"
                if r.flag:
                    line += f" — `{r.flag}`"
                if r.why:
                    line += f" ({r.why})"
                out.append(line)
            out.append("")
        if f.does_not_help:
            out += ["Does not help:", ""] + [f"- {d}" for d in f.does_not_help] + [""]
        for n in f.notes:
            out += [f"> {n}", ""]
    src = ", ".join(f"`{s.name}` ({_n(s.lines, 'line')}, {_n(s.runs, 'run')})" for s in verdict.sources)
    out += ["---", f"vllm-doctor {verdict.tool_version} · schema {verdict.schema_version} · {src}", ""]
    return "\n".join(out)
