"""How the scorer reads the misreadings that writers ap (a pasted multi-person chat thread that ends on a consensus),
aq (an engineering ticket: P0 / P1 / P2 / Won't do) and ar (a conclusion-first report: 结论 / 原因 / 下一步 / 风险)
showed: written 2026-12-05, the session's last unseen batch, first read 63.3 / 51.7 / 76.7 % (verdict / id /
violations) on 8eb112d, then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: in a thread of several speakers each turn is discussion and the consensus line is the answer
("@a: ... / @b: ... / Consensus: ..."), while "@你：" alone addresses the reader; "P0" is the first thing to do and
P1-P3 come later; 下一步 advises; a sentence that opens on a condition the user is not in ("If you can get more
GPUs, ...") offers its fix for that situation only; "X not needed" argues against X.
"""

from __future__ import annotations


def test_a_thread_of_speakers_advises_only_through_its_consensus(scorer):
    # ap-005
    text = ("**@霄**：8KB 都分不出来，像碎片？加个 `expandable_segments:True`？\n\n"
            "**@敏**：这不是碎片，是卡已经满了。\n\n"
            "**@霄**：明白了，撤回碎片的说法。\n\n"
            "**结论**：不是碎片；把 micro batch 降到 1。\n")
    answer = scorer.read_markdown(text)
    assert "expandable-segments" not in answer.recommended and answer.first_fix == "reduce-micro-batch"
    text = ("Consensus: turn on full recompute.\n\n@jo: just give it more GPUs?\n\n"
            "@ann: no, lower the micro-batch.\n")
    assert scorer.read_markdown(text).first_fix == "full-recompute"


def test_addressing_the_reader_is_no_thread(scorer):
    # ww-014
    text = "@你：每个 step 记录一次各 rank 主进程的内存。\n\n@你：把曲线和 --save-interval 对齐。\n"
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_p0_is_first_and_p1_later(scorer):
    # aq-011 shape
    text = ("P1 (this week): set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.\n\n"
            "P0 (do now): lower the micro-batch to 1.\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_next_steps_in_a_conclusion_first_report_advise(scorer):
    # ar-004 shape
    text = "**结论：** 爆的是主机内存。\n\n**下一步：**\n1. 把 micro batch 降到 1。\n"
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_a_sentence_opening_on_the_users_other_situation_offers_its_fix_there(scorer):
    # ap-017
    text = ("Agreed plan: lower the micro-batch to 1. If you can get more GPUs, ZeRO can shard the optimizer state "
            "instead.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "add-gpus" not in answer.recommended


def test_not_needed_after_a_fix_argues_against_it(scorer):
    # ap-013
    answer = scorer.read_markdown("Lower the micro-batch to 1; more GPUs not needed.\n")
    assert answer.first_fix == "reduce-micro-batch" and "add-gpus" in answer.avoided
