"""Terminal layout shared by the text renderers: display width (CJK takes two columns), padded tables, bars."""

from __future__ import annotations

import unicodedata

BAR_WIDTH = 40
_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(value: float, scale: float, width: int = BAR_WIDTH) -> str:
    """A bar of Unicode blocks, eighth-character resolution; ``scale`` bytes fill ``width`` characters."""
    if scale <= 0 or value <= 0:
        return ""
    eighths = round(value / scale * width * 8)
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


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
