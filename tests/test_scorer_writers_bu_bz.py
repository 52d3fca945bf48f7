"""How the scorer reads what writers bu / bx (a multiple-choice quiz the agent answers itself), bv / by (IF-THEN
rules with "applies to you") and bw / bz (a correction of the agent's own earlier answer) showed: 120 answers
written and labelled blind on 2026-12-06, first read 64.6 / 51.7 / 62.5 % (verdict / id / violations) on 52a12df.

The classes:
- a quiz: the options are the choices, the answer key picks; the chosen option is advice (the first key's first),
  the others argued against, "D. All of the above" picks every option, and the "Not B: ..." lines weigh;
- a correction: what the sentence recalls of the earlier advice ("earlier I told you to ...", "我之前建议...") is
  withdrawn.
"""

from __future__ import annotations


def test_a_quiz_advises_its_answer_key(scorer):
    # bx-002 (writer bx): one option per paragraph, then the key
    text = ("题 1：哪一项应该先做？\n\n"
            "A. 打开激活 CPU offload（activation offloading），把训练阶段每层的激活卸到 CPU 内存。\n\n"
            "B. 把 --vllm_gpu_memory_utilization 从 0.40 降到 0.30，给交接留余量。\n\n"
            "C. 设置 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True。\n\n"
            "答案：A。\n\n不选 C：expandable_segments 只缓解碎片。\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "activation-cpu-offload"
    assert {"shrink-colocated-engine", "expandable-segments"} <= set(answer.avoided)
    assert "expandable-segments" not in answer.recommended


def test_options_on_consecutive_lines_are_read_one_by_one(scorer):
    # bu-010 (writer bu): the options' lines form one paragraph
    text = ("Which change first?\n\n(A) Lower `--micro-batch-size` on all ranks.\n"
            "(B) Turn on `--recompute-granularity full`.\n(C) Lower sglang `mem_fraction_static` fleet-wide.\n\n"
            "**Answer: B.**\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "full-recompute" and "reduce-micro-batch" not in answer.recommended


def test_all_of_the_above_picks_every_option(scorer):
    # bu-016 (writer bu)
    text = ("A. 调小 rollout.gpu_memory_utilization\nB. 调小 micro batch\nC. 以上都可以，按需组合\n\n答案：C\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "shrink-colocated-engine" and "reduce-micro-batch" in answer.recommended


def test_a_correction_withdraws_the_earlier_advice(scorer):
    # bz-016 (writer bz)
    text = ("Correction: earlier I told you to set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and lower "
            "ppo_micro_batch_size_per_gpu. That was the wrong diagnosis.\n\n"
            "Instead, lower actor_rollout_ref.rollout.gpu_memory_utilization to 0.4.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "shrink-colocated-engine"
    assert "expandable-segments" not in answer.recommended and "expandable-segments" in answer.avoided
