"""How the scorer reads the misreadings that writers v, w and x (issue 26's third unseen batch) showed.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a config number written lower is a level, not a switch turned off; a line wrapped inside a
sentence; a diff or a "# was" comment that lowers a value; "instead of" arguing only against what follows it; a
key written out with its section; sentence-final "irrelevant / no gain / changes nothing" in en and zh; a
state described ("开着 X 时"); and spellings of adding nodes and of checking that a setting is really used.
"""

from __future__ import annotations

import pytest


def test_a_config_number_written_lower_is_fewer_not_the_fix_turned_off(scorer):
    # w-004: the fix writes dataset.num_workers=1; an answer writing 0 goes further the same way
    text = ("```diff\n def deepseek_v3_pretrain_config_vr200(...):\n     cfg = deepseek_v3_pretrain_config_gb300(...)\n"
            "+    cfg.dataset.num_workers = 0\n     return cfg\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-dataloader-workers" and not answer.avoided


def test_a_line_wrapped_inside_a_sentence_is_one_clause(scorer):
    # w-011: the line break falls between the two fixes "都没用" argues against
    text = ("还没开始训练、而且是在加载 HF 权重的时候 OOM，基本可以排除 batch 和激活的问题，调小 micro batch 或者开\n"
            "full recompute 都没用。\n")
    answer = scorer.read_markdown(text)
    assert set(answer.avoided) == {"reduce-micro-batch", "full-recompute"} and not answer.recommended


def test_a_short_label_line_still_ends_its_line(scorer):
    # a label alone on the first line of its paragraph keeps leading what follows it
    answer = scorer.read_markdown("**Do first**\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    assert answer.first_fix == "expandable-segments"


def test_a_diff_that_lowers_the_micro_batch_is_that_fix(scorer):
    # w-017: legacy global keys removed, smaller per-GPU keys added
    text = ("I'd first cut all three:\n\n```diff\n-actor_rollout_ref.actor.ppo_micro_batch_size=64\n"
            "-actor_rollout_ref.rollout.log_prob_micro_batch_size=160\n"
            "+actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2\n"
            "+actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4\n```\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_a_value_whose_comment_says_it_was_higher_is_lowered(scorer):
    # u-022: "ppo_micro_batch_size_per_gpu=2      # 原来 4"
    text = ("**Do first**\n```\nactor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2      # 原来 4\n```\n\n"
            "**Then**\n- 还紧就打开 `actor_rollout_ref.model.enable_gradient_checkpointing=True`。\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_instead_of_argues_only_against_what_follows_it(scorer):
    # w-017: "by tokens instead of samples: X plus Y with Z" recommends X, Y and Z
    text = ("Once that runs, the more robust setup is to remove padding and size micro-batches by tokens instead of "
            "samples: `actor_rollout_ref.model.use_remove_padding=True` plus `actor_rollout_ref.actor.use_dynamic_bsz="
            "True` with `ppo_max_token_len_per_gpu=16384`.\n")
    assert "reduce-micro-batch" not in scorer.read_markdown(text).avoided
    assert "full-recompute" in scorer.read_markdown("Use selective recompute instead of full recompute.").avoided


def test_a_key_written_out_with_its_section_after_lower(scorer):
    # w-005
    text = ("If the head node still climbs after that, you could also lower\n"
            "`actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu` (e.g. 4 -> 2) so each step moves less data.\n")
    assert "reduce-micro-batch" in scorer.read_markdown(text).recommended


@pytest.mark.parametrize("text, fix", [
    # w-006, w-009, w-015, w-018, w-019: the verdict at the end of the sentence
    ("The GPU-side things that come up on these threads (smaller micro-batch, distributed optimizer) are irrelevant "
     "here - this all happens before training starts.", "distributed-optimizer"),
    ("micro batch 和 expandable_segments 就不用动了，跟这个没关系。", "expandable-segments"),
    ("所以分布式优化器、optimizer offload 这些对你基本没收益，我就不展开了。", "distributed-optimizer"),
    ("也正因为这样，`expandable_segments` 省不掉它——那个只管 PyTorch 自己的 segment 怎么扩，管不到 NCCL。",
     "expandable-segments"),
    ("调小 batch 或者开 `expandable_segments` 都不会改变这个结果，加卡也没必要。", "expandable-segments"),
])
def test_a_sentence_that_ends_in_no_use_argues_against(scorer, text, fix):
    answer = scorer.read_markdown(text)
    assert fix in answer.avoided and fix not in answer.recommended


def test_the_state_of_a_setting_is_not_advice(scorer):
    # w-003: "开着 optimizer_offload 时" speaks of the run as it is
    text = "优化器状态在 CPU 上是 fp32 的，开着 optimizer_offload 时每次 save 都要再整理一份，这是最大的一块。"
    assert "optimizer-cpu-offload" not in scorer.read_markdown(text).recommended


@pytest.mark.parametrize("text, fix, expected", [
    # w-007: summing what a node holds names no stale process; asking for one more node adds GPUs
    ("actor 和 critic 各一份，挤在同一台机器上就是 ~414 GB，再加上其它进程，就超过了 468.75 GB 的 0.95 阈值。",
     "kill-stale-processes", False),
    ("解决办法我会优先把 actor 和 critic 分到不同节点上，也就是多要一个节点：", "add-gpus", True),
    # w-008
    ("我们内部转 DSV3 一般用 16 台 8 卡（128 张 80G），你可以先把机器数加到 16 台再试：", "add-gpus", True),
    # w-014
    ("I'd first check that flash / fused attention is actually used in this run.", "confirm-setting-applied", True),
])
def test_spellings(scorer, text, fix, expected):
    assert (fix in scorer.read_markdown(text).recommended) is expected


def test_a_print_line_inspects_the_settings_it_names(scorer):
    # v-022: printing the built config is a check, not a write of cpu_offloading or of the pipeline size
    text = ("**先做**：在脚本构建完 config、调用 `pretrain(...)` 之前加一行：\n```python\n"
            'print("cpu_offloading =", cfg.model.cpu_offloading,\n'
            '      "pp =", cfg.model.pipeline_model_parallel_size, flush=True)\n```\n')
    answer = scorer.read_markdown(text)
    assert not {"activation-cpu-offload", "increase-pp"} & set(answer.recommended + answer.avoided)


@pytest.mark.parametrize("text, fix, recommended", [
    # v-007: "不用加卡" is advice against; OpenRLHF's micro-batch keys set to 1
    ("32 卡能跑，64G 的卡也行，不用加卡。", "add-gpus", False),
    ("把 `--micro_train_batch_size 1`、`--micro_rollout_batch_size 1` 先降下来，再开 `--gradient_checkpointing`。",
     "reduce-micro-batch", True),
    # v-020: "won't either" closes the list it ends
    ("Cut the micro-batch? Not needed. More TP or optimizer offload won't either.", "optimizer-cpu-offload", False),
    # v-021: the trainer side's states all offloaded
    ("**先做**：生成之前把训练侧的权重、梯度和优化器状态全部 offload：", "offload-trainer-states", True),
])
def test_spellings_of_batch_v(scorer, text, fix, recommended):
    assert (fix in scorer.read_markdown(text).recommended) is recommended
