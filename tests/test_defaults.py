"""One set of defaults for what a run leaves unsaid; layouts Megatron refuses as stated are refused, not estimated."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from memtune import cli, knowledge, pipeline
from memtune.defaults import fill_unstated, refuse_invalid
from memtune.errors import UserError
from memtune.estimator.models import preset
from memtune.facts import EnvFacts

KB = knowledge.load()


def _estimate_json(capsys, *args) -> dict:
    assert cli.main(["estimate", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_bridge_runs_take_the_recipe_settings_megatron_args_keep_core_defaults():
    cfg = replace(preset("llama3-8b", KB), tensor_model_parallel_size=2)
    filled = fill_unstated(cfg, KB)
    assert filled.use_distributed_optimizer is True and filled.sequence_parallel is True
    assert set(filled.assumed) >= {"use_distributed_optimizer", "sequence_parallel"}
    stated = fill_unstated(replace(cfg, use_distributed_optimizer=False), KB)
    assert stated.use_distributed_optimizer is False and "use_distributed_optimizer" not in stated.assumed
    megatron = replace(cfg, source="megatron-args")
    assert fill_unstated(megatron, KB) is megatron


def test_estimate_and_diagnose_assume_the_same_optimizer_sharding(capsys):
    """The reviewer's Llama3-8B case: diagnose assumed the distributed optimizer on, estimate off (56 vs 135 GiB)."""
    est = _estimate_json(capsys, "--model", "llama3-8b", "--world-size", "8", "--set", "seq_length=8192",
                         "--gpu", "H100")
    facts = pipeline.collect_facts(pipeline.Inputs(question="Llama3-8B pretraining on 8xH100, seq 8192, OOM"), KB)
    assert facts.config.use_distributed_optimizer is True
    assert "dist-opt-recipe" in est["assumption_ids"] and "dist-opt-unknown" not in est["assumption_ids"]
    assert est["peak_bytes"] == pytest.approx(facts.estimate["peak_bytes"], rel=0.02)


def test_estimate_table_columns_add_up_to_the_allocated_peak(capsys):
    assert cli.main(["estimate", "--model", "llama3-8b", "--world-size", "8", "--set", "seq_length=8192",
                     "--format", "text"]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = [float(x) for x in lines[3].split()[3:]]  # after PP rank, layers, micro-batches in flight
    *parts, peak, _with_overheads = row
    assert sum(parts) == pytest.approx(peak, abs=0.02)


def test_moe_with_tp_and_no_sequence_parallelism_is_refused_with_the_upstream_text(capsys):
    args = ["estimate", "--model", "qwen3-30b-a3b", "--set", "tensor_model_parallel_size=2",
            "--set", "sequence_parallel=false", "--world-size", "16"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "performance may degrade if MoE and tensor parallelism" in err and err.count("\n") == 1
    cfg = replace(preset("qwen3-30b-a3b", KB), tensor_model_parallel_size=2, sequence_parallel=False)
    with pytest.raises(UserError, match="expert-tp-needs-sequence-parallel"):
        refuse_invalid(cfg, EnvFacts(), KB)
    refuse_invalid(replace(cfg, sequence_parallel=True), EnvFacts(), KB)  # the valid twin passes


@pytest.mark.parametrize(("field", "value", "constraint"), [
    ("pipeline_model_parallel_size", 5, "pp-divides-layers"),  # 48 layers
    ("tensor_model_parallel_size", 3, "tp-divides-attention-heads"),
    ("expert_model_parallel_size", 3, "ep-divides-experts"),
])
def test_layouts_megatron_cannot_build_are_refused(field, value, constraint):
    cfg = replace(preset("qwen3-30b-a3b", KB), sequence_parallel=True, **{field: value})
    with pytest.raises(UserError, match=constraint):
        refuse_invalid(cfg, EnvFacts(), KB)


QWEN3_MOE_HF = "--hf-config", str(Path(__file__).resolve().parents[2] / "shared/fixtures/hf-configs/Qwen3-30B-A3B.json")
MOE_ACT_LAYOUT = ("--set", "pipeline_model_parallel_size=4", "--set", "expert_model_parallel_size=2",
                  "--set", "micro_batch_size=4", "--set", "seq_length=4096", "--set", "recompute_granularity=selective",
                  "--set", "recompute_modules=[moe_act]", "--world-size", "8")


@pytest.mark.skipif(not Path(QWEN3_MOE_HF[1]).is_file(), reason="needs ../shared beside the repository")
def test_an_hf_moe_config_run_the_bridge_way_gets_grouped_gemm_and_is_estimated(capsys):
    """Issue 25: recompute_modules=[moe_act] on an HF MoE config that says nothing of grouped GEMM was refused
    ("moe_act needs grouped GEMM") although Bridge's MoE providers turn it on; now assumed on and said so."""
    est = _estimate_json(capsys, *QWEN3_MOE_HF, *MOE_ACT_LAYOUT)
    assert "grouped-gemm-recipe" in est["assumption_ids"]
    assert not any("refused upstream" in w for w in est["warnings"])


def test_a_breach_resting_on_an_unstated_setting_is_estimated_and_named_not_refused():
    cfg = replace(preset("qwen3-30b-a3b", KB), moe_grouped_gemm=None, recompute_granularity="selective",
                  recompute_modules=["moe_act"])
    warnings = refuse_invalid(cfg, EnvFacts(), KB)
    assert len(warnings) == 1 and "moe-act-recompute-needs-grouped-gemm" in warnings[0]
    assert "moe_grouped_gemm" in warnings[0].split("rests on", 1)[1]
    with pytest.raises(UserError, match="moe-act-recompute-needs-grouped-gemm"):  # stated off: Megatron refuses it
        refuse_invalid(replace(cfg, moe_grouped_gemm=False), EnvFacts(), KB)
    with pytest.raises(UserError):  # a Megatron-LM argument list without --moe-grouped-gemm states it off
        refuse_invalid(replace(cfg, source="megatron-args"), EnvFacts(), KB)
    assert refuse_invalid(replace(cfg, moe_grouped_gemm=True), EnvFacts(), KB) == []



def test_hf_family_frameworks_state_their_gradient_checkpointing_as_an_assumption():
    """LLaMA-Factory and ms-swift turn the HF Trainer's gradient checkpointing on unless told not to: an estimate that
    keeps every layer's activations overstates them (the long-context cases ranked activations above the logits)."""
    said = "LLaMA-Factory LoRA SFT of Qwen2-7B, cutoff_len 32768, per_device_train_batch_size 1, 2 x A100 80GB, OOM"
    facts = pipeline.collect_facts(pipeline.Inputs(question=said), KB)
    assert facts.config.recompute_granularity == "full" and "recompute_granularity" in facts.config.assumed
    for off in ("disable_gradient_checkpointing: true", "--gradient_checkpointing false"):
        facts = pipeline.collect_facts(pipeline.Inputs(question=f"{said}, {off}"), KB)
        assert facts.config.recompute_granularity is None, off
    megatron = pipeline.collect_facts(pipeline.Inputs(question=said.replace("LLaMA-Factory", "Megatron-LM")), KB)
    assert megatron.config.recompute_granularity is None  # Megatron's default is no recompute
    stated = fill_unstated(replace(preset("llama3-8b", KB), recompute_granularity="selective"), KB, recompute="full")
    assert stated.recompute_granularity == "selective" and "recompute_granularity" not in stated.assumed
