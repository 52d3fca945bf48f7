"""Properties every estimate must have, over generated layouts: more sharding never costs memory."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from memtune import knowledge
from memtune.estimator import estimate
from memtune.estimator.models import preset

KB = knowledge.load()  # module-level: a fixture argument would bloat hypothesis' failure reports
FAST = settings(max_examples=25, deadline=None)

layouts = st.fixed_dictionaries({
    "micro_batch_size": st.sampled_from([1, 2]),
    "seq_length": st.sampled_from([2048, 4096, 8192]),
    "global_batch_size": st.sampled_from([64, 128]),
    "use_distributed_optimizer": st.booleans(),
    "grad_reduce_in_fp32": st.booleans(),
    "fp8": st.sampled_from([None, "hybrid"]),
    "recompute_granularity": st.sampled_from([None, "selective"]),
})


def dense(**layout):
    base = replace(preset("llama3-8b", KB), world_size=64, sequence_parallel=True, bf16=True)
    return replace(base, **layout)


def peak(cfg) -> float:
    return estimate(cfg, kb=KB).peak_bytes


@FAST
@given(layout=layouts)
def test_more_tensor_parallelism_never_costs_memory(layout):
    peaks = [peak(dense(tensor_model_parallel_size=tp, pipeline_model_parallel_size=1, **layout))
             for tp in (1, 2, 4, 8)]
    assert peaks == sorted(peaks, reverse=True)


@FAST
@given(layout=layouts)
def test_more_pipeline_parallelism_never_costs_memory(layout):
    peaks = [peak(dense(tensor_model_parallel_size=2, pipeline_model_parallel_size=pp, **layout))
             for pp in (1, 2, 4, 8)]
    assert peaks == sorted(peaks, reverse=True)


@FAST
@given(layout=layouts)
def test_more_data_parallel_sharding_never_costs_memory(layout):
    layout = {**layout, "use_distributed_optimizer": True}
    peaks = [peak(dense(tensor_model_parallel_size=2, pipeline_model_parallel_size=2, world_size=ws,
                            global_batch_size=ws * 2, **{k: v for k, v in layout.items() if k != "global_batch_size"}))
             for ws in (4, 16, 64)]
    assert peaks == sorted(peaks, reverse=True)


@FAST
@given(layout=layouts)
def test_more_expert_parallelism_never_costs_memory(layout):
    base = replace(preset("qwen3-30b-a3b", KB), world_size=64, tensor_model_parallel_size=1,
                   pipeline_model_parallel_size=2, bf16=True)
    peaks = [peak(replace(base, expert_model_parallel_size=ep, **layout)) for ep in (1, 2, 4, 8, 16)]
    assert peaks == sorted(peaks, reverse=True)


@FAST
@given(layout=layouts, tp=st.sampled_from([1, 2, 4]))
def test_lora_needs_less_than_full_fine_tuning(layout, tp):
    # With SP, LoRA keeps the all-gathered LoRA-A inputs unless sequence_parallel_input_regather keeps the local
    # shard; at long sequences and high TP those gathered inputs can outweigh the frozen weights' gradients and
    # optimizer state (the reason the option exists), so the comparison uses the recommended setting.
    layout = {**layout, "micro_batch_size": 1}
    cfg = dense(tensor_model_parallel_size=tp, pipeline_model_parallel_size=2, **layout)
    lora = replace(cfg, peft="lora", peft_dim=16, sequence_parallel_input_regather=True)
    assert peak(lora) < peak(cfg)


@FAST
@given(layout=layouts)
def test_regather_never_costs_memory(layout):
    cfg = dense(tensor_model_parallel_size=4, pipeline_model_parallel_size=2, peft="lora", peft_dim=16, **layout)
    assert peak(replace(cfg, sequence_parallel_input_regather=True)) < peak(cfg)


@FAST
@given(layout=layouts, modules=st.sampled_from([["core_attn"], ["mlp"], ["layernorm"], ["core_attn", "mlp"]]),
       tp=st.sampled_from([1, 4]), backend=st.sampled_from(["flash", "unfused"]))
def test_full_recompute_le_selective_le_none(layout, modules, tp, backend):
    cfg = dense(tensor_model_parallel_size=tp, pipeline_model_parallel_size=2, attention_backend=backend,
                **{k: v for k, v in layout.items() if k != "recompute_granularity"})
    none = peak(cfg)
    selective = peak(replace(cfg, recompute_granularity="selective", recompute_modules=modules))
    full = peak(replace(cfg, recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1))
    assert full <= selective <= none


@FAST
@given(layout=layouts)
def test_stage_peaks_add_up(layout):
    e = estimate(dense(tensor_model_parallel_size=2, pipeline_model_parallel_size=4,
                       virtual_pipeline_model_parallel_size=2, **layout), kb=KB)
    assert e.peak_bytes == max(s.allocated_peak_bytes for s in e.stages)
    for s in e.stages:
        parts = s.weights_bytes + s.grads_bytes + s.optimizer_bytes + s.activations_bytes + s.other_bytes
        assert abs(parts - s.total_bytes) <= 1e-6 * s.total_bytes
        assert s.allocated_peak_bytes >= s.total_bytes
        assert s.peak_with_overheads_bytes > s.allocated_peak_bytes


def test_routing_config_decides_the_expert_load():
    """Forced balancing splits tokens evenly; a capacity factor caps them; only a learned router uses the fit."""
    from memtune.estimator.rank_activations import token_imbalance

    base = replace(preset("qwen3-30b-a3b", KB), world_size=16, expert_model_parallel_size=16, seq_length=4096,
                   micro_batch_size=1, global_batch_size=64, bf16=True)
    learned = KB.get("estimator", "moe-token-imbalance")["value"]
    assert token_imbalance(base, learned) == learned
    assert token_imbalance(replace(base, moe_router_force_load_balancing=True), learned) == 1.0
    assert token_imbalance(replace(base, moe_expert_capacity_factor=1.25), learned) == min(learned, 1.25)
    assert token_imbalance(replace(base, moe_expert_capacity_factor=2.0, moe_pad_expert_input_to_capacity=True),
                           learned) == 2.0
    forced = replace(base, moe_router_force_load_balancing=True)
    assert peak(forced) < peak(base)
    dense_cfg = dense(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, seq_length=4096,
                      global_batch_size=64)
    assert peak(replace(dense_cfg, moe_router_force_load_balancing=True)) == peak(dense_cfg)  # no experts: no effect


@FAST
@given(layout=layouts)
def test_more_context_parallelism_never_costs_memory(layout):
    layout = {**layout, "seq_length": max(layout["seq_length"], 8192)}  # divisible by 2 x CP for every CP here
    peaks = [peak(dense(tensor_model_parallel_size=2, pipeline_model_parallel_size=1, context_parallel_size=cp,
                        **layout)) for cp in (1, 2, 4)]
    assert peaks == sorted(peaks, reverse=True)


@FAST
@given(layout=layouts, tp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2, 4, 8]))
def test_moe_sharding_never_costs_memory_on_valid_layouts(layout, tp, ep):
    """Qwen3-30B-A3B: more TP (with SP, as Megatron requires for MoE) or EP never raises the peak.

    At a fixed schedule: the global batch keeps at least PP micro-batches per step whatever DP is, since
    fewer DP ranks than that put more micro-batches in flight on stage 0, which does cost memory.
    """
    from memtune.defaults import refuse_invalid
    from memtune.facts import EnvFacts

    layout = {**layout, "global_batch_size": 64 * layout["micro_batch_size"] * 2}
    base = replace(preset("qwen3-30b-a3b", KB), world_size=64, pipeline_model_parallel_size=2, bf16=True, **layout)
    cfg = replace(base, tensor_model_parallel_size=tp, sequence_parallel=tp > 1, expert_model_parallel_size=ep)
    refuse_invalid(cfg, EnvFacts(), KB)  # every layout generated here is one Megatron accepts
    if tp < 4:
        assert peak(replace(cfg, tensor_model_parallel_size=tp * 2, sequence_parallel=True)) <= peak(cfg)
    if ep < 8:
        assert peak(replace(cfg, expert_model_parallel_size=ep * 2)) <= peak(cfg)
