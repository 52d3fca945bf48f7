"""How the scorer reads the misreadings that writers am (a bilingual engineer: Chinese body, English headings), an
(documentation style: GitHub alert blocks "> [!TIP]" / "> [!CAUTION]" and collapsed "<details>" sections) and ao (an
interviewing agent: questions first, advice per answer, then "My default if you can't check: ...") showed: written
2026-12-05, the session's final unseen batch, first read 53.3 / 30.0 / 81.7 % (verdict / id / violations) on
1ec38c0 (the same on fb3e4fc), then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a GitHub alert is the answer's own call-out, filed by its type (a tip advises, a caution advises
against, a note is prose); a collapsed section is filed by its summary; "My default if you can't check:" (如果没法确认，
我的默认做法：) is the first step, not a condition; "X only if ..." right after a fix makes it a later step; "don't
apply" argues against.
"""

from __future__ import annotations


def test_a_github_alert_is_the_answers_own_call_out(scorer):
    # an-001
    text = ("> [!TIP]\n> **Do this first:** save the checkpoint with the memory-efficient path: "
            "`--async-save` off and `--ckpt-fully-parallel-save`.\n\n"
            "> [!CAUTION]\n> GPU-side knobs will not help here: a smaller micro-batch or activation offload "
            "don't touch host RAM, and optimizer CPU offload would make it worse.\n")
    answer = scorer.read_markdown(text)
    assert {"reduce-micro-batch", "optimizer-cpu-offload"} <= set(answer.avoided)
    assert not {"reduce-micro-batch", "optimizer-cpu-offload"} & set(answer.recommended)
    assert scorer.read_markdown("> [!TIP]\n> Lower the micro-batch to 1.\n").first_fix == "reduce-micro-batch"


def test_someone_elses_quote_still_advises_nothing(scorer):
    assert scorer.read_markdown("> I already lowered the micro-batch to 1 and it still OOMs.\n").recommended == []


def test_a_collapsed_section_is_filed_by_its_summary(scorer):
    # an-001
    text = ("<details><summary>Why this happens</summary>\n\n"
            "- Optimizer save stages the fp32 master weights through host memory.\n\n</details>\n\n"
            "Lower the micro-batch to 1.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "reduce-micro-batch" and "optimizer-cpu-offload" not in answer.recommended


def test_the_default_when_the_user_cannot_check_is_the_first_step(scorer):
    # ao-003
    text = ("- **If you have `--partitions`** → run the partitioned preprocessing.\n"
            "- **If RAM still runs out** → add more GPUs.\n\n"
            "**My default if you can't check:** rerun each chunk with `--partitions 4` and the mmap format.\n")
    assert scorer.read_markdown(text).first_fix == "shard-preprocessing"
    text = "如果没法确认，我的默认做法：先把 micro batch 降到 1。\n"
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_only_if_right_after_a_fix_makes_it_a_later_step(scorer):
    # ao-015
    text = "Move to a TE build with the fix; turn CUDA graphs off only if the narrower capture still fails.\n"
    answer = scorer.read_markdown(text)
    assert answer.first_fix is None and "disable-cuda-graphs" in answer.recommended


def test_dont_apply_argues_against(scorer):
    # am-013
    text = "Allocator settings, micro-batch or optimizer/activation offload don't apply to a conversion script.\n"
    answer = scorer.read_markdown(text)
    assert not answer.recommended
