"""How the scorer reads the misreadings that writers tt (a coding agent answering with the patch it would apply),
uu (a code-switching team-chat reply tagging each suggestion 【推荐】/【备选】/【不推荐】/【先别动】) and vv (a careful
diagnostician: checks first, then "What I'd do in your place") showed: written 2026-12-06, first read 76.7 / 68.3 /
90.0 % (verdict / id / violations) on 7519566 (the same on fc4d159), then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a diff's removed line advises nothing; "补丁 A（首选）" / "Patch A (preferred)" is the primary and
"补丁 B" an option after it; a paragraph of tagged suggestions is one unit per tag; a short first line that names a
fix is a sentence, not a label over the lines after it; a sentence-end cue that overlaps another fix's mention
("X 调低，不用加卡") speaks of that one; "Not changing:" / 不改的 advise against; "换我来做的话" / "What I'd do" is
primary; 不会有任何作用 closes a sentence against its list; and spellings (fused CE, optimizer states 放 CPU,
per_device_train_batch_size lowered in a diff, RSS 记录).
"""

from __future__ import annotations


def test_a_removed_diff_line_advises_nothing_and_patch_a_is_the_primary(scorer):
    # tt-019
    text = ("补丁 A（首选）：全层均匀重计算：\n\n```diff\n--- a/scripts/pretrain.py\n+++ b/scripts/pretrain.py\n"
            "@@ def model_overrides(cfg):\n"
            '-    cfg.model.recompute_granularity = "selective"\n-    cfg.model.recompute_modules = ["moe"]\n'
            '+    cfg.model.recompute_granularity = "full"\n+    cfg.model.recompute_method = "uniform"\n'
            "+    cfg.model.recompute_num_layers = 1\n```\n\n"
            "补丁 B（A 之后 optimizer init 还 OOM 时）：加上 expandable_segments：\n\n"
            "```diff\n+export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "full-recompute" and "selective-recompute" not in answer.recommended


def test_each_tag_files_its_own_suggestion(scorer):
    # uu-006
    text = ("【推荐】loss 走 fused / vocab-parallel 的 cross entropy（Megatron 侧 cross_entropy_loss_fusion: true）\n"
            "【不推荐】继续调 EP / PP —— 它们不切 logits\n\n"
            "TL;DR：先开 fused CE（基本零成本），还炸再把 TP 翻倍，别再折腾 EP/PP。\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "te-cross-entropy-fusion" and "increase-tp" in answer.recommended


def test_a_first_line_that_names_a_fix_is_no_label(scorer):
    # uu-019: "先别急着加卡" is about adding GPUs; the next line explains the engine's share, and the summary lowers it
    text = ("先别急着加卡 🙂\ncolocated 模式下 vLLM 和 Megatron worker 是同一张卡上的两个进程，vLLM 按 "
            "`gpu_memory_utilization` 先把权重 + KV cache 的份额占住。\n\n"
            "总结：policy.generation.vllm_cfg.gpu_memory_utilization 调低（或升级拿 #687），不用加卡。\n")
    answer = scorer.read_markdown(text)
    assert "add-gpus" in answer.avoided and "shrink-colocated-engine" in answer.recommended


def test_not_changing_and_what_id_do_in_your_place(scorer):
    # tt-010, vv-016
    text = ("Not changing: I'm also not adding PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the first stage "
            "is simply full.\n")
    assert "expandable-segments" in scorer.read_markdown(text).avoided
    zh = ("换我来做的话： 先做上面的 RSS 记录（附带对比 save_freq），确认是 A 之后：\n"
          "升级前先把 save_freq 调大、减少保存次数，让它撑过整个训练。\n")
    assert scorer.read_markdown(zh).first_fix == "track-memory-per-step"


def test_no_effect_at_all_closes_a_sentence_against_its_list(scorer):
    # vv-010
    text = "一步训练都还没跑，谈不上 OOM。调 batch、开 expandable_segments、加卡都不会有任何作用。\n"
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "add-gpus"} <= set(answer.avoided) and not answer.recommended


def test_a_lowered_per_device_batch_in_a_diff_is_a_smaller_micro_batch(scorer):
    # tt-001 (LLaMA-Factory YAML)
    text = ("```diff\n-per_device_train_batch_size: 8\n-gradient_accumulation_steps: 1\n"
            "+per_device_train_batch_size: 2\n+gradient_accumulation_steps: 4\n```\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_optimizer_states_put_on_the_cpu(scorer):
    # uu-011
    text = "【推荐】ZeRO-3 + offload：参数切到 4 张卡上，optimizer states 放 CPU\n"
    assert "optimizer-cpu-offload" in scorer.read_markdown(text).recommended
