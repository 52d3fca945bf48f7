"""argparse types for numbers that describe hardware or a run: refused at parse time when not physical.

``--dp -1``, ``--world-size 0`` and ``--capacity-gib nan`` used to give confident answers;
``--gpus 10**20`` made the planner enumerate forever.  The upper bounds are far past any
real cluster or run and keep every loop over them finite.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

MAX_GPUS = 1 << 20  # ~1M GPUs: beyond the largest announced clusters
MAX_COUNT = 1 << 40


def count(low: int = 1, high: int = MAX_COUNT) -> Callable[[str], int]:
    """An integer in [low, high]."""
    def parse(text: str) -> int:
        stripped = text.strip()
        if not stripped.lstrip("+-").isdigit() or len(stripped) > 20:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text[:40]!r}")
        value = int(stripped)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value
    parse.__name__ = "count"  # argparse names the type in its message
    return parse


def number(low: float, high: float, low_open: bool = False) -> Callable[[str], float]:
    """A finite float in [low, high] (or (low, high] with ``low_open``)."""
    def parse(text: str) -> float:
        try:
            value = float(text[:60])
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text[:40]!r}") from None
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            bracket = "(" if low_open else "["
            raise argparse.ArgumentTypeError(f"{text[:40]} is outside {bracket}{low:g}, {high:g}]")
        return value
    parse.__name__ = "number"
    return parse
