"""Bridge mode reproduces Megatron Bridge 0.6.2 ``estimate_training_memory`` exactly.

Expected numbers: the unit-test vectors of Bridge's tests/unit_tests/training/utils/
test_theoretical_memory_utils.py as listed in shared/research/megatron-bridge.md §1.4, plus two full-size
layouts from §1.5.  Every number below was also produced by running Bridge 0.6.2's own code on CPU with
shared/tools/bridge_estimate.py (wheel megatron_bridge-0.6.2 from PyPI) and is hard-coded here so the
test needs no network.
"""

from __future__ import annotations

import pytest
from memtune import knowledge
from memtune.errors import UserError
from memtune.estimator import estimate
from memtune.estimator.bridge_compat import format_line
from memtune.facts import TrainingConfig

KB = knowledge.load()

# _make_config() of Bridge's test module (research §1.4 "Base config")
BASE = dict(
    num_layers=4, hidden_size=16, seq_length=8, ffn_hidden_size=64, num_attention_heads=4, num_query_groups=None,
    kv_channels=4, vocab_size=32, make_vocab_size_divisible_by=1, should_pad_vocab=False,
    share_embeddings_and_output_weights=True, tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
    context_parallel_size=1, expert_model_parallel_size=1, expert_tensor_parallel_size=1, moe_layer_freq=1,
    moe_router_topk=1, gated_linear_unit=False, sequence_parallel=True, recompute_granularity="selective",
    micro_batch_size=2, use_distributed_optimizer=True, data_parallel_size=4,
)


def bridge(nmb: int | None = None, **over):
    cfg = TrainingConfig(provided=True, source="test", **{**BASE, **over})
    return estimate(cfg, mode="bridge", num_microbatches=nmb, kb=KB).bridge


def comps(b):
    return [(c["parameter_count"], c["parameter_count_per_gpu"], c["bytes_per_parameter"], c["memory_bytes"])
            for c in b["components"]]


def test_dense_legacy():
    b = bridge()
    assert comps(b) == [(13088, 3400, 9, 30600)]  # 12576/4 + 512/2 params, 6 + 12/4 bytes
    assert b["weight_and_optimizer_bytes"] == 30600
    assert b["total_parameters"] == 13088


def test_uneven_pipeline_stages():
    b = bridge(num_layers=8, tensor_model_parallel_size=1, pipeline_model_parallel_size=4,
               num_layers_in_first_pipeline_stage=1, num_layers_in_last_pipeline_stage=3,
               share_embeddings_and_output_weights=False)
    assert comps(b)[0][1:] == (9952, 9, 89568)  # stages [1,2,2,3]; last = 3*3136 + 32 + 512


def test_moe_uneven_pipeline_stages():
    b = bridge(num_layers=8, tensor_model_parallel_size=1, pipeline_model_parallel_size=4,
               num_layers_in_first_pipeline_stage=1, num_layers_in_last_pipeline_stage=3,
               share_embeddings_and_output_weights=False, num_moe_experts=2,
               moe_layer_freq=[0, 1, 0, 0, 1, 0, 1, 1], moe_ffn_hidden_size=32)
    assert [c[1] for c in comps(b)] == [5856, 4096]
    assert b["weight_and_optimizer_bytes"] == 89568  # oracle


def test_moe_expert_and_context_parallel():
    b = bridge(pipeline_model_parallel_size=1, context_parallel_size=2, num_moe_experts=8, moe_layer_freq=2,
               moe_ffn_hidden_size=32, expert_model_parallel_size=4, data_parallel_size=8)
    assert comps(b) == [(8992, 4496, 6.75, 30348), (16384, 4096, 7.5, 30720)]
    assert b["weight_and_optimizer_bytes"] == 61068


def test_activation_tp_times_cp():
    b = bridge(nmb=1, pipeline_model_parallel_size=1, context_parallel_size=2)
    assert b["activation_bytes"] == 9568  # (34816 + 128 + 256 + 3072) / 4
    assert b["weight_and_optimizer_bytes"] == 49080  # oracle


def test_moe_list_shared_latent_mtp():
    b = bridge(pipeline_model_parallel_size=1, num_moe_experts=4, moe_layer_freq=[0, 1, 0, 1],
               moe_ffn_hidden_size=32, moe_shared_expert_intermediate_size=8, moe_latent_size=4, mtp_num_layers=1)
    assert [(c[0], c[1]) for c in comps(b)] == [(11232, 5616), (3072, 3072)]
    assert b["total_parameters"] == 14304
    assert b["activation_bytes"] == 21184  # oracle


def test_vpp_penalty():
    b = bridge(nmb=4, virtual_pipeline_model_parallel_size=2)
    assert b["activation_bytes"] == 22240  # (34816 + 256 + 512) * 1.25 / 2


def test_format_gb():
    line = format_line(bridge(), unit="GB")
    assert "dense parameters and optimizer=0.00 GB" in line and "total=0.00 GB" in line


def test_format_rejects_unknown_unit():
    with pytest.raises(UserError, match="Unsupported memory unit"):
        format_line(bridge(), unit="bytes")


def test_report_line_nmb4():
    b = bridge(nmb=4)
    assert (b["weight_and_optimizer_bytes"], b["activation_bytes"], b["total_bytes"]) == (30600, 17792, 48392)
    line = format_line(b, unit="MB", report=True)
    for part in ("Theoretical memory footprints: weight and optimizer=0.03 MB", "activation=0.02 MB",
                 "total=0.05 MB"):
        assert part in line


def test_llama3_70b_sft_layout():
    """research §1.5: 50.8 GiB weight+optimizer, 23.0 GiB activation, 73.8 GiB total (oracle bytes)."""
    cfg = TrainingConfig(
        num_layers=80, hidden_size=8192, seq_length=4096, ffn_hidden_size=28672, num_attention_heads=64,
        num_query_groups=8, kv_channels=128, vocab_size=128256, should_pad_vocab=True,
        share_embeddings_and_output_weights=False, gated_linear_unit=True, activation_func="silu",
        tensor_model_parallel_size=4, pipeline_model_parallel_size=4, virtual_pipeline_model_parallel_size=5,
        micro_batch_size=1, use_distributed_optimizer=True, data_parallel_size=2)
    b = estimate(cfg, mode="bridge", num_microbatches=16, kb=KB).bridge
    assert b["weight_and_optimizer_bytes"] == 54498570240
    assert b["activation_bytes"] == pytest.approx(24734687232, abs=1)
    assert b["total_parameters"] == 70559219712


def test_qwen3_30b_a3b_layout():
    cfg = TrainingConfig(
        num_layers=48, hidden_size=2048, seq_length=4096, ffn_hidden_size=6144, num_attention_heads=32,
        num_query_groups=4, kv_channels=128, vocab_size=151936, should_pad_vocab=True,
        share_embeddings_and_output_weights=False, gated_linear_unit=True, activation_func="silu",
        tensor_model_parallel_size=2, pipeline_model_parallel_size=2, expert_model_parallel_size=4,
        num_moe_experts=128, moe_ffn_hidden_size=768, moe_router_topk=8, moe_layer_freq=1, micro_batch_size=1,
        use_distributed_optimizer=True, data_parallel_size=4)
    b = estimate(cfg, mode="bridge", num_microbatches=8, kb=KB).bridge
    assert comps(b)[0][1:] == (382305280, 9, 3440747520)
    assert comps(b)[1][1:] == (3623878656, 12, 43486543872)
    assert b["activation_bytes"] == 6048219136
    assert b["total_bytes"] == 52975510528


def test_bridge_errors_are_user_errors():
    with pytest.raises(UserError, match="divide evenly"):
        bridge(num_layers=8, pipeline_model_parallel_size=4, num_layers_in_first_pipeline_stage=3)
    with pytest.raises(UserError, match="moe_layer_freq"):
        bridge(num_moe_experts=2, moe_layer_freq=[1, 0])
