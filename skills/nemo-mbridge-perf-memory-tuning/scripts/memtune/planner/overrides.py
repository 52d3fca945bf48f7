"""Bridge overrides that turn the base config into a planned layout, in fixes.yaml ``apply`` syntax.

Templates come from the knowledge base (the layout fixes' and the chosen options' bridge_override
lists); every key that sets a TrainingConfig field the layout decides is written with the layout's
value, every other key keeps the fix's literal value.  A setting the base config has on but the
layout turns off (FSDP, offload, ...) is written out too, so applying the list is enough.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .options import field_of, split


def format_value(value: Any) -> str:
    """A value as Hydra-style overrides spell it (lists without spaces, as fixes.yaml writes them)."""
    kind = type(value)
    if kind is str and any(ch in value for ch in "|()*, []"):  # a layout string: Hydra needs it quoted
        return f"'{value}'"
    if kind is int or kind is str or kind is float:  # the common case, first (bool is not int here)
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    return str(value)


Template = tuple[str, str, "str | None"]  # (override key, literal value, TrainingConfig field the key sets)


def parse(templates: Iterable[str]) -> tuple[Template, ...]:
    """Split templates once (the planner renders the same few lists for thousands of layouts)."""
    out = []
    for text in templates:
        key, literal = split(text)
        out.append((key, literal, field_of(key)))
    return tuple(out)


def render(templates: Iterable[str], fields: Mapping[str, Any], resets: Mapping[str, str]) -> list[str]:
    """``key=value`` lines, first occurrence of a key kept; ``resets`` maps field -> key for turned-off settings."""
    return render_texts(parse(templates), {name: format_value(value) for name, value in fields.items()}, resets)


def render_texts(templates: Iterable[Template], texts: Mapping[str, str], resets: Mapping[str, str]) -> list[str]:
    """``render`` for templates split by ``parse`` and field values already formatted by ``format_value``."""
    return [f"{k}={v}" for k, v in render_pairs(templates, texts, resets)]


def render_pairs(templates: Iterable[Template], texts: Mapping[str, Any], resets: Mapping[str, str]) -> list[tuple]:
    """``render_texts`` as (key, value) pairs, before joining: a value may be a placeholder object the caller
    substitutes later (the planner renders a shape and combination once for all its micro-batch sizes)."""
    out: dict[str, Any] = {}
    for key, literal, name in templates:
        if name is not None and name not in texts:
            continue  # a size this layout leaves unset (EP on a dense model)
        if key not in out:
            out[key] = texts[name] if name is not None else literal
    for name, key in resets.items():
        out.setdefault(key, texts.get(name, "null"))
    return list(out.items())
