"""What each pipeline rank holds for its backward pass, per candidate: activations, logits, graph pools.

A rank holds, when its first backward starts, the saved tensors of every forward
pass in flight (schedule.py) of each of its chunks (activations.py gives them per
layer), the largest backward temporary or the loss peak on top, and on the last
rank the logits.  None of it depends on the optimizer or the EP size, so the
results are cached on the shape's ActShape (static.py) and shared by every
model-state option and EP size of a shape:

* ``context_part``: the activation context of one micro-batch size, selective
  recompute set, LoRA input regather and fine-grained offload (``ActInputs``);
* ``rank_acts``: per rank, for a full-recompute / layer-offload choice
  (``ChunkPolicy``) and a micro-batch count.

Everything here reads the ActShape - its cleared config, sizes, architecture -
and the per-candidate inputs passed in explicitly, never the caller's config:
that keeps these caches exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..facts import TrainingConfig
from .activations import ActContext, LayerActivations, checkpoint_input, layer_activations
from .params import Arch
from .schedule import in_flight
from .setup import Setup, local_impl
from .stages import Chunk
from .static import ActShape, RankChunks, graph_scope_names

GRAPHED = frozenset({"transformer_engine", "local"})
CONTEXTS_PER_SHAPE = 256  # activation contexts remembered per shape (a plan needs a few dozen)


class ActInputs(NamedTuple):
    """The per-candidate inputs of the activation context (everything else it reads is fixed per shape)."""

    mbs: int
    recompute: frozenset[str]  # modules selective recompute drops
    regather: bool  # sequence_parallel_input_regather
    offload: tuple[tuple[str, float], ...]  # fine-grained offload: (module, fraction moved)


class ChunkPolicy(NamedTuple):
    """The per-candidate inputs of a chunk's kept bytes: full recompute and layer-wise CPU offload."""

    full: bool
    layers: int  # recompute_num_layers (1 when unset) with full recompute
    block: bool  # recompute_method block (else uniform) with full recompute
    offload_layers: int  # cpu_offloading_num_layers with cpu_offloading, else 0


# Every config field act_inputs and chunk_policy read (besides micro_batch_size): a caller that derives them once
# for many configs (the planner) may do so only while the configs agree on these.
ACT_FIELDS = frozenset({
    "recompute_granularity", "recompute_modules", "sequence_parallel_input_regather",
    "fine_grained_activation_offloading", "offload_modules", "activation_offload_fraction",
    "recompute_num_layers", "recompute_method", "cpu_offloading", "cpu_offloading_num_layers",
})


def act_inputs(cfg: TrainingConfig, mbs: int) -> ActInputs:
    recompute = frozenset()
    if cfg.recompute_granularity == "selective":
        recompute = frozenset(cfg.recompute_modules if cfg.recompute_modules is not None else ["core_attn"])
    return ActInputs(mbs, recompute, bool(cfg.sequence_parallel_input_regather), _offload(cfg))


def _offload(cfg: TrainingConfig) -> tuple[tuple[str, float], ...]:
    """Fine-grained activation offloading: the modules whose saved inputs move to host, and how much."""
    if not cfg.fine_grained_activation_offloading or not cfg.offload_modules:
        return ()
    fraction = float(cfg.activation_offload_fraction if cfg.activation_offload_fraction is not None else 1.0)
    return tuple({module: fraction for module in cfg.offload_modules}.items())


def chunk_policy(cfg: TrainingConfig) -> ChunkPolicy:
    full = cfg.recompute_granularity == "full"
    return ChunkPolicy(
        full=full, layers=int(cfg.recompute_num_layers or 1) if full else 0,
        block=full and (cfg.recompute_method or "uniform") == "block",
        offload_layers=int(cfg.cpu_offloading_num_layers) if cfg.cpu_offloading and cfg.cpu_offloading_num_layers
        else 0,
    )


def token_imbalance(cfg: TrainingConfig, learned: float) -> float:
    """Tokens the busiest expert gets at the peak step, relative to an even split.

    Forced balancing (benchmarks) splits evenly; a capacity factor drops what exceeds it, and padding fills every
    expert up to it; a learned router is uneven by ``learned`` (knowledge/estimator.yaml moe-token-imbalance).
    """
    if cfg.moe_router_force_load_balancing:
        return 1.0
    factor = cfg.moe_expert_capacity_factor
    if factor is not None and factor > 0:
        return float(factor) if cfg.moe_pad_expert_input_to_capacity else min(learned, float(factor))
    return learned


def graphed_modules(cfg: TrainingConfig) -> frozenset[str]:
    """The modules whose saved activations live in a per-layer CUDA graph's private pool.

    A graph is captured once; what its forward saves for the backward is allocated in the private pool and
    freed again when the backward graph is captured, so in steady-state training the replays write into pool
    memory that torch counts as reserved but not as allocated (Megatron-Core cuda_graph_modules: an empty
    scope, or "full", captures the whole layer; "moe" only drop-and-pad MoE layers).
    """
    if (cfg.cuda_graph_impl or "none").lower() not in GRAPHED:
        return frozenset()
    names = graph_scope_names(cfg)
    names.discard("full")
    if not names:
        names = {"attn", "mlp", "mamba"} | ({"moe"} if cfg.moe_pad_expert_input_to_capacity else set())
    return frozenset(names & {"attn", "mlp", "moe", "mamba"})


def _act_context(cfg: TrainingConfig, s: Setup, c: dict[str, Any], inputs: ActInputs) -> ActContext:
    d = c["megatron-defaults"]
    backend = (cfg.attention_backend or ("local" if local_impl(cfg) else "auto")).lower()
    elem = c["dtype-bytes"]["bf16"] if s.weight_bytes < 4 else c["dtype-bytes"]["fp32"]
    return ActContext(
        tokens=s.seq * inputs.mbs / s.cp, mbs=inputs.mbs, seq=s.seq, cp=s.cp, tp=s.tp,
        seq_shard=s.tp if s.sp else 1, etp=s.etp, elem=elem, lin=c["dtype-bytes"]["fp8"] if s.fp8 else elem,
        hidden_dropout=bool(cfg.hidden_dropout if cfg.hidden_dropout is not None else d["hidden_dropout"]),
        attention_dropout=bool(cfg.attention_dropout if cfg.attention_dropout is not None else d["attention_dropout"]),
        flash=backend not in {"unfused", "local"}, recompute=inputs.recompute, lora=s.lora, lora_rank=s.lora_rank,
        lora_targets=frozenset(s.lora_targets), regather=inputs.regather,
        rope_copies=c["rope-qk-copies"], router_tensors=c["router-fp32-tensors"],
        unpermute_copies=c["unpermute-saved-copies"], imbalance=token_imbalance(cfg, c["moe-token-imbalance"]),
        lora_input_copies=c["lora-gathered-input-copies"], stats_bytes=c["dtype-bytes"]["fp32"],
        scan_chunk=int(d["mamba_chunk_size"]), offload=inputs.offload, graphed=graphed_modules(cfg),
    )


def _chunk_kinds(a: Arch, ch: Chunk, acts: dict[str, LayerActivations]) -> tuple[str, dict[str, int]]:
    """A chunk's layer kinds (MTP blocks hold one decoder layer of the last kind each) and how many of each,
    in the order of ``acts`` (the order the bytes are summed in)."""
    kinds = ch.kinds + a.pattern[-1] * ch.mtp
    return kinds, {k: kinds.count(k) for k in acts}


def _chunk_activations(a: Arch, ch: Chunk, layer_kinds: tuple[str, dict[str, int]],
                       acts: dict[str, LayerActivations], ctx: ActContext,
                       policy: ChunkPolicy) -> tuple[float, float, float]:
    """(bytes kept per forward pass of this chunk, largest backward-time extra, the part of the kept bytes that
    CUDA-graph-captured modules hold in the graph pool) excluding logits."""
    kinds, counts = layer_kinds
    n = len(kinds)
    present = [acts[k] for k, m in counts.items() if m]
    transient = max((x.largest for x in present), default=0.0)
    saved_all = sum(m * acts[k].saved for k, m in counts.items())
    pooled = 0.0 if policy.full else sum(m * acts[k].pooled for k, m in counts.items())
    if policy.full and n:
        k = max(1, min(policy.layers, n))
        ckpt = checkpoint_input(a, ctx)
        head = kinds[:k]
        if policy.block:
            kept = k * ckpt + saved_all - sum(acts[x].saved for x in head)
            transient += max(acts[x].full for x in head)
        else:
            kept = math.ceil(n / k) * ckpt
            fulls = sorted(((acts[x].full, m) for x, m in counts.items() if m), reverse=True)
            left = k
            for full, m in fulls:
                take = min(m, left)
                transient += take * full
                left -= take
    else:
        kept = saved_all
    if policy.offload_layers and n:
        offloaded = min(policy.offload_layers, n - 1)
        kept -= offloaded * (kept / n)
        pooled -= offloaded * (pooled / n)
    tok = ctx.tokens
    if ch.embedding:
        kept += 8 * tok + (ctx.elem * tok * a.hidden / ctx.seq_shard if ctx.hidden_dropout else 0.0)
    if ch.mtp:
        kept += ch.mtp * (3 * ctx.elem * tok * a.hidden / ctx.seq_shard)
    if ch.loss:
        kept += 2 * ctx.elem * tok * a.hidden / ctx.seq_shard + 12 * tok
    return kept, transient, pooled


def _logits(a: Arch, ctx: ActContext, cfg: TrainingConfig, s: Setup, c: dict[str, Any]) -> tuple[float, float]:
    """(bytes kept per forward pass until its backward, extra bytes at the loss's peak moment) for one pass."""
    n = ctx.tokens * a.vocab / s.tp
    te = cfg.cross_entropy_loss_fusion and (cfg.cross_entropy_fusion_impl or "native") == "te"
    wgrad = 0.0 if cfg.gradient_accumulation_fusion is not False else ctx.elem * a.vocab * a.hidden / s.tp
    if te:  # Triton kernel: loss and gradient computed in place in the bf16 logits
        return ctx.elem * n, wgrad
    kept = c["dtype-bytes"]["fp32"] * n  # the fp32 softmax the backward reuses
    # forward: bf16 logits beside the fp32 copy; backward: bf16 gradient (+ unfused weight gradient)
    return kept, max(ctx.elem * n, ctx.elem * n + wgrad - kept)


def _workspaces(shape: ActShape, ctx: ActContext) -> tuple[float, float]:
    """(workspaces every rank holds, the SP all-gather buffer the output layer's rank adds)."""
    s, a = shape.setup, shape.arch
    static = shape.static_workspace
    if local_impl(shape.cfg) and not ctx.flash:  # Megatron-Core's own attention keeps its score buffer
        static += ctx.elem * ctx.mbs * (a.heads / s.tp) * (s.seq / s.cp) * s.seq
    last = ctx.elem * ctx.tokens * a.hidden if s.sp else 0.0
    return static, last


@dataclass(frozen=True)
class ContextPart:
    """What one activation context decides, for every rank of every candidate of the shape that shares it."""

    ctx: ActContext
    acts: dict[str, LayerActivations]
    chunk_kinds: list[tuple[str, dict[str, int]]]  # per unique chunk, see _chunk_kinds
    logits: tuple[float, float]  # (kept per forward pass, extra at the loss peak)
    workspaces: tuple[float, float]  # (every rank, output-layer rank only)
    graph_per_layer: float
    chunks: dict[ChunkPolicy, list[tuple[float, float, float]]] = field(default_factory=dict)  # _chunk_activations
    ranks: dict[tuple[ChunkPolicy, int], tuple[RankActs, ...]] = field(default_factory=dict)  # _rank_acts


def context_part(shape: ActShape, c: dict[str, Any], inputs: ActInputs) -> ContextPart:
    """The activation context of ``inputs`` and what follows from it, cached on the ActShape: candidates
    that differ in model state, full recompute or layer offload share it."""
    hit = shape.contexts.get(inputs)
    if hit is None:
        a, s = shape.arch, shape.setup
        ctx = _act_context(shape.cfg, s, c, inputs)
        acts = layer_activations(a, ctx)
        hit = ContextPart(
            ctx=ctx, acts=acts, chunk_kinds=_shape_chunk_kinds(shape, acts),
            logits=_logits(a, ctx, shape.cfg, s, c), workspaces=_workspaces(shape, ctx),
            graph_per_layer=checkpoint_input(a, ctx) * c["cuda-graph-static-buffers"] if shape.graphs in GRAPHED
            else 0.0,
        )
        if len(shape.contexts) >= CONTEXTS_PER_SHAPE:
            shape.contexts.clear()
        shape.contexts[inputs] = hit
    return hit


def _shape_chunk_kinds(shape: ActShape, acts: dict[str, LayerActivations]) -> list[tuple[str, dict[str, int]]]:
    """Every unique chunk's layer kinds: the same for every activation context of the shape (it reads only the
    kind names of ``acts``), so kept once on the shape's cache rather than per context."""
    key = tuple(acts)
    hit = shape.chunk_kinds.get(key)
    if hit is None:
        hit = shape.chunk_kinds[key] = [_chunk_kinds(shape.arch, ch, acts) for ch in shape.layout.unique]
    return hit


def _chunk_acts(shape: ActShape, part: ContextPart, policy: ChunkPolicy) -> list[tuple[float, float, float]]:
    """(kept per forward pass, backward extra) of every unique chunk, cached per activation context."""
    hit = part.chunks.get(policy)
    if hit is None:
        hit = part.chunks[policy] = [_chunk_activations(shape.arch, ch, kinds, part.acts, part.ctx, policy)
                                    for ch, kinds in zip(shape.layout.unique, part.chunk_kinds, strict=True)]
    return hit


class RankActs(NamedTuple):
    """One rank's activation-side bytes at its peak; every model-state option of the shape shares them."""

    in_flight: tuple[int, ...]  # forward passes alive per chunk
    activations: float  # allocated: what captured modules keep in the CUDA-graph pool is in ``pooled`` instead
    logits: float
    graph_pool: float  # static input / output buffers of the captured graphs (allocated)
    pooled: float  # activations of captured modules, in the graph pool's reserved memory (not allocated); under a
    #               full-iteration graph, the pool's blocks that capture could not reuse


def rank_acts(shape: ActShape, part: ContextPart, policy: ChunkPolicy, microbatches: int,
              c: dict[str, Any], capture_reuse: bool = False) -> tuple[RankActs, ...]:
    """Activations, logits and CUDA-graph pool of every rank, cached per (activation context, chunk policy,
    micro-batch count, whether graph capture may reuse blocks recorded on other streams)."""
    key = (policy, microbatches, capture_reuse)
    hit = part.ranks.get(key)
    if hit is None:
        chunk_acts = _chunk_acts(shape, part, policy)
        hit = part.ranks[key] = tuple(_one_rank_acts(shape, rc, part, chunk_acts, microbatches, c, capture_reuse)
                                      for rc in shape.ranks)
    return hit


def chunk_rows(shape: ActShape, part: ContextPart, policy: ChunkPolicy, rc: RankChunks,
               ra: RankActs) -> list[tuple[int, int, int, float]]:
    """(vp, layers, passes in flight, bytes kept) of each chunk of a rank, for a full estimate's table (the
    planner never reads them, so they are not kept with the cached RankActs)."""
    chunk_acts = _chunk_acts(shape, part, policy)
    return [(vp, layers, n, n * chunk_acts[cid][0]) for (vp, layers, cid, _loss, _mtp), n
            in zip(rc.chunks, ra.in_flight, strict=True)]


def _one_rank_acts(shape: ActShape, rc: RankChunks, part: ContextPart, chunk_acts: list[tuple[float, float, float]],
                   microbatches: int, c: dict[str, Any], capture_reuse: bool) -> RankActs:
    """Each chunk's kept bytes times its passes in flight, the largest backward temporary or loss peak on top.

    A full-iteration graph captures the whole forward and backward: all of that is allocated in its pool while
    it is captured (the allocated peak is the eager one) and stays reserved for the replays, with the blocks
    capture could not reuse on top, reserved but never allocated (graph-capture-fragmentation)."""
    s = shape.setup
    counts = in_flight(s.pp, s.vp, microbatches, rc.rank, shape.cfg.microbatch_group_size_per_vp_stage)
    logit_kept, logit_extra = part.logits
    graph_per_layer = part.graph_per_layer
    held = transient = logits_held = graph_pool = pooled = 0.0
    for (_vp, layers, cid, loss, mtp), n in zip(rc.chunks, counts, strict=True):
        kept, extra, in_pool = chunk_acts[cid]
        held += n * kept
        pooled += n * in_pool
        if extra > transient:
            transient = extra
        if loss:
            logits_held += n * logit_kept * (1 + mtp)
        graph_pool += n * layers * graph_per_layer
    transient *= c["backward-transient-factor"]
    loss_extra = logit_extra if rc.has_loss else 0.0
    if loss_extra > transient:
        act, logits = held, logits_held + loss_extra
    else:
        act, logits = held + transient, logits_held
    if shape.graphs == "full_iteration":
        frag = c["graph-capture-fragmentation"]["record_stream_reuse" if capture_reuse else "default"]
        return RankActs(counts, act, logits, 0.0, (act + logits) * frag)
    return RankActs(counts, act - pooled, logits, graph_pool, pooled)
