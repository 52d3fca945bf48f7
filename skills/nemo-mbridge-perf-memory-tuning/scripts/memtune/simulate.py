"""Every proposed fix simulated on the user's layout before it is shown.

A config fix is a set of Bridge overrides (the ones ``apply`` would write).  Its variants come from the
knowledge base: the planner's options for that fix (costs.yaml, each with the model kinds it applies to), the
next size of the parallel dimension a layout fix grows, or the fix's own ``bridge_override`` lines.  Each
variant is applied to the user's TrainingConfig, data parallelism is re-derived so the GPU count stays the
user's, every constraint is checked (a variant that breaks one is dropped), and the failing pipeline stage is
re-estimated.  The variant kept is the cheapest that fits, else the one that saves most.

A fix that frees a ledger component instead of changing the config (expandable segments frees the cached
blocks, killing a stale process frees its memory) declares ``releases`` in fixes.yaml and is simulated on the
ledger.  Pure: facts and knowledge in, ``Simulation`` out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .derive import derive
from .engine import check_constraints
from .errors import UserError
from .facts import ARCHITECTURE_FIELDS, Facts, TrainingConfig
from .knowledge import Knowledge
from .ledger import Ledger

MODEL_PARALLEL = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")


@dataclass
class Simulation:
    fix: str
    basis: str  # estimate | ledger
    overrides: list[str] = field(default_factory=list)  # the Bridge overrides simulated (apply lines come from them)
    changes: dict[str, Any] = field(default_factory=dict)  # TrainingConfig field -> new value
    stage: int | None = None
    predicted_peak_bytes: float | None = None
    predicted_saving_bytes: float | None = None
    fits: bool | None = None
    relative_throughput: float | None = None
    dropped: str | None = None  # why no variant can be proposed (a constraint id, "no-saving", "no-gpus")
    violations: list[str] = field(default_factory=list)  # constraints the rejected variants broke
    plan_step: int | None = None  # position in the cheapest combination that fits, when no single fix does
    plan_peak_bytes: float | None = None  # predicted peak with this and every earlier step applied
    plan_fits: bool | None = None
    variant: Variant | None = field(default=None, repr=False, compare=False)
    others: list[Simulation] = field(default_factory=list, repr=False, compare=False)  # the other variants tried

    def to_dict(self) -> dict[str, Any]:
        """The JSON view: every field but the internal variant links (``others`` may refer back to this one)."""
        skip = ("variant", "others")
        return {f.name: copy.deepcopy(vars(self)[f.name]) for f in fields(self) if f.name not in skip}

@dataclass(frozen=True)
class Variant:
    overrides: tuple[str, ...]
    changes: Mapping[str, Any]
    costs: tuple[str, ...] = ()


def simulate(fix_ids: Iterable[str], facts: Facts, led: Ledger, kb: Knowledge) -> dict[str, Simulation]:
    """One Simulation per fix that changes the config or frees a ledger component; other fixes are absent."""
    fix_ids = list(dict.fromkeys(fix_ids))
    ctx = _Context.make(facts, led, kb)
    ctx.proposed = frozenset(fix_ids)
    out: dict[str, Simulation] = {}
    stated = (kb.tables.get("ledger") or {}).get("stated_logprob_logits") or {}
    logits = led.get("logits")
    for fix_id in fix_ids:
        fix = kb.get("fixes", fix_id)
        if fix.get("releases"):
            out[fix_id] = _simulate_release(fix_id, fix["releases"], led)
            continue
        if fix_id in stated and logits is not None and logits.source == "question":
            out[fix_id] = _simulate_share(fix_id, logits.bytes * float(stated[fix_id]), led)
            continue
        variants = _variants(fix_id, fix, ctx)
        if variants is None:
            continue
        out[fix_id] = _best(fix_id, variants, ctx)
    _plan(out, ctx)
    return out


PLAN_POOL = 4  # variants considered for combinations: the best savers per unit of throughput


def _plan(sims: dict[str, Simulation], ctx: _Context) -> None:
    """The cheapest combination of two fixes that fits, when it beats every single fix that fits.

    Pairs are simulated whole (constraints, GPU count, estimate), so their effects are not simply added: the
    distributed optimizer and TP 2 together can fit at less cost than TP 4 alone.  A fix with no measured cost
    counts as 0.9 (knowledge/ledger.yaml unknown_throughput) when ranking candidates for combinations; a plan
    is proposed only when its own cost is known and beats every single fix of known cost that fits.  Within the pair,
    the fix that buys more memory per unit of throughput goes first.
    """
    if not ctx.led.capacity_bytes:
        return
    unknown = float((ctx.kb.tables.get("ledger") or {}).get("unknown_throughput", 0.9))

    def cost(sim: Simulation) -> float:
        return sim.relative_throughput if sim.relative_throughput is not None else unknown

    def efficiency(sim: Simulation) -> float:
        return (sim.predicted_saving_bytes or 0.0) / max(1.0 - cost(sim), 0.005)

    tried = [v for s in sims.values() if not s.dropped for v in (s, *s.others)]
    pool = [s for s in tried if s.variant is not None and s.basis == "estimate" and (s.predicted_saving_bytes or 0) > 0]
    single = max((s.relative_throughput for s in pool if s.fits and s.relative_throughput is not None), default=0.0)
    pool = sorted(pool, key=efficiency, reverse=True)[:PLAN_POOL]
    best: tuple[float, Simulation, Simulation, Simulation] | None = None
    for i, first in enumerate(pool):
        for second in pool[i + 1:]:
            if second.fix == first.fix:
                continue
            combo = _run(first.fix, _merge([first.variant, second.variant]), ctx)
            if combo.violations or combo.dropped or not combo.fits or combo.relative_throughput is None:
                continue  # a plan is shown only when its cost is known
            if cost(combo) > single and (best is None or cost(combo) > best[0]):
                best = (cost(combo), first, second, combo)
    if best is None:
        return
    _, first, second, combo = best
    for step, part in enumerate(sorted((first, second), key=efficiency, reverse=True), start=1):
        shown = sims[part.fix]
        if shown is not part:  # the pair uses another variant of this fix than the one shown alone: show that one
            part.others = [s for s in (shown, *shown.others) if s is not part]
            shown.others = []
            sims[part.fix] = shown = part
        shown.plan_step, shown.plan_peak_bytes, shown.plan_fits = step, combo.predicted_peak_bytes, combo.fits


def _merge(variants: list[Variant | None]) -> Variant:
    overrides: dict[str, str] = {}
    changes: dict[str, Any] = {}
    costs: list[str] = []
    from .planner.options import split

    for v in variants:
        if v is None:
            continue
        for line in v.overrides:
            overrides[split(line)[0]] = line  # a later step's value of the same key wins
        changes.update(v.changes)
        costs += v.costs
    return Variant(tuple(overrides.values()), changes, tuple(dict.fromkeys(costs)))


# --- the ledger-level fixes --------------------------------------------------------------------------------


def _simulate_release(fix_id: str, components: list[str], led: Ledger) -> Simulation:
    if not any(e.id in components for e in led.entries):
        return Simulation(fix_id, "ledger", stage=led.stage)  # nothing measured to free: effect unknown, not zero
    return _simulate_share(fix_id, sum(e.bytes for e in led.entries if e.id in components), led)


def _simulate_share(fix_id: str, freed: float, led: Ledger) -> Simulation:
    """A fix that frees ``freed`` bytes of the ledger's components, the rest of the failing GPU's need unchanged."""
    sim = Simulation(fix_id, "ledger", stage=led.stage)
    sim.predicted_saving_bytes = freed
    demand = _demand(led)
    if demand is not None:
        sim.predicted_peak_bytes = demand - freed
        sim.fits = sim.predicted_peak_bytes <= (led.capacity_bytes or 0)
    return sim


def _demand(led: Ledger) -> float | None:
    """What the failing GPU needed at the failure: in use plus the request (or the estimated peak)."""
    if led.in_use_bytes is not None:
        return led.in_use_bytes + (led.request_bytes or 0.0)
    return led.estimate_peak_bytes


# --- the config fixes --------------------------------------------------------------------------------------


@dataclass
class _Context:
    facts: Facts
    led: Ledger
    kb: Knowledge
    flat: dict[str, Any]
    before: Any  # Estimate of the user's config, or None
    base_violations: frozenset[str]
    band: float
    proposed: frozenset[str] = frozenset()  # every fix proposed with this one (companions resolve constraints)
    baseline: dict[str, Any] = field(default_factory=dict)  # the user's layout priced once (_throughput)

    @classmethod
    def make(cls, facts: Facts, led: Ledger, kb: Knowledge) -> _Context:
        facts = replace(facts, config=_with_dp(facts.config))
        flat = facts.flatten()
        return cls(facts, led, kb, flat, _estimate(facts.config, facts, kb),
                   frozenset(v.id for v in check_constraints(flat, kb)),
                   float((kb.tables.get("ledger") or {}).get("estimate_error_band", 0.15)))


def _with_dp(cfg: TrainingConfig) -> TrainingConfig:
    """Data parallelism from the GPU count when the config leaves it implicit (Megatron derives it the same way)."""
    if cfg.data_parallel_size or not cfg.world_size:
        return cfg
    model = _product(cfg, MODEL_PARALLEL)
    return replace(cfg, data_parallel_size=cfg.world_size // model) if cfg.world_size % model == 0 else cfg


def _variants(fix_id: str, fix: Mapping[str, Any], ctx: _Context) -> list[Variant] | None:
    """The candidate settings of a config fix; None for a fix that does not change the config."""
    from .planner import options

    cfg, flat, kb = ctx.facts.config, ctx.flat, ctx.kb
    generate = fix.get("generate") or {}
    if generate.get("kind") == "next-sizes":
        return _layout_variants(generate["field"], generate.get("with") or [], fix, cfg, kb)
    if generate.get("kind") == "other-vpp-sizes":
        return _vpp_variants(fix, cfg, kb)
    if generate.get("kind") == "uneven-stages":
        return [_variant_from(fix["apply"]["bridge_override"], kb), *_uneven_variants(cfg, kb)]
    if fix.get("variants"):
        from .conditions import evaluate

        return [_variant_from(v["overrides"], kb) for v in fix["variants"]
                if not v.get("applies_when") or evaluate(v["applies_when"], flat)] or None
    space = options.load(kb)
    rows = [o for group in space.options.values() for o in group if o.fix == fix_id and not o.fallback]
    if rows:
        from .conditions import evaluate, referenced_facts

        kept = [Variant(o.overrides, dict(o.fields), o.costs) for o in rows
                if not o.applies_when or evaluate(o.applies_when, flat)]
        unknown = any(flat.get(name) is None for o in rows if o.applies_when
                      for name in referenced_facts(o.applies_when))
        return kept if kept or not unknown else None  # an unknown model kind: not simulated, not dropped
    lines = fix.get("apply", {}).get("bridge_override")
    if not lines:
        return None
    if any("{" in line for line in lines):
        return None  # a template needing values this layer does not know
    return [_variant_from(lines, kb)]


def _unmodelled(variant: Variant) -> bool:
    """Whether an override line of the variant sets a key no TrainingConfig field holds: whether the user's run
    already has it cannot be read from the config, so the variant is never 'already set'."""
    from .planner.options import field_of, split

    return any(not field_of(split(line)[0]) for line in variant.overrides if "=" in line)


def _variant_from(lines: Iterable[str], kb: Knowledge, costs: tuple[str, ...] = ()) -> Variant:
    from .planner.options import override_fields

    lines = tuple(lines)
    return Variant(lines, override_fields(lines, kb), costs)


def _layout_variants(dim: str, extra: list[str], fix: Mapping[str, Any], cfg: TrainingConfig,
                     kb: Knowledge) -> list[Variant] | None:
    """The dimension times 2, 4, 8, each with the fix's ``with`` lines (TP also turns on SP).

    A size nobody stated is Megatron's default 1 once the model is known (the estimate assumes the same); with
    no model at all the fix is not simulated and its lines keep the "<2 x current>" placeholder that ``apply``
    refuses to write.
    """
    from .planner.options import split

    current = vars(cfg)[dim]
    if current is None and not cfg.num_layers:
        return None
    current = current or 1
    key = split(fix["apply"]["bridge_override"][0])[0]
    out = []
    for factor in (2, 4, 8):  # the next sizes; the GPU count and divisibility checks drop what cannot run
        lines = [f"{key}={current * factor}"]
        lines += [line for line in extra if _changes(line, cfg, kb)]
        out.append(_variant_from(lines, kb))
    return out


def _changes(line: str, cfg: TrainingConfig, kb: Knowledge) -> bool:
    """Whether an override line sets something the config does not already have."""
    from .planner.options import override_fields

    return any(vars(cfg).get(name) != value for name, value in override_fields((line,), kb).items())


def _vpp_variants(fix: Mapping[str, Any], cfg: TrainingConfig, kb: Knowledge) -> list[Variant]:
    """Every other VPP size the stage's layers divide by (interleaving changes the in-flight activations)."""
    from .planner.options import split

    pp = cfg.pipeline_model_parallel_size or 1
    if pp <= 1 or not cfg.num_layers:
        return []
    key = split(fix["apply"]["bridge_override"][0])[0]
    per_stage = cfg.num_layers // pp
    current = cfg.virtual_pipeline_model_parallel_size or 1
    sizes = [v for v in range(1, per_stage + 1) if per_stage % v == 0 and v != current]
    return [_variant_from([f"{key}={v if v > 1 else 'null'}"], kb) for v in sizes]


def _uneven_variants(cfg: TrainingConfig, kb: Knowledge) -> list[Variant]:
    """Fewer layers on the first and/or last stage (they hold the embedding and the output layer / loss), the rest
    split evenly over the middle stages, as Megatron's uneven-PP check requires (constraints pp-divides-layers)."""
    pp, layers = cfg.pipeline_model_parallel_size or 1, cfg.num_layers
    if pp < 3 or not layers:
        return []
    per = layers // pp
    if per < 2:  # a stage of one layer (or fewer layers than stages) has none to give up
        return []
    out = []
    for cut in range(1, max(2, per // 2)):
        for first, last in ((per - cut, per - cut), (per - cut, None), (None, per - cut)):
            rest = layers - (first or 0) - (last or 0)
            middle = pp - (first is not None) - (last is not None)
            if rest % middle or (cfg.virtual_pipeline_model_parallel_size or 1) > 1:
                continue
            lines = [f"model.num_layers_in_first_pipeline_stage={first}"] if first else []
            lines += [f"model.num_layers_in_last_pipeline_stage={last}"] if last else []
            out.append(_variant_from(lines, kb))
        if out:
            break
    return out


def _best(fix_id: str, variants: list[Variant], ctx: _Context) -> Simulation:
    results: list[Simulation] = []
    broken: list[str] = []
    for variant in variants:
        sim = _run(fix_id, variant, ctx)
        if sim.dropped == "already-set":
            continue  # the user's config already is this variant: not a change
        if sim.violations:
            broken += sim.violations
        else:
            results.append(sim)
    if not results:
        why = broken[0] if broken else "already-set" if variants else "not-applicable"
        return Simulation(fix_id, "estimate", dropped=why, violations=list(dict.fromkeys(broken)))
    if all(s.predicted_saving_bytes is None for s in results):
        return results[0]  # nothing to estimate with: the knowledge base's first applicable variant
    fitting = [s for s in results if s.fits]
    if fitting:
        best = max(fitting, key=lambda s: (s.relative_throughput or 1.0, s.predicted_saving_bytes or 0.0))
    else:
        best = max(results, key=lambda s: (s.predicted_saving_bytes or 0.0, s.relative_throughput or 1.0))
    best.others = [s for s in results if s is not best]
    floor = float((ctx.kb.tables.get("ledger") or {}).get("min_saving_share_of_peak", 0.0))
    peak = ctx.led.estimate_peak_bytes or 0.0
    if best.predicted_saving_bytes is not None and best.predicted_saving_bytes <= floor * peak:
        best.dropped = "no-saving"
    return best


def _run(fix_id: str, variant: Variant, ctx: _Context) -> Simulation:
    cfg = _with_dp(ctx.facts.config)
    changes = {k: v for k, v in variant.changes.items() if vars(cfg).get(k) != v}
    sim = Simulation(fix_id, "estimate", overrides=list(variant.overrides), changes=dict(variant.changes),
                     variant=variant)
    if not changes:
        if _unmodelled(variant):  # settings the config model does not hold (fully_parallel_save): unknown, not set
            return sim
        sim.dropped = "already-set"
        sim.predicted_saving_bytes = 0.0
        return sim
    new = replace(cfg, **changes)
    new, gpu_problem = _rebalance(cfg, new)
    if gpu_problem:
        sim.violations = [gpu_problem]
        return sim
    if new.data_parallel_size != cfg.data_parallel_size and new.data_parallel_size:
        sim.changes["data_parallel_size"] = new.data_parallel_size
    # the constraints see the new layout: the user's facts with the changed config fields and the derived checks
    flat = dict(ctx.flat)
    flat.update({f"config.{name}": vars(new)[name] for name in (*changes, "data_parallel_size", "world_size")})
    flat.update({f"derived.{name}": value for name, value in derive(new, ctx.facts.env).items()})
    sim.violations = [v.id for v in check_constraints(flat, ctx.kb)
                      if v.id not in ctx.base_violations and not _resolved_alongside(v.id, ctx)]
    if sim.violations:
        return sim
    priced: list[str] = []
    sim.relative_throughput = _throughput(cfg, new, variant.costs, ctx.kb, ctx.facts.gpu, priced, ctx.baseline)
    if sim.relative_throughput == 1.0 and not priced and not ctx.kb.get("fixes", fix_id).get("free"):
        sim.relative_throughput = None  # no cost applies to it: unknown, not free
    after = _estimate(new, ctx.facts, ctx.kb)
    if ctx.before is None or after is None:
        return sim
    stage = _stage(ctx.led.stage, cfg, new, after)
    before_row = _stage_row(ctx.before, ctx.led.stage if ctx.led.stage is not None else ctx.before.peak_stage)
    after_row = _stage_row(after, stage)
    after_peak = float(after_row.peak_with_overheads_bytes)
    sim.stage = stage
    scale = ctx.led.calibration
    saving = _phase_saving(before_row, after_row, ctx.led.phase, ctx.kb)
    if saving == 0.0:
        return sim  # the estimator does not model what this change does: its effect is unknown, not zero
    sim.predicted_saving_bytes = saving * scale
    demand = _demand(ctx.led)
    if ctx.led.in_use_bytes is not None and demand is not None:  # measured: subtract the (calibrated) saving
        sim.predicted_peak_bytes = demand - sim.predicted_saving_bytes
        margin = ctx.band * abs(sim.predicted_saving_bytes)
    else:
        sim.predicted_peak_bytes = after_peak * scale
        margin = ctx.band * sim.predicted_peak_bytes
    cap = ctx.led.capacity_bytes
    if cap:
        sim.fits = sim.predicted_peak_bytes + margin <= cap
    return sim


def _resolved_alongside(constraint_id: str, ctx: _Context) -> bool:
    """A constraint the new setting trips is fine when a fix proposed with it is that constraint's remedy
    (narrowing graphs to TE scopes with expandable segments needs NCCL_GRAPH_REGISTER=0, proposed beside it)."""
    remedies = set(ctx.kb.get("constraints", constraint_id).get("alternatives") or [])
    env_only = {f for f in remedies if not ctx.kb.get("fixes", f).get("apply", {}).get("bridge_override")}
    return bool(env_only & ctx.proposed)


def _rebalance(old: TrainingConfig, new: TrainingConfig) -> tuple[TrainingConfig, str | None]:
    """Keep the user's GPU count: data parallelism absorbs a change of TP x PP x CP, or the layout needs GPUs."""
    model_old = _product(old, MODEL_PARALLEL)
    model_new = _product(new, MODEL_PARALLEL)
    if model_old == model_new:
        return new, None
    world = old.world_size or (old.data_parallel_size * model_old if old.data_parallel_size else None)
    if world is None:
        return new, None  # GPU count unknown: the estimate keeps DP as stated (or unknown)
    if world % model_new:
        return new, "world-size-divisible-by-model-parallel"
    dp = world // model_new
    if dp < 1:
        return new, "world-size-divisible-by-model-parallel"
    return replace(new, data_parallel_size=dp, world_size=world), None


def _product(cfg: TrainingConfig, names: Iterable[str]) -> int:
    out = 1
    for name in names:
        out *= vars(cfg)[name] or 1
    return out


def _estimate(cfg: TrainingConfig, facts: Facts, kb: Knowledge) -> Any:
    if not all(vars(cfg)[f] for f in ARCHITECTURE_FIELDS) or not cfg.seq_length:
        return None
    from .estimator import estimate

    try:
        return estimate(cfg, gpu=facts.gpu, kb=kb, env=facts.env)
    except (UserError, ValueError, ZeroDivisionError):
        return None


def _stage(failing: int | None, old: TrainingConfig, new: TrainingConfig, after: Any) -> int:
    """The stage to compare: the same one when PP is unchanged, else the new layout's peak stage."""
    if failing is not None and (old.pipeline_model_parallel_size or 1) == (new.pipeline_model_parallel_size or 1):
        return failing
    return after.peak_stage


def _stage_row(est: Any, stage: int) -> Any:
    row = next((s for s in est.stages if s.pp_rank == stage), None)
    return row or next(s for s in est.stages if s.pp_rank == est.peak_stage)


def _phase_saving(before: Any, after: Any, phase: str | None, kb: Knowledge) -> float:
    """What the change frees in the phase that failed: only the components that exist then (ledger.yaml phases).

    At model build, the optimizer step or checkpoint load/save there are no activations, so a fix that only
    shrinks activations saves nothing there.
    """
    from .ledger import NEED_FROM_ESTIMATE, present_components

    present = present_components(phase, kb)
    old, new = before.component_bytes(), after.component_bytes()
    total = 0.0
    for ident, keys in NEED_FROM_ESTIMATE.items():
        if ident in present:
            total += sum(float(old[k]) - float(new[k]) for k in keys)
    if present >= set(NEED_FROM_ESTIMATE):  # a step phase: the whole peak, overheads beside it included
        total = float(before.peak_with_overheads_bytes) - float(after.peak_with_overheads_bytes)
    return total


def _traffic(cfg: TrainingConfig, gpu: Any, space: Any, kb: Knowledge, *, per_step: bool = True) -> Any:
    """Compute time and traffic bytes of ``cfg`` on ``gpu`` (planner/traffic.py), or None when unknown.

    ``per_step=False`` is for the per-layer costs (TP, CP, host-bound), which need no global batch: the
    micro-batch count, which only the per-step traffic reads, is then taken as 1."""
    from .planner import traffic as traffic_model

    hw = traffic_model.hardware(gpu, traffic_model.precision_of(cfg), space.costs) if gpu else None
    counts = traffic_model.counts_of(cfg, kb)
    if hw is None or counts is None or not cfg.seq_length or (per_step and not cfg.global_batch_size):
        return None
    tp, pp = cfg.tensor_model_parallel_size or 1, cfg.pipeline_model_parallel_size or 1
    cp, dp, mbs = cfg.context_parallel_size or 1, cfg.data_parallel_size or 1, cfg.micro_batch_size or 1
    return traffic_model.traffic(
        counts, hw, tp=tp, pp=pp, cp=cp,
        ep=cfg.expert_model_parallel_size or 1, etp=cfg.expert_tensor_parallel_size or tp, dp=dp, mbs=mbs,
        seq=cfg.seq_length, microbatches=max(1, (cfg.global_batch_size or 0) // (mbs * dp)),
        gpus_per_domain=gpu.nvlink_domain or 8, **traffic_model.workload(cfg))


def _balance(cfg: TrainingConfig, kb: Knowledge, costs: Any = None, ctx: Any = None, traffic: Any = None,
             hw: Any = None) -> float:
    """traffic.stage_balance of the config's pipeline split (1.0 when the architecture is incomplete), a MoE layer
    weighing the token dispatch it waits for when the traffic is known, as the planner weighs it."""
    from .planner import costs as cost_model
    from .planner import traffic as traffic_model

    arch = traffic_model.arch_of(cfg, kb)
    tp, pp, vpp = cfg.tensor_model_parallel_size or 1, cfg.pipeline_model_parallel_size or 1, \
        cfg.virtual_pipeline_model_parallel_size or 1
    if arch is None or pp <= 1:
        return 1.0
    stretch = cost_model.dispatch_stretch(costs, ctx, traffic) if costs is not None else 1.0
    work = traffic_model.workload(cfg)
    seq = cfg.seq_length or 4096
    load = traffic_model.StageLoad((cfg.micro_batch_size or 1) * seq / (cfg.context_parallel_size or 1), tp,
                                   (cfg.expert_model_parallel_size or 1) * (cfg.expert_tensor_parallel_size or tp),
                                   work["frozen"], work["grad_bytes"])
    return traffic_model.stage_balance(arch, cfg, pp, vpp, seq, moe_stretch=stretch, hw=hw, load=load)


def _throughput(old: TrainingConfig, new: TrainingConfig, option_costs: tuple[str, ...], kb: Knowledge,
                gpu: Any = None, priced: list[str] | None = None, baseline: dict[str, Any] | None = None,
                ) -> float | None:
    """Expected throughput of the new layout relative to the user's (knowledge/costs.yaml factors).

    ``priced`` collects the costs that were evaluated for the change (a mechanism may price it at 1.0: CP
    hidden behind long-sequence attention is known to be free, not unknown).  ``baseline`` keeps the costs of
    ``old`` for the next call with the same ``old``, ``gpu`` and ``kb`` (one simulation prices every variant
    of every fix against the user's one layout).

    Without the GPU's speeds the costs that compare traffic or launch time with compute are priced on an
    H100 (knowledge/gpus.yaml), the GPU most Bridge runs name; the ratio of two layouts moves little with it.
    """
    from .inputs.gpu import lookup_gpu
    from .planner import options

    if gpu is None or not getattr(gpu, "hardware", None):
        gpu = lookup_gpu("H100", kb)

    space = options.load(kb)
    if not old.hidden_size or not old.num_layers or not old.seq_length:
        return None
    pipelined = (old.pipeline_model_parallel_size or 1) > 1 or (new.pipeline_model_parallel_size or 1) > 1
    if pipelined and not old.global_batch_size:
        return None  # the pipeline bubble depends on the micro-batches per step, i.e. on the global batch
    # imported past the returns above: with no model shape (a log alone) the cost model and the estimator
    # it imports are never loaded
    from .planner import costs as cost_model
    from .planner import traffic as traffic_model

    def parallel(cfg: TrainingConfig) -> list:
        dp = cfg.data_parallel_size or 1
        gbs, mbs = cfg.global_batch_size, cfg.micro_batch_size or 1
        m = max(1, gbs // (mbs * dp)) if gbs else 1
        moe = bool(old.num_moe_experts)
        ctx = cost_model.ShapeContext(old.hidden_size, old.num_layers, old.seq_length, 8, moe,
                                      ep_overlap=bool(cfg.overlap_moe_expert_parallel_comm),
                                      tp_overlap=bool(cfg.tp_comm_overlap),
                                      eager_share=traffic_model.eager_share(cfg, moe), fp8=bool(cfg.fp8))
        traffic = _traffic(cfg, gpu, space, kb, per_step=False)
        return (cost_model.parallel_reasons(
            space.costs, ctx, tp=cfg.tensor_model_parallel_size or 1, pp=cfg.pipeline_model_parallel_size or 1,
            vpp=cfg.virtual_pipeline_model_parallel_size or 1, cp=cfg.context_parallel_size or 1,
            microbatches=m, traffic=traffic, balance=_balance(
                cfg, kb, space.costs, ctx, traffic,
                traffic_model.hardware(gpu, traffic_model.precision_of(cfg), space.costs))))

    before = baseline.get("before") if baseline is not None else None
    if before is None:
        before = parallel(old)
        if baseline is not None:
            baseline["before"] = before
    after = parallel(new)
    factor = cost_model.product(after) / cost_model.product(before)
    traffic = _traffic(new, gpu, space, kb) if cost_model.scaled(space.costs, option_costs) else None
    if cost_model.scaled(space.costs, option_costs) and traffic is None:
        return None  # a traffic cost (FSDP, offload) cannot be priced without the batch and the GPU's speeds
    options_applied = cost_model.option_reasons(space.costs, option_costs, traffic)
    factor *= cost_model.product(options_applied)
    if priced is not None:
        seen = {(r.cost, r.detail) for r in before}
        priced += [r.cost for r in (*after, *options_applied) if (r.cost, r.detail) not in seen]
    return factor
