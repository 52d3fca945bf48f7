"""How the scorer reads the misreadings that writers qq (an agent answering in notebook cells, its advice in
comments and commented-out lines), rr (a decision tree with a verdict table and a closing "My pick") and ss (a
maintainer replying inline in the issue thread) showed: written 2026-12-06, first read 81.7 / 70.0 / 86.7 %
(verdict / id / violations) on be81532, then learned.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a comment line labels the code after it ("# not this - ...", "# cell 3 —— 不要：", "# step 1:")
while commented-out code is no label; "My pick:" closes a tree as its primary; a verdict cell "✅ 推荐，先做" picks its
row; 用不着 before a fix argues against it; and spellings no recogniser knew (a per-GPU token cap 降到 12k,
save_contents: ['model'], memory recorded after each init/destroy cycle, 打点 after the offload, 去掉强制 piecewise
CUDA graph).
"""

from __future__ import annotations


def test_a_comment_label_files_the_commented_out_lines_after_it(scorer):
    # qq-019: the active fix is an upgrade (no fix id); the lines under "# not this" are advice against
    text = ("```bash\n"
            "# fix: upgrade TE (or keep userbuffers alive across in-process restarts instead of re-initializing them)\n"
            'pip install --upgrade "transformer_engine[pytorch]>=2.3"\n\n'
            "# not this - a growing cuBLAS workspace isn't fragmentation or activations:\n"
            "# export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
            "# --micro-batch-size 1\n```\n")
    answer = scorer.read_markdown(text)
    assert {"expandable-segments", "reduce-micro-batch"} <= set(answer.avoided) and not answer.recommended


def test_a_chinese_cell_label_files_its_cell(scorer):
    # qq-001
    text = ("```bash\n# cell 3 —— 不要：下面这些只改 PyTorch 分配器管的显存，对 NVLS multicast 句柄没有任何作用\n"
            "# --micro-batch-size 1\n# export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n"
            "# --recompute-granularity selective\n```\n")
    answer = scorer.read_markdown(text)
    assert {"reduce-micro-batch", "expandable-segments", "selective-recompute"} <= set(answer.avoided)


def test_commented_out_code_is_no_label(scorer):
    # a YAML key in a comment ("# recompute_granularity: full") is code, not a heading for what follows
    text = "```yaml\n# recompute_granularity: full\nmicro_batch_size: 1\n```\n"
    assert "reduce-micro-batch" in scorer.read_markdown(text).recommended


def test_a_step_one_comment_makes_its_cell_the_first_step(scorer):
    # qq-019
    text = ("```python\n# step 1: record memory after each destroy_ub() / initialize_ub() cycle\nimport torch\n```\n\n"
            "```bash\n# fix: upgrade TE\npip install --upgrade transformer_engine\n```\n")
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_recording_after_the_offload_checks_it_happened(scorer):
    # qq-006
    text = "```python\n# 第 1 步（先做这个）：在 actor offload 之后、vLLM wake_up 之前打点\nimport torch\n```\n"
    assert scorer.read_markdown(text).first_fix == "confirm-setting-applied"


def test_my_pick_closes_a_decision_tree_as_its_primary(scorer):
    # rr-012: the tree opens on a diagnostic branch; "My pick" says what to do first
    text = ("## Start here\n\n```\nOOM during save_checkpoint\n │\n"
            " └─ Which rank fails first? → if it's always rank 0, it's the gather-to-one-rank path\n```\n\n"
            "**My pick:** don't wait on the diagnosis — set `save_contents: ['model']` now, since it shrinks the save "
            "in both the host and the GPU case; then look at which rank and which kind of error it was.\n")
    assert scorer.read_markdown(text).first_fix == "checkpoint-save-memory"


def test_a_do_first_verdict_cell_picks_its_row(scorer):
    # rr-015
    text = ("| 方案 | 省什么 | 代价 | 结论 |\n|---|---|---|---|\n"
            "| `ppo_max_token_len_per_gpu` / `log_prob_max_token_len_per_gpu` 降到 12k 左右 | 每次前向的 token 数减半 "
            "| 多几次前向 | ✅ 推荐，先做 |\n"
            "| full recompute（actor 和 critic） | 每层只留输入 | 多约 30% 计算 | ✅ 推荐 |\n")
    assert scorer.read_markdown(text).first_fix == "reduce-micro-batch"


def test_yong_bu_zhao_before_a_fix_argues_against_it(scorer):
    # ss-007, qq-013
    text = "补充一句：这不是碎片，expandable_segments 帮不上；也用不着为这个加卡。\n"
    answer = scorer.read_markdown(text)
    assert "add-gpus" in answer.avoided and "add-gpus" not in answer.recommended


def test_removing_the_forced_piecewise_graph_disables_cuda_graphs(scorer):
    # qq-001
    text = "# cell 1 —— 先做这个：去掉强制 piecewise CUDA graph（miles 在 colocate 下默认就是关的）\n"
    assert "disable-cuda-graphs" in scorer.read_markdown(text).recommended


def test_a_not_yet_before_a_first_step_lead_leaves_the_block_to_the_step(scorer):
    # t-014: "先不要改配置" puts off another change; "先搞清楚…：" leads the block
    text = ("**先不要改配置**，先搞清楚是哪个进程、在哪个阶段涨的：\n\n```bash\n# 每个训练 step 记录一次各进程的 RSS\n"
            "while true; do date; ps -eo pid,rss,cmd --sort=-rss | head -15; sleep 30; done > rss.log\n```\n")
    assert scorer.read_markdown(text).first_fix == "track-memory-per-step"


def test_the_name_of_a_checkpoint_format_in_a_grep_chooses_nothing(scorer):
    # qq-016: dp_reshardable is the log line the command looks for
    text = ('```bash\n# 先做这个：找第一个报错的 rank\n'
            'grep -h -A60 "Storing distributed optimizer sharded state of type dp_reshardable" logs/*.log\n```\n')
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "find-first-failing-rank" and "checkpoint-save-memory" not in answer.recommended
