"""How the scorer reads the misreadings that writers av (a memo that weighs options in the order it thought of them
and decides last), aw (myths vs facts) and ax (an answer that is one or two tables with a verdict column) showed:
written 2026-12-05 as the session's final unseen batch, first read 74.2 / 60.0 / 71.7 % (verdict / id / violations)
on 888d417, then learned.

Each answer text is a sentence, row or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: "Myth:" / 常见误解 files what it names as advice against; "What actually works" / 所以应该 /
"So, concretely:" is the plan; a paragraph that drops the direction it weighed ("这个方向我放弃了", "I ruled it out")
argues against what it named before; a sentence opening on a first hypothesis ("My first instinct was ...") weighs
an idea, it does not advise it; a verdict cell that opens on a bare "no" ("no - would not help") argues against its
row.
"""

from __future__ import annotations


def test_a_myth_is_advice_against_and_what_works_is_the_plan(scorer):
    # aw-001, aw-013
    text = ("**❌ Myth: `expandable_segments:True` will give the memory back.**\n"
            "✅ Fact: the tensors are live; the allocator has nothing to return.\n\n"
            "**Myth:** more recompute or `expandable_segments` will cover a 160 MiB shortfall.\n\n"
            "### What actually works\n1. Lower the micro-batch to 1.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch"
    assert "expandable-segments" in answer.avoided and "expandable-segments" not in answer.recommended
    zh = "常见误解：开 expandable_segments 或者减 batch 就能过。\n\n所以应该：先把 micro batch 降到 1。\n"
    assert "expandable-segments" not in scorer.read_markdown(zh).recommended


def test_a_paragraph_that_drops_its_direction_argues_against_it(scorer):
    # av-010
    text = ("**先想到的是碎片。** 4090 上 OOM 时很多人第一反应是设\n"
            "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`。\n"
            "但 PPO 在 24GB 卡上 OOM 通常是真的装不下，碎片最多差个一两 GB，这个方向我放弃了。\n\n"
            "**所以具体来说：**\n1. 如果 actor 那张卡还是 OOM，再加优化器状态卸载到 CPU。\n")
    answer = scorer.read_markdown(text)
    assert "expandable-segments" in answer.avoided and "expandable-segments" not in answer.recommended


def test_a_first_instinct_weighs_an_idea_without_advising_it(scorer):
    # av-003 shape
    answer = scorer.read_markdown("My first instinct was to turn on full recompute. The numbers say otherwise.\n")
    assert "full-recompute" not in answer.recommended


def test_a_verdict_cell_that_opens_on_no_argues_against_its_row(scorer):
    # ax-002, ax-005
    text = ("| # | change | exact setting | verdict |\n|---|---|---|---|\n"
            "| 1 | Lower the micro-batch to 1 | `micro_batch_size: 1` | **do first** |\n"
            "| 2 | Offload optimizer state to CPU | `--optimizer-cpu-offload` | no - makes the host peak worse |\n"
            "| 3 | `expandable_segments` | — | no - would not help, GPU is not the limit |\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch"
    assert {"optimizer-cpu-offload", "expandable-segments"} <= set(answer.avoided)
