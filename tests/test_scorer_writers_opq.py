"""How the scorer reads the misreadings that writers o, p and q (issue 26's first unseen batch) showed.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test).  The classes: a heading that carries its section's label and the first action ("### Do first - ..."); a
comparison table whose verdict column argues against a row; a fix named again in the sentence that argued
against it; a fix said to be the next step; and fixes spelled the way these agents spell them.
"""

from __future__ import annotations

import pytest


def test_a_heading_with_a_label_is_that_section_and_its_first_action(scorer):
    # q-008: "Do first" names the section; the verification verb after the dash is the action, not a "Check" heading
    text = ("### Do first - confirm what the failing ranks actually got\n```bash\n"
            "tr '\\0' '\\n' < /proc/$(pgrep -f pretrain | head -1)/environ | grep PYTORCH_CUDA_ALLOC_CONF\n```\n\n"
            "### Then - set it for B200/B300 (non-FSDP jobs)\n```python\n"
            'executor.env_vars["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"\n```\n')
    assert scorer.read_markdown(text).first_fix == "confirm-setting-applied"


def test_a_verification_heading_that_says_do_this_first_is_the_first_step(scorer):
    # p-009: a numbered heading opening with "Confirm" but saying "(do this first)"
    text = ("## Recommended steps\n\n### 1. Confirm what the failing processes actually see (do this first)\n\n"
            "```python\nimport os; print(os.environ.get(\"PYTORCH_CUDA_ALLOC_CONF\"))\n```\n\n"
            "### 2. Set it for B200/B300\n\n```python\n"
            'executor.env_vars["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"\n```\n')
    assert scorer.read_markdown(text).first_fix == "confirm-setting-applied"


@pytest.mark.parametrize(("source", "table", "fix"), [
    ("p-001", "| 方案 | 优点 | 缺点 | 建议 |\n|---|---|---|---|\n"
              "| 调小 `--sglang-mem-fraction-static` | 只改一个数 | 与报错要求相反，必然继续失败 | ❌ 别这么做 |\n",
     "shrink-colocated-engine"),
    ("p-010", "| Option | Effect on the spike | Cost | Take it? |\n|---|---|---|---|\n"
              "| Raise TP | Splits the vocab dimension | Would also work, but costs ~30% throughput | I wouldn't |\n",
     "increase-tp"),
    ("p-002", "| 选项 | 显存效果 | 吞吐代价 | 我的建议 |\n|---|---|---|---|\n"
              "| 加卡 | — | 成本 | 不需要，这不是容量问题 |\n",
     "add-gpus"),
])
def test_a_table_row_whose_verdict_argues_against_is_not_advice(scorer, source, table, fix):
    answer = scorer.read_markdown("## Alternatives\n\n" + table)
    assert fix not in answer.recommended and fix in answer.avoided, source


def test_a_fix_named_again_in_the_sentence_that_argued_against_it_is_still_argued_against(scorer):
    # p-022: the second "加卡" explains why the first one is not advised
    text = "## 一些建议\n\n不太建议一开始就加卡，因为如果真是泄漏，加卡只是推迟问题出现的时间。\n"
    assert "add-gpus" not in scorer.read_markdown(text).recommended


def test_a_fix_said_to_be_the_next_step_is_not_the_first(scorer):
    # o-008: "lowering gpu_memory_utilization is the second step; first turn on the trainer-side offload"
    text = ("降 gpu_memory_utilization 是第二步。先把训练侧 offload 打开：\n\n"
            "  actor_rollout_ref.actor.megatron.param_offload=True \\\n"
            "  actor_rollout_ref.actor.megatron.optimizer_offload=True \\\n")
    assert scorer.read_markdown(text).first_fix == "offload-trainer-states"


@pytest.mark.parametrize(("source", "text", "fix"), [
    ("o-004", "先把 graph 关掉，确认训练本身放得下：\n  删掉  --cuda-graph-scope attn --external-cuda-graph\n",
     "disable-cuda-graphs"),
    ("o-007", "Log on every rank, every rollout:\n"
              "  torch.cuda.mem_get_info()  before/after release_memory_occupation\n",
     "track-memory-per-step"),
    ("q-007", "**Do first** - prove it's per-restart growth before changing anything:\n", "track-memory-per-step"),
    ("q-005", "**Do first** - chunk the vocabulary entropy (and log-prob) along the sequence.\n", "logits-chunking"),
    ("o-011", "b) run the multi-GPU (distributed) conversion so the weights are sharded over 8 GPUs while merging.\n",
     "convert-sharded"),
    ("o-013", "first find out which memory ran out and on which rank - the screenshot decides it.\n",
     "find-first-failing-rank"),
    ("q-012", "**Do first** - move the optimizer state to CPU:\n", "optimizer-cpu-offload"),
    ("q-001", "**Do first** - bound the tokens per micro-batch:\n", "reduce-micro-batch"),
    ("p-013", "I'd start with **A. Lower the token budget**: e.g. `--max-tokens-per-gpu 16384` → `8192`.\n",
     "reduce-micro-batch"),
    ("b-031", "Rank 0 crashed first and its error is what matters.\n", "find-first-failing-rank"),
    ("e-017", "**把 `ckpt_format` 从 `torch` 改成 `torch_dist`**，用分布式 checkpoint，每个 rank 只写自己的分片：\n\n"
              "```bash\n--ckpt-format torch_dist   # 原来是 --ckpt-format torch\n```\n", "checkpoint-save-memory"),
])
def test_the_fix_is_recognised_as_these_writers_write_it(scorer, source, text, fix):
    assert scorer.read_markdown(text, {"env": {}}).first_fix == fix, source
