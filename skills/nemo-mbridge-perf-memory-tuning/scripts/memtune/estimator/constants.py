"""The estimator's numbers, read once from knowledge/estimator.yaml (never restated in code).

``constants(kb)`` turns the table into a plain mapping ``id -> value`` and caches
it per knowledge-base object, so the planner can call ``estimate`` thousands of
times without touching YAML.  ``text(kb, id, lang)`` returns an assumption
sentence in the requested language; ``english(kb)`` is the same lookup for
English, memoised, for callers that ask for the same few ids per estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..knowledge import Knowledge, KnowledgeError

_CACHE: dict[int, tuple[Knowledge, dict[str, Any], dict[str, dict[str, str]]]] = {}


def _build(kb: Knowledge) -> tuple[Knowledge, dict[str, Any], dict[str, dict[str, str]]]:
    table = kb.tables.get("estimator")
    if not isinstance(table, dict) or "estimator" not in table:
        raise KnowledgeError("estimator.yaml: missing (register 'estimator' in knowledge/index.yaml tables)")
    values = {row["id"]: row["value"] for row in table["estimator"]}
    texts = {row["id"]: row["text"] for row in table.get("assumptions", [])}
    return kb, values, texts


def _entry(kb: Knowledge) -> tuple[Knowledge, dict[str, Any], dict[str, dict[str, str]]]:
    hit = _CACHE.get(id(kb))
    if hit is None or hit[0] is not kb:
        hit = _build(kb)
        _CACHE[id(kb)] = hit
    return hit


def constants(kb: Knowledge) -> dict[str, Any]:
    return _entry(kb)[1]


def text(kb: Knowledge, ident: str, lang: str = "en") -> str:
    texts = _entry(kb)[2]
    if ident not in texts:
        raise KnowledgeError(f"estimator.yaml: no assumption with id {ident!r}")
    return texts[ident].get(lang) or texts[ident]["en"]


_ENGLISH: dict[int, tuple[Knowledge, Callable[[str], str]]] = {}


def english(kb: Knowledge) -> Callable[[str], str]:
    """``lambda ident: text(kb, ident)`` that remembers every answer (an estimate lists about ten ids)."""
    hit = _ENGLISH.get(id(kb))
    if hit is None or hit[0] is not kb:
        seen: dict[str, str] = {}

        def lookup(ident: str) -> str:
            value = seen.get(ident)
            if value is None:
                value = seen[ident] = text(kb, ident)
            return value

        hit = _ENGLISH[id(kb)] = (kb, lookup)
    return hit[1]
