"""Ours mode, one component at a time, on hand-computed small layouts (bytes are exact)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from memtune.errors import UserError
from memtune.estimator import estimate, summarize
from memtune.estimator.activations import layer_activations
from memtune.estimator.constants import constants
from memtune.estimator.params import arch_from_config
from memtune.estimator.rank_activations import _act_context, act_inputs
from memtune.estimator.setup import resolve
from memtune.facts import GpuFacts, TrainingConfig

# Per layer: 2304 TP-sharded + 32 replicated parameters (see test_estimator_params.TINY).
TINY = TrainingConfig(
    num_layers=4, hidden_size=16, num_attention_heads=4, num_query_groups=2, kv_channels=4, ffn_hidden_size=32,
    vocab_size=64, should_pad_vocab=False, gated_linear_unit=True, activation_func="silu", normalization="RMSNorm",
    add_bias_linear=False, share_embeddings_and_output_weights=False, position_embedding_type="rope",
    hidden_dropout=0.0, attention_dropout=0.0, seq_length=8, micro_batch_size=2, tensor_model_parallel_size=2,
    pipeline_model_parallel_size=2, sequence_parallel=True, data_parallel_size=4, use_distributed_optimizer=True,
    bf16=True, grad_reduce_in_fp32=True,
)
STAGE0 = (2 * 2304 + 64 * 16) / 2 + 2 * 32  # two layers + embedding rows, TP 2
STAGE1 = (2 * 2304 + 64 * 16) / 2 + 2 * 32 + 16  # two layers + output layer + final norm


def est(kb, **over):
    return estimate(replace(TINY, **over), kb=kb, num_microbatches=4)


def test_model_state_per_stage(kb):
    s0, s1 = est(kb).stages
    assert (s0.params, s1.params) == (STAGE0, STAGE1)
    assert s0.weights_bytes == 2 * STAGE0  # bf16
    assert s0.grads_bytes == 4 * STAGE0  # fp32 main grads
    assert s0.optimizer_bytes == 12 * STAGE0 / 4  # fp32 master + Adam m, v over DP 4


def test_optimizer_and_gradient_dtypes(kb):
    assert est(kb, grad_reduce_in_fp32=False).stages[0].grads_bytes == 2 * STAGE0
    assert est(kb, use_distributed_optimizer=False).stages[0].optimizer_bytes == 12 * STAGE0
    assert est(kb, context_parallel_size=2).stages[0].optimizer_bytes == 12 * STAGE0 / 8  # DP x CP shard
    pa = est(kb, use_precision_aware_optimizer=True, exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16")
    assert pa.stages[0].optimizer_bytes == (2 + 2 + 2) * STAGE0 / 4  # bf16 remainder + bf16 moments
    assert est(kb, num_distributed_optimizer_instances=2).stages[0].optimizer_bytes == 12 * STAGE0 / 2
    off = est(kb, optimizer_cpu_offload=True, optimizer_offload_fraction=0.5)
    assert off.stages[0].optimizer_bytes == 12 * STAGE0 / 4 / 2


def test_tied_embedding_kept_on_both_ends_with_pp(kb):
    tied = est(kb, share_embeddings_and_output_weights=True).stages
    assert tied[1].params == STAGE1  # the last stage holds a copy of the embedding
    one = est(kb, share_embeddings_and_output_weights=True, pipeline_model_parallel_size=1).stages[0]
    assert one.params == (4 * 2304 + 64 * 16) / 2 + 4 * 32 + 16  # one table only


def test_fsdp_shards_weights_and_grads(kb):
    layer = 2304 / 2 + 32  # one decoder layer per GPU
    fsdp = est(kb, use_megatron_fsdp=True, data_parallel_sharding_strategy="optim_grads_params").stages[0]
    assert fsdp.weights_bytes == 2 * STAGE0 / 4 + 2 * layer * 2  # shard + two all-gathered layers
    assert fsdp.grads_bytes == 4 * STAGE0 / 4 + layer * 4  # shard + one unsharded layer gradient
    assert fsdp.optimizer_bytes == 12 * STAGE0 / 4
    grads_only = est(kb, use_megatron_fsdp=True, data_parallel_sharding_strategy="optim_grads").stages[0]
    assert grads_only.weights_bytes == 2 * STAGE0 and grads_only.grads_bytes == 4 * STAGE0 / 4
    # Megatron-LM --use-torch-fsdp2 (torch fully_shard over the DP group) shards all three as well (Megatron-LM#1368)
    torch_fsdp2 = est(kb, use_torch_fsdp2=True).stages[0]
    assert (torch_fsdp2.weights_bytes, torch_fsdp2.grads_bytes, torch_fsdp2.optimizer_bytes) == (
        fsdp.weights_bytes, fsdp.grads_bytes, fsdp.optimizer_bytes)
    # DeepSpeed ZeRO-2 (config.py reads stage 2 as the distributed optimizer with optim_grads): gradients and the
    # optimizer state sharded, the weights whole - Megatron FSDP's optim_grads; without the distributed optimizer the
    # strategy alone shards nothing
    zero2 = est(kb, use_distributed_optimizer=True, data_parallel_sharding_strategy="optim_grads").stages[0]
    assert (zero2.weights_bytes, zero2.grads_bytes, zero2.optimizer_bytes) == (
        grads_only.weights_bytes, grads_only.grads_bytes, grads_only.optimizer_bytes)
    assert est(kb, use_distributed_optimizer=False,
               data_parallel_sharding_strategy="optim_grads").stages[0].grads_bytes == 4 * STAGE0


def test_fp8_weight_copies(kb):
    linear = 2 * 2304 / 2  # stage 0 linear weights per GPU (embedding rows stay bf16)
    cache = est(kb, fp8="hybrid", fp8_recipe="tensorwise").stages[0]
    base = est(kb).stages[0]
    assert cache.workspace_bytes - base.workspace_bytes == 2 * linear  # FP8 copy + transpose cache
    gathered = est(kb, fp8="hybrid", fp8_param_gather=True).stages[0]
    assert gathered.workspace_bytes == base.workspace_bytes


@pytest.mark.parametrize("recipe, hopper, blackwell", [("tensorwise", 2, 1), ("delayed", 2, 1), ("mxfp8", 2, 2),
                                                       ("blockwise", 2, 2)])
def test_fp8_weight_copies_follow_the_gpu_gemm_layouts(kb, recipe, hopper, blackwell):
    """A per-tensor scaled FP8 weight needs a transposed copy only where FP8 GEMMs are TN-only (Hopper); on
    Blackwell one byte per weight stays, for the cache and for FP8 parameters alike.  MXFP8 and blockwise keep
    both directions everywhere; a GPU not named is taken as TN-only."""
    linear = 2 * 2304 / 2
    base = est(kb).stages[0]
    for arch, per in (("hopper", hopper), ("blackwell", blackwell), (None, hopper)):
        cached = est(kb, fp8="hybrid", fp8_recipe=recipe, gpu_arch=arch).stages[0]
        assert cached.workspace_bytes - base.workspace_bytes == per * linear
        params = est(kb, fp8="hybrid", fp8_recipe=recipe, fp8_param_gather=True, gpu_arch=arch).stages[0]
        assert params.weights_bytes - base.weights_bytes == pytest.approx((per - 2) * linear)
    b200 = estimate(replace(TINY, fp8="hybrid", fp8_recipe=recipe), gpu="B200", kb=kb, num_microbatches=4)
    assert b200.stages[0].workspace_bytes - base.workspace_bytes == blackwell * linear  # the GPU names the arch


def test_lora_trains_only_adapters(kb):
    full = est(kb).stages[0]
    lora = est(kb, peft="lora", peft_dim=2).stages[0]
    adapters = 2 * 2 * ((16 + 32) + (16 + 16) + (16 + 64) + (32 + 16)) / 2  # 2 layers, rank 2, four targets
    assert lora.grads_bytes == 4 * adapters
    assert lora.optimizer_bytes == 12 * adapters / 4
    assert lora.allocated_peak_bytes < full.allocated_peak_bytes


def layer(kb, **over):
    cfg = replace(TINY, **over)
    c = constants(kb)
    s = resolve(cfg, c, [])
    ctx = _act_context(cfg, s, c, act_inputs(cfg, cfg.micro_batch_size))
    return layer_activations(arch_from_config(cfg, s.tp, c["megatron-defaults"]), ctx)["T"].saved


def test_layer_activations_hand_computed(kb):
    # 16 tokens; SP shards the 16-wide residual stream over TP 2 -> 128 elements
    attention = 2 * 128 + 2 * 128 + 2 * 16 * (2 + 2) * 4 + 2 * 16 * (2 + 1) * 4 + 4 * 16 * 2 + 2 * 16 * 8
    mlp = 2 * 128 + 2 * 128 + 2 * 16 * 64 / 2 + 2 * 16 * 32 / 2
    assert layer(kb) == attention + mlp == 3840
    assert layer(kb, sequence_parallel=False) == 3840 + 4 * 128 * 2  # norm tensors no longer sharded
    assert layer(kb, hidden_dropout=0.1) == 3840 + 2 * 128  # one-byte masks after attention and MLP


def test_selective_recompute_modules(kb):
    assert layer(kb, recompute_granularity="selective", recompute_modules=["mlp"]) == 3840 - 2048 + 2 * 128
    assert layer(kb, recompute_granularity="selective", recompute_modules=["core_attn"]) == 3840 - 4 * 16 * 2
    unfused = layer(kb, attention_backend="unfused", attention_dropout=0.1)
    scores = 2 * 2 * 8 * 8  # mbs x heads/TP x s x s
    assert unfused == 3840 - 4 * 16 * 2 + 5 * scores  # softmax out 2 + mask 1 + dropout out 2 bytes
    assert layer(kb, attention_backend="unfused", attention_dropout=0.1, recompute_granularity="selective",
                 recompute_modules=["core_attn"]) == 3840 - 4 * 16 * 2


def test_fp8_saves_linear_inputs_in_one_byte(kb):
    assert layer(kb, fp8="hybrid") == 3840 - 128 - 128 - 256 + 128  # norm outputs and fc2 input halve


def test_lora_sequence_parallel_input_regather(kb):
    base = layer(kb, peft="lora", peft_dim=2)
    regather = layer(kb, peft="lora", peft_dim=2, sequence_parallel_input_regather=True)
    # two re-gatherable copies of the 16x16 norm output shrink to the TP shard at linear_qkv and linear_fc1
    assert base - regather == 2 * 2 * 2 * (256 - 128)


def test_full_recompute_keeps_layer_inputs(kb):
    full = est(kb, recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)
    none = est(kb)
    assert full.stages[0].activations_bytes < none.stages[0].activations_bytes
    block = est(kb, recompute_granularity="full", recompute_method="block", recompute_num_layers=1)
    assert full.stages[0].activations_bytes <= block.stages[0].activations_bytes


def test_logits_on_last_stage(kb):
    native = est(kb, vocab_size=4096).stages
    assert native[0].logits_bytes == 0
    n = 16 * 4096 / 2  # tokens x vocabulary / TP
    assert native[1].logits_bytes == 4 * n + 2 * n  # fp32 softmax kept + bf16 logits beside it at the loss
    te = est(kb, vocab_size=4096, cross_entropy_loss_fusion=True, cross_entropy_fusion_impl="te").stages[1]
    assert te.logits_bytes == 2 * n  # loss and gradient computed in place in the bf16 logits
    unfused_wgrad = est(kb, vocab_size=4096, gradient_accumulation_fusion=False).stages[1]
    assert unfused_wgrad.logits_bytes >= native[1].logits_bytes


def test_in_flight_and_peak_stage(kb):
    e = est(kb)
    assert [s.in_flight_microbatches for s in e.stages] == [[2], [1]]
    assert e.peak_bytes == max(s.allocated_peak_bytes for s in e.stages)
    st = e.stages[0]
    assert st.total_bytes == pytest.approx(st.weights_bytes + st.grads_bytes + st.optimizer_bytes
                                           + st.activations_bytes + st.other_bytes)
    assert st.peak_with_overheads_bytes > st.allocated_peak_bytes


def test_json_contract(kb):
    d = est(kb).to_dict()
    assert {"mode", "stages", "peak_stage", "peak_bytes", "breakdown", "assumptions"} <= set(d)
    for stage in d["stages"]:
        assert {"pp_rank", "weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "other_bytes",
                "total_bytes", "allocated_peak_bytes"} <= set(stage)


def test_summarize_facts(kb):
    gpu = GpuFacts(name="H100 80GB", capacity_bytes=80e9)
    s = summarize(est(kb), gpu)
    assert set(s) == {"peak_bytes", "peak_stage", "peak_with_overheads_bytes", "capacity_ratio", "model_state_bytes",
                      "activation_bytes", "logits_bytes", "dominant", "stage_imbalance_ratio"}
    assert s["capacity_ratio"] == pytest.approx(s["peak_with_overheads_bytes"] / 80e9)
    assert s["dominant"] in {"model-state", "activations", "logits"}
    assert s["stage_imbalance_ratio"] >= 1
    assert summarize(est(kb), None)["capacity_ratio"] is None


def test_incomplete_or_invalid_layouts_are_user_errors(kb):
    with pytest.raises(UserError, match="seq_length"):
        estimate(replace(TINY, seq_length=None), kb=kb)
    with pytest.raises(UserError, match="divide"):
        estimate(replace(TINY, pipeline_model_parallel_size=3), kb=kb)
    with pytest.raises(UserError, match="mode"):
        estimate(TINY, kb=kb, mode="guess")


def test_mode_bridge_has_bridge_block(kb):
    d = estimate(TINY, kb=kb, mode="bridge", num_microbatches=4).to_dict()
    assert d["mode"] == "bridge" and set(d["bridge"]) >= {"weight_and_optimizer_bytes", "activation_bytes",
                                                            "total_bytes"}
    assert d["peak_bytes"] == d["bridge"]["total_bytes"]


def test_activation_offloading(kb):
    base = layer(kb)
    # fine-grained offload of the attention norm input and the QKV input, half of each moved to host
    half = layer(kb, fine_grained_activation_offloading=True, offload_modules=["attn_norm", "qkv_linear"],
                 activation_offload_fraction=0.5)
    assert base - half == 0.5 * (2 * 128 + 2 * 128)
    layers = est(kb, pipeline_model_parallel_size=1).stages[0].activations_bytes
    offloaded = est(kb, pipeline_model_parallel_size=1, cpu_offloading=True, cpu_offloading_num_layers=2)
    assert offloaded.stages[0].activations_bytes < layers


@pytest.mark.parametrize("scope, moved", [(["mlp"], {"mlp"}), (["attn"], {"attn"}), (None, {"attn", "mlp", "mamba"}),
                                          (["attn", "mlp"], {"attn", "mlp"})])
def test_captured_modules_keep_their_activations_in_the_graph_pool(kb, scope, moved):
    """Per-layer CUDA graphs: what a captured module saves lives in the graph's private pool, reserved but not
    allocated; the eager estimate's activations split exactly into the allocated part and the pooled part."""
    from memtune.estimator.rank_activations import graphed_modules

    cfg = replace(TINY, cuda_graph_impl="transformer_engine", cuda_graph_scope=scope)
    assert graphed_modules(cfg) == frozenset(moved)
    graphed, eager = est(kb, cuda_graph_impl="transformer_engine", cuda_graph_scope=scope), est(kb)
    for g, e in zip(graphed.stages, eager.stages, strict=True):
        assert g.graph_pool_activations_bytes > 0
        assert g.activations_bytes + g.graph_pool_activations_bytes == pytest.approx(e.activations_bytes)
        assert g.reserved_bytes >= g.allocated_peak_bytes + g.graph_pool_activations_bytes - 1e-6
    assert graphed_modules(replace(TINY, cuda_graph_impl="none", cuda_graph_scope=["mlp"])) == frozenset()


@pytest.mark.parametrize("graph", [{"cuda_graph_impl": "full_iteration"},
                                   {"cuda_graph_impl": "local", "cuda_graph_scope": ["full_iteration"]}])
def test_full_iteration_graph_pool_is_the_eager_peak_plus_what_capture_cannot_reuse(kb, graph):
    """A full-iteration graph allocates the whole forward and backward in its pool while it is captured: the
    allocated peak is the eager one.  With graph_capture_record_stream_reuse nothing more is reserved; without
    it the blocks capture could not reuse are reserved on top, a measured share of the captured bytes."""
    frag = constants(kb)["graph-capture-fragmentation"]
    eager = est(kb)
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    reuse = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,graph_capture_record_stream_reuse:True"}
    plain = estimate(replace(TINY, **graph), kb=kb, num_microbatches=4, env=env)
    reused = estimate(replace(TINY, **graph), kb=kb, num_microbatches=4, env=reuse)
    eager_env = estimate(TINY, kb=kb, num_microbatches=4, env=env)
    for e, ee, p, r in zip(eager.stages, eager_env.stages, plain.stages, reused.stages, strict=True):
        assert p.allocated_peak_bytes == pytest.approx(e.allocated_peak_bytes)
        assert r.reserved_bytes == pytest.approx(ee.reserved_bytes)  # nothing beyond the eager run
        captured = e.activations_bytes + e.logits_bytes
        assert p.graph_pool_activations_bytes == pytest.approx(captured * frag["default"])
        assert p.reserved_bytes - r.reserved_bytes == pytest.approx(captured * frag["default"])
    assert frag["record_stream_reuse"] == 0 < frag["default"]
