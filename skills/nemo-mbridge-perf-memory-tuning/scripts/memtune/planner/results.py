"""What a plan answers: the layouts it shows (each built when read, its per-rank peaks unboxed), the rows of an
``--all`` plan, the counters and the result, and a layout scored by the cost model alone.

Apart from the search because the renderers read these and nothing of how they were found.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from . import costs as cost_model
from .lines import OverrideLines

if TYPE_CHECKING:
    from .search import Planner

@dataclass(slots=True)
class StagePeak:
    pp_rank: int
    allocated_peak_bytes: float
    peak_with_overheads_bytes: float


class StagePeaks(Sequence[StagePeak]):
    """A layout's per-rank peaks, unboxed in one array of doubles (rank, allocated, with overheads per rank):
    an ``--all`` plan keeps 10^5 layouts, and a StagePeak with its two float objects per rank was a fifth of
    its memory.  Reads as a sequence of StagePeak."""

    __slots__ = ("_values",)

    def __init__(self, stages: Iterable[tuple[int, float, float]] = ()) -> None:
        self._values = array("d", [x for stage in stages for x in stage])

    @classmethod
    def of(cls, values: array) -> StagePeaks:
        """Wrapping flat (rank, allocated, with overheads) doubles as they are, uncopied."""
        out = cls.__new__(cls)
        out._values = values
        return out

    def __len__(self) -> int:
        return len(self._values) // 3

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        rank, allocated, with_overheads = self._values[3 * index:3 * index + 3]
        return StagePeak(int(rank), allocated, with_overheads)

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return f"StagePeaks({list(self)!r})"


@dataclass(slots=True)
class PlannedLayout:
    """One candidate as the answer shows it."""

    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    etp: int
    dp: int
    micro_batch_size: int
    num_microbatches: int
    recompute: str
    model_state: str
    activation_offload: str | None
    peft: str | None
    relative_throughput: float
    shape_reasons: tuple[cost_model.Reason, ...]  # shared by every layout of the shape and micro-batch size
    option_reasons: tuple[cost_model.Reason, ...]  # the combination's constant factors, shared by its layouts
    traffic_reasons: tuple[cost_model.Reason, ...]  # its traffic factors, shared per traffic and sizes
    lines: OverrideLines  # renders ``overrides`` when read; one per plan
    pair: int  # (shape, combination) index the lines are rendered for
    env: Sequence[str]  # shared by every layout of a combination
    rank: int | None = None
    fits: bool | None = None
    capacity_ratio: float | None = None
    peak_stage: int | None = None
    peak_bytes: float | None = None
    peak_with_overheads_bytes: float | None = None
    stage_values: array | None = None  # (rank, allocated, with overheads) per rank, flat; see ``stages``
    error: str | None = None
    split_embedding_loss: bool = False  # account_for_embedding/loss_in_pipeline_split (SPLIT_FIELDS)
    pipeline_layout: str | None = None  # a generated pipeline_model_parallel_layout (LAYOUT_FIELD)

    @property
    def overrides(self) -> Sequence[str]:
        """The layout's Bridge override lines, rendered when read (an ``--all`` plan shows a few of 10^5)."""
        return self.lines.of(self.pair, self.micro_batch_size)

    @property
    def stages(self) -> StagePeaks:
        """Per-rank peaks (empty until estimated)."""
        return StagePeaks() if self.stage_values is None else StagePeaks.of(self.stage_values)

    @property
    def reasons(self) -> tuple[cost_model.Reason, ...]:
        """Every factor that lowered the score (two shared tuples, joined only when asked: --all keeps 10^5)."""
        return self.shape_reasons + self.option_reasons + self.traffic_reasons


class LayoutRow(NamedTuple):
    """The values an ``--all`` plan lists for each fitting layout, named as PlannedLayout names them."""

    rank: int
    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    etp: int
    dp: int
    micro_batch_size: int
    num_microbatches: int
    recompute: str
    model_state: str
    activation_offload: str | None
    peft: str | None
    split_embedding_loss: bool
    pipeline_layout: str | None
    relative_throughput: float
    peak_with_overheads_bytes: float
    peak_stage: int
    capacity_ratio: float


class FittingLayouts(Sequence["PlannedLayout"]):
    """Every layout an ``--all`` plan found fitting, in rank order, each built when read.

    The walk keeps only each layout's id and peaks (10^5 PlannedLayouts with their reasons would be half its
    time); ``rows`` lists them without building any, and a layout read by index is built with its per-rank
    peaks as a ``--top`` plan would show it."""

    def __init__(self, planner: Planner, ids: array, peaks: array) -> None:
        self._planner, self.ids, self._peaks = planner, ids, peaks

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        lay = self._planner._measure(self.ids[index])
        lay.rank = index + 1
        return lay

    def row(self, index: int) -> LayoutRow:
        """The ``LayoutRow`` of the layout ranked ``index + 1``, read from the walk's records (nothing is built)."""
        p, t = self._planner, self.ids[index]
        si, mbs, ci = p._decode(t)
        tp, pp, vpp, cp, ep, etp, dp, recompute, state, offload, peft, _, split, layout = p._head(si, ci)
        rank, with_overheads = self._peaks[3 * index], self._peaks[3 * index + 2]
        return LayoutRow(index + 1, tp, pp, vpp, cp, ep, etp, dp, mbs, p.req.global_batch_size // (mbs * dp),
                         recompute, state, offload, peft, split, layout, p._factors[t], with_overheads, int(rank),
                         with_overheads / p.capacity)

    def rows(self) -> Iterator[LayoutRow]:
        """Each fitting layout's ``LayoutRow``, in rank order."""
        return map(self.row, range(len(self.ids)))


@dataclass
class PlanStats:
    enumerated: int = 0  # candidates built (shapes x micro-batches x option combinations)
    valid: int = 0  # of those, the ones no constraint refuses
    memory_checked: int = 0  # estimator calls
    inferred: int = 0  # fit decided without an estimate, from a layout needing more / less memory
    fitting: int | None = None  # known when every candidate was decided (top=None)
    seconds: float = 0.0


@dataclass
class PlanResult:
    capacity_bytes: float
    budget_bytes: float
    gpus_per_node: int
    layouts: Sequence[PlannedLayout]  # a list, or for an --all plan FittingLayouts (built when read)
    reference: PlannedLayout | None
    stats: PlanStats
    warnings: list[dict[str, Any]]
    assumptions: list[str]
    # Layouts that score what layout 1 scores, itself included: no modelled cost separates them, so their order is
    # only the tie order (_index).  Counted among the fitting layouts when every candidate was decided (--all),
    # else among the valid ones, whose fit is not known.
    tied_with_first: int = 0
    tie_scope: str = "fitting"
    headroom: float = 0.0  # the fraction of capacity kept free
    headroom_class: str | None = None  # the model class whose measured estimator error set it; None: --headroom
    # Layouts scoring within the throughput model's measured error of layout 1 (costs.yaml throughput-error, for the
    # model's class), itself included, among the same layouts as the ties: the model cannot rank them apart
    close_to_first: int = 0
    throughput_band: float = 0.0
    throughput_class: str = "dense"


@dataclass(frozen=True)
class Scored:
    """A layout scored by the cost model alone (``Planner.score_own``)."""

    relative_throughput: float
    reasons: tuple[cost_model.Reason, ...]
    options: Mapping[str, str | None]  # option id per group, None for "off"
    tokens_per_gpu_second: float | None  # a micro-batch's tokens per GPU over its GEMM time, times the factors


def same_score(a: float, b: float) -> bool:
    """Equal up to rounding: a tie, not a smaller cost (products of the same factors in another order)."""
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))
