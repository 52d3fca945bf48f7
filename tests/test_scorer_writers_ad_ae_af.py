"""How the scorer reads the misreadings that writers ad (a Markdown checklist: "- [x]" done, "- [ ]" to do, struck
rejections, "Start with:" on top), ae (explicit hypotheses: "H1: ... (likely)", "假设二：...（不太可能）") and af (a
long customer-support reply that restates the user's setup) showed: written 2026-12-05, first read 76.4 / 67.3 / 85.5 %
(verdict / id / violations) on 8cff5d1 (76.4 / 67.3 / 87.3 on fc4d159), then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a ticked task-list box is what the run already has, an open one a thing to do; a hypothesis
label names a possible cause, not advice; "Start with:" is the primary; "请勿" is "don't"; a restatement of "your
environment" recommends nothing; a verdict that closes its clause on a colon ("…都不对症：") argues against the fixes
before it.
"""

from __future__ import annotations


def test_a_ticked_box_is_the_run_as_it_is_and_an_open_one_a_thing_to_do(scorer):
    # ad-009
    text = ("先做：在 RM 配置里打开 full activation checkpointing。\n\n"
            "- [x] micro_batch_size: 1\n"
            "- [ ] 同时设 export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True，减少碎片\n"
            "- [ ] ~~加卡~~ —— 96GB 训 7B 足够，先不用\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "full-recompute"
    assert "reduce-micro-batch" not in answer.recommended
    assert "expandable-segments" in answer.recommended and "add-gpus" in answer.avoided


def test_an_open_box_under_no_heading_is_advice(scorer):
    # ad-019 (the open box carries its own "还 OOM" fallback label)
    text = "- [x] EP16、TP1、ETP1，vLLM 0.17.1 时正常\n- [ ] 把 policy.logprob_batch_size 减半\n"
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_a_hypothesis_names_a_cause_not_a_fix(scorer):
    # ae-003, ae-015
    text = ("假设二：主机内存被 OOM killer 杀掉（不太可能）。换成 8 卡以后每张卡分到的负载更小。\n\n"
            "假设一：resume 后优化器状态留在了 GPU 上（可能，因为没有对 optimizer_offload=True 的状态再 offload）。\n")
    assert scorer.read_markdown(text).recommended == []
    text = "H2: a GPU OOM that Ray reports as a task failure (ruled out: more nodes would not change it).\n"
    assert scorer.read_markdown(text).recommended == []


def test_start_with_is_the_primary(scorer):
    # ad-004 / ad-014 shape: the checklist's top line
    text = ("Start with: lower the micro-batch to 1.\n\n"
            "- [ ] Then turn on full recompute if the step still OOMs\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_please_do_not_argues_against(scorer):
    # af-013
    text = "**重要：**请勿增加 GPU 来处理这个问题。\n"
    answer = scorer.read_markdown(text)
    assert "add-gpus" in answer.avoided and "add-gpus" not in answer.recommended


def test_restating_the_users_environment_recommends_nothing(scorer):
    # af-009
    text = ("我们先整理一下您的环境：\n\n"
            "- 重计算：full recompute（uniform，1 层）；\n"
            "- batch：dynamic batch，`--max-tokens-per-gpu 2048`；\n")
    assert scorer.read_markdown(text).recommended == []


def test_a_verdict_that_closes_its_clause_on_a_colon_argues_against(scorer):
    # ae-015
    text = "减小 micro-batch 或者加卡都不对症：问题不是容量，而是本该在 CPU 上的状态被留在了 GPU 上。\n"
    answer = scorer.read_markdown(text)
    assert {"reduce-micro-batch", "add-gpus"} <= set(answer.avoided) and not answer.recommended


def test_spellings_from_the_batch(scorer):
    # ad-004, ae-008
    assert scorer.read_markdown("先做：把 distributed.tp_size 从 4 提到 8。\n").first_fix == "increase-tp"
    text = "Action:\n\n```diff\n- pipeline_model_parallel_size=1,\n+ pipeline_model_parallel_size=2,\n```\n"
    assert scorer.read_markdown(text).first_fix == "increase-pp"
