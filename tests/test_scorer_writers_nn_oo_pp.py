"""How the scorer reads the misreadings that writers nn (a terse terminal agent), oo (a blog / wiki article with
"What about ...?" sections) and pp (a pair programmer thinking aloud) showed: written and first read at the end of
2026-12-05 (66.7 / 61.7 / 66.7 %, verdict / id / violations), learned on 2026-12-06.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a question that is no more than the options it names is answered by the sentence after it
(no: against; a condition: neither); "如果还涨，..." leads a fallback block; sentence-final 别折腾 / 不用试了; a
restated current config; and first steps no fix's recogniser named (a save per rank or less often, gc after an FP8
save, a shard loaded memory-mapped, the printed TF config, parameters still on the GPU, the first rank that throws,
the engine's share spelt --vllm_gpu_memory_utilization, 上 2 机 16 卡).
"""

from __future__ import annotations


def test_what_about_options_answered_irrelevant_are_advice_against(scorer):
    # oo-010, oo-015
    text = ("## What about ...?\n\n"
            "Lowering the micro batch or turning on recompute? Irrelevant. The job fails a config check before "
            "allocating anything for activations.\n\n"
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True or other memory settings? No. None of the three symptoms "
            "involves an allocation failure.\n")
    answer = scorer.read_markdown(text)
    assert {"reduce-micro-batch", "expandable-segments"} <= set(answer.avoided)
    assert not answer.recommended and answer.first_fix is None


def test_chinese_option_questions_answered_with_a_no_word(scorer):
    # oo-004, oo-013, oo-014
    text = ("## 那么……呢？\n\n"
            "减小 batch / 加卡 / 开重计算 / 加 TP 呢？ 都不对症。它们只会把初始余量调大一点，逐轮增长的斜率不变。\n\n"
            "加内存、减少 dataloader 进程？ 不相关：单 rank、无 worker 也能复现，内存总量也没有告急。\n\n"
            "杀掉其他进程释放显存？ 一般不是原因，除非你在 nvidia-smi 里看到了别的进程。\n")
    answer = scorer.read_markdown(text)
    assert {"add-gpus", "increase-tp", "reduce-dataloader-workers", "kill-stale-processes"} <= set(answer.avoided)
    assert not answer.recommended


def test_an_option_question_answered_with_a_condition_is_neither(scorer):
    # oo-015: "only if you have the memory to spare" offers it for another situation
    text = ("Turning optimizer_cpu_offload off? Avoids the buggy path, but you turned it on to fit the policy; only if "
            "you have the memory to spare.\n")
    answer = scorer.read_markdown(text)
    assert "optimizer-cpu-offload" not in answer.recommended


def test_a_question_about_something_else_keeps_its_answer_to_itself(scorer):
    # "Will recompute slow it down too much? No - about 20 %" answers the cost, not whether to recompute
    text = "Will full recompute slow it down too much? No — about 20 % on this model, so turn it on.\n"
    assert "full-recompute" not in scorer.read_markdown(text).avoided


def test_an_option_question_answered_yes_is_advice(scorer):
    text = "Smaller micro-batch? Yes: set micro_batch_size=1 and keep the global batch.\n"
    assert "reduce-micro-batch" in scorer.read_markdown(text).recommended


def test_sentence_final_bie_zheteng_and_buyong_shi_argue_against_the_list(scorer):
    # pp-009, pp-010
    text = ("expandable_segments、micro batch 这些就别折腾了，转换这一步跟它们没关系。\n\n"
            "batch 调小、开 expandable_segments、加卡、调 vLLM 的 gpu_memory_utilization——都是管显存的，对这个错没用，"
            "不用试了。\n")
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "add-gpus", "shrink-colocated-engine"} <= set(answer.avoided)
    assert not answer.recommended


def test_ruguo_hai_zhang_leads_a_fallback_block(scorer):
    # nn-006: the upgrade has no fix id, so the answer's first fix is none, not its fallback
    text = ("1. 别找 0.7.4-hotfix 了，直接：\n   ```\n   pip install vllm==0.8.2\n   ```\n"
            "2. 如果还涨，把 batch 调小：\n   ```\n"
            "   data.rollout_batch_size=256 worker.actor.micro_batch_size_per_device_for_update=1\n   ```\n")
    answer = scorer.read_markdown(text)
    assert "reduce-micro-batch" in answer.recommended and answer.first_fix is None


def test_a_restated_current_config_is_not_advice(scorer):
    # hh-020: the engine share the user already runs with, listed in 你现在的配置（...）
    text = ("你现在的配置（per_device_train_batch_size 16、max_length 4000、 vllm_gpu_memory_utilization 0.4）在 8 卡 "
            "H800 上属于比较“满”的状态。\n")
    assert "shrink-colocated-engine" not in scorer.read_markdown(text).recommended


def test_save_per_rank_or_less_often_is_the_save_fix(scorer):
    # nn-001, nn-005
    en = ("1. confirm: `watch -n1 cat /sys/fs/cgroup/memory.current` around the save\n"
          "2. cut the save peak: save only at the end (or less often), save per-rank/sharded instead of a full HF "
          "gather\n")
    assert scorer.read_markdown(en).first_fix == "checkpoint-save-memory"
    zh = ("1. 先改成每个 rank 直接写自己的分片（分布式/分片 checkpoint，不做 DP gather）\n"
          "2. 存得太频繁的话顺手把 `trainer.save_freq` 调大。\n")
    assert scorer.read_markdown(zh).first_fix == "checkpoint-save-memory"


def test_gc_right_after_an_fp8_save_is_the_save_fix(scorer):
    # pp-005
    text = ("Quick question: is your Bridge older than that sync? If so:\n\n```python\n"
            "# right after your checkpoint save call\nimport gc, torch\ngc.collect()\n```\n")
    assert "checkpoint-save-memory" in scorer.read_markdown(text).recommended


def test_a_shard_loaded_memory_mapped_is_the_optimizer_load_fix(scorer):
    # pp-016
    text = ("Fix is to not build that second copy: load the shard memory-mapped,\n```python\n"
            'state = torch.load(path, map_location="cpu", mmap=True, weights_only=False)\n```\n')
    assert scorer.read_markdown(text).first_fix == "memory-efficient-optimizer-load"


def test_reading_the_printed_tf_config_confirms_the_setting(scorer):
    # pp-002, nn-013
    assert scorer.read_markdown(
        "所以先做一件事：看启动日志里打印出来的 TF config（actor 那一份），`recompute_granularity` 是不是 `None`。\n"
    ).first_fix == "confirm-setting-applied"
    assert scorer.read_markdown(
        "1. 先确认：看 init 后 ref worker 的 `log_gpu_memory_usage`，参数是否还在 GPU：\n"
    ).first_fix == "confirm-setting-applied"


def test_the_first_rank_that_throws_is_the_rank_check(scorer):
    # pp-006
    text = "Can you open `train_200.log` and find the first rank that throws — the traceback line will say where.\n"
    assert "find-first-failing-rank" in scorer.read_markdown(text).recommended


def test_prefixed_engine_share_and_two_nodes(scorer):
    # nn-018, nn-012
    text = ("1. 先把 vLLM 占比降下来：\n   ```\n   --vllm_gpu_memory_utilization 0.35\n   ```\n"
            "2. 还不够就上 2 机 16 卡，同样配置 DP 翻倍。\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "shrink-colocated-engine" and "add-gpus" in answer.recommended


def test_a_flag_dropped_to_one_is_a_smaller_micro_batch(scorer):
    # nn-010
    text = ("2. if the rollout still doesn't fit, drop `--micro-batch-size` to 1 so the captured graph buffers are "
            "smaller\n")
    assert "reduce-micro-batch" in scorer.read_markdown(text).recommended
