"""How the scorer reads the misreadings that writers as (a linter-style report: "E101 error ... / fix: ... /
ignore: ..." and a summary), at (Observation / Inference / Action triples and a closing plan) and au (a voice message
through speech-to-text, no punctuation) showed: written 2026-12-05, held unlearned for a session, first read 51.7 /
40.0 / 66.7 % (verdict / id / violations) on ab48544, then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a linter finding's first line states a problem, its "fix:" line advises (for the first line's
setting too when it names none), its "ignore:" / 无需处理 line argues against what the finding names, "(only if ...)"
offers the fix for that case only, and "apply E101's fix first" makes E101's fix first; "Action 2" is not the first
action and "Observation" restates; unpunctuated Chinese speech pauses where a writer would end a sentence; a keep cue
after another name ("把 micro batch 调小 global batch 不变") keeps that name, not the mention.
"""

from __future__ import annotations

LINT = ("Lint: OpenRLHF SFT, 1x A100 80GB\n\n"
        "E101 error [model state]: optimizer state does not fit on a single GPU\n"
        "  fix: offload the optimizer state to the CPU.\n"
        "W102 warning [topology]: single-GPU run cannot shard anything\n"
        "  alternative: add GPUs so ZeRO shards the optimizer state.\n"
        "I201 info: micro_train_batch_size=1, max_len=128\n"
        "  ignore: activations at 128 tokens are tiny; a smaller batch frees nothing.\n\n"
        "Summary: 1 error, 1 warning, 1 info; apply E101's fix first.\n")


def test_a_findings_ignore_line_argues_against_what_it_names(scorer):
    # as-003
    answer = scorer.read_markdown(LINT)
    assert answer.first_fix == "optimizer-cpu-offload"
    assert "add-gpus" in answer.recommended and "reduce-micro-batch" in answer.avoided


def test_the_summary_names_the_first_finding(scorer):
    # as-004 shape: E102's fix comes later although E-codes read in order
    text = ("E102 error [no working SP path]: Ulysses does not shard the sequence\n"
            "  fix: switch to context parallelism (context_parallel_size=8).\n"
            "E101 error [setting]: the setting never reaches the layers\n"
            "  fix: measure memory after every step on one rank.\n\n"
            "Summary: 2 errors; apply E101's fix first.\n")
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_a_fix_line_naming_nothing_acts_on_its_findings_setting(scorer):
    # as-010
    text = ("E101 错误 [激活容量]: 超长样本的激活超过单卡显存\n"
            "  修复: 打开全量重计算 --gradient_checkpointing。\n"
            "W102 警告 [vLLM 占比]: vllm_gpu_memory_utilization=0.3 对这么长的上下文仍然偏大\n"
            "  建议: 降到 0.2，把显存让给训练侧。\n\n"
            "汇总: 1 错误, 1 警告；先应用 E101 的修复。\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "full-recompute" and "shrink-colocated-engine" in answer.recommended


def test_a_finding_opened_only_if_offers_its_fix_for_that_case(scorer):
    # as-006
    text = ("E101 error [host-oom]: Ray's memory monitor killed the worker\n"
            "  fix: measure first. Record per-process RSS after each of the first steps.\n"
            "E102 error (only if RSS climbs every step): host-memory leak\n"
            "  fix: lower the micro-batch to 1.\n"
            "I301 info: PYTORCH_CUDA_ALLOC_CONF=expandable_segments\n"
            "  ignore: GPU-side knobs don't touch host RAM.\n\n"
            "Summary: 2 errors, 1 info; apply E101's fix first.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "track-memory-per-step"
    assert "reduce-micro-batch" not in answer.recommended and "expandable-segments" in answer.avoided


def test_one_code_like_line_is_no_report(scorer):
    text = "E101 error: the optimizer does not fit.\n\nLower the micro-batch to 1.\n"
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_action_two_is_not_the_first_action_and_observations_restate(scorer):
    # at-002
    text = ("**Observation 1:** it crashes in the log-prob pass.\n"
            "**Inference 1:** full-vocabulary logits are the largest allocation.\n"
            "**Action 1:** Lower the log-prob micro-batch, e.g. from 16 to 4.\n\n"
            "**Observation 2:** Ray reports the kill.\n"
            "**Action 2:** Also set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` in the worker env.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "expandable-segments" in answer.recommended


def test_unpunctuated_chinese_speech_pauses_end_sentences(scorer):
    # au-004
    text = ("嗯 你这个尖刺在 loss_function 里面 那基本可以确定是 logits 和 loss 那块的显存 不是权重也不是优化器 "
            "更不是泄漏 然后呢 第一步先把每个 micro batch 的 token 数限住 你开了 dynamic batch 的话就把 "
            "max-tokens-per-gpu 调小 没开就把 micro batch 调小 global batch 不变 还有就是 "
            "别去开 optimizer offload 那个省的是优化器状态 跟这个尖刺没关系\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "optimizer-cpu-offload" in answer.avoided


def test_a_keep_cue_after_another_name_keeps_that_name(scorer):
    # au-004: "global batch 不变" keeps the global batch, the micro batch is lowered
    assert scorer.read_markdown("没开就把 micro batch 调小 global batch 不变\n").first_fix == "reduce-micro-batch"
    # ...while a setting's own value after it is no other name (d-023)
    answer = scorer.read_markdown("Because `expandable_segments:True` is already in your environment, add "
                                  "NCCL_GRAPH_REGISTER=0.\n")
    assert "expandable-segments" not in answer.recommended
