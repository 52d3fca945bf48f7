"""Which trigger literals a chunk or a line holds, and what a line holding them can match.

The pre-filter (``_Finder``) lets the driver skip ordinary lines at C speed; a line's plan (``_Plan``) narrows
the signatures tried on it.  Both work from trigger sets alone, apart from the scanner's state.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from .signatures import Patterns, Signature

_FINDER_WINDOW = 1 << 16  # chars of a chunk a trigger literal is searched ahead at a time


@lru_cache(maxsize=8)
def _shortest_triggers(triggers: tuple[str, ...]) -> tuple[str, ...]:
    """The triggers the pre-filter searches: one that contains another adds nothing (worked out once per
    knowledge base, not on every log: ~10,000 substring tests)."""
    return tuple(t for t in triggers if not any(o != t and o in t for o in triggers))


@lru_cache(maxsize=8)
def _longer_triggers(triggers: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each trigger that contains others, with the shortest triggers it contains: it can occur in a line only
    where all of those do."""
    shortest = _shortest_triggers(triggers)
    return tuple((t, tuple(s for s in shortest if s in t)) for t in triggers if t not in shortest)


class _Finder:
    """Next pre-filter hit in a chunk, at C speed.

    Each trigger literal is searched with str.find and each constraint pattern with its regex; the next
    position of each is kept in a heap, so a call re-searches only the needles the scan has moved past
    (a report-dense log hits one trigger a line) and every needle scans a chunk about once however many
    hits there are (one alternation regex over all triggers is ~10x slower).  A literal is searched a window
    at a time, each window twice the last: one not in its window waits in the heap at the window's end and is
    searched on only when every other needle lies further, so a chunk that is one long line is not scanned to
    its end for every trigger before the line is read.
    """

    def __init__(self, patterns: Patterns) -> None:
        self.literals = _shortest_triggers(patterns.triggers)
        self.regexes = tuple(rx for _, rx, literals in patterns.constraints if literals is None)
        # (position, searched on from there, needle, next window): a hit, or where no hit starts before
        self._heap: list[tuple[int, bool, int, int]] | None = None

    def reset(self) -> None:
        self._heap = None

    def _search(self, i: int, buf: str, pos: int, end: int, window: int = 0) -> tuple[int, bool, int, int]:
        if i < len(self.literals):
            needle = self.literals[i]
            window = window or _FINDER_WINDOW
            stop = min(end, pos + window)
            at = buf.find(needle, pos, stop)
            if at < 0 and stop < end:
                return (stop - len(needle) + 1, True, i, 2 * window)
            return (end if at < 0 else at, False, i, 0)
        m = self.regexes[i - len(self.literals)].search(buf, pos, end)
        return (m.start() if m else end, False, i, 0)

    def first(self, buf: str, pos: int, end: int) -> int:
        heap = self._heap
        if heap is None:
            heap = [self._search(i, buf, pos, end) for i in range(len(self.literals) + len(self.regexes))]
            heapq.heapify(heap)
            self._heap = heap
        while heap and heap[0][0] < end and (heap[0][1] or heap[0][0] < pos):
            at, _, i, window = heap[0]
            heapq.heapreplace(heap, self._search(i, buf, max(at, pos), end, window))
        best = heap[0][0] if heap else end
        return best if best < end else -1


@dataclass(frozen=True)
class _Plan:
    """What a line holding exactly these triggers can match: every group filtered once per trigger set, since a
    log repeats a few kinds of line (a report-dense log: one set for 360k lines)."""

    alloc: bool
    line: tuple[Signature, ...]
    reports: tuple[Signature, ...]
    footprints: tuple[Signature, ...]
    env: bool
    phases: tuple[Any, ...]
    rank_hints: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...]
    constraints: tuple[tuple[str, re.Pattern[str], Any], ...]
    reports_only: bool = False  # a memory report line and nothing else: _process reads it without the rest


def _plan(p: Patterns, present: frozenset[str]) -> _Plan:
    def hit(triggers: Iterable[str]) -> bool:
        return not present.isdisjoint(triggers)

    plan = _Plan(
        alloc=hit(p.alloc_triggers),
        line=tuple(sig for sig in p.line if hit(sig.triggers)),
        reports=tuple(sig for sig in p.reports if hit(sig.triggers) and sig.regex is not None),
        footprints=tuple(sig for sig in p.footprints if hit(sig.triggers) and sig.regex is not None),
        env=hit(p.env_triggers),
        phases=tuple(rule for rule in p.phases if rule.log_start is not None and hit(rule.triggers)),
        rank_hints=tuple(h for h in p.rank_hints if hit(h[0])),
        constraints=tuple(c for c in p.constraints if c[2] is None or hit(c[2])),
    )
    others = (plan.alloc, plan.line, plan.footprints, plan.env, plan.phases, plan.rank_hints, plan.constraints)
    alone = bool(plan.reports) and not any(others) and "Error: " not in present
    return replace(plan, reports_only=True) if alone else plan


_PLANS_KEPT = 4096  # distinct trigger sets remembered per scan
_SHAPES_KEPT = 4096  # line shapes remembered per scan (each at most _SHAPE_MAX_CHARS)
_SHAPE_MAX_CHARS = 512
_NUMBER_RUNS = re.compile(r"[0-9][0-9.]*")  # a line's shape: each run of these becomes "0"
_NUMBER_CHARS = frozenset("0123456789.")
