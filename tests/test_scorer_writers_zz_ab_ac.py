"""How the scorer reads the misreadings that writers zz (a FAQ page), ab (a code reviewer's inline comments) and ac
(slide-deck bullets: What happened / Why / Options / Decision / backup slide) showed: written 2026-12-06, first read
73.3 / 60.0 / 78.3 % (verdict / id / violations) on 928c2f5 (70.0 / 56.7 / 78.3 on fc4d159), then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a label whose whole value is a short verdict ("加卡：不做") argues against it; "Not doing:" /
不做 / 已排除 / 不对症 advise against; "X → no" closes against X; a Decision / 决定 slide is the primary; a list in
parentheses under a noun that "no" denies ("no memory knobs (a, b, c)"); AReaL's optimizer_dtype=bfloat16.
"""

from __future__ import annotations


def test_a_label_whose_value_is_only_a_verdict_argues_against_it(scorer):
    # ac-015
    text = "## 备用页 已排除\n- 加卡：不做\n"
    assert "add-gpus" in scorer.read_markdown(text).avoided
    assert "add-gpus" in scorer.read_markdown("- More GPUs: no\n").avoided


def test_an_arrow_to_no_closes_against_what_it_follows(scorer):
    # ac-017
    text = "- Rollout gpu_memory_utilization ↓ → no (GPU-side)\n"
    answer = scorer.read_markdown(text)
    assert "shrink-colocated-engine" in answer.avoided and not answer.recommended


def test_a_decision_slide_is_the_primary(scorer):
    # ac-007
    text = ("## 第3页 可选方案\n- 重新划分流水线（stage 0 少放层）\n\n"
            "## 第4页 决定\n1. 先找第一个报错的 rank，拿到它的 traceback\n")
    assert scorer.read_markdown(text).first_fix == "find-first-failing-rank"


def test_a_list_under_a_denied_noun_is_advice_against_each_item(scorer):
    # ac-005
    text = "- No more GPU memory; no memory knobs (expandable_segments, smaller micro-batch, more GPUs)\n"
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "reduce-micro-batch", "add-gpus"} <= set(answer.avoided)
    assert not answer.recommended


def test_a_verdict_cell_that_says_it_misses_the_cause_argues_against_its_row(scorer):
    # ac-016
    text = ("| 方案 | + | − |\n|---|---|---|\n"
            "| `+actor.optimizer_dtype=bfloat16` | + 回到旧行为 | − 放弃 fp32 master |\n"
            "| 降 micro batch / expandable_segments | − 不对症 | |\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "precision-aware-optimizer" and "expandable-segments" in answer.avoided


def test_per_step_instrumentation_and_a_variable_reaching_the_process_in_zh(scorer):
    # ab-003, zz-013
    assert scorer.read_markdown("【必须】先加一段每步埋点，区分到底是哪一类在涨，再决定怎么修。\n").first_fix == \
        "track-memory-per-step"
    assert scorer.read_markdown("先确认这个变量有没有真正到达 B200/B300 上的训练进程，没有就补上。\n").first_fix == \
        "confirm-setting-applied"
