"""Two training logs: memory per rank and per step from their report lines, where they part, and their OOMs.

Reports are lined up by (rank, iteration), the numbers each line prints; a rank or step only one log
reports is listed but not compared.  The divergence is the first iteration, in step order, at which a
rank both logs report differs by more than the tolerance on any of the four metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..facts import LogFacts, MemoryReport
from .tolerance import Tolerance

# MemoryReport field -> JSON key, in the order they are compared and shown.
METRICS = {"max_allocated_bytes": "peak_allocated", "allocated_bytes": "allocated",
           "max_reserved_bytes": "peak_reserved", "reserved_bytes": "reserved"}
OOM_FIELDS = ("requested_bytes", "capacity_bytes", "free_bytes", "allocated_bytes", "reserved_bytes",
              "reserved_unallocated_bytes", "process_bytes")


@dataclass(slots=True)
class Point:
    """One rank at one step: each metric in A and B (None where that log did not print it)."""

    rank: int | None
    iteration: int | None
    a: dict[str, float | None]
    b: dict[str, float | None]


@dataclass(slots=True)
class RankPeaks:
    """The largest value each metric reached over the run, per rank."""

    rank: int | None
    a: dict[str, float | None]
    b: dict[str, float | None]


@dataclass(slots=True)
class Divergence:
    iteration: int | None
    rank: int | None
    metric: str
    a_bytes: float
    b_bytes: float


@dataclass(slots=True)
class OomSide:
    """The first memory failure of one log, as LogFacts reads it."""

    kind: str | None
    rank: int | None
    phase: str | None
    first_error: str | None
    numbers: dict[str, float | None]


@dataclass(slots=True)
class LogSide:
    label: str
    reports: int  # report lines read
    ranks: list[int | None]
    iterations: list[int | None]
    peak_rank: int | None  # from inputs/stats.summarize_reports (latest report per rank)
    oom: OomSide | None
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LogComparison:
    kind: str
    tolerance: str
    a: LogSide
    b: LogSide
    ranks: list[RankPeaks]
    only_in_a: list[int | None]
    only_in_b: list[int | None]
    divergence: Divergence | None
    points: list[Point]


def compare_logs(a: tuple[LogFacts, list[MemoryReport]], b: tuple[LogFacts, list[MemoryReport]],
                 tolerance: Tolerance, labels: tuple[str, str] = ("A", "B")) -> LogComparison:
    """``a`` / ``b``: what parse_log read and every report line (inputs/memory_steps.read_memory_steps)."""
    series = [_series(reports) for _, reports in (a, b)]
    ranks_a, ranks_b = ({rank for rank, _ in s} for s in series)
    common = sorted(ranks_a & ranks_b, key=_order)
    points = [Point(rank=rank, iteration=it, a=_metrics(series[0][(rank, it)]), b=_metrics(series[1][(rank, it)]))
              for rank, it in sorted(series[0].keys() & series[1].keys(), key=lambda k: (_order(k[1]), _order(k[0])))]
    return LogComparison(
        kind="logs", tolerance=tolerance.text,
        a=_side(a, series[0], labels[0]), b=_side(b, series[1], labels[1]),
        ranks=[RankPeaks(rank=r, a=_peaks(series[0], r), b=_peaks(series[1], r)) for r in common],
        only_in_a=sorted(ranks_a - ranks_b, key=_order), only_in_b=sorted(ranks_b - ranks_a, key=_order),
        divergence=first_divergence(points, tolerance), points=points)


def first_divergence(points: Iterable[Point], tolerance: Tolerance) -> Divergence | None:
    """The first point (step order, then rank) where a metric both logs print is apart by more than ``tolerance``."""
    for p in points:
        for name in METRICS.values():
            x, y = p.a.get(name), p.b.get(name)
            if x is not None and y is not None and tolerance.exceeded(x, y):
                return Divergence(iteration=p.iteration, rank=p.rank, metric=name, a_bytes=x, b_bytes=y)
    return None


def _order(value: int | None) -> tuple[bool, int]:
    return value is None, value or 0


def _series(reports: Iterable[MemoryReport]) -> dict[tuple[int | None, int | None], MemoryReport]:
    """(rank, iteration) -> report; a repeated pair keeps its last line, as parse_log keeps the latest."""
    return {(r.rank, r.iteration): r for r in reports}


def _metrics(report: MemoryReport) -> dict[str, float | None]:
    return {name: vars(report)[attr] for attr, name in METRICS.items()}


def _peaks(series: Mapping[tuple[int | None, int | None], MemoryReport], rank: int | None) -> dict[str, float | None]:
    rows = [_metrics(r) for (k, _), r in series.items() if k == rank]
    return {name: max((v for row in rows if (v := row[name]) is not None), default=None) for name in METRICS.values()}


def _side(run: tuple[LogFacts, list[MemoryReport]], series: Mapping[tuple[int | None, int | None], MemoryReport],
          label: str) -> LogSide:
    from ..inputs.stats import summarize_reports

    facts, reports = run
    stats = summarize_reports(facts.memory_reports, facts.theoretical_bytes, facts.rank)
    return LogSide(label=label, reports=len(reports), ranks=sorted({k for k, _ in series}, key=_order),
                   iterations=sorted({i for _, i in series}, key=_order), peak_rank=stats.get("peak_rank"),
                   oom=_oom(facts), stats=stats)


def _oom(facts: LogFacts) -> OomSide | None:
    if not facts.has_memory_failure:
        return None
    return OomSide(kind=facts.oom_kind, rank=facts.rank, phase=facts.phase, first_error=facts.first_error,
                   numbers={name: vars(facts)[name] for name in OOM_FIELDS})
