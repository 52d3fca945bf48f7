"""Bytes each decoder layer keeps for its backward pass, per micro-batch, per GPU.

The model names every tensor Megatron-Core's TE layers save (the Korthikanti
et al. 2022 Table 2 terms, generalised to GQA, SwiGLU, MoE, MLA and Mamba),
instead of one "34 s b h" constant, so each knob changes exactly the tensors
it changes:

* sequence parallelism divides the residual-stream tensors (norm inputs and
  outputs, dropout masks) by TP; TP alone divides only what lives inside
  attention and the MLP;
* FP8 stores the inputs a linear layer saves for its weight gradient in one
  byte (``lin``); the attention inputs/outputs and the SwiGLU input stay bf16;
* flash / cuDNN fused attention keeps no ``s x s`` score matrix; the unfused
  path keeps softmax output, dropout mask and dropout output per head;
* selective recompute drops what each ``recompute_modules`` entry recomputes
  (``core_attn``, ``layernorm`` where the norm is a separate module, ``mlp``,
  ``moe``, ``moe_act``, ``shared_experts``, ``mla_up_proj``);
* LoRA with a frozen base keeps no weight-gradient inputs for the base layers,
  but its adapters keep theirs; with SP the LoRA-A inputs of ``linear_qkv`` and
  ``linear_fc1`` are the all-gathered norm output unless
  ``sequence_parallel_input_regather`` keeps only the local shard.

Uncertain factors (RoPE copies, router tensors, backward temporaries, ...) are
named constants in knowledge/estimator.yaml, fitted only on the public cases.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .params import HAS_ATTENTION, HAS_DENSE_MLP, HAS_MOE, MAMBA, Arch


@dataclass(frozen=True)
class ActContext:
    """Everything the per-layer activation terms depend on, resolved once per estimate.

    Hashable, so ``layer_activations`` is computed once per (architecture, context): candidates that differ
    only in model state, full recompute or layer offload share it.
    """

    tokens: float  # sequence positions of one micro-batch on this CP rank (seq * mbs / cp)
    mbs: int
    seq: int
    cp: int
    tp: int
    seq_shard: int  # TP when sequence parallelism splits the residual stream, else 1
    etp: int
    elem: float  # bytes of one activation element (bf16/fp16: 2)
    lin: float  # bytes of a saved linear-layer input (1 with FP8)
    hidden_dropout: bool
    attention_dropout: bool
    flash: bool
    recompute: frozenset[str]
    lora: bool
    lora_rank: int
    lora_targets: frozenset[str]
    regather: bool
    rope_copies: float
    router_tensors: float
    unpermute_copies: float
    imbalance: float
    lora_input_copies: float
    stats_bytes: float
    scan_chunk: int  # Mamba SSD chunk length (megatron-defaults mamba_chunk_size)
    offload: tuple[tuple[str, float], ...] = ()  # fine-grained offload: (module, fraction moved) pairs
    graphed: frozenset[str] = frozenset()  # modules captured in per-layer CUDA graphs: attn, mlp, moe, mamba

    def kept(self, module: str, value: float) -> float:
        """``value`` less the share fine-grained activation offloading moves to host memory."""
        return value * (1.0 - dict(self.offload).get(module, 0.0))

    def offloads(self, module: str) -> bool:
        return any(name == module for name, _ in self.offload)


@dataclass(frozen=True)
class LayerActivations:
    """Per micro-batch: what one layer keeps, what it would keep with no recompute, its largest tensor."""

    saved: float
    full: float
    largest: float
    pooled: float = 0.0  # of ``saved``: what captured modules keep in the CUDA-graph pool (reserved, not allocated)


def _lora_norm_out(a: Arch, c: ActContext) -> float:
    """Norm output a LoRA-wrapped column-parallel layer keeps for LoRA-A: with SP, copies of the all-gathered
    output (the local shard with ``sequence_parallel_input_regather``); without SP, the one output itself."""
    full = c.tokens * a.hidden
    if c.seq_shard == 1:
        return c.elem * full
    return c.elem * c.lora_input_copies * (full / c.seq_shard if c.regather else full)


def _attention(a: Arch, c: ActContext, keep: bool) -> tuple[float, float, float]:
    """(saved, full, largest) of the attention half incl. its input norm; ``keep`` False = recompute core_attn."""
    t, e, lin, tok = c.tp, c.elem, c.lin, c.tokens
    resid = tok * a.hidden / c.seq_shard
    heads = a.heads / t
    lora_q = c.lora and "linear_qkv" in c.lora_targets
    lora_p = c.lora and "linear_proj" in c.lora_targets
    norm_in = e * resid
    if c.lora:
        # frozen base: no weight-gradient input; the LoRA-A input is the (gathered) norm output
        norm_out = _lora_norm_out(a, c) if lora_q else 0.0
    else:
        norm_out = lin * resid
    if a.mla:
        dn, dr, dv = a.qk_head, a.qk_rope, a.v_head
        down = e * tok * (a.q_lora + a.kv_lora + dr) / c.seq_shard + lin * tok * (a.q_lora + a.kv_lora) / c.seq_shard
        up = e * tok * heads * ((dn + dr) + (dn + dv))
        qkv = e * tok * heads * (2 * (dn + dr) + dv)
        out_dim = heads * dv
        if "mla_up_proj" in c.recompute:
            up = qkv = 0.0
        qkv_total = down + up + qkv
        largest = e * tok * heads * (dn + dr) * 2
    else:
        d = a.kv_channels
        kv_heads = max(a.groups / t, 1.0)
        qkv_total = e * tok * (heads + 2 * kv_heads) * d
        if a.rope:
            qkv_total += c.rope_copies * e * tok * (heads + kv_heads) * d
        out_dim = heads * d
        largest = qkv_total
    out = e * tok * out_dim
    if lin != e and not c.lora:
        out += lin * tok * out_dim  # FP8 copy the output projection saves for its weight gradient
    if lora_p:
        out += e * tok * c.lora_rank
    if lora_q:
        qkv_total += e * tok * c.lora_rank
    if c.flash:
        core = c.stats_bytes * tok * heads
    else:
        scores = c.mbs * heads * (c.seq / c.cp) * c.seq
        core = scores * (e + ((1 + e) if c.attention_dropout else 0))
        largest = max(largest, e * scores)
    mask = resid if c.hidden_dropout else 0.0
    full = norm_in + norm_out + qkv_total + core + out + mask
    saved = (c.kept("attn_norm", norm_in) + c.kept("qkv_linear", norm_out) + c.kept("core_attn", qkv_total)
             + (c.kept("core_attn", core) if keep else 0.0) + c.kept("attn_proj", out) + mask)
    return saved, full, largest


def _dense_mlp(a: Arch, c: ActContext, ffn: int) -> tuple[float, float, float, float]:
    """(saved, full, largest, checkpoint input) of a dense MLP with its fused pre-norm."""
    t, e, lin, tok = c.tp, c.elem, c.lin, c.tokens
    resid = tok * a.hidden / c.seq_shard
    up = 2 * ffn if a.glu else ffn
    lora_1 = c.lora and "linear_fc1" in c.lora_targets
    lora_2 = c.lora and "linear_fc2" in c.lora_targets
    norm_in = e * resid
    if c.lora:
        norm_out = _lora_norm_out(a, c) if lora_1 else 0.0
        act_out = e * tok * ffn / t if lora_2 else 0.0
    else:
        norm_out = lin * resid
        act_out = lin * tok * ffn / t
    fc1_out = e * tok * up / t
    adapters = e * tok * c.lora_rank * (int(lora_1) + int(lora_2))
    mask = resid if c.hidden_dropout else 0.0
    full = norm_in + norm_out + fc1_out + act_out + adapters + mask
    return full - norm_in + c.kept("mlp_norm", norm_in), full, fc1_out, e * resid


def _moe(a: Arch, c: ActContext) -> tuple[float, float, float]:
    """(saved, full, largest) of a MoE block with its separate pre-norm."""
    e, lin, tok = c.elem, c.lin, c.tokens
    local = tok / c.seq_shard
    resid = local * a.hidden
    norm_in = e * resid
    norm_out = 0.0 if "layernorm" in c.recompute else e * resid
    router = c.router_tensors * 4 * local * a.experts
    routed = local * a.topk * c.etp * c.imbalance
    width = a.latent or a.hidden
    up = 2 * a.moe_ffn if a.glu else a.moe_ffn
    fc1_in = lin * routed * width
    fc1_out = e * routed * up / c.etp
    act_out = lin * routed * a.moe_ffn / c.etp
    unpermute = c.unpermute_copies * e * routed * width
    experts = fc1_in + fc1_out + act_out + unpermute
    shared = 0.0
    if a.shared_ffn:
        s_up = 2 * a.shared_ffn if a.glu else a.shared_ffn
        shared = e * tok * s_up / c.tp + lin * tok * a.shared_ffn / c.tp
    mask = resid if c.hidden_dropout else 0.0
    full = norm_in + e * resid + router + experts + shared + mask
    norm_in = c.kept("mlp_norm", norm_in)
    if "moe" in c.recompute:
        saved = norm_in + norm_out + mask
    else:
        act_kept = 0.0 if "moe_act" in c.recompute else c.kept("moe_act", act_out)
        experts = c.kept("expert_fc1", fc1_in) + fc1_out + act_kept + unpermute
        if c.offloads("fused_group_mlp"):
            experts = c.kept("fused_group_mlp", experts)
        if "shared_experts" in c.recompute:
            shared = 0.0
        saved = norm_in + norm_out + router + experts + shared + mask
    return saved, full, max(fc1_out, fc1_in)


def _mamba(a: Arch, c: ActContext) -> tuple[float, float, float]:
    t, e, lin, tok = c.tp, c.elem, c.lin, c.tokens
    resid = tok * a.hidden / c.seq_shard
    d_inner = a.mamba_heads * a.mamba_head_dim
    bc = 2 * a.mamba_groups * a.mamba_state
    in_proj = e * tok * (2 * d_inner + bc + a.mamba_heads) / t
    conv = e * tok * (d_inner + bc) / t
    states = c.stats_bytes * (tok / c.scan_chunk) * a.mamba_heads * a.mamba_head_dim * a.mamba_state / t
    scan = e * tok * 2 * d_inner / t + states
    out_in = lin * tok * d_inner / t
    full = e * resid + lin * resid + in_proj + conv + scan + out_in
    return full, full, in_proj


@lru_cache(maxsize=4096)
def layer_activations(a: Arch, c: ActContext) -> dict[str, LayerActivations]:
    """Per-kind activation bytes for every layer kind the model (and its MTP blocks) uses (cached: do not
    mutate the answer)."""
    keep_core = "core_attn" not in c.recompute
    out: dict[str, LayerActivations] = {}
    for kind in set(a.pattern) | ({a.pattern[-1]} if a.mtp else set()):
        saved = full = largest = pooled = 0.0
        if kind in HAS_ATTENTION:
            s, f, big = _attention(a, c, keep_core)
            saved, full, largest = saved + s, full + f, max(largest, big)
            pooled += s if "attn" in c.graphed else 0.0
        if kind in HAS_DENSE_MLP:
            s, f, big, ckpt = _dense_mlp(a, c, a.ffn)
            if "mlp" in c.recompute:
                s = ckpt + (c.tokens * a.hidden / c.seq_shard if c.hidden_dropout else 0.0)
            saved, full, largest = saved + s, full + f, max(largest, big)
            pooled += s if "mlp" in c.graphed else 0.0
        if kind in HAS_MOE:
            s, f, big = _moe(a, c)
            saved, full, largest = saved + s, full + f, max(largest, big)
            pooled += s if "moe" in c.graphed else 0.0
        if kind == MAMBA:
            saved, full, largest = _mamba(a, c)
            pooled = saved if "mamba" in c.graphed else 0.0
        out[kind] = LayerActivations(saved, full, largest, pooled)
    return out


def checkpoint_input(a: Arch, c: ActContext) -> float:
    """What a fully recomputed layer group keeps: its input hidden state."""
    return c.elem * c.tokens * a.hidden / c.seq_shard

