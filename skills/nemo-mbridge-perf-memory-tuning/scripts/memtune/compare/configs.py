"""Two layouts: the estimated per-stage difference, and the share of it each changed setting explains.

Attribution is a walk from A to B: the changed TrainingConfig fields are applied one at a time in a
stated order and the layout is re-estimated after each, so each share is the change in bytes that
step caused and the shares add up to B - A exactly (a telescoping sum; bytes are whole numbers).  A
setting whose value is invalid on its own (PP 4 -> 8 with VPP 5 -> 2 on 80 layers) joins the next
one until the layout estimates again; the group is reported as one step.  Shares depend on the order
when settings interact (seq_length matters more once PP is halved), which is why the order is part
of the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import UserError
from ..facts import GpuFacts, TrainingConfig
from ..knowledge import Knowledge

ORDERS = ("field", "name")
ORDER_TEXT = {"field": "TrainingConfig field order", "name": "field name, alphabetical"}
METRICS = {"allocated": "allocated_peak_bytes", "with-overheads": "peak_with_overheads_bytes"}
READ: dict[str, Callable[[Any], float]] = {  # StageEstimate has slots: no vars(), and no getattr by a computed name
    "allocated_peak_bytes": lambda s: s.allocated_peak_bytes,
    "peak_with_overheads_bytes": lambda s: s.peak_with_overheads_bytes,
}
# Bookkeeping fields: where a value came from, not what the layout is.
NOT_SETTINGS = frozenset({"provided", "source", "warnings", "assumed", "from_preset", "approximate_shape"})
TARGETS = ("peak", "first", "last")  # the largest stage, stage 0, the last stage (each step's own)


@dataclass(slots=True)
class StageBytes:
    """One pipeline stage of one side: the attributed metric and both peaks."""

    pp_rank: int
    bytes: int  # the attributed metric
    allocated_peak_bytes: int
    peak_with_overheads_bytes: int


@dataclass(slots=True)
class Side:
    label: str  # what the user passed (a file, or "A + --set ...")
    stages: list[StageBytes]
    peak_stage: int
    capacity_ratio: float | None  # peak with overheads / GPU capacity, when a GPU was given
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Shares:
    """Bytes one step adds (negative: removes) on each target; ``stages`` by pp_rank, 0 where a stage is absent."""

    peak: int
    first: int
    last: int
    stages: list[int]


@dataclass(slots=True)
class Change:
    """One attribution step: the fields it set, their values in A and B, what it did."""

    fields: list[str]
    a: dict[str, Any]
    b: dict[str, Any]
    shares: Shares
    given: dict[str, str] = field(default_factory=dict)  # field -> the --set that changed it
    grouped_because: str | None = None  # the error a field alone gave, when fields were grouped


@dataclass(slots=True)
class ConfigComparison:
    kind: str
    metric: str
    order: str
    order_text: str
    gpu: dict[str, Any] | None
    a: Side
    b: Side
    total: Shares
    changes: list[Change]


def changed_fields(a: TrainingConfig, b: TrainingConfig, order: str = "field") -> list[str]:
    """Fields whose values differ, in ``order`` (``field``: declaration order, ``name``: alphabetical)."""
    if order not in ORDERS:
        raise UserError(f"--order {order!r}: use one of {', '.join(ORDERS)}")
    names = [f.name for f in fields(TrainingConfig)
             if f.name not in NOT_SETTINGS and vars(a)[f.name] != vars(b)[f.name]]
    return sorted(names) if order == "name" else names


def compare_configs(a: TrainingConfig, b: TrainingConfig, kb: Knowledge, *, gpu: GpuFacts | None = None,
                    metric: str = "allocated", order: str = "field", labels: tuple[str, str] = ("A", "B"),
                    given: Mapping[str, str] | None = None, num_microbatches: int | None = None,
                    env: Mapping[str, str] | None = None) -> ConfigComparison:
    """Estimate A, B and every step between them; ``given`` names the ``--set`` behind a field of B."""
    from ..estimator import estimate, summarize

    if metric not in METRICS:
        raise UserError(f"--metric {metric!r}: use one of {', '.join(METRICS)}")
    key = METRICS[metric]

    def run(cfg: TrainingConfig) -> Any:
        return estimate(cfg, gpu=gpu, num_microbatches=num_microbatches, kb=kb, env={**cfg.env_vars, **(env or {})})

    ends = []
    for cfg, label in ((a, labels[0]), (b, labels[1])):
        try:
            ends.append(run(cfg))
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    names = changed_fields(a, b, order)
    values = [_values(ends[0], key)]
    steps: list[tuple[list[str], str | None]] = []
    pending: list[str] = []
    first_error: str | None = None
    cfg = a
    for i, name in enumerate(names):
        pending.append(name)
        last = i == len(names) - 1
        trial = b if last else replace(cfg, **{n: vars(b)[n] for n in pending})
        if last:
            est = ends[1]
        else:
            try:
                est = run(trial)
            except UserError as exc:
                first_error = first_error or str(exc)
                continue
        values.append(_values(est, key))
        steps.append((pending, first_error if len(pending) > 1 else None))
        cfg, pending, first_error = trial, [], None
    if not names:  # only bookkeeping differs: the walk is the one step from A's estimate to B's
        values.append(_values(ends[1], key))
    width = max(len(v) for v in values)
    rows = [_pad(v, width) for v in values]
    changes = [Change(fields=list(group), a={n: vars(a)[n] for n in group}, b={n: vars(b)[n] for n in group},
                      shares=_diff(rows[k], rows[k + 1]), given={n: given[n] for n in group if given and n in given},
                      grouped_because=why)
               for k, (group, why) in enumerate(steps)]
    sides = [_side(est, label, key, gpu, summarize, cfg.warnings)
             for est, label, cfg in zip(ends, labels, (a, b), strict=True)]
    return ConfigComparison(
        kind="configs", metric=key, order=order, order_text=ORDER_TEXT[order],
        gpu={"name": gpu.name, "capacity_bytes": gpu.capacity_bytes} if gpu else None,
        a=sides[0], b=sides[1], total=_diff(rows[0], rows[-1]), changes=changes)


def _values(est: Any, key: str) -> list[int]:
    """The metric of every stage, whole bytes, by pp_rank."""
    by_rank = {s.pp_rank: round(READ[key](s)) for s in est.stages}
    return [by_rank.get(r, 0) for r in range(max(by_rank) + 1)]


def _pad(stages: list[int], width: int) -> tuple[int, int, int, list[int]]:
    """(peak, first, last, every stage padded with 0 for a stage this layout does not have)."""
    return max(stages), stages[0], stages[-1], stages + [0] * (width - len(stages))


def _diff(before: tuple[int, int, int, list[int]], after: tuple[int, int, int, list[int]]) -> Shares:
    return Shares(peak=after[0] - before[0], first=after[1] - before[1], last=after[2] - before[2],
                  stages=[y - x for x, y in zip(before[3], after[3], strict=True)])


def _side(est: Any, label: str, key: str, gpu: GpuFacts | None, summarize: Callable[..., dict[str, Any]],
          warnings: list[str]) -> Side:
    stages = [StageBytes(pp_rank=s.pp_rank, bytes=round(READ[key](s)),
                         allocated_peak_bytes=round(s.allocated_peak_bytes),
                         peak_with_overheads_bytes=round(s.peak_with_overheads_bytes)) for s in est.stages]
    peak = max(stages, key=lambda s: (s.bytes, -s.pp_rank))
    return Side(label=label, stages=stages, peak_stage=peak.pp_rank,
                capacity_ratio=summarize(est, gpu).get("capacity_ratio") if gpu else None, warnings=list(warnings))
