"""``memtune verify``: the check list and the pass/fail table, as text or JSON
(knowledge/schema/verify.schema.json).  Headings from knowledge/ui.yaml (``verify-*``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from ..knowledge import Knowledge
from .grid import table
from .labels import labels


def list_json(entries: Sequence[Mapping[str, Any]], kb: Knowledge) -> dict[str, Any]:
    return {"mode": "list", "kb_version": kb.version, "checks": [dict(e) for e in entries]}


def list_text(entries: Sequence[Mapping[str, Any]], kb: Knowledge, lang: str) -> str:
    t = labels(kb, lang)
    out = []
    for e in entries:
        out.append(f"{e['id']}  [{e['kind']}]  {e['title']}")
        if e["run"]:
            gpus = "  " + t["verify-gpus"].format(count=e["gpus"]) if e["gpus"] else ""
            note = "   (" + t["verify-needs"].format(sources=e["run_note"]) + ")" if e["run_note"] else ""
            out.append(f"    {t['verify-run']}: {e['run']}{note}{gpus}")
        out.append(f"    {e['checks']}")
    return "\n".join(out) + "\n" if out else ""


def detail(result: Any, kb: Knowledge, lang: str) -> str:
    """The failure text or line to run; for a skipped step, its reason worded from ui.yaml."""
    if result.reason is None:
        return result.detail
    ident, values = result.reason
    return labels(kb, lang)[ident].format(**values)


def results_json(results: Sequence[Any], titles: Mapping[str, str], kb: Knowledge, lang: str) -> dict[str, Any]:
    rows = []
    for r in results:
        row = {k: v for k, v in asdict(r).items() if k != "reason"}
        rows.append({**row, "detail": detail(r, kb, lang), "title": titles[r.id]})
    return {"mode": "results", "kb_version": kb.version, "results": rows}


def results_text(results: Sequence[Any], kb: Knowledge, lang: str) -> str:
    t = labels(kb, lang)
    heads = [h.strip() for h in t["verify-columns"].split("|")]
    out = table([heads, *([r.id, r.kind, r.status, detail(r, kb, lang)] for r in results)], left=4)
    if any(r.status == "to-run" for r in results):
        out += ["", t["verify-nothing-started"]]
    return "\n".join(out) + "\n"
