"""The memory ledger and the simulated fixes, end to end through the pipeline.

What the issue's Done-when names: ``ledger`` in the JSON, a predicted peak on the failing stage for every
config fix when a config (or a model + layout) is known, the ledger table and each fix's predicted effect in
the Markdown, the seed question, fixes that cannot help the phase, and config errors as their own verdict.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
sys.path.insert(0, str(SKILL / "scripts"))

from memtune import knowledge, pipeline, report  # noqa: E402
from memtune.ledger import share  # noqa: E402
from memtune.render.render import render_markdown  # noqa: E402

KB = knowledge.load()
GIB = 2**30
EXAMPLES = SKILL / "examples"
LLAMA70B = ["model.num_layers=80", "model.hidden_size=8192", "model.num_attention_heads=64",
            "model.num_query_groups=8", "model.ffn_hidden_size=28672", "model.vocab_size=128256",
            "model.seq_length=8192", "model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=4",
            "train.micro_batch_size=1", "train.global_batch_size=32"]


def run(**kw):
    facts, flat, diag = pipeline.run(pipeline.Inputs(**kw), KB)
    return facts, diag, report.build(diag, flat, KB, facts.question.lang or "en")


def oom(request_gib: float, free_gib: float, allocated_gib: float, unalloc_gib: float, cap_gib: float = 79.11,
        process_gib: float | None = None) -> str:
    process = process_gib if process_gib is not None else allocated_gib + unalloc_gib + 0.6
    return (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {request_gib:.2f} GiB. GPU 0 has a total "
            f"capacity of {cap_gib:.2f} GiB of which {free_gib:.2f} GiB is free. Including non-PyTorch memory, this "
            f"process has {process:.2f} GiB memory in use. Of the allocated memory {allocated_gib:.2f} GiB is "
            f"allocated by PyTorch, and {unalloc_gib:.2f} GiB is reserved by PyTorch but unallocated.\n")


def test_deficit_decomposes_into_waste_and_shortfall(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(oom(2.0, 0.5, 60.0, 18.0))
    _, diag, rep = run(log=log)
    led = diag.ledger
    assert led.deficit_source == "oom-message"
    assert led.deficit_bytes == pytest.approx(1.5 * GIB, rel=1e-3)
    assert led.shortfall_bytes == 0.0  # 18 GiB of cached blocks cover the 1.5 GiB missing
    frag, source = share(led, ["reserved-unallocated"])
    assert frag == 1.0 and source == "oom-message"
    assert rep["ledger"]["entries"] and rep["causes"][0]["id"] == "fragmentation"
    assert rep["causes"][0]["share_of_deficit"] == 1.0


def test_a_real_shortfall_belongs_to_what_the_step_needs(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(oom(4.0, 0.3, 77.0, 0.4))
    _, diag, _ = run(log=log, overrides=LLAMA70B, gpu="H100-80GB",
                     env=["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"])
    led = diag.ledger
    assert led.shortfall_bytes > 3 * GIB
    waste, _ = share(led, ["reserved-unallocated"])
    need, _ = share(led, ["weights", "gradients", "optimizer", "activations", "logits", "workspace"])
    assert waste < 0.15 and need > 0.8
    assert diag.causes[0].id.startswith("capacity-")


def test_every_config_fix_carries_its_predicted_peak_on_the_failing_stage():
    _, diag, rep = run(overrides=LLAMA70B, gpu="H100-80GB", question="Llama3 70B OOMs on 32 GPUs in backward")
    simulated = [f for f in rep["fixes"] if f["apply"].get("bridge_override")]
    assert simulated
    for fix in simulated:
        sim = fix["simulation"]
        assert sim is not None and sim["basis"] == "estimate", fix["id"]
        assert sim["predicted_peak_bytes"] is not None and sim["fits"] is not None, fix["id"]
    text = render_markdown(rep, KB)
    assert "Memory ledger" in text and "Predicted effect on the failing stage" in text


def test_pp_is_proposed_with_the_next_size_that_keeps_the_gpu_count():
    _, _, rep = run(overrides=LLAMA70B, gpu="H100-80GB", question="OOM on 32 H100 GPUs in the backward pass")
    pp = next(f for f in rep["fixes"] if f["id"] == "increase-pp")
    assert pp["apply"]["bridge_override"] == ["model.pipeline_model_parallel_size=8"]
    assert pp["simulation"]["changes"]["data_parallel_size"] == 1


def test_activation_fixes_save_nothing_at_checkpoint_load(tmp_path):
    log = tmp_path / "train.log"
    frame = '  File "megatron/training/checkpointing.py", line 1200, in load_checkpoint\n'
    log.write_text(frame + oom(3.0, 0.4, 74.0, 1.0))
    facts, diag, rep = run(log=log, overrides=LLAMA70B, gpu="H100-80GB")
    assert facts.log.phase == "checkpoint-load"
    recommended = [f["id"] for f in rep["fixes"]]
    for fix in ("reduce-micro-batch", "selective-recompute", "full-recompute"):
        assert fix not in recommended
    assert diag.causes[0].id == "checkpoint-load"


def test_seed_question_without_a_log_puts_expandable_segments_first_and_says_what_to_collect():
    """Megatron-Bridge PR #3107: 58.8 GB on an 80 GB GPU, one rank, flaky - fragmentation first."""
    _, _, rep = run(question="Llama3 70B SFT on 32xH100 TP4 PP4 VPP5 OOMs at 58.8 GB, what first?")
    assert rep["fixes"][0]["id"] == "expandable-segments"
    assert rep["ledger"]["collect"], "the answer must say what evidence would quantify it"
    assert any("OOM message" in c for c in rep["ledger"]["collect"])
    assert rep["assumed"], "recipe defaults the tool filled in are listed"


def test_a_config_error_in_the_log_is_its_own_verdict(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("[rank0]: ValueError: moe_act in recompute_modules is only supported with moe_grouped_gemm.\n")
    _, diag, rep = run(log=log)
    assert diag.causes[0].id == "config-incompatibility"
    assert "moe-act-recompute-needs-grouped-gemm" in rep["facts"]["log.constraint_errors"]


def test_a_question_figure_of_another_role_is_not_the_failure_size():
    facts, _, _ = run(question="We have 10 GB headroom on H100 80GB with Llama3 8B, can we double the sequence?")
    assert facts.question.memory_bytes is None
    assert [f["role"] for f in facts.question.memory_figures if f["bytes"] == 10e9] in (["free"], ["headroom"])


@pytest.mark.parametrize("question", [
    "Resuming from the checkpoint OOMs inside load_checkpoint before the first step, 8 H100s",
    "断点续训加载 checkpoint 的时候就 OOM 了，还没开始训练",
])
def test_without_a_config_activation_fixes_are_not_offered_at_checkpoint_load(question):
    facts, diag, rep = run(question=question)
    assert diag.ledger.phase == "checkpoint-load"
    recommended = {f["id"] for f in rep["fixes"]}
    assert not recommended & {"reduce-micro-batch", "selective-recompute", "full-recompute", "increase-cp"}
    assert rep["fixes"] and rep["causes"][0]["id"] == "checkpoint-load"


def test_rl_weight_sync_is_a_phase_without_activations():
    """verl / NeMo-RL refit: the trainer's weights are handed to the rollout engine; no activations exist then."""
    facts, diag, rep = run(question="GRPO with the Megatron backend: after the actor is offloaded to CPU, the rollout "
                                    "engine's weight reload OOMs on 16 B200s")
    assert diag.ledger.phase == "weight-sync"
    assert not {f["id"] for f in rep["fixes"]} & {"reduce-micro-batch", "selective-recompute", "full-recompute"}


def test_a_colocated_rollout_engine_is_shrunk_not_killed(tmp_path):
    """In colocated RL the 'other process' of the OOM message is the user's own vLLM / SGLang engine."""
    log = tmp_path / "train.log"
    log.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity "
                   "of 79.11 GiB of which 1.50 GiB is free. Process 2247613 has 30.00 GiB memory in use. Including "
                   "non-PyTorch memory, this process has 47.00 GiB memory in use. Of the allocated memory 44.00 GiB is "
                   "allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated.\n")
    _, _, colocated = run(log=log, question="GRPO with vLLM colocated on the same GPUs as the Megatron trainer OOMs")
    fixes = [f["id"] for f in colocated["fixes"]]
    assert "shrink-colocated-engine" in fixes and "kill-stale-processes" not in fixes
    assert "kill-stale-processes" in {a["id"] for a in colocated["avoid"]}
    _, _, alone = run(log=log, question="Our pretraining job OOMs right after a restart")
    assert alone["fixes"][0]["id"] == "kill-stale-processes"


def test_a_preset_layer_count_does_not_make_a_running_layout_invalid():
    """Llama3-70B's preset has 80 layers, which PP 3 does not divide; a run that OOMs after 300 steps passed
    Megatron's start-up checks, so the user's model differs from the preset - no violation, a stated conflict."""
    _, _, running = run(question="Llama3 70B SFT on 24 H100 with TP8 PP3, it OOMs in the backward pass after 300 steps")
    assert not running["violations"] and running["preset_conflicts"] == ["pp-divides-layers"]
    assert running["causes"][0]["id"] != "config-incompatibility"
    _, _, planning = run(question="Planning Llama3 70B on 24 H100 with TP8 PP3, will it fit?")
    assert [v["id"] for v in planning["violations"]] == ["pp-divides-layers"] and not planning["preset_conflicts"]


def test_an_old_pytorch_message_gets_lines_for_its_version(tmp_path):
    """PyTorch < 2.1 rejects expandable_segments at the first CUDA allocation: the answer says so and leads with
    max_split_size_mb, which those versions (>= 1.10) know."""
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.29 GiB (GPU 0; 31.72 GiB total capacity; "
                   "19.22 GiB already allocated; 1.88 GiB free; 28.32 GiB reserved in total by PyTorch)\n")
    _, _, rep = run(log=log)
    fix = next(f for f in rep["fixes"] if f["id"] == "expandable-segments")
    assert fix["version_note"] and "2.1" in fix["version_note"]
    assert fix["apply"]["env"][0].startswith("PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:")
    _, _, new = run(log=EXAMPLES / "llama3-70b-fragmentation.log")
    assert new["fixes"][0]["version_note"] is None


def test_a_fix_is_already_set_only_where_the_config_can_say_so():
    """Synchronous torch_dist saves are what checkpoint-save-memory's first lines set, but its fully parallel save
    is a setting TrainingConfig does not hold: with async_save=false and torch_dist stated, the fix is not 'already
    set' (it was dropped, and a host OOM at a save lost its first fix)."""
    question = "The job is OOM killed on the host during the first checkpoint save; training itself runs fine."
    overrides = [*LLAMA70B, "checkpoint.async_save=false", "checkpoint.ckpt_format=torch_dist"]
    _, diag, rep = run(question=question, overrides=overrides, gpu="H100-80GB")
    assert "checkpoint-save-memory" in [f["id"] for f in rep["fixes"]]
    sim = diag.simulations.get("checkpoint-save-memory")
    assert sim is None or not sim.dropped


def test_uneven_stages_are_never_proposed_with_fewer_layers_than_it_takes():
    """12 layers over PP 16 (which pp-divides-layers refuses, and which now offers rebalancing): a stage holds no
    layer to give up, so no uneven split is simulated - it once wrote num_layers_in_first_pipeline_stage=-1."""
    from memtune.facts import TrainingConfig
    from memtune.simulate import _uneven_variants

    assert _uneven_variants(TrainingConfig(num_layers=12, pipeline_model_parallel_size=16), KB) == []
    assert _uneven_variants(TrainingConfig(num_layers=3, pipeline_model_parallel_size=3), KB) == []
    split = _uneven_variants(TrainingConfig(num_layers=80, pipeline_model_parallel_size=8), KB)
    assert split and all(v > 0 for variant in split for v in variant.changes.values() if isinstance(v, int))


def test_the_estimate_needs_add_up_to_its_total_once():
    """A stage's other_bytes already sums its logits, workspaces and graph pool: the ledger counts each once."""
    one_stage = [o.replace("pipeline_model_parallel_size=4", "pipeline_model_parallel_size=1") for o in LLAMA70B]
    facts, _, diag = pipeline.run(pipeline.Inputs(question="Llama3-70B SFT OOMs in backward", overrides=one_stage,
                                                  gpu="H100"), KB)
    rep = report.build(diag, facts.flatten(), KB, "en")
    table = facts.estimate["table"]
    stage = next(s for s in table["stages"] if s["pp_rank"] == table["peak_stage"])
    assert rep["ledger"]["calibration"] == 1.0 and stage["logits_bytes"] > 0
    needs = sum(e["bytes"] for e in rep["ledger"]["entries"] if e["kind"] == "need")
    assert needs == pytest.approx(stage["total_bytes"], rel=1e-6)
