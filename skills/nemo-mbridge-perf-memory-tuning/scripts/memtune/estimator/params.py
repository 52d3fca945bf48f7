"""Model architecture normalised from a TrainingConfig, and parameter counts per layer kind.

Counts follow the Megatron-Core module tree (TE spec), not a paper formula:
fused QKV with GQA and ``kv_channels``, SwiGLU doubling fc1, RMSNorm (1 vector)
vs LayerNorm (weight + bias), biases only when ``add_bias_linear`` /
``add_qkv_bias``, ``qk_layernorm``, the MoE router, routed and shared experts,
multi-latent attention, Mamba mixers of hybrid models, MTP blocks, learned
position embeddings and tied/untied output layers.  Each count is split into
the part Tensor Parallelism shards, the part every TP rank replicates, and the
routed-expert part that Expert (and Expert-Tensor) Parallelism shards, because
the three are divided by different group sizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from ..errors import UserError
from ..facts import TrainingConfig

# Layer kinds: one letter each, so a whole model is a short string.
DENSE = "T"  # attention + dense MLP
MOE = "S"  # attention + MoE (sparse) MLP
MAMBA = "M"  # Mamba mixer (hybrid models)
ATTN = "A"  # attention only (hybrid "*")
MLP = "F"  # dense MLP only (hybrid "-")
MOE_ONLY = "E"  # MoE only (hybrid "E")
HYBRID_SYMBOLS = {"M": MAMBA, "*": ATTN, "-": MLP, "E": MOE_ONLY}
HAS_ATTENTION = frozenset({DENSE, MOE, ATTN})
HAS_DENSE_MLP = frozenset({DENSE, MLP})
HAS_MOE = frozenset({MOE, MOE_ONLY})
GATED_ACTIVATIONS = frozenset({"silu", "swiglu", "geglu", "quick_gelu"})


class Counts(NamedTuple):
    """Parameters of one module: TP-sharded, TP-replicated, routed-expert (all experts, unsharded)."""

    tp: float = 0.0
    rep: float = 0.0
    expert: float = 0.0

    def __add__(self, other: Any) -> Counts:  # type: ignore[override]
        return Counts(self.tp + other[0], self.rep + other[1], self.expert + other[2])

    def scale(self, k: float) -> Counts:
        return Counts(self.tp * k, self.rep * k, self.expert * k)


@dataclass(frozen=True)
class Arch:
    """Architecture numbers with every Megatron default resolved."""

    num_layers: int
    hidden: int
    ffn: int
    heads: int
    groups: int
    kv_channels: int
    vocab: int  # padded vocabulary the embedding table really has
    glu: bool
    norm_params: int  # 1 for RMSNorm, 2 for LayerNorm (weight + bias)
    bias: bool
    qkv_bias: bool
    qk_norm: bool
    learned_positions: int  # rows of a learned absolute position table (0 with RoPE)
    rope: bool
    tied: bool
    experts: int
    topk: int
    moe_ffn: int
    shared_ffn: int
    latent: int
    mla: bool
    q_lora: int
    kv_lora: int
    qk_head: int
    qk_rope: int
    v_head: int
    mamba_heads: int
    mamba_head_dim: int
    mamba_state: int
    mamba_groups: int
    mtp: int
    mamba_kernel: int
    pattern: str  # one kind letter per decoder layer


def _int(value: Any, default: int) -> int:
    return int(value) if value else default


def padded_vocab(cfg: TrainingConfig, tp: int, *, pad_default: bool, multiple_default: int) -> int:
    """Vocabulary rows of the embedding: an explicit padded size wins, else Megatron's padding rule."""
    if cfg.padded_vocab_size:
        return int(cfg.padded_vocab_size)
    if not cfg.vocab_size:
        raise UserError("config: vocab_size is not set (give --model, --hf-config or --set vocab_size=N)")
    pad = cfg.should_pad_vocab if cfg.should_pad_vocab is not None else pad_default
    vocab = int(cfg.vocab_size)
    if not pad:
        return vocab
    multiple = _int(cfg.make_vocab_size_divisible_by, multiple_default) * tp
    return int(math.ceil(vocab / multiple) * multiple)


def is_glu(cfg: TrainingConfig) -> bool:
    if cfg.gated_linear_unit is not None:
        return bool(cfg.gated_linear_unit)
    return (cfg.activation_func or "").lower() in {"swiglu", "geglu"}


@lru_cache(maxsize=256)
def layer_pattern(num_layers: int, experts: int, freq: Any, hybrid: str | None) -> str:
    """Kind of every decoder layer: from the hybrid pattern, or dense/MoE from ``moe_layer_freq``."""
    if hybrid:
        chars = [c for c in hybrid if c not in "|/ "]
        unknown = sorted({c for c in chars if c not in HYBRID_SYMBOLS})
        if unknown:
            raise UserError(f"config: hybrid_layer_pattern has unknown symbols {unknown} (use M * - E)")
        return "".join(HYBRID_SYMBOLS[c] for c in chars)
    if not experts:
        return DENSE * num_layers
    if freq is None or freq == 1:
        return MOE * num_layers
    if isinstance(freq, int):
        return "".join(MOE if i % freq == 0 else DENSE for i in range(num_layers))
    values = list(freq)
    if len(values) != num_layers:
        raise UserError(f"config: moe_layer_freq has {len(values)} entries, num_layers is {num_layers}")
    return "".join(MOE if v else DENSE for v in values)


def _freq_key(freq: Any) -> Any:
    if isinstance(freq, str):
        return _parse_freq(freq)
    if isinstance(freq, list):
        return tuple(freq)
    return freq


def _parse_freq(text: str) -> Any:
    """Megatron-LM accepts ``moe_layer_freq`` as a Python expression such as ``([0]*3+[1]*58)``."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    total: list[int] = []
    for part in text.strip("()").split("+"):
        part = part.strip()
        if "*" in part:
            items, times = part.rsplit("*", 1)
            values = [int(x) for x in items.strip("[] ").split(",") if x.strip()]
            total += values * int(times)
        else:
            total += [int(x) for x in part.strip("[] ").split(",") if x.strip()]
    if not total:
        raise UserError(f"config: cannot read moe_layer_freq {text!r}")
    return tuple(total)


def arch_from_config(cfg: TrainingConfig, tp: int, defaults: Mapping[str, Any]) -> Arch:
    """Resolve defaults the way Megatron-Core's TransformerConfig does (``defaults``: the estimator constants'
    ``megatron-defaults``)."""
    d = defaults
    if not cfg.hidden_size or not cfg.num_attention_heads:
        raise UserError("config: hidden_size and num_attention_heads are required (give --model or --hf-config)")
    hidden = int(cfg.hidden_size)
    heads = int(cfg.num_attention_heads)
    hybrid = cfg.hybrid_layer_pattern
    experts = _int(cfg.num_moe_experts, 0)
    num_layers = _int(cfg.num_layers, 0)
    pattern = layer_pattern(num_layers, experts, _freq_key(cfg.moe_layer_freq), hybrid)
    if not pattern:
        raise UserError("config: num_layers is not set")
    glu = is_glu(cfg)
    ffn = _int(cfg.ffn_hidden_size, 4 * hidden)
    pos = (cfg.position_embedding_type or "learned_absolute").lower()
    norm = (cfg.normalization or "LayerNorm").lower()
    return Arch(
        num_layers=len(pattern),
        hidden=hidden,
        ffn=ffn,
        heads=heads,
        groups=_int(cfg.num_query_groups, heads),
        kv_channels=_int(cfg.kv_channels, hidden // heads),
        vocab=padded_vocab(cfg, tp, pad_default=cfg.source == "megatron-args",
                           multiple_default=int(d["make_vocab_size_divisible_by"])),
        glu=glu,
        norm_params=1 if norm == "rmsnorm" else 2,
        bias=bool(cfg.add_bias_linear) if cfg.add_bias_linear is not None else True,
        qkv_bias=bool(cfg.add_qkv_bias),
        qk_norm=bool(cfg.qk_layernorm),
        learned_positions=_int(cfg.max_position_embeddings, _int(cfg.seq_length, 0))
        if pos == "learned_absolute" else 0,
        rope=pos in {"rope", "yarn", "mrope"},
        tied=cfg.share_embeddings_and_output_weights if cfg.share_embeddings_and_output_weights is not None
        else True,
        experts=experts,
        topk=_int(cfg.moe_router_topk, d["moe_router_topk"]),
        moe_ffn=_int(cfg.moe_ffn_hidden_size, ffn),
        shared_ffn=_int(cfg.moe_shared_expert_intermediate_size, 0),
        latent=_int(cfg.moe_latent_size, 0),
        mla=bool(cfg.multi_latent_attention),
        q_lora=_int(cfg.q_lora_rank, 0),
        kv_lora=_int(cfg.kv_lora_rank, d["kv_lora_rank"]),
        qk_head=_int(cfg.qk_head_dim, d["qk_head_dim"]),
        qk_rope=_int(cfg.qk_pos_emb_head_dim, d["qk_pos_emb_head_dim"]),
        v_head=_int(cfg.v_head_dim, d["v_head_dim"]),
        mamba_heads=_int(cfg.mamba_num_heads,
                         d["mamba_expand"] * hidden // _int(cfg.mamba_head_dim, d["mamba_head_dim"])),
        mamba_head_dim=_int(cfg.mamba_head_dim, d["mamba_head_dim"]),
        mamba_state=_int(cfg.mamba_state_dim, d["mamba_state_dim"]),
        mamba_groups=_int(cfg.mamba_num_groups, d["mamba_num_groups"]),
        mtp=_int(cfg.mtp_num_layers, 0),
        mamba_kernel=int(d["mamba_conv_kernel"]),
        pattern=pattern,
    )


# --- counts per module ---------------------------------------------------------------------------------


def attention_params(a: Arch) -> Counts:
    h, n = a.hidden, a.norm_params
    if a.mla:
        q_dim = a.heads * (a.qk_head + a.qk_rope)
        if a.q_lora:
            q_tp, q_rep = a.q_lora * q_dim, h * a.q_lora + a.q_lora
        else:
            q_tp, q_rep = h * q_dim, 0
        tp = q_tp + a.kv_lora * a.heads * (a.qk_head + a.v_head) + a.heads * a.v_head * h
        rep = q_rep + h * (a.kv_lora + a.qk_rope) + a.kv_lora + h * n + (h if a.bias else 0)
        return Counts(tp, rep)
    qkv = (a.heads + 2 * a.groups) * a.kv_channels
    tp = h * qkv + a.heads * a.kv_channels * h + (qkv if a.bias or a.qkv_bias else 0)
    rep = h * n + (h if a.bias else 0) + (2 * a.kv_channels * n if a.qk_norm else 0)
    return Counts(tp, rep)


def mlp_params(a: Arch, ffn: int) -> Counts:
    h = a.hidden
    up = 2 * ffn if a.glu else ffn
    return Counts(h * up + ffn * h + (up if a.bias else 0), h * a.norm_params + (h if a.bias else 0))


def moe_params(a: Arch) -> Counts:
    h = a.hidden
    up = 2 * a.moe_ffn if a.glu else a.moe_ffn
    width = a.latent or h
    expert = a.experts * (width * up + a.moe_ffn * width + ((up + width) if a.bias else 0))
    shared = 0.0
    if a.shared_ffn:
        s_up = 2 * a.shared_ffn if a.glu else a.shared_ffn
        shared = h * s_up + a.shared_ffn * h
    latent = 2 * h * a.latent if a.latent else 0
    return Counts(shared, h * a.norm_params + a.experts * h + latent, expert)


def mamba_params(a: Arch) -> Counts:
    h = a.hidden
    d_inner = a.mamba_heads * a.mamba_head_dim
    xbc = d_inner + 2 * a.mamba_groups * a.mamba_state
    in_proj = h * (2 * d_inner + 2 * a.mamba_groups * a.mamba_state + a.mamba_heads)
    conv = xbc * a.mamba_kernel + xbc  # depthwise convolution kernel plus bias
    tp = in_proj + conv + 3 * a.mamba_heads + d_inner + d_inner * h
    return Counts(tp, h * a.norm_params)


@lru_cache(maxsize=1024)
def kind_params(a: Arch) -> dict[str, Counts]:
    """Parameters of one decoder layer of each kind present in the model."""
    attn = attention_params(a)
    dense = mlp_params(a, a.ffn)
    moe = moe_params(a) if a.experts else Counts()
    table = {DENSE: attn + dense, MOE: attn + moe, MAMBA: mamba_params(a), ATTN: attn, MLP: dense, MOE_ONLY: moe}
    return {k: table[k] for k in set(a.pattern) | ({_last_kind(a)} if a.mtp else set())}


def _last_kind(a: Arch) -> str:
    return a.pattern[-1]


def mtp_params(a: Arch) -> Counts:
    """One multi-token-prediction block: two norms, the 2h->h projection, one decoder layer, a final norm."""
    h = a.hidden
    return Counts(2 * h * h, 3 * h * a.norm_params) + kind_params(a)[_last_kind(a)]


def embedding_params(a: Arch) -> Counts:
    return Counts(a.vocab * a.hidden, a.learned_positions * a.hidden)


def output_params(a: Arch) -> Counts:
    """Output layer on the last stage: a copy of the embedding when tied (PP>1), its own weight when untied."""
    return Counts(a.vocab * a.hidden, 0)


def final_norm_params(a: Arch) -> Counts:
    return Counts(0, a.hidden * a.norm_params)


@lru_cache(maxsize=1024)
def total_params(a: Arch) -> float:
    kinds = kind_params(a)
    total = sum(sum(kinds[k]) for k in a.pattern)
    total += sum(embedding_params(a)) + sum(final_norm_params(a)) + a.mtp * sum(mtp_params(a))
    if not a.tied:
        total += sum(output_params(a))
    return float(total)


def active_params(a: Arch) -> float:
    """Parameters touched per token (routed experts counted top-k of E), for reporting."""
    if not a.experts:
        return total_params(a)
    per_expert = moe_params(a).expert / a.experts
    routed = sum(1 for k in a.pattern if k in HAS_MOE)
    return total_params(a) - routed * per_expert * (a.experts - a.topk)


def lora_adapter_params(a: Arch, kind: str, rank: int, targets: tuple[str, ...]) -> Counts:
    """LoRA A and B matrices of one layer: rank x (in + out) per targeted linear, sharded like its base layer
    (per expert for routed experts)."""
    h, d = a.hidden, a.kv_channels
    dense: dict[str, tuple[int, int]] = {}
    if kind in HAS_ATTENTION:
        dense["linear_qkv"] = (h, (a.heads + 2 * a.groups) * d)
        dense["linear_proj"] = (a.heads * d, h)
    if kind in HAS_DENSE_MLP:
        dense["linear_fc1"] = (h, 2 * a.ffn if a.glu else a.ffn)
        dense["linear_fc2"] = (a.ffn, h)
    expert = 0.0
    if kind in HAS_MOE:
        up = 2 * a.moe_ffn if a.glu else a.moe_ffn
        per = {"linear_fc1": (h, up), "linear_fc2": (a.moe_ffn, h)}
        expert = a.experts * sum(rank * (i + o) for name, (i, o) in per.items() if name in targets)
    return Counts(sum(rank * (i + o) for name, (i, o) in dense.items() if name in targets), 0, expert)
