"""One set of defaults for what a run leaves unsaid, and layouts Megatron refuses are refused, not estimated."""

from __future__ import annotations

import json
from dataclasses import replace

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
