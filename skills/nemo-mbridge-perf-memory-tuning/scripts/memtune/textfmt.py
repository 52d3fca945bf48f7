"""Fill ``{fact.name|filter}`` placeholders in knowledge-base text with fact values.

Filters: ``gib`` (bytes -> "12.34 GiB", "189.91 MiB" below 1 GiB), ``gb`` (bytes -> decimal GB), ``mib``,
``pct`` (ratio -> "37.5 %"), ``int``, ``num`` (18, 16.5), ``list``.  A placeholder whose fact is
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
    if unit == "gib":  # as PyTorch's OOM message prints a size (format_size): below 1 GiB in MiB
        if 0 < abs(value) < 2**30:
            return f"{value / 2**20:.2f} MiB"
        return f"{value / 2**30:.2f} GiB"
    if unit == "gb":
        return f"{value / 1e9:.1f} GB"
    if unit == "mib":
        return f"{value / 2**20:.0f} MiB"
    if unit == "pct":
        return f"{value * 100:.1f} %"
    if unit == "int":
        return str(int(value))
    if unit == "num":  # a count with one decimal at most: 18, 16.5
        return f"{value:.1f}".removesuffix(".0")
    if unit == "list" and isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if unit == "alternation" and isinstance(value, (list, tuple)):  # a grep -E pattern: A|B
        return "|".join(str(v) for v in value)
    if unit == "words" and isinstance(value, (list, tuple)):  # a shell word list: A B
        return " ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def fill(template: str, facts: Mapping[str, Any], quote: bool = False) -> str:
    """``{name|filter:default}``: the default (e.g. ``<2 x current PP>``) stands in for an unknown fact.

    ``quote`` (prose, not command lines): a text value - a log's error line, a file name, a config string - is
    set as a Markdown code span, so raw HTML or Markdown in an input is shown as written, never rendered."""

    def one(m: re.Match[str]) -> str:
        value = facts.get(m.group(1))
        if value is None and m.group(3) is not None:
            return m.group(3)
        if quote and isinstance(value, str):
            return code_span(value)
        if quote and m.group(2) == "list" and isinstance(value, (list, tuple)):
            return ", ".join(code_span(str(v)) for v in value)
        return human(value, m.group(2))

    return _PLACEHOLDER.sub(one, template)


def code_span(text: str) -> str:
    """``text`` as one CommonMark code span: on one line, fenced by more backticks than it holds in a row, padded
    where it starts or ends with a backtick (or with spaces, which a span would strip)."""
    flat = " ".join(text.split("\n")).replace("\r", " ")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or (flat.startswith(" ") and flat.endswith(" ")) else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def code_ranges(text: str) -> list[tuple[int, int]]:
    """Where the code spans of ``text`` lie: a run of n backticks up to the next run of exactly n."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (start := text.find("`", pos)) >= 0:
        run = len(text[start:]) - len(text[start:].lstrip("`"))
        close = re.compile(rf"(?<!`)`{{{run}}}(?!`)").search(text, start + run)
        if close is None:
            pos = start + run  # an unmatched run is literal backticks
            continue
        spans.append((start, close.end()))
        pos = close.end()
    return spans


def brief(value: Any) -> str:
    """A value for a one-line error: short, and never a recursive repr of a crafted 10^5-deep value."""
    if isinstance(value, (Mapping, list, tuple, set)):
        return f"a {type(value).__name__}"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {len(str(value)) if value.bit_length() < 14000 else 'thousands of'} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
