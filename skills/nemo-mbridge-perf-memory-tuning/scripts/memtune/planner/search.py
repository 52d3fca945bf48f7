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

This module holds ``Planner``'s state and the walk, and is the API (``plan``, ``score`` and the types, re-exported).
The steps live beside it as the mixins ``Planner`` inherits: candidates.py (1-3: combinations, shapes, constraint
pruning, ranking), scoring.py (a candidate's factors and layout), fit.py (4: fit inferred or estimated) and
reference.py (the user's own layout); request.py and results.py hold what a plan is asked and answers.
"""

from __future__ import annotations

import gc
import time
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from itertools import takewhile
from typing import Any

from ..conditions import evaluate
from ..derive import derive
from ..errors import UserError
from ..estimator.constants import constants
from ..estimator.models import fill_from_preset, preset
from ..estimator.rank_activations import ACT_FIELDS, ActInputs, ChunkPolicy, act_inputs, chunk_policy
from ..estimator.static import PER_CANDIDATE_FIELDS
from ..facts import EnvFacts, Facts, TrainingConfig
from ..inputs.config import apply_overrides
from ..knowledge import Knowledge
from . import costs as cost_model
from . import traffic as traffic_model
from .candidates import CandidatesMixin
from .feasibility import Feasibility
from .fit import FitMixin
from .headroom import error_band, throughput_band
from .lines import OverrideLines
from .options import GROUPS, Option, Space, load
from .reference import ReferenceMixin
from .request import (
    CAPTURE_REUSE_ENV,
    LAYOUT_FIELD,
    SHAPE_FIELDS,
    SIZE_FIELDS,
    SPLIT_FIELDS,
    TASKS,
    PlanRequest,
    _capture_reuse,
)
from .results import (
    FittingLayouts,
    LayoutRow,
    PlannedLayout,
    PlanResult,
    PlanStats,
    Scored,
    StagePeak,
    StagePeaks,
    same_score,
)
from .scoring import ScoringMixin

__all__ = ["CAPTURE_REUSE_ENV", "LAYOUT_FIELD", "SHAPE_FIELDS", "SIZE_FIELDS", "SPLIT_FIELDS", "TASKS",
           "FittingLayouts", "LayoutRow", "PlanRequest", "PlanResult", "PlanStats", "PlannedLayout", "Planner",
           "Scored", "StagePeak", "StagePeaks", "plan", "same_score", "score"]


class Planner(CandidatesMixin, ScoringMixin, FitMixin, ReferenceMixin):
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


def plan(request: PlanRequest, kb: Knowledge, *, exhaustive: bool = False) -> PlanResult:
    """Rank the layouts of ``request`` that fit (see the module docstring for the order of work)."""
    return Planner(request, kb, exhaustive=exhaustive).run()


def score(request: PlanRequest, kb: Knowledge) -> Scored | None:
    """The throughput model's score of the layout ``request.base`` sets (``Planner.score_own``)."""
    return Planner(request, kb).score_own()
