"""Per-pipeline-stage GPU memory of a training layout ("ours" mode).

For every pipeline rank the estimate adds:

* weights, main gradients and optimizer states of the parameters that rank
  holds (its layers, plus the embedding on rank 0 and the output layer on the
  last rank), each with the dtype and the sharding group the settings imply;
* activations: per-layer saved tensors (activations.py) times the number of
  forward passes alive when the rank starts its first backward (schedule.py),
  plus the largest backward temporary;
* logits and loss buffers on the rank that holds the output layer;
* PyTorch-allocated workspaces (cuBLAS, Transformer Engine) and CUDA-graph pools.

``allocated_peak_bytes`` is the prediction of ``torch.cuda.max_memory_allocated()``.
Allocator slack (reserved but unallocated), the CUDA context and NCCL buffers
live outside it and are reported beside it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import UserError
from ..facts import TrainingConfig
from .activations import ActContext, LayerActivations, checkpoint_input, layer_activations
from .params import (
    Arch,
    Counts,
    arch_from_config,
    embedding_params,
    final_norm_params,
    kind_params,
    lora_adapter_params,
    mtp_params,
    output_params,
    total_params,
)
from .schedule import in_flight
from .stages import Chunk, place

GIB = 2**30
CHUNK_KEYS = ("vp", "layers", "in_flight", "activations_bytes")
GRAPHED = frozenset({"transformer_engine", "local"})


@dataclass
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
    other_bytes: float
    total_bytes: float
    allocated_peak_bytes: float
    reserved_bytes: float
    cuda_context_bytes: float
    nccl_bytes: float
    peak_with_overheads_bytes: float
    chunks: list[Any] = field(default_factory=list)  # (vp, layers, in_flight, activations_bytes) per VPP chunk


@dataclass
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


@dataclass(frozen=True)
class Setup:
    """Resolved layout: every size and switch the formulas use, with defaults applied."""

    tp: int
    pp: int
    vp: int
    cp: int
    ep: int
    etp: int
    dp: int
    world: int
    sp: bool
    mbs: int
    seq: int
    microbatches: int
    weight_bytes: float
    grad_bytes: float
    master_bytes: float
    moment_bytes: float
    dense_shard: int
    expert_shard: int
    fsdp: str | None
    fp8: bool
    fp8_params: bool
    lora: bool
    lora_rank: int
    lora_targets: tuple[str, ...]
    offload_fraction: float


def _size(value: int | None) -> int:
    return int(value) if value else 1


def resolve(cfg: TrainingConfig, c: dict[str, Any], num_microbatches: int | None,
            notes: list[str]) -> Setup:
    """Fill Megatron defaults and derive DP, micro-batches and bytes per parameter."""
    tp, pp, cp = _size(cfg.tensor_model_parallel_size), _size(cfg.pipeline_model_parallel_size), \
        _size(cfg.context_parallel_size)
    vp = _size(cfg.virtual_pipeline_model_parallel_size)
    if cfg.pipeline_model_parallel_layout and not cfg.virtual_pipeline_model_parallel_size:
        vp = max(1, _layout_stages(cfg.pipeline_model_parallel_layout) // pp)
    ep = _size(cfg.expert_model_parallel_size)
    etp = int(cfg.expert_tensor_parallel_size) if cfg.expert_tensor_parallel_size else tp
    if cfg.data_parallel_size:
        dp = int(cfg.data_parallel_size)
    elif cfg.world_size:
        if cfg.world_size % (tp * pp * cp):
            raise UserError(f"config: world_size {cfg.world_size} is not divisible by TP*PP*CP = {tp * pp * cp}")
        dp = cfg.world_size // (tp * pp * cp)
    else:
        dp = 1
        notes.append("dp-unknown")
    world = dp * tp * pp * cp
    mbs = _size(cfg.micro_batch_size)
    if not cfg.seq_length:
        raise UserError("config: seq_length is not set")
    if num_microbatches:
        m = int(num_microbatches)
    elif cfg.global_batch_size:
        m = max(1, int(cfg.global_batch_size) // (mbs * dp))
    else:
        m = 2 * pp  # enough for every rank to reach its 1F1B steady state (see schedule.py)
        notes.append("microbatches-unknown")
    dtype = c["dtype-bytes"]
    half = cfg.bf16 or cfg.fp16 or (cfg.bf16 is None and cfg.fp16 is None)
    if cfg.bf16 is None and cfg.fp16 is None:
        notes.append("bf16-assumed")
    weight = dtype["bf16"] if half else dtype["fp32"]
    pa = bool(cfg.use_precision_aware_optimizer)
    if pa and cfg.main_grads_dtype:
        grad = dtype[_dtype_name(cfg.main_grads_dtype)]
    elif cfg.grad_reduce_in_fp32 is False or (cfg.grad_reduce_in_fp32 is None and cfg.fp16):
        grad = weight
    else:
        grad = dtype["fp32"]
    table = c["optimizer-moments"]
    moments = table.get((cfg.optimizer or "adam").lower(), table["adam"])
    if pa:
        moment = dtype[_dtype_name(cfg.exp_avg_dtype or "fp32")] + dtype[_dtype_name(cfg.exp_avg_sq_dtype or "fp32")]
        moment *= moments / 2
        master = c["master-remainder-bytes"] if half else 0.0
    else:
        moment = moments * dtype["fp32"]
        master = dtype["fp32"] if half else 0.0
    fsdp = None
    if cfg.use_megatron_fsdp:
        fsdp = cfg.data_parallel_sharding_strategy or "optim_grads_params"
    distributed = bool(cfg.use_distributed_optimizer) or fsdp is not None
    instances = _size(cfg.num_distributed_optimizer_instances)
    dense_shard = max(1, dp * cp // instances) if distributed else 1
    expert_dp = max(1, (tp * cp * dp) // (ep * etp))
    expert_shard = max(1, expert_dp // instances) if distributed else 1
    lora = bool(cfg.peft) and cfg.peft.lower() not in {"none", "false"}
    offload = 0.0
    if cfg.optimizer_cpu_offload:
        offload = float(cfg.optimizer_offload_fraction if cfg.optimizer_offload_fraction is not None else 1.0)
    return Setup(
        tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, etp=etp, dp=dp, world=world, sp=bool(cfg.sequence_parallel) and tp > 1,
        mbs=mbs, seq=int(cfg.seq_length), microbatches=m, weight_bytes=weight, grad_bytes=grad, master_bytes=master,
        moment_bytes=moment, dense_shard=dense_shard, expert_shard=expert_shard, fsdp=fsdp,
        fp8=bool(cfg.fp8) or bool(cfg.fp4), fp8_params=bool(cfg.fp8_param_gather) and bool(cfg.fp8),
        lora=lora, lora_rank=int(cfg.peft_dim or c["megatron-defaults"]["lora_dim"]),
        lora_targets=tuple(cfg.peft_target_modules or c["lora-default-targets"]), offload_fraction=offload,
    )


def _dtype_name(value: str) -> str:
    v = str(value).lower().replace("torch.", "")
    return {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16",
            "uint8": "fp8", "float8": "fp8"}.get(v, v)


def _layout_stages(layout: str) -> int:
    from .stages import _from_layout

    return len(_from_layout(layout, -1)[0])


def _local(cfg: TrainingConfig) -> bool:
    """Megatron-LM's ``--transformer-impl local``: Megatron-Core modules without Transformer Engine."""
    return (cfg.transformer_impl or "").lower() == "local"


def _act_context(cfg: TrainingConfig, s: Setup, c: dict[str, Any]) -> ActContext:
    d = c["megatron-defaults"]
    recompute = frozenset()
    if cfg.recompute_granularity == "selective":
        recompute = frozenset(cfg.recompute_modules if cfg.recompute_modules is not None else ["core_attn"])
    backend = (cfg.attention_backend or ("local" if _local(cfg) else "auto")).lower()
    elem = c["dtype-bytes"]["bf16"] if s.weight_bytes < 4 else c["dtype-bytes"]["fp32"]
    return ActContext(
        tokens=s.seq * s.mbs / s.cp, mbs=s.mbs, seq=s.seq, cp=s.cp, tp=s.tp, seq_shard=s.tp if s.sp else 1,
        etp=s.etp, elem=elem, lin=c["dtype-bytes"]["fp8"] if s.fp8 else elem,
        hidden_dropout=bool(cfg.hidden_dropout if cfg.hidden_dropout is not None else d["hidden_dropout"]),
        attention_dropout=bool(cfg.attention_dropout if cfg.attention_dropout is not None else d["attention_dropout"]),
        flash=backend not in {"unfused", "local"}, recompute=recompute, lora=s.lora, lora_rank=s.lora_rank,
        lora_targets=frozenset(s.lora_targets), regather=bool(cfg.sequence_parallel_input_regather),
        rope_copies=c["rope-qk-copies"], router_tensors=c["router-fp32-tensors"],
        unpermute_copies=c["unpermute-saved-copies"], imbalance=c["moe-token-imbalance"],
        lora_input_copies=c["lora-gathered-input-copies"], stats_bytes=c["dtype-bytes"]["fp32"],
        scan_chunk=int(d["mamba_chunk_size"]), offload=_offload(cfg),
    )


def _offload(cfg: TrainingConfig) -> dict[str, float]:
    """Fine-grained activation offloading: the modules whose saved inputs move to host, and how much."""
    if not cfg.fine_grained_activation_offloading or not cfg.offload_modules:
        return {}
    fraction = float(cfg.activation_offload_fraction if cfg.activation_offload_fraction is not None else 1.0)
    return {module: fraction for module in cfg.offload_modules}


# --- model state ---------------------------------------------------------------------------------------


def _chunk_params(a: Arch, ch: Chunk, kinds: dict[str, Counts]) -> tuple[Counts, float]:
    """Parameters of one chunk (dense counts before the TP split, experts before the EP split) and its
    embedding/output rows, which FP8 leaves in 16 bits."""
    total = Counts()
    for kind in set(ch.kinds):
        total = total + kinds[kind].scale(ch.kinds.count(kind))
    if ch.mtp:
        total = total + mtp_params(a).scale(ch.mtp)
    vocab_rows = 0.0
    if ch.embedding:
        total = total + embedding_params(a)
        vocab_rows += embedding_params(a).tp
    if ch.loss:
        total = total + final_norm_params(a)
        if not (a.tied and ch.embedding):  # untied: own weight; tied with PP>1: a copy of the embedding
            total = total + output_params(a)
            vocab_rows += output_params(a).tp
    return total, vocab_rows


def _unique_chunk_params(a: Arch, unique: tuple[Chunk, ...], s: Setup) -> list[tuple[Counts, float, Counts]]:
    """(parameters, vocabulary rows, LoRA adapters) of every distinct chunk, before any sharding."""
    kinds = kind_params(a)
    out = []
    for ch in unique:
        counts, rows = _chunk_params(a, ch, kinds)
        lora = Counts()
        if s.lora:
            for kind in set(ch.kinds):
                lora = lora + lora_adapter_params(a, kind, s.lora_rank, s.lora_targets).scale(ch.kinds.count(kind))
        out.append((counts, rows, lora))
    return out


def _stage_state(a: Arch, chunk_ids: tuple[int, ...], per_chunk: list[tuple[Counts, float, Counts]], layers: int,
                 s: Setup, c: dict[str, Any]) -> dict[str, float]:
    dense_tp = dense_rep = expert = vocab_rows = 0.0
    adapters = Counts()
    for cid in chunk_ids:
        counts, rows, lora = per_chunk[cid]
        dense_tp += counts.tp
        dense_rep += counts.rep
        expert += counts.expert
        vocab_rows += rows
        if s.lora:
            adapters = adapters + lora
    dense = dense_tp / s.tp + dense_rep
    experts = expert / (s.ep * s.etp)
    linear = (dense_tp - vocab_rows) / s.tp + experts  # weights FP8 keeps in 8 bits
    params = dense + experts
    dtype = c["dtype-bytes"]
    weights = params * s.weight_bytes
    if s.lora:
        trainable_dense, trainable_expert = adapters.tp / s.tp, adapters.expert / (s.ep * s.etp)
        weights += (trainable_dense + trainable_expert) * s.weight_bytes
        params += trainable_dense + trainable_expert
    else:
        trainable_dense, trainable_expert = dense, experts
    workspace = 0.0
    if s.fp8 and s.fp8_params and not s.lora:
        weights += linear * (c["fp8-param-bytes"] - s.weight_bytes)
    elif s.fp8:
        workspace = linear * c["fp8-weight-cache-bytes"]
    grads = (trainable_dense + trainable_expert) * s.grad_bytes
    opt_per = s.master_bytes + s.moment_bytes
    optimizer = trainable_dense * opt_per / s.dense_shard + trainable_expert * opt_per / s.expert_shard
    if s.fsdp in {"optim_grads", "optim_grads_params"}:
        grads = trainable_dense * s.grad_bytes / s.dense_shard + trainable_expert * s.grad_bytes / s.expert_shard
    if s.fsdp == "optim_grads_params":
        # weights all-gathered for the running and the prefetched layer; one layer's unsharded gradient
        kinds = kind_params(a)
        per_layer = max((x.tp / s.tp + x.rep + x.expert / (s.ep * s.etp)) for x in kinds.values()) if kinds else 0.0
        weights = weights / s.dense_shard + c["fsdp-unsharded-layers"] * per_layer * s.weight_bytes
        grads += per_layer * s.grad_bytes
    optimizer *= 1.0 - s.offload_fraction
    # fp16/bf16 main grads are copied to fp32 for the step unless the optimizer is precision-aware
    step = 0.0
    if s.grad_bytes < dtype["fp32"] and s.master_bytes == dtype["fp32"]:
        step = (trainable_dense / s.dense_shard + trainable_expert / s.expert_shard) * dtype["fp32"]
    return {"params": params, "weights": weights, "grads": grads, "optimizer": optimizer, "layers": layers,
            "fp8_cache": workspace, "step": step, "linear": linear}


# --- activations ---------------------------------------------------------------------------------------


def _chunk_activations(a: Arch, ch: Chunk, acts: dict[str, LayerActivations], ctx: ActContext,
                       cfg: TrainingConfig, s: Setup) -> tuple[float, float]:
    """(bytes kept per forward pass of this chunk, largest backward-time extra) excluding logits."""
    kinds = ch.kinds + a.pattern[-1] * ch.mtp  # MTP blocks hold one decoder layer of the last kind each
    counts = {k: kinds.count(k) for k in acts}
    n = len(kinds)
    present = [acts[k] for k, m in counts.items() if m]
    transient = max((x.largest for x in present), default=0.0)
    saved_all = sum(m * acts[k].saved for k, m in counts.items())
    if cfg.recompute_granularity == "full" and n:
        k = max(1, min(int(cfg.recompute_num_layers or 1), n))
        ckpt = checkpoint_input(a, ctx)
        head = kinds[:k]
        if (cfg.recompute_method or "uniform") == "block":
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
    if cfg.cpu_offloading and cfg.cpu_offloading_num_layers and n:
        offloaded = min(int(cfg.cpu_offloading_num_layers), n - 1)
        kept -= offloaded * (kept / n)
    tok = ctx.tokens
    if ch.embedding:
        kept += 8 * tok + (ctx.elem * tok * a.hidden / ctx.seq_shard if ctx.hidden_dropout else 0.0)
    if ch.mtp:
        kept += ch.mtp * (3 * ctx.elem * tok * a.hidden / ctx.seq_shard)
    if ch.loss:
        kept += 2 * ctx.elem * tok * a.hidden / ctx.seq_shard + 12 * tok
    return kept, transient


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


def estimate_ours(cfg: TrainingConfig, c: dict[str, Any], texts: Any, *, num_microbatches: int | None = None,
                  expandable_segments: bool | None = None) -> Estimate:
    notes: list[str] = []
    s = resolve(cfg, c, num_microbatches, notes)
    a = arch_from_config(cfg, s.tp, c["megatron-defaults"])
    ctx = _act_context(cfg, s, c)
    acts = layer_activations(a, ctx)
    layout = place(a.pattern, s.pp, s.vp, cfg.num_layers_in_first_pipeline_stage,
                   cfg.num_layers_in_last_pipeline_stage, bool(cfg.account_for_embedding_in_pipeline_split),
                   bool(cfg.account_for_loss_in_pipeline_split), cfg.pipeline_model_parallel_layout,
                   cfg.hybrid_layer_pattern, a.mtp)
    logit_kept, logit_extra = _logits(a, ctx, cfg, s, c)
    graphs = (cfg.cuda_graph_impl or "none").lower()
    work = _workspaces(a, cfg, s, ctx, c)
    slack = c["allocator-slack-fraction"]["expandable" if expandable_segments else "default"]
    nccl = c["nccl-bytes-per-group"] * sum(1 for g in (s.tp, s.pp, s.cp, s.dp, s.ep) if g > 1)
    stages: list[StageEstimate] = []
    graph_per_layer = checkpoint_input(a, ctx) * c["cuda-graph-static-buffers"] if graphs in GRAPHED else 0.0
    bwd_factor = c["backward-transient-factor"]
    chunk_acts = [_chunk_activations(a, ch, acts, ctx, cfg, s) for ch in layout.unique]
    per_chunk = _unique_chunk_params(a, layout.unique, s)
    states: dict[int, dict[str, float]] = {}
    has_losses = layout.has_loss
    for rank in range(s.pp):
        chunks = layout.stages[rank]
        sid = layout.stage_ids[rank]
        if sid not in states:
            layers = sum(len(ch.kinds) for ch in chunks)
            states[sid] = _stage_state(a, layout.chunk_ids[rank], per_chunk, layers, s, c)
        state = states[sid]
        counts = in_flight(s.pp, s.vp, s.microbatches, rank, cfg.microbatch_group_size_per_vp_stage)
        held = transient = logits_held = graph_pool = 0.0
        chunk_rows = []
        for ch, cid, n in zip(chunks, layout.chunk_ids[rank], counts, strict=True):
            kept, extra = chunk_acts[cid]
            held += n * kept
            if extra > transient:
                transient = extra
            if ch.loss:
                logits_held += n * logit_kept * (1 + ch.mtp)
            graph_pool += n * len(ch.kinds) * graph_per_layer
            chunk_rows.append((ch.vp, len(ch.kinds), n, n * kept))
        transient *= bwd_factor
        has_loss = has_losses[rank]
        loss_extra = logit_extra if has_loss else 0.0
        if loss_extra > transient:
            act, logits = held, logits_held + loss_extra
        else:
            act, logits = held + transient, logits_held
        if graphs == "full_iteration":
            graph_pool = (act + logits) * c["full-iteration-graph-factor"]
        workspace = work["static"] + state["fp8_cache"] + (work["last"] if has_loss else 0.0)
        other = logits + workspace + graph_pool
        total = state["weights"] + state["grads"] + state["optimizer"] + act + other
        step_peak = state["weights"] + state["grads"] + state["optimizer"] + state["step"] + workspace + graph_pool
        allocated = max(total, step_peak)
        reserved = allocated * (1 + slack)
        stages.append(StageEstimate(
            pp_rank=rank, layers=state["layers"], params=state["params"], in_flight_microbatches=list(counts),
            weights_bytes=state["weights"], grads_bytes=state["grads"], optimizer_bytes=state["optimizer"],
            activations_bytes=act, logits_bytes=logits, workspace_bytes=workspace, graph_pool_bytes=graph_pool,
            other_bytes=other, total_bytes=total, allocated_peak_bytes=allocated, reserved_bytes=reserved,
            cuda_context_bytes=c["cuda-context-bytes"], nccl_bytes=nccl,
            peak_with_overheads_bytes=reserved + c["cuda-context-bytes"] + nccl, chunks=chunk_rows,
        ))
    peak = max(stages, key=lambda st: st.allocated_peak_bytes)
    notes += _notes(cfg, s, a)
    return Estimate(
        mode="ours", stages=stages, peak_stage=peak.pp_rank, peak_bytes=peak.allocated_peak_bytes,
        breakdown=_breakdown(peak), assumptions=[texts(n) for n in dict.fromkeys(notes)],
        layout=_layout_summary(s), parameters={"total": total_params(a), "per_gpu_peak_stage": peak.params},
        assumption_ids=list(dict.fromkeys(notes)),
    )


def _workspaces(a: Arch, cfg: TrainingConfig, s: Setup, ctx: ActContext, c: dict[str, Any]) -> dict[str, float]:
    """PyTorch-allocated buffers that exist independent of the micro-batch count."""
    static = c["cublas-workspace-bytes"] + c["misc-static-bytes"]
    if not _local(cfg):
        static += c["te-workspace-bytes"]
    if a.experts and cfg.moe_grouped_gemm and not _local(cfg):
        static += c["te-grouped-gemm-workspace-bytes"]
    if _local(cfg) and not ctx.flash:  # Megatron-Core's own attention keeps its score buffer
        static += ctx.elem * s.mbs * (a.heads / s.tp) * (s.seq / s.cp) * s.seq
    last = ctx.elem * ctx.tokens * a.hidden if s.sp else 0.0  # SP all-gather buffer of the output layer
    return {"static": static, "last": last}


def _notes(cfg: TrainingConfig, s: Setup, a: Arch) -> list[str]:
    notes = ["allocated-peak", "schedule-interleaved" if s.vp > 1 else "schedule-1f1b"]
    if cfg.use_distributed_optimizer is None and not s.fsdp:
        notes.append("dist-opt-unknown")
    if cfg.sequence_parallel is None and s.tp > 1:
        notes.append("sp-unknown")
    unfused = (cfg.attention_backend or ("local" if _local(cfg) else "")).lower() in {"unfused", "local"}
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
        notes.append("fsdp")
    if s.offload_fraction or cfg.cpu_offloading or cfg.fine_grained_activation_offloading:
        notes.append("offload")
    notes.append("overheads-beside")
    return notes


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
        "allocator_slack_bytes": st.reserved_bytes - st.allocated_peak_bytes,
        "cuda_context_bytes": st.cuda_context_bytes,
        "nccl_bytes": st.nccl_bytes,
        "peak_with_overheads_bytes": st.peak_with_overheads_bytes,
    }


def _layout_summary(s: Setup) -> dict[str, Any]:
    return {"tp": s.tp, "pp": s.pp, "vpp": s.vp, "cp": s.cp, "ep": s.ep, "etp": s.etp, "dp": s.dp,
            "world_size": s.world, "sequence_parallel": s.sp, "micro_batch_size": s.mbs, "seq_length": s.seq,
            "num_microbatches": s.microbatches, "dense_optimizer_shard": s.dense_shard,
            "expert_optimizer_shard": s.expert_shard}
