"""Parameter counts, layer placement and the pipeline schedule, checked against hand-computed small models."""

from __future__ import annotations

import pytest
from memtune import knowledge
from memtune.errors import UserError
from memtune.estimator.constants import constants
from memtune.estimator.params import (
    Counts,
    arch_from_config,
    attention_params,
    layer_pattern,
    mlp_params,
    moe_params,
    total_params,
)
from memtune.estimator.schedule import in_flight
from memtune.estimator.stages import place
from memtune.facts import TrainingConfig

# h 16, 4 heads of 4 in 2 query groups, SwiGLU ffn 32, RMSNorm, no biases, untied 64-row vocabulary
TINY = dict(num_layers=4, hidden_size=16, num_attention_heads=4, num_query_groups=2, kv_channels=4,
            ffn_hidden_size=32, vocab_size=64, should_pad_vocab=False, gated_linear_unit=True,
            activation_func="silu", normalization="RMSNorm", add_bias_linear=False,
            share_embeddings_and_output_weights=False, position_embedding_type="rope", seq_length=8)
DEFAULTS = constants(knowledge.load())["megatron-defaults"]


def arch(**over):
    return arch_from_config(TrainingConfig(**{**TINY, **over}), tp=1, defaults=DEFAULTS)


def test_gqa_attention_and_swiglu_mlp():
    a = arch()
    assert attention_params(a) == Counts(16 * (4 + 2 * 2) * 4 + 4 * 4 * 16, 16)  # fused QKV + proj, one norm
    assert mlp_params(a, a.ffn) == Counts(16 * 64 + 32 * 16, 16)  # fc1 doubled by SwiGLU, fc2, pre-norm
    assert total_params(a) == 4 * (768 + 16 + 1536 + 16) + 64 * 16 * 2 + 16  # layers + untied tables + norm


def test_layernorm_and_biases():
    a = arch(normalization="LayerNorm", add_bias_linear=True)
    assert attention_params(a) == Counts(768 + 32, 2 * 16 + 16)  # QKV bias sharded; proj bias replicated
    assert mlp_params(a, a.ffn) == Counts(1536 + 64, 2 * 16 + 16)


def test_tied_embedding_and_padding():
    tied = arch(share_embeddings_and_output_weights=True)
    assert total_params(arch()) - total_params(tied) == 64 * 16
    padded = arch_from_config(TrainingConfig(**{**TINY, "vocab_size": 50257, "should_pad_vocab": True}), tp=4,
                              defaults=DEFAULTS)
    assert padded.vocab == 50688  # next multiple of 128 x TP 4


def test_moe_layer_counts_router_shared_and_experts():
    a = arch(num_moe_experts=4, moe_router_topk=2, moe_ffn_hidden_size=8, moe_shared_expert_intermediate_size=16)
    assert moe_params(a) == Counts(16 * 32 + 16 * 16, 16 + 4 * 16, 4 * (16 * 16 + 8 * 16))


def test_moe_layer_freq_forms():
    assert layer_pattern(4, 2, 2, None) == "STST"
    assert layer_pattern(4, 2, (0, 1, 1, 0), None) == "TSST"
    assert layer_pattern(3, 0, 1, None) == "TTT"
    assert arch(num_moe_experts=2, moe_layer_freq="([0]*1+[1]*3)").pattern == "TSSS"
    with pytest.raises(UserError, match="moe_layer_freq"):
        layer_pattern(4, 2, (0, 1), None)


def test_hybrid_pattern_kinds():
    a = arch(hybrid_layer_pattern="M*-E", num_layers=None, num_moe_experts=4)
    assert a.pattern == "MAFE" and a.num_layers == 4


def test_mla_attention_counts():
    a = arch(multi_latent_attention=True, q_lora_rank=8, kv_lora_rank=6, qk_head_dim=4, qk_pos_emb_head_dim=2,
             v_head_dim=4)
    # q_down h*8 + q_norm 8 (replicated), q_up 8 * 4*(4+2); kv_down h*(6+2) + kv_norm 6 (replicated),
    # kv_up 6 * 4*(4+4); proj 4*4*h; input norm h (replicated)
    assert attention_params(a) == Counts(8 * 24 + 6 * 32 + 16 * 16, 16 * 8 + 8 + 16 * 8 + 6 + 16)


def test_placement_uniform_interleaved():
    st = place("T" * 8, 4, 2, None, None, False, False, None, None, 0).stages
    assert [[len(ch.kinds) for ch in r] for r in st] == [[1, 1]] * 4
    assert st[0][0].embedding and st[3][1].loss and not st[3][0].loss


def test_placement_uneven_first_last():
    st = place("T" * 8, 4, 1, 1, 3, False, False, None, None, 0).stages
    assert [len(r[0].kinds) for r in st] == [1, 2, 2, 2][:3] + [3]
    with pytest.raises(UserError, match="divide"):
        place("T" * 8, 4, 1, 3, None, False, False, None, None, 0)


def test_placement_account_for_embedding_and_loss():
    # Megatron-LM CI gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split: 6 layers + 2
    st = place("T" * 6, 4, 2, None, None, True, True, None, None, 0).stages
    assert len(st[0][0].kinds) == 0 and st[0][0].embedding
    assert len(st[3][1].kinds) == 0 and st[3][1].loss
    assert sum(len(ch.kinds) for r in st for ch in r) == 6


def test_placement_layout_string_with_mtp():
    st = place("T" * 13, 2, 4, None, None, False, False, "Et|(tt|)*6mL", None, 1).stages
    assert [len(ch.kinds) for ch in st[0]] == [1, 2, 2, 2]
    assert [len(ch.kinds) for ch in st[1]] == [2, 2, 2, 0]
    assert st[1][3].loss and st[1][3].mtp == 1 and st[0][0].embedding


def test_schedule_1f1b():
    assert [in_flight(4, 1, 8, r) for r in range(4)] == [(4,), (3,), (2,), (1,)]
    assert in_flight(4, 1, 2, 0) == (2,)  # fewer micro-batches than stages
    assert in_flight(1, 1, 8, 0) == (1,)


def test_schedule_interleaved():
    # W = 2 (PP - r - 1) + (v - 1) PP; rank 0 holds 23 chunk passes = 80 x (1 + 3/20) layer passes / 4
    assert in_flight(4, 5, 16, 0) == (7, 4, 4, 4, 4)
    assert in_flight(4, 5, 16, 3) == (4, 4, 4, 4, 1)
    assert in_flight(2, 2, 2, 0) == (2, 2)  # all micro-batches in warm-up
