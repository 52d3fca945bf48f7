"""How the scorer reads the misreadings that writers bb (a terse maintainer in an issue thread, issue 26's batch of
2026-12-05) and aa (a Chinese-first chat assistant, held unlearned since the session before) showed.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a lead-in that rejects a list ("Not useful here: ..."); "doesn't apply", "none of that",
"won't fix", "are irrelevant" after what they dismiss; a Chinese sentence that closes on a verdict ("..., 别动。",
"..., 对 ... 没用。"); a command block its lead-in calls the fallback ("还不够就加："); an aside in parentheses after
a change ("减半（global_batch_size 不变）") that keeps another setting, not this one; "(from --flag)" naming where
something came from; and spellings (ray stop, measure before changing anything, smaller micro-batches, 降 micro
batch, log_prob_micro_batch_size 也调小, empty_cache after the save).
"""

from __future__ import annotations


def test_a_lead_in_that_rejects_a_list_is_advice_against_it(scorer):
    # bb-003
    text = ("Not useful here: expandable_segments, smaller micro-batch, activation CPU offload - all GPU-side. "
            "--optimizer-cpu-offload would make this strictly worse.\n")
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "activation-cpu-offload"} <= set(answer.avoided) and not answer.recommended


def test_doesnt_apply_and_none_of_that_dismiss_what_came_before_in_the_sentence(scorer):
    # bb-006, bb-014, bb-016
    for text, fix in [
        ("Ignore anything LoRA-related you find (lora-a regather etc.) - this is full SFT, doesn't apply.",
         "lora-input-regather"),
        ("Nothing training-side matters here (micro-batch, recompute, distributed optimizer) - none of that runs "
         "in a conversion.", "distributed-optimizer"),
        ("More GPUs / more PP stages won't fix reserved cache, don't.", "add-gpus"),
    ]:
        answer = scorer.read_markdown(text + "\n")
        assert fix in answer.avoided and fix not in answer.recommended, text


def test_a_chinese_sentence_closing_on_a_verdict_is_against_what_it_lists(scorer):
    # bb-012, bb-013 (and s-009: "降 micro batch、开 selective/full 重计算都是省激活的，对建模型阶段 OOM 没用。")
    for text in ["降 micro batch、开重计算这些都是显存侧的，别动。", "跟激活无关，不用降 micro batch，也不用开重计算。",
                 "降 micro batch、开 selective/full 重计算都是省激活的，对建模型阶段 OOM 没用。"]:
        answer = scorer.read_markdown(text + "\n")
        assert "reduce-micro-batch" in answer.avoided and not answer.recommended, text


def test_a_block_its_lead_in_calls_the_fallback_comes_after_the_prose_change(scorer):
    # bb-005: the prose halves the micro-batch (the aside keeps the global batch), the block is what follows
    text = ("要调。--micro_batch_size 减半（global_batch_size 不变，梯度累积会自动补上），还不够就加：\n\n"
            "```\n--recompute_granularity full --recompute_method uniform --recompute_num_layers 1\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "full-recompute" in answer.recommended


def test_a_flag_named_as_where_something_came_from_is_no_advice(scorer):
    # bb-015
    text = ("At the step boundary you briefly have two host-RAM copies alive: SGLang's host mirror of its weights "
            "and the trainer's pinned weight backup (from --offload-train).\n")
    assert "offload-trainer-states" not in scorer.read_markdown(text).recommended


def test_spellings_of_fixes_from_a_maintainers_replies(scorer):
    # bb-009, bb-017, bb-019, bb-007, bb-013
    cases = [
        ("Clean the node before relaunching:\n\n```\nray stop --force\n```\n", "kill-stale-processes"),
        ("Measure before changing anything. Right after SGLang release, print torch.cuda.memory_allocated().\n",
         "track-memory-per-step"),
        ("i.e. smaller micro-batches and full recompute.\n", "reduce-micro-batch"),
        ("还紧的话 actor_rollout_ref.rollout.log_prob_micro_batch_size 也调小一点。\n", "reduce-micro-batch"),
        ("在 save 之后强制同步 + 清缓存，#5455 就是这么改的。\n", "checkpoint-save-memory"),
    ]
    for text, fix in cases:
        assert scorer.read_markdown(text).first_fix == fix, text


# Writer aa: numbered options with ratings, and sentences that close on a verdict


def test_an_option_numbered_after_the_first_is_not_the_first_step_whatever_its_rating(scorer):
    # aa-004: "方案二（推荐指数：★★★★）" - a rating is a score, not "recommended", and option two comes second
    text = ("**解决方案**\n\n方案一（推荐指数：★★★★★）：开启可扩展段，减少碎片\n\n```bash\n"
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n```\n\n"
            "方案二（推荐指数：★★★★）：把 MICRO_BATCH_SIZE 从 4 降到 1 或 2，通过梯度累积保持全局 batch 不变。\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "expandable-segments" and "reduce-micro-batch" in answer.recommended


def test_a_sentence_that_closes_on_no_help_or_not_recommended_argues_against_its_list(scorer):
    # aa-003, aa-005, aa-020, aa-016
    for text, fix in [
        ("调小 micro batch、打开重计算都只影响激活，对这个 offload 尖峰没有作用，不推荐在这个方向上花时间。",
         "reduce-micro-batch"),
        ("调小 batch、打开 full 重计算、增大 TP 这些训练侧手段对保存时的主机内存没有任何帮助，不推荐。", "increase-tp"),
        ("Training-side settings (micro-batch, recompute, activation offload, allocator config) have no effect on a "
         "conversion.", "activation-cpu-offload"),
        ("Allocator settings such as expandable_segments and adding more nodes will not change this stage-to-stage "
         "slope.", "add-gpus"),
    ]:
        answer = scorer.read_markdown(text + "\n")
        assert fix in answer.avoided and fix not in answer.recommended, text


def test_confirming_in_the_log_and_turning_on_tp_are_spelled_the_agents_way(scorer):
    # aa-006: "启动后在日志里确认 DeepSpeed 打印的 zero_optimization stage 为 3"; aa-022: "turn on tensor parallelism"
    assert scorer.read_markdown("启动后在日志里确认 DeepSpeed 打印的 zero_optimization stage 为 3。\n").first_fix \
        == "confirm-setting-applied"
    assert scorer.read_markdown("Option 1 (priority: high) - turn on tensor parallelism inside the node.\n").first_fix \
        == "increase-tp"
