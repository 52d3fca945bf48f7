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
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    return str(value)


def render(templates: Iterable[str], fields: Mapping[str, Any], resets: Mapping[str, str]) -> list[str]:
    """``key=value`` lines, first occurrence of a key kept; ``resets`` maps field -> key for turned-off settings."""
    out: dict[str, str] = {}
    for text in templates:
        key, literal = split(text)
        name = field_of(key)
        if name is not None and name not in fields:
            continue  # a size this layout leaves unset (EP on a dense model)
        value = format_value(fields[name]) if name is not None else literal
        out.setdefault(key, value)
    for name, key in resets.items():
        out.setdefault(key, format_value(fields.get(name)))
    return [f"{k}={v}" for k, v in out.items()]
