"""Megatron Bridge 0.6.2 ``estimate_training_memory``, reproduced number for number.

Written from the description of
``megatron/bridge/training/utils/theoretical_memory_utils.py`` (Bridge 0.6.2)
in shared/research/megatron-bridge.md sec. 1.1 and checked against every unit-test
vector of sec. 1.4 (tests/test_estimator_bridge.py).  Same inputs, same
assumptions, same quirks: 4h layernorm parameters per layer whatever the norm,
no router weights, gated factor 3 only for SwiGLU (GLU + SiLU), untied
embeddings counted twice only when PP = 1, uneven stages giving both the first
and the last stage a vocabulary table, ETP left unset counting as 1, 18 or
6 + 12/N bytes per parameter, and activations for stage 0 assuming sequence
parallelism and selective recompute.  Its coefficients live in
knowledge/estimator.yaml (``bridge-*`` entries).
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import UserError
from ..facts import TrainingConfig
from .params import _freq_key


def _pos(value: Any, default: int, name: str) -> int:
    if value is None:
        return default
    value = int(value)
    if value <= 0:
        raise UserError(f"config: {name} must be positive (Bridge raises ValueError)")
    return value


def _vocab(cfg: TrainingConfig, tp: int, multiple_default: int) -> int:
    if not cfg.vocab_size:
        raise UserError("config: vocab_size is not set")
    pad = cfg.should_pad_vocab if cfg.should_pad_vocab is not None else cfg.source == "megatron-args"
    if not pad:
        return int(cfg.vocab_size)
    multiple = (cfg.make_vocab_size_divisible_by or multiple_default) * tp
    return int(math.ceil(cfg.vocab_size / multiple) * multiple)


def _moe_pattern(cfg: TrainingConfig) -> tuple[bool, ...]:
    layers = _pos(cfg.num_layers, 1, "num_layers")
    if not cfg.num_moe_experts:
        pattern: tuple[bool, ...] = (False,) * layers
    else:
        freq = _freq_key(cfg.moe_layer_freq if cfg.moe_layer_freq is not None else 1)
        if isinstance(freq, int):
            if freq <= 0:
                raise UserError("config: moe_layer_freq must be positive")
            pattern = tuple(i % freq == 0 for i in range(layers))
        else:
            if len(freq) != layers:
                raise UserError(f"config: moe_layer_freq length {len(freq)} != num_layers {layers}")
            pattern = tuple(bool(x) for x in freq)
    mtp = cfg.mtp_num_layers or 0
    return pattern + (pattern[-1],) * mtp


def _swiglu(cfg: TrainingConfig) -> bool:
    act = (cfg.activation_func or ("silu" if cfg.gated_linear_unit else "gelu")).lower()
    return bool(cfg.gated_linear_unit) and act in {"silu", "swiglu"}


def _uneven_counts(cfg: TrainingConfig, pp: int) -> tuple[int, ...] | None:
    first, last = cfg.num_layers_in_first_pipeline_stage, cfg.num_layers_in_last_pipeline_stage
    if first is None and last is None:
        return None
    if pp <= 1:
        raise UserError("config: uneven pipeline stages require pipeline_model_parallel_size greater than 1")
    rest, left = _pos(cfg.num_layers, 1, "num_layers"), pp
    if first is not None:
        rest, left = rest - _pos(first, 1, "num_layers_in_first_pipeline_stage"), left - 1
    if last is not None:
        rest, left = rest - _pos(last, 1, "num_layers_in_last_pipeline_stage"), left - 1
    if left == 0:
        if rest:
            raise UserError("config: uneven pipeline stage layer counts do not cover all model layers")
        middle = 0
    else:
        if rest <= 0 or rest % left:
            raise UserError("config: model layers must divide evenly over the remaining pipeline stages")
        middle = rest // left
    counts = [middle] * pp
    if first is not None:
        counts[0] = int(first)
    if last is not None:
        counts[-1] = int(last)
    return tuple(counts)


def _stage_indices(cfg: TrainingConfig, counts: tuple[int, ...]) -> list[list[int]]:
    vp = cfg.virtual_pipeline_model_parallel_size
    out: list[list[int]] = [[] for _ in counts]
    offset = 0
    if vp is None:
        for rank, n in enumerate(counts):
            out[rank] = list(range(offset, offset + n))
            offset += n
        return out
    vp = _pos(vp, 1, "virtual_pipeline_model_parallel_size")
    if any(n % vp for n in counts):
        raise UserError("config: each uneven pipeline stage layer count must divide over virtual pipeline stages")
    for _ in range(vp):
        for rank, n in enumerate(counts):
            out[rank].extend(range(offset, offset + n // vp))
            offset += n // vp
    return out


def bridge_estimate(cfg: TrainingConfig, c: dict[str, Any], num_microbatches: int | None = None) -> dict[str, Any]:
    """The Bridge numbers for ``cfg``: model-state components, activation, total, verbatim assumptions."""
    if not cfg.hidden_size or not cfg.num_attention_heads or not cfg.seq_length:
        raise UserError("config: hidden_size, num_attention_heads and seq_length are required")
    h, heads = int(cfg.hidden_size), int(cfg.num_attention_heads)
    ffn = int(cfg.ffn_hidden_size or 4 * h)
    kv = int(cfg.kv_channels or h // heads)
    groups = cfg.num_query_groups or heads
    tp = _pos(cfg.tensor_model_parallel_size, 1, "tensor_model_parallel_size")
    pp = _pos(cfg.pipeline_model_parallel_size, 1, "pipeline_model_parallel_size")
    cp = _pos(cfg.context_parallel_size, 1, "context_parallel_size")
    ep = _pos(cfg.expert_model_parallel_size, 1, "expert_model_parallel_size")
    etp = _pos(cfg.expert_tensor_parallel_size, 1, "expert_tensor_parallel_size")
    dp = cfg.data_parallel_size or (cfg.world_size // (tp * pp * cp) if cfg.world_size else 1)
    dp = _pos(dp, 1, "data_parallel_size")
    layers = _pos(cfg.num_layers, 1, "num_layers")
    defaults = c["megatron-defaults"]
    vocab = _vocab(cfg, tp, int(defaults["make_vocab_size_divisible_by"]))
    pattern = _moe_pattern(cfg)
    factor = 3.0 if _swiglu(cfg) else 2.0
    tied = cfg.share_embeddings_and_output_weights if cfg.share_embeddings_and_output_weights is not None else True
    has_moe = bool(cfg.num_moe_experts) and cfg.num_moe_experts > 0

    attention = 2 * h * h * ((1 + groups / heads) * (kv * heads / h))
    norms, final_norm = 4 * h, 2 * h
    dense_mlp = factor * h * ffn
    shared = factor * h * (cfg.moe_shared_expert_intermediate_size or 0)
    routed = latent_proj = 0.0
    if has_moe and any(pattern):
        moe_ffn = cfg.moe_ffn_hidden_size if cfg.moe_ffn_hidden_size is not None else ffn
        if cfg.moe_latent_size is None:
            routed = factor * h * moe_ffn * cfg.num_moe_experts
        else:
            routed = factor * cfg.moe_latent_size * moe_ffn * cfg.num_moe_experts
            latent_proj = 2 * h * cfg.moe_latent_size
    dense_by_layer = [attention + norms + ((shared + latent_proj) if moe else dense_mlp) for moe in pattern]
    routed_by_layer = [routed if moe else 0.0 for moe in pattern]
    dense_total = sum(dense_by_layer) + final_norm
    routed_total = sum(routed_by_layer)
    embedding = h * vocab
    embeddings = embedding * (1 if tied else 2)

    counts = _uneven_counts(cfg, pp)
    if counts is None:
        dense_gpu = dense_total / (pp * tp) + embedding / tp
        if not tied and pp == 1:
            dense_gpu += embedding / tp
        routed_gpu = routed_total / (pp * ep * etp)
    else:
        idx = _stage_indices(cfg, counts)
        by_stage = [sum(dense_by_layer[i] for i in stage) for stage in idx]
        by_stage[-1] += sum(dense_by_layer[layers:]) + final_norm
        by_stage[0] += embedding
        by_stage[-1] += embedding
        dense_gpu = max(by_stage) / tp
        routed_stage = [sum(routed_by_layer[i] for i in stage) for stage in idx]
        routed_stage[-1] += sum(routed_by_layer[layers:])
        routed_gpu = max(routed_stage) / (ep * etp)

    b = c["bridge-bytes-per-parameter"]
    distributed = bool(cfg.use_distributed_optimizer)

    def bpp(shard: int) -> float:
        return b["replicated"] + b["sharded"] / max(1, shard) if distributed else b["non_distributed"]

    components = [{"name": "dense parameters and optimizer", "parameter_count": dense_total + embeddings,
                   "parameter_count_per_gpu": dense_gpu, "bytes_per_parameter": bpp(dp * cp),
                   "memory_bytes": dense_gpu * bpp(dp * cp)}]
    if routed_total > 0:
        shard = max(1, (dp * tp * cp) // max(1, ep * etp))
        components.append({"name": "routed expert parameters and optimizer", "parameter_count": routed_total,
                           "parameter_count_per_gpu": routed_gpu, "bytes_per_parameter": bpp(shard),
                           "memory_bytes": routed_gpu * bpp(shard)})
    activation = _activation(cfg, c, pattern, ffn, h, vocab, tp, pp, cp, num_microbatches)
    weight_opt = sum(x["memory_bytes"] for x in components)
    return {
        "weight_and_optimizer_bytes": weight_opt,
        "activation_bytes": activation,
        "total_bytes": weight_opt + activation,
        "total_parameters": dense_total + routed_total + embeddings,
        "components": components,
        "assumption_ids": _assumption_ids(has_routed=routed_total > 0, cp=cp),
    }


def _activation(cfg: TrainingConfig, c: dict[str, Any], pattern: tuple[bool, ...], ffn: int, h: int, vocab: int,
                tp: int, pp: int, cp: int, num_microbatches: int | None) -> float:
    k = c["bridge-activation-coefficients"]
    s, mbs = int(cfg.seq_length), _pos(cfg.micro_batch_size, 1, "micro_batch_size")
    n_moe = sum(pattern)
    n_total = len(pattern)
    ratio = 0.0
    if n_total:
        moe_ffn = 0.0
        if cfg.num_moe_experts and n_moe:
            topk = cfg.moe_router_topk if cfg.moe_router_topk is not None else c["megatron-defaults"]["moe_router_topk"]
            width = cfg.moe_ffn_hidden_size if cfg.moe_ffn_hidden_size is not None else ffn
            moe_ffn = n_moe * (width * topk + (cfg.moe_shared_expert_intermediate_size or 0))
        ratio = ((n_total - n_moe) * ffn + moe_ffn) / (n_total * h)
    act = s * mbs * h * (k["per_layer"] + k["per_ffn_ratio"] * ratio) * n_total
    act += k["input_ids"] * s * mbs * pp
    act += s * mbs * h * pp
    vp = cfg.virtual_pipeline_model_parallel_size
    if vp is not None:
        act *= 1 + (pp - 1) / (pp * vp)
    elif pp > 1 and num_microbatches is not None:
        act *= min(1, num_microbatches / pp)
    if pp == 1:
        act += s * mbs * h * k["output_layer"] * (1 + vocab / h)
    return act / (tp * cp)


def _assumption_ids(*, has_routed: bool, cp: int) -> list[str]:
    ids = ["bridge-most-loaded", "bridge-adam-bytes", "bridge-embedding-stages"]
    if has_routed:
        ids.append("bridge-routed-experts")
    if cp > 1:
        ids.append("bridge-context-parallel")
    ids.append("bridge-activation")
    return ids


def format_line(b: dict[str, Any], *, unit: str = "MB", report: bool = False) -> str:
    """Bridge's one-line summary: ``format_training_memory_estimate`` (per component) or, with ``report``,
    the ``report_theoretical_memory`` line (weight and optimizer, activation, total). MB/GB mean MiB/GiB."""
    unit = unit.upper()
    scales = {"MB": 2**20, "GB": 2**30}
    if unit not in scales:
        raise UserError(f"Unsupported memory unit: {unit}")
    scale = scales[unit]
    if report:
        parts = [f"weight and optimizer={b['weight_and_optimizer_bytes'] / scale:.2f} {unit}",
                 f"activation={b['activation_bytes'] / scale:.2f} {unit}",
                 f"total={b['total_bytes'] / scale:.2f} {unit}"]
    else:
        parts = [f"{c['name']}={c['memory_bytes'] / scale:.2f} {unit}" for c in b["components"]]
        parts += [f"activation={b['activation_bytes'] / scale:.2f} {unit}",
                  f"total={b['total_bytes'] / scale:.2f} {unit}"]
    return "Theoretical memory footprints: " + ", ".join(parts)
