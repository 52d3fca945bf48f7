"""How the scorer reads what writers bi / bl (a "5 whys" chain, then the fix), bj / bm (a "what-if" simulation of
each option, then "Pick:") and bk / bn (Socratic self-questioning) showed: 120 answers written and labelled blind on
2026-12-06, first read 67.6 / 61.7 / 80.0 % (verdict / id / violations) on 7fbed23.

The classes:
- a question the answer asks itself on a line of its own ("## 加 TP 能解决吗？") files nothing by its own words; the
  paragraph under it answers it (yes advises, no argues against, anything else weighs);
- a simulated option ("If you set expandable_segments:True -> same peak, still OOM.") weighs the change before its
  arrow and argues against it when its outcome fails, in a list or in a table headed "If you ..." / "如果你……";
- "Pick:" / "选：" after such options is where the advice starts, as "So:" is after a story.
"""

from __future__ import annotations


def test_a_question_heading_is_answered_by_its_section(scorer):
    # bk-019 (writer bk): the heading asks about TP; the reply only partly agrees, the plan is the chunking below
    text = ("## 哪个张量在占显存？\n\n是 logprobs 前的 logits：`(bsz, seq_len, vocab_size)` 一次性物化。\n\n"
            "## 加 TP 能解决吗？\n\n能缓解，但只是把词表维切成 vocab/TP；序列维一点没少，序列再长一倍就又回来了。\n\n"
            "## 那沿哪一维切更划算？\n\n沿序列维分块：\n\n```yaml\ntrainer:\n  logprobs_chunk_size: 1024\n```\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "logits-chunking"


def test_a_question_answered_no_argues_against_what_it_named(scorer):
    text = ("**Would expandable_segments help?**\n\nNo - the tensors are alive, the allocator cannot release them.\n\n"
            "Lower the micro-batch to 1 first.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "expandable-segments" in answer.avoided


def test_a_simulated_option_that_fails_argues_against_it(scorer):
    # bj-003 (writer bj): the options are weighed line by line, the pick comes last
    text = ("- If you lower micro-batch -> already 1 at this length, no room.\n"
            "- If you set `expandable_segments:True` -> same peak, still OOM.\n"
            "- If you **add full recompute** -> fits, cost: ~30% slower; overkill before you've tried the above.\n\n"
            "Pick: bump `--context-parallel-size` to 2x what you have now and relaunch.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "increase-cp"
    assert {"reduce-micro-batch", "expandable-segments"} <= set(answer.avoided)
    assert "full-recompute" not in answer.recommended


def test_a_what_if_table_weighs_its_rows(scorer):
    # bm-001 (writer bm): the first column is headed "如果你……"; the row's outcome says it cannot hold
    text = ("| 如果你…… | 主机内存走势 | 能不能撑住 | 代价 |\n|---|---|---|---|\n"
            "| 调小 micro batch | 仍然每小时线性上涨 | 不能，两天后照样被杀 | 吞吐下降，白改 |\n"
            "| 开 full recompute | 同上，只动显存 | 不能 | 每步多约 30% 计算 |\n\n"
            "选：先确认再动手，按步记录每个 Ray 进程的 RSS。\n")
    answer = scorer.read_markdown(text)
    assert "reduce-micro-batch" not in answer.recommended and "full-recompute" not in answer.recommended


def test_a_value_arrow_is_no_simulated_option(scorer):
    # rr-017 (writer rr): "0.6 → 0.5" changes a value, the row still advises it
    text = ("| Option | Saves | Verdict |\n|---|---|---|\n"
            "| policy.generation.vllm_cfg.gpu_memory_utilization 0.6 → 0.5 | ~8 GB per GPU | ✅ try first |\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "shrink-colocated-engine"
