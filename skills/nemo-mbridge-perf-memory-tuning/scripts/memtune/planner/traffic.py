"""Seconds of compute and bytes of traffic of one layout: what the traffic costs in costs.py divide.

A data-parallel collective or a host copy costs throughput only where it outlasts the compute it overlaps
with.  Both sides come from the model and the GPU, not from a fitted factor: compute is 6 FLOPs per active
parameter per token plus causal attention, at the GPU's dense peak for the run's precision times one
achieved fraction (costs.yaml ``achieved-flops``, the only fitted number here); traffic is the bytes a
collective moves over the link the group spans (NVLink inside one domain, the network beyond it) and the
saved activations a layer offload copies over the host link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..estimator.constants import constants
from ..estimator.params import (
    ATTN,
    DENSE,
    HAS_ATTENTION,
    HAS_DENSE_MLP,
    HAS_MOE,
    MAMBA,
    MLP,
    MOE,
    MOE_ONLY,
    arch_from_config,
    attention_params,
    embedding_params,
    kind_params,
    mamba_params,
    mlp_params,
    moe_params,
    mtp_params,
    total_params,
)
from ..estimator.stages import place
from ..estimator.static import graph_scope_names
from ..facts import GpuFacts, TrainingConfig
from ..knowledge import Knowledge

GB = 1e9
TFLOPS = 1e12
BF16 = 2  # bytes of a bf16 element: activations, dispatched tokens, gathered parameters
FP32 = 4


@dataclass(frozen=True)
class Hardware:
    """Per-GPU speeds of the run (knowledge/gpus.yaml ``hardware``), in FLOP/s and bytes/s per direction."""

    flops: float  # achieved dense FLOP/s of the GEMMs at the run's precision
    nvlink: float
    network: float
    host: float
    attention: float  # achieved FLOP/s of the core attention: BF16 whatever the GEMM precision
    hbm: float  # memory bandwidth, for the memory-bound kernels (ModelCounts.elementwise, cast_elements); 0: unknown
    cast_bytes: float  # bytes an FP8 cast reads and writes per element (0 without FP8)
    passes: float  # memory-bound passes over a layer's activations per step: the forward's and the backward's
    weight_bytes: float  # bytes of each weight the GEMMs read per micro-batch (forward and input gradient)
    grad_passes: float  # reads and writes of each weight's gradient per micro-batch (accumulation)


@dataclass(frozen=True)
class ModelCounts:
    """Parameter counts of the whole model the per-GPU shares are taken from."""

    dense: float  # everything but routed experts (embedding and output included)
    experts: float  # all routed-expert parameters
    experts_active: float  # routed-expert parameters one token passes through (top-k of E)
    attention_layers: int
    attention_width: int  # heads x head dim of the core attention
    kv_width: int  # query groups x head dim: what K (and V) hold per token
    num_layers: int
    hidden: int
    # rows only looked up per token, never multiplied: the input embedding when the output layer has its own weight,
    # and learned positions (a tied embedding is the output layer's weight)
    lookup: float = 0.0
    moe_layers: int = 0  # decoder layers with routed experts
    topk: int = 0
    moe_width: int = 0  # width of a dispatched token (moe_latent_size when the experts run in a latent space)
    elementwise: float = 0.0  # bytes per token the forward's memory-bound kernels move (memory_work)
    cast_elements: float = 0.0  # inputs + outputs of the decoder's linears per token, each cast to FP8 once


@dataclass(frozen=True)
class Traffic:
    """What the traffic costs read of one layout."""

    mb_seconds: float  # forward + backward of one micro-batch on one GPU, as modelled
    flop_seconds: float  # its FLOPs at the GEMM rate: mb_seconds were all its work GEMMs at the run's precision
    microbatches: int
    param_seconds: float  # seconds the sharded collectives take per byte of each parameter they move (both groups)
    grad_bytes: int  # bytes per gradient element a reduce-scatter moves (0: a frozen base reduces none)
    frozen: bool  # the base weights take no gradients and no update (LoRA)
    layer_ratio: float  # host-link time of one layer's saved activations / that layer's compute time
    layer_seconds: float  # forward + backward of one decoder layer for one micro-batch on one GPU
    tp_unit_seconds: float  # one sequence-parallel collective of a layer (tokens x hidden bf16) over NVLink
    kv_seconds: float  # one ring pass of an attention layer's K/V chunks (CP - 1 sends)
    attention_seconds: float  # the core attention compute of one attention layer, forward + backward
    dispatch_seconds: float  # one MoE layer's token dispatch and combine, forward + backward (dispatch_bytes)
    moe_layers: float  # MoE layers on one pipeline stage


def achieved_share(costs: Any) -> float:
    """costs.yaml ``achieved-flops``: the share of the dense peak the compute times use."""
    return float(costs["achieved-flops"]["value"])


def _attention_width(arch: Any) -> int:
    """Heads x head dim of the core attention (MLA: the query-key head dim with its rotary part)."""
    return arch.heads * (arch.qk_head + arch.qk_rope if arch.mla else arch.kv_channels)


def _attention_flops(seq: int, width: int) -> float:
    """Core-attention FLOPs per token of one layer, causal, forward + backward."""
    return 6.0 * seq * width


def hardware(gpu: GpuFacts, precision: str | None, costs: Mapping[str, Any]) -> Hardware | None:
    """The run's speeds, or None when gpus.yaml has no hardware figures for the GPU.

    ``precision`` is ``precision_of``'s answer ("bf16", or "fp8" with the recipe after a dash); ``costs`` the cost
    table: its ``achieved-flops`` share and the ``memory-traffic`` passes and cast bytes."""
    achieved = achieved_share(costs)
    memory = costs.get("memory-traffic")
    cast = {**memory["params"], "passes": memory["value"]} if memory else None
    hw = gpu.hardware or {}
    peaks = hw.get("dense_tflops") or {}
    fp8 = bool(precision) and str(precision).lower().startswith("fp8")
    peak = peaks.get("fp8") if fp8 and peaks.get("fp8") else peaks.get("bf16")
    if not peak or not hw.get("nvlink_gbs") or not hw.get("network_gbs") or not hw.get("host_gbs"):
        return None
    fp8_gemm = fp8 and bool(peaks.get("fp8"))
    cast_bytes = fp8_cast_bytes(str(precision), gpu.arch, cast) if fp8_gemm and cast else 0.0
    return Hardware(peak * TFLOPS * achieved, hw["nvlink_gbs"] * GB, hw["network_gbs"] * GB, hw["host_gbs"] * GB,
                    peaks["bf16"] * TFLOPS * achieved, (hw.get("hbm_gbs") or 0.0) * GB, cast_bytes,
                    float(cast["passes"]) if cast else 0.0,
                    cast["weight_reads"] * (1 if fp8_gemm else BF16) if cast else 0.0,
                    float(cast["grad_passes"]) if cast else 0.0)


def fp8_cast_bytes(precision: str, gpu_arch: str | None, cast: Mapping[str, float]) -> float:
    """Bytes Transformer Engine's cast of one BF16 element to FP8 moves: read it and write one byte, plus an amax
    pass over it for current (tensorwise) scaling, plus a second layout (the transposed copy TN-only Hopper GEMMs
    need for per-tensor scaling; MXFP8 and blockwise always keep rowwise and columnwise copies)."""
    recipe = precision.partition("-")[2] or "delayed"
    out = cast["read"] + cast["write"]
    if recipe == "tensorwise":
        out += cast["amax"]
    if recipe in ("mxfp8", "blockwise") or (gpu_arch or "hopper") == "hopper":
        out += cast["write"]
    return out


def arch_of(cfg: TrainingConfig, kb: Knowledge) -> Any:
    """The estimator's ``Arch`` of a config at TP 1, or None when it is incomplete (no vocabulary size, say)."""
    try:
        return arch_from_config(cfg, 1, constants(kb)["megatron-defaults"])
    except UserError:
        return None


def counts_of(cfg: TrainingConfig, kb: Knowledge) -> ModelCounts | None:
    """The counts of a config's model, or None when its architecture is incomplete."""
    arch = arch_of(cfg, kb)
    return None if arch is None else counts(arch)


def counts(arch: Any) -> ModelCounts:
    """Dense, routed-expert and active-expert parameters of an estimator ``Arch``."""
    total = total_params(arch)
    routed = sum(1 for k in arch.pattern if k in HAS_MOE) + (arch.mtp if arch.pattern[-1] in HAS_MOE else 0)
    experts = routed * moe_params(arch).expert if arch.experts else 0.0
    active_experts = experts * arch.topk / arch.experts if arch.experts else 0.0
    attn = sum(1 for k in arch.pattern if k in HAS_ATTENTION)
    width = _attention_width(arch)
    kv = width if arch.mla else arch.groups * arch.kv_channels
    moe_layers = sum(1 for k in arch.pattern if k in HAS_MOE)
    work = memory_work(arch)
    layers = [*arch.pattern, *[arch.pattern[-1]] * arch.mtp]
    embedding = embedding_params(arch)
    lookup = embedding.rep + (0.0 if arch.tied else embedding.tp)
    elements = sum(work[k][0] for k in layers) + work["output"][0] * (1 + arch.mtp)
    return ModelCounts(total - experts, experts, active_experts, attn, width, kv, len(arch.pattern), arch.hidden,
                       lookup, moe_layers, arch.topk if moe_layers else 0, arch.latent or arch.hidden,
                       BF16 * elements, sum(work[k][1] for k in layers))


def memory_work(arch: Any) -> dict[str, tuple[float, float]]:
    """Per layer kind: (elements the forward's memory-bound kernels read and write per token, elements its linears
    take in and give out per token).

    Counted from the module tree: two norms (read and write h each) and two residual adds (read 2h, write h), RoPE
    on the queries and keys (MLA: their rotary part only), the MLP activation (SwiGLU reads 2f and writes f), and
    for MoE layers the permutation of the top-k copies of each token out and back (read w, write top-k x w, and the
    reverse) with each expert's activation; "output" is the logits the output layer writes and the loss reads.  Each
    linear's input and output are what an FP8 run casts (its forward input, its backward gradient).  The output
    layer is Megatron-Core's BF16 ColumnParallelLinear, outside Transformer Engine's FP8 region, so it is not cast;
    its GEMM is timed at the run's rate all the same, because PR #3107's PP 4 -> 8 arm (0.949 measured) is
    reproduced that way (0.947) and not at the BF16 rate (0.908).
    """
    h, glu = arch.hidden, arch.glu
    act = 3 if glu else 2
    width = _attention_width(arch)
    rope = arch.heads * arch.qk_rope + arch.qk_rope if arch.mla else width + arch.groups * arch.kv_channels
    if arch.mla:
        q = (h + arch.q_lora) + (arch.q_lora + width) if arch.q_lora else h + width
        attn_io = q + (h + arch.kv_lora + arch.qk_rope) + (arch.kv_lora + arch.heads * (arch.qk_head + arch.v_head)) \
            + (arch.heads * arch.v_head + h)
    else:
        attn_io = (h + (arch.heads + 2 * arch.groups) * arch.kv_channels) + (arch.heads * arch.kv_channels + h)
    attn = (5.0 * h + 2.0 * rope, float(attn_io))
    up = 2 * arch.ffn if glu else arch.ffn
    mlp = (5.0 * h + act * arch.ffn, float((h + up) + (arch.ffn + h)))
    table = {DENSE: (attn[0] + mlp[0], attn[1] + mlp[1]), ATTN: attn, MLP: mlp, "output": (2.0 * arch.vocab, 0.0)}
    if arch.experts:
        w, f = arch.latent or h, arch.moe_ffn
        e_up, s_up = (2 * f if glu else f), (2 * arch.shared_ffn if glu else arch.shared_ffn)
        ew = 5.0 * h + (2 + 2 * arch.topk) * w + arch.topk * act * f + act * arch.shared_ffn
        io = arch.topk * ((w + e_up) + (f + w)) + ((h + s_up) + (arch.shared_ffn + h) if arch.shared_ffn else 0) \
            + (2 * (h + arch.latent) if arch.latent else 0)
        table[MOE] = (attn[0] + ew, attn[1] + io)
        table[MOE_ONLY] = (ew, float(io))
    if MAMBA in arch.pattern:
        d_inner = arch.mamba_heads * arch.mamba_head_dim
        in_out = 2 * d_inner + 2 * arch.mamba_groups * arch.mamba_state + arch.mamba_heads
        table[MAMBA] = (5.0 * h + 4.0 * d_inner, float((h + in_out) + (d_inner + h)))
    return table


def module_flops(arch: Any, seq: int) -> dict[str, float]:
    """Forward FLOPs per token of the whole model by module: 2 per weight a token passes through (routed experts:
    top-k of E, with the shared experts and the router), causal core attention 2 x seq x width per attention
    layer, the output layer.  Selective recompute replays a module's forward, so its cost follows its share."""
    layers = list(arch.pattern)
    out = dict.fromkeys(("attention", "core_attn", "mlp", "moe", "mamba", "logits"), 0.0)
    attn = 2.0 * sum(attention_params(arch))
    core = 2.0 * seq * _attention_width(arch)
    dense = 2.0 * sum(mlp_params(arch, arch.ffn))
    if arch.experts:
        m = moe_params(arch)
        moe = 2.0 * (m.tp + m.rep + m.expert * arch.topk / arch.experts)
    else:
        moe = 0.0
    for kind in layers:
        if kind in HAS_ATTENTION:
            out["attention"] += attn
            out["core_attn"] += core
        if kind in HAS_DENSE_MLP:
            out["mlp"] += dense
        if kind in HAS_MOE:
            out["moe"] += moe
        if kind == MAMBA:
            out["mamba"] += 2.0 * sum(mamba_params(arch))
    out["logits"] = 2.0 * arch.vocab * arch.hidden
    return out


def flop_share(arch: Any, seq: int, module: str) -> float:
    """The share of a step's FLOPs that ``module`` (a key of ``module_flops``) holds."""
    flops = module_flops(arch, seq)
    return flops[module] / sum(flops.values())


DISPATCH_PASSES = 4  # dispatch and combine in the forward, their gradients in the backward


def dispatch_bytes(m: ModelCounts, dispatcher: str, ep: int, etp: int, domain: int) -> tuple[float, float]:
    """(NVLink, network) bytes one GPU sends per token it holds, per MoE layer, forward and backward, by dispatcher.

    Routing is taken as balanced (every expert equally likely, as under forced balancing).  EP peers sit ETP ranks
    apart (Megatron-Core's expert rank order tp-ep-dp-pp with tp = ETP), so ``domain // etp`` of them share this
    GPU's NVLink domain.  ``alltoall`` sends each of a token's top-k copies to its expert's rank (two experts on one
    rank: two copies), and with ETP > 1 gathers what it received over the expert-TP group; the flex dispatchers
    (DeepEP, HybridEP) send a token once to each rank that holds one of its experts, over the network once to each
    other domain, forwarded over NVLink there (DeepSeek-V3 technical report, arXiv 2412.19437 sec. 3.2.2; DeepEP's
    "forwarding data from NVLink domain to RDMA domain"); ``allgather`` gathers every token of the TP x EP group to
    every rank and reduce-scatters the results, a ring whose domain-crossing hops share the domain's network links.
    """
    if ep <= 1 or not m.topk:
        return 0.0, 0.0
    token = DISPATCH_PASSES * BF16 * m.moe_width
    if dispatcher == "allgather":
        group = ep * etp
        near = min(group, domain)
        if group <= near:
            return token * (group - 1), 0.0
        # a ring over the group: each GPU passes on (group - 1) shards; the hops that leave a domain are spread
        # over the domain's network links (NCCL rings rotate which GPU crosses)
        return token * (group - 1) * (near - 1) / near, token * (group - 1) / near
    near = max(1, min(ep, domain // max(1, etp)))
    gather = token * m.topk * (etp - 1)  # with ETP > 1 the received copies are gathered over the expert-TP group
    if dispatcher == "flex":
        hit = 1 - (1 - 1 / ep) ** m.topk  # the chance one EP rank holds one of a token's experts
        domains = ep / near
        reached = (domains - 1) * (1 - (1 - 1 / domains) ** m.topk)  # other domains one token's experts fall in
        # once to each rank it reaches (not once per expert): directly in this domain, forwarded by the GPU it
        # lands on in each other domain
        return token * hit * ((near - 1) + (ep - near) * (near - 1) / near) + gather, token * reached
    return token * m.topk * (near - 1) / ep + gather, token * m.topk * (ep - near) / ep


def workload(cfg: TrainingConfig) -> dict[str, Any]:
    """What ``traffic`` reads of a run besides its layout: the MoE dispatcher (Megatron-Core's default allgather
    when unset), whether the base weights are frozen (a PEFT run), and the gradient buffers' element size (bf16
    with grad_reduce_in_fp32 off, as the estimator reads it, else fp32)."""
    half = cfg.grad_reduce_in_fp32 is False or (cfg.grad_reduce_in_fp32 is None and bool(cfg.fp16))
    return {"dispatcher": str(cfg.moe_token_dispatcher_type or "allgather").lower(), "frozen": bool(cfg.peft),
            "grad_bytes": BF16 if half else FP32}


def traffic(m: ModelCounts, hw: Hardware, *, tp: int, pp: int, cp: int, ep: int, etp: int, dp: int,
            mbs: int, seq: int, microbatches: int, gpus_per_domain: int, dispatcher: str, frozen: bool,
            grad_bytes: int) -> Traffic:
    """Compute seconds and bytes of one layout on one GPU (``dispatcher``, ``frozen``, ``grad_bytes``: ``workload``).

    The distributed optimizer and Megatron FSDP shard the dense parameters over the data-parallel group with
    context parallelism (DP x CP ranks hold the same weights) and the routed experts over the expert-data-parallel
    group (TP x CP x DP / (EP x ETP)), as the estimator does.  Megatron's default rank order (tp-cp-ep-dp-pp) puts
    those peers TP (ETP x EP) ranks apart: a group stays on NVLink while TP x CP x DP fits one NVLink domain, and
    beyond it a ring's domain-crossing hops share the network links of the group's members in each domain.
    ``frozen``: the base weights take no weight gradients (LoRA), so each computes 4 FLOPs per token, not 6.
    """
    dense, experts = m.dense / (tp * pp), m.experts / (ep * etp * pp)
    group, expert_group = dp * cp, max(1, tp * cp * dp // (ep * etp))
    spans = tp * cp * dp > gpus_per_domain

    def link(stride: int) -> float:  # bytes/s a member of a group with this rank stride moves
        return hw.network * max(1, gpus_per_domain // stride) if spans else hw.nvlink

    param_seconds = dense * (group - 1) / group / link(tp) + experts * (expert_group - 1) / expert_group \
        / link(ep * etp)
    # a TP rank's experts see its 1/TP of the tokens gathered over the ETP group and compute 1/ETP of each expert:
    # 1/TP of the routed work whatever ETP is (ETP 1 with TP 2 does not double it); embedding rows are looked up
    active = (m.dense - m.lookup) / (tp * pp) + m.experts_active / (tp * pp)
    per_weight = 4.0 if frozen else 6.0
    tokens = mbs * seq / cp
    attention = tokens * _attention_flops(seq, m.attention_width) / tp  # one attention layer, this GPU's share
    bf16 = hw.attention or hw.flops
    attention_seconds = attention / bf16  # flash attention runs in BF16 in FP8 runs too
    memory = tokens / (tp * pp) * (hw.passes * m.elementwise + hw.cast_bytes * m.cast_elements)
    # every weight a GPU computes with is read per micro-batch and its gradient accumulated, whatever the tokens:
    # what makes a GPU holding many small experts, or a small micro-batch, slower per FLOP
    held = (m.dense - m.lookup) / (tp * pp) + experts
    memory += held * (hw.weight_bytes + (0.0 if frozen else hw.grad_passes * grad_bytes))
    attention_layers = m.attention_layers / pp
    flop_seconds = (tokens * per_weight * active + attention * attention_layers) / hw.flops
    mb_seconds = tokens * per_weight * active / hw.flops + attention_seconds * attention_layers \
        + (memory / hw.hbm if hw.hbm else 0.0)
    # Korthikanti et al. 2022: a transformer layer saves about 34 bytes per token per hidden unit (flash
    # attention, bf16), split over TP with sequence parallelism
    layer_bytes = 34.0 * tokens * m.hidden / tp
    layer_seconds = mb_seconds * pp / max(1, m.num_layers)
    tp_unit = BF16 * tokens * m.hidden * (tp - 1) / tp / hw.nvlink
    ring = hw.nvlink if tp * cp <= gpus_per_domain else hw.network
    kv = (cp - 1) * tokens * 2 * m.kv_width / tp * BF16 / ring  # K and V, bf16, to each of the other ranks
    near, far = dispatch_bytes(m, dispatcher, ep, etp, gpus_per_domain)
    # each GPU dispatches the tokens it holds after sequence parallelism; both links run at once
    dispatch = tokens / tp * max(near / hw.nvlink, far / hw.network)
    return Traffic(mb_seconds, flop_seconds, microbatches, param_seconds, 0 if frozen else grad_bytes, frozen,
                   (layer_bytes / hw.host) / layer_seconds, layer_seconds, tp_unit, kv, attention_seconds, dispatch,
                   m.moe_layers / pp)


def eager_share(cfg: TrainingConfig, moe: bool) -> float:
    """Share of a decoder layer's host work that still launches kernel by kernel under the run's CUDA graphs.

    A dense layer has two capturable modules (attn, mlp), a MoE layer four (attn, moe_router, moe_preprocess and
    the experts with their dispatch, captured only as "moe" with drop-and-pad); full_iteration, or a per-layer
    graph with an empty / "full" scope, captures everything.
    """
    impl = (cfg.cuda_graph_impl or "none").lower()
    names = graph_scope_names(cfg)
    if impl in ("none", "") and "full_iteration" not in names:
        return 1.0
    if impl == "full_iteration" or "full_iteration" in names or not (names - {"full"}):
        return 0.0
    modules = ("attn", "moe_router", "moe_preprocess", "moe") if moe else ("attn", "mlp")
    captured = {n for n in names if n in modules}
    if moe and cfg.moe_pad_expert_input_to_capacity is not True:
        captured.discard("moe")
    return 1.0 - len(captured) / len(modules)


def precision_of(cfg: TrainingConfig) -> str:
    """What decides the GEMM speed and the casts: "bf16", or "fp8-<recipe>" (Megatron-Core's default delayed)."""
    return f"fp8-{(cfg.fp8_recipe or 'delayed').lower()}" if cfg.fp8 else "bf16"


@dataclass(frozen=True)
class StageLoad:
    """What a stage's time reads of a layout besides its layers: for the weights each GPU reads and accumulates once
    per micro-batch, the tokens a micro-batch has on a GPU and the shards its weights are split into."""

    tokens: float  # micro-batch tokens on one GPU: MBS x seq / CP
    tp: int
    expert_shards: int  # EP x ETP
    frozen: bool
    grad_bytes: int


def layer_work(arch: Any, seq: int, moe_stretch: float = 1.0, hw: Hardware | None = None,
               load: StageLoad | None = None) -> dict[str, float]:
    """Time per token (forward + backward) of each decoder-layer kind, in FLOPs at the GEMM rate, plus "output" (the
    logits GEMM and the loss) and "mtp" (one multi-token-prediction block with its own logits), as ``traffic`` times
    a micro-batch.  With the run's speeds (``hw``) the core attention counts at the BF16 rate and the memory-bound
    kernels at the memory bandwidth; with the layout (``load``) each weight's reads and
    gradient accumulation per micro-batch count too, and a frozen base's 4 FLOPs per weight.  ``moe_stretch`` is a
    MoE layer's time over its compute time (the token dispatch it waits for, costs.dispatch_stretch), so that a
    stage's work is its time."""
    frozen = bool(load and load.frozen)
    per_weight = 4.0 if frozen else 6.0
    attention = _attention_flops(seq, _attention_width(arch))
    bf16 = hw.flops / hw.attention if hw is not None and hw.attention else 1.0  # the GEMM rate over the BF16 rate
    memory = memory_work(arch) if hw is not None and hw.hbm else {}

    def moved(kind: str, dense_weights: float, expert_weights: float = 0.0) -> float:
        """A token's memory-bound bytes in this kind of layer, as FLOPs at the GEMM rate (whole-layer units: the
        other terms are the layer's, which TP splits)."""
        if kind not in memory:
            return 0.0
        per_token = hw.passes * BF16 * memory[kind][0] + hw.cast_bytes * memory[kind][1]
        if load is not None and load.tokens:
            held = dense_weights / load.tp + expert_weights / load.expert_shards
            per_token += held * (hw.weight_bytes + (0.0 if frozen else hw.grad_passes * load.grad_bytes)) \
                / load.tokens * load.tp
        return per_token * hw.flops / hw.hbm

    out: dict[str, float] = {}
    for kind, c in kind_params(arch).items():
        active = c.tp + c.rep + (c.expert * arch.topk / arch.experts if arch.experts else 0.0)
        out[kind] = (per_weight * active + (attention * bf16 if kind in HAS_ATTENTION else 0.0)
                     + moved(kind, c.tp + c.rep, c.expert)) * (moe_stretch if kind in HAS_MOE else 1.0)
    weights = arch.vocab * arch.hidden
    out["output"] = per_weight * weights + moved("output", weights)  # at the run's GEMM rate: see memory_work
    if arch.mtp:
        last = out[arch.pattern[-1]]
        out["mtp"] = last + per_weight * (sum(mtp_params(arch)) - sum(kind_params(arch)[arch.pattern[-1]])) \
            + out["output"]
    return out


def stage_balance(arch: Any, cfg: TrainingConfig, pp: int, vpp: int, seq: int,
                  layout: str | None = None, moe_stretch: float = 1.0, hw: Hardware | None = None,
                  load: StageLoad | None = None) -> float:
    """Mean over the most loaded pipeline stage's work (1.0 = balanced; None-safe: 1.0 when PP is 1).

    The slowest stage sets the pace of a pipeline; the output layer and MTP blocks sit on the last stage, so an
    even split of decoder layers leaves that stage the heaviest unless account_for_loss_in_pipeline_split or a
    pipeline layout gives it fewer layers.  A MoE layer that waits for its token dispatch (``moe_stretch``) weighs
    more against the output layer, which dispatches nothing.
    """
    if pp <= 1:
        return 1.0
    try:
        placed = place(arch.pattern, pp, vpp, cfg.num_layers_in_first_pipeline_stage,
                       cfg.num_layers_in_last_pipeline_stage, bool(cfg.account_for_embedding_in_pipeline_split),
                       bool(cfg.account_for_loss_in_pipeline_split), layout or cfg.pipeline_model_parallel_layout,
                       cfg.hybrid_layer_pattern, arch.mtp)
    except UserError:
        return 1.0
    work = layer_work(arch, seq, moe_stretch, hw, load)
    loads = [sum(sum(work[k] for k in ch.kinds) + (work["output"] if ch.loss else 0.0)
                 + ch.mtp * work.get("mtp", 0.0) for ch in stage) for stage in placed.stages]
    return (sum(loads) / len(loads)) / max(loads) if max(loads) > 0 else 1.0


def balanced_layout(layers: int, mtp: int, chunks: int) -> str | None:
    """A ``pipeline_model_parallel_layout`` over ``chunks`` model chunks (PP x VPP) with equal slots per chunk,
    the embedding, the loss and each MTP block counted as one decoder layer, or None when the slots do not
    divide.  For DeepSeek-V3 (61 layers, one MTP block) on 32 chunks it is the Bridge recipe's "Et|(tt|)*30mL".
    """
    if chunks < 2:
        return None
    slots = layers + 2 + mtp
    per, rest = divmod(slots, chunks)
    first, last = per - 1, per - 1 - mtp
    if rest or first < 0 or last < 0:
        return None
    middle = f"({'t' * per}|)*{chunks - 2}" if chunks > 2 else ""
    return f"E{'t' * first}|{middle}{'t' * last}{'m' * mtp}L"
