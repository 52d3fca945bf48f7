"""The planner's traffic costs: FSDP gathers, the distributed optimizer's step traffic and layer offload, each
compared with the compute that hides it (planner/traffic.py, knowledge/costs.yaml).  Properties of the mechanism,
not values of one run."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import pytest
from memtune.cli import main
from memtune.estimator.models import preset
from memtune.inputs.gpu import lookup_gpu
from memtune.planner import costs as cost_model
from memtune.planner import traffic as traffic_model
from memtune.planner.options import load


def _costs(kb):
    return load(kb).costs


def _setup(kb, gpu_name, model="llama3-70b", precision="fp8-tensorwise"):
    gpu = lookup_gpu(gpu_name, kb)
    hw = traffic_model.hardware(gpu, precision, _costs(kb))
    counts = traffic_model.counts_of(preset(model, kb), kb)
    return gpu, hw, counts


def _factor(kb, cost_id, t):
    return cost_model.product(cost_model.option_reasons(_costs(kb), [cost_id], t))


def _traffic(counts, hw, gpu, **over):
    args = dict(tp=1, pp=1, cp=1, ep=1, etp=1, dp=64, mbs=1, seq=8192, microbatches=2,
                gpus_per_domain=gpu.nvlink_domain, dispatcher="alltoall", frozen=False, grad_bytes=4)
    args.update(over)
    return traffic_model.traffic(counts, hw, **args)


def test_every_gpu_with_speeds_gives_hardware(kb):
    for entry in kb.entries("gpus"):
        if entry.get("hardware"):
            gpu = lookup_gpu(entry["name"], kb)
            assert traffic_model.hardware(gpu, "bf16", _costs(kb)) is not None, entry["id"]


def test_fsdp_hides_inside_one_nvlink_domain_and_not_across_nodes(kb):
    """The same 70B TP 8 layout over 64 GPUs at 4K tokens: an NVL72 domain carries the gathers, eight H100 nodes with
    one data-parallel peer each (TP 8 fills a node) pass them through one 400 Gb/s link per GPU and wait."""
    g_nvl, hw_nvl, counts = _setup(kb, "GB200")
    g_hgx, hw_hgx, _ = _setup(kb, "H100")
    inside = _factor(kb, "megatron-fsdp", _traffic(counts, hw_nvl, g_nvl, tp=8, dp=8, seq=4096))
    across = _factor(kb, "megatron-fsdp", _traffic(counts, hw_hgx, g_hgx, tp=8, dp=8, seq=4096))
    assert inside == pytest.approx(1.0)
    assert across < 0.9


def test_a_ring_across_nodes_shares_the_nodes_network_links(kb):
    """A data-parallel ring over 64 H100s with eight peers per node crosses each node once per ring, so NCCL's rings
    spread those crossings over the node's eight links: per byte a GPU holds, an eighth of one link's time; with one
    peer per node (TP 8) every crossing is that GPU's own."""
    gpu, hw, counts = _setup(kb, "H100")
    tp1, tp8 = _traffic(counts, hw, gpu), _traffic(counts, hw, gpu, tp=8, dp=8)
    held1, held8 = (counts.dense - counts.lookup) / 1, (counts.dense - counts.lookup) / 8
    assert tp1.param_seconds == pytest.approx(counts.dense / 1 * 63 / 64 / (8 * hw.network))
    assert tp8.param_seconds == pytest.approx(counts.dense / 8 * 7 / 8 / hw.network)
    assert held1 > held8


def test_fsdp_cost_falls_with_more_tokens_per_micro_batch_and_with_model_parallelism(kb):
    gpu, hw, counts = _setup(kb, "H100")
    base = _factor(kb, "megatron-fsdp", _traffic(counts, hw, gpu, tp=8, dp=8, seq=4096))
    assert base < _factor(kb, "megatron-fsdp", _traffic(counts, hw, gpu, tp=8, dp=8, seq=4096, mbs=4, microbatches=1))
    # inside one NVLink domain TP 8 moves an eighth of the parameters, (DP - 1) / DP of them, against an eighth of the
    # compute
    g_nvl, hw_nvl, _ = _setup(kb, "GB200")
    tp1, tp8 = (_traffic(counts, hw_nvl, g_nvl, tp=tp, dp=64 // tp, seq=4096) for tp in (1, 8))
    assert tp8.param_seconds / tp8.flop_seconds == pytest.approx(
        tp1.param_seconds / tp1.flop_seconds * (7 / 8) / (63 / 64), rel=0.02)


def test_step_traffic_hides_better_with_more_micro_batches(kb):
    gpu, hw, counts = _setup(kb, "H100")
    factors = [_factor(kb, "distributed-optimizer", _traffic(counts, hw, gpu, microbatches=m)) for m in (1, 4, 16)]
    assert factors == sorted(factors)
    assert all(0 < f <= 1 for f in factors)


def test_layer_offload_is_cheaper_over_c2c_than_over_pcie(kb):
    g_nvl, hw_nvl, counts = _setup(kb, "GB200")
    g_hgx, hw_hgx, _ = _setup(kb, "H100")
    for cid in ("activation-offload-quarter", "activation-offload-half"):
        c2c = _factor(kb, cid, _traffic(counts, hw_nvl, g_nvl))
        pcie = _factor(kb, cid, _traffic(counts, hw_hgx, g_hgx))
        assert c2c > pcie
    # offloading more layers never costs less
    t = _traffic(counts, hw_hgx, g_hgx)
    assert _factor(kb, "activation-offload-half", t) <= _factor(kb, "activation-offload-quarter", t)


def test_fp8_compute_makes_the_same_traffic_more_exposed(kb):
    gpu, hw_fp8, counts = _setup(kb, "H100", precision="fp8")
    _, hw_bf16, _ = _setup(kb, "H100", precision="bf16")
    assert hw_fp8.flops > hw_bf16.flops
    fp8 = _factor(kb, "megatron-fsdp", _traffic(counts, hw_fp8, gpu))
    bf16 = _factor(kb, "megatron-fsdp", _traffic(counts, hw_bf16, gpu))
    assert fp8 <= bf16


def test_moe_experts_count_in_the_shard_but_only_top_k_in_the_compute(kb):
    counts = traffic_model.counts_of(preset("qwen3-30b-a3b", kb), kb)
    assert counts.experts > 0
    assert counts.experts_active < counts.experts / 10  # top-8 of 128 experts


def _plan_json(model, gpu, gpus, seq, gbs, top):
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["plan", "--model", model, "--gpu", gpu, "--gpus", str(gpus), "--seq-length", str(seq),
                     "--global-batch-size", str(gbs), "--format", "json", "--top", str(top)])
    assert code == 0
    return json.loads(out.getvalue())


def test_plan_without_gpu_speeds_says_traffic_is_not_costed(kb):
    kinds = {w["kind"] for w in _plan_json("llama3-8b", "L40S", 8, 4096, 64, 2)["warnings"]}
    assert "no-hardware" in kinds


def test_plan_reasons_name_the_traffic(kb):
    layouts = _plan_json("llama3-70b", "H100", 64, 8192, 128, 20)["layouts"]
    fsdp = [lay for lay in layouts if lay["model_state"] == "megatron-fsdp"]
    assert fsdp
    for lay in fsdp:
        reason = next(r for r in lay["reasons"] if r["cost"] == "megatron-fsdp")
        assert "ms of gathers per micro-batch" in reason["detail"]


def test_estimate_reads_a_recipe_precision_string(capsys):
    code = main(["estimate", "--model", "llama3-8b", "--set", "mixed_precision=bf16_with_fp8_current_scaling_mixed",
                 "--set", "seq_length=4096", "--gpu", "H100", "--format", "json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["peak_bytes"] > 0


def test_stage_balance_sees_the_output_layer_on_the_last_stage(kb):
    cfg = preset("llama3-70b", kb)
    arch = traffic_model.arch_of(cfg, kb)
    pp4, pp8 = (traffic_model.stage_balance(arch, cfg, pp, 5, 4096) for pp in (4, 8))
    assert traffic_model.stage_balance(arch, cfg, 1, 1, 4096) == 1.0
    assert pp8 < pp4 < 1.0
    # the recipe way out: embedding and loss count as layers, so the last chunk holds one decoder layer fewer
    from dataclasses import replace

    split = replace(cfg, num_layers=78, account_for_embedding_in_pipeline_split=True,
                    account_for_loss_in_pipeline_split=True)
    even = replace(cfg, num_layers=80)
    assert traffic_model.stage_balance(traffic_model.arch_of(split, kb), split, 4, 5, 4096) > pp4
    assert traffic_model.stage_balance(traffic_model.arch_of(even, kb), even, 4, 5, 4096) == pytest.approx(pp4)


def test_cp_exchange_hides_better_on_longer_sequences_and_inside_the_domain(kb):
    gpu, hw, counts = _setup(kb, "H100")
    space_costs = _costs(kb)
    ctx = cost_model.ShapeContext(hidden_size=8192, num_layers=80, seq_length=0, gpus_per_node=8, moe=False)

    def cp_factor(seq, tp, cp):
        t = _traffic(counts, hw, gpu, tp=tp, cp=cp, dp=1, seq=seq)
        reasons = cost_model.parallel_reasons(space_costs, ctx, tp=tp, pp=1, vpp=1, cp=cp,
                                              microbatches=2, traffic=t)
        return cost_model.product(r for r in reasons if r.cost == "cp-communication")

    # TP 4 x CP 4 spans two 8-GPU domains: the ring runs over the network
    assert cp_factor(2048, 4, 4) < cp_factor(32768, 4, 4) == 1.0  # longer chunks, more attention to hide behind
    assert cp_factor(2048, 4, 4) < cp_factor(2048, 2, 4) == 1.0  # TP 2 x CP 4 stays on NVLink


def test_expert_compute_per_gpu_does_not_depend_on_etp(kb):
    """At TP 2 a rank's experts compute half the routed work whether ETP is 2 (tokens gathered, half of each
    expert) or 1 (its own tokens, whole experts); ETP changes how many expert weights a GPU holds, not its FLOPs:
    the time apart is exactly the weights it reads and the gradients it accumulates once per micro-batch."""
    gpu, hw, counts = _setup(kb, "H100", model="qwen3-30b-a3b")
    etp1 = _traffic(counts, hw, gpu, tp=2, ep=8, etp=1, dp=8)
    etp2 = _traffic(counts, hw, gpu, tp=2, ep=8, etp=2, dp=8)
    tp1 = _traffic(counts, hw, gpu, tp=1, ep=8, etp=1, dp=16)
    held = counts.experts / 8 - counts.experts / 16  # the expert weights ETP 1 holds beyond ETP 2
    weight_time = held * (hw.weight_bytes + hw.grad_passes * 4) / hw.hbm  # default fp32 gradient buffers
    assert etp1.mb_seconds - etp2.mb_seconds == pytest.approx(weight_time)
    assert weight_time > 0
    assert etp1.mb_seconds < tp1.mb_seconds


def test_fp8_casts_follow_the_recipe_and_the_gpu(kb):
    """Current scaling reads a tensor once more for its amax; a second FP8 layout costs one more byte where per-tensor
    scaling needs the transpose (Hopper) and always for MXFP8 / blockwise."""
    cast = dict(_costs(kb)["memory-traffic"]["params"])
    assert traffic_model.fp8_cast_bytes("fp8-tensorwise", "hopper", cast) == 6
    assert traffic_model.fp8_cast_bytes("fp8-tensorwise", "blackwell", cast) == 5
    assert traffic_model.fp8_cast_bytes("fp8-delayed", "hopper", cast) == 4
    assert traffic_model.fp8_cast_bytes("fp8-mxfp8", "blackwell", cast) == 4
    bf16 = traffic_model.hardware(lookup_gpu("H100", kb), "bf16", _costs(kb))
    assert bf16.cast_bytes == 0 and bf16.attention == bf16.flops


def test_fp8_gains_less_on_small_experts_than_on_a_dense_model(kb):
    """FP8 halves a GEMM's time but not the bytes around it: a 70B dense layer gains more from it than Qwen3-30B-A3B's
    small experts, whose casts, permutations and weight reads are a larger share of the step."""
    def gain(model, **sizes):
        out = []
        for precision in ("bf16", "fp8-tensorwise"):
            gpu, hw, counts = _setup(kb, "H100", model=model, precision=precision)
            out.append(_traffic(counts, hw, gpu, **sizes).mb_seconds)
        return out[0] / out[1]

    dense, moe = gain("llama3-70b", tp=4, dp=16), gain("qwen3-30b-a3b", ep=8, dp=64)
    assert 1.0 < moe < dense < 2.0


def test_a_larger_micro_batch_reads_the_weights_for_more_tokens(kb):
    """Weights are read and gradients accumulated once per micro-batch: the time per token falls as it grows, most
    for a GPU holding many experts (EP 1)."""
    gpu, hw, counts = _setup(kb, "B200", model="qwen3-30b-a3b", precision="fp8-mxfp8")

    def per_token(mbs, ep):
        return _traffic(counts, hw, gpu, mbs=mbs, ep=ep, dp=8, seq=4096).mb_seconds / mbs

    assert per_token(4, 1) < per_token(1, 1) and per_token(4, 8) < per_token(1, 8)
    assert per_token(1, 1) / per_token(4, 1) > per_token(1, 8) / per_token(4, 8)
