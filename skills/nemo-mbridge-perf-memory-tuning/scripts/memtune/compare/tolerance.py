"""How far apart two measurements may be before ``compare`` calls them diverged."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError
from ..inputs.units import parse_size

DEFAULT = "2%"


@dataclass(frozen=True, slots=True)
class Tolerance:
    """Either a fraction of the larger value (``2%``) or an absolute size (``256MiB``)."""

    text: str
    relative: float | None = None
    absolute_bytes: float | None = None

    def exceeded(self, a: float, b: float) -> bool:
        gap = abs(b - a)
        if self.relative is not None:
            return gap > self.relative * max(abs(a), abs(b))
        return gap > (self.absolute_bytes or 0.0)


def parse_tolerance(text: str) -> Tolerance:
    """``5%`` / ``0.5 %`` (relative) or ``256MiB`` / ``1 GiB`` / ``1e9`` bytes (absolute); UserError otherwise."""
    raw = text.strip()
    try:
        if raw.endswith("%"):
            value = float(raw[:-1])
            if not 0 <= value < 1000:
                raise ValueError
            return Tolerance(text=f"{value:g} %", relative=value / 100)
        size = parse_size(raw)
    except ValueError:
        raise UserError(f"--tolerance {text!r}: expected a percentage (2%) or a size (256MiB)") from None
    if size < 0:
        raise UserError(f"--tolerance {text!r}: must not be negative")
    return Tolerance(text=raw, absolute_bytes=size)
