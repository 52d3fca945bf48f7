"""Model presets: every entry builds, estimates, and has the parameter count its publisher states."""

from __future__ import annotations

import pytest
from memtune.estimator import estimate
from memtune.estimator.constants import constants
from memtune.estimator.models import fill_from_preset, find, preset
from memtune.estimator.params import active_params, arch_from_config, total_params
from memtune.facts import TrainingConfig

# Published sizes (billions): Meta Llama 3 / 3.1 model cards (8B, 70B, 405B); Qwen3 model cards (8.2B, 14.8B,
# 32.8B, 30.5B total / 3.3B active, 235B / 22B active); DeepSeek-V3 report (671B main model + 14B MTP module,
# 37B active without MTP); OpenAI gpt-oss model card (21B / 3.6B active, 117B / 5.1B active); Mistral Mixtral
# 8x7B (46.7B / 12.9B active); NVIDIA Nemotron 3 Nano (31.6B total / 3.2B active, i.e. "30B-A3B"); Z.ai GLM-4.5
# (355B total, 106B for GLM-4.5-Air; their 32B / 12B active leave out the 1.2-1.6B of untied embeddings).
PUBLISHED = {
    "llama3-8b": (8.03, None), "llama31-8b": (8.03, None), "llama3-70b": (70.6, None), "llama31-70b": (70.6, None),
    "llama3-405b": (405.9, None), "qwen3-8b": (8.19, None), "qwen3-14b": (14.8, None), "qwen3-32b": (32.8, None),
    "qwen3-30b-a3b": (30.5, 3.3), "qwen3-235b-a22b": (235.1, 22.2), "deepseek-v3": (685.0, None),
    "gpt-oss-20b": (20.9, None), "gpt-oss-120b": (116.8, None), "mixtral-8x7b": (46.7, 12.9),
    "nemotron-3-nano": (31.6, None), "glm45": (355.0, None), "glm45-air": (106.0, None),
    # Llama 2 (Touvron et al. 2023, and the Hugging Face model cards): 6.74B, 13.0B, 69.0B
    "llama2-7b": (6.74, None), "llama2-13b": (13.0, None), "llama2-70b": (69.0, None),
    # Qwen2.5 model card: 3.09B parameters (2.77B without embeddings; the embedding is tied)
    "qwen25-3b": (3.09, None),
}


@pytest.mark.parametrize("ident", sorted(PUBLISHED))
def test_preset_parameter_counts(kb, ident):
    a = arch_from_config(preset(ident, kb), tp=1, defaults=constants(kb)["megatron-defaults"])
    total, active = PUBLISHED[ident]
    assert total_params(a) / 1e9 == pytest.approx(total, rel=0.01)
    if active is not None:
        assert active_params(a) / 1e9 == pytest.approx(active, rel=0.03)


def test_every_preset_is_listed_and_estimates(kb):
    assert {e["id"] for e in kb.entries("models")} == set(PUBLISHED)
    for entry in kb.entries("models"):
        cfg = preset(entry["id"], kb)
        cfg.seq_length, cfg.world_size, cfg.tensor_model_parallel_size = 4096, 64, 8
        cfg.expert_model_parallel_size = 8 if cfg.num_moe_experts else None
        cfg.use_distributed_optimizer = True
        assert estimate(cfg, kb=kb).peak_bytes > 0


def test_lookup_by_alias_and_errors(kb):
    assert find("Llama-3.1-70B", kb)["id"] == "llama31-70b"
    assert find("Qwen/Qwen3-30B-A3B", kb)["id"] == "qwen3-30b-a3b"
    assert preset("DeepSeek V3", kb).multi_latent_attention is True
    with pytest.raises(LookupError, match="known presets"):
        preset("gpt-5", kb)


def test_named_model_fills_only_unset_fields(kb):
    cfg = TrainingConfig(model_name="qwen3-8b", num_layers=4, hidden_dropout=0.1)
    filled = fill_from_preset(cfg, kb)
    assert filled.num_layers == 4 and filled.hidden_dropout == 0.1  # the config wins
    assert filled.qk_layernorm is True and filled.vocab_size == 151936  # gaps come from the preset
    assert fill_from_preset(TrainingConfig(model_name="not-a-model"), kb).vocab_size is None
