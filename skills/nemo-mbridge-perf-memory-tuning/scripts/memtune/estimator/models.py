"""Architecture presets from knowledge/models.yaml: ``preset("Llama3 70B", kb) -> TrainingConfig``."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from operator import itemgetter

from ..facts import TrainingConfig
from ..knowledge import Knowledge

_FIELDS = frozenset(f.name for f in fields(TrainingConfig))


def _norm(name: str) -> str:
    """Compare names without case, spaces, dashes, underscores, dots or an org prefix."""
    name = name.strip().lower().split("/")[-1]
    return re.sub(r"[\s\-_.]+", "", name)


def find(name: str, kb: Knowledge) -> dict:
    """The models.yaml entry whose id, name or alias matches ``name``; LookupError otherwise."""
    key = _norm(name)
    for entry in kb.entries("models"):
        names = [entry["id"], entry["name"], *entry.get("aliases", [])]
        if any(_norm(n) == key for n in names):
            return entry
    known = ", ".join(e["id"] for e in kb.entries("models"))
    raise LookupError(f"unknown model {name!r}; known presets: {known}")


def preset(name: str, kb: Knowledge) -> TrainingConfig:
    """A TrainingConfig with only the preset's architecture fields (and model_name) set."""
    entry = find(name, kb)
    arch = {k: (list(v) if isinstance(v, list) else v) for k, v in entry["arch"].items() if k in _FIELDS}
    return TrainingConfig(provided=True, source="model-preset", model_name=entry["id"], **arch)


def names(kb: Knowledge) -> list[str]:
    return [e["id"] for e in kb.entries("models")]


_FILL_CACHE: dict[tuple[int, str], tuple[dict, itemgetter] | None] = {}


def fill_from_preset(cfg: TrainingConfig, kb: Knowledge) -> TrainingConfig:
    """A config that names a known model takes the preset's architecture for every field it leaves unset.

    Bridge gets these from the model provider (dropout, norm, RoPE, qk_layernorm ...), so a layout that
    only names the model should not fall back to Megatron-Core's generic defaults.
    """
    if not cfg.model_name:
        return cfg
    key = (id(kb), cfg.model_name)
    if key not in _FILL_CACHE:
        try:
            entry = find(cfg.model_name, kb)
        except LookupError:
            entry = None
        arch = {k: v for k, v in entry["arch"].items() if k in _FIELDS} if entry else None
        # model_name rides along so the getter always answers a tuple, even for a one-field preset
        _FILL_CACHE[key] = (arch, itemgetter(*arch, "model_name")) if arch else None
    hit = _FILL_CACHE[key]
    if not hit:
        return cfg
    arch, getter = hit
    if None not in getter(cfg.__dict__):  # already filled (the planner's configs): skip the per-field walk
        return cfg
    gaps = {k: (list(v) if isinstance(v, list) else v) for k, v in arch.items() if vars(cfg)[k] is None}
    return replace(cfg, **gaps) if gaps else cfg


_SIZES: dict[int, list[tuple[float, bool, str]]] = {}


def nearest_preset(size_b: float, moe: bool | None, kb: Knowledge) -> str | None:
    """The preset whose total parameter count is nearest to ``size_b`` billions (of the same kind when known).

    A stated approximation for a model the presets lack ("GPT-30B"): layer count, width and heads of a real model
    of that size, so the estimate and every simulated fix have a shape to work on.
    """
    from .constants import constants
    from .params import arch_from_config, total_params

    if id(kb) not in _SIZES:
        defaults = constants(kb)["megatron-defaults"]
        rows = []
        for entry in kb.entries("models"):
            if entry.get("stand_in") is False:
                continue
            cfg = preset(entry["id"], kb)
            params = total_params(arch_from_config(cfg, 1, defaults))
            rows.append((params / 1e9, bool(cfg.num_moe_experts), entry["id"]))
        _SIZES[id(kb)] = rows
    if size_b <= 0:
        return None
    limit = float(next(e["value"] for e in kb.entries("estimator") if e["id"] == "stand-in-shape-max-ratio"))
    same_kind = [r for r in _SIZES[id(kb)] if moe is None or r[1] == moe]
    for rows in (same_kind, _SIZES[id(kb)]):  # of the same kind when one is close enough in size, else any
        if rows:
            size, _, name = min(rows, key=lambda r: abs(r[0] - size_b) / size_b)
            if max(size, size_b) / min(size, size_b) <= limit:
                return name
    return None
