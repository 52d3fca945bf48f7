"""How the scorer reads what writers ca / cd (the user's config reprinted with CHANGE / KEEP / DO NOT / CHECK
comments), cb / ce (a per-GPU memory ledger with a cut column, then "Plan:") and cf / cg (a numbered social thread)
showed: 120 answers written and labelled blind on 2026-12-06 as the session's last unseen batch, first read
65.9 / 51.7 / 89.2 % (verdict / id / violations) on 6f009f4.

The class learned: a comment at the end of a config line labels that line - "# KEEP" / "# 保持" / "# CHECK" restate
it, "# DO NOT lower this" argues against it; "# keep GBS" keeps another setting, not the line's.
"""

from __future__ import annotations


def test_a_line_labelled_keep_restates_the_run(scorer):
    # cd-020 (writer cd): the allocator setting is kept as it is, the change is elsewhere
    text = ("```bash\nPYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \\\\  # 保持\n"
            "  --context-parallel-size 2 \\\\  # 改：新增\n```\n")
    answer = scorer.read_markdown(text)
    assert "expandable-segments" not in answer.recommended and answer.first_fix == "increase-cp"


def test_a_line_labelled_do_not_argues_against_it(scorer):
    # ca-005 (writer ca)
    text = ("```python\nrecipe.data.micro_batch_size = 1  # DO NOT lower this or shrink the model\n"
            "recipe.checkpoint.save_optimizer = False  # CHANGE: the states are saved anyway\n```\n")
    answer = scorer.read_markdown(text)
    assert "reduce-micro-batch" in answer.avoided and "reduce-micro-batch" not in answer.recommended


def test_keep_naming_another_setting_keeps_the_line(scorer):
    # k-003 (writer k): "keep GBS" is about the global batch, the line lowers the micro-batch
    text = "```python\ncfg.train.micro_batch_size = 1          # keep GBS, more grad-accum steps\n```\n"
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"
