"""The planner's search space and cost table, read from knowledge/costs.yaml and fixes.yaml.

An option (a recompute choice, a model-state choice, an offload, a PEFT switch) is defined by Bridge
overrides in the syntax of a fix in fixes.yaml.  ``load`` turns each into the TrainingConfig field values
it sets by running the overrides through the same reader users' ``--set`` values go through, so the
planner, the estimator and the printed overrides agree on what an option means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..facts import TrainingConfig
from ..inputs.config import BRIDGE_KEYS, FIELD_KINDS, SAME_NAME_SECTIONS, apply_overrides
from ..knowledge import Knowledge, KnowledgeError

GROUPS = ("activation_offload", "recompute", "model_state", "peft")


@dataclass(frozen=True)
class Option:
    """One choice of one group; ``fields`` are the TrainingConfig values its overrides set."""

    id: str
    group: str
    fix: str
    overrides: tuple[str, ...]
    fields: Mapping[str, Any]
    costs: tuple[str, ...]
    applies_when: Mapping[str, Any] | None = None
    layers_fraction: float | None = None
    fallback: bool = False
    chain: str | None = None  # options of one chain are ordered by the memory they need (see costs.yaml)
    rank: int = 0


@dataclass(frozen=True)
class Space:
    """Everything the planner reads from the knowledge base, resolved once per knowledge base."""

    costs: Mapping[str, Mapping[str, Any]]
    options: Mapping[str, tuple[Option, ...]]
    group_fields: Mapping[str, frozenset[str]]  # every field some option of the group sets
    field_keys: Mapping[str, str]  # TrainingConfig field -> the Bridge override key that sets it
    micro_batch_sizes: tuple[int, ...]
    layout_overrides: tuple[str, ...]  # override templates of the parallel sizes and micro-batch size


def field_of(key: str) -> str | None:
    """The TrainingConfig field a Bridge ``section.key`` sets, as the config reader maps it."""
    target = BRIDGE_KEYS.get(key)
    if isinstance(target, str):
        return target
    section, _, name = key.partition(".")
    if section in SAME_NAME_SECTIONS and name in FIELD_KINDS:
        return name
    return None


def split(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key.strip().strip("'\""), value


def _fix_overrides(kb: Knowledge, fix_id: str) -> tuple[str, ...]:
    fix = kb.get("fixes", fix_id)
    return tuple(fix.get("apply", {}).get("bridge_override", []))


def override_fields(overrides: tuple[str, ...], kb: Knowledge) -> dict[str, Any]:
    """TrainingConfig field -> value that Bridge overrides set, read by the same reader as users' ``--set``."""
    cfg = apply_overrides(TrainingConfig(), list(overrides), kb, hints=False)
    values = {}
    for text in overrides:
        name = field_of(split(text)[0])
        if name:
            values[name] = vars(cfg)[name]
    return values


def _option(kb: Knowledge, group: str, row: Mapping[str, Any]) -> Option:
    overrides = tuple(row.get("overrides") or _fix_overrides(kb, row["fix"]))
    values = override_fields(overrides, kb)
    return Option(
        id=row["id"], group=group, fix=row["fix"], overrides=overrides, fields=values,
        costs=tuple(row.get("costs", [])), applies_when=row.get("applies_when"),
        layers_fraction=row.get("layers_fraction"), fallback=bool(row.get("fallback")),
        chain=(row.get("memory") or {}).get("chain"), rank=int((row.get("memory") or {}).get("rank", 0)),
    )


_CACHE: dict[int, tuple[Knowledge, Space]] = {}


def load(kb: Knowledge) -> Space:
    hit = _CACHE.get(id(kb))
    if hit is not None and hit[0] is kb:
        return hit[1]
    table = kb.tables.get("costs")
    if not isinstance(table, dict) or "costs" not in table:
        raise KnowledgeError("costs.yaml: missing (register 'costs' in knowledge/index.yaml tables)")
    costs = {row["id"]: row for row in table["costs"]}
    options = {g: tuple(_option(kb, g, row) for row in table["options"].get(g, [])) for g in GROUPS}
    for group in options.values():
        for opt in group:
            for cost in opt.costs:
                if cost not in costs:
                    raise KnowledgeError(f"costs.yaml: option {opt.id}: unknown cost {cost!r}")
    layout = tuple(o for fix in table["search"]["layout_fixes"] for o in _fix_overrides(kb, fix)) + tuple(
        table["search"].get("layout_overrides", []))
    keys: dict[str, str] = {}
    for text in layout + tuple(o for g in options.values() for opt in g for o in opt.overrides):
        key = split(text)[0]
        name = field_of(key)
        if name:
            keys.setdefault(name, key)
    space = Space(
        costs=costs,
        options=options,
        group_fields={g: frozenset(f for opt in opts for f in opt.fields) for g, opts in options.items()},
        field_keys=keys,
        micro_batch_sizes=tuple(table["search"]["micro_batch_sizes"]),
        layout_overrides=layout,
    )
    _CACHE[id(kb)] = (kb, space)
    return space
