"""Two training logs: memory per rank and per step from their report lines, where they part, and their OOMs.

Reports are lined up by (rank, iteration), the numbers each line prints; a rank or step only one log
reports is listed but not compared.  The divergence is the first iteration, in step order, at which a
rank both logs report differs by more than the tolerance on any of the four metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
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
class Metrics:
    """The four metrics of one report line (None where the line did not print it); JSON keys are METRICS'."""

    peak_allocated: float | None = None
    allocated: float | None = None
    peak_reserved: float | None = None
    reserved: float | None = None

    def get(self, name: str) -> float | None:
        return _READ[name](self)


_READ: dict[str, Callable[[Metrics], float | None]] = {  # slots: no vars(), and no getattr by a computed name
    "peak_allocated": lambda m: m.peak_allocated, "allocated": lambda m: m.allocated,
    "peak_reserved": lambda m: m.peak_reserved, "reserved": lambda m: m.reserved,
}


@dataclass(slots=True)
class Point:
    """One rank at one step: each metric in A and B."""

    rank: int | None
    iteration: int | None
    a: Metrics
    b: Metrics


@dataclass(slots=True)
class RankPeaks:
    """The largest value each metric reached over the run, per rank."""

    rank: int | None
    a: dict[str, float | None]
    b: dict[str, float | None]


class LogSeries:
    """Every report of one log as (rank, iteration) -> Metrics, plus each rank's peaks, built in one pass.

    A repeated (rank, iteration) keeps its last line, as parse_log keeps the latest; peaks are over every
    line.  Holding Metrics, not MemoryReport, keeps 500,000 reports near 150 MB.
    """

    def __init__(self, reports: Iterable[MemoryReport] = ()) -> None:
        self.steps: dict[tuple[int | None, int | None], Metrics] = {}
        self.peaks: dict[int | None, dict[str, float | None]] = {}
        self.reports = 0
        for report in reports:
            self.add(report)

    def add(self, report: MemoryReport) -> None:
        self.reports += 1
        m = Metrics(*(vars(report)[attr] for attr in METRICS))
        self.steps[(report.rank, report.iteration)] = m
        peak = self.peaks.setdefault(report.rank, dict.fromkeys(METRICS.values()))
        for name in METRICS.values():
            v = m.get(name)
            if v is not None and (peak[name] is None or v > peak[name]):
                peak[name] = v


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


def compare_logs(a: tuple[LogFacts, LogSeries | Iterable[MemoryReport]],
                 b: tuple[LogFacts, LogSeries | Iterable[MemoryReport]],
                 tolerance: Tolerance, labels: tuple[str, str] = ("A", "B")) -> LogComparison:
    """``a`` / ``b``: what parse_log read and every report line (a LogSeries, or the reports to build one).

    Linear in the reports: pairs are looked up, peaks were kept while reading (a scan of every report
    per rank took 60,000-rank logs past a minute).
    """
    series = [s if isinstance(s, LogSeries) else LogSeries(s) for _, s in (a, b)]
    ranks_a, ranks_b = (s.peaks.keys() for s in series)
    common = sorted(ranks_a & ranks_b, key=_order)
    steps_b = series[1].steps
    points = [Point(rank=rank, iteration=it, a=m, b=steps_b[(rank, it)])
              for (rank, it), m in series[0].steps.items() if (rank, it) in steps_b]
    points.sort(key=lambda p: (_order(p.iteration), _order(p.rank)))
    return LogComparison(
        kind="logs", tolerance=tolerance.text,
        a=_side(a[0], series[0], labels[0]), b=_side(b[0], series[1], labels[1]),
        ranks=[RankPeaks(rank=r, a=series[0].peaks[r], b=series[1].peaks[r]) for r in common],
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


def _side(facts: LogFacts, series: LogSeries, label: str) -> LogSide:
    from ..inputs.stats import summarize_reports

    stats = summarize_reports(facts.memory_reports, facts.theoretical_bytes, facts.rank)
    return LogSide(label=label, reports=series.reports, ranks=sorted(series.peaks, key=_order),
                   iterations=sorted({i for _, i in series.steps}, key=_order), peak_rank=stats.get("peak_rank"),
                   oom=_oom(facts), stats=stats)


def _oom(facts: LogFacts) -> OomSide | None:
    if not facts.has_memory_failure:
        return None
    return OomSide(kind=facts.oom_kind, rank=facts.rank, phase=facts.phase, first_error=facts.first_error,
                   numbers={name: vars(facts)[name] for name in OOM_FIELDS})
