"""How the scorer reads the misreadings that writers y and z (issue 26's next unseen batch) showed.

Each answer text is a sentence, table or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in
the test).  The classes: an options table whose status cell rejects a row ("Rejected", "拒绝", "不作为第一步") or
picks it ("Chosen", "采用", "Step 1"), the picked rows ordering the plan before the block that writes them all; a
parenthesised list after "you've already pulled every lever"; "won't do anything" / "have nothing to shrink"
after the fixes they dismiss; and spellings of fixes (more PP, enforce_eager, a log-prob batch lowered in a diff,
shards passed as a blend, the optimizer state loaded to the CPU, a conversion done on the CPU, layers spread over
cards, a partition method, memory logged around an offload call, log-probs processed in chunks).
"""

from __future__ import annotations

import pytest


def test_a_rejected_row_of_an_options_table_is_advice_against_it(scorer):
    # z-007: the status column sits between the option and its reason
    text = ("## Options considered\n\n| Option | Verdict | Why |\n|---|---|---|\n"
            "| Lower micro-batch / enable recompute / activation offload | Rejected | no forward pass runs during "
            "conversion |\n")
    answer = scorer.read_markdown(text)
    assert {"reduce-micro-batch", "activation-cpu-offload"} <= set(answer.avoided) and not answer.recommended


@pytest.mark.parametrize("status", ["拒绝", "不作为第一步", "Not relevant"])
def test_a_status_cell_that_declines_is_advice_against_its_row(status, scorer):
    # z-001 / z-004 / z-015
    text = f"| 方案 | 结论 |\n|---|---|\n| 调小 micro batch | {status} |\n"
    answer = scorer.read_markdown(text)
    assert answer.avoided == ["reduce-micro-batch"] and not answer.recommended


def test_the_rows_an_options_table_picks_order_the_plan_before_the_block(scorer):
    # z-013: the table picks the micro-batch first; the block after it exports the allocator option first
    text = ("## Options considered\n\n| Option | Verdict |\n|---|---|\n| ppo_micro_batch_size_per_gpu=1 | Chosen |\n"
            "| expandable_segments:True | Chosen |\n\n## Recommended change\n\n```bash\n"
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\npython3 -m verl.trainer.main_ppo ... \\\n"
            "  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "expandable-segments" in answer.recommended


def test_a_step_one_row_is_the_first_step(scorer):
    # z-017: "Step 1" in the verdict column
    text = ("## Options considered\n\n| Option | Verdict |\n|---|---|\n"
            "| Log GPU memory right before/after the offload call | Step 1 (confirms the no-op) |\n")
    assert scorer.read_markdown(text).first_fix == "confirm-setting-applied"


def test_a_parenthesised_list_of_what_was_already_pulled_is_no_advice(scorer):
    # y-013: the clause before the parenthesis speaks for every item in it; a call's arguments are no such list
    text = ("You've already pulled basically every lever (mbs 1, full recompute, capacity factor 1, expandable "
            "segments), which tells me this is just a model-state problem.")
    assert not scorer.read_markdown(text).recommended


@pytest.mark.parametrize("text, avoided", [
    # y-012
    ("Recompute / smaller micro-batch / activation offload won't do anything here - activations are already freed "
     "by the time the optimizer step runs.", "activation-cpu-offload"),
    # y-019
    ("No backward, no optimizer state - so recompute or optimizer offload have nothing to shrink there.",
     "optimizer-cpu-offload"),
])
def test_fixes_said_to_do_nothing_here_are_dismissed(text, avoided, scorer):
    answer = scorer.read_markdown(text)
    assert avoided in answer.avoided and avoided not in answer.recommended


@pytest.mark.parametrize("text, fix", [
    ("Fix is more PP: GB200 bf16 -> PP=2 with VP=20.", "increase-pp"),  # y-015
    ("TL;DR: actor_rollout_ref.rollout.enforce_eager=True", "disable-cuda-graphs"),  # y-010
    ("```diff\n reference:\n-  infer_batch_size: 4\n+  infer_batch_size: 1\n```\n", "reduce-micro-batch"),  # y-019
    ("Easiest: skip the single giant merge. Pass the shards as a blend at training time.",
     "shard-preprocessing"),  # y-021
    ("Load the optimizer state without the GPU deepcopy (map to CPU, copy into the existing state tensors in place).",
     "memory-efficient-optimizer-load"),  # z-012
    ("这个 check 只是精度对齐用的，转换在 CPU 上做、把校验跳过就行。", "convert-sharded"),  # y-003
    ("最简单：去掉 NPROC_PER_NODE=3，单进程跑，swift 会用 device_map 把层铺到三张卡上。", "increase-pp"),  # y-008
    ("```diff\n-  --pp-partition-method 'type:transformer' \\\n"
     "+  --pp-partition-method 'type:transformer|embed' \\\n```\n", "rebalance-pipeline-stages"),  # z-014
    ("Gather K logits + logsumexp, processed in sequence chunks.", "logits-chunking"),  # z-011
])
def test_fixes_as_these_writers_spell_them(text, fix, scorer):
    assert scorer.read_markdown(text).first_fix == fix


def test_a_fix_said_not_to_move_the_needle_is_dismissed(scorer):
    # y-009: the verdict comes at the end of a long sentence about the setting the user tried
    text = ("Selective (`--recompute-activations`) only drops the attention core, which at seq 4096 with flash attn "
            "is tiny, so no surprise that one doesn't move the needle either.")
    answer = scorer.read_markdown(text)
    assert answer.avoided == ["selective-recompute"] and not answer.recommended


def test_a_table_that_only_compares_recommends_nothing(scorer):
    # y-002: no heading files the table and no cell names advice ("what you thought it saved | what it does")
    text = ("| 你以为省了的 | 实际 |\n|---|---|\n"
            "| optimizer state FP16 | 被 HybridDeviceOptimizer 忽略，仍是 FP32 |\n\n"
            "怎么改：\n\n1. 先把 fully_reshardable 的保存路径去掉。\n")
    answer = scorer.read_markdown(text)
    assert "optimizer-cpu-offload" not in answer.recommended
    # a first column that says when ("先做 | ...") is a plan, whatever its header
    plan = scorer.read_markdown("| 顺序 | 改什么 |\n|---|---|\n| 先做 | 加 --ds.enable_sleep |\n")
    assert plan.first_fix == "offload-trainer-states"
