"""The one label table: knowledge/ui.yaml, in the language asked for, for every command's output.

Headings, column names and the fixed sentences of text, Markdown and HTML answers all live there
(ids are prefixed by the command that shows them: ``plan-``, ``estimate-``, ``snapshot-``, ...); domain
text (causes, fixes, costs, constraints, assumptions) stays in its own table.
"""

from __future__ import annotations

from ..knowledge import Knowledge

_CACHE: dict[tuple[int, str], tuple[Knowledge, dict[str, str]]] = {}


def labels(kb: Knowledge, lang: str) -> dict[str, str]:
    """``id -> text`` in ``lang`` (the schema requires en and zh for every label)."""
    hit = _CACHE.get((id(kb), lang))
    if hit is None or hit[0] is not kb:
        hit = _CACHE[(id(kb), lang)] = (kb, {row["id"]: row["text"][lang] for row in kb.entries("ui")})
    return hit[1]


def prefixed(kb: Knowledge, lang: str, prefix: str) -> dict[str, str]:
    """The labels of one command, without their prefix (``plan-title`` -> ``title``)."""
    return {k.removeprefix(prefix): v for k, v in labels(kb, lang).items() if k.startswith(prefix)}
