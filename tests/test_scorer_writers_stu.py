"""How the scorer reads the misreadings that writers s, t and u (issue 26's second unseen batch) showed.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a numbered plan at the top of an answer; a block that sets a fix's own key to another fix's
value; "don't write X = []" (against turning it off); a fix put off for later; a label that restates the run; a
verb that takes a setting out; a label alone on its line or one that says to verify first; and spellings.
"""

from __future__ import annotations

import pytest


def test_a_numbered_list_at_the_top_of_an_answer_is_its_plan(scorer):
    # s-011: no heading; the plan's first fix is item 1, not the code block of item 2
    text = ("OOM only in the actor update and only past ~17k tokens, so it scales with length.\n\n"
            "0. Look at the OOM stack: inside TransformerLayer -> activations.\n"
            "1. Split the sequence across GPUs:\n   `actor_rollout_ref.actor.megatron.context_parallel_size=2`\n"
            "2. Full recompute:\n   ```\n"
            "   +actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full\n   ```\n")
    assert scorer.read_markdown(text).first_fix == "increase-cp"


def test_a_block_that_sets_the_granularity_selective_is_not_full_recompute(scorer):
    # s-001: NeMo-RL's activation_checkpointing switch beside recompute_granularity: selective
    text = ("1. Recompute the norms too:\n   ```yaml\n   policy:\n     megatron_cfg:\n"
            "       activation_checkpointing: true\n       recompute_granularity: selective\n"
            "       recompute_modules: [core_attn, layernorm]\n   ```\n")
    assert scorer.read_markdown(text).first_fix == "selective-recompute"


def test_dont_write_an_empty_module_list_keeps_the_recompute(scorer):
    # s-005: "don't write recompute_modules = []" argues against turning it off, not against the fix
    text = ("```python\n# 不要写 recompute_modules = []；保持不设（继承 MCore 默认），或显式：\n"
            'cfg.model.recompute_granularity = "selective"\ncfg.model.recompute_modules = ["core_attn"]\n```\n\n'
            "cuda_graph_impl=none 也能过 capture，但 step time 损失比 core_attn 重算大得多，没必要。\n")
    answer = scorer.read_markdown(text, {"config": {"model": {"recompute_modules": []}}})
    assert answer.first_fix == "selective-recompute" and "selective-recompute" not in answer.avoided


def test_a_fix_put_off_for_later_is_not_the_first(scorer):
    # s-006: measure each phase's peak first; chunking is "再考虑 ... 现在先别改"
    text = ("按阶段记高水位：\n\n```python\ntorch.cuda.reset_peak_memory_stats()\n```\n\n"
            "定位到是 log_probs 的长上下文前向，再考虑按序列分块算 logprob（logits chunking）；现在先别改。\n")
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_a_label_that_restates_the_run_is_not_advice(scorer):
    # u-022: the situation line quotes the user's own setting
    text = ("情况：FSDP 后端 GRPO，开了 actor_rollout_ref.ref.fsdp_config.param_offload=True，"
            "但 ref 的参数好像一直在 GPU 上。\n\n"
            "**Do first** - 把 micro batch 调小：actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1\n")
    answer = scorer.read_markdown(text)
    assert "offload-trainer-states" not in answer.recommended and answer.first_fix == "reduce-micro-batch"


def test_a_verb_that_takes_the_setting_out_argues_against_it(scorer):
    # u-019: flash attention already drops the s x s scores, so selective recompute goes
    text = "**Do first**\n用 flash attention 时，直接去掉 `--recompute-activations`，把 MFU 拿回来。\n"
    answer = scorer.read_markdown(text)
    assert "selective-recompute" not in answer.recommended and "selective-recompute" in answer.avoided


@pytest.mark.parametrize(("source", "text", "fix"), [
    ("s-007", "0. 先确认注意力后端设置真的生效：\n   ```\n   env | grep NVTE_FLASH_ATTN\n   ```\n"
              "1. flash 生效后单条 14~17K 还放不下，再上 `--context-parallel-size 2`。\n", "confirm-setting-applied"),
    ("u-006", "**Do first**\n把导出改成流式、按 bucket 走：本 stage 按固定大小的 bucket 惰性收集。\n",
     "checkpoint-save-memory"),
    ("t-002", "Shrink the per-GPU micro-batches for the actor update and both log-prob passes.\n",
     "reduce-micro-batch"),
    ("t-005", "| # | Change | Effect |\n|---|---|---|\n"
              "| 1 | `policy.dtensor_cfg.tensor_parallel_size=2` | halves vocab per rank |\n", "increase-tp"),
    ("t-009", "## Step 1: confirm flash/fused attention is actually used\n", "confirm-setting-applied"),
    ("s-004", "1. Clear leftover SGLang / Ray workers from earlier runs on both nodes.\n", "kill-stale-processes"),
    ("s-016", "改成总和 48：\n```\n--num-layers-in-first-pipeline-stage 23 \\\n"
              "--num-layers-in-last-pipeline-stage 25\n```\n",
     "rebalance-pipeline-stages"),
    ("u-004", "0. 先别改参数。把 Ray 的 worker 日志拉下来，找**第一个**报 `OutOfMemoryError` 的 rank 和它的完整栈。\n",
     "find-first-failing-rank"),
    ("t-020", "## 第一步：确认 TP/PP 到底有没有生效\n", "confirm-setting-applied"),
])
def test_the_fix_is_recognised_as_these_writers_write_it(scorer, source, text, fix):
    assert scorer.read_markdown(text, {"env": {}}).first_fix == fix, source
