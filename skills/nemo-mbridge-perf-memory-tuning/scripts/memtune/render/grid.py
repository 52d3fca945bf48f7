"""Terminal layout shared by the text renderers: display width (CJK takes two columns), padded tables, bars."""

from __future__ import annotations

import unicodedata

BAR_WIDTH = 40
# U+2588 is the full block, U+258F..U+2589 the left one- to seven-eighths blocks (the source file stays ASCII).
_EIGHTHS = " \u258f\u258e\u258d\u258c\u258b\u258a\u2589"


def bar(value: float, scale: float, width: int = BAR_WIDTH) -> str:
    """A bar of Unicode blocks, eighth-character resolution; ``scale`` bytes fill ``width`` characters."""
    if scale <= 0 or value <= 0:
        return ""
    eighths = round(value / scale * width * 8)
    return "\u2588" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def width(text: str) -> int:
    """Terminal columns: CJK characters take two."""
    if text.isascii():  # every ASCII character is one column: the common case, without a lookup per character
        return len(text)
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def table(rows: list[list[str]], left: int = 1) -> list[str]:
    """Columns padded to their widest cell; the first ``left`` columns left-aligned, the rest right-aligned."""
    widths = [max(width(r[i]) for r in rows) for i in range(len(rows[0]))]

    def pad(cell: str, i: int) -> str:
        fill = " " * (widths[i] - width(cell))
        return cell + fill if i < left else fill + cell

    return ["  ".join(pad(c, i) for i, c in enumerate(r)).rstrip() for r in rows]
