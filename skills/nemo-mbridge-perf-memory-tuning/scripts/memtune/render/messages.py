"""The short status lines of ``kb``, ``apply``, ``rollback`` and ``explain``, from knowledge/ui.yaml.

Each function returns the lines; the command hands them to ``out.emit_lines``.  Diffs and YAML are
passed through unchanged: they are the file's own text, not ours to translate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..knowledge import Knowledge
from .labels import labels


def line(kb: Knowledge, lang: str, ident: str, **values: Any) -> str:
    """One label with its {placeholders} filled."""
    return labels(kb, lang)[ident].format(**values)


def notes(kb: Knowledge, lang: str, texts: Sequence[str]) -> list[str]:
    head = labels(kb, lang)["apply-note"]
    return [f"{head}: {text}" for text in texts]


def kb_summary(kb: Knowledge, lang: str, problems: Sequence[str]) -> list[str]:
    counts = ", ".join(f"{len(kb.entries(t))} {t}" for t in kb.index["tables"])
    ident = "kb-invalid" if problems else "kb-valid"
    return [*problems, line(kb, lang, ident, version=kb.version, counts=counts)]


def explain(kb: Knowledge, lang: str, table: str, ident: str, entry: Mapping[str, Any]) -> list[str]:
    import yaml

    body = yaml.safe_dump(dict(entry), allow_unicode=True, sort_keys=False, width=100).rstrip()
    return [line(kb, lang, "explain-head", table=table, id=ident), body]
