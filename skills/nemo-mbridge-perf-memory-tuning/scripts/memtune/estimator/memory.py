"""Per-pipeline-stage GPU memory of a training layout ("ours" mode).

For every pipeline rank the estimate adds:

* weights, main gradients and optimizer states of the parameters that rank
  holds (model_state.py), each with the dtype and the sharding group the
  settings imply;
* activations: per-layer saved tensors (activations.py) times the number of
  forward passes alive when the rank starts its first backward (schedule.py),
  plus the largest backward temporary;
* logits and loss buffers on the rank that holds the output layer;
* PyTorch-allocated workspaces (cuBLAS, Transformer Engine) and CUDA-graph pools.

``allocated_peak_bytes`` is the prediction of ``torch.cuda.max_memory_allocated()``.
Allocator slack (reserved but unallocated), the CUDA context and NCCL buffers
live outside it and are reported beside it.

What only the layout shape decides (model state, stage placement, static
workspaces) comes from the cached static part (static.py), what each rank holds
for its backward pass from rank_activations.py (cached per shape and activation
context); this module adds them up per rank.
"""

from __future__ import annotations

from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

from ..facts import TrainingConfig
from .rank_activations import (
    ActInputs,
    ChunkPolicy,
    ContextPart,
    RankActs,
    act_inputs,
    chunk_policy,
    chunk_rows,
    context_part,
    rank_acts,
)
from .setup import Batch, Setup, batch
from .static import StaticPart, build, static_part

GIB = 2**30
CHUNK_KEYS = ("vp", "layers", "in_flight", "activations_bytes")


@dataclass(slots=True)
class StageEstimate:
    """One pipeline rank: component bytes at its allocated peak, and the overheads beside it."""

    pp_rank: int
    layers: int
    params: float
    in_flight_microbatches: list[int]
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    logits_bytes: float
    workspace_bytes: float
    graph_pool_bytes: float
    graph_pool_activations_bytes: float  # captured modules' activations in the graph pool: reserved, not allocated
    other_bytes: float
    total_bytes: float
    allocated_peak_bytes: float
    reserved_bytes: float
    cuda_context_bytes: float
    nccl_bytes: float
    peak_with_overheads_bytes: float
    chunks: list[Any] = field(default_factory=list)  # (vp, layers, in_flight, activations_bytes) per VPP chunk

    def component_bytes(self) -> dict[str, float]:
        """The byte components at the allocated peak by field name (what ledger.NEED_FROM_ESTIMATE names)."""
        return {"weights_bytes": self.weights_bytes, "grads_bytes": self.grads_bytes,
                "optimizer_bytes": self.optimizer_bytes, "activations_bytes": self.activations_bytes,
                "logits_bytes": self.logits_bytes, "workspace_bytes": self.workspace_bytes,
                "graph_pool_bytes": self.graph_pool_bytes, "other_bytes": self.other_bytes}


@dataclass(slots=True)
class Estimate:
    """The answer of ``estimate``; ``to_dict`` is the JSON contract of ``memtune estimate --format json``."""

    mode: str
    stages: list[StageEstimate]
    peak_stage: int
    peak_bytes: float
    breakdown: dict[str, Any]
    assumptions: list[str]
    layout: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, float] = field(default_factory=dict)
    bridge: dict[str, Any] | None = None
    assumption_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for stage in out["stages"]:
            stage["chunks"] = [dict(zip(CHUNK_KEYS, row, strict=True)) for row in stage["chunks"]]
        return out


def estimate_ours(cfg: TrainingConfig, c: dict[str, Any], texts: Any, *, num_microbatches: int | None = None,
                  expandable_segments: bool | None = None, capture_reuse: bool | None = None,
                  cached: bool = True) -> Estimate:
    """Per-stage memory of ``cfg``.

    ``cached=False`` is the reference: the static part is built afresh from the whole config (no field
    cleared, no cache), which tests check gives the same bytes as the cached path.
    """
    st = static_part(cfg, c) if cached else build(cfg, c, clear=False)
    s, shape = st.setup, st.shape.acts
    b = batch(cfg, s, num_microbatches)
    part = context_part(shape, c, act_inputs(cfg, b.mbs))
    policy = chunk_policy(cfg)
    ranks = rank_acts(shape, part, policy, b.microbatches, c, bool(capture_reuse))
    stages = _stages(st, ranks, part, policy,
                     c["allocator-slack-fraction"]["expandable" if expandable_segments else "default"], c)
    peak = max(stages, key=lambda x: x.allocated_peak_bytes)
    offload = bool(s.offload_fraction or cfg.cpu_offloading or cfg.fine_grained_activation_offloading)
    ids, assumptions = _assumptions(st, b.guessed, offload, texts)
    recipe = tuple(RECIPE_NOTES[f] for f in cfg.assumed if f in RECIPE_NOTES)  # filled by defaults.fill_unstated
    if recipe:
        ids, assumptions = (*recipe, *ids), (*(texts(n) for n in recipe), *assumptions)
    return Estimate(
        mode="ours", stages=stages, peak_stage=peak.pp_rank, peak_bytes=peak.allocated_peak_bytes,
        breakdown=_breakdown(peak), assumptions=list(assumptions),
        layout=_layout_summary(s, b), parameters={"total": st.total_params, "per_gpu_peak_stage": peak.params},
        assumption_ids=list(ids),
    )


RECIPE_NOTES = {"use_distributed_optimizer": "dist-opt-recipe", "sequence_parallel": "sp-recipe",
                "moe_grouped_gemm": "grouped-gemm-recipe"}


def stage_peaks(cfg: TrainingConfig, c: dict[str, Any], st: StaticPart, *, num_microbatches: int | None = None,
                expandable_segments: bool | None = None, capture_reuse: bool | None = None,
                ) -> tuple[int, float, tuple[tuple[int, float, float], ...]]:
    """``estimate_ours`` cut down to what the planner reads of ~10^5 candidates: (peak rank, its allocated peak,
    (pp_rank, allocated peak, peak with overheads) per rank), without building StageEstimates or notes.

    ``st`` must be ``static_part(cfg, c)`` (the planner looks it up once per shape and model-state option
    rather than hashing 100+ fields per candidate).  The same calls and the same additions in the same order
    as ``estimate_ours`` and ``_stages``, so the numbers are bit-identical; tests/test_planner.py compares them
    with full estimates, so a change to ``_stages`` that is not made here too fails there.
    """
    b = batch(cfg, st.setup, num_microbatches)
    return peaks_of_parts(st, c, act_inputs(cfg, b.mbs), chunk_policy(cfg), b.microbatches, expandable_segments,
                          capture_reuse)


def peaks_of_parts(st: StaticPart, c: dict[str, Any], inputs: ActInputs, policy: ChunkPolicy, microbatches: int,
                   expandable_segments: bool | None = None, capture_reuse: bool | None = None,
                   ) -> tuple[int, float, tuple[tuple[int, float, float], ...]]:
    """``stage_peaks`` from what it reads of the config: the planner derives ``inputs`` and ``policy`` once per
    combination and micro-batch size (they read only ACT_FIELDS), so no config is built per candidate."""
    part = context_part(st.shape.acts, c, inputs)
    ranks = rank_acts(st.shape.acts, part, policy, microbatches, c, bool(capture_reuse))
    slack = c["allocator-slack-fraction"]["expandable" if expandable_segments else "default"]
    peak_rank, peak_bytes, _, values = combine_ranks(static_rows(st), act_rows(ranks), part.workspaces, slack,
                                                     c["cuda-context-bytes"], st.nccl_bytes)
    return peak_rank, peak_bytes, as_rows(values)


StateRow = tuple[int, float, float, float, bool]  # (pp rank, model state, step base, FP8 cache, holds the loss)
ActRow = tuple[float, float, float, float]  # (activations, logits, graph pool, pooled activations)


def static_rows(st: StaticPart) -> tuple[StateRow, ...]:
    """What ``combine_ranks`` reads of a static part, per rank (the planner keeps them per static part)."""
    return tuple((rc.rank, rs.model_state, rs.step_base, rs.state.fp8_cache, rc.has_loss)
                 for rc, rs in zip(st.shape.ranks, st.states, strict=True))


def act_rows(ranks: tuple[RankActs, ...]) -> tuple[ActRow, ...]:
    """What ``combine_ranks`` reads of the ranks' activation side (shared by every model-state option)."""
    return tuple((ra.activations, ra.logits, ra.graph_pool, ra.pooled) for ra in ranks)


def combine_ranks(states: tuple[StateRow, ...], acts: tuple[ActRow, ...], workspaces: tuple[float, float],
                  slack: float, context: float, nccl: float, keep: bool = True) -> tuple[int, float, float, Any]:
    """(peak rank, its allocated peak, its peak with overheads, [rank, allocated, with overheads] per rank flat):
    the model-state side plus the activation side of every rank, with the additions of ``_stages`` in the same
    order (bit-identical).  Flat doubles, not tuples: the planner keeps them for the layouts it details; with
    ``keep`` off (an ``--all`` walk deciding 10^5 fits) the per-rank values are not kept (None)."""
    every, last = workspaces
    scale = 1 + slack
    out = array("d", bytes(24 * len(states))) if keep else None  # sized once: extend() would keep spare room
    peak_rank, peak_bytes, peak_with = -1, -1.0, 0.0
    at = 0
    for (rank, model_state, step_base, fp8_cache, has_loss), (activations, logits, graph_pool, pooled) in zip(
            states, acts, strict=True):
        workspace = every + fp8_cache + (last if has_loss else 0.0)
        total = model_state + activations + (logits + workspace + graph_pool)
        stepping = step_base + workspace + graph_pool
        allocated = stepping if stepping > total else total  # max(total, stepping)
        with_overheads = allocated * scale + pooled + context + nccl
        if keep:
            out[at], out[at + 1], out[at + 2] = rank, allocated, with_overheads
            at += 3
        if allocated > peak_bytes:  # the first of equal peaks, as max() keeps it
            peak_rank, peak_bytes, peak_with = rank, allocated, with_overheads
    return peak_rank, peak_bytes, peak_with, out


def as_rows(values: array) -> tuple[tuple[int, float, float], ...]:
    """``combine_ranks``' flat per-rank values as (rank, allocated, with overheads) tuples."""
    return tuple((int(values[i]), values[i + 1], values[i + 2]) for i in range(0, len(values), 3))


def _assumptions(st: StaticPart, guessed: bool, offload: bool, texts: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Assumption ids and sentences, in the order they are listed; cached per static part (two flags vary)."""
    key = (guessed, offload, texts)
    hit = st.assumptions.get(key)
    if hit is None:
        notes = [*st.notes_first, *(["microbatches-unknown"] if guessed else []), *st.notes_middle]
        notes += (["offload"] if offload else []) + ["overheads-beside"]
        ids = tuple(dict.fromkeys(notes))
        hit = st.assumptions[key] = (ids, tuple(texts(n) for n in ids))
    return hit


def _stages(st: StaticPart, ranks: tuple[RankActs, ...], part: ContextPart, policy: ChunkPolicy, slack: float,
            c: dict[str, Any]) -> list[StageEstimate]:
    """Every rank: its model state plus activations, logits, workspaces and graph pool, then the peak."""
    every, last = part.workspaces
    context, nccl = c["cuda-context-bytes"], st.nccl_bytes
    out = []
    for rc, ra, rs in zip(st.shape.ranks, ranks, st.states, strict=True):
        state = rs.state
        workspace = every + state.fp8_cache + (last if rc.has_loss else 0.0)
        other = ra.logits + workspace + ra.graph_pool
        total = rs.model_state + ra.activations + other
        allocated = max(total, rs.step_base + workspace + ra.graph_pool)
        reserved = allocated * (1 + slack) + ra.pooled
        out.append(StageEstimate(
            pp_rank=rc.rank, layers=state.layers, params=state.params, in_flight_microbatches=list(ra.in_flight),
            weights_bytes=state.weights, grads_bytes=state.grads, optimizer_bytes=state.optimizer,
            activations_bytes=ra.activations, logits_bytes=ra.logits, workspace_bytes=workspace,
            graph_pool_bytes=ra.graph_pool, graph_pool_activations_bytes=ra.pooled, other_bytes=other,
            total_bytes=total, allocated_peak_bytes=allocated,
            reserved_bytes=reserved, cuda_context_bytes=context, nccl_bytes=nccl,
            peak_with_overheads_bytes=reserved + context + nccl,
            chunks=chunk_rows(st.shape.acts, part, policy, rc, ra),
        ))
    return out


def _breakdown(st: StageEstimate) -> dict[str, Any]:
    return {
        "pp_rank": st.pp_rank,
        "weights_bytes": st.weights_bytes,
        "grads_bytes": st.grads_bytes,
        "optimizer_bytes": st.optimizer_bytes,
        "activations_bytes": st.activations_bytes,
        "logits_bytes": st.logits_bytes,
        "workspace_bytes": st.workspace_bytes,
        "graph_pool_bytes": st.graph_pool_bytes,
        "allocator_slack_bytes": st.reserved_bytes - st.allocated_peak_bytes - st.graph_pool_activations_bytes,
        "graph_pool_activations_bytes": st.graph_pool_activations_bytes,
        "cuda_context_bytes": st.cuda_context_bytes,
        "nccl_bytes": st.nccl_bytes,
        "peak_with_overheads_bytes": st.peak_with_overheads_bytes,
    }


def _layout_summary(s: Setup, b: Batch) -> dict[str, Any]:
    return {"tp": s.tp, "pp": s.pp, "vpp": s.vp, "cp": s.cp, "ep": s.ep, "etp": s.etp, "dp": s.dp,
            "world_size": s.world, "sequence_parallel": s.sp, "micro_batch_size": b.mbs, "seq_length": s.seq,
            "num_microbatches": b.microbatches, "dense_optimizer_shard": s.dense_shard,
            "expert_optimizer_shard": s.expert_shard}
