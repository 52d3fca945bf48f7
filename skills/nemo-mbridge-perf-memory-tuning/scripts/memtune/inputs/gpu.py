"""GPU type -> GpuFacts, by name (``--gpu H100``, a question) or by the capacity an OOM message reports.

Names and capacities live in knowledge/gpus.yaml.  A capacity picks the GPU whose reported
capacity is nearest, within the table's tolerance; every GPU inside the tolerance is kept in
``candidates`` so a renderer can say "H100 80GB (or A100 80GB)" instead of guessing silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from ..errors import UserError
from ..facts import GpuFacts

GIB = 2**30


def _table(kb: Any) -> Mapping[str, Any]:
    if kb is None:
        from .. import knowledge

        kb = knowledge.load()
    return kb.tables.get("gpus") or {}


def _entries(kb: Any) -> list[Mapping[str, Any]]:
    return list(_table(kb).get("gpus") or [])


# Left of a GPU name: not a letter ("GB200" is not "B200"), except the "x" of a count ("8xH100"); a digit
# is fine ("4x8H200" = 4 nodes of 8 H200).
ALIAS_LEFT = r"(?:(?<![A-Za-z])|(?<=[0-9][xX]))"


@lru_cache(maxsize=256)
def alias_regex(alias: str) -> re.Pattern[str]:
    """An alias as it may appear in text: not glued to a letter before (but "8xH100" is fine), nor a digit after."""
    return re.compile(rf"{ALIAS_LEFT}(?:{alias})(?![0-9])", re.I | re.A)


def find_gpus(text: str, kb: Any = None) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """Every (start, end, gpus.yaml entry) mention in ``text``; overlapping mentions keep the longest."""
    hits = []
    for entry in _entries(kb):
        for alias in entry.get("aliases") or []:
            for m in alias_regex(alias).finditer(text):
                hits.append((m.start(), m.end(), entry))
    hits.sort(key=lambda h: (h[0], -(h[1] - h[0])))
    last_end = -1
    for start, end, entry in hits:
        if start >= last_end:
            last_end = end
            yield start, end, entry


def gpu_pattern(kb: Any = None) -> str:
    """One alternation of every alias, for patterns that embed ``{gpu}``."""
    aliases = sorted((a for e in _entries(kb) for a in e.get("aliases") or []), key=len, reverse=True)
    return "(?:" + "|".join(f"(?:{a})" for a in aliases) + r")(?![0-9])"


def facts_for(entry: Mapping[str, Any], inferred_from: str, candidates: list[str] | None = None) -> GpuFacts:
    cap = entry.get("capacity_gib")
    return GpuFacts(
        name=entry["name"],
        capacity_bytes=cap * GIB if cap else None,
        nominal_gb=entry.get("nominal_gb"),
        arch=entry.get("arch"),
        nvlink_domain=entry.get("nvlink_domain"),
        hardware=entry.get("hardware"),
        inferred_from=inferred_from,
        candidates=candidates or [entry["id"]],
    )


def lookup_gpu(name_or_capacity: str | float | int, kb: Any = None) -> GpuFacts:
    """A GPU by name/alias (UserError if unknown) or by reported capacity in bytes (nearest GPU)."""
    if isinstance(name_or_capacity, (int, float)) and not isinstance(name_or_capacity, bool):
        return gpu_from_capacity(float(name_or_capacity), kb)
    text = str(name_or_capacity).strip()
    by_id = {e["id"]: e for e in _entries(kb)}
    if text.lower() in by_id:
        return facts_for(by_id[text.lower()], "name")
    for start, end, entry in find_gpus(text, kb):
        if start == 0 and end >= len(text.rstrip("s")):
            return facts_for(entry, "name")
    known = ", ".join(e["name"] for e in _entries(kb))
    raise UserError(f"--gpu {text!r}: unknown GPU (known: {known})")


def gpu_from_capacity(capacity_bytes: float, kb: Any = None) -> GpuFacts:
    """The GPU whose usable capacity is nearest ``capacity_bytes``; unnamed if none is close enough."""
    table = _table(kb)
    tol = float(table.get("capacity_match_tolerance_gib") or 0) * GIB
    scored = []
    for entry in _entries(kb):
        seen = [entry.get("capacity_gib"), *(entry.get("capacity_gib_observed") or [])]
        dists = [abs(c * GIB - capacity_bytes) for c in seen if c]
        if dists and min(dists) <= tol:
            scored.append((min(dists), entry))
    if not scored:
        return GpuFacts(capacity_bytes=capacity_bytes, inferred_from="capacity")
    scored.sort(key=lambda s: s[0])
    facts = facts_for(scored[0][1], "capacity", [e["id"] for _, e in scored])
    facts.capacity_bytes = capacity_bytes
    return facts
