"""Render the report dict as an agent-ready Markdown answer.  Lays out; never computes or words advice."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..knowledge import Knowledge
from ..textfmt import code_ranges, human
from .labels import labels

TEMPLATES = Path(__file__).resolve().parent / "templates"


@lru_cache(maxsize=1)
def _environment():
    """One environment per process, so a template is compiled once however many answers are rendered (the
    benchmark and the tests render hundreds in one process); its loader still reloads an edited template."""
    import jinja2  # imported only when Markdown is asked for

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["human"] = human
    return env


LEAD_WORDS = 120  # issue 11: the answer an agent can paste as it is, before any detail
# The interface a lead shows the first fix in: the one a user edits first when several are listed.
LEAD_INTERFACES = ("framework", "env", "bridge_override", "megatron_lm", "bridge_python", "perf_script", "shell")
_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
# \u3002 \uff01 \uff1f \uff1b \uff0c: the Chinese full stop and the full-width "!", "?", ";", ","
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"'])|(?<=[\u3002\uff01\uff1f\uff1b])")


def words(text: str) -> int:
    """Words as a reader counts them: Latin tokens, and two CJK characters for one word."""
    cjk = len(_CJK.findall(text))
    return len(_CJK.sub(" ", text).split()) + (cjk + 1) // 2


def first_sentence(text: str) -> str:
    """Up to the first sentence end outside a code span (a quoted log line has full stops of its own)."""
    text = text.strip()
    spans = code_ranges(text)
    end = next((m.start() for m in _SENTENCE_END.finditer(text)
                if not any(a < m.start() < b for a, b in spans)), len(text))
    return text[:end].rstrip("\uff1b;\uff0c,: ")


def lead_lines(report: Mapping[str, Any], t: Mapping[str, str]) -> list[str]:
    """Cause with its numbers, the first fix as exact lines with its predicted effect and cost, what not to do.

    Parts are added in that order while the lead stays within LEAD_WORDS; a part that would not fit is
    shortened to its title (the full text follows the lead).
    """
    parts: list[tuple[str, str]] = []  # (full, short)
    sit = report.get("situation") or {}
    if sit.get("line"):  # what was read comes first: the user checks it against what they said
        label = f"**{t['lead-situation']}:**"
        parts.append((f"{label} {sit['line']}", f"{label} {sit.get('short') or sit['line']}"))
    candidates = sit.get("candidates") or []
    if candidates:  # thin evidence: the causes still open, not one guess
        titles = "; ".join(c["title"] for c in candidates)
        label = f"**{t['lead-cause-open']}:**"
        fixes = report.get("fixes") or []
        led_by_check = bool(fixes) and "thin-evidence" in (fixes[0].get("because") or [])
        tail = f" - {t['lead-cause-open-tail']}" if led_by_check else ""  # only when the first fix is that check
        parts.append((f"{label} {titles}{tail}", f"{label} {titles}"))
    elif report.get("causes"):
        cause = report["causes"][0]
        evidence = first_sentence(cause["evidence"][0]) if cause.get("evidence") else ""
        full = f"**{t['lead-cause']}:** {cause['title']}" + (f" - {evidence}" if evidence else "")
        parts.append((full, f"**{t['lead-cause']}:** {cause['title']}"))
    else:
        label = f"**{t['lead-cause']}:**"
        parts.append((f"{label} {t['no-cause']}", f"{label} {first_sentence(t['no-cause'])}"))
    if report.get("fixes"):
        fix = report["fixes"][0]
        iface = next((i for i in LEAD_INTERFACES if fix["apply"].get(i)), None)
        lines = "; ".join(f"`{line}`" for line in (fix["apply"][iface][:2] if iface else []))
        sim = fix.get("simulation") or {}
        effect = []
        if sim.get("predicted_peak_bytes") is not None:
            effect.append(f"{t['ledger-peak']} {sim['predicted_peak_bytes'] / 2**30:.1f} GiB")
        if sim.get("predicted_saving_bytes") is not None:
            effect.append(f"{t['ledger-saving']} {sim['predicted_saving_bytes'] / 2**30:.1f} GiB")
        if sim.get("fits") is not None:
            effect.append(t["ledger-fits"] if sim["fits"] else t["ledger-does-not-fit"])
        head = f"**{t['lead-fix']}:** {fix['title']} (`{fix['id']}`)" + (f": {lines}" if lines else "")
        parts.append((head + (f" ({', '.join(effect)})" if effect else ""), head))
        cost = f"**{t['throughput-cost']}:** {first_sentence(fix['throughput_cost'])}"
        parts.append((cost, cost))
    if report.get("avoid"):
        titles = "; ".join(a["title"] for a in report["avoid"][:3])
        parts.append((f"**{t['lead-avoid']}:** {titles}", f"**{t['lead-avoid']}:** {report['avoid'][0]['title']}"))
    if not sit.get("line"):
        return _fit(parts)
    rest = parts[1:]
    minimal = f"**{t['lead-situation']}:** {(sit.get('short') or sit['line']).split('; ')[0]}"
    for head in (parts[0][0], parts[0][1], minimal):  # the situation's clues give way first to what follows it
        out = [head, *_fit(rest, words(head))]
        if len(out) == len(parts):
            return out
    return out


def _fit(parts: list[tuple[str, str]], used: int = 0) -> list[str]:
    """Every part, in full where the lead stays within LEAD_WORDS: the longest part that has a shorter form gives way
    first, and only when every part is short and the lead is still too long are parts left out from the end."""
    chosen = [full for full, _ in parts]
    while used + sum(words(p) for p in chosen) > LEAD_WORDS:
        longer = [i for i, (full, short) in enumerate(parts) if chosen[i] == full and short != full]
        if not longer:
            break
        i = max(longer, key=lambda k: words(parts[k][0]) - words(parts[k][1]))
        chosen[i] = parts[i][1]
    while chosen and used + sum(words(p) for p in chosen) > LEAD_WORDS:
        chosen.pop()
    return chosen


def render_markdown(report: Mapping[str, Any], kb: Knowledge, template: str = "diagnosis.md.j2",
                    detail: bool = False) -> str:
    """The answer: a lead of at most LEAD_WORDS, then the reasoning (all of it, every interface and source, with
    ``detail``; otherwise each fix in the lead's interface, without sources)."""
    tmpl = _environment().get_template(template)
    t = labels(kb, report["lang"])
    return tmpl.render(r=report, t=t, lead=lead_lines(report, t), detail=detail,
                       interfaces=LEAD_INTERFACES).strip() + "\n"
