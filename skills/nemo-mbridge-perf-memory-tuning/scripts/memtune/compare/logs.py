"""Two training logs: memory per rank and per step from their report lines, where they part, and their OOMs.

Reports are lined up by (rank, iteration), the numbers each line prints; a rank or step only one log
reports is listed but not compared.  The divergence is the first iteration, in step order, at which a
rank both logs report differs by more than the tolerance on any of the four metrics.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

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


_NAMES = tuple(METRICS.values())
_ABSENT = float("nan")  # a metric the line did not print (a read figure is never NaN: units.checked)


class _Step:
    """The reports of one iteration: rank -> position, and four metrics a position in one array of floats."""

    __slots__ = ("at", "values", "exact")

    def __init__(self) -> None:
        self.at: dict[int | None, int] = {}
        self.values = array("d")
        self.exact: dict[int | None, Metrics] | None = None  # a report whose figures are not floats, kept as given

    def metrics(self, rank: int | None) -> Metrics:
        if self.exact is not None and rank in self.exact:
            return self.exact[rank]
        i = 4 * self.at[rank]
        return Metrics(*(None if v != v else v for v in self.values[i:i + 4]))


class LogSeries:
    """Every report of one log by iteration and rank, plus each rank's peaks, built in one pass.

    A repeated (rank, iteration) keeps its last line, as parse_log keeps the latest; peaks are over every
    line.  Four floats in an array per report (not an object each) keep 330k reports near 30 MB.
    """

    def __init__(self, reports: Iterable[MemoryReport] = ()) -> None:
        self.steps: dict[int | None, _Step] = {}
        self.peaks: dict[int | None, dict[str, float | None]] = {}  # rank -> the largest value of each metric
        self.reports = 0
        for report in reports:
            self.add(report)

    def add(self, report: MemoryReport) -> None:
        self.reports += 1
        rank = report.rank
        values = (report.max_allocated_bytes, report.allocated_bytes, report.max_reserved_bytes, report.reserved_bytes)
        step = self.steps.get(report.iteration)
        if step is None:
            step = self.steps[report.iteration] = _Step()
        at = step.at.get(rank)
        stored = [_ABSENT if v is None else v for v in values]
        if at is None:
            step.at[rank] = len(step.values) // 4
            step.values.extend(stored)
        else:
            step.values[4 * at:4 * at + 4] = array("d", stored)
        if step.exact is not None:
            step.exact.pop(rank, None)
        peak = self.peaks.get(rank)
        if peak is None:
            peak = self.peaks[rank] = dict.fromkeys(_NAMES)
        odd = False
        for name, v in zip(_NAMES, values, strict=True):
            if v is not None:
                odd = odd or type(v) is not float
                if peak[name] is None or v > peak[name]:  # type: ignore[operator]
                    peak[name] = v
        if odd:
            step.exact = step.exact or {}
            step.exact[rank] = Metrics(*values)

    def ranks(self) -> list[int | None]:
        return sorted(self.peaks, key=_order)


class Points(Sequence[Point]):
    """The ranks and steps both logs report, in step order then rank, built on demand from the two series:
    a Point each (three objects) held 330k points in 100 MB."""

    def __init__(self, a: LogSeries, b: LogSeries) -> None:
        self._groups: list[tuple[int | None, list[int | None], _Step, _Step]] = []
        self._starts: list[int] = []
        total = 0
        for it in sorted(a.steps.keys() & b.steps.keys(), key=_order):
            sa, sb = a.steps[it], b.steps[it]
            ranks = sorted(sa.at.keys() & sb.at.keys(), key=_order)
            if ranks:
                self._groups.append((it, ranks, sa, sb))
                self._starts.append(total)
                total += len(ranks)
        self._len = total

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Point]:
        for it, ranks, sa, sb in self._groups:
            for rank in ranks:
                yield Point(rank=rank, iteration=it, a=sa.metrics(rank), b=sb.metrics(rank))

    @overload
    def __getitem__(self, index: int) -> Point: ...

    @overload
    def __getitem__(self, index: slice) -> list[Point]: ...

    def __getitem__(self, index: int | slice) -> Point | list[Point]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("point index out of range")
        g = bisect_right(self._starts, index) - 1
        it, ranks, sa, sb = self._groups[g]
        rank = ranks[index - self._starts[g]]
        return Point(rank=rank, iteration=it, a=sa.metrics(rank), b=sb.metrics(rank))

    def first_divergence(self, tolerance: Tolerance) -> Divergence | None:
        """``first_divergence(self, tolerance)`` read straight from the arrays, without a Point per step."""
        for it, ranks, sa, sb in self._groups:
            if sa.exact is not None or sb.exact is not None:
                found = first_divergence((Point(r, it, sa.metrics(r), sb.metrics(r)) for r in ranks), tolerance)
                if found is not None:
                    return found
                continue
            va, vb, at_a, at_b = sa.values, sb.values, sa.at, sb.at
            for rank in ranks:
                i, j = 4 * at_a[rank], 4 * at_b[rank]
                for k in range(4):
                    x, y = va[i + k], vb[j + k]
                    if x == x and y == y and tolerance.exceeded(x, y):  # NaN: not printed
                        return Divergence(iteration=it, rank=rank, metric=_NAMES[k], a_bytes=x, b_bytes=y)
        return None

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, (Points, list)) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


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
    points: Points  # a Sequence[Point]; render/compare.to_json writes it as a list


def compare_logs(a: tuple[LogFacts, LogSeries | Iterable[MemoryReport]],
                 b: tuple[LogFacts, LogSeries | Iterable[MemoryReport]],
                 tolerance: Tolerance, labels: tuple[str, str] = ("A", "B")) -> LogComparison:
    """``a`` / ``b``: what parse_log read and every report line (a LogSeries, or the reports to build one).

    Linear in the reports: pairs are looked up, peaks were kept while reading (a scan of every report
    per rank took 60,000-rank logs past a minute).
    """
    series = [s if isinstance(s, LogSeries) else LogSeries(s) for _, s in (a, b)]
    peaks_a, peaks_b = series[0].peaks, series[1].peaks
    common = sorted(peaks_a.keys() & peaks_b.keys(), key=_order)
    points = Points(series[0], series[1])
    return LogComparison(
        kind="logs", tolerance=tolerance.text,
        a=_side(a[0], series[0], labels[0]), b=_side(b[0], series[1], labels[1]),
        ranks=[RankPeaks(rank=r, a=peaks_a[r], b=peaks_b[r]) for r in common],
        only_in_a=sorted(peaks_a.keys() - peaks_b.keys(), key=_order),
        only_in_b=sorted(peaks_b.keys() - peaks_a.keys(), key=_order),
        divergence=points.first_divergence(tolerance), points=points)


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
    return LogSide(label=label, reports=series.reports, ranks=series.ranks(),
                   iterations=sorted(series.steps, key=_order), peak_rank=stats.get("peak_rank"),
                   oom=_oom(facts), stats=stats)


def _oom(facts: LogFacts) -> OomSide | None:
    if not facts.has_memory_failure:
        return None
    return OomSide(kind=facts.oom_kind, rank=facts.rank, phase=facts.phase, first_error=facts.first_error,
                   numbers={name: vars(facts)[name] for name in OOM_FIELDS})
