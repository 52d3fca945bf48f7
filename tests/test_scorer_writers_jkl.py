"""How the scorer reads the misreadings that writers j, k and l (issue 26) showed, one test per class.

Each answer text is a sentence or block from a real labelled answer (benchmarks/answers/<id>.yaml, named in the
test); the scenario inputs are the ones that answer was written for, cut to the settings that matter.  The
scorer is the shipped one (knowledge/fixes.yaml and zh/fixes.yaml recognisers, grading.yaml), because these
classes are about what the knowledge base recognises as well as how an answer is read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.score import Scorer  # noqa: E402

EXPANDABLE_ON = {"env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}


@pytest.fixture(scope="module")
def scorer() -> Scorer:
    return Scorer.from_kb()


# -- a setting the run already has is not a new recommendation -------------------------------------------------

def test_prose_about_a_setting_the_run_already_has_is_not_advice(scorer):
    # b-019: a recap of what the user runs, written as the setting itself
    text = "- tried TP1/EP8 and TP2/EP8, MBS 4 and MBS 2, with `expandable_segments:True`\n"
    assert "expandable-segments" not in scorer.read_markdown(text, EXPANDABLE_ON).recommended
    # without the inputs saying so, the same words are all the scorer has to go on
    assert "expandable-segments" in scorer.read_markdown(text, {"env": {}}).recommended


def test_an_export_in_prose_is_a_command_even_when_the_run_has_the_value(scorer):
    # c-027: set after CUDA initialised, the fix is exporting it where it takes effect
    text = "改法：在启动命令里先 `export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` 再 `torchrun ...`。\n"
    assert scorer.read_markdown(text, EXPANDABLE_ON).first_fix == "expandable-segments"


# -- several flags in one block: the fix is the setting whose value changes -------------------------------------

def test_a_parallel_size_written_lower_is_not_its_increase(scorer):
    # k-009: at TP8 PP4, "TP4 PP8" is a pipeline increase that keeps 32 GPUs, not a TP increase
    text = ("**Option A — go to PP8 (I'd start here).** On 32 GPUs that means TP4 PP8:\n\n"
            "```bash\n--tensor-model-parallel-size 4 --pipeline-model-parallel-size 8\n```\n")
    inputs = {"config": {"model": {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 4}}}
    answer = scorer.read_markdown(text, inputs)
    assert answer.first_fix == "increase-pp"
    assert "increase-tp" not in answer.recommended


def test_a_companion_written_off_beside_the_fix_is_part_of_the_fix(scorer):
    # k-020: moe_pad_expert_input_to_capacity: false next to a capacity factor is token dropping, not against it
    text = ("## 方案一（我会先试这个）：限制每个 expert 的 token 数\n\n```yaml\nmodel:\n"
            "  moe_expert_capacity_factor: 1.25\n  moe_token_drop_policy: probs\n"
            "  moe_pad_expert_input_to_capacity: false\n```\n\n"
            "## 方案二：把整个 MoE 层纳入选择性重计算\n\n```yaml\nmodel:\n  recompute_granularity: selective\n"
            "  recompute_modules: [moe]\n```\n")
    answer = scorer.read_markdown(text, {"config": {"model": {"recompute_granularity": "selective"}}})
    assert answer.first_fix == "moe-token-drop"
    assert "moe-token-drop" not in answer.avoided


def test_a_block_that_keeps_the_run_s_setting_beside_the_new_line_recommends_the_new_line(scorer):
    # k-014 / l-004: the export line the container already has, then the one the assert asks for
    block = "```bash\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\nexport NCCL_GRAPH_REGISTER=0\n```\n"
    for lead in ("## 推荐修复\n\n保留 expandable segments，启动前加一行：\n\n",
                 "解决：启动前（torchrun / srun 之前）加一行，expandable segments 可以保留：\n"):
        answer = scorer.read_markdown(lead + block, EXPANDABLE_ON)
        assert answer.first_fix == "nccl-graph-register-off", lead
        assert "expandable-segments" not in answer.recommended, lead


def test_keeping_the_setting_does_not_cover_a_changed_value(scorer):
    # e-002: "you already have expandable_segments" and then a new allocator config: that is advice
    text = ("Even though you already have `expandable_segments:True`, the allocator can still hold on to freed "
            "blocks. I'd extend the allocator config:\n\n```bash\n"
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,garbage_collection_threshold:0.6\n```\n")
    assert scorer.read_markdown(text, EXPANDABLE_ON).first_fix == "expandable-segments"


def test_a_comment_saying_keep_it_keeps_the_setting(scorer):
    # k-003: "# keep it" on the export line of a setting the run has
    text = ("## Recommended fix\n\n```python\ncfg.train.micro_batch_size = 1          # keep GBS\n```\n```bash\n"
            "export NCCL_GRAPH_REGISTER=0\n"
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True   # keep it\n```\n")
    answer = scorer.read_markdown(text, {**EXPANDABLE_ON, "overrides": ["train.micro_batch_size=2"]})
    assert answer.first_fix == "reduce-micro-batch"
    assert "expandable-segments" not in answer.recommended


@pytest.mark.parametrize("text", [
    # j-002: what the user tried, reported as having changed nothing
    "That's graph memory capacity, not fragmentation — which is why MBS 2 vs 4 and expandable segments changed nothing.",
    # j-005: a verdict after the fix, and what it does not touch
    "Smaller MBS / expandable segments: no — they don't touch NCCL multicast memory.",
])
def test_a_fix_said_to_change_nothing_is_not_advice(scorer, text):
    answer = scorer.read_markdown(text, {"env": {}})
    assert "expandable-segments" not in answer.recommended
    assert "expandable-segments" in answer.avoided


def test_can_not_use_in_chinese_argues_against(scorer):
    # l-014: layer-wise offload named to say PP=4 cannot use it, inside the fine-grained option
    text = ("**方案一：细粒度激活 offload**。PP=4 用不了层级的 `cpu_offloading`（只支持 PP=1，而且和 CUDA Graph 不兼容），"
            "但细粒度 offload 支持 PP>1，把专家那部分的输入卸到 CPU：\n\n```\n"
            "model.fine_grained_activation_offloading=true\nmodel.offload_modules=[expert_fc1,moe_act]\n```\n")
    answer = scorer.read_markdown(text, {"config": {"model": {"pipeline_model_parallel_size": 4}}})
    assert answer.first_fix == "fine-grained-activation-offload"
    assert "activation-cpu-offload" not in answer.recommended
