"""Fill ``{fact.name|filter}`` placeholders in knowledge-base text with fact values.

Filters: ``gib`` (bytes -> "12.34 GiB"), ``gb`` (bytes -> decimal GB), ``mib``,
``pct`` (ratio -> "37.5 %"), ``int``, ``list``.  A placeholder whose fact is
unknown renders as "?" (or the default after ``:``), so a sentence never claims a
number nobody measured.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_PLACEHOLDER = re.compile(r"\{([a-z_][\w.]*)(?:\|(\w+))?(?::([^{}]*))?\}")


def human(value: Any, unit: str | None) -> str:
    if value is None:
        return "?"
    if unit == "gib":
        return f"{value / 2**30:.2f} GiB"
    if unit == "gb":
        return f"{value / 1e9:.1f} GB"
    if unit == "mib":
        return f"{value / 2**20:.0f} MiB"
    if unit == "pct":
        return f"{value * 100:.1f} %"
    if unit == "int":
        return str(int(value))
    if unit == "list" and isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fill(template: str, facts: Mapping[str, Any]) -> str:
    """``{name|filter:default}``: the default (e.g. ``<2 x current PP>``) stands in for an unknown fact."""

    def one(m: re.Match[str]) -> str:
        value = facts.get(m.group(1))
        if value is None and m.group(3) is not None:
            return m.group(3)
        return human(value, m.group(2))

    return _PLACEHOLDER.sub(one, template)


def brief(value: Any) -> str:
    """A value for a one-line error: short, and never a recursive repr of a crafted 10^5-deep value."""
    if isinstance(value, (Mapping, list, tuple, set)):
        return f"a {type(value).__name__}"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {len(str(value)) if value.bit_length() < 14000 else 'thousands of'} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
