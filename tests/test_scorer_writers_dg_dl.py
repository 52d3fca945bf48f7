"""How the scorer reads what writers dg / dh (meeting minutes: "Agreed (in order)", "Rejected", "Open questions"),
di / dj (the user's plan graded step by step - "Keep", "Drop", "Change to: ...", "Move later" / 保留 / 删掉 / 改成 /
往后放 - then "Corrected plan:" / "修正后的顺序：") and dk / dl (TODO / FIXME / NOTE / WARNING tags, rejected
options struck through) showed: 120 answers written and labelled blind on 2026-12-06, first read 59.8 / 50.0 / 80.0 %
(verdict / id / violations) on f2a600c.

The classes: a "Corrected plan:" closer is the plan, its first step the first fix; a graded step whose verdict is
"Drop" / "删掉" argues against what it named, one marked "Move later" / "往后放" is not the first step; and fixes named
as these voices name them - DeepSpeed ZeRO-3 (the sharding fix outside Megatron), "drop --micro_train_batch_size from
16 to 8", "micro batch 降下来", "log torch.cuda.mem_get_info()", "记录每个 episode 的 RSS", "confirm ... actually
reach every process", "part-by-part conversion", "--async-ckpt-use-cpu-shm", "cluster.num_nodes=2", "move the split
point later", "lower --gpu-memory-utilization".
"""

from __future__ import annotations


def test_a_corrected_plan_is_the_plan(scorer):
    # dj-011 (writer dj): the graded list names the micro-batch first, "Move later"; the corrected plan leads
    text = ("The usual plan, graded:\n\n1. **Lower `micro_batch_size`.** **Move later.** It works, but it costs "
            "throughput.\n2. **Turn on activation recompute.** **Change to: full recompute, do this first.**\n\n"
            "**Corrected plan:**\n1. Enable full recompute: `model.activations_checkpoint_granularity=full`\n"
            "2. If validation still runs out, lower `model.micro_batch_size`.\n")
    answer = scorer.read_markdown(text)
    assert answer.first_fix == "full-recompute"
    # di-013 (writer di), in Chinese
    text = ("你目前的做法逐条看：\n\n1. **降 micro batch** —— **删掉**：OOM 出在加载阶段。\n\n**修正后的顺序：**\n"
            "1. 先确认 param_offload 真的生效了。\n2. 升级 verl。\n")
    assert scorer.read_markdown(text).first_fix == "confirm-setting-applied"


def test_a_graded_step_marked_drop_argues_against_it(scorer):
    # di-002 / dj-019 (writers di, dj): the verdict after a dash or as a sentence of its own
    for text in ("Grading:\n\n1. **Lower micro-batch / rollout batch and retry** — **Drop.** The failure happens "
                 "before a single training step.\n2. **Set `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`** — "
                 "**Drop.** There is no allocator message anywhere in the log.\n",
                 "1. **Lower the micro-batch.** **Drop.** It dies before the first forward.\n"):
        answer = scorer.read_markdown(text)
        assert "reduce-micro-batch" in answer.avoided and "reduce-micro-batch" not in answer.recommended, text


def test_these_voices_name_their_fixes(scorer):
    cases = [
        # dg-001
        ("1. 先把 ZeRO-3 接回来：actor/critic 用 ZeRO stage 3，把参数、梯度、优化器状态切分到 4 张卡上。",
         "megatron-fsdp"),
        # dh-002
        ("First: drop --micro_train_batch_size from 16 to 8 and keep the global batch.", "reduce-micro-batch"),
        ("1. 先把训练 micro batch 降下来，train_batch_size 保持 128 不变。", "reduce-micro-batch"),  # dg-018
        # dh-007
        ("1. 先按进程记录每个 episode 的 RSS，分出 vLLM 引擎、actor、ref 各一条曲线。", "track-memory-per-step"),
        ("TODO: 1. Log torch.cuda.mem_get_info() before and after every update_weights call.",
         "track-memory-per-step"),  # dl-010
        ("1. First, check that the parallel/process settings in the launch script actually reach every process.",
         "confirm-setting-applied"),  # dg-020
        ("1. First, switch to bounded, part-by-part conversion, never the whole checkpoint at once.",
         "convert-sharded"),  # dg-010
        ("1. First, switch the async save to CPU shared memory: `--async-ckpt-use-cpu-shm`.",
         "checkpoint-save-memory"),  # dg-017
        ("1. 先按文档把第二阶段放到 2 个节点上跑（cluster.num_nodes=2）。", "add-gpus"),  # dh-012
        ("TODO: 1. Move the split point later so stage 0 gets fewer layers.", "rebalance-pipeline-stages"),  # dl-018
        ("TODO 1: give the engine an explicit budget, or lower --gpu-memory-utilization from 0.97.",
         "shrink-colocated-engine"),  # dk-014
        ("1. 先止血：把 --workers 调小重跑。", "reduce-dataloader-workers"),  # dg-013
    ]
    for text, fix in cases:
        assert scorer.read_markdown(text).first_fix == fix, text
