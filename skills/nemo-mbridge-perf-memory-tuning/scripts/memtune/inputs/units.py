"""Turn the sizes logs print ("2.09 GiB", "512 bytes", "1EB", "501112344kB") into bytes.

Conventions, because the same letters mean different things in different tools:
- ``KiB/MiB/GiB/TiB`` are binary (PyTorch's ``format_size`` prints these).
- ``KB/MB/GB/TB/PB/EB`` are decimal (Megatron Bridge's memory report divides by 1e9).
- Lower-case ``kB`` is 1024 bytes: the Linux kernel (OOM killer, /proc) writes it that way.
- ``B``, ``byte``, ``bytes`` are bytes; a bare number takes the caller's default unit
  (Megatron's "memory (MB)" report is in MiB, so its signature says ``number_unit: MiB``).
"""

from __future__ import annotations

import re

_BINARY = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50, "eib": 2**60}
_DECIMAL = {"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15, "eb": 10**18}
_BYTES = {"b": 1, "byte": 1, "bytes": 1}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*$")


def unit_factor(unit: str) -> int:
    """Bytes per ``unit``; raises ValueError for a unit this module does not know."""
    if unit == "kB":
        return 1024
    key = unit.lower()
    for table in (_BYTES, _BINARY, _DECIMAL):
        if key in table:
            return table[key]
    raise ValueError(f"unknown size unit {unit!r}")


def parse_size(text: str, default_unit: str | None = None) -> float:
    """Bytes in ``text`` ("79.11 GiB"); a bare number uses ``default_unit`` (else bytes).

    Raises ValueError when ``text`` is not a number with an optional known unit.
    """
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    number, unit = match.groups()
    return checked(float(number) * unit_factor(unit or default_unit or "B"), text)


# Bytes or a count: past what a 64-bit counter holds, with room for the wrapped 2**64 NVML sometimes reports for a
# process (kept, then not trusted: oom_log) printed rounded.  Sums of such figures stay far inside float range.
MAX_FIGURE = 2**65


class OutOfRange(ValueError):
    """A figure no allocator reports (``1e999``, a thousand-digit number): the line is corrupt, not a measurement.

    A ValueError, so the callers that already turn one into a one-line error (``parse_log`` names the line,
    ``--tolerance`` the option) refuse it; ``report_pairs`` re-raises it rather than dropping the pair."""

    line: int | None = None  # set by a reader that knows it better than its current line


def checked(value: float, text: str) -> float:
    """``value`` when it is a finite figure below MAX_FIGURE; OutOfRange otherwise, so no Infinity reaches JSON."""
    if not 0 <= value < MAX_FIGURE:  # also False for NaN
        shown = text.strip() if len(text.strip()) <= 40 else f"{text.strip()[:20]}... ({len(text.strip())} characters)"
        raise OutOfRange(f"{shown!r} is past any memory size or count a 64-bit counter holds")
    return value
