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
   of knowledge/costs.yaml (``memory``) a lower rank never needs more.  ``exhaustive=True`` turns the
   inference off; tests check both give the same layouts.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any

from ..conditions import evaluate
from ..derive import derive
from ..errors import UserError
from ..estimator import Estimate, estimate
from ..estimator.models import fill_from_preset
from ..facts import EnvFacts, Facts, GpuFacts, TrainingConfig
from ..inputs.config import apply_overrides
from ..knowledge import Knowledge
from . import costs as cost_model
from .feasibility import Feasibility
from .options import GROUPS, Option, Space, load
from .overrides import format_value, parse, render_texts

TASKS = ("pretrain", "sft", "lora")
SIZE_FIELDS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
               "context_parallel_size", "expert_model_parallel_size")


@dataclass(frozen=True)
class PlanRequest:
    """What the user asks: a model (in ``base``), a cluster, a batch and a task."""

    base: TrainingConfig  # architecture plus fixed settings (precision, CUDA graphs, ...); may hold a layout
    gpu: GpuFacts
    gpus: int
    seq_length: int
    global_batch_size: int
    task: str = "pretrain"
    headroom: float = 0.05
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
    reasons: list[cost_model.Reason]
    overrides: list[str]
    env: list[str]
    rank: int | None = None
    fits: bool | None = None
    capacity_ratio: float | None = None
    peak_stage: int | None = None
    peak_bytes: float | None = None
    peak_with_overheads_bytes: float | None = None
    stages: list[StagePeak] = field(default_factory=list)
    error: str | None = None


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
    layouts: list[PlannedLayout]
    reference: PlannedLayout | None
    stats: PlanStats
    warnings: list[dict[str, Any]]
    assumptions: list[str]


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
        if not 0 <= request.headroom < 1:
            raise UserError(f"--headroom {request.headroom}: give a fraction of capacity in [0, 1)")
        self.capacity = request.gpu.capacity_bytes
        if not self.capacity:
            raise UserError(f"--gpu {request.gpu.name!r}: usable capacity unknown (give --capacity-gib)")
        self.budget = self.capacity * (1.0 - request.headroom)
        gpn = request.gpus_per_node or request.gpu.nvlink_domain
        if not gpn:
            raise UserError(f"--gpu {request.gpu.name!r}: NVLink domain size unknown (give --gpus-per-node)")
        self.gpn = int(gpn)
        self.base = self._base(request)
        self.est_env = EnvFacts(provided=True, expandable_segments=request.expandable_segments)
        self.flat_base = Facts(config=self.base, env=request.env).flatten()
        self.groups = {g: self._applicable(g) for g in GROUPS}
        self.varied = frozenset(
            {*SIZE_FIELDS, "sequence_parallel", "data_parallel_size", "world_size", "micro_batch_size",
             "global_batch_size", "seq_length"}
            | {f for g in GROUPS for f in self.space.group_fields[g]})
        self.feas = Feasibility(kb, self.base, request.env, self.varied)
        self.ctx = cost_model.ShapeContext(
            hidden_size=int(self.base.hidden_size), num_layers=int(self.base.num_layers),
            seq_length=request.seq_length,
            gpus_per_node=self.gpn, moe=bool(self.base.num_moe_experts))
        self.combos = self._combos()
        self.neutral = {f: None for g in GROUPS for f in self.space.group_fields[g]}
        # constraint-cache key parts, interned to small ints so the per-candidate key hashes cheaply
        self._interned: dict[tuple, int] = {}
        self.proj = [self._intern(self.feas.projection(c.fields)) for c in self.combos]
        self.upper, self.lower = self._bounds()
        # per combination: bounds in the order fits() tries them, option ids, and the ids besides model state
        self.tries = [[(b, True) for b in up] + [(b, False) for b in low]
                      for up, low in zip(self.upper, self.lower, strict=True)]
        self.ids = [c.ids for c in self.combos]
        self.rest = [tuple(i for g, i in ids.items() if g != "model_state") for ids in self.ids]
        self.stats = PlanStats()
        self._fits: dict[tuple[int, int, int], bool] = {}
        self._fail_mbs: dict[tuple[int, int], int] = {}
        self._fit_mbs: dict[tuple[int, int], int] = {}
        self._measured: dict[tuple[int, int, int], PlannedLayout] = {}
        self._estimates: dict[tuple[int, int, int], Estimate | str] = {}
        # per-request memos of what every layout of a shape / combination shares (see layout())
        self._reasons: dict[tuple[str, int, float], tuple[cost_model.Reason, ...]] = {}
        self._templates: dict[int, tuple] = {}
        self._formatted: dict[tuple, dict[str, str]] = {}
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
            reasons = cost_model.option_reasons(self.space.costs, ids)
            combos.append(_Combo(picked, fields, cost_model.product(reasons), tuple(dict.fromkeys(ids)),
                                 cost_model.scaled(self.space.costs, ids), i))
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
                      ep: int | None = None) -> dict[str, Any]:
        world = self.req.gpus
        out: dict[str, Any] = {
            "tensor_model_parallel_size": tp, "sequence_parallel": tp > 1, "world_size": world,
            "seq_length": self.req.seq_length, "global_batch_size": self.req.global_batch_size,
            "pipeline_model_parallel_size": pp,
            "virtual_pipeline_model_parallel_size": vpp if vpp and vpp > 1 else None,
            "context_parallel_size": cp,
        }
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
                if not self._shape_ok((tp, pp), self._shape_fields(tp, pp))[0]:
                    continue
                vpps = [1] + (list(range(2, max_vpp // pp + 1)) if pp > 1 else [])
                for vpp in vpps:
                    if vpp > 1 and not self._shape_ok((tp, pp, vpp), self._shape_fields(tp, pp, vpp))[0]:
                        continue
                    for cp in _divisors(world // (tp * pp)):
                        dp = world // (tp * pp * cp)
                        for ep in (_divisors(experts) if experts else [1]):
                            fields = self._shape_fields(tp, pp, vpp, cp, ep)
                            ok, derived = self._shape_ok((tp, pp, vpp, cp, ep), fields)
                            if ok:
                                etp = int(self.base.expert_tensor_parallel_size or tp)
                                yield _Shape(tp, pp, vpp, cp, ep, etp, dp, fields, (tp, pp, vpp, cp, ep))

    def candidates(self) -> list[tuple]:
        """Every valid (score, tie-break, shape, micro-batch, combination), best score first."""
        out = []
        gbs = self.req.global_batch_size
        fallback = [c for c in self.combos if any(o is not None and o.fallback for o in c.options)]
        regular = [c for c in self.combos if c not in fallback]
        self.shape_list = list(self.shapes())
        self.valid: set[tuple[int, int, int]] = set()
        for si, s in enumerate(self.shape_list):
            for mbs in self.space.micro_batch_sizes:
                if gbs % (mbs * s.dp):
                    continue
                m = gbs // (mbs * s.dp)
                shape_factor = cost_model.product(self._shape_reasons(si, m))
                tokens = gbs * self.req.seq_length / (s.dp * s.cp)
                mfields = {**s.fields, "micro_batch_size": mbs}
                sproj = self._intern(self.feas.shape_projection(s.key, s.fields))
                mbs_key = mbs if "micro_batch_size" in self.feas.varied_names else None
                blocked: dict[tuple, bool] = {}
                enumerated = valid = 0
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
                        valid += 1
                        factor = shape_factor * c.factor
                        if c.scaled:
                            factor *= cost_model.product(cost_model.option_reasons(self.space.costs, c.scaled, tokens))
                        key = (-factor, s.tp, s.pp, s.cp, s.ep, s.vpp, -mbs, c.order)
                        out.append((key, si, mbs, c.order))
                self.stats.enumerated += enumerated
                self.stats.valid += valid
        out.sort()
        return out

    # --- memory -----------------------------------------------------------------------------------

    def layout(self, si: int, mbs: int, ci: int) -> PlannedLayout:
        s, c = self.shape_list[si], self.combos[ci]
        m = self.req.global_batch_size // (mbs * s.dp)
        reasons = [*self._shape_reasons(si, m), *self._option_reasons(si, ci)]
        ids = self.ids[ci]
        return PlannedLayout(
            tp=s.tp, pp=s.pp, vpp=s.vpp, cp=s.cp, ep=s.ep, etp=s.etp, dp=s.dp, micro_batch_size=mbs,
            num_microbatches=m, recompute=ids["recompute"], model_state=ids["model_state"],
            activation_offload=ids["activation_offload"], peft=ids["peft"],
            relative_throughput=cost_model.product(reasons), reasons=reasons,
            overrides=self._overrides(si, mbs, ci), env=list(self._env(c)),
        )

    def _shape_reasons(self, si: int, microbatches: int) -> tuple[cost_model.Reason, ...]:
        """Parallel factors of a shape at a micro-batch count (``--all`` shows thousands of layouts per shape)."""
        key = ("shape", si, microbatches)
        hit = self._reasons.get(key)
        if hit is None:
            s = self.shape_list[si]
            hit = self._reasons[key] = tuple(cost_model.parallel_reasons(
                self.space.costs, self.ctx, tp=s.tp, pp=s.pp, vpp=s.vpp, cp=s.cp, ep=s.ep, etp=s.etp,
                microbatches=microbatches))
        return hit

    def _option_reasons(self, si: int, ci: int) -> tuple[cost_model.Reason, ...]:
        """Option factors of a combination on a shape (the FSDP ones scale with the shape's tokens per GPU, so
        shapes with the same DP x CP share them)."""
        s = self.shape_list[si]
        tokens = self.req.global_batch_size * self.req.seq_length / (s.dp * s.cp)
        key = ("options", ci, tokens)
        hit = self._reasons.get(key)
        if hit is None:
            hit = self._reasons[key] = tuple(
                cost_model.option_reasons(self.space.costs, self.combos[ci].cost_ids, tokens))
        return hit

    def _overrides(self, si: int, mbs: int, ci: int) -> list[str]:
        """The layout's Bridge overrides; templates are split once per combination and shape / option values
        formatted once per shape / combination, since ``--all`` renders tens of thousands of layouts."""
        s, combo = self.shape_list[si], self.combos[ci]
        templates = self._templates.get(ci)
        if templates is None:
            texts = list(self.space.layout_overrides)
            for opt in combo.options:
                if opt is not None:
                    texts += opt.overrides
            templates = self._templates[ci] = parse(texts)
        values = {**self._texts(("shape", si), s.fields), "micro_batch_size": format_value(mbs),
                  **self._texts(("combo", ci), combo.fields)}
        resets: dict[str, str] = {}
        if self._resettable:  # usually empty: a preset leaves every varied field unset
            keys = self.space.field_keys
            fields = {**s.fields, "micro_batch_size": mbs, **combo.fields}
            resets = {name: keys[name] for name, value in fields.items()
                      if name in self._resettable and vars(self.base)[name] not in (None, value)}
        return render_texts(templates, values, resets)

    def _texts(self, key: tuple, fields: Mapping[str, Any]) -> dict[str, str]:
        """``format_value`` of each of a shape's or a combination's fields, formatted once."""
        hit = self._formatted.get(key)
        if hit is None:
            hit = self._formatted[key] = {name: format_value(value) for name, value in fields.items()}
        return hit

    def _env(self, combo: _Combo) -> tuple[str, ...]:
        hit = self._envs.get(combo.order)
        if hit is None:
            lines: list[str] = []
            if self.req.expandable_segments:
                lines += self.kb.get("fixes", "expandable-segments")["apply"].get("env", [])
            for opt in combo.options:
                if opt is not None and opt.group == "activation_offload":
                    lines += self.kb.get("fixes", opt.fix)["apply"].get("env", [])
            hit = self._envs[combo.order] = tuple(dict.fromkeys(lines))
        return hit

    def fits(self, si: int, mbs: int, ci: int) -> bool:
        """Whether the candidate fits: inferred from decided neighbours when possible, else estimated.

        A larger micro-batch never needs less memory, nor does a combination's upper bound (see
        ``_bounds``); so a fitting upper bound or larger micro-batch means "fits", a non-fitting lower
        bound or smaller micro-batch means "does not fit".  A bound is estimated itself at most once.
        """
        verdict = self._known(si, mbs, ci)
        if verdict is None and not self.exhaustive:
            # a bound is only estimated when it is a valid candidate itself (its estimate is never wasted)
            for b, is_upper in self.tries[ci]:
                known = self._known(si, mbs, b)
                if known is None and (si, mbs, b) in self.valid:
                    known = self._decide(si, mbs, b)
                if known is is_upper:
                    verdict = is_upper
                    break
            if verdict is not None:
                self.stats.inferred += 1
                self._record(si, mbs, ci, verdict)
        return self._decide(si, mbs, ci) if verdict is None else verdict

    def _known(self, si: int, mbs: int, ci: int) -> bool | None:
        verdict = self._fits.get((si, mbs, ci))
        if verdict is None and not self.exhaustive:
            if mbs >= self._fail_mbs.get((si, ci), mbs + 1):
                verdict = False
            elif mbs <= self._fit_mbs.get((si, ci), 0):
                verdict = True
        return verdict

    def _decide(self, si: int, mbs: int, ci: int) -> bool:
        """The verdict already known, else an estimate (no inference, so bounds never recurse)."""
        verdict = self._known(si, mbs, ci)
        if verdict is None:
            peak = self._peak(self._estimate(si, mbs, ci))
            verdict = peak is not None and peak <= self.budget
            self._record(si, mbs, ci, verdict)
        return verdict

    def _record(self, si: int, mbs: int, ci: int, verdict: bool) -> None:
        self._fits[(si, mbs, ci)] = verdict
        if verdict:
            self._fit_mbs[(si, ci)] = max(mbs, self._fit_mbs.get((si, ci), 0))
        else:
            self._fail_mbs[(si, ci)] = min(mbs, self._fail_mbs.get((si, ci), mbs))

    def _estimate(self, si: int, mbs: int, ci: int) -> Estimate | str:
        """The estimate of a candidate (or the estimator's refusal), one call per candidate."""
        hit = self._estimates.get((si, mbs, ci))
        if hit is None:
            s = self.shape_list[si]
            fields = {**s.fields, "micro_batch_size": mbs, **self.combos[ci].fields}
            self.stats.memory_checked += 1
            try:
                # a shallow copy plus the layout's fields (replace() would re-run __init__ on 100+ fields)
                cfg = TrainingConfig.__new__(TrainingConfig)
                cfg.__dict__.update(self.base.__dict__)
                cfg.__dict__.update(fields)
                hit = estimate(cfg, gpu=self.req.gpu, kb=self.kb, env=self.est_env,
                               num_microbatches=self.req.global_batch_size // (mbs * s.dp))
            except UserError as exc:  # the estimator refuses a layout the constraints let through
                hit = str(exc)
            self._estimates[(si, mbs, ci)] = hit
        return hit

    def _peak(self, est: Estimate | str) -> float | None:
        if isinstance(est, str):
            return None
        return next(s for s in est.stages if s.pp_rank == est.peak_stage).peak_with_overheads_bytes

    def measure(self, si: int, mbs: int, ci: int) -> PlannedLayout:
        """The candidate as the answer shows it, with its estimated per-stage peaks."""
        hit = self._measured.get((si, mbs, ci))
        if hit is None:
            hit = self.layout(si, mbs, ci)
            est = self._estimate(si, mbs, ci)
            if isinstance(est, str):
                hit.fits, hit.error = False, est
            else:
                self._fill(hit, est)
            self._measured[(si, mbs, ci)] = hit
        return hit

    def _fill(self, lay: PlannedLayout, est: Estimate) -> None:
        peak = next(s for s in est.stages if s.pp_rank == est.peak_stage)
        lay.capacity_ratio = peak.peak_with_overheads_bytes / self.capacity  # as summarize() defines it
        lay.peak_stage = est.peak_stage
        lay.peak_bytes = est.peak_bytes
        lay.peak_with_overheads_bytes = peak.peak_with_overheads_bytes
        lay.fits = peak.peak_with_overheads_bytes <= self.budget
        lay.stages = [StagePeak(s.pp_rank, s.allocated_peak_bytes, s.peak_with_overheads_bytes) for s in est.stages]
        if not self.assumptions:
            self.assumptions = list(est.assumptions)

    # --- the reference layout (what the user's config already sets) --------------------------------

    def _reference_fields(self) -> dict[str, Any]:
        given = self.req.base
        if given.tensor_model_parallel_size is None and given.pipeline_model_parallel_size is None:
            return {}
        names = [*SIZE_FIELDS, "micro_batch_size", "recompute_granularity", "recompute_modules",
                 *sorted(self.space.group_fields["model_state"] | self.space.group_fields["activation_offload"])]
        out = {n: _norm(n, vars(given)[n]) for n in dict.fromkeys(names) if vars(given)[n] is not None}
        if given.recompute_granularity != "selective":
            out.pop("recompute_modules", None)  # Megatron reads the modules only for selective recompute
        return out

    def _matches(self, ref: Mapping[str, Any], si: int, mbs: int, ci: int) -> bool:
        fields = {**self.shape_list[si].fields, "micro_batch_size": mbs, **self.combos[ci].fields}
        return all(_norm(n, fields.get(n)) == v for n, v in ref.items())

    # --- the walk ---------------------------------------------------------------------------------

    def locate(self, **settings: Any) -> int | None:
        """Position in the ranking of the best candidate with these settings, or None.

        Keys: tp pp vpp cp ep dp (sizes), micro_batch_size, and recompute / model_state /
        activation_offload / peft (option ids, None for "off").  Call after ``run``.
        """
        for i, (_, si, mbs, ci) in enumerate(self.ranked):
            s, picked = self.shape_list[si], dict(zip(GROUPS, self.combos[ci].options, strict=True))
            have = {"tp": s.tp, "pp": s.pp, "vpp": s.vpp, "cp": s.cp, "ep": s.ep, "dp": s.dp, "micro_batch_size": mbs,
                    **{g: (o.id if o else None) for g, o in picked.items()}}
            if all(have[k] == v for k, v in settings.items()):
                return i
        return None

    def describe(self, position: int) -> PlannedLayout:
        """The ranked candidate at ``position`` with its estimate (its ``rank`` is set only if ``run`` reached it)."""
        _, si, mbs, ci = self.ranked[position]
        return self.measure(si, mbs, ci)

    def run(self) -> PlanResult:
        with _collector_paused():
            return self._run()

    def _run(self) -> PlanResult:
        start = time.perf_counter()
        self.ranked = ranked = self.candidates()
        ref_fields = self._reference_fields()
        ref_at = next((i for i, (_, si, mbs, ci) in enumerate(ranked) if self._matches(ref_fields, si, mbs, ci)),
                      None) if ref_fields else None
        top = self.req.top
        shown: list[PlannedLayout] = []
        reference: PlannedLayout | None = None
        fitting = 0
        for i, (_, si, mbs, ci) in enumerate(ranked):
            if top is not None and len(shown) >= top and (ref_at is None or i > ref_at):
                break
            ok = self.fits(si, mbs, ci)
            if ok:
                fitting += 1
                if top is None or len(shown) < top:
                    lay = self.measure(si, mbs, ci)
                    lay.rank = fitting
                    shown.append(lay)
            if i == ref_at:
                reference = self.measure(si, mbs, ci)
                reference.rank = fitting if ok else None
        if top is None:
            self.stats.fitting = fitting
        self.stats.seconds = time.perf_counter() - start
        return PlanResult(capacity_bytes=self.capacity, budget_bytes=self.budget, gpus_per_node=self.gpn,
                          layouts=shown, reference=reference, stats=self.stats,
                          warnings=self._warnings(bool(ref_fields) and ref_at is None),
                          assumptions=self.assumptions)

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
        return out


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the walk.

    An ``--all`` run keeps every estimate and layout it builds (up to a million small objects, none in a
    reference cycle); the collector would re-scan them each time its allocation counter trips and free
    nothing, a quarter of the run time on the larger benchmarks/bench_plan.py scenarios.  Whatever cycles
    the walk does leave are collected once the collector is back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
