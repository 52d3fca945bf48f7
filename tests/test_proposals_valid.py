"""Nothing proposed that would fail: every simulated fix, applied to the user's config, passes every constraint.

Property test over generated layouts (dense, grouped-query, MoE, MLA, LoRA; 1-1024 GPUs) with a failure the
rules react to.  For every recommended fix the config is rebuilt with the exact override lines the answer shows
and checked against knowledge/constraints.yaml, the GPU count is kept, and a dense model is never told to use
an MoE-only option.  CI's own step runs 520 layouts (MEMTUNE_FULL_SWEEPS=1); the suite runs the first 130.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import sweep_examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
sys.path.insert(0, str(SKILL / "scripts"))

from memtune import knowledge, pipeline, report  # noqa: E402
from memtune.derive import derive  # noqa: E402
from memtune.engine import check_constraints  # noqa: E402
from memtune.inputs.config import apply_overrides  # noqa: E402

KB = knowledge.load()
MOE_ONLY = re.compile(r"moe_|expert_model_parallel|expert-model-parallel|num_moe_experts|--moe-|\bmoe\b")
QUESTIONS = [
    "It OOMs in the backward pass, Tried to allocate 4.00 GiB",
    "OOM at the first iteration, expandable_segments:True is already set",
    "显存不足，训练第一个 step 就 OOM 了",
    "The run OOMs; the memory report shows rank 0 much higher than the last stage",
    "OOM with long sequences, what should I change?",
]


@st.composite
def layouts(draw):
    kind = draw(st.sampled_from(["dense", "gqa", "moe", "mla", "lora"]))
    heads = draw(st.sampled_from([16, 32, 40, 64, 96, 128]))
    hidden = heads * draw(st.sampled_from([64, 128]))
    layers = draw(st.sampled_from([12, 24, 28, 32, 36, 40, 48, 60, 61, 64, 80, 94, 126]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4, 8, 16]))
    cp = draw(st.sampled_from([1, 1, 2, 4]))
    dp = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    world = tp * pp * cp * dp
    if world > 1024:
        dp = max(1, 1024 // (tp * pp * cp))
        world = tp * pp * cp * dp
    mbs = draw(st.sampled_from([1, 1, 2, 4]))
    seq = draw(st.sampled_from([2048, 4096, 8192, 32768]))
    over = [
        f"model.num_layers={layers}", f"model.hidden_size={hidden}", f"model.num_attention_heads={heads}",
        f"model.ffn_hidden_size={hidden * 4}", f"model.seq_length={seq}", "model.vocab_size=128256",
        f"model.tensor_model_parallel_size={tp}", f"model.pipeline_model_parallel_size={pp}",
        f"model.context_parallel_size={cp}", f"train.micro_batch_size={mbs}",
        f"train.global_batch_size={mbs * dp * draw(st.sampled_from([1, 4, 16]))}",
        f"model.sequence_parallel={'true' if tp > 1 else 'false'}",
        f"optimizer.use_distributed_optimizer={draw(st.sampled_from(['true', 'false']))}",
    ]
    if kind in ("gqa", "lora", "moe"):
        over.append(f"model.num_query_groups={draw(st.sampled_from([g for g in (1, 2, 4, 8) if heads % g == 0]))}")
    if kind == "moe":
        experts = draw(st.sampled_from([8, 16, 64, 128, 256]))
        eps = [e for e in (1, 2, 4, 8) if experts % e == 0 and world % (e * pp * tp) == 0]
        ep = draw(st.sampled_from(eps or [1]))
        over += [f"model.num_moe_experts={experts}", "model.moe_router_topk=2",
                 f"model.expert_model_parallel_size={ep}", f"model.moe_ffn_hidden_size={hidden}",
                 f"model.moe_grouped_gemm={draw(st.sampled_from(['true', 'false']))}"]
    if kind == "mla":
        over += ["model.multi_latent_attention=true", "model.q_lora_rank=1536", "model.kv_lora_rank=512",
                 "model.qk_head_dim=128", "model.qk_pos_emb_head_dim=64", "model.v_head_dim=128"]
    if kind == "lora":
        over += ["peft.dim=16"]
    if draw(st.booleans()):
        over.append(f"model.recompute_granularity={draw(st.sampled_from(['selective', 'full']))}")
        if over[-1].endswith("full"):
            over += ["model.recompute_method=uniform", "model.recompute_num_layers=1"]
    gpu = draw(st.sampled_from(["H100-80GB", "A100-40GB", "H200", "B200", "GB200"]))
    question = draw(st.sampled_from(QUESTIONS)) + f" ({world} GPUs)"
    task = "lora" if kind == "lora" else None
    return kind, over, gpu, question, world, task


def _diagnose(over, gpu, question):
    inputs = pipeline.Inputs(overrides=over, gpu=gpu, question=question)
    facts, flat, diag = pipeline.run(inputs, KB)
    return facts, flat, diag, report.build(diag, flat, KB, "en")


@settings(max_examples=sweep_examples(520, 4), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(layouts())
def test_no_proposed_fix_breaks_a_constraint(case):
    kind, over, gpu, question, world, task = case
    if task:
        question = "LoRA " + question
    facts, flat, diag, rep = _diagnose(over, gpu, question)
    before = {v.id for v in diag.violations}
    for fix in rep["fixes"]:
        lines = fix["apply"].get("bridge_override") or []
        if fix["simulation"] is None or not fix["simulation"]["changes"]:
            continue
        cfg = apply_overrides(facts.config, lines, KB)
        changes = fix["simulation"]["changes"]
        if "data_parallel_size" in changes:
            cfg = replace(cfg, data_parallel_size=changes["data_parallel_size"])
        new = replace(facts, config=cfg, derived=derive(cfg, facts.env)).flatten()
        broken = {v.id for v in check_constraints(new, KB)} - before
        remedies = {r for c in broken for r in KB.get("constraints", c).get("alternatives") or []}
        assert not broken or remedies & {f["id"] for f in rep["fixes"]}, (fix["id"], lines, broken)
        if cfg.data_parallel_size and facts.config.world_size:
            model = ((cfg.tensor_model_parallel_size or 1) * (cfg.pipeline_model_parallel_size or 1)
                     * (cfg.context_parallel_size or 1))
            assert model * cfg.data_parallel_size == facts.config.world_size == world, (fix["id"], lines)
    if kind != "moe":
        for fix in rep["fixes"]:
            text = " ".join(line for lines in fix["apply"].values() for line in lines)
            assert not MOE_ONLY.search(text), (fix["id"], text)


def test_dense_selective_recompute_never_writes_moe_act():
    over = ["model.num_layers=80", "model.hidden_size=8192", "model.num_attention_heads=64",
            "model.num_query_groups=8", "model.ffn_hidden_size=28672", "model.seq_length=8192",
            "model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=4",
            "train.micro_batch_size=1", "train.global_batch_size=32", "model.vocab_size=128256"]
    _, _, diag, rep = _diagnose(over, "H100-80GB", "Llama3 70B OOMs in backward on 32 H100, Tried to allocate 3 GiB")
    lines = [line for f in rep["fixes"] for lines in f["apply"].values() for line in lines]
    assert lines and not any("moe_act" in line for line in lines)


@pytest.mark.parametrize("gpus,expected", [(32, 8), (16, None)])
def test_layout_fix_keeps_the_users_gpu_count(gpus, expected):
    """PP 4 -> 8 on 32 GPUs halves DP; on 16 GPUs with DP 1 it would need 32 GPUs, so it is not proposed."""
    over = ["model.num_layers=80", "model.hidden_size=8192", "model.num_attention_heads=64",
            "model.num_query_groups=8", "model.ffn_hidden_size=28672", "model.seq_length=8192",
            "model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=4",
            "train.micro_batch_size=1", "train.global_batch_size=32", "model.vocab_size=128256"]
    facts, _, diag, rep = _diagnose(over, "H100-80GB", f"Llama3 70B OOMs on {gpus} H100 GPUs at 78 GB")
    pp = [f for f in rep["fixes"] if f["id"] == "increase-pp"]
    if expected is None:
        assert not pp
    else:
        assert pp and pp[0]["apply"]["bridge_override"] == [f"model.pipeline_model_parallel_size={expected}"]
        assert pp[0]["simulation"]["changes"]["data_parallel_size"] == gpus // (4 * expected)
