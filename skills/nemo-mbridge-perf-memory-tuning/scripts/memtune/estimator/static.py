"""The parts of an estimate that only the layout shape decides, built once and cached.

The planner estimates tens of thousands of candidates that differ only in the micro-batch size, the
micro-batch count, the recompute choice and activation offload (``PER_CANDIDATE_FIELDS``), and within
one parallel shape, in the model-state option (``MODEL_STATE_FIELDS``).  So an estimate is built from
two cached parts:

* ``ShapePart``: the model, its TP/PP/VPP/CP/EP/ETP/DP sizes and precision - architecture, layers per
  pipeline stage, parameter counts per chunk, and its ``ActShape``;
* ``ActShape``: what the activation side reads of a shape - sizes but EP, layers per stage, static
  workspaces - and a cache of activation contexts (rank_activations.py fills it) that every model-state
  option and every EP size of the shape shares;
* ``StaticPart``: a ShapePart plus the optimizer settings - weights, gradients and optimizer bytes per
  rank, and the assumptions they imply.

rank_activations.py and memory.py add what each candidate changes: micro-batches in flight,
activations, logits.

No cache can serve a stale part: each key is every TrainingConfig field except those left out, and
each part is built from a copy of the config with those fields cleared, so it cannot read what its
key leaves out.  Only rank_activations.py's caches keep to the same rule by hand: they read the
ShapePart's cleared config, never the caller's (tests compare against uncached estimates).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import itemgetter
from typing import Any

from ..facts import TrainingConfig
from .model_state import StageState, stage_state, unique_chunk_params
from .params import Arch, Counts, arch_from_config, total_params
from .setup import Setup, local_impl, resolve
from .stages import Placement, place

# What the planner varies per candidate; no cached part reads these.
PER_CANDIDATE_FIELDS = frozenset({
    "micro_batch_size", "global_batch_size",
    "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules",
    "cpu_offloading", "cpu_offloading_num_layers",
    "fine_grained_activation_offloading", "offload_modules", "activation_offload_fraction",
    "sequence_parallel_input_regather",
})
# What only weights / gradients / optimizer states depend on; the ShapePart does not read these.
MODEL_STATE_FIELDS = frozenset({
    "use_distributed_optimizer", "num_distributed_optimizer_instances", "use_megatron_fsdp",
    "data_parallel_sharding_strategy", "optimizer_cpu_offload", "optimizer_offload_fraction", "optimizer",
    "use_precision_aware_optimizer", "main_grads_dtype", "exp_avg_dtype", "exp_avg_sq_dtype",
    "grad_reduce_in_fp32", "ckpt_format",
})
# Sizes only the model state reads: an expert rank receives about as many routed tokens whatever the EP size
# (each rank sends its tokens out and gets back those for its local experts), so ActShape leaves EP out.
EXPERT_SIZE_FIELDS = frozenset({"expert_model_parallel_size"})
# Provenance the estimator never reads: left out of every key, emptied in the copies parts are built from.
METADATA_FIELDS = {"warnings": list, "assumed": list, "env_vars": dict}
CACHE_SIZE = 4096  # parts kept per kind; a plan needs one per (shape, model-state option), a few KiB each

_TYPES = {f.name: str(f.type) for f in fields(TrainingConfig)}
_SHAPE_FIELDS = [n for n in _TYPES if n not in PER_CANDIDATE_FIELDS | MODEL_STATE_FIELDS | METADATA_FIELDS.keys()]


def _is_container(name: str) -> bool:
    return any(t in _TYPES[name] for t in ("list", "dict", "Any"))


def _values(names: list[str]) -> Callable[[dict[str, Any]], tuple]:
    """Reads ``names`` from an instance dict, as a tuple (twice as fast as attribute access)."""
    if len(names) == 1:
        return lambda d: (d[names[0]],)
    return itemgetter(*names) if names else lambda d: ()


_SHAPE_SCALARS = _values([n for n in _SHAPE_FIELDS if not _is_container(n)])
_SHAPE_CONTAINERS = _values([n for n in _SHAPE_FIELDS if _is_container(n)])
_ACT_SCALARS = _values([n for n in _SHAPE_FIELDS if not _is_container(n) and n not in EXPERT_SIZE_FIELDS])
_ACT_CONTAINERS = _values([n for n in _SHAPE_FIELDS if _is_container(n) and n not in EXPERT_SIZE_FIELDS])
_MODEL_STATE = _values(sorted(MODEL_STATE_FIELDS))


@dataclass(frozen=True)
class RankChunks:
    """One pipeline rank's model chunks, as the per-rank activation sum walks them."""

    rank: int
    chunks: tuple[tuple[int, int, int, bool, int], ...]  # (vp, layers, unique-chunk id, holds the loss, MTP blocks)
    has_loss: bool


@dataclass(frozen=True)
class ActShape:
    """What the activation side (rank_activations.py) reads of a shape, built from the config with the
    model-state fields and the EP size cleared too: shape parts that differ only there share it, and its
    caches."""

    cfg: TrainingConfig  # the config, per-candidate, model-state and EP fields cleared: all rank_activations reads
    setup: Setup  # its sizes and activation dtype
    arch: Arch
    layout: Placement
    ranks: tuple[RankChunks, ...]
    graphs: str  # cuda_graph_impl, lower case; "full_iteration" also for local + cuda_graph_scope [full_iteration]
    static_workspace: float  # cuBLAS / TE / grouped-GEMM workspaces (before any micro-batch-sized buffer)
    contexts: dict[tuple, Any] = field(default_factory=dict, compare=False, repr=False)  # rank_activations cache
    chunk_kinds: dict[tuple, Any] = field(default_factory=dict, compare=False, repr=False)  # ... per layer kinds


@dataclass(frozen=True)
class ShapePart:
    """What the model, the parallel sizes and the precision decide, whatever the optimizer settings."""

    cfg: TrainingConfig  # the config, per-candidate and model-state fields cleared
    setup: Setup  # its sizes (its optimizer bytes are those of the cleared fields)
    arch: Arch
    layout: Placement
    ranks: tuple[RankChunks, ...]
    chunk_params: list[tuple[Counts, float, Counts]]  # per unique chunk, see model_state.unique_chunk_params
    total_params: float
    acts: ActShape  # what the activation side reads, shared with the shape's other EP sizes
    constants: dict[str, Any] = field(compare=False, repr=False)


@dataclass(frozen=True)
class RankState:
    """One pipeline rank's model state; ``model_state`` and ``step_base`` are pre-summed in the order the
    estimate adds them (weights + grads + optimizer [+ step]) so results stay bit-identical."""

    state: StageState
    model_state: float
    step_base: float


@dataclass(frozen=True)
class StaticPart:
    """Everything of an estimate that micro-batches, recompute and activation offload leave unchanged."""

    shape: ShapePart
    setup: Setup
    states: tuple[RankState, ...]  # per rank
    total_params: float
    nccl_bytes: float
    notes_first: tuple[str, ...]  # assumption ids listed before the micro-batch note
    notes_middle: tuple[str, ...]  # ... and after it, up to the offload note
    assumptions: dict[tuple, Any] = field(default_factory=dict, compare=False, repr=False)  # memory.py cache


def _freeze(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, set):
        return frozenset(value)
    return value


def shape_key(cfg: TrainingConfig) -> tuple:
    """Every field the ShapePart may read, as a hashable tuple (lists and dicts frozen)."""
    values = cfg.__dict__
    return _SHAPE_SCALARS(values), tuple(map(_freeze, _SHAPE_CONTAINERS(values)))


def act_key(cfg: TrainingConfig) -> tuple:
    """Every field the ActShape may read, as a hashable tuple."""
    values = cfg.__dict__
    return _ACT_SCALARS(values), tuple(map(_freeze, _ACT_CONTAINERS(values)))


class _Cache:
    """A bounded map (oldest entry dropped first) whose entries belong to one constants table, so a reloaded
    knowledge base misses."""

    def __init__(self) -> None:
        self.data: dict[tuple, tuple[dict[str, Any], Any]] = {}

    def get(self, key: tuple, c: dict[str, Any]) -> Any:
        hit = self.data.get(key)
        return hit[1] if hit is not None and hit[0] is c else None

    def put(self, key: tuple, c: dict[str, Any], value: Any) -> None:
        self.data[key] = (c, value)
        if len(self.data) > CACHE_SIZE:
            del self.data[next(iter(self.data))]


_ACTS = _Cache()
_SHAPES = _Cache()
_STATICS = _Cache()


def clear_caches() -> None:
    """Forget every cached part (benchmarks time cold runs, as a fresh ``memtune plan`` process has them)."""
    from .activations import layer_activations

    _ACTS.data.clear()
    _SHAPES.data.clear()
    _STATICS.data.clear()
    layer_activations.cache_clear()


def static_part(cfg: TrainingConfig, c: dict[str, Any]) -> StaticPart:
    """The cached static part for ``cfg`` (built on first use; the oldest parts are dropped first)."""
    key = (shape_key(cfg), _MODEL_STATE(cfg.__dict__))
    try:
        hit = _STATICS.get(key, c)
    except TypeError:  # a field holding a list where a scalar belongs (hand-built config): freeze all
        key = _freeze(key)
        hit = _STATICS.get(key, c)
    if hit is None:
        shape = _SHAPES.get(key[0], c)
        if shape is None:
            akey = act_key(cfg)
            try:
                acts = _ACTS.get(akey, c)
            except TypeError:  # as above
                akey = _freeze(akey)
                acts = _ACTS.get(akey, c)
            if acts is None:
                acts = build_act_shape(cfg, c)
                _ACTS.put(akey, c, acts)
            shape = build_shape(cfg, c, acts=acts)
            _SHAPES.put(key[0], c, shape)
        hit = build(cfg, c, shape)
        _STATICS.put(key, c, hit)
    return hit


def _cleared(cfg: TrainingConfig, names: frozenset[str], clear: bool) -> TrainingConfig:
    """A shallow copy of ``cfg`` with ``names`` unset and the provenance lists emptied (unless not ``clear``)."""
    out = copy.copy(cfg)
    if not clear:
        return out
    out.__dict__.update(dict.fromkeys(names))
    out.__dict__.update({name: kind() for name, kind in METADATA_FIELDS.items()})
    return out


def build_act_shape(cfg: TrainingConfig, c: dict[str, Any], *, clear: bool = True) -> ActShape:
    """The activation side's shape computed afresh, from ``cfg`` without its per-candidate, model-state and EP
    fields (all kept with ``clear=False``, see ``build_shape``)."""
    cfg = _cleared(cfg, PER_CANDIDATE_FIELDS | MODEL_STATE_FIELDS | EXPERT_SIZE_FIELDS, clear)
    s, a, layout, ranks = _placed(cfg, c)
    return ActShape(cfg=cfg, setup=s, arch=a, layout=layout, ranks=ranks,
                    graphs=graph_kind(cfg), static_workspace=_static_workspace(cfg, a, c))


def graph_scope_names(cfg: TrainingConfig) -> set[str]:
    """cuda_graph_scope as lower-case module names (a string or a list; enum spellings like
    CudaGraphScope.attn read as "attn")."""
    scope = cfg.cuda_graph_scope
    return {str(x).lower().rsplit(".", 1)[-1] for x in ([scope] if isinstance(scope, str) else scope or [])}


def graph_kind(cfg: TrainingConfig) -> str:
    """cuda_graph_impl, lower case, with Megatron-Core's other spelling of a full-iteration graph (impl local,
    scope [full_iteration]: FullCudaGraphWrapper around forward_backward_func) named as such."""
    impl = (cfg.cuda_graph_impl or "none").lower()
    full = impl == "full_iteration" or (impl == "local" and "full_iteration" in graph_scope_names(cfg))
    return "full_iteration" if full else impl


def build_shape(cfg: TrainingConfig, c: dict[str, Any], *, clear: bool = True,
                acts: ActShape | None = None) -> ShapePart:
    """The shape part computed afresh (and its ActShape too unless given), from ``cfg`` without its
    per-candidate and model-state fields.

    ``clear=False`` keeps every field: the reference tests compare cached estimates against, which would
    differ if a field listed as per-candidate or model-state were read here.
    """
    acts = acts or build_act_shape(cfg, c, clear=clear)
    cfg = _cleared(cfg, PER_CANDIDATE_FIELDS | MODEL_STATE_FIELDS, clear)
    s, a, layout, ranks = _placed(cfg, c)
    return ShapePart(cfg=cfg, setup=s, arch=a, layout=layout, ranks=ranks,
                     chunk_params=unique_chunk_params(a, layout.unique, s), total_params=total_params(a),
                     acts=acts, constants=c)


def _placed(cfg: TrainingConfig, c: dict[str, Any]) -> tuple[Setup, Arch, Placement, tuple[RankChunks, ...]]:
    """Sizes, architecture, stage placement and per-rank chunks of a (cleared) config."""
    s = resolve(cfg, c, [])
    a = arch_from_config(cfg, s.tp, c["megatron-defaults"])
    layout = place(a.pattern, s.pp, s.vp, cfg.num_layers_in_first_pipeline_stage,
                   cfg.num_layers_in_last_pipeline_stage, bool(cfg.account_for_embedding_in_pipeline_split),
                   bool(cfg.account_for_loss_in_pipeline_split), cfg.pipeline_model_parallel_layout,
                   cfg.hybrid_layer_pattern, a.mtp)
    ranks = tuple(
        RankChunks(rank, tuple((ch.vp, len(ch.kinds), cid, ch.loss, ch.mtp)
                               for ch, cid in zip(layout.stages[rank], layout.chunk_ids[rank], strict=True)),
                   layout.has_loss[rank])
        for rank in range(s.pp))
    return s, a, layout, ranks


def build(cfg: TrainingConfig, c: dict[str, Any], shape: ShapePart | None = None, *,
          clear: bool = True) -> StaticPart:
    """The static part computed afresh (and its shape part too unless given), from ``cfg`` without its
    per-candidate fields (all kept with ``clear=False``, see ``build_shape``)."""
    shape = shape or build_shape(cfg, c, clear=clear)
    cfg = _cleared(cfg, PER_CANDIDATE_FIELDS, clear)
    first: list[str] = []
    s = resolve(cfg, c, first)
    a = shape.arch
    return StaticPart(
        shape=shape, setup=s, states=_states(shape, s, c), total_params=shape.total_params,
        nccl_bytes=c["nccl-bytes-per-group"] * sum(1 for g in (s.tp, s.pp, s.cp, s.dp, s.ep) if g > 1),
        notes_first=tuple(n for n in first if n == "dp-unknown"),
        notes_middle=tuple(n for n in first if n != "dp-unknown") + _notes(cfg, s, a),
    )


def _states(shape: ShapePart, s: Setup, c: dict[str, Any]) -> tuple[RankState, ...]:
    """Model state of every rank, computed once per distinct stage (ranks with equal chunks share it)."""
    a, layout = shape.arch, shape.layout
    states: dict[int, RankState] = {}
    out = []
    for rank in range(s.pp):
        sid = layout.stage_ids[rank]
        if sid not in states:
            layers = sum(len(ch.kinds) for ch in layout.stages[rank])
            state = stage_state(a, layout.chunk_ids[rank], shape.chunk_params, layers, s, c)
            model_state = state.model_state
            states[sid] = RankState(state, model_state, model_state + state.step)
        out.append(states[sid])
    return tuple(out)


def _static_workspace(cfg: TrainingConfig, a: Arch, c: dict[str, Any]) -> float:
    """PyTorch-allocated workspaces that exist whatever the micro-batch (memory.py adds the sized ones)."""
    static = c["cublas-workspace-bytes"] + c["misc-static-bytes"]
    if not local_impl(cfg):
        static += c["te-workspace-bytes"]
    if a.experts and cfg.moe_grouped_gemm and not local_impl(cfg):
        static += c["te-grouped-gemm-workspace-bytes"]
    return static


def _notes(cfg: TrainingConfig, s: Setup, a: Arch) -> tuple[str, ...]:
    """Assumption ids the static settings decide (memory.py appends the offload and overhead notes)."""
    notes = ["allocated-peak", "schedule-interleaved" if s.vp > 1 else "schedule-1f1b"]
    if cfg.use_distributed_optimizer is None and not s.fsdp:
        notes.append("dist-opt-unknown")
    if cfg.sequence_parallel is None and s.tp > 1:
        notes.append("sp-unknown")
    unfused = (cfg.attention_backend or ("local" if local_impl(cfg) else "")).lower() in {"unfused", "local"}
    notes.append("attention-unfused" if unfused else "attention-fused")
    if a.experts:
        notes.append("moe-balanced")
    if s.fp8:
        notes.append("fp8")
    if s.lora:
        notes.append("lora-frozen-base")
    if (cfg.cuda_graph_impl or "none").lower() != "none":
        notes.append("cuda-graphs-approximate")
    if s.fsdp:
        notes.append("fsdp" if cfg.use_megatron_fsdp or cfg.use_torch_fsdp2 else "zero-two")
    return tuple(notes)
