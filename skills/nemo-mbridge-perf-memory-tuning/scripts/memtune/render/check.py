"""``memtune check``: the violated constraints as rows (JSON, knowledge/schema/check.schema.json) or text.

A row carries what an agent needs to act without a second lookup: the title and message in the asked
language, and the upstream error with where Megatron-Core / Bridge raises it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..knowledge import Knowledge
from .labels import labels


def rows(violation_ids: Iterable[str], kb: Knowledge, lang: str) -> list[dict[str, Any]]:
    out = []
    for ident in violation_ids:
        con = kb.get("constraints", ident)
        out.append({"id": ident, "title": con["title"][lang], "message": " ".join(con["message"][lang].split()),
                    "upstream_error": con.get("upstream_error"), "raised_at": con.get("raised_at")})
    return out


def to_json(found: list[Mapping[str, Any]], kb: Knowledge) -> dict[str, Any]:
    return {"kb_version": kb.version, "violations": list(found)}


def render_text(found: list[Mapping[str, Any]], kb: Knowledge, lang: str) -> str:
    t = labels(kb, lang)
    out = []
    for row in found:
        out += [f"{row['id']}: {row['title']}", f"  {row['message']}"]
        if row["upstream_error"]:
            where = f" ({t['check-raised-at']} {row['raised_at']})" if row["raised_at"] else ""
            out.append(f"  {t['check-upstream']}: \"{row['upstream_error']}\"{where}")
    out.append(t["check-count"].format(count=len(found)))
    return "\n".join(out) + "\n"
