"""Enumerate layouts, drop the ones upstream refuses, rank by expected throughput, keep the ones that fit.

Order of work, cheapest first:

1. parallel shapes (TP, PP, VPP, CP, EP) built from the divisors of the world size, each checked against
   knowledge/constraints.yaml once (heads, query groups, layers, VPP chunks, sequence, experts, world);
2. micro-batch sizes that divide GBS / DP, and the option combinations (recompute, model state,
   activation offload, PEFT) the base model admits, each candidate checked against the constraints
   again (PP with activation offload, recompute with offload, ...);
3. every valid candidate scored by the cost model (pure arithmetic), then sorted;
4. fit decided in score order, so with ``top`` set the walk stops once enough layouts fit (and once
   the base config's own layout, if it sets one, has been placed).  A verdict is inferred instead of
   estimated where memory order makes it certain: a larger micro-batch never needs less memory (a
   rank holds min(MBS x in-flight, GBS / DP x VPP) samples' activations), and within one option chain
   of knowledge/costs.yaml (``memory``) a lower rank never needs more.  An ``--all`` plan (``top`` None)
   shows the peaks of every layout that fits, so it estimates those and infers only "does not fit" from
   verdicts already recorded.  ``exhaustive=True`` turns the inference off; tests check both give the
   same layouts.
"""

from __future__ import annotations

import gc
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import product, takewhile
from typing import Any, NamedTuple

from ..conditions import evaluate
from ..derive import derive
from ..errors import UserError
from ..estimator import estimate
from ..estimator.constants import constants
from ..estimator.memory import act_rows, combine_ranks, stage_peaks, static_rows
from ..estimator.models import fill_from_preset, preset
from ..estimator.rank_activations import (
    ACT_FIELDS,
    ActInputs,
    ChunkPolicy,
    act_inputs,
    chunk_policy,
    context_part,
    rank_acts,
)
from ..estimator.static import PER_CANDIDATE_FIELDS, graph_kind, static_part
from ..facts import EnvFacts, Facts, GpuFacts, TrainingConfig
from ..inputs.config import apply_overrides
from ..knowledge import Knowledge
from . import costs as cost_model
from . import traffic as traffic_model
from .feasibility import Feasibility
from .headroom import error_band, throughput_band
from .lines import OverrideLines
from .options import GROUPS, Option, Space, load

TASKS = ("pretrain", "sft", "lora")
SIZE_FIELDS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
               "context_parallel_size", "expert_model_parallel_size")
# Every field a shape sets (Planner._shape_fields); the rest of a candidate's config is the base and its combination.
# The pipeline split a shape may choose besides even: embedding and loss counted as one layer each (what the
# Bridge recipes set for Llama3.1-405B and Qwen3-235B; it balances the output layer's work, costs.yaml
# pipeline-imbalance, and makes 126 or 94 layers divide).
SPLIT_FIELDS = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
# Where neither split divides (DeepSeek-V3: 61 layers and an MTP block), an explicit layout string with equal
# slots per chunk, as the DeepSeek-V3 recipes write it (traffic.balanced_layout).
LAYOUT_FIELD = "pipeline_model_parallel_layout"
# what a full-iteration graph is planned with (the env of Bridge's full-iteration recipes, Megatron-Bridge #4587)
CAPTURE_REUSE_ENV = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,graph_capture_record_stream_reuse:True"
SHAPE_FIELDS = frozenset({*SIZE_FIELDS, *SPLIT_FIELDS, LAYOUT_FIELD, "sequence_parallel", "world_size",
                          "seq_length", "global_batch_size", "data_parallel_size"})


@dataclass(frozen=True)
class PlanRequest:
    """What the user asks: a model (in ``base``), a cluster, a batch and a task."""

    base: TrainingConfig  # architecture plus fixed settings (precision, CUDA graphs, ...); may hold a layout
    gpu: GpuFacts
    gpus: int
    seq_length: int
    global_batch_size: int
    task: str = "pretrain"
    headroom: float | None = None  # fraction of capacity kept free; None: the estimator's error band (headroom.py)
    expandable_segments: bool = True
    gpus_per_node: int | None = None
    allow_cross_node_tp: bool = False
    env: EnvFacts = field(default_factory=EnvFacts)
    top: int | None = 5  # None: decide every candidate


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


@dataclass(frozen=True)
class _Shape:
    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    etp: int
    dp: int
    fields: Mapping[str, Any]
    key: tuple  # names the constraint facts derived for these sizes


@dataclass(frozen=True)
class _Combo:
    options: tuple[Option | None, ...]  # one per GROUPS entry (None: that group's "off")
    fields: Mapping[str, Any]
    factor: float  # product of the constant option factors
    cost_ids: tuple[str, ...]
    scaled: tuple[str, ...]  # cost ids that also depend on the layout (FSDP traffic per token)
    order: int

    @property
    def ids(self) -> dict[str, str | None]:
        """Option id per group (None: off)."""
        return {g: o.id if o else None for g, o in zip(GROUPS, self.options, strict=True)}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


class Planner:
    """One plan: the base config, the cluster and the caches that live as long as the request.

    ``exhaustive`` estimates every candidate instead of inferring fits (tests compare the two).
    """

    def __init__(self, request: PlanRequest, kb: Knowledge, exhaustive: bool = False) -> None:
        self.exhaustive = exhaustive
        self.kb = kb
        self.req = request
        self.space: Space = load(kb)
        if request.task not in TASKS:
            raise UserError(f"--task {request.task!r}: use one of {', '.join(TASKS)}")
        if request.gpus < 1 or request.global_batch_size < 1 or request.seq_length < 1:
            raise UserError("--gpus, --global-batch-size and --seq-length must be positive")
        if request.headroom is not None and not 0 <= request.headroom < 1:
            raise UserError(f"--headroom {request.headroom}: give a fraction of capacity in [0, 1)")
        self.capacity = request.gpu.capacity_bytes
        if not self.capacity:
            raise UserError(f"--gpu {request.gpu.name!r}: usable capacity unknown (give --capacity-gib)")
        gpn = request.gpus_per_node or request.gpu.nvlink_domain
        if not gpn:
            raise UserError(f"--gpu {request.gpu.name!r}: NVLink domain size unknown (give --gpus-per-node)")
        self.gpn = int(gpn)
        self.base = self._base(request)
        # what stays free: the user's --headroom, else the estimator's measured error for this class of model
        self.headroom, self.headroom_class = (request.headroom, None) if request.headroom is not None \
            else error_band(self.base, kb)
        self.throughput_class, self.throughput_band = throughput_band(self.base, self.space.costs)
        self.budget = self.capacity * (1.0 - self.headroom)
        if not self.base.gpu_arch and request.gpu.arch:
            self.base = replace(self.base, gpu_arch=request.gpu.arch)
        self.capture_reuse = _capture_reuse(request, self.base)
        self.est_env = EnvFacts(provided=True, expandable_segments=request.expandable_segments,
                                alloc_options={"graph_capture_record_stream_reuse": "True"} if self.capture_reuse
                                else {})
        self.flat_base = Facts(config=self.base, env=request.env).flatten()
        self.groups = {g: self._applicable(g) for g in GROUPS}
        self.varied = frozenset(
            {*SIZE_FIELDS, *SPLIT_FIELDS, LAYOUT_FIELD, "sequence_parallel", "data_parallel_size", "world_size",
             "micro_batch_size",
             "global_batch_size", "seq_length"}
            | {f for g in GROUPS for f in self.space.group_fields[g]})
        self.feas = Feasibility(kb, self.base, request.env, self.varied)
        self.ctx = cost_model.ShapeContext(
            hidden_size=int(self.base.hidden_size), num_layers=int(self.base.num_layers),
            seq_length=request.seq_length,
            gpus_per_node=self.gpn, moe=bool(self.base.num_moe_experts),
            ep_overlap=bool(self.base.overlap_moe_expert_parallel_comm), tp_overlap=bool(self.base.tp_comm_overlap),
            eager_share=traffic_model.eager_share(self.base, bool(self.base.num_moe_experts)),
            fp8=bool(self.base.fp8))
        self.hw = traffic_model.hardware(request.gpu, traffic_model.precision_of(self.base), self.space.costs)
        self._base_split = any(vars(self.base)[n] for n in SPLIT_FIELDS)
        self.layers, self.mtp = int(self.base.num_layers), int(self.base.mtp_num_layers or 0)
        self.arch = traffic_model.arch_of(self.base, kb)
        self.workload = traffic_model.workload(self.base)  # what the traffic reads of the run besides its layout
        self.model_counts = traffic_model.counts(self.arch) if self.arch is not None else None
        # recompute factors carried to this model by the FLOP share of the module each replays
        self.costs = self.space.costs if self.arch is None else cost_model.for_model(
            self.space.costs, self.arch, request.seq_length, lambda m: traffic_model.arch_of(preset(m, kb), kb))
        self._balances: dict[tuple, float] = {}
        if self.model_counts is None:
            self.hw = None
        self._traffics: dict[tuple[int, ...], traffic_model.Traffic | None] = {}
        self.combos = self._combos()
        self.neutral = {f: None for g in GROUPS for f in self.space.group_fields[g]}
        # constraint-cache key parts, interned to small ints so the per-candidate key hashes cheaply
        self._interned: dict[tuple, int] = {}
        self.proj = [self._intern(self.feas.projection(c.fields)) for c in self.combos]
        self.upper, self.lower = self._bounds()
        # per combination: bounds in the order fits() tries them, option ids, and the ids besides model state
        self.tries = [[(b, True) for b in up] + [(b, False) for b in low]
                      for up, low in zip(self.upper, self.lower, strict=True)]
        self._lower_at = [tuple(b for b, is_upper in tries if not is_upper) for tries in self.tries]
        self.ids = [c.ids for c in self.combos]
        self.rest = [tuple(i for g, i in ids.items() if g != "model_state") for ids in self.ids]
        self.stats = PlanStats()
        # what the estimator's cached parts read of a combination (its fields besides the per-candidate ones):
        # candidates of one shape with equal values share a static part, looked up once (see _peaks)
        self.static_proj = [self._intern(tuple(
            (n, _frozen(v)) for n, v in c.fields.items() if n not in PER_CANDIDATE_FIELDS)) for c in self.combos]
        self.constants = constants(kb)
        self._filled = self._always_filled()
        # what the activation side reads of a combination (act_inputs without the micro-batch size, and the
        # chunk policy): derived once per combination when no shape field and no preset fill can change it
        self._acts: list[tuple[ActInputs, ChunkPolicy]] | None = None
        if self._filled and not (SHAPE_FIELDS & ACT_FIELDS):
            self._acts = []
            for combo in self.combos:
                cfg = TrainingConfig.__new__(TrainingConfig)
                cfg.__dict__.update(self.base.__dict__)
                cfg.__dict__.update(combo.fields)
                self._acts.append((act_inputs(cfg, 1), chunk_policy(cfg)))
        # per combination, what its activation side reads (equal ints: equal inputs and policy), and that side
        # per (shape part, that int, micro-batch size, micro-batches): every model-state option shares it
        self._act_proj = [self._intern(a) for a in self._acts] if self._acts is not None else []
        self._sides: dict[tuple, tuple] = {}
        self._slack = self.constants["allocator-slack-fraction"]["expandable" if request.expandable_segments
                                                                 else "default"]
        self._context_bytes = self.constants["cuda-context-bytes"]
        # per candidate id (see _index): decided verdict (0 none, 1 fits, 2 does not), valid, estimated
        self._verdicts = self._valid = self._estimated = bytearray()
        self._factors = array("d")
        self._size_at: dict[int, int] = {}
        self._fail_mbs: dict[int, int] = {}  # per (shape, combination) pair: smallest MBS known not to fit
        self._fit_mbs: dict[int, int] = {}  # ... largest MBS known to fit
        self._measured: dict[int, PlannedLayout] = {}
        self._statics: dict[tuple[int, int], Any] = {}  # (shape, static_proj) -> StaticPart or the refusal
        # the latest peaks (t, per-rank values kept, peaks): measure() asks for them right after a fit
        self._last: tuple[int, bool, Any] = (-1, False, None)
        # per-request memos of what every layout of a shape / combination shares (see layout())
        self._reasons: dict[tuple, tuple[cost_model.Reason, ...]] = {}
        self._heads: dict[int, tuple] = {}  # per (shape, combination): what layout() copies into each layout
        self._parts: dict[int, tuple] = {}  # per (shape, micro-batch size): see _shape_parts
        self._options_at: dict[tuple[int, int], tuple] = {}  # per (combination, traffic): see _option_parts
        self._moved_at: dict[tuple, tuple[tuple, float]] = {}  # per (traffic costs, traffic): see _moved
        self._lines: OverrideLines | None = None  # built with the shapes (_rank)
        self._envs: dict[int, tuple[str, ...]] = {}
        self._resettable = frozenset(  # fields whose base value a layout may have to turn back
            n for n in self.space.field_keys if n in self.varied and vars(self.base)[n] is not None)
        self.assumptions: list[str] = []

    # --- setup ------------------------------------------------------------------------------------

    def _base(self, req: PlanRequest) -> TrainingConfig:
        base = fill_from_preset(req.base, self.kb)
        if not base.num_layers or not base.hidden_size or not base.num_attention_heads:
            raise UserError("model: num_layers, hidden_size and num_attention_heads are needed "
                            "(give --model NAME, --hf-config or --config)")
        if req.task == "lora" and not base.peft:
            base = apply_overrides(base, ["peft=lora"], self.kb)
        elif req.task != "lora":
            base = replace(base, peft=None)
        return replace(base, task=req.task, provided=True)

    def _intern(self, value: tuple) -> int:
        """A small int standing for ``value`` (equal values, equal ints) within this request."""
        return self._interned.setdefault(value, len(self._interned))

    def _applicable(self, group: str) -> tuple[Option, ...]:
        return tuple(o for o in self.space.options[group]
                     if o.applies_when is None or evaluate(o.applies_when, self.flat_base))

    def _option_fields(self, group: str, opt: Option | None) -> dict[str, Any]:
        """Every field of ``group``: the option's values, the others back to a neutral value.

        A base value that one of the group's options would set (the user's FSDP, recompute, offload) is
        cleared, so a layout without that option really runs without it; other base values (a checkpoint
        format) are kept.
        """
        out: dict[str, Any] = {}
        on_values: dict[str, list[Any]] = {}
        for o in self.space.options[group]:
            for name, value in o.fields.items():
                on_values.setdefault(name, []).append(value)
        for name in self.space.group_fields[group]:
            value = vars(self.base)[name]
            if value is not None and value in on_values[name]:
                value = False if isinstance(value, bool) else None
            out[name] = value
        if opt is not None:
            out.update(opt.fields)
            if opt.layers_fraction is not None:
                layers = int(self.base.num_layers)
                out["cpu_offloading_num_layers"] = max(1, min(layers - 1, round(opt.layers_fraction * layers)))
        return out

    def _combos(self) -> list[_Combo]:
        choices = []
        for g in GROUPS:
            opts: list[Option | None] = list(self.groups[g])
            if g in ("activation_offload", "peft"):
                opts.insert(0, None)
            choices.append(opts)
        combos = []
        for i, picked in enumerate(product(*choices)):
            fields: dict[str, Any] = {}
            ids: list[str] = []
            for g, opt in zip(GROUPS, picked, strict=True):
                fields.update(self._option_fields(g, opt))
                ids += list(opt.costs) if opt else []
            reasons = cost_model.option_reasons(self.costs, ids)
            combos.append(_Combo(picked, fields, cost_model.product(reasons), tuple(dict.fromkeys(ids)),
                                 cost_model.scaled(self.costs, ids), i))
        return combos

    def _bounds(self) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        """Per combination, others that never need less memory (upper) and never need more (lower).

        Upper: every group moved to the top of its memory chain (offload and re-gather off, no recompute
        instead of selective, the distributed optimizer instead of an offload), then each group alone.
        Lower: the same towards the bottom of each chain.  Fallback options are never chosen as a bound.
        """
        index = {tuple(o.id if o else None for o in c.options): c.order for c in self.combos}

        def pick(g: str, o: Option | None, top: bool) -> Option | None:
            """The most (top) or least memory-hungry choice strictly beyond ``o`` in its chain, else ``o``."""
            offable = g in ("activation_offload", "peft")
            if top and offable:
                return None  # "off" is above every chain of the group
            if o is None and not offable:
                return o
            pool = [x for x in self.groups[g] if not x.fallback and x.chain is not None]
            if o is None:  # off: every chain member lies below it
                beyond = pool
            elif o.chain is None:
                return o
            else:
                beyond = [x for x in pool if x.chain == o.chain and (x.rank > o.rank if top else x.rank < o.rank)]
            if not beyond:
                return o
            return (max if top else min)(beyond, key=lambda x: x.rank)

        upper: list[tuple[int, ...]] = []
        lower: list[tuple[int, ...]] = []
        for c in self.combos:
            for top, out in ((True, upper), (False, lower)):
                moved = [pick(g, o, top) for g, o in zip(GROUPS, c.options, strict=True)]
                tries = [moved] + [[m if j == i else o for j, (o, m) in enumerate(zip(c.options, moved, strict=True))]
                                   for i in range(len(GROUPS))]
                found = (index.get(tuple(getattr(x, "id", None) for x in t)) for t in tries)
                out.append(tuple(dict.fromkeys(f for f in found if f is not None and f != c.order)))
        return upper, lower

    # --- enumeration ------------------------------------------------------------------------------

    def _shape_fields(self, tp: int, pp: int | None = None, vpp: int | None = None, cp: int | None = None,
                      ep: int | None = None, split: bool = False, layout: str | None = None) -> dict[str, Any]:
        world = self.req.gpus
        out: dict[str, Any] = {
            "tensor_model_parallel_size": tp, "sequence_parallel": tp > 1, "world_size": world,
            "seq_length": self.req.seq_length, "global_batch_size": self.req.global_batch_size,
            "pipeline_model_parallel_size": pp,
            "virtual_pipeline_model_parallel_size": vpp if vpp and vpp > 1 else None,
            "context_parallel_size": cp,
        }
        for name in SPLIT_FIELDS:  # unset unless chosen; turned off where the base config sets it
            out[name] = True if split else (False if vars(self.base)[name] else None)
        out[LAYOUT_FIELD] = layout
        if self.ctx.moe:
            out["expert_model_parallel_size"] = ep
        if pp and cp:
            out["data_parallel_size"] = world // (tp * pp * cp)
        return out

    def _shape_ok(self, key: tuple, fields: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        """Constraints on the sizes alone: every option left unset, so only the shape can violate one."""
        derived = self.feas.derived(key, fields)
        merged = {**self.neutral, **fields}
        return not self.feas.violations(("shape", key), key, lambda: merged), derived

    def shapes(self) -> Iterator[_Shape]:
        world = self.req.gpus
        experts = int(self.base.num_moe_experts or 0)
        max_vpp = int(self.base.num_layers)
        for tp in _divisors(world):
            if tp > self.gpn and not self.req.allow_cross_node_tp:
                continue
            if not self._shape_ok((tp,), self._shape_fields(tp))[0]:
                continue
            for pp in _divisors(world // tp):
                divides = self._shape_ok((tp, pp), self._shape_fields(tp, pp))[0]
                # the embedding/loss split where the layers do not divide over the stages (as the recipes use it
                # for 126 and 94 layers), or where the base config sets it: elsewhere it would add shapes for a
                # one-layer move the imbalance cost already prices
                try_split = pp > 1 and (not divides or self._base_split) and self._shape_ok(
                    (tp, pp, 0, 1), self._shape_fields(tp, pp, split=True))[0]
                try_layout = pp > 1 and not divides and not try_split
                if not divides and not try_split and not try_layout:
                    continue
                vpps = [1] + (list(range(2, max_vpp // pp + 2)) if pp > 1 else [])
                for vpp in vpps:
                    even = divides and self._shape_ok((tp, pp, vpp), self._shape_fields(tp, pp, vpp))[0]
                    split = try_split and (not even or self._base_split) and self._shape_ok(
                        (tp, pp, vpp, 1), self._shape_fields(tp, pp, vpp, split=True))[0]
                    layout = traffic_model.balanced_layout(self.layers, self.mtp, pp * vpp) if (
                        try_layout and not even and not split) else None
                    if layout:
                        fields = self._shape_fields(tp, pp, vpp, layout=layout)
                        layout = layout if self._shape_ok((tp, pp, vpp, 2), fields)[0] else None
                    if not even and not split and not layout:
                        continue
                    mark = (1,) if split else (2,) if layout else ()
                    for cp in _divisors(world // (tp * pp)):
                        dp = world // (tp * pp * cp)
                        for ep in (_divisors(experts) if experts else [1]):
                            fields = self._shape_fields(tp, pp, vpp, cp, ep, split, layout)
                            key = (tp, pp, vpp, cp, ep, *mark)
                            ok, derived = self._shape_ok(key, fields)
                            if ok:
                                etp = int(self.base.expert_tensor_parallel_size or tp)
                                yield _Shape(tp, pp, vpp, cp, ep, etp, dp, fields, key)

    def _index(self) -> None:
        """Number the candidates so that their ids sort as the ranking breaks ties.

        Id = ((shape rank x micro-batch rank) x combinations) + combination, where shapes rank by (TP, PP, CP,
        EP, VPP) (unique per shape) and micro-batch sizes largest first: ordering (-score, id) is ordering
        (-score, TP, PP, CP, EP, VPP, -MBS, combination).  Verdicts then live in flat byte arrays instead of
        dicts of tuples (an ``--all`` plan decides 10^5 candidates).
        """
        shapes, sizes = self.shape_list, self.space.micro_batch_sizes
        self._shape_at = sorted(range(len(shapes)), key=lambda i: (shapes[i].tp, shapes[i].pp, shapes[i].cp,
                                                                   shapes[i].ep, shapes[i].vpp))
        self._srank = [0] * len(shapes)
        for r, si in enumerate(self._shape_at):
            self._srank[si] = r
        mbs_order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
        self._mbs_at = [sizes[i] for i in mbs_order]
        self._mrank = [0] * len(sizes)
        for r, mi in enumerate(mbs_order):
            self._mrank[mi] = r
        self._nc, self._nm = len(self.combos), len(sizes)
        count = len(shapes) * self._nm * self._nc
        self._verdicts, self._valid, self._estimated = bytearray(count), bytearray(count), bytearray(count)
        self._factors = array("d", bytes(8 * count))  # each valid candidate's score, as _rank sorts by it
        self._size_at = {size: i for i, size in enumerate(sizes)}

    def _decode(self, t: int) -> tuple[int, int, int]:
        """(shape index, micro-batch size, combination) of a candidate id."""
        rest, ci = divmod(t, self._nc)
        sr, mr = divmod(rest, self._nm)
        return self._shape_at[sr], self._mbs_at[mr], ci

    def _id(self, si: int, mbs: int, ci: int) -> int:
        return (self._srank[si] * self._nm + self._mrank[self._size_at[mbs]]) * self._nc + ci

    def candidates(self) -> list[tuple]:
        """Every valid ((-score, id), shape, micro-batch, combination), best score first (see ``_index``)."""
        return [((0.0, t), *self._decode(t)) for t in self._rank()]

    def _rank(self) -> list[int]:
        """Ids of every valid candidate, best score first.

        Which combinations a (shape, micro-batch) admits depends only on the constraint facts of the two
        (``shape_projection`` and the micro-batch size when a constraint reads it), so that list is built once
        per distinct pair of facts and reused by every shape that shares them.
        """
        gbs = self.req.global_batch_size
        fallback = [c for c in self.combos if any(o is not None and o.fallback for o in c.options)]
        regular = [c for c in self.combos if c not in fallback]
        self.shape_list = list(self.shapes())
        self._lines = OverrideLines(self.shape_list, self.combos, self.space.layout_overrides, self.space.field_keys,
                                    self.base, self._resettable)
        self._index()
        admitted: dict[tuple, tuple[int, tuple[int, ...]]] = {}
        keys: list[tuple[float, int]] = []
        valid, factors = self._valid, self._factors
        combo_factor, combo_scaled = [c.factor for c in self.combos], [c.scaled for c in self.combos]
        for si, s in enumerate(self.shape_list):
            for mi, mbs in enumerate(self.space.micro_batch_sizes):
                if gbs % (mbs * s.dp):
                    continue
                shape_factor = cost_model.product(self._shape_reasons(si, mbs))
                sproj = self._intern(self.feas.shape_projection(s.key, s.fields))
                mbs_key = mbs if "micro_batch_size" in self.feas.varied_names else None
                hit = admitted.get((sproj, mbs_key))
                if hit is None:
                    hit = admitted[(sproj, mbs_key)] = self._admitted(s, mbs, sproj, mbs_key, regular, fallback)
                enumerated, cis = hit
                first = (self._srank[si] * self._nm + self._mrank[mi]) * self._nc
                traffic = self._traffic(si, mbs)  # shapes that differ only in VPP or the split move the same bytes
                for ci in cis:
                    factor = shape_factor * combo_factor[ci]
                    if combo_scaled[ci]:
                        factor *= self._moved(combo_scaled[ci], traffic)[1]
                    t = first + ci
                    valid[t] = 1
                    factors[t] = factor
                    keys.append((-factor, t))
                self.stats.enumerated += enumerated
                self.stats.valid += len(cis)
        keys.sort()
        return [t for _, t in keys]

    def _admitted(self, s: _Shape, mbs: int, sproj: int, mbs_key: int | None, regular: list[_Combo],
                  fallback: list[_Combo]) -> tuple[int, tuple[int, ...]]:
        """(combinations tried, the valid ones) on a shape at a micro-batch size.

        A fallback combination (an optimizer offload, say) is only tried when every model-state choice of
        the same other options is refused.
        """
        mfields = {**s.fields, "micro_batch_size": mbs}
        blocked: dict[tuple, bool] = {}
        enumerated, out = 0, []
        for combos in (regular, fallback):
            for c in combos:
                rest = self.rest[c.order]
                if combos is fallback and not blocked.get(rest, True):
                    continue  # another model-state choice works for these options
                enumerated += 1
                if self.feas.violations((sproj, mbs_key, self.proj[c.order]), s.key,
                                        lambda c=c, mf=mfields: {**mf, **c.fields}):
                    blocked.setdefault(rest, True)
                    continue
                blocked[rest] = False
                out.append(c.order)
        return enumerated, tuple(out)

    # --- memory -----------------------------------------------------------------------------------

    def layout(self, si: int, mbs: int, ci: int) -> PlannedLayout:
        """The candidate with its score, reasons and lines (no memory yet: see ``measure``)."""
        return self._layout(self._id(si, mbs, ci), si, mbs, ci)

    def _head(self, si: int, ci: int) -> tuple:
        """What every micro-batch size of a shape and combination shares (sizes, option ids, env, split, layout)."""
        pair = si * self._nc + ci
        head = self._heads.get(pair)
        if head is None:
            s, c, ids = self.shape_list[si], self.combos[ci], self.ids[ci]
            head = self._heads[pair] = (
                s.tp, s.pp, s.vpp, s.cp, s.ep, s.etp, s.dp, ids["recompute"], ids["model_state"],
                ids["activation_offload"], ids["peft"], self._env(c), bool(s.fields.get(SPLIT_FIELDS[1])),
                s.fields.get(LAYOUT_FIELD))
        return head

    def _layout(self, t: int, si: int, mbs: int, ci: int) -> PlannedLayout:
        pair = si * self._nc + ci
        tp, pp, vpp, cp, ep, etp, dp, recompute, model_state, offload, peft, env, split, pipeline_layout = \
            self._head(si, ci)
        m, shape, traffic = self._shape_parts(si, mbs)
        options, moved = self._option_parts(ci, traffic)
        factor = self._factors[t] if self._valid[t] else cost_model.product((*shape, *options, *moved))
        return PlannedLayout(
            tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, dp=dp, micro_batch_size=mbs, num_microbatches=m,
            recompute=recompute, model_state=model_state, activation_offload=offload, peft=peft,
            relative_throughput=factor, shape_reasons=shape, option_reasons=options, traffic_reasons=moved,
            lines=self._lines, pair=pair, env=env, split_embedding_loss=split,
            pipeline_layout=pipeline_layout,
        )

    def _shape_parts(self, si: int, mbs: int) -> tuple[int, tuple[cost_model.Reason, ...], Any]:
        """(micro-batches, parallel factors, traffic) of a shape at a micro-batch size, looked up once."""
        key = si * self._nm + self._mrank[self._size_at[mbs]]
        hit = self._parts.get(key)
        if hit is None:
            hit = self._parts[key] = (self.req.global_batch_size // (mbs * self.shape_list[si].dp),
                                      self._shape_reasons(si, mbs), self._traffic(si, mbs))
        return hit

    def _shape_reasons(self, si: int, mbs: int) -> tuple[cost_model.Reason, ...]:
        """Parallel factors of a shape at a micro-batch size (``--all`` shows thousands of layouts per shape)."""
        key = ("shape", si, mbs)
        hit = self._reasons.get(key)
        if hit is None:
            s = self.shape_list[si]
            traffic = self._traffic(si, mbs)
            hit = self._reasons[key] = tuple(cost_model.parallel_reasons(
                self.costs, self.ctx, tp=s.tp, pp=s.pp, vpp=s.vpp, cp=s.cp,
                microbatches=self.req.global_batch_size // (mbs * s.dp), traffic=traffic,
                balance=self._balance(s, mbs, traffic)))
        return hit

    def _balance(self, s: _Shape, mbs: int, traffic: traffic_model.Traffic | None) -> float:
        """Mean over heaviest pipeline-stage time of a shape's pipeline split (traffic.stage_balance), a MoE layer
        weighing its compute plus the dispatch it waits for."""
        if s.pp <= 1:
            return 1.0
        stretch = cost_model.dispatch_stretch(self.costs, self.ctx, traffic)
        load = traffic_model.StageLoad(mbs * self.req.seq_length / s.cp, s.tp, s.ep * s.etp, self.workload["frozen"],
                                       self.workload["grad_bytes"])
        split = tuple(s.fields.get(n) for n in (*SPLIT_FIELDS, LAYOUT_FIELD))
        key = (s.pp, s.vpp, split, stretch, load)
        if key not in self._balances:
            cfg = replace(self.base, **{n: s.fields.get(n) for n in (*SPLIT_FIELDS, LAYOUT_FIELD)})
            self._balances[key] = 1.0 if self.arch is None else traffic_model.stage_balance(
                self.arch, cfg, s.pp, s.vpp, self.req.seq_length, moe_stretch=stretch, hw=self.hw, load=load)
        return self._balances[key]

    def _option_parts(self, ci: int,
                      traffic: traffic_model.Traffic | None) -> tuple[tuple[cost_model.Reason, ...], ...]:
        """Option factors of a combination at a layout's traffic (``_traffic``), as (constant, traffic): the first
        once per combination, the second (planner/traffic.py) once per set of traffic costs and layout sizes,
        so 10^5 fitting layouts share a few thousand tuples."""
        key = (ci, id(traffic))  # traffic objects live in self._traffics as long as the planner
        hit = self._options_at.get(key)
        if hit is None:
            c = self.combos[ci]
            const = self._reasons.get(("options", ci))
            if const is None:
                const = self._reasons[("options", ci)] = tuple(cost_model.option_reasons(
                    self.costs, [i for i in c.cost_ids if i not in c.scaled]))
            hit = self._options_at[key] = (const, self._moved(c.scaled, traffic)[0] if c.scaled else ())
        return hit

    def _moved(self, scaled: tuple[str, ...], traffic: traffic_model.Traffic | None) -> tuple[tuple, float]:
        """(factors, their product) of the traffic costs ``scaled`` at ``traffic``: the ranking multiplies the
        product into 10^5 scores, a layout shows the factors; one entry per set of costs and layout sizes."""
        key = (scaled, id(traffic))  # traffic objects live in self._traffics as long as the planner
        hit = self._moved_at.get(key)
        if hit is None:
            reasons = tuple(cost_model.option_reasons(self.costs, scaled, traffic))
            hit = self._moved_at[key] = (reasons, cost_model.product(reasons))
        return hit

    def _traffic(self, si: int, mbs: int) -> traffic_model.Traffic | None:
        """Compute seconds and traffic bytes of a shape at a micro-batch size; None without GPU speeds.

        One object per distinct set of sizes (VPP and the pipeline split move no bytes), so callers may key
        memos on it."""
        s = self.shape_list[si]
        key = (s.tp, s.pp, s.cp, s.ep, s.etp, s.dp, mbs)
        if key not in self._traffics:
            self._traffics[key] = None if self.hw is None or self.model_counts is None else traffic_model.traffic(
                self.model_counts, self.hw, tp=s.tp, pp=s.pp, cp=s.cp, ep=s.ep, etp=s.etp, dp=s.dp, mbs=mbs,
                seq=self.req.seq_length, microbatches=self.req.global_batch_size // (mbs * s.dp),
                gpus_per_domain=self.gpn, **self.workload)
        return self._traffics[key]

    def _env(self, combo: _Combo) -> tuple[str, ...]:
        hit = self._envs.get(combo.order)
        if hit is None:
            lines: list[str] = []
            if self.req.expandable_segments:
                lines += [CAPTURE_REUSE_ENV if self.capture_reuse and not _stated_reuse(self.req.env) else line
                          for line in self.kb.get("fixes", "expandable-segments")["apply"].get("env", [])]
            for opt in combo.options:
                if opt is not None and opt.group == "activation_offload":
                    lines += self.kb.get("fixes", opt.fix)["apply"].get("env", [])
            hit = self._envs[combo.order] = tuple(dict.fromkeys(lines))
        return hit

    def fits(self, si: int, mbs: int, ci: int) -> bool:
        """Whether the candidate fits (call after ``candidates``); see ``_fits``."""
        return self._fits(self._id(si, mbs, ci))

    def _fits(self, t: int) -> bool:
        """Whether candidate ``t`` fits: inferred from decided neighbours when possible, else estimated.

        A larger micro-batch never needs less memory, nor does a combination's upper bound (see
        ``_bounds``); so a fitting upper bound or larger micro-batch means "fits", a non-fitting lower
        bound or smaller micro-batch means "does not fit".  A bound is estimated itself at most once.
        """
        verdict = self._known(t)
        if verdict is None and not self.exhaustive:
            first = t - t % self._nc  # the same shape and micro-batch size, combination 0
            # a bound is only estimated when it is a valid candidate itself (its estimate is never wasted)
            for b, is_upper in self.tries[t % self._nc]:
                known = self._known(first + b)
                if known is None and self._valid[first + b]:
                    known = self._decide(first + b)
                if known is is_upper:
                    verdict = is_upper
                    break
            if verdict is not None:
                self.stats.inferred += 1
                self._record(t, verdict)
        return self._decide(t) if verdict is None else verdict

    def _estimated_peaks(self, t: int) -> tuple | None:
        """Candidate ``t``'s peaks (``_peaks`` without per-rank values) when it fits, else None, for an ``--all``
        plan: it shows the peak of every layout that fits, so those are estimated anyway; only a "does not fit" is
        inferred, from verdicts already recorded (a smaller micro-batch, or a combination that never needs more
        memory, that did not fit), never from a new estimate of a bound.  The walk visits each candidate once, so
        ``_known`` and ``_record`` are inlined to what this needs (10^5 calls)."""
        verdicts = self._verdicts
        if not self.exhaustive:
            rest, ci = divmod(t, self._nc)
            sr, mr = divmod(rest, self._nm)
            pair, mbs = sr * self._nc + ci, self._mbs_at[mr]  # as _pair(t)
            failed = mbs >= self._fail_mbs.get(pair, mbs + 1)
            if not failed:
                first = t - ci
                for b in self._lower_at[ci]:
                    if verdicts[first + b] == 2:
                        failed = True
                        break
            if failed:
                self.stats.inferred += 1
                verdicts[t] = 2
                if mbs < self._fail_mbs.get(pair, mbs + 1):
                    self._fail_mbs[pair] = mbs
                return None
        peaks = self._peaks(t, False)
        verdict = not isinstance(peaks, str) and peaks[2] <= self.budget
        self._record(t, verdict)
        return peaks if verdict else None

    def _pair(self, t: int) -> int:
        """The (shape, combination) of a candidate, as one int (the key of the micro-batch bounds)."""
        return t // (self._nm * self._nc) * self._nc + t % self._nc

    def _known(self, t: int) -> bool | None:
        verdict = self._verdicts[t]
        if verdict:
            return verdict == 1
        if not self.exhaustive:
            pair, mbs = self._pair(t), self._mbs_at[t // self._nc % self._nm]
            if mbs >= self._fail_mbs.get(pair, mbs + 1):
                return False
            if mbs <= self._fit_mbs.get(pair, 0):
                return True
        return None

    def _decide(self, t: int) -> bool:
        """The verdict already known, else an estimate (no inference, so bounds never recurse)."""
        verdict = self._known(t)
        if verdict is None:
            peaks = self._peaks(t)
            verdict = not isinstance(peaks, str) and peaks[2] <= self.budget
            self._record(t, verdict)
        return verdict

    def _record(self, t: int, verdict: bool) -> None:
        self._verdicts[t] = 1 if verdict else 2
        pair, mbs = self._pair(t), self._mbs_at[t // self._nc % self._nm]
        if verdict:
            self._fit_mbs[pair] = max(mbs, self._fit_mbs.get(pair, 0))
        else:
            self._fail_mbs[pair] = min(mbs, self._fail_mbs.get(pair, mbs))

    def _always_filled(self) -> bool:
        """Whether ``fill_from_preset`` leaves every candidate's config as it is (then it need not run per
        candidate): true when it leaves the base with every field a layout sets cleared, since it only fills
        preset fields that are unset, and the layouts then set none of them."""
        names = set(self.varied) | {n for c in self.combos for n in c.fields} | {"micro_batch_size"}
        cleared = TrainingConfig.__new__(TrainingConfig)
        cleared.__dict__.update(self.base.__dict__)
        cleared.__dict__.update(dict.fromkeys(names))
        return fill_from_preset(cleared, self.kb) is cleared

    def _config(self, si: int, mbs: int, ci: int) -> TrainingConfig:
        """The candidate's config: a shallow copy of the base plus the layout's fields (replace() would re-run
        __init__ on 100+ fields), with the preset filled in as ``estimate`` does."""
        cfg = TrainingConfig.__new__(TrainingConfig)
        cfg.__dict__.update(self.base.__dict__)
        cfg.__dict__.update(self.shape_list[si].fields)
        cfg.__dict__["micro_batch_size"] = mbs
        cfg.__dict__.update(self.combos[ci].fields)
        return cfg if self._filled else fill_from_preset(cfg, self.kb)

    def _peaks(self, t: int, keep: bool = True) -> tuple[int, float, float, array | None] | str:
        """(peak rank, its allocated peak, its peak with overheads, per rank [rank, allocated, with overheads] as
        flat doubles), or the estimator's refusal.

        What ``estimate`` would answer, through ``stage_peaks``: the static part (model state, placement) is
        looked up once per shape and combination fields it reads, not by hashing the whole config per
        candidate, and no Estimate is built or kept (an ``--all`` plan would hold 10^5 of them).  Only the
        latest answer is kept, for measure() right after a fit; a candidate estimated again counts once.  ``keep``
        off: the per-rank values are left out (None), for the ``--all`` walk, which shows only the peak of most.
        """
        if self._last[0] == t and (self._last[1] or not keep):
            return self._last[2]
        rest, ci = divmod(t, self._nc)  # as _decode(t)
        sr, mr = divmod(rest, self._nm)
        si, mbs = self._shape_at[sr], self._mbs_at[mr]
        if not self._estimated[t]:
            self._estimated[t] = 1
            self.stats.memory_checked += 1
        key = (si, self.static_proj[ci])
        st = self._statics.get(key)
        if st is None:
            try:
                part = static_part(self._config(si, mbs, ci), self.constants)
                # the shape's ActShape is shared by its EP sizes, so their activation sides are too (_sides)
                st = (part, static_rows(part), id(part.shape.acts))  # alive while _statics holds part
            except UserError as exc:  # the estimator refuses a layout the constraints let through
                st = str(exc)
            self._statics[key] = st
        if st.__class__ is str:
            hit = st
        elif self._acts is not None:  # no config built: the combination's activation side at this MBS
            part, rows, acts_at = st
            side_key = (acts_at, self._act_proj[ci], mr)  # the micro-batch count follows: equal DP
            side = self._sides.get(side_key)
            if side is None:
                acts, (inputs, policy) = part.shape.acts, self._acts[ci]
                microbatches = self.req.global_batch_size // (mbs * self.shape_list[si].dp)
                ctx = context_part(acts, self.constants, inputs._replace(mbs=mbs))
                side = self._sides[side_key] = (
                    act_rows(rank_acts(acts, ctx, policy, microbatches, self.constants, self.capture_reuse)),
                    ctx.workspaces)
            hit = combine_ranks(rows, side[0], side[1], self._slack, self._context_bytes, part.nccl_bytes, keep)
        else:
            microbatches = self.req.global_batch_size // (mbs * self.shape_list[si].dp)
            peak_rank, peak_bytes, stages = stage_peaks(
                self._config(si, mbs, ci), self.constants, st[0], num_microbatches=microbatches,
                expandable_segments=self.req.expandable_segments, capture_reuse=self.capture_reuse)
            hit = (peak_rank, peak_bytes, next(w for rank, _, w in stages if rank == peak_rank),
                   array("d", [x for stage in stages for x in stage]))
        self._last = (t, keep or hit.__class__ is str or hit[3] is not None, hit)
        return hit

    def measure(self, si: int, mbs: int, ci: int) -> PlannedLayout:
        """The candidate as the answer shows it, with its estimated per-stage peaks."""
        return self._measure(self._id(si, mbs, ci))

    def _measure(self, t: int) -> PlannedLayout:
        hit = self._measured.get(t)
        if hit is None:
            hit = self._layout(t, *self._decode(t))
            peaks = self._peaks(t)
            if isinstance(peaks, str):
                hit.fits, hit.error = False, peaks
            else:
                self._fill(hit, peaks, t)
            self._measured[t] = hit
        return hit

    def _fill(self, lay: PlannedLayout, peaks: tuple, t: int) -> None:
        lay.peak_stage, lay.peak_bytes, with_overheads, values = peaks
        lay.capacity_ratio = with_overheads / self.capacity  # as summarize() defines it
        lay.peak_with_overheads_bytes = with_overheads
        lay.fits = with_overheads <= self.budget
        lay.stage_values = values
        if not self.assumptions:  # the notes of the first layout shown, from its full estimate
            si, mbs, ci = self._decode(t)
            est = estimate(self._config(si, mbs, ci), gpu=self.req.gpu, kb=self.kb, env=self.est_env,
                           num_microbatches=self.req.global_batch_size // (mbs * self.shape_list[si].dp))
            self.assumptions = list(est.assumptions)

    # --- the reference layout (what the user's config already sets) --------------------------------

    def _reference_fields(self) -> dict[str, Any]:
        given = self.req.base
        if given.tensor_model_parallel_size is None and given.pipeline_model_parallel_size is None:
            return {}
        names = [*SIZE_FIELDS, "micro_batch_size", "recompute_granularity", "recompute_modules",
                 *sorted(self.space.group_fields["model_state"] | self.space.group_fields["activation_offload"])]
        out = {n: _norm(n, vars(given)[n]) for n in dict.fromkeys(names) if vars(given)[n] is not None}
        out.update({n: None for n in SIZE_FIELDS if n not in out})  # an unset size is 1 (no VPP, no CP, ...)
        if given.recompute_granularity != "selective":
            out.pop("recompute_modules", None)  # Megatron reads the modules only for selective recompute
        return out

    def _matches(self, ref: Mapping[str, Any], si: int, mbs: int, ci: int) -> bool:
        fields = {**self.shape_list[si].fields, "micro_batch_size": mbs, **self.combos[ci].fields}
        return all(_norm(n, fields.get(n)) == v for n, v in ref.items())

    def score_own(self) -> Scored | None:
        """The base config's own layout and options scored by the cost model, without the search or a memory
        check: what the planner's throughput model predicts for the run the user describes.  None when the
        config sets no layout, its sizes do not divide the GPUs or the batch, or its options (recompute, model
        state, offload) are none the planner knows."""
        ref = self._reference_fields()
        if not ref:
            return None
        given, b = self.req.base, self.base
        tp, pp, cp = (int(x or 1) for x in (b.tensor_model_parallel_size, b.pipeline_model_parallel_size,
                                             b.context_parallel_size))
        vpp = int(b.virtual_pipeline_model_parallel_size or 1)
        ep = int(b.expert_model_parallel_size or 1) if self.ctx.moe else 1
        mbs, world = int(b.micro_batch_size or 1), self.req.gpus
        if world % (tp * pp * cp) or self.req.global_batch_size % (mbs * world // (tp * pp * cp)):
            return None
        dp = world // (tp * pp * cp)
        matching = [c for c in self.combos
                    if all(_norm(n, c.fields.get(n)) == v for n, v in ref.items() if n in c.fields)]
        if not matching:
            return None
        # of the combinations the stated fields allow, the one closest to the rest of the config
        combo = max(matching, key=lambda c: sum(_norm(n, v) == _norm(n, vars(given)[n]) for n, v in c.fields.items()))
        fields = {**self._shape_fields(tp, pp, vpp, cp, ep),
                  **{n: vars(given)[n] for n in (*SPLIT_FIELDS, LAYOUT_FIELD)}}
        shape = _Shape(tp, pp, vpp, cp, ep, int(b.expert_tensor_parallel_size or tp), dp, fields, ("own",))
        microbatches = self.req.global_batch_size // (mbs * dp)
        traffic = None if self.hw is None or self.model_counts is None else traffic_model.traffic(
            self.model_counts, self.hw, tp=tp, pp=pp, cp=cp, ep=ep, etp=shape.etp, dp=dp, mbs=mbs,
            seq=self.req.seq_length, microbatches=microbatches, gpus_per_domain=self.gpn, **self.workload)
        reasons = (*cost_model.parallel_reasons(self.costs, self.ctx, tp=tp, pp=pp, vpp=vpp, cp=cp,
                                                microbatches=microbatches, traffic=traffic,
                                                balance=self._balance(shape, mbs, traffic)),
                   *cost_model.option_reasons(self.costs, combo.cost_ids, traffic))
        factor = cost_model.product(reasons)
        # a micro-batch's tokens pass the TP x PP x CP ranks of one model replica in the time of its FLOPs at the GEMM
        # rate, slowed by the factors (the memory-bound kernels among them)
        tokens = mbs * self.req.seq_length / (tp * pp * cp) * factor / traffic.flop_seconds if traffic else None
        options = {g: (o.id if o else None) for g, o in zip(GROUPS, combo.options, strict=True)}
        return Scored(factor, tuple(reasons), options, tokens)

    # --- the walk ---------------------------------------------------------------------------------

    def locate(self, **settings: Any) -> int | None:
        """Position in the ranking of the best candidate with these settings, or None.

        Keys: tp pp vpp cp ep dp (sizes), micro_batch_size, and recompute / model_state /
        activation_offload / peft (option ids, None for "off").  Call after ``run``.
        """
        for i, t in enumerate(self.order):
            si, mbs, ci = self._decode(t)
            s, picked = self.shape_list[si], dict(zip(GROUPS, self.combos[ci].options, strict=True))
            have = {"tp": s.tp, "pp": s.pp, "vpp": s.vpp, "cp": s.cp, "ep": s.ep, "dp": s.dp, "micro_batch_size": mbs,
                    **{g: (o.id if o else None) for g, o in picked.items()}}
            if all(have[k] == v for k, v in settings.items()):
                return i
        return None

    def describe(self, position: int) -> PlannedLayout:
        """The ranked candidate at ``position`` with its estimate (its ``rank`` is set only if ``run`` reached it)."""
        return self._measure(self.order[position])

    def run(self) -> PlanResult:
        with _collector_paused():
            return self._run()

    def _run(self) -> PlanResult:
        start = time.perf_counter()
        self.order = order = self._rank()
        ref_fields = self._reference_fields()
        ref_at = next((i for i, t in enumerate(order) if self._matches(ref_fields, *self._decode(t))),
                      None) if ref_fields else None
        top = self.req.top
        shown: list[PlannedLayout] = []
        reference: PlannedLayout | None = None
        fitting = 0
        fit_ids, fit_peaks = array("q"), array("d")  # an --all plan: every fitting layout, built when read
        for i, t in enumerate(order):
            if top is not None and len(shown) >= top and (ref_at is None or i > ref_at):
                break
            if top is None:
                peaks = self._estimated_peaks(t)
                ok = peaks is not None
            else:
                ok = self._fits(t)
            if ok:
                fitting += 1
                if top is None:
                    fit_ids.append(t)
                    fit_peaks.extend(peaks[:3])
                elif len(shown) < top:
                    lay = self._measure(t)
                    lay.rank = fitting
                    shown.append(lay)
            if i == ref_at:
                reference = self._measure(t)
                reference.rank = fitting if ok else None
        if top is None:
            self.stats.fitting = fitting
            shown = FittingLayouts(self, fit_ids, fit_peaks)
        tied, scope = self._ties(shown, top is None)
        close = self._ties(shown, top is None, self.throughput_band)[0]
        self.stats.seconds = time.perf_counter() - start
        return PlanResult(capacity_bytes=self.capacity, budget_bytes=self.budget, gpus_per_node=self.gpn,
                          layouts=shown, reference=reference, stats=self.stats,
                          warnings=self._warnings(bool(ref_fields) and ref_at is None),
                          assumptions=self.assumptions, tied_with_first=tied, tie_scope=scope,
                          headroom=self.headroom, headroom_class=self.headroom_class, close_to_first=close,
                          throughput_band=self.throughput_band, throughput_class=self.throughput_class)

    def _ties(self, shown: Sequence[PlannedLayout], every: bool, band: float = 0.0) -> tuple[int, str]:
        """How many layouts score what the first shown one scores (or, with ``band``, at least that fraction below
        it), and among which ("fitting" when every candidate was decided, else "valid": the ranking's block of those
        scores, whose members' fit is not all known).  The block is contiguous in ``order``, sorted by score."""
        if not shown:
            return 0, "fitting"
        first = shown[0].relative_throughput
        floor = first * (1.0 - band)
        factors, count = self._factors, 0

        def close(t: int) -> bool:
            return factors[t] >= floor if band else same_score(factors[t], first)

        if every:
            return sum(1 for _ in takewhile(close, shown.ids)), "fitting"
        for t in self.order:  # best first: the block ends at the first score below it
            if close(t):
                count += 1
            elif factors[t] < first:
                break
        return count, "valid"

    def _warnings(self, reference_missing: bool) -> list[dict[str, Any]]:
        out = [{"kind": "constraint", "id": cid} for cid in self.feas.constant]
        if self.req.expandable_segments:
            env = replace(self.req.env, provided=True, expandable_segments=True)
            flat = Facts(config=self.base, env=env, derived=derive(self.base, env)).flatten()
            for cid in self.kb.get("fixes", "expandable-segments").get("requires", []):
                con = self.kb.get("constraints", cid)
                if con.get("violated_when") and evaluate(con["violated_when"], flat):
                    out.append({"kind": "constraint", "id": cid})
        if reference_missing:
            out.append({"kind": "reference-not-found"})
        if self.hw is None:
            out.append({"kind": "no-hardware"})
        return out


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the walk, then hand what it built to the oldest generation.

    An ``--all`` run keeps every layout it builds (up to a million small objects, none in a reference cycle);
    the collector would re-scan them each time its allocation counter trips and free nothing.  Turned back on
    plainly, it would still scan them all once at its next young collection (0.4 s on the 64-GPU Qwen3 bench
    plan), so they are moved to the oldest generation unscanned first (``freeze`` then ``unfreeze``), as the
    long-lived answer they are: a cycle among them is still freed, at the next full collection.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a field value (lists and dicts as tuples), for cache keys."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    return value


def _norm(name: str, value: Any) -> Any:
    """Compare layout settings the way Megatron reads them: unset sizes are 1, unset switches are off."""
    if isinstance(value, list):
        return tuple(value)
    if value is None or value is False:
        return None
    if name in SIZE_FIELDS and value == 1:
        return None
    return value


def plan(request: PlanRequest, kb: Knowledge, *, exhaustive: bool = False) -> PlanResult:
    """Rank the layouts of ``request`` that fit (see the module docstring for the order of work)."""
    return Planner(request, kb, exhaustive=exhaustive).run()


def score(request: PlanRequest, kb: Knowledge) -> Scored | None:
    """The throughput model's score of the layout ``request.base`` sets (``Planner.score_own``)."""
    return Planner(request, kb).score_own()


def _stated_reuse(env: EnvFacts) -> str | None:
    """graph_capture_record_stream_reuse as the user's --env gives it ("False" when it sets an allocator
    configuration without it), else None."""
    if env.alloc_conf is None:
        return None
    return (env.alloc_options or {}).get("graph_capture_record_stream_reuse", "False")


def _capture_reuse(request: PlanRequest, base: TrainingConfig) -> bool:
    """Whether graph capture may reuse blocks recorded on other streams: as the user's environment says, else
    on when the plan assumes the allocator settings (--expandable-segments) and the run captures a
    full-iteration graph, as Bridge's full-iteration recipes set it."""
    stated = _stated_reuse(request.env)
    if stated is not None:
        return stated == "True"
    return request.expandable_segments and graph_kind(base) == "full_iteration"
