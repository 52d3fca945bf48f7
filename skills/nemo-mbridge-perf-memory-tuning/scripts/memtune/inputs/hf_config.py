"""Read a Hugging Face ``config.json`` into the architecture fields of TrainingConfig.

Only the shape of the model comes from here (layers, widths, heads, vocabulary, experts, MTP);
the layout and batch come from the Bridge/Megatron config or the question.  Key names differ
between model families (num_experts / n_routed_experts / num_local_experts ...), so each field
lists the HF keys that can carry it, first found wins.  Multimodal configs keep the language
model under ``text_config``; that block is read when the top level has no layer count.

Megatron-Core's defaults (LayerNorm, biases on, dropout 0.1, learned positions) fit none of today's HF
models, so the reader also sets what Bridge builds each model with: normalization, activation, biases,
QK norm, position embedding and dropout.  Per-family facts live in vocabulary.yaml ``hf_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..facts import TrainingConfig
from ..knowledge import Knowledge
from . import limits
from .config import Builder
from .jsontext import parse_json

# TrainingConfig field -> HF keys that carry it (transformers' per-family config classes).
HF_KEYS: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "num_query_groups": ("num_key_value_heads",),
    "ffn_hidden_size": ("intermediate_size", "ffn_hidden_size", "n_inner"),
    "vocab_size": ("vocab_size",),
    "share_embeddings_and_output_weights": ("tie_word_embeddings",),
    "kv_channels": ("head_dim",),
    "num_moe_experts": ("num_experts", "n_routed_experts", "num_local_experts"),
    "moe_router_topk": ("num_experts_per_tok", "experts_per_token", "moe_topk"),
    "moe_ffn_hidden_size": ("moe_intermediate_size",),
    "moe_shared_expert_intermediate_size": ("shared_expert_intermediate_size",),
    "mtp_num_layers": ("num_nextn_predict_layers", "mtp_num_layers"),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_head_dim": ("qk_nope_head_dim",),
    "qk_pos_emb_head_dim": ("qk_rope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    # Bridge's CONFIG_MAPPING (conversion/model_bridge.py @067f987df); GPT-2 style names for the dropouts.
    "add_qkv_bias": ("attention_bias",),
    "add_bias_linear": ("mlp_bias",),
    "qk_layernorm": ("use_qk_norm",),
    "attention_dropout": ("attention_dropout", "attn_pdrop"),
    "hidden_dropout": ("hidden_dropout", "resid_pdrop"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions"),
}
_MARKERS = ("architectures", "model_type", "num_hidden_layers", "text_config")


def looks_like_hf(data: Mapping[str, Any]) -> bool:
    return any(k in data for k in _MARKERS) and "model" not in data


def read_hf_config(path: str | Path, kb: Knowledge) -> TrainingConfig:
    """An HF ``config.json`` -> TrainingConfig with the architecture fields set."""
    path = Path(path)
    text = limits.read_text(path, "a Hugging Face config.json")
    data = parse_json(text, path)
    if not isinstance(data, Mapping):
        raise UserError(f"{path}:1: expected a JSON object")
    return hf_from_mapping(data, str(path), kb=kb)


def hf_from_mapping(data: Mapping[str, Any], path: str = "<config.json>", *, kb: Knowledge) -> TrainingConfig:
    b = Builder("hf-config", path)
    root = data
    text_cfg = data.get("text_config")
    if "num_hidden_layers" not in data and isinstance(text_cfg, Mapping):
        root = {**text_cfg, **{k: v for k, v in data.items() if k in ("tie_word_embeddings",)}}
    vocab = _vocab(kb)
    model_type = root.get("model_type") or data.get("model_type")
    family = (vocab.get("model_types") or {}).get(model_type) if isinstance(model_type, str) else None
    family = family or {}
    # Lowest to highest precedence: the config class's defaults, config.json, what the family's bridge pins.
    defaults = family.get("defaults") or {}
    found: dict[str, tuple[Any, str]] = {k: (v, f"{model_type} default") for k, v in defaults.items()}
    for name, keys in HF_KEYS.items():
        for key in keys:
            if root.get(key) is not None:
                found[name] = (root[key], key)
                break
    found.update(_layer_kinds(root, vocab))
    found.update({k: (v, f"model_type {model_type}") for k, v in (family.get("sets") or {}).items()})
    for name, (value, key) in found.items():
        b.set(name, value, key)
    if b.values.get("moe_shared_expert_intermediate_size") is None and root.get("n_shared_experts"):
        width = root.get("moe_intermediate_size")
        if isinstance(width, int) and isinstance(root["n_shared_experts"], int):
            b.set("moe_shared_expert_intermediate_size", width * root["n_shared_experts"], "n_shared_experts")
    if root.get("kv_lora_rank") is not None:
        b.set("multi_latent_attention", True, "kv_lora_rank")
    try:
        freq = _moe_layers(root, b.values.get("num_layers"))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        raise UserError(f"{path}: first_k_dense_replace / moe_layer_freq / decoder_sparse_step / mlp_only_layers: "
                        "expected whole numbers (steps above 0) and a list of layer numbers") from None
    if freq is not None and b.values.get("num_moe_experts"):
        b.set("moe_layer_freq", freq, "first_k_dense_replace / decoder_sparse_step")
    if _gated(root, vocab) and b.values.get("gated_linear_unit") is None:
        b.set("gated_linear_unit", True, "hidden_act")
    archs = data.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs else None
    name = data.get("_name_or_path") or arch or data.get("model_type")
    if name:
        b.set("model_name", name, "_name_or_path")
    return b.build()


_MAX_LAYERS = 1 << 16  # bounds the per-layer pattern below; models have a few hundred layers at most


def _moe_layers(cfg: Mapping[str, Any], num_layers: int | None) -> Any:
    """Which layers are MoE, as Megatron's moe_layer_freq (1 = all, else a 0/1 list per layer).

    DeepSeek: layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0.
    Qwen-MoE: layer i is MoE when i is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
    """
    if not isinstance(num_layers, int) or num_layers > _MAX_LAYERS:
        return None
    if "first_k_dense_replace" in cfg:
        k, step = int(cfg.get("first_k_dense_replace") or 0), int(cfg.get("moe_layer_freq") or 1)
        pattern = [int(i >= k and i % step == 0) for i in range(num_layers)]
    elif "decoder_sparse_step" in cfg or cfg.get("mlp_only_layers"):
        step = int(cfg.get("decoder_sparse_step") or 1)
        dense = set(cfg.get("mlp_only_layers") or [])
        pattern = [int(i not in dense and (i + 1) % step == 0) for i in range(num_layers)]
    else:
        return None
    return 1 if all(pattern) else pattern


def _vocab(kb: Knowledge) -> Mapping[str, Any]:
    return (kb.tables.get("vocabulary") or {}).get("hf_config") or {}


def _layer_kinds(cfg: Mapping[str, Any], vocab: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """Activation, normalization and position embedding as config.json's own keys imply them."""
    found: dict[str, tuple[Any, str]] = {}
    act_key = "hidden_act" if cfg.get("hidden_act") else "hidden_activation"
    act = cfg.get(act_key)
    act = (vocab.get("activations") or {}).get(act) if isinstance(act, str) else None
    if act:
        found["activation_func"] = (act, act_key)
    for key, norm in (vocab.get("norm_keys") or {}).items():
        if cfg.get(key) is not None:
            found["normalization"] = (norm, key)
            break
    rope_key = next((k for k in vocab.get("rope_keys") or () if cfg.get(k) is not None), None)
    if rope_key:
        scaling = cfg.get("rope_scaling") if isinstance(cfg.get("rope_scaling"), Mapping) else {}
        yarn = (scaling.get("type") or scaling.get("rope_type")) == "yarn" and cfg.get("kv_lora_rank") is None
        found["position_embedding_type"] = ("yarn" if yarn else "rope", "rope_scaling" if yarn else rope_key)
    return found


def _gated(cfg: Mapping[str, Any], vocab: Mapping[str, Any]) -> bool:
    if cfg.get("model_type") in (vocab.get("gated_model_types") or []):
        return True
    return (cfg.get("hidden_act") or cfg.get("hidden_activation")) in (vocab.get("gated_activations") or [])
