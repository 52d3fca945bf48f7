"""How the scorer reads the misreadings that writers aj (ranked options with a score out of ten and a probability),
ak (a keep / change / don't-touch review table, then a flowchart) and al (release notes: Changed / Added / Not changed
(on purpose) / Reverted / Known issues) showed: written 2026-12-05, first read 78.3 / 68.3 / 78.3 % (verdict / id /
violations) on ad1c686 (the same on fb3e4fc), then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a low score ("(1/10)", "（不推荐，1/10）") ranks an option as not worth doing, also line by line
in one paragraph; a table's "keep" cell restates the run and its "change → value" cell is advice; "Not changed (on
purpose)" and 保持不变 advise against; "check which X each worker actually runs with" confirms a setting.
"""

from __future__ import annotations


def test_a_low_score_ranks_an_option_out(scorer):
    # aj-001
    text = ("Ranked options:\n\n"
            "1. (9/10) Check which NCCL_CUMEM_ENABLE each worker actually runs with — p(finds it) ≈ 0.8.\n"
            "2. (1/10) Memory knobs (expandable_segments, smaller micro-batch, more GPUs) — would not help.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "confirm-setting-applied"
    assert {"expandable-segments", "reduce-micro-batch", "add-gpus"} <= set(answer.avoided)


def test_ranked_lines_in_one_paragraph_are_each_their_own_option(scorer):
    # aj-015
    text = "排名：\n\n①（7/10）升级 Megatron-LM 到最新版本\n⑤（不推荐，1/10）调小 micro batch\n"
    answer = scorer.read_markdown(text)
    assert "reduce-micro-batch" in answer.avoided and "reduce-micro-batch" not in answer.recommended


def test_a_keep_cell_restates_the_run_and_a_change_cell_advises(scorer):
    # ak-017, ak-008
    text = ("| setting | yours | keep / change / don't touch | why |\n|---|---|---|---|\n"
            "| trainer.use_expandable_segments | — | change → true (SkyRL with PR #1768) | reserved > request |\n"
            "| optimizer_cpu_offload | false | keep | it fit at step 1 |\n")
    answer = scorer.read_markdown(text)
    assert answer.recommended == ["expandable-segments"]
    text = ("| 配置项 | 当前值 | 保留 / 修改 / 别动 | 原因 |\n|---|---|---|---|\n"
            "| full recompute | — | 修改 → 开 | 激活太大 |\n")
    assert scorer.read_markdown(text).recommended == ["full-recompute"]


def test_not_changed_on_purpose_argues_against(scorer):
    # al-017
    text = ("### Changed\n- Feed the shards straight to training as a blend.\n\n"
            "### Not changed (on purpose)\n- GPU-side knobs (micro-batch, recompute, TP, more GPUs) — the node has no "
            "GPU in this step.\n")
    answer = scorer.read_markdown(text)
    assert "add-gpus" in answer.avoided and "add-gpus" not in answer.recommended
    text = "### 保持不变（有意）\n- 加卡：这一步没有 GPU。\n"
    assert "add-gpus" in scorer.read_markdown(text).avoided
